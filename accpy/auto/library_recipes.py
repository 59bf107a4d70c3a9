"""Recipes the target libraries propose: the cost model's per-target part.

A target library knows its own instructions: which sub-nests its tensor unit or dot products
compute, the blocks its memories hold, the layouts its instructions read. It says so through one
hook, `TargetLibrary.schedule_recipes(kernel, target, threads)` (accpy/targets/library.py), which
returns plain dicts with `Recipe`'s fields (caches as dicts of `CacheStep`'s fields; loops by
name; `params` may carry `ops_per_cycle` -- the unit's peak, operations per cycle -- and `rate`,
the fraction of it the recipe is expected to reach). Libraries import nothing of this layer: the
kernel they read is `kernel.Kernel` (its loops, accesses and contraction roles), as data.
"""
from __future__ import annotations

from .recipe import CacheStep, Recipe

_FIELDS = set(Recipe.__dataclass_fields__)


def library_recipes(kernel, target, threads: int) -> list:
    """The recipes every library of `target` proposes for `kernel`, as `Recipe`s."""
    out = []
    for lib in target.libraries:
        for d in lib.schedule_recipes(kernel, target, threads) or ():
            out.append(recipe_of(d, lib.name))
    return out


def recipe_of(d: dict, library: str) -> Recipe:
    """A `Recipe` from a library's dict (ValueError naming the library and the unknown field)."""
    unknown = set(d) - _FIELDS
    if unknown:
        raise ValueError(f"schedule_recipes of the {library} library: unknown recipe fields {sorted(unknown)}")
    d = dict(d)
    d["caches"] = tuple(c if isinstance(c, CacheStep) else CacheStep(**c) for c in d.get("caches", ()))
    for f in ("splits", "skews", "prefetch", "tensorize"):
        d[f] = tuple(tuple(x) for x in d.get(f, ()))
    for f in ("order", "unroll", "parallel", "why"):
        d[f] = tuple(d.get(f, ()))
    d.setdefault("params", {})
    d["params"] = dict(d["params"], library=library)
    return Recipe(**d)
