"""`Schedule`: Accera's split / tile / reorder / skew / pad on the iteration-space model.

Each transform is checked and applied to the model at once, so errors surface at the
call (and leave the schedule unchanged). Every transform is also recorded: a schedule
whose nest or arguments use parameters is realized from that record once their values
are known (`Package.add(..., parameters=...)`), one realization per set of values.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..analysis.dependence import check_order
from ..ir.printer import stmt_str
from ..ir.request import LoweringRequest
from ..nest.logic import Index
from ..nest.naming import assigned_names
from ..nest.parameters import has_parameter
from ..nest.recording import Recording
from .pseudocode import space_pseudocode
from .space import IterationSpace, unknown_index
from .visualize import visualize


def _is_size(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _split_size(size, what: str = "size"):
    """A split size as an int (a float with an integral value, `16.0`, is accepted as Accera
    accepts it); parameters pass through. ValueError naming `what` otherwise."""
    if isinstance(size, (float, np.floating)) and float(size).is_integer():
        size = int(size)
    if not has_parameter(size) and (not _is_size(size) or size < 1):
        raise ValueError(f"{what}: Split sizes must be integers >= 1, got {size!r}")
    return size


class _Handle:
    """Structure of a schedule without sizes: what `is_valid_loop_order` needs."""

    def __init__(self, index, parent):
        self.index, self.parent = index, parent


class Schedule:
    """The execution order of a nest: a box of ordered dimensions (see `IterationSpace`)."""

    def __init__(self, nest=None, space: Optional[IterationSpace] = None):
        self._nest = nest
        self._commands = Recording()  # the transforms: replayed to realize a parameterized schedule
        if space is not None:
            self._eager: Optional[IterationSpace] = space
        else:
            self._eager = None if nest.uses_parameters else IterationSpace.of_nest(nest)

    # -- model ----------------------------------------------------------------------------
    @property
    def space(self) -> IterationSpace:
        """The iteration space (for a parameterized schedule: with the parameter values in effect)."""
        if self._eager is not None:
            return self._eager
        return self._commands.realized(lambda: self._commands.replay(
            lambda sp, c: (self._apply(sp, c.op, c.args), None), self._initial_space()))

    def _initial_space(self) -> IterationSpace:
        return IterationSpace.of_nest(self._nest)

    @property
    def is_parameterized(self) -> bool:
        """Whether some transform waits for parameter values (given at Package.add)."""
        return self._eager is None

    def realize(self) -> "Schedule":
        """This schedule with the parameter values in effect: a schedule without parameters."""
        if self._eager is not None:
            return self
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        out._eager = self.space
        out._commands = self._commands.copy()
        out._default = self._initial_space()
        return out

    @property
    def nests(self) -> list:
        """The nests this schedule runs (one; several for a fused schedule)."""
        return [p.nest for p in self.space.parts]

    def default_schedule(self) -> "Schedule":
        """The same logic in its original order (the oracle DEBUG mode compares against)."""
        default = getattr(self, "_default", None)
        return Schedule(self._nest, space=default if default is not None else self._initial_space())

    def get_indices(self) -> list:
        """The schedule's indices in their current order (split indices included)."""
        return [h.index for h in self._structure()]

    @property
    def _indices(self) -> list:
        """The current order under Accera's private name (its own tests read it)."""
        return self.get_indices()

    def get_shape(self) -> list:
        """The extent of each dimension, in the current order."""
        return self.space.shape()

    def _structure(self) -> list:
        """Indices in order with their split parents (needs no parameter values)."""
        if self._eager is not None:
            return [_Handle(d.index, d.parent) for d in self._eager.dims]
        hs = self._initial_structure()
        for op, args, _, _ in self._commands:
            if op == "split":
                index, _, inner = args
                k = next(n for n, h in enumerate(hs) if h.index is index)
                hs.insert(k + 1, _Handle(inner, index))
            elif op == "reorder" and not has_parameter(args):
                by_id = {id(h.index): h for h in hs}
                hs = [by_id[id(ix)] for ix in args[0]]
        return hs

    def _initial_structure(self) -> list:
        return [_Handle(ix, None) for ix in self._nest.indices]

    def _known(self, index, what="index") -> None:
        if not isinstance(index, Index):
            raise TypeError(f"{what}: expected an index of this schedule, got {type(index).__name__} {index!r}")
        structure = self._structure()
        if not any(h.index is index for h in structure):
            raise unknown_index(index, [h.index for h in structure], what)

    def _fresh_name(self, base: str) -> str:
        taken = {h.index.name for h in self._structure()}
        if base not in taken:
            return base
        n = 2
        while f"{base}{n}" in taken:
            n += 1
        return f"{base}{n}"

    def _do(self, op: str, args: tuple) -> None:
        """Apply a transform now (errors raise, nothing changes) when its values are known;
        record it in any case for realizations."""
        if self._eager is not None and not has_parameter(args):
            self._eager = self._apply(self._eager, op, args)
        else:
            self._eager = None
        self._commands.add(op, args)

    # -- the transforms, on a model -------------------------------------------------------
    def _apply(self, sp: IterationSpace, op: str, args: tuple) -> IterationSpace:
        if op == "split":
            index, size, inner = args
            if sp.position(index) is None:
                raise unknown_index(index, [d.index for d in sp.dims])
            size = _split_size(size)
            self._check_splittable(index)
            return sp.split(index, int(size), inner)
        if op == "reorder":
            indices, unsafe = args
            problem = self._order_problem(indices, [_Handle(d.index, d.parent) for d in sp.dims])
            if problem:
                raise ValueError(problem)
            new = sp.reorder(indices)
            check_order(new, f"reorder({', '.join(ix.name for ix in indices)})", unsafe)
            return new
        if op == "skew":
            index, ref, threshold, unsafe = args
            for ix in (index, ref):
                if sp.position(ix) is None:
                    raise unknown_index(ix, [d.index for d in sp.dims])
            if threshold is not None and _is_size(threshold) and threshold == 0:
                threshold = None  # no unrolling
            if threshold is not None and (not _is_size(threshold) or threshold < 1):
                raise ValueError("unroll_loops_smaller_than must be an integer >= 1")
            sp = sp.skew(index, ref)
            check_order(sp, f"skew({index.name}, {ref.name})", unsafe)
            return sp.with_attr("unroll_below", (index, ref, int(threshold))) if threshold is not None else sp
        if op == "pad":
            index, size = args
            if sp.position(index) is None:
                raise unknown_index(index, [d.index for d in sp.dims])
            if not _is_size(size) or size < 0:
                raise ValueError("Pad sizes must be integers >= 0")
            return sp.pad(index, int(size)) if size else sp
        raise AssertionError(op)

    def split(self, index, size, name: Optional[str] = None) -> Index:
        """Split `index` by `size`: the outer keeps the handle; the new inner index follows it.
        `name`: the inner index's name (default: the variable the result is assigned to)."""
        self._known(index)
        size = _split_size(size)
        self._check_splittable(index)
        if name is not None:
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"split: name must be an identifier, got {name!r}")
            if name in {h.index.name for h in self._structure()}:
                raise ValueError(f"split: name {name!r} is already an index of this schedule")
        names = [name] if name is not None else assigned_names()
        inner = Index(self._fresh_name(names[0] if len(names) == 1 else index.name + index.name[-1]))
        self._do("split", (index, size, inner))
        return inner

    def _check_splittable(self, index) -> None:
        """Hook for fused schedules (the fusing index cannot be split)."""

    def tile(self, shape: dict) -> tuple:
        """Split each key of `shape` by its value, in dict order; returns the inner indices."""
        if not isinstance(shape, dict):
            raise TypeError(f"shape: expected a dict {{index: size}}, got {type(shape).__name__}")
        for ix, sz in shape.items():
            self._known(ix)
            _split_size(sz, f"shape[{getattr(ix, 'name', ix)}]")
        names = assigned_names()
        out = []
        saved = (self._eager, self._commands.copy())
        try:
            for n, (ix, sz) in enumerate(shape.items()):
                base = names[n] if len(names) == len(shape) else ix.name + ix.name[-1]
                inner = Index(self._fresh_name(base))
                self._do("split", (ix, _split_size(sz), inner))
                out.append(inner)
        except Exception:
            self._eager, self._commands = saved
            raise
        return tuple(out)

    def reorder(self, order=None, *args, unsafe: bool = False) -> None:
        """`reorder(i, j, k)` or `reorder(order=(i, j, k))`; on error the order is unchanged.

        An order that changes the result (a nest that is not order-invariant, a fused
        schedule) raises `ScheduleError` with a counterexample; `unsafe=True` builds it
        anyway and logs a warning."""
        if order is None:
            indices = tuple(args)
        elif isinstance(order, (tuple, list)):
            if args:
                raise ValueError("reorder: give the indices either as arguments or as order=(...), not both")
            indices = tuple(order)
        else:
            indices = (order,) + tuple(args)
        if not has_parameter(indices):
            problem = self._order_problem(indices, self._structure())
            if problem:
                raise ValueError(problem)
        elif len(indices) == 1:
            indices = indices[0]  # order=P: a parameter holding the whole order
            self._do("reorder", (indices, bool(unsafe)))
            return
        self._do("reorder", (indices, bool(unsafe)))

    def is_valid_loop_order(self, *order) -> bool:
        """Whether `reorder` would accept this order (a tuple, or the indices as arguments); no change made."""
        if len(order) == 1 and isinstance(order[0], (tuple, list)):
            order = tuple(order[0])
        return self._order_problem(order, self._structure()) is None

    def _order_problem(self, indices, structure) -> Optional[str]:
        n = len(structure)
        if len(indices) != n:
            return f"Expected {n} indices, but got {len(indices)}"
        known = {id(h.index) for h in structure}
        for ix in indices:
            if not isinstance(ix, Index) or id(ix) not in known:
                return f"Unknown index {ix!r} in the order"
        for a in range(n):
            for b in range(a + 1, n):
                if indices[a] is indices[b]:
                    return f"Index {indices[a].name} appears twice in the order"
        pos = {id(ix): k for k, ix in enumerate(indices)}
        for h in structure:
            if h.parent is not None and pos[id(h.parent)] > pos[id(h.index)]:
                return (f"Invalid order: the inner index {h.index.name} (split from {h.parent.name}) "
                        f"must come after {h.parent.name}")
        return self._extra_order_problem(indices, pos)

    def _extra_order_problem(self, indices, pos) -> Optional[str]:
        """Hook for fused schedules (the fusing index precedes unfused indices)."""
        return None

    def skew(self, index, reference_index, unroll_loops_smaller_than=None, unsafe: bool = False) -> None:
        """Skew `index` with respect to `reference_index`: (N, M) -> (N + M - 1, M).

        Skewing changes the order of iterations: checked like `reorder` (`unsafe=True` skips it)."""
        self._known(index, "index")
        self._known(reference_index, "reference_index")
        if index is reference_index:
            raise ValueError("skew: index and reference_index must be different indices")
        t = unroll_loops_smaller_than
        if t is not None and not has_parameter(t) and _is_size(t) and t == 0:
            t = None  # Accera's 0: no unrolling
        if t is not None and not has_parameter(t) and (not _is_size(t) or t < 1):
            raise ValueError("unroll_loops_smaller_than must be an integer >= 1")
        self._do("skew", (index, reference_index, t, bool(unsafe)))

    def pad(self, index, size) -> None:
        """Add `size` empty elements at the front of `index`."""
        self._known(index)
        if not has_parameter(size) and (not _is_size(size) or size < 0):
            raise ValueError("Pad sizes must be integers >= 0")
        self._do("pad", (index, size))

    # -- next stage / display -----------------------------------------------------------------
    def visualize(self, filename=None, *, format=None, view=None, title=None):
        """Draw the iteration space with every point numbered in its scheduled order.

        Returns a matplotlib Figure (`pip install 'accpy[viz]'`) and writes it to `filename`
        (PNG, SVG or PDF by its extension); `format="text"` returns (and writes) a grid of order
        numbers instead, without matplotlib. Padding is drawn hollow (`.` in text), split and
        tile boundaries dashed, the first steps as arrows, fused nests in different colors.
        `view`: "logical" (points at the nest's coordinates; the default) or "schedule" (at the
        loops' coordinates: a skewed space appears sheared; the default after a skew).
        Only constant-sized spaces of at most 20000 points are drawn.
        """
        return visualize(self, filename, format=format, view=view, title=title)

    def create_plan(self, target=None):
        """A new acc.Plan of this schedule for `target` (HOST when None)."""
        from ..plan.plan import Plan  # plan is above schedule: a FACADE

        return Plan(self, target)

    def to_python(self, unswitched: bool = False) -> str:
        """The schedule as Python pseudo-code: guarded loops, or the lowered (unswitched) loops."""
        if unswitched:
            from ..lower import lower_loops  # lower is no layer of schedule's: a FACADE

            return stmt_str(lower_loops(LoweringRequest(self.space, unroll_below=self.space.unroll_below())))

        return space_pseudocode(self.space)

    def __str__(self) -> str:
        return self.to_python()

    def __repr__(self) -> str:
        if self._eager is None:
            return f"Schedule(order=({', '.join(h.index.name for h in self._structure())}), parameterized)"
        order = ", ".join(d.name for d in self._eager.dims)
        return f"Schedule(order=({order}), shape={self.get_shape()})"
