"""A plan as the plain data lowering reads (accpy/ir/request.py): loop kinds, caches with their
levels and IR buffers, tensorize requests, the function's IR arguments."""
from __future__ import annotations

from ..ir.expr import Buffer, Var
from ..ir.kinds import LoopKind
from ..ir.request import CacheRequest, LoweringRequest, PrefetchRequest
from ..nest.array import Array, Dimension, OutputDimension, is_scalar_argument
from ..nest.layouts import GroupedLayout
from ..nest.views import ArrayView
from ..targets.library import grid_for


def argument_objects(args) -> tuple:
    """Array / Dimension / Scalar arguments as IR buffers and vars."""
    out = []
    for a in args:
        if isinstance(a, ArrayView):
            raise ValueError(f"args: {a!r} is a view; a view as a function argument is not built in accpy: "
                             f"pass the array it views ({a.root.name}) as the argument")
        if isinstance(a, OutputDimension):
            out.append(a.array.buffer)
        elif isinstance(a, Array):
            out.append(a.buffer)
        elif isinstance(a, Dimension) or is_scalar_argument(a):
            out.append(a.var)
        elif isinstance(a, (Buffer, Var)):
            out.append(a)
        else:
            raise TypeError(f"args: expected acc.Array, acc.Dimension or acc.Scalar, got {type(a).__name__}")
    return tuple(out)


def _memory(location):
    v = getattr(location, "value", None)
    return v if isinstance(v, str) and v not in ("none", "shared", "private", "global") else None


def _is_shared(cache, grid) -> bool:
    """A cache in the memory a grid's blocks share (location=SHARED on a target with a grid)."""
    return grid is not None and getattr(cache.location, "value", None) == "shared"


def _sharing_loops(plan, grid) -> tuple:
    """The loop vars bound to the units of a grid's innermost level (threads): they share the
    caches in a block's shared memory."""
    if grid is None:
        return ()
    inner = {u for u, unit in grid.units.items() if unit.level == grid.levels[-1]}
    return tuple(plan._dim_var(ix) for ixs, u in plan.bindings if u in inner for ix in ixs)


def cache_requests(plan) -> tuple:
    """The plan's caches as CacheRequests (keys: positions in the plan)."""
    caches = list(plan.caches)
    grid = grid_for(plan.target)
    across = _sharing_loops(plan, grid)
    key = {id(c): k for k, c in enumerate(caches)}
    out = []
    for k, c in enumerate(caches):
        outer = None if isinstance(c.source, Array) else key[id(c.source)]
        level = c.level if not c.budget else None
        trigger = c.trigger_level
        resolved = getattr(c, "_resolved", None) if c.budget else None
        grouped = isinstance(c.storage_layout, GroupedLayout)
        out.append(CacheRequest(
            key=k, source=c.source_buffer if outer is None else None, outer=outer, array_name=c.array.name,
            level=level, trigger_level=trigger, max_elements=c.max_elements,
            layout_last=None if c.storage_layout is None or grouped else c.storage_layout is Array.Layout.LAST_MAJOR,
            grouped=grouped, group_bytes=c.storage_layout.group_bytes if grouped else None,
            panel_width=c.panel_width, locality=c.locality,
            element_type=c.element_type, thrifty=bool(c.thrifty), memory=_memory(c.location),
            deferred=getattr(c.source, "_deferred_cache", None) is c, resolved_level=resolved,
            shared=_is_shared(c, grid), across=across if _is_shared(c, grid) else (),
            double_buffer=bool(c.double_buffer),
            staged=getattr(c.double_buffer_location, "value", None) == "private"))
    return tuple(out)


def prefetch_requests(plan) -> tuple:
    """The plan's prefetches as PrefetchRequests (a cache by its key, an array by its buffer)."""
    key = {id(c): k for k, c in enumerate(plan.caches)}
    out = []
    for source, index, distance, locality, spread in plan._prefetches:
        is_array = isinstance(source, Array)
        if is_array:
            name = source.name
        elif source.index is not None:
            name = f"the cache of {source.array.name} at {source.index.name}"
        else:
            name = f"a cache of {source.array.name}"
        out.append(PrefetchRequest(
            array=source.buffer if is_array else None, cache_key=None if is_array else key[id(source)],
            var=plan._dim_var(index), distance=distance, locality=locality,
            describe=f"prefetch({name}, index={index.name}, distance={distance})",
            spread=None if spread is None else plan._dim_var(spread)))
    return tuple(out)


def lowering_request(plan, args=None) -> LoweringRequest:
    """What lowering needs of `plan` (with `args`, the function's arguments, or None)."""
    space = plan.schedule.space
    kinds = {v: LoopKind(k) for v, k in plan.loop_annotations().items()}
    parallel = None
    if plan.parallel is not None:
        _, policy, threads = plan.parallel
        parallel = (policy, threads)
    # (a bound loop runs at once on the grid's units: never unrolled, whatever its trip count)
    unroll_below = {v: t for v, t in space.unroll_below().items() if kinds.get(v) != LoopKind.BOUND}
    return LoweringRequest(space=space, target=plan.target, kinds=kinds, unroll_below=unroll_below,
                           caches=cache_requests(plan), tensorize=tuple(plan.tensorize_requests()),
                           parallel=parallel, args=argument_objects(args) if args is not None else None,
                           prefetch=prefetch_requests(plan), bindings=plan.binding_requests(),
                           atomic=tuple(plan.atomic_reductions))


def record_resolved(plan, request: LoweringRequest) -> None:
    """Budget caches keep the level lowering picked (their `index` and `level` show it); every cache
    the notes lowering made on its request."""
    space = plan.schedule.space
    n = len(space.dims)
    for c, r in zip(plan.caches, request.caches):
        c.notes += [n for n in r.notes if n not in c.notes]  # (e.g. a panel clamped to its block)
        if c.budget and r.resolved_level is not None:
            c._resolved = r.resolved_level
            c.index = space.dims[n - r.resolved_level].index if r.resolved_level > 0 else None  # 0: one iteration
            c.level = r.resolved_level
