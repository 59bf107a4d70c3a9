"""The built-in target libraries, registered here, once, in this order (the order `Target.libraries`
lists them in, and in which a target takes the first vector ISA and toolchain one gives):

1. x86 vectors (x86.py: AVX-512 and AVX2 shapes, x86's dot products, x86's toolchain), joined by
2. x86 narrow integers in lanes of their own width (x86narrow.py) and
3. x86 SSE4.1 16-byte shapes (x86sse.py);
4. the x86 tile unit, and its functional model (x86tile/);
5. Gemmini (gemmini/);
6. AArch64: Neon, and SVE at a fixed vector length, with its cross toolchain (arm/);
7. GPUs: the grid of blocks and threads, kernels in OpenCL C and CUDA C (gpu/).

A library module defines its library and registers nothing when imported; `accpy.targets` imports
this module. A user's own library is registered with `register_library(MyLibrary())` (library.py)
and comes after these. Registering the same library object again changes nothing.
"""
from __future__ import annotations

from . import x86, x86narrow, x86sse
from .arm import NEON
from .gemmini import GEMMINI
from .gpu.library import GPU
from .library import register_library
from .x86tile import X86TILE, X86TILE_MODEL

#: the built-in libraries, in registration order
BUILTIN_LIBRARIES = (x86.X86_VECTOR, X86TILE, X86TILE_MODEL, GEMMINI, NEON, GPU)


def register_builtin_libraries() -> None:
    """Join x86's narrow and SSE shapes to its vector ISA and register the built-in libraries, in
    order (again: nothing changes)."""
    x86.add_shapes(x86narrow.SHAPES, narrow=True)
    x86.add_shapes(x86sse.SHAPES)
    for lib in BUILTIN_LIBRARIES:
        register_library(lib)


register_builtin_libraries()
