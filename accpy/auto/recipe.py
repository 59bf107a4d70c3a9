"""A schedule and plan written down as data, and applied through the public API.

A `Recipe` lists what a performance engineer would type: splits, skews, a loop order, caches,
prefetches, unrolled and vectorized loops, a parallel loop. Loops are named by strings: the names
of the schedule's loops when the recipe starts, and the names the recipe gives the inner loops its
splits make. `apply` replays it on a copy of the schedule with `Schedule.split/skew/reorder` and
`Plan.cache/prefetch/unroll/vectorize/parallelize`, so every step passes the same legality checks
as a hand-written one (never `unsafe=True`): a recipe that would change the result, race or ask
for something accpy cannot build raises there, and the cost model drops it with the reason.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class CacheStep:
    array: str  # the array's name
    index: str
    trigger: Optional[str] = None
    panel_width: Optional[int] = None
    layout: Optional[str] = None  # "FIRST_MAJOR", "LAST_MAJOR" or "grouped" (the order a unit's instructions read)
    location: Optional[str] = None  # a memory's name (acc.MemorySpace member or a target library's memory)
    source: Optional[int] = None  # a cache of an earlier cache: that step's position in the recipe's caches
    locality: Optional[int] = None  # for a cache in a target memory: how near the core its loads keep lines


def _layout(name: Optional[str]):
    from ..nest.array import Array

    if name is None:
        return None
    if name == "grouped":
        return Array.Layout.grouped()
    return getattr(Array.Layout, name)


def _location(name: Optional[str]):
    """The MemorySpace member named `name` (a generic one, or one a target library defines)."""
    from ..targets.memory_space import MemorySpace

    return None if name is None else MemorySpace[name]


@dataclass
class Recipe:
    family: str  # e.g. "register-blocked contraction"
    splits: tuple = ()  # ((loop, size, inner loop's name), ...), in order
    skews: tuple = ()  # ((loop, reference loop), ...), before the splits
    order: tuple = ()  # the loop order (every loop) or () to keep it
    caches: tuple = ()  # CacheStep, in order
    prefetch: tuple = ()  # ((array, loop, distance[, locality[, spread loop]]), ...)
    unroll: tuple = ()
    vectorize: Optional[str] = None
    parallel: tuple = ()  # loops run on threads (contiguous), or ()
    threads: int = 1
    tensorize: tuple = ()  # ((loops...), {options}) per tensorized sub-nest (`plan.tensorize`)
    why: tuple = ()  # the reasons, one line each
    params: dict = field(default_factory=dict)  # the sizes chosen (for explain and the result cache)

    def key(self) -> str:
        """A stable text naming the recipe (what it does, not why)."""
        return repr((self.family, self.skews, self.splits, self.order, self.caches, self.prefetch, self.unroll,
                     self.vectorize, self.parallel, self.threads, self.tensorize))

    def lines(self) -> list:
        """What the recipe does, as the calls a person would write."""
        out = [f"schedule.skew({a}, {b})" for a, b in self.skews]
        out += [f"{new} = schedule.split({ix}, {size})" for ix, size, new in self.splits]
        if self.order:
            out.append(f"schedule.reorder({', '.join(self.order)})")
        sources = {c.source for c in self.caches}
        for n, c in enumerate(self.caches):
            extra = (f", trigger_index={c.trigger}" if c.trigger else "") + \
                    (f", panel_width={c.panel_width}" if c.panel_width else "") + \
                    (f", layout={c.layout}" if c.layout else "") + (f", location={c.location}" if c.location else "") + \
                    (f", locality={c.locality}" if c.locality is not None else "")
            src = c.array if c.source is None else f"cache{c.source}"
            out.append((f"cache{n} = " if n in sources else "") + f"plan.cache({src}, index={c.index}{extra})")
        for loops, opts in self.tensorize:
            extra = "".join(f", {k}={v!r}" for k, v in opts.items())
            out.append(f"plan.tensorize(indices=({', '.join(loops)}){extra})")
        out += [_prefetch_line(p) for p in self.prefetch]
        out += [f"plan.unroll({ix})" for ix in self.unroll]
        if self.vectorize:
            out.append(f"plan.vectorize({self.vectorize})")
        if self.parallel:
            out.append(f"plan.parallelize(({', '.join(self.parallel)}), max_threads={self.threads})")
        return out

    def schedule_on(self, schedule, skewed=None) -> tuple:
        """(a transformed copy of `schedule`, {loop name: index handle}): the schedule steps only.
        `skewed`: `schedule` with this recipe's skews already made (they are then not made again)."""
        skewed = skewed if self.skews else None
        s = copy_of(skewed if skewed is not None else schedule)
        handles = {d.name: d.index for d in s.space.dims}
        for ix, ref in (self.skews if skewed is None else ()):
            s.skew(handles[ix], handles[ref])
        for ix, size, new in self.splits:
            handles[new] = s.split(handles[ix], size, name=new)
        if self.order:
            s.reorder(*[handles[n] for n in self.order])
        return s, handles

    def apply(self, schedule, args, target, parallel: bool = True, skewed=None):
        """The plan this recipe makes of `schedule` (not changed) for `target` (`parallel=False`:
        without its parallel loop, whose check is the slow one; `skewed`: as for `schedule_on`)."""
        s, handles = self.schedule_on(schedule, skewed)
        plan = s.create_plan(target)
        arrays = {a.name: a for a in args if hasattr(a, "name")}
        made = []
        for c in self.caches:
            made.append(plan.cache(arrays[c.array] if c.source is None else made[c.source], index=handles[c.index],
                                   trigger_index=handles[c.trigger] if c.trigger else None, panel_width=c.panel_width,
                                   layout=_layout(c.layout), location=_location(c.location), locality=c.locality))
        for loops, opts in self.tensorize:
            plan.tensorize(indices=tuple(handles[x] for x in loops), **opts)
        for a, ix, d, *more in self.prefetch:
            locality, spread = (more[0] if more else 3), (more[1] if len(more) > 1 else None)
            plan.prefetch(arrays[a], index=handles[ix], distance=d, locality=locality,
                          spread=handles[spread] if spread else None)
        for ix in self.unroll:
            plan.unroll(handles[ix])
        if self.vectorize:
            plan.vectorize(handles[self.vectorize])
        if self.parallel and parallel:
            plan.parallelize([handles[n] for n in self.parallel], max_threads=self.threads)
        return plan


def _prefetch_line(p: tuple) -> str:
    """The `plan.prefetch` call of one prefetch step (array, loop, distance[, locality[, spread]])."""
    a, ix, d, *more = p
    extra = (f", locality={more[0]}" if more else "") + (f", spread={more[1]}" if len(more) > 1 and more[1] else "")
    return f"plan.prefetch({a}, index={ix}, distance={d}{extra})"


def copy_of(schedule):
    """A copy of `schedule` whose transforms do not touch the original (its nests are shared)."""
    out = type(schedule).__new__(type(schedule))
    out.__dict__.update(schedule.__dict__)
    out._commands = schedule._commands.copy()
    for k, v in schedule.__dict__.items():
        if isinstance(v, (list, dict, set)):
            out.__dict__[k] = copy.copy(v)
    return out
