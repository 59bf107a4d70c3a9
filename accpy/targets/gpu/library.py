"""The GPU target library: a GPU target's grid (plan.bind), its kernels' dialects and host runtime.
Kernels are written in OpenCL C and run through the OpenCL runtime from a package (any OpenCL
device: PoCL on a CPU, a GPU's own OpenCL driver); the same IR gives CUDA C for nvcc
(accpy.targets.gpu.source)."""
from __future__ import annotations

from ..features import Category
from ..library import LibraryPass, TargetLibrary
from .grid import GpuGrid
from .shared import atomic_updates, cooperative_copies


class GpuLibrary(TargetLibrary):
    """Blocks and threads of GPU targets (Category.GPU)."""

    name = "gpu"

    def applies_to(self, target) -> bool:
        return getattr(target, "category", None) is Category.GPU

    def grid(self, target):
        return GpuGrid()

    def lowering_passes(self) -> tuple:
        # last (after the final simplification, which would drop the guards it moves: inside a bound
        # loop, `v < hi` holds for the loop's own iterations, not for the units past its end)
        return (LibraryPass("shared caches", "simplify (after registers)",
                            lambda stmt, request: cooperative_copies(stmt, request, GpuGrid()), always=True),
                LibraryPass("atomic updates", "simplify (after registers)", atomic_updates, always=True))


GPU = GpuLibrary()
