"""Tests marked `@pytest.mark.avx512` execute AVX-512 code: skipped, with the reason, on a
CPU whose /proc/cpuinfo does not list avx512f (the code is still emitted and compiled)."""
from __future__ import annotations

import pytest


def _cpu_has_avx512f() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split(":", 1)[1].split()
    except OSError:
        pass
    return False


def pytest_collection_modifyitems(config, items):
    if _cpu_has_avx512f():
        return
    skip = pytest.mark.skip(reason="executes AVX-512 code: this CPU lacks avx512f (/proc/cpuinfo)")
    for item in items:
        if "avx512" in item.keywords:
            item.add_marker(skip)
