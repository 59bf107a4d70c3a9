/* accpy CUDA host runtime: what a CUDA C package's host launcher calls to move data and check
 * its launches (the package is one .cu file compiled by nvcc).
 *
 * Guarantees:
 *   - the device is chosen once per library, on first use, by ACCPY_CUDA_DEVICE (an index,
 *     default 0);
 *   - every failure returns nonzero / NULL with the package's error set (accpy_set_error):
 *     what was being done, the CUDA error's name and its description; a machine without an
 *     NVIDIA driver or device says so;
 *   - a launch is checked twice: its configuration (cudaGetLastError right after
 *     `kernel<<<grid, block, shmem>>>(...)`) and its execution (cudaDeviceSynchronize); a device
 *     entry's launch on the caller's stream only the first time (accpy_cuda_enqueued: no wait).
 *
 * Include after native/accpy_runtime.h.
 */
#ifndef ACCPY_CUDA_H
#define ACCPY_CUDA_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>

#define ACCPY_CUDA_FN __attribute__((unused)) static inline

/* 0 when `err` is cudaSuccess, else 1 with the error set: `what` failed, the error's name and text. */
ACCPY_CUDA_FN int accpy_cuda_check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return 0;
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
        accpy_set_error("%s failed: %s (%s): this machine has no usable NVIDIA GPU and driver (the package's CUDA "
                        "kernels need one; its OpenCL build runs elsewhere)", what, cudaGetErrorName(err),
                        cudaGetErrorString(err));
    else
        accpy_set_error("%s failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
    return 1;
}

/* The device index that ACCPY_CUDA_DEVICE names (0 when unset); -1 with the error set. */
ACCPY_CUDA_FN int accpy_cuda_device_choice(void) {
    const char* text = getenv("ACCPY_CUDA_DEVICE");
    char* end;
    long index;
    if (!text || !*text) return 0;
    index = strtol(text, &end, 10);
    if (end == text || *end != '\0' || index < 0 || index > 1000) {
        accpy_set_error("ACCPY_CUDA_DEVICE='%s' is not a device index (0, 1, ...)", text);
        return -1;
    }
    return (int)index;
}

/* Select the chosen device on this thread (the CUDA runtime's current device is per thread); 0 ok. */
ACCPY_CUDA_FN int accpy_cuda_ready(void) {
    static __thread int selected = 0;
    int count = 0, device;
    if (selected) return 0;
    if ((device = accpy_cuda_device_choice()) < 0) return 1;
    if (accpy_cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount")) return 1;
    if (device >= count) {
        accpy_set_error("ACCPY_CUDA_DEVICE=%d names a CUDA device this machine does not have (it has %d)", device,
                        count);
        return 1;
    }
    if (accpy_cuda_check(cudaSetDevice(device), "cudaSetDevice")) return 1;
    selected = 1;
    return 0;
}

/* `bytes` of device memory; NULL with the error set. */
ACCPY_CUDA_FN void* accpy_cuda_alloc(size_t bytes) {
    void* p = NULL;
    char what[96];
    if (accpy_cuda_ready()) return NULL;
    snprintf(what, sizeof what, "cudaMalloc of %zu bytes", bytes);
    /* a zero-size allocation returns NULL in CUDA; an empty array still gets a handle */
    if (accpy_cuda_check(cudaMalloc(&p, bytes ? bytes : 1), what)) return NULL;
    return p;
}

/* Copy `bytes` from the host to device memory `dev`; 0 ok. */
ACCPY_CUDA_FN int accpy_cuda_write(void* dev, const void* host, size_t bytes) {
    char what[96];
    if (!bytes) return 0;
    if (accpy_cuda_ready()) return 1;
    snprintf(what, sizeof what, "cudaMemcpy of %zu bytes to the device", bytes);
    return accpy_cuda_check(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), what);
}

/* Copy `bytes` from device memory `dev` to the host; 0 ok. */
ACCPY_CUDA_FN int accpy_cuda_read(void* dev, void* host, size_t bytes) {
    char what[96];
    if (!bytes) return 0;
    if (accpy_cuda_ready()) return 1;
    snprintf(what, sizeof what, "cudaMemcpy of %zu bytes from the device", bytes);
    return accpy_cuda_check(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), what);
}

ACCPY_CUDA_FN void accpy_cuda_free(void* dev) {
    if (dev) cudaFree(dev);
}

/* After `kernel<<<grid, block, shmem>>>(...)`: its configuration and its run; 0 ok, else the error
 * set, naming the kernel and its grid and block. */
ACCPY_CUDA_FN int accpy_cuda_launched(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes) {
    char what[256];
    snprintf(what, sizeof what, "the launch of kernel '%s' (grid %u x %u x %u, block %u x %u x %u, %zu bytes of "
             "dynamic shared memory)", kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
    if (accpy_cuda_check(cudaGetLastError(), what)) return 1;
    snprintf(what, sizeof what, "the run of kernel '%s' (cudaDeviceSynchronize)", kernel);
    return accpy_cuda_check(cudaDeviceSynchronize(), what);
}

/* After `kernel<<<grid, block, shmem, stream>>>(...)` in a device entry: its configuration only
 * (cudaGetLastError), no wait: the stream's order makes the caller's next work on it see the
 * kernel's writes; an error of its run surfaces at the caller's next synchronisation. 0 ok, else
 * the error set, naming the kernel and its grid and block. */
ACCPY_CUDA_FN int accpy_cuda_enqueued(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes) {
    char what[256];
    snprintf(what, sizeof what, "the launch of kernel '%s' on the caller's stream (grid %u x %u x %u, block %u x %u "
             "x %u, %zu bytes of dynamic shared memory)", kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z,
             shared_bytes);
    return accpy_cuda_check(cudaGetLastError(), what);
}

/* Device facts for checks: max threads per block, shared memory per block (bytes); 0 ok. */
ACCPY_CUDA_FN int accpy_cuda_device_limits(size_t* max_block, size_t* shared_bytes) {
    int device = 0, threads = 0, shared = 0;
    if (accpy_cuda_ready() || accpy_cuda_check(cudaGetDevice(&device), "cudaGetDevice")) return 1;
    if (accpy_cuda_check(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerBlock, device),
                         "cudaDeviceGetAttribute(MaxThreadsPerBlock)") ||
        accpy_cuda_check(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlock, device),
                         "cudaDeviceGetAttribute(MaxSharedMemoryPerBlock)"))
        return 1;
    *max_block = (size_t)threads;
    *shared_bytes = (size_t)shared;
    return 0;
}

#endif /* ACCPY_CUDA_H */
