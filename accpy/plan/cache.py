"""`Cache`: a plan's request for a local copy of an array's active block (Accera's model).

With loop order (d1, ..., dn), the key-slice of index dp is the set of iterations that
share d1..d(p-1); its level is n - p + 1. The active block of an array at a key-slice
is the smallest box holding every element the slice touches. A cache holds that block
in its own layout: filled when the slice starts, written back (mutable arrays only)
when it ends. The lowering is accpy/lower/cache.py.
"""
from __future__ import annotations

from typing import Optional

from ..ir.types import ScalarType
from ..targets.memory_space import MemorySpace  # noqa: F401  (re-exported: acc.MemorySpace)


def _buffer_or_none(array):
    from ..nest.parameters import UnresolvedParameter

    try:
        return array.buffer
    except UnresolvedParameter:
        return None  # a handle of a plan still waiting for parameter values


class Cache:
    """The handle `Plan.cache` returns; usable as the source of another (inner) cache."""

    def __init__(self, plan, source, index, level, trigger_index, trigger_level, max_elements, layout,
                 element_type, thrifty, location, double_buffer):
        """Made by `Plan.cache` (arguments already checked there)."""
        self.plan = plan
        self.source = source  # an Array or an outer Cache
        self.index = index
        self.level = level
        self.trigger_index = trigger_index
        self.trigger_level = trigger_level
        self.max_elements = max_elements
        self.layout = layout
        self.element_type: Optional[ScalarType] = element_type
        self.thrifty = thrifty
        self.location = location
        self.double_buffer = double_buffer
        # the IR buffer of an Array source, taken when the cache is made (with the
        # parameter values of its plan in effect)
        self.source_buffer = None if isinstance(source, Cache) else _buffer_or_none(source)

    @property
    def array(self):
        """The array this cache (or the cache it copies) finally stands for."""
        s = self.source
        while isinstance(s, Cache):
            s = s.source
        return s

    @property
    def role(self):
        """The role (INPUT, INPUT_OUTPUT, ...) of the cached array."""
        return self.array.role

    @property
    def budget(self) -> bool:
        """True when the cache was placed by an element budget (`max_elements`)."""
        return self.max_elements is not None

    def __repr__(self) -> str:
        """`Cache(source, index=... | level=... | max_elements=...)`."""
        where = (f"index={self.index.name}" if self.index is not None else
                 f"level={self.level}" if self.level is not None else f"max_elements={self.max_elements}")
        src = self.source.name if not isinstance(self.source, Cache) else repr(self.source)
        return f"Cache({src}, {where})"
