"""Lowering: schedule + plan -> loop IR, as one ordered list of named passes.

    scan -> unswitch -> caches -> simplify -> [target memories -> tensorize -> configs]
    -> mark loop kinds -> unroll -> simplify -> vectorize -> parallelize (OpenMP; caches
    private to threads) -> allocate temporaries and caches -> promote registers -> simplify

The bracketed passes run for targets with a tensor/memory library (Gemmini): caches in its
memories get addresses and their copies become transfers (target_memory), tensorized
sub-nests become tile instructions (tensorize), configuration writes are hoisted and
deduplicated (config), and the kernel's work is bracketed as one call of the accelerator.

Each pass is one module whose docstring says what it guarantees. Set ACCPY_DEBUG_LOWER=1
to print the IR after every pass.
"""
from __future__ import annotations

import os

from ..ir.expr import Buffer, Var
from ..ir.printer import stmt_str
from ..ir.stmt import Alloc, For, Function
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, Visitor, buffers_of, free_vars
from .cache import cache_loop_vars, insert_caches
from .config import hoist_configs
from .target_memory import is_target_buffer, lower_target_memories
from .tensorize import check_no_target_access, tensorize
from .parallelize import mark_parallel, place_buffers
from .registers import promote_registers
from .scan import scan
from .simplify import simplify
from .unroll import unroll
from .unswitch import unswitch
from .vectorize import vectorize


def _log(name, stmt):
    if os.environ.get("ACCPY_DEBUG_LOWER"):
        print(f"--- after {name} ---\n{stmt_str(stmt)}\n")
    return stmt


class _MarkKinds(Mutator):
    def __init__(self, kinds):
        self.kinds = kinds

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        k = self.kinds.get(f.var)
        return f if k is None or k == f.kind else For(f.var, f.lo, f.hi, f.body, k, f.attrs)


def lower_loops(space, kinds=None, target=None, plan=None):
    """The loops of an iteration space: scanned, unswitched, cached, simplified, unrolled, vectorized.

    Returns (stmt, cache buffers, {id(cache buffer): the loop var where it is filled}).
    """
    stmt = _log("scan", scan(space))
    parallel = {v for v, k in (kinds or {}).items() if k == "parallel"}
    stmt = _log("unswitch", unswitch(stmt, whole=parallel))
    cache_bufs, fills, owners = [], {}, {}
    if plan is not None and plan.caches:
        stmt = simplify(stmt, keep=cache_loop_vars(plan))
        stmt, cache_bufs, fills = insert_caches(stmt, plan, _symbols(stmt, space), owners)
        stmt = _log("caches", stmt)
    stmt = _log("simplify", simplify(stmt))
    stmt, cache_bufs = _accelerate(stmt, plan, target, cache_bufs, owners)
    below = {}
    for k, v in space.attrs:
        if k == "unroll_below":
            index, ref, threshold = v
            for h in (index, ref):
                pos = space.position(h)
                if pos is not None:
                    below[space.dims[pos].var] = threshold
    if kinds:
        stmt = _MarkKinds(kinds).visit(stmt)
    if kinds or below:
        stmt = _log("unroll", unroll(stmt, kinds or {}, below))
        stmt = _log("simplify", simplify(stmt))
    if _has_kind(stmt, "vectorized"):
        stmt = _log("vectorize", vectorize(stmt, target))
    return stmt, cache_bufs, fills


def _accelerate(stmt, plan, target, cache_bufs, owners):
    """The target-library passes (Gemmini): memories, tensorize, configs, the call bracket."""
    from ..targets.intrinsics import library_for

    library = library_for(target)
    requests = plan.tensorize_requests() if plan is not None else []
    if library is None or (not requests and not any(is_target_buffer(b) for b in cache_bufs)):
        if any(is_target_buffer(b) for b in cache_bufs):
            check_no_target_access(stmt, requests)
        return stmt, cache_bufs

    def describe(b):
        c = owners.get(b)
        if c is None:
            return f"cache {b.name}"
        return f"cache of {c.array.name} at index {c.index.name}" if c.index is not None else f"cache of {c.array.name}"

    stmt, layouts = lower_target_memories(stmt, library, cache_bufs, describe)
    stmt = _log("target memories", stmt)
    stmt = _log("tensorize", tensorize(stmt, library, requests, layouts))
    stmt = _log("simplify", simplify(stmt))
    stmt = _log("configs", library.wrap_function(hoist_configs(stmt)))
    return stmt, [b for b in cache_bufs if not is_target_buffer(b)]


def _has_kind(stmt, kind) -> bool:
    found = []

    class V(Visitor):
        def visit_For(self, f):
            if f.kind == kind:
                found.append(f)
            self.generic_visit(f)

    V().visit(stmt)
    return bool(found)


def _symbols(stmt, space) -> list:
    loop_vars = set(space.vars)
    return sorted((v for v in free_vars(stmt) if v.dtype is ScalarType.index and v not in loop_vars),
                  key=lambda v: v.uid)


def argument_objects(args) -> tuple:
    """Array / Dimension / Scalar arguments as IR buffers and vars."""
    from ..nest.array import Array, ArrayView, Dimension, OutputDimension, Scalar

    out = []
    for a in args:
        if isinstance(a, ArrayView):
            raise ValueError(f"args: {a!r} is a view; pass the array it views ({a.root.name}) as the argument")
        if isinstance(a, OutputDimension):
            out.append(a.array.buffer)
        elif isinstance(a, Array):
            out.append(a.buffer)
        elif isinstance(a, (Dimension, Scalar)):
            out.append(a.var)
        elif isinstance(a, (Buffer, Var)):
            out.append(a)
        else:
            raise TypeError(f"args: expected acc.Array, acc.Dimension or acc.Scalar, got {type(a).__name__}")
    return tuple(out)


def default_arguments(stmt) -> tuple:
    """Arguments in first-use order when none are given: arrays, then runtime sizes."""
    bufs = [b for b in buffers_of(stmt) if b.role not in ("temp", "const", "cache")]
    sizes = sorted((v for v in free_vars(stmt) if v not in bufs), key=lambda v: v.uid)
    for b in bufs:
        for s in b.shape:
            sizes.extend(x for x in free_vars(s) if x not in sizes)
    return tuple(bufs) + tuple(dict.fromkeys(sizes))


def lower_function(plan, name: str, args=None) -> Function:
    space = plan.schedule.space
    stmt, cache_bufs, fills = lower_loops(space, plan.loop_annotations(), plan.target, plan)
    if plan.parallel is not None:
        _, policy, threads = plan.parallel
        stmt = _log("parallelize", mark_parallel(stmt, policy, threads))
    # a cache filled inside a parallel loop's body is per thread
    position = {d.var: k for k, d in enumerate(space.dims)}
    fill_position = {b: (position.get(v), inside) for b, (v, inside) in fills.items()}
    temps = [b for b in buffers_of(stmt) if b.role == "temp"]
    stmt = place_buffers(stmt, cache_bufs, zero=False, fill_position=fill_position, loop_position=position)
    for b in reversed(temps):
        stmt = Alloc(b, stmt, zero=True)
    if cache_bufs:
        stmt = _log("promote registers", promote_registers(stmt))
        stmt = _log("simplify", simplify(stmt))
    arg_objs = argument_objects(args) if args is not None else default_arguments(stmt)
    return Function(name, arg_objs, stmt)
