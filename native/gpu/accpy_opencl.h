/* accpy OpenCL host runtime: what a package's host launcher calls to build, feed and launch
 * its OpenCL C kernels.
 *
 * Guarantees:
 *   - no build-time dependency on OpenCL: the runtime (libOpenCL.so.1, the ICD loader) is
 *     opened with dlopen on first use, and the few entry points used are declared here with
 *     the types the OpenCL specification gives them;
 *   - one device per library for the life of the process, chosen by ACCPY_OPENCL_DEVICE
 *     ("<platform>:<device>", default "0:0"), with one context and one in-order queue;
 *   - a program is built once per (context, device, source, options) and cached (a small table
 *     under a mutex); each thread gets its own cl_kernel of it, because clSetKernelArg on one
 *     cl_kernel from two threads races (kernels of threads that ended stay in the table);
 *   - one program per package: each kernel of a package registers its source when the library
 *     is loaded (accpy_cl_register, from a constructor), and the first launch builds all of
 *     them as one program (accpy_cl_package_kernel): one build per process for the library's
 *     own context, and one per (context, device) a caller's queue brings (accpy_cl_queue_kernel:
 *     the device entries, which run on the caller's queue and buffers, without copies);
 *   - every failure returns nonzero / NULL with the package's error set (accpy_set_error):
 *     the OpenCL error's name, what was asked, and for a build failure the kernel and line of
 *     each line the compiler names, then the compiler's log.
 *
 * Include after native/accpy_runtime.h. Link with -ldl on glibc older than 2.34.
 */
#ifndef ACCPY_OPENCL_H
#define ACCPY_OPENCL_H

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The runtime's functions: static (each package its own copy), inline so that a unit which does
 * not call one does not compile it. */
#define ACCPY_CL_FN __attribute__((unused)) static inline

/* ---- the OpenCL types and constants used (values from the OpenCL 3.0 headers) ------------ */
typedef int32_t accpy_cl_int;
typedef uint32_t accpy_cl_uint;
typedef uint64_t accpy_cl_ulong;
typedef struct _cl_platform_id* accpy_cl_platform_id;
typedef struct _cl_device_id* accpy_cl_device_id;
typedef struct _cl_context* accpy_cl_context;
typedef struct _cl_command_queue* accpy_cl_command_queue;
typedef struct _cl_mem* accpy_cl_mem;
typedef struct _cl_program* accpy_cl_program;
typedef struct _cl_kernel* accpy_cl_kernel_handle;
typedef struct _cl_event* accpy_cl_event;

#define ACCPY_CL_SUCCESS 0
#define ACCPY_CL_BUILD_PROGRAM_FAILURE (-11)
#define ACCPY_CL_INVALID_WORK_GROUP_SIZE (-54)
#define ACCPY_CL_PLATFORM_NOT_FOUND_KHR (-1001)
#define ACCPY_CL_TRUE 1u
#define ACCPY_CL_DEVICE_TYPE_ALL 0xFFFFFFFFull
#define ACCPY_CL_PLATFORM_NAME 0x0902u
#define ACCPY_CL_DEVICE_MAX_WORK_GROUP_SIZE 0x1004u
#define ACCPY_CL_DEVICE_LOCAL_MEM_SIZE 0x1023u
#define ACCPY_CL_DEVICE_NAME 0x102Bu
#define ACCPY_CL_MEM_READ_WRITE 1ull
#define ACCPY_CL_PROGRAM_BUILD_LOG 0x1183u
#define ACCPY_CL_KERNEL_WORK_GROUP_SIZE 0x11B0u
#define ACCPY_CL_QUEUE_CONTEXT 0x1090u
#define ACCPY_CL_QUEUE_DEVICE 0x1091u
#define ACCPY_CL_QUEUE_PROPERTIES 0x1093u
#define ACCPY_CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE 1ull
#define ACCPY_CL_MEM_SIZE 0x1102u
#define ACCPY_CL_MEM_CONTEXT 0x1106u

/* The OpenCL entry points, loaded by name (`X` is the name without its `cl` prefix). */
#define ACCPY_CL_FUNCTIONS(X)                                                                     \
    X(GetPlatformIDs, accpy_cl_int, (accpy_cl_uint, accpy_cl_platform_id*, accpy_cl_uint*))        \
    X(GetPlatformInfo, accpy_cl_int, (accpy_cl_platform_id, accpy_cl_uint, size_t, void*, size_t*)) \
    X(GetDeviceIDs, accpy_cl_int,                                                                 \
      (accpy_cl_platform_id, accpy_cl_ulong, accpy_cl_uint, accpy_cl_device_id*, accpy_cl_uint*))   \
    X(GetDeviceInfo, accpy_cl_int, (accpy_cl_device_id, accpy_cl_uint, size_t, void*, size_t*))     \
    X(CreateContext, accpy_cl_context,                                                            \
      (const intptr_t*, accpy_cl_uint, const accpy_cl_device_id*,                                \
       void (*)(const char*, const void*, size_t, void*), void*, accpy_cl_int*))                   \
    X(CreateCommandQueue, accpy_cl_command_queue,                                                 \
      (accpy_cl_context, accpy_cl_device_id, accpy_cl_ulong, accpy_cl_int*))                       \
    X(CreateProgramWithSource, accpy_cl_program,                                                  \
      (accpy_cl_context, accpy_cl_uint, const char**, const size_t*, accpy_cl_int*))               \
    X(BuildProgram, accpy_cl_int,                                                                 \
      (accpy_cl_program, accpy_cl_uint, const accpy_cl_device_id*, const char*,                   \
       void (*)(accpy_cl_program, void*), void*))                                                  \
    X(GetProgramBuildInfo, accpy_cl_int,                                                          \
      (accpy_cl_program, accpy_cl_device_id, accpy_cl_uint, size_t, void*, size_t*))               \
    X(ReleaseProgram, accpy_cl_int, (accpy_cl_program))                                           \
    X(CreateKernel, accpy_cl_kernel_handle, (accpy_cl_program, const char*, accpy_cl_int*))        \
    X(GetKernelWorkGroupInfo, accpy_cl_int,                                                       \
      (accpy_cl_kernel_handle, accpy_cl_device_id, accpy_cl_uint, size_t, void*, size_t*))         \
    X(SetKernelArg, accpy_cl_int, (accpy_cl_kernel_handle, accpy_cl_uint, size_t, const void*))    \
    X(EnqueueNDRangeKernel, accpy_cl_int,                                                         \
      (accpy_cl_command_queue, accpy_cl_kernel_handle, accpy_cl_uint, const size_t*, const size_t*, \
       const size_t*, accpy_cl_uint, const accpy_cl_event*, accpy_cl_event*))                     \
    X(Finish, accpy_cl_int, (accpy_cl_command_queue))                                             \
    X(CreateBuffer, accpy_cl_mem, (accpy_cl_context, accpy_cl_ulong, size_t, void*, accpy_cl_int*)) \
    X(ReleaseMemObject, accpy_cl_int, (accpy_cl_mem))                                             \
    X(EnqueueWriteBuffer, accpy_cl_int,                                                           \
      (accpy_cl_command_queue, accpy_cl_mem, accpy_cl_uint, size_t, size_t, const void*,          \
       accpy_cl_uint, const accpy_cl_event*, accpy_cl_event*))                                     \
    X(EnqueueReadBuffer, accpy_cl_int,                                                            \
      (accpy_cl_command_queue, accpy_cl_mem, accpy_cl_uint, size_t, size_t, void*, accpy_cl_uint, \
       const accpy_cl_event*, accpy_cl_event*))                                                    \
    X(GetCommandQueueInfo, accpy_cl_int, (accpy_cl_command_queue, accpy_cl_uint, size_t, void*, size_t*)) \
    X(GetMemObjectInfo, accpy_cl_int, (accpy_cl_mem, accpy_cl_uint, size_t, void*, size_t*))        \
    X(EnqueueBarrierWithWaitList, accpy_cl_int,                                                   \
      (accpy_cl_command_queue, accpy_cl_uint, const accpy_cl_event*, accpy_cl_event*))

#define ACCPY_CL_POINTER(NAME, RET, ARGS) RET(*NAME) ARGS;
struct accpy_cl_api {
    ACCPY_CL_FUNCTIONS(ACCPY_CL_POINTER)
};
#undef ACCPY_CL_POINTER

typedef struct accpy_cl_kernel accpy_cl_kernel;

/* A kernel of a cached program, owned by one thread. */
struct accpy_cl_kernel {
    accpy_cl_kernel_handle handle;
    accpy_cl_device_id device;
    pthread_t owner;
    char* name;
    struct accpy_cl_kernel* next;
};

/* One kernel of a package's program: a static object of the unit that defines the kernel,
 * registered when the library is loaded. `prelude` is the device prelude its source needs (the
 * program holds each distinct prelude once, first), `text` its own source (the kernel and the
 * headers it needs, which have include guards), `kernel` its __kernel's name. */
struct accpy_cl_source {
    const char* prelude;
    const char* text;
    const char* kernel;
    struct accpy_cl_source* next;
    int registered;
    long first_line; /* where `text` starts in the assembled program (1-based), 0 before */
};

/* One built program: the context and device, the exact source and options it was built from,
 * and its kernels. */
struct accpy_cl_program_entry {
    accpy_cl_context context;
    accpy_cl_device_id device;
    uint64_t hash;
    char* source;
    char* options;
    accpy_cl_program program;
    struct accpy_cl_kernel* kernels;
    struct accpy_cl_program_entry* next;
};

/* The process's OpenCL state for this library (all guarded by `lock`). */
struct accpy_cl_state {
    pthread_mutex_t lock;
    int ready;
    void* library;
    struct accpy_cl_api api;
    unsigned platform_index, device_index;
    accpy_cl_device_id device;
    accpy_cl_context context;
    accpy_cl_command_queue queue;
    char device_name[256];
    struct accpy_cl_program_entry* programs;
    long builds;
    struct accpy_cl_source* sources; /* the package's kernels, in registration order */
    struct accpy_cl_source* last_source;
    char* package_program;           /* their program text, assembled on first use */
    long package_sources;            /* how many sources `package_program` holds */
};

/* One state per library, shared by a package's translation units as its error state is. */
#ifndef ACCPY_ERROR_STORAGE
#define ACCPY_ERROR_STORAGE static
#endif
#if defined(ACCPY_SPLIT_UNIT) && !defined(ACCPY_DEFINE_ERROR_STATE)
ACCPY_ERROR_STORAGE struct accpy_cl_state accpy_cl;
#else
ACCPY_ERROR_STORAGE struct accpy_cl_state accpy_cl = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, {0}, 0, 0, NULL, NULL,
                                                      NULL, {0}, NULL, 0, NULL, NULL, NULL, 0};
#endif

/* The name of an OpenCL error code, as the specification spells it. */
ACCPY_CL_FN const char* accpy_cl_error_name(accpy_cl_int code) {
    switch (code) {
        case 0: return "CL_SUCCESS";
        case -1: return "CL_DEVICE_NOT_FOUND";
        case -2: return "CL_DEVICE_NOT_AVAILABLE";
        case -3: return "CL_COMPILER_NOT_AVAILABLE";
        case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
        case -5: return "CL_OUT_OF_RESOURCES";
        case -6: return "CL_OUT_OF_HOST_MEMORY";
        case -11: return "CL_BUILD_PROGRAM_FAILURE";
        case -13: return "CL_MISALIGNED_SUB_BUFFER_OFFSET";
        case -14: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
        case -30: return "CL_INVALID_VALUE";
        case -31: return "CL_INVALID_DEVICE_TYPE";
        case -32: return "CL_INVALID_PLATFORM";
        case -33: return "CL_INVALID_DEVICE";
        case -34: return "CL_INVALID_CONTEXT";
        case -35: return "CL_INVALID_QUEUE_PROPERTIES";
        case -36: return "CL_INVALID_COMMAND_QUEUE";
        case -37: return "CL_INVALID_HOST_PTR";
        case -38: return "CL_INVALID_MEM_OBJECT";
        case -43: return "CL_INVALID_BUILD_OPTIONS";
        case -44: return "CL_INVALID_PROGRAM";
        case -45: return "CL_INVALID_PROGRAM_EXECUTABLE";
        case -46: return "CL_INVALID_KERNEL_NAME";
        case -47: return "CL_INVALID_KERNEL_DEFINITION";
        case -48: return "CL_INVALID_KERNEL";
        case -49: return "CL_INVALID_ARG_INDEX";
        case -50: return "CL_INVALID_ARG_VALUE";
        case -51: return "CL_INVALID_ARG_SIZE";
        case -52: return "CL_INVALID_KERNEL_ARGS";
        case -53: return "CL_INVALID_WORK_DIMENSION";
        case -54: return "CL_INVALID_WORK_GROUP_SIZE";
        case -55: return "CL_INVALID_WORK_ITEM_SIZE";
        case -56: return "CL_INVALID_GLOBAL_OFFSET";
        case -57: return "CL_INVALID_EVENT_WAIT_LIST";
        case -58: return "CL_INVALID_EVENT";
        case -59: return "CL_INVALID_OPERATION";
        case -61: return "CL_INVALID_BUFFER_SIZE";
        case -63: return "CL_INVALID_GLOBAL_WORK_SIZE";
        case -64: return "CL_INVALID_PROPERTY";
        case -66: return "CL_INVALID_COMPILER_OPTIONS";
        case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
        default: return "an OpenCL error without a known name";
    }
}

/* A malloc'ed copy of `text` (C99 has no strdup); NULL when out of memory. */
ACCPY_CL_FN char* accpy_cl_copy_text(const char* text) {
    size_t n = strlen(text) + 1;
    char* copy = (char*)malloc(n);
    if (copy) memcpy(copy, text, n);
    return copy;
}

/* FNV-1a over the source, a separator and the options: the program cache's key. */
ACCPY_CL_FN uint64_t accpy_cl_hash(const char* source, const char* options) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char* p;
    for (p = (const unsigned char*)source; *p; ++p) h = (h ^ *p) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;
    for (p = (const unsigned char*)options; *p; ++p) h = (h ^ *p) * 1099511628211ull;
    return h;
}

/* Open libOpenCL and load every entry point; 0 ok, else the error set. */
ACCPY_CL_FN int accpy_cl_load_library(void) {
    /* PoCL (the CPU runtime) builds work-group functions by its "loopvec" method by default, and
     * PoCL 3.1's crashes on kernels with barriers in nested (work-group uniform) branches, as a
     * shared cache's fills in a split's tails have; its "loops" method (work-item loops between
     * barriers) runs them correctly. Chosen unless the user chose (other runtimes ignore it). */
    setenv("POCL_WORK_GROUP_METHOD", "loops", 0);
    void* lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        accpy_set_error("no OpenCL runtime: libOpenCL.so.1 could not be loaded (%s); install an OpenCL "
                        "ICD loader and a device driver, e.g. `apt-get install ocl-icd-libopencl1 "
                        "pocl-opencl-icd` for the CPU, or the GPU vendor's driver", dlerror());
        return 1;
    }
#define ACCPY_CL_LOAD(NAME, RET, ARGS)                                                                \
    *(void**)(&accpy_cl.api.NAME) = dlsym(lib, "cl" #NAME);                                           \
    if (!accpy_cl.api.NAME) {                                                                         \
        accpy_set_error("the OpenCL runtime libOpenCL.so.1 lacks cl" #NAME " (an OpenCL 1.2 loader " \
                        "or newer is needed)");                                                       \
        dlclose(lib);                                                                                 \
        return 1;                                                                                     \
    }
    ACCPY_CL_FUNCTIONS(ACCPY_CL_LOAD)
#undef ACCPY_CL_LOAD
    accpy_cl.library = lib;
    return 0;
}

/* The (platform, device) that ACCPY_OPENCL_DEVICE names; 0 ok, else the error set. */
ACCPY_CL_FN int accpy_cl_parse_device_choice(unsigned* platform, unsigned* device) {
    const char* text = getenv("ACCPY_OPENCL_DEVICE");
    char* end;
    unsigned long p, d;
    if (!text || !*text) {
        *platform = *device = 0;
        return 0;
    }
    p = strtoul(text, &end, 10);
    if (end == text || *end != ':') goto bad;
    text = end + 1;
    d = strtoul(text, &end, 10);
    if (end == text || *end != '\0' || p > 1000 || d > 1000) goto bad;
    *platform = (unsigned)p;
    *device = (unsigned)d;
    return 0;
bad:
    accpy_set_error("ACCPY_OPENCL_DEVICE='%s' is not '<platform>:<device>' (two indices, e.g. '0:0')",
                    getenv("ACCPY_OPENCL_DEVICE"));
    return 1;
}

/* Find the chosen device; 0 ok, else an error naming the choice and what exists. */
ACCPY_CL_FN int accpy_cl_pick_device(void) {
    accpy_cl_platform_id platforms[16];
    accpy_cl_device_id devices[64];
    accpy_cl_uint n_platforms = 0, n_devices = 0;
    char platform_name[256] = "";
    accpy_cl_int err = accpy_cl.api.GetPlatformIDs(16, platforms, &n_platforms);
    if (err == ACCPY_CL_PLATFORM_NOT_FOUND_KHR || (err == ACCPY_CL_SUCCESS && n_platforms == 0)) {
        accpy_set_error("no OpenCL platform: the OpenCL loader found no driver (install one, e.g. "
                        "`apt-get install pocl-opencl-icd` for the CPU; `clinfo -l` lists what is found)");
        return 1;
    }
    if (err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clGetPlatformIDs failed: %s (%d)", accpy_cl_error_name(err), (int)err);
        return 1;
    }
    if (n_platforms > 16) n_platforms = 16;
    if (accpy_cl.platform_index >= n_platforms) {
        accpy_set_error("ACCPY_OPENCL_DEVICE=%u:%u names OpenCL platform %u, but this machine has %u "
                        "platform(s) (0..%u; `clinfo -l` lists them)", accpy_cl.platform_index,
                        accpy_cl.device_index, accpy_cl.platform_index, (unsigned)n_platforms,
                        (unsigned)n_platforms - 1);
        return 1;
    }
    accpy_cl_platform_id platform = platforms[accpy_cl.platform_index];
    accpy_cl.api.GetPlatformInfo(platform, ACCPY_CL_PLATFORM_NAME, sizeof platform_name - 1, platform_name, NULL);
    err = accpy_cl.api.GetDeviceIDs(platform, ACCPY_CL_DEVICE_TYPE_ALL, 64, devices, &n_devices);
    if (err != ACCPY_CL_SUCCESS && err != -1) {
        accpy_set_error("clGetDeviceIDs on OpenCL platform %u (%s) failed: %s (%d)", accpy_cl.platform_index,
                        platform_name, accpy_cl_error_name(err), (int)err);
        return 1;
    }
    if (err == -1) n_devices = 0;
    if (n_devices > 64) n_devices = 64;
    if (accpy_cl.device_index >= n_devices) {
        accpy_set_error("ACCPY_OPENCL_DEVICE=%u:%u names device %u of OpenCL platform %u (%s), which has "
                        "%u device(s)", accpy_cl.platform_index, accpy_cl.device_index, accpy_cl.device_index,
                        accpy_cl.platform_index, platform_name, (unsigned)n_devices);
        return 1;
    }
    accpy_cl.device = devices[accpy_cl.device_index];
    accpy_cl.api.GetDeviceInfo(accpy_cl.device, ACCPY_CL_DEVICE_NAME, sizeof accpy_cl.device_name - 1,
                               accpy_cl.device_name, NULL);
    return 0;
}

/* Context and in-order queue on the chosen device; 0 ok, else the error set. */
ACCPY_CL_FN int accpy_cl_create_queue(void) {
    accpy_cl_int err = 0;
    accpy_cl.context = accpy_cl.api.CreateContext(NULL, 1, &accpy_cl.device, NULL, NULL, &err);
    if (!accpy_cl.context || err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clCreateContext on OpenCL device %u:%u (%s) failed: %s (%d)", accpy_cl.platform_index,
                        accpy_cl.device_index, accpy_cl.device_name, accpy_cl_error_name(err), (int)err);
        return 1;
    }
    accpy_cl.queue = accpy_cl.api.CreateCommandQueue(accpy_cl.context, accpy_cl.device, 0, &err);
    if (!accpy_cl.queue || err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clCreateCommandQueue on OpenCL device %u:%u (%s) failed: %s (%d)",
                        accpy_cl.platform_index, accpy_cl.device_index, accpy_cl.device_name,
                        accpy_cl_error_name(err), (int)err);
        return 1;
    }
    return 0;
}

/* Make the state ready (call with the lock held); 0 ok, else the error set. A failure is not
 * remembered: the next call tries again (after, say, ACCPY_OPENCL_DEVICE was corrected). */
ACCPY_CL_FN int accpy_cl_ready_locked(void) {
    unsigned platform, device;
    if (accpy_cl_parse_device_choice(&platform, &device)) return 1;
    if (accpy_cl.ready) {
        if (platform == accpy_cl.platform_index && device == accpy_cl.device_index) return 0;
        accpy_set_error("ACCPY_OPENCL_DEVICE changed to %u:%u after this library started on OpenCL device "
                        "%u:%u (%s): the device is chosen once per process", platform, device,
                        accpy_cl.platform_index, accpy_cl.device_index, accpy_cl.device_name);
        return 1;
    }
    if (!accpy_cl.library && accpy_cl_load_library()) return 1;
    accpy_cl.platform_index = platform;
    accpy_cl.device_index = device;
    if (accpy_cl_pick_device() || accpy_cl_create_queue()) return 1;
    accpy_cl.ready = 1;
    return 0;
}

/* Make the state ready, taking the lock; 0 ok, else the error set. */
ACCPY_CL_FN int accpy_cl_ready(void) {
    int status;
    pthread_mutex_lock(&accpy_cl.lock);
    status = accpy_cl_ready_locked();
    pthread_mutex_unlock(&accpy_cl.lock);
    return status;
}

/* "OpenCL device p:d (name)" for the library's device, else the name of the caller's device. */
ACCPY_CL_FN void accpy_cl_describe_device(accpy_cl_device_id device, char* out, size_t cap) {
    char name[256] = {0};
    if (accpy_cl.ready && device == accpy_cl.device) {
        snprintf(out, cap, "OpenCL device %u:%u (%s)", accpy_cl.platform_index, accpy_cl.device_index,
                 accpy_cl.device_name);
        return;
    }
    accpy_cl.api.GetDeviceInfo(device, ACCPY_CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    snprintf(out, cap, "OpenCL device '%s' (the caller's queue's)", name);
}

/* Line `line` (1-based) of `text` into `out` (at most `cap` - 1 characters, leading blanks dropped). */
ACCPY_CL_FN void accpy_cl_source_line(const char* text, long line, char* out, size_t cap) {
    size_t n = 0;
    while (*text && line > 1)
        if (*text++ == '\n') --line;
    while (*text == ' ' || *text == '\t') ++text;
    while (text[n] && text[n] != '\n' && n + 1 < cap) ++n;
    memcpy(out, text, n);
    out[n] = '\0';
}

/* Where line `line` of the package's program lies: its kernel's source (NULL: the prelude) and
 * the line within that source. Lock held; the program assembled. */
ACCPY_CL_FN const struct accpy_cl_source* accpy_cl_line_owner(long line, long* local) {
    const struct accpy_cl_source *s, *owner = NULL;
    for (s = accpy_cl.sources; s; s = s->next)
        if (s->first_line && s->first_line <= line && (!owner || s->first_line > owner->first_line)) owner = s;
    *local = owner ? line - owner->first_line + 1 : line;
    return owner;
}

/* Append to `out` the source lines a compiler's `log` names (":<line>:<column>:"), each with the
 * kernel it belongs to when `source` is the package's program: at most 6 lines, each once. */
ACCPY_CL_FN void accpy_cl_explain_lines(const char* source, const char* log, char* out, size_t cap) {
    long seen[6];
    int shown = 0, k, package = source == accpy_cl.package_program;
    size_t used = strlen(out);
    const char* p = log;
    while (log && (p = strchr(p, ':')) != NULL && shown < 6) {
        char *end, *end2, text[112], where[160];
        long line, local;
        const struct accpy_cl_source* owner;
        if (p[1] < '0' || p[1] > '9') { ++p; continue; }
        line = strtol(p + 1, &end, 10);
        if (*end != ':' || end[1] < '0' || end[1] > '9') { p = end; continue; }
        strtol(end + 1, &end2, 10);
        p = end2;
        if (*end2 != ':') continue;
        for (k = 0; k < shown && seen[k] != line; ++k) {}
        if (k < shown) continue;
        seen[shown++] = line;
        accpy_cl_source_line(source, line, text, sizeof text);
        if (package && (owner = accpy_cl_line_owner(line, &local)) != NULL)
            snprintf(where, sizeof where, "line %ld of kernel '%s' (program line %ld)", local, owner->kernel, line);
        else if (package)
            snprintf(where, sizeof where, "line %ld of the device prelude", line);
        else
            snprintf(where, sizeof where, "line %ld", line);
        if (used < cap) used += (size_t)snprintf(out + used, cap - used, "\n  %s: %s", where, text);
    }
}

/* Set the error from a failed build: the OpenCL error, the lines the compiler names (kernel and
 * text) and its log. */
ACCPY_CL_FN void accpy_cl_report_build_failure(accpy_cl_program program, accpy_cl_device_id device,
                                               const char* source, const char* name, const char* options,
                                               accpy_cl_int err) {
    size_t size = 0;
    char* log = NULL;
    char lines[1024] = "", where[320];
    accpy_cl.api.GetProgramBuildInfo(program, device, ACCPY_CL_PROGRAM_BUILD_LOG, 0, NULL, &size);
    if (size) log = (char*)calloc(size + 1, 1);
    if (log) accpy_cl.api.GetProgramBuildInfo(program, device, ACCPY_CL_PROGRAM_BUILD_LOG, size, log, NULL);
    accpy_cl_explain_lines(source, log, lines, sizeof lines);
    accpy_cl_describe_device(device, where, sizeof where);
    accpy_set_error("OpenCL C build of the program of kernel '%s' failed (%s) on %s with options '%s'; the lines "
                    "the compiler names:%s\nthe compiler's log:\n%s", name, accpy_cl_error_name(err), where, options,
                    *lines ? lines : " (none)", log && *log ? log : "(empty)");
    free(log);
}

/* The cached program of (context, device, source, options), built now if new (lock held); NULL +
 * error. `name` is the kernel asked for (for messages). */
ACCPY_CL_FN struct accpy_cl_program_entry* accpy_cl_program_on_locked(accpy_cl_context context,
                                                                      accpy_cl_device_id device,
                                                                      const char* source, const char* name,
                                                                      const char* options) {
    uint64_t hash = accpy_cl_hash(source, options);
    struct accpy_cl_program_entry* entry;
    accpy_cl_int err = 0;
    for (entry = accpy_cl.programs; entry; entry = entry->next)
        if (entry->context == context && entry->device == device && entry->hash == hash &&
            !strcmp(entry->source, source) && !strcmp(entry->options, options))
            return entry;
    accpy_cl_program program = accpy_cl.api.CreateProgramWithSource(context, 1, &source, NULL, &err);
    if (!program || err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clCreateProgramWithSource for kernel '%s' failed: %s (%d)", name,
                        accpy_cl_error_name(err), (int)err);
        return NULL;
    }
    accpy_cl.builds++;
    err = accpy_cl.api.BuildProgram(program, 1, &device, options, NULL, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_cl_report_build_failure(program, device, source, name, options, err);
        accpy_cl.api.ReleaseProgram(program);
        return NULL;
    }
    entry = (struct accpy_cl_program_entry*)calloc(1, sizeof *entry);
    if (entry) entry->source = accpy_cl_copy_text(source);
    if (entry) entry->options = accpy_cl_copy_text(options);
    if (!entry || !entry->source || !entry->options) {
        if (entry) free(entry->source), free(entry->options), free(entry);
        accpy_cl.api.ReleaseProgram(program);
        accpy_set_error("out of host memory caching the OpenCL program of kernel '%s'", name);
        return NULL;
    }
    /* (the program keeps its context alive: a cached context's address is never reused) */
    entry->context = context;
    entry->device = device;
    entry->hash = hash;
    entry->program = program;
    entry->next = accpy_cl.programs;
    accpy_cl.programs = entry;
    return entry;
}

/* This thread's kernel `name` of a cached program (lock held); NULL + error. */
ACCPY_CL_FN accpy_cl_kernel* accpy_cl_thread_kernel_locked(struct accpy_cl_program_entry* entry, const char* name) {
    pthread_t self = pthread_self();
    accpy_cl_kernel* k;
    accpy_cl_int err = 0;
    for (k = entry->kernels; k; k = k->next)
        if (pthread_equal(k->owner, self) && !strcmp(k->name, name)) return k;
    accpy_cl_kernel_handle handle = accpy_cl.api.CreateKernel(entry->program, name, &err);
    if (!handle || err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clCreateKernel('%s') failed: %s (%d)%s", name, accpy_cl_error_name(err), (int)err,
                        err == -46 ? ": the source defines no __kernel of that name" : "");
        return NULL;
    }
    k = (accpy_cl_kernel*)calloc(1, sizeof *k);
    if (k) k->name = accpy_cl_copy_text(name);
    if (!k || !k->name) {
        free(k);
        accpy_set_error("out of host memory caching the OpenCL kernel '%s'", name);
        return NULL;
    }
    k->handle = handle;
    k->owner = self;
    k->device = entry->device;
    k->next = entry->kernels;
    entry->kernels = k;
    return k;
}

/* A kernel of the program `source` (with `options`) on the library's own device. */
ACCPY_CL_FN accpy_cl_kernel* accpy_cl_kernel_get(const char* source, const char* name, const char* options) {
    accpy_cl_kernel* k = NULL;
    struct accpy_cl_program_entry* entry;
    if (!options) options = "";
    pthread_mutex_lock(&accpy_cl.lock);
    if (!accpy_cl_ready_locked() &&
        (entry = accpy_cl_program_on_locked(accpy_cl.context, accpy_cl.device, source, name, options)) != NULL)
        k = accpy_cl_thread_kernel_locked(entry, name);
    pthread_mutex_unlock(&accpy_cl.lock);
    return k;
}

/* Add a kernel to the package's program (once; called by a constructor when the library loads). */
ACCPY_CL_FN void accpy_cl_register(struct accpy_cl_source* source) {
    pthread_mutex_lock(&accpy_cl.lock);
    if (!source->registered) {
        source->registered = 1;
        source->next = NULL;
        if (accpy_cl.last_source) accpy_cl.last_source->next = source;
        else accpy_cl.sources = source;
        accpy_cl.last_source = source;
    }
    pthread_mutex_unlock(&accpy_cl.lock);
}

/* The number of '\n' in `text`. */
ACCPY_CL_FN long accpy_cl_count_lines(const char* text) {
    long n = 0;
    for (; *text; ++text) n += *text == '\n';
    return n;
}

/* The package's program (lock held): each distinct prelude once, then every registered kernel's
 * source, in registration order (each kernel's first line noted, for build errors); assembled
 * again only when a kernel was registered since. NULL + error when there is none or no memory. */
ACCPY_CL_FN const char* accpy_cl_package_program_locked(const char* name) {
    struct accpy_cl_source *s, *t;
    size_t bytes = 1, used = 0;
    long count = 0, line = 1;
    char* text;
    for (s = accpy_cl.sources; s; s = s->next) ++count;
    if (!count) {
        accpy_set_error("kernel '%s': the library registered no OpenCL kernel source (its constructors did not "
                        "run?)", name);
        return NULL;
    }
    if (accpy_cl.package_program && accpy_cl.package_sources == count) return accpy_cl.package_program;
    for (s = accpy_cl.sources; s; s = s->next) bytes += strlen(s->prelude) + strlen(s->text) + 2;
    if (!(text = (char*)malloc(bytes))) {
        accpy_set_error("out of host memory assembling the package's OpenCL program (%zu bytes)", bytes);
        return NULL;
    }
    text[0] = '\0';
    for (s = accpy_cl.sources; s; s = s->next) {
        for (t = accpy_cl.sources; t != s && strcmp(t->prelude, s->prelude); t = t->next) {}
        if (t != s) continue; /* (an earlier kernel's prelude is the same text) */
        used += (size_t)sprintf(text + used, "%s\n", s->prelude);
        line += accpy_cl_count_lines(s->prelude) + 1;
    }
    for (s = accpy_cl.sources; s; s = s->next) {
        s->first_line = line;
        used += (size_t)sprintf(text + used, "%s\n", s->text);
        line += accpy_cl_count_lines(s->text) + 1;
    }
    free(accpy_cl.package_program);
    accpy_cl.package_program = text;
    accpy_cl.package_sources = count;
    return text;
}

/* This thread's kernel `name` of the package's program on the library's own device (built once
 * per process, with every kernel of the package); NULL + error. */
ACCPY_CL_FN accpy_cl_kernel* accpy_cl_package_kernel(const char* name) {
    accpy_cl_kernel* k = NULL;
    struct accpy_cl_program_entry* entry;
    const char* program;
    pthread_mutex_lock(&accpy_cl.lock);
    if (!accpy_cl_ready_locked() && (program = accpy_cl_package_program_locked(name)) != NULL &&
        (entry = accpy_cl_program_on_locked(accpy_cl.context, accpy_cl.device, program, name, "")) != NULL)
        k = accpy_cl_thread_kernel_locked(entry, name);
    pthread_mutex_unlock(&accpy_cl.lock);
    return k;
}

/* The context and device of the caller's `queue` (lock held, library loaded); 0 ok, else error. */
ACCPY_CL_FN int accpy_cl_queue_target_locked(accpy_cl_command_queue queue, accpy_cl_context* context,
                                            accpy_cl_device_id* device, const char* what) {
    accpy_cl_int err;
    if (!queue) {
        accpy_set_error("%s: the command queue is NULL (expected the caller's cl_command_queue)", what);
        return 1;
    }
    err = accpy_cl.api.GetCommandQueueInfo(queue, ACCPY_CL_QUEUE_CONTEXT, sizeof *context, context, NULL);
    if (err == ACCPY_CL_SUCCESS)
        err = accpy_cl.api.GetCommandQueueInfo(queue, ACCPY_CL_QUEUE_DEVICE, sizeof *device, device, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_set_error("%s: clGetCommandQueueInfo on the caller's queue failed: %s (%d) (not a valid "
                        "cl_command_queue?)", what, accpy_cl_error_name(err), (int)err);
        return 1;
    }
    return 0;
}

/* This thread's kernel `name` of the package's program built for the context and device of the
 * caller's `queue` (once per (context, device)); NULL + error. ACCPY_OPENCL_DEVICE plays no part. */
ACCPY_CL_FN accpy_cl_kernel* accpy_cl_queue_kernel(accpy_cl_command_queue queue, const char* name) {
    accpy_cl_kernel* k = NULL;
    struct accpy_cl_program_entry* entry;
    accpy_cl_context context;
    accpy_cl_device_id device;
    const char* program;
    pthread_mutex_lock(&accpy_cl.lock);
    if ((accpy_cl.library || !accpy_cl_load_library()) && !accpy_cl_queue_target_locked(queue, &context, &device, name)
        && (program = accpy_cl_package_program_locked(name)) != NULL &&
        (entry = accpy_cl_program_on_locked(context, device, program, name, "")) != NULL)
        k = accpy_cl_thread_kernel_locked(entry, name);
    pthread_mutex_unlock(&accpy_cl.lock);
    return k;
}

/* Check the caller's buffer `buf` for argument `what` of `fn`: of the queue's context, at least
 * `bytes` long (NULL is accepted for 0 bytes); 0 ok, else the error set, naming the argument. */
ACCPY_CL_FN int accpy_cl_check_buffer(accpy_cl_command_queue queue, void* buf, size_t bytes, const char* fn,
                                      const char* what) {
    accpy_cl_context mine = NULL, theirs = NULL;
    size_t size = 0;
    accpy_cl_int err;
    if (!buf) {
        if (!bytes) return 0;
        accpy_set_error("%s: argument %s is a NULL buffer, expected a cl_mem of at least %zu bytes", fn, what, bytes);
        return 1;
    }
    err = accpy_cl.api.GetCommandQueueInfo(queue, ACCPY_CL_QUEUE_CONTEXT, sizeof mine, &mine, NULL);
    if (err == ACCPY_CL_SUCCESS)
        err = accpy_cl.api.GetMemObjectInfo((accpy_cl_mem)buf, ACCPY_CL_MEM_CONTEXT, sizeof theirs, &theirs, NULL);
    if (err == ACCPY_CL_SUCCESS)
        err = accpy_cl.api.GetMemObjectInfo((accpy_cl_mem)buf, ACCPY_CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_set_error("%s: argument %s: clGetMemObjectInfo failed: %s (%d) (not a valid cl_mem?)", fn, what,
                        accpy_cl_error_name(err), (int)err);
        return 1;
    }
    if (mine != theirs) {
        accpy_set_error("%s: argument %s is a buffer of another OpenCL context than the queue's; every buffer "
                        "must belong to the queue's context", fn, what);
        return 1;
    }
    if (size < bytes) {
        accpy_set_error("%s: argument %s is a buffer of %zu bytes, and the call reads or writes %zu", fn, what, size,
                        bytes);
        return 1;
    }
    return 0;
}

/* How many programs this library has built (a debug counter: a cache hit builds none). */
ACCPY_CL_FN long accpy_cl_build_count(void) {
    long n;
    pthread_mutex_lock(&accpy_cl.lock);
    n = accpy_cl.builds;
    pthread_mutex_unlock(&accpy_cl.lock);
    return n;
}

/* The chosen device's name (empty before the first successful use). */
ACCPY_CL_FN const char* accpy_cl_device_name(void) { return accpy_cl.device_name; }

ACCPY_CL_FN void* accpy_cl_alloc(size_t bytes) {
    accpy_cl_int err = 0;
    accpy_cl_mem buf;
    if (accpy_cl_ready()) return NULL;
    /* a zero-size buffer is invalid in OpenCL; an empty array still gets a handle */
    buf = accpy_cl.api.CreateBuffer(accpy_cl.context, ACCPY_CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &err);
    if (!buf || err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clCreateBuffer of %zu bytes on OpenCL device %u:%u (%s) failed: %s (%d)", bytes,
                        accpy_cl.platform_index, accpy_cl.device_index, accpy_cl.device_name,
                        accpy_cl_error_name(err), (int)err);
        return NULL;
    }
    return (void*)buf;
}

ACCPY_CL_FN int accpy_cl_write(void* buf, const void* host, size_t bytes) {
    accpy_cl_int err;
    if (!bytes) return 0;
    if (accpy_cl_ready()) return 1;
    err = accpy_cl.api.EnqueueWriteBuffer(accpy_cl.queue, (accpy_cl_mem)buf, ACCPY_CL_TRUE, 0, bytes, host, 0,
                                          NULL, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clEnqueueWriteBuffer of %zu bytes failed: %s (%d)", bytes, accpy_cl_error_name(err),
                        (int)err);
        return 1;
    }
    return 0;
}

ACCPY_CL_FN int accpy_cl_read(void* buf, void* host, size_t bytes) {
    accpy_cl_int err;
    if (!bytes) return 0;
    if (accpy_cl_ready()) return 1;
    err = accpy_cl.api.EnqueueReadBuffer(accpy_cl.queue, (accpy_cl_mem)buf, ACCPY_CL_TRUE, 0, bytes, host, 0,
                                         NULL, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clEnqueueReadBuffer of %zu bytes failed: %s (%d)", bytes, accpy_cl_error_name(err),
                        (int)err);
        return 1;
    }
    return 0;
}

ACCPY_CL_FN void accpy_cl_free(void* buf) {
    if (buf && accpy_cl.library) accpy_cl.api.ReleaseMemObject((accpy_cl_mem)buf);
}

ACCPY_CL_FN int accpy_cl_set_arg(accpy_cl_kernel* k, unsigned index, size_t size,
                                                    const void* value) {
    accpy_cl_int err = accpy_cl.api.SetKernelArg(k->handle, index, size, value);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clSetKernelArg(kernel '%s', argument %u, %zu bytes%s) failed: %s (%d)", k->name, index,
                        size, value ? "" : ", __local", accpy_cl_error_name(err), (int)err);
        return 1;
    }
    return 0;
}

/* "a x b x c" of the first `dims` sizes into `out`. */
ACCPY_CL_FN void accpy_cl_format_sizes(char* out, size_t cap, unsigned dims, const size_t* sizes) {
    unsigned d;
    size_t used = 0;
    out[0] = '\0';
    for (d = 0; d < dims && used < cap; ++d)
        used += (size_t)snprintf(out + used, cap - used, d ? " x %zu" : "%zu", sizes[d]);
}

/* Set the error of a failed launch: the error's name, the sizes, and the group limits. */
ACCPY_CL_FN void accpy_cl_report_launch_failure(accpy_cl_kernel* k, unsigned dims, const size_t* global,
                                           const size_t* local, accpy_cl_int err, const char* what) {
    char g[96], l[96], where[320];
    size_t kernel_max = 0, device_max = 0;
    accpy_cl_format_sizes(g, sizeof g, dims, global);
    if (local) accpy_cl_format_sizes(l, sizeof l, dims, local);
    else strcpy(l, "chosen by the runtime");
    accpy_cl.api.GetKernelWorkGroupInfo(k->handle, k->device, ACCPY_CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_max, &kernel_max, NULL);
    accpy_cl.api.GetDeviceInfo(k->device, ACCPY_CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof device_max, &device_max,
                               NULL);
    accpy_cl_describe_device(k->device, where, sizeof where);
    accpy_set_error("%s of kernel '%s' failed: %s (%d); global size %s, work-group (local) size %s; this kernel "
                    "allows at most %zu work-items per group on %s (at most %zu)%s", what, k->name,
                    accpy_cl_error_name(err), (int)err, g, l, kernel_max, where, device_max,
                    err == ACCPY_CL_INVALID_WORK_GROUP_SIZE
                        ? "; each local size must divide its global size and their product stay within the limit"
                        : "");
}

/* 0 when `dims` is 1..3 and every global size is nonzero (a launch to make), 1 for an empty range,
 * -1 with the error set for a bad `dims`. */
ACCPY_CL_FN int accpy_cl_launch_range(accpy_cl_kernel* k, unsigned dims, const size_t global[3]) {
    unsigned d;
    if (dims < 1 || dims > 3) {
        accpy_set_error("the launch of kernel '%s': dims=%u, expected 1, 2 or 3", k->name, dims);
        return -1;
    }
    for (d = 0; d < dims; ++d)
        if (global[d] == 0) return 1; /* an empty range: nothing to run */
    return 0;
}

/* Launch `k` on the library's queue and wait for it (the launcher reads its buffers back next). */
ACCPY_CL_FN int accpy_cl_launch(accpy_cl_kernel* k, unsigned dims, const size_t global[3],
                                                   const size_t local[3]) {
    accpy_cl_int err;
    int range = accpy_cl_launch_range(k, dims, global);
    if (range) return range < 0;
    err = accpy_cl.api.EnqueueNDRangeKernel(accpy_cl.queue, k->handle, dims, NULL, global, local, 0, NULL, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_cl_report_launch_failure(k, dims, global, local, err, "clEnqueueNDRangeKernel");
        return 1;
    }
    err = accpy_cl.api.Finish(accpy_cl.queue);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_cl_report_launch_failure(k, dims, global, local, err, "clFinish after the launch");
        return 1;
    }
    return 0;
}

/* Enqueue `k` on the caller's `queue`, without waiting: the queue's order makes what the caller
 * enqueues next (a read, another kernel) see its writes, and what it enqueued before be seen by it,
 * as for the caller's own kernels; on an out-of-order queue, barriers before and after the launch
 * keep that order. 0 ok, else the error set. */
ACCPY_CL_FN int accpy_cl_launch_on_queue(accpy_cl_kernel* k, accpy_cl_command_queue queue, unsigned dims,
                                         const size_t global[3], const size_t local[3]) {
    accpy_cl_ulong properties = 0;
    accpy_cl_int err;
    int range = accpy_cl_launch_range(k, dims, global), ordered;
    if (range) return range < 0;
    accpy_cl.api.GetCommandQueueInfo(queue, ACCPY_CL_QUEUE_PROPERTIES, sizeof properties, &properties, NULL);
    ordered = (properties & ACCPY_CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
    err = ordered ? accpy_cl.api.EnqueueBarrierWithWaitList(queue, 0, NULL, NULL) : ACCPY_CL_SUCCESS;
    if (err == ACCPY_CL_SUCCESS)
        err = accpy_cl.api.EnqueueNDRangeKernel(queue, k->handle, dims, NULL, global, local, 0, NULL, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_cl_report_launch_failure(k, dims, global, local, err, "clEnqueueNDRangeKernel on the caller's queue");
        return 1;
    }
    err = ordered ? accpy_cl.api.EnqueueBarrierWithWaitList(queue, 0, NULL, NULL) : ACCPY_CL_SUCCESS;
    if (err != ACCPY_CL_SUCCESS) {
        accpy_cl_report_launch_failure(k, dims, global, local, err, "clEnqueueBarrierWithWaitList after the launch");
        return 1;
    }
    return 0;
}

ACCPY_CL_FN int accpy_cl_device_limits(size_t* max_group, size_t* local_mem_bytes) {
    accpy_cl_ulong local_mem = 0;
    accpy_cl_int err;
    if (accpy_cl_ready()) return 1;
    err = accpy_cl.api.GetDeviceInfo(accpy_cl.device, ACCPY_CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof *max_group,
                                     max_group, NULL);
    if (err == ACCPY_CL_SUCCESS)
        err = accpy_cl.api.GetDeviceInfo(accpy_cl.device, ACCPY_CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem,
                                         &local_mem, NULL);
    if (err != ACCPY_CL_SUCCESS) {
        accpy_set_error("clGetDeviceInfo on OpenCL device %u:%u (%s) failed: %s (%d)", accpy_cl.platform_index,
                        accpy_cl.device_index, accpy_cl.device_name, accpy_cl_error_name(err), (int)err);
        return 1;
    }
    *local_mem_bytes = (size_t)local_mem;
    return 0;
}

#endif /* ACCPY_OPENCL_H */
