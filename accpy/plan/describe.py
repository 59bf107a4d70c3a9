"""`repr(plan)`: a plan's loop order and annotations in one line (accpy/plan/plan.py's __repr__)."""
from __future__ import annotations

from ..ir.kinds import LoopKind
from ..nest.parameters import UnresolvedParameter
from .cache import Cache


def describe_plan(plan) -> str:
    """The schedule's loop order and every annotation: unrolled / vectorized / parallel
    indices, caches with their levels, tensorize requests, calls waiting for parameters."""
    try:
        order = "(" + ", ".join(d.index.name for d in plan._schedule.space.dims) + ")"
    except UnresolvedParameter:
        order = "known when the parameters have values"
    parts = [f"target={plan._target.name}", f"order={order}"]
    for kind in (LoopKind.UNROLLED, LoopKind.VECTORIZED):
        names = [ix.name for ix, k in plan._kinds if k == kind]
        if names:
            parts.append(f"{kind}=({', '.join(names)})")
    if plan._parallel is not None:
        ixs, policy, threads = plan._parallel
        parts.append(f"parallel=({', '.join(ix.name for ix in ixs)}; policy={policy}, threads={threads})")
    for c in plan._caches:
        parts.append(f"cache={_describe_cache(c)}")
    for ixs, intr in plan._tensorized:
        parts.append(f"tensorize=({', '.join(ix.name for ix in ixs)}; {intr.name})")
    for src, ix, d, loc, sp in plan._prefetches:
        parts.append(f"prefetch=({_short(getattr(src, 'array', src))}, index={ix.name}, distance={d}"
                     f"{'' if loc == 3 else f', locality={loc}'}{'' if sp is None else f', spread={sp.name}'})")
    if plan._waiting:
        # nothing was applied: the calls are replayed once the parameters have values
        calls = [f"{op}({', '.join(_short(a) for a in args)}"
                 f"{''.join(f', {k}={_short(v)}' for k, v in kwargs.items() if v is not None and v is not False)})"
                 for op, args, kwargs, _ in plan._commands]
        parts.append(f"waiting for parameters=[{'; '.join(calls)}]")
    return f"Plan({', '.join(parts)})"


def _short(x) -> str:
    """An argument of a recorded plan call, by name where it has one."""
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(_short(v) for v in x) + ")"
    name = getattr(x, "name", None)
    return name if isinstance(name, str) else repr(x)


def _describe_cache(c) -> str:
    """A cache for `Plan.__repr__`: source, key-slice (index and level), trigger and options."""
    src = c.source.name if not isinstance(c.source, Cache) else f"cache of {_describe_cache(c.source)}"
    if c.max_elements is not None:
        out = [src, f"max_elements={c.max_elements}"]
    else:
        where = f"index={c.index.name}, " if c.index is not None else ""
        out = [src, f"{where}level={c.level}"]
    if c.trigger_level is not None:
        name = f"{c.trigger_index.name}, " if c.trigger_index is not None else ""
        out.append(f"trigger={name}level {c.trigger_level}")
    for k in ("layout", "element_type", "location", "thrifty"):
        v = getattr(c, k)
        if v is not None:
            out.append(f"{k}={getattr(v, 'name', v)}")
    if c.double_buffer:
        out.append("double_buffer")
        if getattr(c, "double_buffer_location", None) is not None:
            out.append(f"double_buffer_location={c.double_buffer_location.name}")
    if getattr(c, "panel_width", 1) > 1:
        out.append(f"panel_width={c.panel_width}")
    out += [f"note: {n}" for n in getattr(c, "notes", ())]  # (what accpy changed in the request, and why)
    return "(" + ", ".join(str(x) for x in out) + ")"
