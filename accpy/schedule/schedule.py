"""`Schedule`: Accera's split / tile / reorder / skew / pad on the iteration-space model."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..nest.logic import Index
from ..nest.naming import assigned_names
from .space import IterationSpace


def _is_size(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _same(a, b) -> bool:
    return a is b


class Schedule:
    """The execution order of a nest: a box of ordered dimensions (see `IterationSpace`)."""

    def __init__(self, nest=None, space: Optional[IterationSpace] = None):
        self._nest = nest
        self._space = space if space is not None else IterationSpace.of_nest(nest)

    # -- model ----------------------------------------------------------------------------
    @property
    def space(self) -> IterationSpace:
        return self._space

    @property
    def nests(self) -> list:
        return [p.nest for p in self._space.parts]

    def default_schedule(self) -> "Schedule":
        """The same logic in its original order (the oracle DEBUG mode compares against)."""
        return Schedule(self._nest)

    def get_indices(self) -> list:
        return [d.index for d in self._space.dims]

    def get_shape(self) -> list:
        return self._space.shape()

    def _known(self, index, what="index") -> int:
        if not isinstance(index, Index):
            raise TypeError(f"{what}: expected an index of this schedule, got {type(index).__name__} {index!r}")
        k = self._space.position(index)
        if k is None:
            raise ValueError("Unknown index!")
        return k

    def _fresh_name(self, base: str) -> str:
        taken = {d.name for d in self._space.dims}
        if base not in taken:
            return base
        n = 2
        while f"{base}{n}" in taken:
            n += 1
        return f"{base}{n}"

    # -- transforms -------------------------------------------------------------------------
    def split(self, index, size) -> Index:
        """Split `index` by `size`: the outer keeps the handle; the new inner index follows it."""
        self._known(index)
        if not _is_size(size) or size < 1:
            raise ValueError("Split sizes must be integers >= 1")
        self._check_splittable(index)
        names = assigned_names()
        base = names[0] if len(names) == 1 else index.name + index.name[-1]
        inner = Index(self._fresh_name(base))
        self._space = self._space.split(index, int(size), inner)
        return inner

    def _check_splittable(self, index) -> None:
        """Hook for fused schedules (the fusing index cannot be split)."""

    def tile(self, shape: dict) -> tuple:
        """Split each key of `shape` by its value, in dict order; returns the inner indices."""
        if not isinstance(shape, dict):
            raise TypeError(f"shape: expected a dict {{index: size}}, got {type(shape).__name__}")
        for ix, s in shape.items():
            self._known(ix)
            if not _is_size(s) or s < 1:
                raise ValueError("Split sizes must be integers >= 1")
        names = assigned_names()
        out = []
        saved = self._space
        try:
            for n, (ix, s) in enumerate(shape.items()):
                base = names[n] if len(names) == len(shape) else ix.name + ix.name[-1]
                inner = Index(self._fresh_name(base))
                self._space = self._space.split(ix, int(s), inner)
                out.append(inner)
        except Exception:
            self._space = saved
            raise
        return tuple(out)

    def reorder(self, order=None, *args) -> None:
        """`reorder(i, j, k)` or `reorder(order=(i, j, k))`; on error the order is unchanged."""
        if order is None:
            indices = tuple(args)
        elif isinstance(order, (tuple, list)):
            if args:
                raise ValueError("reorder: give the indices either as arguments or as order=(...), not both")
            indices = tuple(order)
        else:
            indices = (order,) + tuple(args)
        problem = self._order_problem(indices)
        if problem:
            raise ValueError(problem)
        self._space = self._space.reorder(indices)

    def is_valid_loop_order(self, *order) -> bool:
        if len(order) == 1 and isinstance(order[0], (tuple, list)):
            order = tuple(order[0])
        return self._order_problem(order) is None

    def _order_problem(self, indices) -> Optional[str]:
        n = len(self._space.dims)
        if len(indices) != n:
            return f"Expected {n} indices, but got {len(indices)}"
        for ix in indices:
            if not isinstance(ix, Index) or self._space.position(ix) is None:
                return f"Unknown index {ix!r} in the order"
        for a in range(n):
            for b in range(a + 1, n):
                if indices[a] is indices[b]:
                    return f"Index {indices[a].name} appears twice in the order"
        pos = {id(ix): k for k, ix in enumerate(indices)}
        for d in self._space.dims:
            if d.parent is not None and pos[id(d.parent)] > pos[id(d.index)]:
                return (f"Invalid order: the inner index {d.index.name} (split from {d.parent.name}) "
                        f"must come after {d.parent.name}")
        return self._extra_order_problem(indices, pos)

    def _extra_order_problem(self, indices, pos) -> Optional[str]:
        """Hook for fused schedules (the fusing index precedes unfused indices)."""
        return None

    def skew(self, index, reference_index, unroll_loops_smaller_than=None) -> None:
        """Skew `index` with respect to `reference_index`: (N, M) -> (N + M - 1, M)."""
        self._known(index, "index")
        self._known(reference_index, "reference_index")
        if index is reference_index:
            raise ValueError("skew: index and reference_index must be different indices")
        if unroll_loops_smaller_than is not None and (not _is_size(unroll_loops_smaller_than)
                                                      or unroll_loops_smaller_than < 1):
            raise ValueError("unroll_loops_smaller_than must be an integer >= 1")
        self._space = self._space.skew(index, reference_index)
        if unroll_loops_smaller_than is not None:
            self._space = self._space.with_attr(
                "unroll_below", (index, reference_index, int(unroll_loops_smaller_than)))

    def pad(self, index, size) -> None:
        """Add `size` empty elements at the front of `index`."""
        self._known(index)
        if not _is_size(size) or size < 0:
            raise ValueError("Pad sizes must be integers >= 0")
        if size:
            self._space = self._space.pad(index, int(size))

    # -- next stage / display -----------------------------------------------------------------
    def create_plan(self, target=None):
        from ..plan.plan import Plan

        return Plan(self, target)

    def to_python(self, unswitched: bool = False) -> str:
        """The schedule as Python pseudo-code: guarded loops, or the lowered (unswitched) loops."""
        if unswitched:
            from ..ir.printer import stmt_str
            from ..lower import lower_loops

            return stmt_str(lower_loops(self._space)[0])
        from .pseudocode import space_pseudocode

        return space_pseudocode(self._space)

    def __str__(self) -> str:
        return self.to_python()

    def __repr__(self) -> str:
        order = ", ".join(d.name for d in self._space.dims)
        return f"Schedule(order=({order}), shape={self.get_shape()})"
