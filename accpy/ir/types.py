"""Scalar element types: their C spelling, numpy dtype, and the implicit-widening rules."""
from __future__ import annotations

import enum

import numpy as np


class ScalarType(enum.Enum):
    """Element types of arrays and expressions (Accera's `ScalarType`)."""

    bool = "bool"
    int8 = "int8"
    int16 = "int16"
    int32 = "int32"
    int64 = "int64"
    uint8 = "uint8"
    uint16 = "uint16"
    uint32 = "uint32"
    uint64 = "uint64"
    float16 = "float16"
    bfloat16 = "bfloat16"
    float32 = "float32"
    float64 = "float64"
    index = "index"  # loop counters and runtime sizes: int64 in C

    # -- classification -------------------------------------------------------------
    @property
    def is_float(self) -> bool:
        """True for the floating-point types (float16, bfloat16, float32, float64)."""
        return self in _FLOATS

    @property
    def is_int(self) -> bool:
        """True for the integer types, `index` included."""
        return self in _SIGNED or self in _UNSIGNED or self is ScalarType.index

    @property
    def is_signed(self) -> bool:
        """True for the signed integer types, `index` and the floating-point types."""
        return self in _SIGNED or self is ScalarType.index or self.is_float

    @property
    def bits(self) -> int:
        """Width of one element in bits."""
        return _BITS[self]

    @property
    def c_name(self) -> str:
        """The C spelling of the type in generated code (e.g. `float`, `int32_t`)."""
        return _C_NAMES[self]

    @property
    def hat_name(self) -> str:
        """The element-type spelling of the HAT format."""
        return _HAT_NAMES.get(self, self.c_name)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of arrays of this type (bfloat16 travels as its raw uint16 bits)."""
        if self is ScalarType.bfloat16:
            # numpy has no bfloat16: arrays of it travel as their raw 16-bit patterns
            return np.dtype(np.uint16)
        return np.dtype(_NP_NAMES[self])

    @staticmethod
    def from_dtype(dtype) -> "ScalarType":
        """The ScalarType of a numpy dtype; TypeError when accpy has none."""
        dt = np.dtype(dtype)
        for t, name in _NP_NAMES.items():
            if t is not ScalarType.index and np.dtype(name) == dt:
                return t
        raise TypeError(f"element type {dt} has no accpy ScalarType")

    def __repr__(self) -> str:
        return f"ScalarType.{self.name}"


_SIGNED = {ScalarType.int8, ScalarType.int16, ScalarType.int32, ScalarType.int64}
_UNSIGNED = {ScalarType.uint8, ScalarType.uint16, ScalarType.uint32, ScalarType.uint64}
_FLOATS = {ScalarType.float16, ScalarType.bfloat16, ScalarType.float32, ScalarType.float64}
_BITS = {
    ScalarType.bool: 8, ScalarType.int8: 8, ScalarType.int16: 16, ScalarType.int32: 32,
    ScalarType.int64: 64, ScalarType.uint8: 8, ScalarType.uint16: 16, ScalarType.uint32: 32,
    ScalarType.uint64: 64, ScalarType.float16: 16, ScalarType.bfloat16: 16,
    ScalarType.float32: 32, ScalarType.float64: 64, ScalarType.index: 64,
}
_C_NAMES = {
    ScalarType.bool: "bool", ScalarType.int8: "int8_t", ScalarType.int16: "int16_t",
    ScalarType.int32: "int32_t", ScalarType.int64: "int64_t", ScalarType.uint8: "uint8_t",
    ScalarType.uint16: "uint16_t", ScalarType.uint32: "uint32_t", ScalarType.uint64: "uint64_t",
    ScalarType.float16: "_Float16", ScalarType.bfloat16: "uint16_t", ScalarType.float32: "float",
    ScalarType.float64: "double", ScalarType.index: "int64_t",
}
_HAT_NAMES = {ScalarType.float16: "float16_t", ScalarType.bfloat16: "bfloat16_t"}
_NP_NAMES = {
    ScalarType.bool: "bool", ScalarType.int8: "int8", ScalarType.int16: "int16",
    ScalarType.int32: "int32", ScalarType.int64: "int64", ScalarType.uint8: "uint8",
    ScalarType.uint16: "uint16", ScalarType.uint32: "uint32", ScalarType.uint64: "uint64",
    ScalarType.float16: "float16", ScalarType.float32: "float32", ScalarType.float64: "float64",
    ScalarType.index: "int64",
}


def widens_to(src: ScalarType, dst: ScalarType) -> bool:
    """True when every value of `src` is exactly representable in `dst` (an implicit cast)."""
    if src is dst:
        return True
    if src is ScalarType.index:
        src = ScalarType.int64
    if dst is ScalarType.index:
        dst = ScalarType.int64
    if src is dst:
        return True
    if src is ScalarType.bool:
        return True
    if dst is ScalarType.bool:
        return False
    if src.is_float:
        if not dst.is_float:
            return False
        if src is ScalarType.bfloat16:
            return dst in (ScalarType.float32, ScalarType.float64)
        return dst.bits > src.bits and dst is not ScalarType.bfloat16
    if dst.is_float:
        # integers convert exactly when they fit in the mantissa
        mantissa = {ScalarType.float16: 11, ScalarType.bfloat16: 8, ScalarType.float32: 24,
                    ScalarType.float64: 53}[dst]
        return src.bits < mantissa
    # integer to integer
    if src.is_signed == dst.is_signed:
        return dst.bits > src.bits
    if not src.is_signed and dst.is_signed:
        return dst.bits > src.bits
    return False


def common_type(a: ScalarType, b: ScalarType) -> ScalarType | None:
    """The type two operands meet at by implicit widening, or None if they need a cast."""
    if widens_to(a, b):
        return b
    if widens_to(b, a):
        return a
    return None


def int_range(t: ScalarType) -> tuple[int, int]:
    """Inclusive value range of an integer type."""
    if t is ScalarType.bool:
        return 0, 1
    if t is ScalarType.index:
        t = ScalarType.int64
    if t.is_signed:
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1
