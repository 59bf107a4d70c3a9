"""The GPU target library: a GPU target's grid (plan.bind), its kernels' dialects and host runtime.
Kernels are written in OpenCL C and run through the OpenCL runtime from a package (any OpenCL
device: PoCL on a CPU, a GPU's own OpenCL driver); the same IR gives CUDA C for nvcc
(accpy.targets.gpu.cuda: a package for a CUDA target also writes <name>.cu)."""
from __future__ import annotations

from ..features import Category
from ..library import LibraryPass, TargetLibrary
from .cuda import companion_grids
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
