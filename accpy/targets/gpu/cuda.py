"""CUDA C packages: the CUDA runtime as data for the package's launcher generator (package/launch.py),
the grid whose kernels are written in CUDA C and launched through it, and the check of a package's
`.cu` unit with nvcc.

A package for a target whose runtime is CUDA keeps its Python-callable library on the OpenCL
runtime (it runs here, on any OpenCL device) and also writes `<name>.cu`: the same kernels, from
the same lowered IR, in CUDA C, each with a host launcher of the same C signature
(`extern "C" void <fn>(...)`: cudaMalloc, copies, `kernel<<<blocks, threads>>>`, copies back,
frees; errors through native/gpu/accpy_cuda.h into the package's error channel, read by
`<name>_last_error`). The unit stands alone: nvcc compiles it to an object for the target's
architecture (`check_unit`), without a GPU.

The device code sits in the namespace `accpy_device`: there the scalar helpers (accpy_scalar.h) are
device functions, while the host runtime's copies of them stay host functions outside it.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...errors import CompileError
from ...ir.names import check_symbol_name
from ...paths import cache_dir
from ..features import Category, Runtime
from ..grid import DeviceRuntime
from .dialects import CUDA_C
from .grid import GpuGrid
from .tools import compile_cuda, find_nvcc, nvcc_available

#: The namespace of a .cu unit's device code (kernels and the device prelude).
DEVICE_NAMESPACE = "accpy_device"

#: Set to "1" to have Package.build compile a CUDA package's .cu with nvcc to check it (about 2 s a
#: unit; off by default: the .cu is written, and a note says it was not compiled).
CHECK_VARIABLE = "ACCPY_CUDA_CHECK"


@dataclass(frozen=True)
class CompiledRuntime(DeviceRuntime):
    """A DeviceRuntime whose kernels are compiled with their host launchers, in one unit:
    `launch_template` launches a kernel (keys: kernel, args, gx, gy, gz, lx, ly, lz: the launch
    sizes, blocks and threads per block here), `launched` is a C expression, nonzero with the error
    set, that checks the launch (keys: name, a C string, and the sizes); `unit_open` /
    `unit_close` bracket the device code, `unit_head` starts the unit; `linkage` starts each
    launcher."""

    launch_template: str = ""
    launched: str = ""
    unit_open: str = ""
    unit_close: str = ""
    unit_head: str = ""
    linkage: str = ""


_DIMS = "dim3({gx}, {gy}, {gz}), dim3({lx}, {ly}, {lz})"

CUDA_RUNTIME = CompiledRuntime(
    header="gpu/accpy_cuda.h", handle_type="", kernel_get="", alloc="accpy_cuda_alloc", write="accpy_cuda_write",
    read="accpy_cuda_read", free="accpy_cuda_free", set_arg="", launch="", grid_total=False,
    launch_template=f"{DEVICE_NAMESPACE}::{{kernel}}<<<{_DIMS}>>>({{args}})",
    launched=f"accpy_cuda_launched({{name}}, {_DIMS}, 0)",
    # a device entry <fn>_device(cudaStream_t, device pointers..., sizes...): launched on the
    # caller's stream, checked, not waited for
    name="CUDA", queue_type="cudaStream_t",
    device_launch_template=f"{DEVICE_NAMESPACE}::{{kernel}}<<<{_DIMS}, 0, {{queue}}>>>({{args}})",
    device_launched=f"accpy_cuda_enqueued({{name}}, {_DIMS}, 0)",
    # the device prelude again, inside the namespace: its guards and macros are the host's until undone
    # (nvcc's #186, a pointless comparison of an unsigned value with 0, and #177, an unused static
    # function: both from the scalar helpers, written for every element type)
    unit_head="#pragma nv_diag_suppress 186\n#pragma nv_diag_suppress 177",
    # float16 elements are CUDA's __half from here on, in kernels and launchers (nvcc's device code
    # has no _Float16; the tensor-core helpers read __half)
    unit_open=f"#include <cuda_fp16.h>\n#define _Float16 __half\nnamespace {DEVICE_NAMESPACE} {{\n"
              f"#undef ACCPY_SCALAR_H\n#undef ACCPY_INLINE\n#undef ACCPY_F32_BITS\n#undef ACCPY_BITS_F32",
    unit_close=f"}}  // namespace {DEVICE_NAMESPACE}",
    linkage='extern "C" ')


class CudaGrid(GpuGrid):
    """A GPU's grid with its kernels in CUDA C, launched through the CUDA runtime (a .cu unit)."""

    dialect = CUDA_C
    runtime = CUDA_RUNTIME

    def check_unit(self, text: str, path: Path, target) -> str:
        """Compile the .cu `text` (written at `path`) for `target`'s architecture: see check_unit."""
        return check_unit(text, path, getattr(target, "device_arch", None))


CUDA_GRID = CudaGrid()


def uses_cuda(target) -> bool:
    """Whether `target` runs its kernels through the CUDA runtime (its packages then write a .cu)."""
    return getattr(target, "runtime", None) is Runtime.CUDA


def companion_grids(target) -> tuple:
    """The grids whose units a package for `target` writes beside its own C: the CUDA grid for a
    target whose runtime is CUDA, else none."""
    return (CUDA_GRID,) if uses_cuda(target) else ()


def check_unit(text: str, path: Path, arch: Optional[str]) -> str:
    """Compile the .cu unit `text` (written at `path`) with nvcc to an object for `arch` (e.g.
    "sm_80") to check it, once per text, architecture and nvcc (a marker in the build cache); a
    note saying what was done, or why not (no nvcc, no architecture, ACCPY_CUDA_CHECK unset).
    CompileError naming `path` and the lines nvcc rejected."""
    if os.environ.get(CHECK_VARIABLE, "0") != "1":
        return f"{path.name}: not compiled (set {CHECK_VARIABLE}=1 to check it with nvcc)"
    if not arch:
        return f"{path.name}: not compiled (the target names no CUDA architecture: device_arch)"
    tools = find_nvcc()
    if tools is None:
        return f"{path.name}: not compiled: {nvcc_available()}"
    key = hashlib.sha256(f"{tools.nvcc}\0{tools.version}\0{arch}\0{text}".encode()).hexdigest()
    marker = cache_dir() / "cuda-checks" / key
    if marker.exists():
        return f"{path.name}: compiled by nvcc for {arch} (an identical unit, earlier)"
    start = time.perf_counter()
    try:
        compile_cuda(text, arch=arch, mode="object", tools=tools)
    except CompileError as e:
        lines = sorted({line for line, _, _ in getattr(e, "lines", ())})
        where = f" at line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}" if lines else ""
        messages = str(e).replace("kernel.cu", path.name)  # (compile_cuda's name for the file)
        raise CompileError(f"nvcc rejected {path}{where} (kept there): {messages}") from None
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return f"{path.name}: compiled by nvcc for {arch} in {time.perf_counter() - start:.1f} s"


def cuda_source(plan, args, name: str = "kernel") -> str:
    """The whole .cu text for one function: `plan` lowered with `args` (its arguments, as given
    to Package.add), its kernel in CUDA C and its host launcher `extern "C" void <name>(...)`, and
    `<name>_last_error`. ValueError when the plan's target is no GPU or `name` cannot name a C (or
    C++) function."""
    from ...package.launch import device_unit_source  # FACADE: the package layer writes the unit

    check_symbol_name(name, "name")
    if getattr(plan.target, "category", None) is not Category.GPU:
        raise ValueError(f"cuda_source: the plan's target {plan.target.name} is not a GPU target")
    return device_unit_source(name, [plan.lower(name, args)], CUDA_GRID)
