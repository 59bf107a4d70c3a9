"""The GPU target library: a GPU target's grid (plan.bind), its kernels' dialects and host runtime.
Kernels are written in OpenCL C and run through the OpenCL runtime from a package (any OpenCL
device: PoCL on a CPU, a GPU's own OpenCL driver); the same IR gives CUDA C for nvcc
(accpy.targets.gpu.source)."""
from __future__ import annotations

from ..features import Category
from ..library import TargetLibrary
from .grid import GpuGrid


class GpuLibrary(TargetLibrary):
    """Blocks and threads of GPU targets (Category.GPU)."""

    name = "gpu"

    def applies_to(self, target) -> bool:
        return getattr(target, "category", None) is Category.GPU

    def grid(self, target):
        return GpuGrid()


GPU = GpuLibrary()
