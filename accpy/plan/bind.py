"""`plan.bind`: loops that run at once, one iteration per unit of the target's grid (blocks and
threads), as Accera's plans bind them. Refused, naming what failed, when the target has no grid,
when a bound loop carries a dependence (the exact analysis: two iterations that differ in a
bound loop touch one element, one of them writing; two updates of one reduction, e.g. a sum
over a bound loop, are made atomic instead, where the target has that atomic operation), when a loop bound to an outer level sits
inside one bound to an inner level, and when the units needed exceed the target's limits."""
from __future__ import annotations

from ..analysis.dependence import check_concurrent, concurrent_reductions
from ..errors import ScheduleError
from ..ir.expr import as_int
from ..ir.request import Binding
from ..nest.logic import Index
from ..targets.library import grid_for


class Binding_:
    """The `bind` part of a Plan (mixed into it): `_bindings` is [(indices, unit name)]."""

    def bind(self, mapping) -> None:
        """Run loops on the target's grid: `mapping` maps an index, or a tuple of indices (flattened
        into one unit, the first varying slowest), to a unit (`target.GridUnit.BLOCK_X`, ...).
        Loops left unbound run inside each unit, in the schedule's order."""
        return self._call("bind", mapping)

    def _bind(self, mapping) -> None:
        if not isinstance(mapping, dict) or not mapping:
            raise TypeError(f"mapping: expected a non-empty dict {{index or tuple of indices: target.GridUnit.<unit>}}, "
                            f"got {mapping!r}")
        grid = grid_for(self._target)
        if grid is None:
            raise ValueError(f"bind: target {self._target.name} has no grid of blocks and threads to bind loops "
                             f"to; on this target, run loops at once with parallelize")
        new, units = [], {u for _, u in self._bindings}
        for key, value in mapping.items():
            indices = tuple(key) if isinstance(key, (tuple, list)) else (key,)
            if not indices or not all(isinstance(ix, Index) for ix in indices):
                raise TypeError(f"mapping: expected an index or a tuple of indices as key, got {key!r}")
            unit = grid.unit(value)
            if unit.name in units:
                raise ValueError(f"bind: {unit.name} is bound twice; bind a tuple of indices to share one unit")
            units.add(unit.name)
            for ix in indices:
                self._dim_var(ix)
                self._not_fusing(ix, "bind")
                if self._kind_of(ix) is not None or any(ix in b for b, _ in new):
                    raise ValueError(f"bind: {ix.name} is already {self._kind_of(ix) or 'bound'}")
            new.append((indices, unit.name))
        bindings = self._bindings + new
        self._check_levels(grid, bindings)
        space = self._schedule.space
        names = ", ".join(f"{'(' + ', '.join(i.name for i in ixs) + ')' if len(ixs) > 1 else ixs[0].name}: {u}"
                          for ixs, u in new)
        positions = [space.position(ix) for ixs, _ in bindings for ix in ixs]
        check_concurrent(space, positions, f"bind({names})")
        atomic = concurrent_reductions(space, positions)
        for buf, (op, dtype) in atomic.items():
            if not grid.has_atomic(op, dtype):
                raise ScheduleError(f"bind({names}): the units would update elements of {buf.name} together "
                                    f"({op} of {dtype.name}), and {self._target.name} has no atomic {op} of "
                                    f"{dtype.name}; keep the reduction's loop unbound")
        grid.check(self._target, {u: self._units_needed(ixs) for ixs, u in bindings})
        self._bindings = bindings
        self._atomic = atomic

    def _check_levels(self, grid, bindings) -> None:
        """A loop bound to an outer level (blocks) comes before every loop bound to an inner one."""
        space = self._schedule.space
        rank = {lv: k for k, lv in enumerate(grid.levels)}
        placed = [(space.position(ix), rank[grid.units[u].level], ix, u) for ixs, u in bindings for ix in ixs]
        for pa, ra, a, ua in placed:
            for pb, rb, b, ub in placed:
                if ra < rb and pa > pb:
                    raise ScheduleError(f"bind: {a.name} (bound to {ua}) is inside {b.name} (bound to {ub}); "
                                        f"reorder so that {grid.units[ua].level} loops come first")

    def _units_needed(self, indices):
        """The number of units the loops `indices` take (an int; None when it depends on sizes)."""
        total = 1
        for ix in indices:
            n = as_int(self._schedule.space.dims[self._schedule.space.position(ix)].extent)
            if n is None:
                return None
            total *= n
        return total

    @property
    def bindings(self) -> tuple:
        """((indices, unit name), ...), in the order bound."""
        return tuple(self._bindings)

    @property
    def atomic_reductions(self) -> dict:
        """{array buffer: (operator, element type)}: reductions whose updates the bound units make
        together (atomic updates)."""
        return dict(getattr(self, "_atomic", {}))

    def binding_requests(self) -> tuple:
        """The bindings as lowering reads them (accpy/ir/request.py's Binding)."""
        space = self._schedule.space
        return tuple(Binding(tuple(self._dim_var(ix) for ix in ixs), u,
                             tuple(space.dims[space.position(ix)].extent for ix in ixs))
                     for ixs, u in self._bindings)
