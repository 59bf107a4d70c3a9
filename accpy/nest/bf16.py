"""bfloat16 data for numpy: arrays of bfloat16 travel as their 16-bit patterns (numpy uint16, as
numpy has no bfloat16 type); these convert float arrays to patterns and back, rounding as accpy's
kernels do (nearest even; NaN stays a quiet NaN; denormals kept)."""
from __future__ import annotations

import numpy as np


def bfloat16_bits(values) -> np.ndarray:
    """float values (through float32) rounded to bfloat16: their 16-bit patterns (uint16)."""
    u = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    out = np.where(nan, (u >> 16) | 0x40, (u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    return out.astype(np.uint16)


def bfloat16_values(bits) -> np.ndarray:
    """The float32 values bfloat16 patterns (uint16) stand for."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)
