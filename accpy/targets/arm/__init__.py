"""AArch64 as a target library: the Neon vector ISA (neon.py: 128-bit lanes of every type, FMLA,
the SDOT / UDOT / USDOT dot products), SVE at a fixed vector length with predicated tails (sve.py), its toolchain (toolchain.py: the cross compiler and qemu on other machines)
and running a built package's functions under emulation (emulate.py).

    plan = schedule.create_plan(acc.Target("ARMv8.2-A"))   # Neon with dot products
    lib = package.build("mm", output_dir=out)              # cross-compiled: .c .h .hat .so .a
    C, = run_under_emulation(out, "mm", [A, B, C])[2:]     # run under qemu, results back as numpy
"""
from __future__ import annotations

from typing import Optional

from ...ir.types import ScalarType
from ..features import Architecture
from ..library import TargetLibrary, VectorISA, register_library
from .emulate import run_calls, run_under_emulation
from .neon import DOT_FEATURES, DOT_PRODUCTS, OPERANDS, PRELUDE, SHAPES, shape_for
from .sve import _TYPES as SVE_TYPES
from .sve import prelude as sve_prelude
from .sve import sve_shape, uses_sve
from .toolchain import AARCH64_TOOLCHAIN, AArch64Toolchain, aarch64_toolchain


class NeonLibrary(TargetLibrary):
    """AArch64's vector ISAs behind the target interface: Neon, and SVE at a fixed vector length for
    targets whose `vector_bytes` is wider than Neon's 16 (sve.py); and AArch64's toolchain."""

    name = "AArch64 Neon"

    def applies_to(self, target) -> bool:
        return target.architecture is Architecture.AARCH64 and target.has("asimd") and target.vector_bytes >= 16

    def vector_shape(self, target, dtype: ScalarType) -> Optional[VectorISA]:
        if uses_sve(target) and dtype in SVE_TYPES:
            return sve_shape(dtype, target.vector_bytes)
        return shape_for(target, dtype)

    def vector_shape_of(self, dtype: ScalarType, lanes: int, target=None) -> Optional[VectorISA]:
        if target is not None and uses_sve(target):
            isa = sve_shape(dtype, target.vector_bytes)
            if isa is not None and isa.lanes == lanes:
                return isa
        for isa in (SHAPES.get(dtype), OPERANDS.get(dtype)):
            if isa is not None and isa.lanes == lanes:
                return isa
        return None

    def lane_shape(self, target, dtype: ScalarType, lanes: int) -> Optional[VectorISA]:
        isa = self.vector_shape(target, dtype)
        if isa is None or isa.lanes != lanes or (uses_sve(target) and isa.name != "sve"):
            return None  # (SVE and Neon registers do not meet in one loop)
        return isa

    def supports_vector_op(self, target, dtype: ScalarType, op: str) -> bool:
        if op in DOT_FEATURES:
            return (dtype is next(p.acc for p in DOT_PRODUCTS if p.op == op)
                    and all(target.has(f) for f in DOT_FEATURES[op]))
        isa = self.vector_shape(target, dtype)
        return isa is not None and isa.template(op) is not None

    def dot_products(self, target=None) -> tuple:
        if target is None:
            return DOT_PRODUCTS
        return tuple(p for p in DOT_PRODUCTS if self.supports_vector_op(target, p.acc, p.op))

    def vector_prelude(self, target) -> str:
        return PRELUDE + (sve_prelude(target.vector_bytes) if uses_sve(target) else "")

    def toolchain(self, target):
        return aarch64_toolchain(target)


NEON = register_library(NeonLibrary())

__all__ = ["AARCH64_TOOLCHAIN", "AArch64Toolchain", "NEON", "NeonLibrary", "run_calls", "run_under_emulation"]
