"""A plan as the plain data lowering reads (accpy/ir/request.py): loop kinds, caches with their
levels and IR buffers, tensorize requests, the function's IR arguments."""
from __future__ import annotations

from ..ir.expr import Buffer, Const, Load, Var
from ..ir.kinds import LoopKind
from ..ir.stmt import For, Store, block
from ..ir.visitor import nodes_of, substitute
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
            staged=getattr(c.double_buffer_location, "value", None) == "private",
            strategy=getattr(getattr(c, "strategy", None), "value", None)))
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


def with_fused_ops(plan, fn):
    """`fn` (the plan's nest lowered unscheduled: DEBUG mode's oracle) with the element-wise
    operations the plan's tensorize requests fuse into their output (a tensor unit's `fused_ops`,
    e.g. a GPU matmul's prologue and epilogue ops) applied as the tiles apply them: to each output
    element the statement updates, once before the nest and once after. ValueError when an output
    index is not one of the nest's indices (the updated elements are then not a box)."""
    default = plan.schedule.default_schedule().space
    dims = {d.var: d.extent for d in default.dims}
    extents = {}  # a nest index -> its extent (the default order's loop of it)
    for part in default.parts:
        for v, a in part.index_map.items():
            if a.const == 0 and len(a.vars) == 1 and a.coef(a.vars[0]) == 1 and a.vars[0] in dims:
                extents[v] = dims[a.vars[0]]
    args = {b.name: b for b in fn.args if isinstance(b, Buffer)}
    before, after = [], []
    for ixs, _, unit in plan.tensorize_requests():
        for part in plan.schedule.space.parts:
            for st in part.statements:
                pre, post = unit.fused_ops(st.store)
                if pre is None and post is None:
                    continue
                loops = _over_updated_elements(st.store, extents, args)
                before += [loops(pre)] if pre is not None else []
                after += [loops(post)] if post is not None else []
    if not before and not after:
        return fn
    import dataclasses

    return dataclasses.replace(fn, body=block(*before, fn.body, *after))


def _over_updated_elements(store, extents, args):
    """A function making, for an element-wise op, the loops that apply it to every element of
    `store`'s output the nest updates (each output index one of the nest's indices, all distinct)."""
    out = args.get(store.buffer.name, store.buffer)
    idx = list(store.indices)
    if not all(isinstance(e, Var) and e in extents for e in idx) or len(set(idx)) != len(idx):
        raise ValueError(f"DEBUG mode: the output {store.buffer.name}[{', '.join(map(str, idx))}] of a tensorized "
                         f"statement with fused element-wise ops is not indexed by distinct nest indices; the "
                         f"oracle cannot apply those ops to the elements it updates")
    fresh = {v: Var(f"{v.name}_fused") for v in idx}

    def loops(op):
        at = tuple(fresh[v] for v in idx)
        body = Store(out, at, op(Load(out, at)))
        for v in reversed(idx):
            body = For(fresh[v], Const(0), extents[v], body)
        return body

    return loops
