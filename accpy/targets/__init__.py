"""Targets: the host CPU, known CPU models and accelerators, as data (see target.py, models.py),
and the target libraries behind one interface (library.py): the x86 vector ISA (x86.py, its
16-byte shapes in x86sse.py, narrow integers' lanes in x86narrow.py), the x86 tile unit and VNNI /
BF16 dot products (x86tile/), Gemmini (gemmini/), AArch64's Neon and SVE with its cross toolchain
(arm/), and GPUs' models and enumerations (gpu/). Importing this package registers the built-in
libraries, in registry.py's order."""
from . import registry  # noqa: F401  (registers the built-in libraries)
from .library import TargetLibrary, libraries, register_library
from .memory_space import MemorySpace
from .gpu import GridUnit, MMAFragmentOp, MMASchedulingPolicy, MMAShape, OpenCLDeviceError, TensorCoreInfo
from .models import Model
from .target import Architecture, Category, Runtime, Target, host_target, opencl_device_target

Target.Category = Category  # type: ignore[attr-defined]
Target.Architecture = Architecture  # type: ignore[attr-defined]
Target.Runtime = Runtime  # type: ignore[attr-defined]
Target.Model = Model  # type: ignore[attr-defined]
Target.MemorySpace = MemorySpace  # type: ignore[attr-defined]
Target.GridUnit = GridUnit  # type: ignore[attr-defined]  # Accera's target.GridUnit (plan.bind's units)
# `acc.Target.HOST`: this machine, read once at import; sealed (shared by every plan without a target)
Target.HOST = host_target()._seal()  # type: ignore[attr-defined]

__all__ = ["Architecture", "Category", "GridUnit", "MMAFragmentOp", "MMASchedulingPolicy", "MMAShape", "MemorySpace",
           "Model", "OpenCLDeviceError", "Runtime", "Target", "TargetLibrary", "TensorCoreInfo", "host_target",
           "libraries", "opencl_device_target", "register_library"]
