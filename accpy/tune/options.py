"""`acc.tune`'s numeric and flag arguments, checked before anything is built."""
from __future__ import annotations

import math
import numbers
from typing import Optional


def _real(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"{name}: expected a number, got {v!r}")
    return float(v)


def seconds(name: str, v, allow_inf: bool) -> Optional[float]:
    """A time limit or duration: finite and > 0 (or inf, meaning no limit: None, where allowed)."""
    x = _real(name, v)
    if allow_inf and x == math.inf:
        return None
    if not math.isfinite(x) or x <= 0:
        more = " or float('inf') for no limit" if allow_inf else ""
        raise ValueError(f"{name}: expected a finite number of seconds > 0{more}, got {v!r}")
    return x


def count(name: str, v, least: int) -> int:
    """An integer >= `least` (not a bool)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < least:
        raise ValueError(f"{name}: expected an integer >= {least}, got {v!r}")
    return int(v)


def check_options(*, repeats, warmup, min_time, timeout, build_timeout, tolerance, seed, check, retry_failed,
                  progress, label) -> dict:
    """The options as tuning uses them (time limits of inf as None), or ValueError naming the argument."""
    tol = _real("tolerance", tolerance)
    if not math.isfinite(tol) or tol < 0:
        raise ValueError(f"tolerance: expected a finite number >= 0, got {tolerance!r}")
    for name, v in (("check", check), ("retry_failed", retry_failed), ("progress", progress)):
        if not isinstance(v, bool):
            raise ValueError(f"{name}: expected True or False, got {v!r}")
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise ValueError(f"label: expected a non-empty string, got {label!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed: expected an integer, got {seed!r}")
    return {"repeats": count("repeats", repeats, 1), "warmup": count("warmup", warmup, 0),
            "min_time": seconds("min_time", min_time, allow_inf=False),
            "timeout": seconds("timeout", timeout, allow_inf=True),
            "build_timeout": seconds("build_timeout", build_timeout, allow_inf=True),
            "tolerance": tol, "seed": int(seed)}
