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
from ..library import TargetLibrary
from ..vector_isa import VectorISA, VectorShape
from .emulate import run_calls, run_under_emulation
from .neon import DOT_FEATURES, DOT_PRODUCTS, OPERANDS, PRELUDE, SHAPES, shape_for
from .sve import _TYPES as SVE_TYPES
from .sve import prelude as sve_prelude
from .sve import sve_shape, uses_sve
from .toolchain import AARCH64_TOOLCHAIN, AArch64Toolchain, aarch64_toolchain


class ArmVectorISA(VectorISA):
    """AArch64's vector ISA on one target: Neon, or SVE at the target's fixed vector length when its
    `vector_bytes` is wider than Neon's 16 (sve.py: scalable shapes, predicated tails); SVE and Neon
    registers do not meet in one loop."""

    name = "AArch64 Neon"

    def __init__(self, target=None):
        super().__init__(target)
        self.sve = uses_sve(target)
        if self.sve:
            self.name = "AArch64 SVE"

    def shape(self, dtype: ScalarType) -> Optional[VectorShape]:
        if self.sve and dtype in SVE_TYPES:
            return sve_shape(dtype, self.target.vector_bytes)
        return shape_for(self.target, dtype)

    def lane_shape(self, dtype: ScalarType, lanes: int) -> Optional[VectorShape]:
        isa = self.shape(dtype)
        if isa is None or isa.lanes != lanes or (self.sve and isa.name != "sve"):
            return None
        return isa

    def shape_of(self, dtype: ScalarType, lanes: int) -> Optional[VectorShape]:
        if self.sve:
            isa = sve_shape(dtype, self.target.vector_bytes)
            if isa is not None and isa.lanes == lanes:
                return isa
        for isa in (SHAPES.get(dtype), OPERANDS.get(dtype)):
            if isa is not None and isa.lanes == lanes:
                return isa
        return None

    def supports(self, dtype: ScalarType, op: str) -> bool:
        if op in DOT_FEATURES:
            return (dtype is next(p.acc for p in DOT_PRODUCTS if p.op == op)
                    and all(self.target.has(f) for f in DOT_FEATURES[op]))
        return super().supports(dtype, op)

    def dot_products(self) -> tuple:
        return tuple(p for p in DOT_PRODUCTS if self.supports(p.acc, p.op))

    def prelude(self) -> str:
        return PRELUDE + (sve_prelude(self.target.vector_bytes) if self.sve else "")


class NeonLibrary(TargetLibrary):
    """AArch64's vector ISAs behind the target interface (`ArmVectorISA`: Neon, and SVE at a fixed
    vector length), and AArch64's toolchain."""

    name = "AArch64 Neon"

    def applies_to(self, target) -> bool:
        return target.architecture is Architecture.AARCH64 and target.has("asimd") and target.vector_bytes >= 16

    def vector_isa(self, target) -> ArmVectorISA:
        return ArmVectorISA(target)

    def dot_products(self, target=None) -> tuple:
        return DOT_PRODUCTS if target is None else ArmVectorISA(target).dot_products()

    def toolchain(self, target):
        return aarch64_toolchain(target)


NEON = NeonLibrary()  # registered by registry.py

__all__ = ["AARCH64_TOOLCHAIN", "AArch64Toolchain", "ArmVectorISA", "NEON", "NeonLibrary", "run_calls",
           "run_under_emulation"]
