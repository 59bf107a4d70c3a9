"""The GPU target library: a GPU target's grid (plan.bind), its kernels' dialects and host runtime.
Kernels are written in OpenCL C and run through the OpenCL runtime from a package (any OpenCL
device: PoCL on a CPU, a GPU's own OpenCL driver); the same IR gives CUDA C for nvcc
(accpy.targets.gpu.cuda: a package for a CUDA target also writes <name>.cu)."""
from __future__ import annotations

from ..features import Category
from ..library import LibraryPass, TargetLibrary
from .cuda import companion_grids
from .enums import MMA_FRAGMENT
from .grid import GpuGrid
from .shared import atomic_updates, cooperative_copies
from .tensor import INTRINSICS, GpuTensorUnit, tensor_cores


class GpuLibrary(TargetLibrary):
    """Blocks and threads (or warps) of GPU targets (Category.GPU), their tensor cores."""

    name = "gpu"
    intrinsics = INTRINSICS  # the tensor-core fragment calls (tensor.py)

    def applies_to(self, target) -> bool:
        return getattr(target, "category", None) is Category.GPU

    def grid(self, target):
        return GpuGrid()

    def tensor_unit(self, target):
        return GpuTensorUnit(target)

    def check_cache_location(self, target, location) -> None:
        if location is MMA_FRAGMENT and not self.applies_to(target):
            raise ValueError(f"cache: target {target.name} has no {location.name} memory (the tensor-core "
                             f"fragments of a GPU target's warps)")

    def check_double_buffer(self, target, location) -> None:
        if location is MMA_FRAGMENT:
            raise ValueError("cache: double_buffer=True on an MMA_FRAGMENT cache; fragments are a warp's registers, "
                             "loaded at the cache's index (Accera refuses it too)")

    def companion_grids(self, target) -> tuple:
        # a CUDA target's packages also write their kernels in CUDA C (<name>.cu; nvcc checks it
        # when ACCPY_CUDA_CHECK=1)
        return companion_grids(target)

    def lowering_passes(self) -> tuple:
        # tensorized sub-nests as warps' fragment calls, once the caches they may read are placed
        tensor = LibraryPass("tensor cores", "simplify",
                             lambda stmt, request: tensor_cores(stmt, request, GpuGrid()), always=True)
        # last (after the final simplification, which would drop the guards it moves: inside a bound
        # loop, `v < hi` holds for the loop's own iterations, not for the units past its end)
        return (tensor, LibraryPass("shared caches", "simplify (after registers)",
                            lambda stmt, request: cooperative_copies(stmt, request, GpuGrid()), always=True),
                LibraryPass("atomic updates", "simplify (after registers)", atomic_updates, always=True))


GPU = GpuLibrary()
