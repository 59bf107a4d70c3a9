"""Permutable bands, coincident loops and wavefront skews of a schedule (Pluto-lite, greedy).

`find_bands(schedule)` reads the exact dependences of the schedule (analysis/directions.py) and
groups its loops, outer to inner, into *bands*: a band takes every remaining loop along which no
dependence not yet satisfied by outer bands goes backwards (signs within {"0", "+"}), so any
order of a band's members, and any tiling of them, keeps every dependence. What is left of a
dependence after a band is exactly its pairs of instances equal on every loop placed so far
(`directions.refine`), so the greedy step never gets stuck on a legal schedule: the first
remaining loop of the schedule's own order always qualifies. A loop that accpy orders after
another (a split's inner loop after its outer one, a fused schedule's unfused loops after the
fusing loop) joins a band only once that other loop is in an outer band, so every order of a
band's members is one `Schedule.reorder` accepts (tiling: the tile loops' band, then the points').
Only non-commuting dependences constrain the order; updates of one commuting reduction (two
`+=`) may run in any order.

A loop is *coincident* when no dependence left by the outer bands, commuting ones included,
crosses its iterations: it may run in parallel wherever it stands inside its band (checked by
`dependence.parallel_violation` in the tests). A *reduction* loop crosses only commuting ones.

With `skew=True`, a loop kept out of a band only by backward distances is skewed by a band member
t (accpy's `Schedule.skew`: d' = d + t, applied f times for d + f*t, f <= MAX_SKEW_FACTOR) when the
distances make every backward component non-negative; the dependences are recomputed and the skew
kept only when the band grows (jacobi-1d: distances (1, -1), (1, 0), (1, 1) become one 2-D band).
Every skew goes through `Schedule.skew`'s own order check; nothing is built with unsafe=True.
The schedule given is changed only by the skews listed in `Bands.skews`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..analysis.directions import combined_signs, dependences, refine
from ..errors import ScheduleError

MAX_SKEW_FACTOR = 4  # at most this many skews of one loop by one reference (distances down to -4 per step)
_FORWARD = frozenset("0+")


@dataclass
class Bands:
    """The band structure of `schedule` (see the module docstring)."""

    schedule: object  # the schedule the bands describe (the one passed in, possibly skewed)
    bands: list  # lists of the schedule's indices, outermost band first; each permutable
    coincident: set  # indices that may run in parallel where they stand in `order()` (any band order)
    reduction: set  # indices that carry only commuting reduction dependences
    skews: list = field(default_factory=list)  # [(index, reference_index)] applied, in order
    deps: list = field(default_factory=list)  # the Dependence list of the final schedule

    def order(self) -> list:
        """The indices band by band, each band in the schedule's order: a legal loop order."""
        return [ix for band in self.bands for ix in band]

    def describe(self) -> list:
        """A few lines for a person: the dependences, bands, parallel and reduction loops, skews."""
        space = self.schedule.space
        names = lambda ixs: ", ".join(ix.name for ix in ixs) or "none"  # noqa: E731
        ordered = self.order()
        lines = [f"dependences: {len(self.deps)}"
                 + (f" ({sum(d.commuting for d in self.deps)} of commuting reductions)" if self.deps else "")]
        lines += ["  " + d.describe(space) for d in self.deps[:6]]
        if len(self.deps) > 6:
            lines.append(f"  ... and {len(self.deps) - 6} more")
        lines.append("bands: " + " | ".join(f"({names(b)})" for b in self.bands))
        lines.append("parallel (coincident): " + names([ix for ix in ordered if ix in self.coincident]))
        lines.append("reductions: " + names([ix for ix in ordered if ix in self.reduction]))
        lines.append("skews: " + ("; ".join(f"{d.name} by {t.name}" for d, t in self.skews) or "none"))
        return lines


@dataclass
class _Stage:
    band: list  # positions of the band's members, in the schedule's order
    entering: list  # the dependences not satisfied by outer bands (commuting ones included)
    backward: list  # remaining positions kept out only by a backward ("-") sign
    outer: list  # positions placed by outer bands


def _predecessors(schedule, space) -> dict:
    """Position -> positions that must come before it in any order accpy accepts: a split inner
    loop's parent, and for a fused schedule the fusing loop before every unfused loop."""
    pos = {id(d.index): k for k, d in enumerate(space.dims)}
    out = {k: set() for k in range(len(space.dims))}
    for k, d in enumerate(space.dims):
        if d.parent is not None and id(d.parent) in pos:
            out[k].add(pos[id(d.parent)])
    if hasattr(schedule, "get_fusing_index"):
        f = pos.get(id(schedule.get_fusing_index()))
        unfused = {pos[id(ix)] for ix in schedule.get_unfused_indices() if id(ix) in pos}
        grown = True
        while grown:  # split children of unfused loops are unfused too
            grown = False
            for k in out:
                if k not in unfused and out[k] & unfused:
                    unfused.add(k)
                    grown = True
        for k in unfused:
            out[k].add(f)
    return out


def _stages(space, deps: list, preds: dict) -> list:
    """The greedy bands of `space` (positions), outer to inner."""
    remaining = list(range(len(space.dims)))
    placed: list = []
    entering, stages = list(deps), []
    while remaining:
        ordering = [d for d in entering if not d.commuting]
        forward = [k for k in remaining if all(d.signs[k] <= _FORWARD for d in ordering)]
        band = [k for k in forward if preds[k] <= set(placed)]  # so any order of the band is accepted
        if not band:
            names = ", ".join(space.dims[k].name for k in remaining)
            raise ScheduleError(f"find_bands: none of the loops ({names}) can come next without reversing a "
                                f"dependence; the schedule's order changes the result (built with unsafe=True?)")
        stages.append(_Stage(band, entering, [k for k in remaining if k not in forward], list(placed)))
        placed += band
        remaining = [k for k in remaining if k not in band]
        if remaining:
            entering = refine(space, entering, placed)
    return stages


def _skew_factor(deps: list, d: int, t: int) -> Optional[int]:
    """How many skews of loop d by loop t make every backward distance along d non-negative (from
    the distances; non-constant ones count as 1 along t, as their sign along d allows), or None."""
    f = 0
    for dep in deps:
        if dep.commuting or "-" not in dep.signs[d]:
            continue
        if dep.signs[t] != frozenset("+"):
            return None
        dd, dt = dep.distance[d], dep.distance[t]
        need = 1 if dd is None else -(dd // (dt if dt is not None else 1))
        f = max(f, need)
    return f if 1 <= f <= MAX_SKEW_FACTOR else None


def _grow_by_skew(space, stages: list) -> list:
    """Skews (d, t, f) of positions that let backward loops d join the band of an earlier loop t (in
    the schedule's order, so the skewed order stays legal: pairs equal up to d have no distance
    along t), all for the first band that can grow, or []. Decided on the dependences left at that
    band (`combined_signs`); skewing one d leaves the distances along the others as they are."""
    for st in stages:
        found = []
        for d in st.backward:
            for t in st.band:
                f = _skew_factor(st.entering, d, t) if t < d else None
                if f is not None and _joins(space, st, d, t, f):
                    found.append((d, t, f))
                    break
        if found:
            return found
    return []


def _joins(space, stage: _Stage, d: int, t: int, f: int) -> bool:
    """Whether loop d, skewed f times by t, goes forward along every ordering dependence left at
    `stage` (those without a backward sign along d keep theirs: t goes forward in its band)."""
    backward = [dep for dep in stage.entering if not dep.commuting and "-" in dep.signs[d]]
    if all(dep.distance[d] is not None and dep.distance[t] is not None for dep in backward):
        return all(dep.distance[d] + f * dep.distance[t] >= 0 for dep in backward)
    return all(sg <= _FORWARD for sg in combined_signs(space, backward, {d: 1, t: f}, stage.outer))


def _summary(schedule, stages: list, skews: list, deps: list) -> Bands:
    space = schedule.space
    handle = lambda k: space.dims[k].index  # noqa: E731
    coincident, reduction = set(), set()
    for st in stages:
        for k in st.band:
            carried = [dep for dep in st.entering if dep.carried_at(k)]
            if not carried:
                coincident.add(handle(k))
            elif all(dep.commuting for dep in carried):
                reduction.add(handle(k))
    return Bands(schedule, [[handle(k) for k in st.band] for st in stages], coincident, reduction, skews, deps)


def find_bands(schedule, skew: bool = True) -> Bands:
    """The permutable bands of `schedule`, its coincident and reduction loops, and (with `skew`)
    the skews applied to it to grow a band. Pass a copy (accpy.testing.strategies.copy_schedule)
    to keep the original unskewed. ScheduleError when the schedule's own order is illegal."""
    skews: list = []
    for _ in range(len(schedule.space.dims) * MAX_SKEW_FACTOR + 1):  # each skew grows a band: bounded
        space = schedule.space
        preds = _predecessors(schedule, space)
        deps = dependences(space)
        stages = _stages(space, deps, preds)
        steps = _grow_by_skew(space, stages) if skew else []
        if not steps:
            return _summary(schedule, stages, skews, deps)
        for d, t, f in steps:
            handle, ref = space.dims[d].index, space.dims[t].index
            for _ in range(f):
                schedule.skew(handle, ref)
                skews.append((handle, ref))
    space = schedule.space
    deps = dependences(space)
    return _summary(schedule, _stages(space, deps, _predecessors(schedule, space)), skews, deps)
