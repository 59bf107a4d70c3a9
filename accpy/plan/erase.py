"""`Plan._erase_loops` (Accera's private name): loops that run their first iteration only.

An erased loop's index stays at 0: the function runs the logic at the points of the other loops
only (e.g. a tiled nest of calls whose logic handles a whole tile per call, the tile loops kept
and the loops inside a tile erased). It changes what the function computes, so accpy allows it
only in a nest whose logic calls package functions (accpy/package/calls.py), where the calls
are what the loops run.
"""
from __future__ import annotations


def erase_loops(plan, indices) -> None:
    """Erase the loops of `indices` (a list of the schedule's indices)."""
    if not isinstance(indices, (list, tuple)):
        indices = [indices]
    return plan._call("erase", list(indices))


def _erase(plan, indices) -> None:
    space = plan.schedule.space
    for ix in indices:
        space.dim(ix)  # ValueError naming an unknown index
    erased = list(getattr(plan, "_erased_loops", ()))
    erased += [ix for ix in indices if not any(ix is e for e in erased)]
    plan._erased_loops = erased


def erased_vars(plan) -> set:
    """The loop variables of the plan's erased loops."""
    space = plan.schedule.space
    return {space.dim(ix).var for ix in getattr(plan, "_erased_loops", ())}
