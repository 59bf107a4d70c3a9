"""`Plan.auto` (Accera's name): a grid of cache choices, each added to a package as its own function.

    plan.auto(acc.algorithms.NoneCacheHeuristics(source=B, index=j))   # B cached at j, every layout
    fns = package.add(plan, args=(A, B, C))                            # a list: one function per choice

A heuristic leaves some of a cache's choices open: the layout (FIRST_MAJOR or LAST_MAJOR) and the
index whose key-slice the cache holds (each index of the schedule, in its order at the time of the
call). `auto` makes a parameter for each open choice, with those values as its possible values,
and requests the cache with them (`plan.cache(source, index=P_index, layout=P_layout)`); choices
given are kept. `Package.add(plan, ...)` then adds one function per combination of the open
choices of every `auto` call on the plan (their product), each with its values recorded as the
function's parameters; the parameters given to `add` are kept in each. Nothing is measured here:
picking the fastest is `acc.tune` (accpy/tune), which measures such a list of functions.

Every choice is checked as any cache is when its function is added: a combination accpy cannot
build raises there, naming the cache (nothing is dropped silently).
"""
from __future__ import annotations

import itertools
from typing import Optional

from ..nest.array import Array
from ..nest.parameters import Parameter


class NoneCacheHeuristics:
    """Accera's brute-force cache heuristic: cache `source`, trying every layout and/or every index
    not given. `source`: an acc.Array of the plan's nest; `index`: a nest or schedule index (None:
    every index); `layout`: acc.Array.Layout.FIRST_MAJOR or LAST_MAJOR (None: both)."""

    def __init__(self, source=None, index=None, layout=None):
        if not isinstance(source, Array):
            raise TypeError(f"source: expected the acc.Array to cache, got {type(source).__name__} {source!r}")
        if layout is not None and layout not in _LAYOUTS:
            raise ValueError(f"layout: expected acc.Array.Layout.FIRST_MAJOR or LAST_MAJOR (or None: both), "
                             f"got {layout!r}")
        self.source, self.index, self.layout = source, index, layout

    def choices(self, plan, number: int) -> tuple:
        """(index or parameter, layout or parameter, {parameter: possible values}) for `plan`; the
        parameters are named `auto<number>_<source>_layout` / `_index`."""
        grid: dict = {}
        index, layout = self.index, self.layout
        name = f"auto{number}_{self.source.name}"
        if layout is None:
            layout = Parameter(f"{name}_layout")
            grid[layout] = list(_LAYOUTS)
        if index is None:
            index = Parameter(f"{name}_index")
            grid[index] = [d.index for d in plan.schedule.space.dims]
        return index, layout, grid

    def __repr__(self) -> str:
        idx = getattr(self.index, "name", "every index")
        lay = getattr(self.layout, "name", "every layout")
        return f"NoneCacheHeuristics(source={self.source.name}, index={idx}, layout={lay})"


def _layouts() -> tuple:
    return (Array.Layout.FIRST_MAJOR, Array.Layout.LAST_MAJOR)


_LAYOUTS = _layouts()


class AutoPlanning:
    """`Plan.auto` and the grid of choices it leaves for `Package.add` (mixed into Plan)."""

    def auto(self, *heuristics) -> None:
        """Apply heuristics (acc.algorithms.NoneCacheHeuristics): each requests a cache whose open
        choices become parameters; `Package.add` adds one function per combination (see this module)."""
        if not heuristics:
            raise ValueError("auto: give at least one heuristic, e.g. acc.algorithms.NoneCacheHeuristics(source=B)")
        for h in heuristics:
            if not isinstance(h, NoneCacheHeuristics):
                raise TypeError(f"auto: expected acc.algorithms.NoneCacheHeuristics, got {type(h).__name__} {h!r}")
        for h in heuristics:
            index, layout, grid = h.choices(self, len(self._auto_grid()))
            self.cache(h.source, index=index, layout=layout)
            self._auto_grid().update(grid)

    def _auto_grid(self) -> dict:
        if getattr(self, "_auto_choices", None) is None:
            self._auto_choices = {}
        return self._auto_choices

    @property
    def auto_parameters(self) -> dict:
        """{parameter: possible values} of the choices `auto` left open (empty without `auto`)."""
        return dict(getattr(self, "_auto_choices", None) or {})

    def auto_grid(self, parameters: Optional[dict]) -> Optional[list]:
        """The parameter dicts `Package.add(plan, parameters=...)` adds one function each for: every
        combination of the open `auto` choices not in `parameters`, each with `parameters` too; None
        when `auto` left nothing open (or `parameters` gives every choice)."""
        given = dict(parameters or {})
        open_ = {p: vs for p, vs in self.auto_parameters.items() if p not in given}
        if not open_:
            return None
        keys = list(open_)
        return [{**given, **dict(zip(keys, combo))} for combo in itertools.product(*(open_[k] for k in keys))]
