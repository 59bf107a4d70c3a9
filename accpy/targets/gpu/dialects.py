"""The two dialects GPU kernels are written in, from one loop IR (codegen/device.py reads these as
data): OpenCL C (run through the OpenCL runtime: any OpenCL device, e.g. PoCL on this machine's
CPU, or a GPU's own OpenCL driver) and CUDA C (compiled by nvcc). Both start with the same
prelude: accpy's scalar semantics for device code (native/gpu/accpy_device.h). And the host
runtime that launches OpenCL C kernels from a package (native/gpu/accpy_opencl.h)."""
from __future__ import annotations

from ..grid import DeviceRuntime, Dialect

PRELUDE = '#include "gpu/accpy_device.h"'

OPENCL_C = Dialect(
    name="OpenCL C", prelude=PRELUDE, kernel="__kernel void", global_ptr="__global ",
    const_global_ptr="__global const ", restrict="restrict",
    unit_ids=(("BLOCK_X", "get_group_id(0)"), ("BLOCK_Y", "get_group_id(1)"), ("BLOCK_Z", "get_group_id(2)"),
              ("THREAD_X", "get_local_id(0)"), ("THREAD_Y", "get_local_id(1)"), ("THREAD_Z", "get_local_id(2)"),
              ("WARP_X", "(get_local_id(0) / 32)"), ("WARP_Y", "get_local_id(1)")),
    headers=(('#include "gpu/accpy_mma.h"', "gpu/accpy_mma.cl.h"),),
    shared_array="__local", barrier="barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)", suffix=".cl",
    atomics=tuple(((op, t), f"atomic_{op}({{ptr}}, {{value}})") for op in ("add", "max", "min")
                  for t in ("int32", "uint32")) + ((("add", "float32"), "accpy_atomic_add_f32({ptr}, {value})"),))

CUDA_C = Dialect(
    name="CUDA C", prelude=PRELUDE, kernel='extern "C" __global__ void', global_ptr="", const_global_ptr="const ",
    restrict="__restrict__",
    unit_ids=(("BLOCK_X", "blockIdx.x"), ("BLOCK_Y", "blockIdx.y"), ("BLOCK_Z", "blockIdx.z"),
              ("THREAD_X", "threadIdx.x"), ("THREAD_Y", "threadIdx.y"), ("THREAD_Z", "threadIdx.z"),
              ("WARP_X", "(threadIdx.x / 32)"), ("WARP_Y", "threadIdx.y")),
    headers=(('#include "gpu/accpy_mma.h"', "gpu/accpy_mma.cuh"),),
    shared_array="__shared__", barrier="__syncthreads()", suffix=".cu",
    atomics=tuple(((op, t), f"atomic{op.capitalize()}({{ptr}}, {{value}})") for op in ("add", "max", "min")
                  for t in ("int32", "uint32")) + ((("add", "float32"), "atomicAdd({ptr}, {value})"),))

# (queues and buffers as `struct _cl_command_queue*` / `struct _cl_mem*`: the types cl_command_queue and
# cl_mem are in OpenCL's headers, so a C caller passes its own without a cast, and accpy's header
# needs none of OpenCL's)
OPENCL_RUNTIME = DeviceRuntime(
    header="gpu/accpy_opencl.h", handle_type="accpy_cl_kernel", kernel_get="accpy_cl_kernel_get",
    alloc="accpy_cl_alloc", write="accpy_cl_write", read="accpy_cl_read", free="accpy_cl_free",
    set_arg="accpy_cl_set_arg", launch="accpy_cl_launch", grid_total=True,
    source_type="struct accpy_cl_source", register="accpy_cl_register", package_kernel="accpy_cl_package_kernel",
    name="OpenCL", queue_type="struct _cl_command_queue*", buffer_type="struct _cl_mem*",
    header_types="struct _cl_command_queue;\nstruct _cl_mem;",
    queue_kernel="accpy_cl_queue_kernel", check_buffer="accpy_cl_check_buffer",
    queue_launch="accpy_cl_launch_on_queue")

DIALECTS = {"opencl": OPENCL_C, "cuda": CUDA_C}

from . import arrays  # noqa: E402,F401  (registers the device arrays Python callers pass to device entries)
