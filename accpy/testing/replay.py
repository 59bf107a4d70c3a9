"""accpy code that rebuilds a schedule or a plan: what a failing property test prints."""
from __future__ import annotations

import enum

from ..nest.array import Array
from ..nest.logic import Index
from ..plan.cache import Cache
from ..plan.plan import Plan


def _fmt(v, names: dict) -> str:
    """A Python expression for an argument of a recorded call."""
    if isinstance(v, Index):
        return v.name
    if isinstance(v, Array):
        return v.name
    if isinstance(v, Cache):
        return names.get(id(v), "<cache>")
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_fmt(x, names) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else (f"({inner})" if isinstance(v, tuple) else f"[{inner}]")
    if isinstance(v, dict):  # (plan.bind's mapping)
        return "{" + ", ".join(f"{_fmt(k, names)}: {_fmt(x, names)}" for k, x in v.items()) + "}"
    if isinstance(v, enum.Enum):
        owner = {"_Layout": "acc.Array.Layout", "MemorySpace": "acc.MemorySpace",
                 "GridUnit": "plan.target.GridUnit"}.get(type(v).__name__, f"acc.{type(v).__name__}")
        return f"{owner}.{v.name}"
    if type(v).__name__ == "MemorySpace":  # (acc.MemorySpace members are not an enum's)
        return f"acc.MemorySpace.{v.name}"
    return repr(v)


def schedule_lines(schedule, var: str = "schedule") -> list:
    """The transforms recorded on `schedule`, as lines of accpy code."""
    out = []
    for op, args, _, _ in schedule._commands:
        if op == "split":
            index, size, inner = args
            out.append(f"{inner.name} = {var}.split({index.name}, {size!r})")
        elif op == "reorder":
            indices, unsafe = args
            out.append(f"{var}.reorder({', '.join(ix.name for ix in indices)}{', unsafe=True' if unsafe else ''})")
        elif op == "skew":
            index, ref, small, unsafe = args
            extra = (f", {small!r}" if small is not None else "") + (", unsafe=True" if unsafe else "")
            out.append(f"{var}.skew({index.name}, {ref.name}{extra})")
        elif op == "pad":
            index, size = args
            out.append(f"{var}.pad({index.name}, {size!r})")
        else:  # pragma: no cover - a transform added later
            out.append(f"{var}.{op}{args!r}")
    return out


def plan_lines(plan, var: str = "plan") -> list:
    """The calls recorded on `plan`, as lines of accpy code."""
    out, names = [], {}
    for op, args, kwargs, result in plan._commands:
        parts = [_fmt(a, names) for a in args]
        parts += [f"{k}={_fmt(v, names)}" for k, v in kwargs.items()
                  if v is not None and not (k in ("unsafe", "double_buffer") and v is False)
                  and not (k == "policy" and v == "static")]
        call = f"{var}.{op}({', '.join(parts)})"
        if op == "cache" and result is not None:
            names[id(result)] = f"cache{len(names)}"
            call = f"{names[id(result)]} = {call}"
        out.append(call)
    return out


def replay_code(x) -> str:
    """accpy code that rebuilds `x` (a Schedule or a Plan) from its nest's indices.

    The lines start from `schedule = nest.create_schedule()` with the nest's indices bound
    to their names (`i, j, k = nest.get_indices()`), and the arrays named as they are in
    the logic. A fused schedule's parts are shown by their transforms only.
    """
    plan = x if isinstance(x, Plan) else None
    schedule = plan.schedule if plan is not None else x
    nests = schedule.nests
    lines = []
    if len(nests) == 1:
        idx = [ix.name for ix in nests[0].indices]
        lines.append(f"{', '.join(idx)}{',' if len(idx) == 1 else ''} = nest.get_indices()")
        lines.append("schedule = nest.create_schedule()")
    else:
        lines.append("schedule = acc.fuse(...)  # the fused schedule as built")
    lines += schedule_lines(schedule)
    if plan is not None:
        target = getattr(plan.target, "name", None)
        lines.append("plan = schedule.create_plan()" if target in (None, "HOST") else
                     f"plan = schedule.create_plan(acc.Target({target!r}))")
        lines += plan_lines(plan)
    return "\n".join(lines)
