"""Plain types of arrays that need nothing of them: `Shape` (an array's sizes), `AllocateFlags`
and the layouts (`Array.Layout`). accpy/nest/array.py re-exports them."""
from __future__ import annotations

import enum


class Shape(list):
    """An array's shape: a list, as Accera's `Array.shape` (`A.shape + [M, N]`, `M, N = A.shape`),
    that also equals a tuple of the same sizes (`A.shape == (2, 3)`) and hashes like one. It is a
    copy: changing it does not change the array."""

    def __eq__(self, other):
        return list.__eq__(self, list(other) if isinstance(other, tuple) else other)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):  # type: ignore[override]
        return hash(tuple(self))

    def __add__(self, other):
        if isinstance(other, (list, tuple)):
            return Shape(list(self) + list(other))
        return NotImplemented

    def __radd__(self, other):
        # `(1,) + A.shape` gives a tuple (as when shapes were tuples); `[1] + A.shape` a list
        if isinstance(other, tuple):
            return other + tuple(self)
        if isinstance(other, list):
            return Shape(list(other) + list(self))
        return NotImplemented


class AllocateFlags(enum.Flag):
    """Accera's allocation flags for `Array(..., flags=)`. For TEMP arrays accpy honours HEAP
    (allocated on the heap whatever its size) and STACK (a local array, as accpy already places
    fixed-size temporaries of at most 64 KiB; larger ones stay on the heap, where they cannot
    overflow the stack). GLOBAL and THREAD_LOCAL are accepted as hints: a TEMP array lives for one
    call and is shared by the threads of a parallel loop (the race check refuses a parallel loop
    whose iterations write the same element). On other roles the flags are hints."""

    NONE = 0
    GLOBAL = 1
    STACK = 2
    HEAP = 4
    THREAD_LOCAL = 8


class _Layout(enum.Enum):
    FIRST_MAJOR = "first_major"
    LAST_MAJOR = "last_major"
    DEFERRED = "deferred"
    # a cache layout: first-major, with the rows of the second-to-last dimension in groups of
    # 32 bits' worth (4 int8 / 2 bfloat16) interleaved into the last one, as the dot-product
    # instructions read their second operand (VNNI order)
    VNNI = "vnni"

    def to_numpy_order(self):
        """numpy's `order` for this layout ("C" first-major, "F" last-major), else None (Accera's)."""
        return {"first_major": "C", "last_major": "F"}.get(self.value)
