"""Checks of a cache against the loops that run at once around or inside it (OpenMP threads, a
grid's units): a block written back must not meet another thread's. Raised as ScheduleError by the
cache pass (lower/cache.py) while it places the cache. And which caches the pass leaves to a
target's tensor unit (`held_by_tiles`: those in the registers its tiles hold)."""
from __future__ import annotations

from ..analysis.footprint import blocks_apart, constant_extreme
from ..errors import ScheduleError
from ..ir.kinds import BufferRole, LoopKind
from ..ir.stmt import For
from ..ir.visitor import nodes_of
from ..targets.library import memory
from ..targets.tensor_unit import memory_unit


def check_not_spanning_units(info, site: For, blk) -> None:
    """A cache in memory of its own (not shared by a block's units) whose block spans a loop the
    grid runs at once (`bind`) is filled and written back by every unit: refused when written."""
    if info.shared or not blk.writes or info.source.role in (BufferRole.INPUT, BufferRole.CONST):
        return
    bound = [g.var.name for g in [site] + nodes_of(site.body, For) if g.kind == LoopKind.BOUND]
    if bound:
        raise ScheduleError(f"cache of {info.source.name}: its block spans the bound loop(s) "
                            f"{', '.join(bound)}, whose iterations run at once on the grid's units: every "
                            f"unit would write the whole block back; cache it at an index inside the bound "
                            f"loops, or in the block's SHARED memory")


def check_threads_apart(info, enclosing, blk) -> None:
    """A block written back inside a parallel loop is stored whole, elements this iteration did
    not write included (e.g. a skewed access's hull): it must not meet another iteration's."""
    for f in enclosing:
        if not isinstance(f, For) or f.var not in info.parallel_vars or f.var in info.across:
            continue  # (the units across which a shared cache spans write its block back together)
        if blk.ctx is not None and constant_extreme(f.var, blk.ctx, False) == constant_extreme(f.var, blk.ctx, True) \
                is not None:
            continue  # (the site runs for one iteration only: e.g. the tail piece of a parallel loop)
        if blocks_apart(blk, f.var) is False:
            raise ScheduleError(f"cache of {info.source.name}: the block written back in one iteration "
                                f"of the parallel loop {f.var.name} meets the block of another iteration: "
                                f"threads would overwrite each other's results; cache at an index outside "
                                f"the parallel loop, or one whose blocks the loop keeps apart")


def held_by_tiles(c, target) -> bool:
    """Whether cache request `c` lives in a memory that a tensor unit of `target` holds in its tiles'
    registers (a unit's `memories`, none of which a library registers for the cache pass): its
    library's lowering places it. ScheduleError for a memory that no library of `target` has."""
    if c.memory is None or memory(c.memory) is not None:
        return False
    if memory_unit(target, c.memory) is None:
        raise ScheduleError(f"cache of {c.array_name}: target {getattr(target, 'name', target)} has no memory "
                            f"{c.memory!r} (MemorySpace.{c.memory.upper()}); leave location= out or pick one "
                            f"of its memories")
    return True
