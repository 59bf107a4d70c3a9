"""Plain types of arrays that need nothing of them: `Shape` (an array's sizes), `AllocateFlags`
and the layouts (`Array.Layout`). accpy/nest/array.py re-exports them."""
from __future__ import annotations

import enum

import numpy as np


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


class GroupedLayout:
    """A cache layout (`Array.Layout.grouped(group_bytes)`): first-major, with the rows of the
    second-to-last dimension taken in groups and each group interleaved into the last dimension,
    so that element [.., r, c] sits next to [.., r + 1, c] within its group: the order in which
    dot-product and tile instructions read their second operand (a group of consecutive k values
    per lane). `group_bytes`: bytes per group, a multiple of the cache's element size
    (`plan.cache` checks); None: the group the target's instructions read for the cache's
    element type (its libraries say which, `operand_group`; none: groups of one element, plain
    first-major).
    `Array.Layout.VNNI` is `Array.Layout.grouped()`."""

    __slots__ = ("group_bytes",)

    def __init__(self, group_bytes=None):
        if group_bytes is not None and (isinstance(group_bytes, (bool, np.bool_))
                                        or not isinstance(group_bytes, (int, np.integer)) or group_bytes < 1):
            raise ValueError(f"group_bytes: expected a positive int (bytes per group) or None (the target's "
                             f"group), got {type(group_bytes).__name__} {group_bytes!r}")
        object.__setattr__(self, "group_bytes", None if group_bytes is None else int(group_bytes))

    def __setattr__(self, name, value):
        raise AttributeError("Array.Layout.grouped(...) is immutable")

    def __eq__(self, other):
        return isinstance(other, GroupedLayout) and other.group_bytes == self.group_bytes

    def __hash__(self):
        return hash(("grouped", self.group_bytes))

    @property
    def name(self) -> str:
        """`grouped()` or `grouped(8)` (as plan descriptions show it)."""
        return f"grouped({'' if self.group_bytes is None else self.group_bytes})"

    def __repr__(self) -> str:
        return f"acc.Array.Layout.{self.name}"  # (as code: replay files write it so)

    def to_numpy_order(self):
        """None: no numpy order stores the groups."""
        return None


class _Layout(enum.Enum):
    """`Array.Layout`: FIRST_MAJOR (row-major), LAST_MAJOR (column-major), DEFERRED (a CONST
    array stored as a cache lays it out); for caches also `grouped(group_bytes)` (`GroupedLayout`)
    and its alias `VNNI`."""

    FIRST_MAJOR = "first_major"
    LAST_MAJOR = "last_major"
    DEFERRED = "deferred"

    @staticmethod
    def grouped(group_bytes=None) -> GroupedLayout:
        """A cache layout whose rows are kept in groups of `group_bytes` (None: the target's group)
        interleaved into the columns (`GroupedLayout`): `plan.cache(B, ..., layout=Array.Layout.grouped())`."""
        return GroupedLayout(group_bytes)

    def to_numpy_order(self):
        """numpy's `order` for this layout ("C" first-major, "F" last-major), else None (Accera's)."""
        return {"first_major": "C", "last_major": "F"}.get(self.value)


# the name the x86 instruction set gives the grouped order (4 int8 / 2 bfloat16 per 32-bit lane):
# the target's group, whichever target
_Layout.VNNI = GroupedLayout()
