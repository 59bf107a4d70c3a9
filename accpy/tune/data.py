"""Arguments for measuring a variant (random, reproducible from a seed) and the check of its outputs."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..package.signature import KIND_ARRAY, KIND_DIM


def argument_specs(infos: list) -> list:
    """Plain, picklable descriptions of a function's arguments (from its ArgInfos)."""
    out = []
    for i in infos:
        dtype = "uint16" if i.dtype.name == "bfloat16" else i.dtype.dtype.name
        out.append((i.name, i.kind, dtype, tuple(i.shape), i.layout, tuple(i.strides), i.role))
    return out


def _random(rng: np.random.Generator, dtype: np.dtype, size: int) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(size).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size).astype(bool)
    # small integers: sums of products stay far from overflow in wide accumulators
    lo, hi = (0, 16) if dtype.kind == "u" else (-8, 8)
    return rng.integers(lo, hi, size).astype(dtype)


def make_arguments(specs: list, seed: int, data: Optional[Callable] = None) -> list:
    """One value per argument: `data(seed)` if given, else random arrays in the declared layout.

    Scalars get a value in [0.25, 1) (floats) or 1 (integers); runtime dimensions need `data`.
    """
    if data is not None:
        values = list(data(seed))
        if len(values) != len(specs):
            raise ValueError(f"data: returned {len(values)} values for {len(specs)} arguments "
                             f"({', '.join(s[0] for s in specs)})")
        return values
    rng = np.random.default_rng(seed)
    out = []
    for name, kind, dtype, shape, layout, strides, _role in specs:
        dt = np.dtype(dtype)
        if kind == KIND_DIM or any(isinstance(s, str) for s in shape):
            raise ValueError(f"data: argument {name} has a runtime size; pass data=callable(seed) that returns "
                             f"every argument's value")
        if kind != KIND_ARRAY:
            out.append(dt.type(rng.uniform(0.25, 1.0)) if dt.kind == "f" else dt.type(1))
            continue
        n = int(np.prod(shape)) if shape else 1
        if layout == "S" and strides:
            # explicit strides: a view on a buffer that spans them (the gaps hold random values too)
            extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
            base = _random(rng, dt, extent)
            out.append(np.lib.stride_tricks.as_strided(base, shape, tuple(s * dt.itemsize for s in strides)))
            continue
        arr = _random(rng, dt, n).reshape(shape)
        out.append(np.asfortranarray(arr) if layout == "F" else np.ascontiguousarray(arr))
    return out


def compare_outputs(specs: list, got: list, want: list, tolerance: float) -> str:
    """'' when every written argument matches (floats: relative to the largest magnitude), else why not."""
    for (name, kind, dtype, *_rest, role), g, w in zip(specs, got, want):
        if kind != KIND_ARRAY or role not in ("input_output", "output"):
            continue
        g, w = np.asarray(g), np.asarray(w)
        if np.dtype(dtype).kind == "f" and dtype != "uint16":
            scale = max(float(np.max(np.abs(w))) if w.size else 0.0, 1.0)
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            bad = ~(diff <= tolerance * scale)
            if bad.any():
                at = tuple(int(x) for x in np.argwhere(bad)[0])
                return (f"{name}{list(at)} = {g[at]!r}, the reference says {w[at]!r} "
                        f"(max relative error {float(np.nanmax(diff)) / scale:.2e} > tolerance {tolerance:g})")
        elif not np.array_equal(g, w):
            at = tuple(int(x) for x in np.argwhere(g != w)[0])
            return f"{name}{list(at)} = {g[at]!r}, the reference says {w[at]!r} (integers must be equal)"
    return ""

