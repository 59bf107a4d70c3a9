"""`acc.CacheStrategy` and `acc.AUTO`: Accera's names for how the threads that fill a cache together
share the copy (`plan.cache(..., strategy=...)`).

Accera uses a strategy only on GPU targets, where the threads of a block copy a shared-memory
cache cooperatively: BLOCKED gives each thread one contiguous run of the elements (with 100
elements and 10 threads, thread 0 copies [0, 10), thread 1 [10, 20), ...); STRIPED deals the
elements out round-robin in runs of the vector width (thread 0 copies [0, 2), [20, 22), ...).
On a CPU, Accera accepts only AUTO (its default) and raises ValueError for the others; accpy, whose
targets are CPUs and accelerators, does the same (accpy/plan/cache.py). A CPU cache is filled by
the thread that runs its key-slice, so no strategy applies.
"""
from __future__ import annotations

import enum


class CacheStrategy(enum.Enum):
    """How the threads of a GPU block share a cache's copy (Accera's enum; GPU targets only)."""

    BLOCKED = "blocked"  # each thread copies one contiguous run
    STRIPED = "striped"  # runs of the vector width dealt out round-robin


class _Auto:
    """`acc.AUTO`: let accpy choose (Accera's constant, the default of `plan.cache`'s `strategy`)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "AUTO"

    def __reduce__(self):
        return (_Auto, ())


AUTO = _Auto()
