"""Lowering: a LoweringRequest (accpy/ir/request.py, the plain data a plan hands over) -> loop IR,
as one ordered list of named passes (`PASSES`), applied in a loop:

    scan -> mark bound loops -> unswitch -> simplify (keeping cache loops) -> caches -> simplify
    -> target memories -> tensorize -> simplify -> configs -> invariant fills
    [-> the libraries' own passes]
    -> check target access -> mark loop kinds -> unroll -> simplify -> vectorize
    -> parallelize -> place buffers (caches private to threads, temporaries) -> promote
    registers -> simplify -> prefetch

Each pass is one module whose docstring says what it guarantees; a pass that has nothing to do
for a request is skipped. The target-memory, tensorize and config passes are generic: they
reach the hardware through the target libraries' tensor units (accpy/targets/tensor_unit.py);
a library may also add passes of its own after a named pass, run for functions that use its unit
(e.g. Gemmini's weight reuse after "tensorize", its call bracket after "configs").

ACCPY_DEBUG_LOWER=1 prints the IR after every pass; ACCPY_TIME_LOWER=1 prints each pass's time
(to stderr, one line per pass and function).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..ir.kinds import BufferRole, LoopKind
from ..ir.printer import stmt_str
from ..ir.request import LoweringRequest
from ..ir.stmt import Alloc, For, Function, Stmt
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, buffers_of, free_vars, nodes_of
from ..targets.library import libraries_for
from ..targets.tensor_unit import tensor_units
from .bind import mark_bound
from .cache import cache_loop_vars, insert_caches
from .config import hoist_configs
from .hoist import hoist_invariant_fills
from .parallelize import mark_parallel, parallel_fills, place_buffers
from .prefetch import insert_prefetches
from .registers import promote_registers
from .scan import scan
from .simplify import simplify
from .target_memory import is_target_buffer, lower_target_memories
from .tensorize import check_no_target_access, tensorize
from .unroll import unroll
from .unswitch import unswitch
from .vectorize import vectorize


@dataclass
class LoweringState:
    """What passes hand on: the statement, and the caches inserted so far."""

    request: LoweringRequest
    stmt: Optional[Stmt] = None
    cache_bufs: list = field(default_factory=list)  # host caches (allocated by place buffers)
    fills: dict = field(default_factory=dict)  # cache buffer -> (loop var where filled, inside its body)
    owners: dict = field(default_factory=dict)  # cache buffer -> its CacheRequest
    layouts: dict = field(default_factory=dict)  # target-memory buffer -> its unit's layout
    placed_by: dict = field(default_factory=dict)  # target-memory buffer -> (library, unit) placing it
    accelerated_now: bool = False  # the target-library passes run (decided before the first)
    _units: Optional[tuple] = None

    @property
    def units(self) -> tuple:
        """((library, tensor unit), ...) of the request's target."""
        if self._units is None:
            self._units = tensor_units(self.request.target)
        return self._units

    def accelerated(self) -> bool:
        """Whether the target-library passes have work: tensorize requests or target-memory caches."""
        return bool(self.units) and (bool(self.request.tensorize) or any(is_target_buffer(b) for b in self.cache_bufs))

    def used_libraries(self) -> set:
        """The libraries whose units this function uses: they placed a cache or match a request."""
        if not self.accelerated_now:
            return set()
        by_unit = {id(u): lib for lib, u in self.units}
        return {lib for lib, _ in self.placed_by.values()} | {by_unit[id(r[2])] for r in self.request.tensorize
                                                               if id(r[2]) in by_unit}


@dataclass(frozen=True)
class Pass:
    """A named step: `run(state) -> stmt`, applied when `when(state)` holds."""

    name: str
    run: Callable
    when: Callable = lambda st: True


def _scan(st):
    return scan(st.request.space)


def _unswitch(st):
    if any(c.shared for c in st.request.caches):
        # a block's shared caches come with barriers that every unit of the block must reach: the
        # loops keep their guards (no copy of the code per piece, no branches around barriers;
        # PoCL 3.1 miscompiles barriers in the nested, uniform branches unswitching makes)
        return st.stmt
    parallel = {v for v, k in st.request.kinds.items() if k in (LoopKind.PARALLEL, LoopKind.BOUND)}
    return unswitch(st.stmt, whole=parallel)


def _symbols(st) -> list:
    loop_vars = set(st.request.space.vars)
    return sorted((v for v in free_vars(st.stmt) if v.dtype is ScalarType.index and v not in loop_vars),
                  key=lambda v: v.uid)


def _caches(st):
    stmt, st.cache_bufs, st.fills = insert_caches(st.stmt, st.request, _symbols(st), st.owners)
    return stmt


def _target_memories(st):
    def describe(b):
        c = st.owners.get(b)
        if c is None:
            return f"cache {b.name}"
        level = c.placed_level
        return (f"cache of {c.array_name} at index {st.request.space.dims[-level].index.name}"
                if level is not None else f"cache of {c.array_name}")

    locality = {b: c.locality for b, c in st.owners.items() if c.locality is not None}
    stmt, st.layouts, st.placed_by = lower_target_memories(st.stmt, st.units, st.cache_bufs, describe,
                                                           st.request.tensorize, locality)
    st.cache_bufs = [b for b in st.cache_bufs if not is_target_buffer(b)]
    return stmt


def _tensorize(st):
    placed_by = {b: lib for b, (lib, _) in st.placed_by.items()}
    return tensorize(st.stmt, st.request.tensorize, st.layouts, placed_by, {u: lib for lib, u in st.units})


def _check_target_access(st):
    check_no_target_access(st.stmt, st.request.tensorize)
    return st.stmt


class _MarkKinds(Mutator):
    def __init__(self, kinds):
        self.kinds = kinds

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        k = self.kinds.get(f.var)
        return f if k is None or k == f.kind else For(f.var, f.lo, f.hi, f.body, k, f.attrs)


def _has_vectorized(st) -> bool:
    return any(f.kind == LoopKind.VECTORIZED for f in nodes_of(st.stmt, For))


def _place_buffers(st):
    # a cache filled inside a parallel loop's body is per thread
    position = {d.var: k for k, d in enumerate(st.request.space.dims)}
    fill_position = {b: (position.get(v), inside) for b, (v, inside) in st.fills.items()}
    temps = [b for b in buffers_of(st.stmt) if b.role == BufferRole.TEMP]
    stmt = place_buffers(st.stmt, st.cache_bufs, zero=False, fill_position=fill_position, loop_position=position)
    for b in reversed(temps):
        stmt = Alloc(b, stmt, zero=True)
    return stmt


def _vector_vars(st) -> set:
    """Vectorized loop vars: innermost, their loops stay even with one iteration (one masked lane
    keeps a register tile's tail column in registers, where scalar code would use the cache's
    memory)."""
    return {v for v, k in st.request.kinds.items() if k == LoopKind.VECTORIZED}


def _kinds_or_unroll(st) -> bool:
    return bool(st.request.kinds) or bool(st.request.unroll_below)


PASSES = (
    Pass("scan", _scan),
    Pass("mark bound loops", lambda st: mark_bound(st.stmt, st.request.bindings), lambda st: bool(st.request.bindings)),
    Pass("unswitch", _unswitch),
    Pass("simplify (keeping cache loops)",
         lambda st: simplify(st.stmt, keep=cache_loop_vars(st.request), keep_innermost=_vector_vars(st)),
         lambda st: bool(st.request.caches)),
    Pass("caches", _caches, lambda st: bool(st.request.caches)),
    Pass("simplify", lambda st: simplify(st.stmt, keep_innermost=_vector_vars(st))),
    Pass("target memories", _target_memories, lambda st: st.accelerated()),
    Pass("tensorize", lambda st: _tensorize(st), lambda st: st.accelerated_now),
    Pass("simplify (after tensorize)", lambda st: simplify(st.stmt, keep_innermost=_vector_vars(st)),
         lambda st: st.accelerated_now),
    Pass("configs", lambda st: hoist_configs(st.stmt), lambda st: st.accelerated_now),
    Pass("invariant fills", lambda st: hoist_invariant_fills(st.stmt, st.request.kinds), lambda st: st.accelerated_now),
    Pass("check target access", _check_target_access,
         lambda st: not st.accelerated_now and any(is_target_buffer(b) for b in st.cache_bufs)),
    Pass("mark loop kinds", lambda st: _MarkKinds(st.request.kinds).visit(st.stmt), lambda st: bool(st.request.kinds)),
    Pass("unroll", lambda st: unroll(st.stmt, st.request.kinds, st.request.unroll_below), _kinds_or_unroll),
    Pass("simplify (after unroll)", lambda st: simplify(st.stmt), _kinds_or_unroll),
    Pass("vectorize", lambda st: vectorize(st.stmt, st.request.target), _has_vectorized),
    Pass("parallelize", lambda st: parallel_fills(mark_parallel(st.stmt, *st.request.parallel), st.cache_bufs,
                                                  *st.request.parallel),
         lambda st: st.request.parallel is not None),
    Pass("place buffers", _place_buffers),
    Pass("promote registers", lambda st: promote_registers(st.stmt), lambda st: bool(st.cache_bufs)),
    Pass("simplify (after registers)", lambda st: simplify(st.stmt), lambda st: bool(st.cache_bufs)),
    Pass("prefetch", lambda st: insert_prefetches(st.stmt, st.request.prefetch, st.owners),
         lambda st: bool(st.request.prefetch)),
)


def _passes(request: LoweringRequest) -> list:
    """PASSES with the target libraries' own passes inserted after the pass each names (in library
    order, a library's in its order), each run when the function uses its library."""
    out = list(PASSES)
    after: dict = {}  # generic pass name -> library passes inserted after it so far
    for lib in libraries_for(request.target):
        for lp in lib.lowering_passes():
            at = next(k for k, p in enumerate(out) if p.name == lp.after) + after.get(lp.after, 0)
            out.insert(at + 1, Pass(lp.name, lambda st, f=lp.run: f(st.stmt, st.request),
                                    (lambda st: True) if lp.always else
                                    (lambda st, lib=lib: lib in st.used_libraries())))
            after[lp.after] = after.get(lp.after, 0) + 1
    return out


def run_passes(request: LoweringRequest, until: Optional[str] = None) -> LoweringState:
    """Apply the passes in order (up to, not including, the pass named `until`)."""
    st = LoweringState(request)
    debug, timing = os.environ.get("ACCPY_DEBUG_LOWER"), os.environ.get("ACCPY_TIME_LOWER")
    for p in _passes(request):
        if p.name == until:
            break
        if p.name == "target memories":
            st.accelerated_now = st.accelerated()
        if not p.when(st):
            continue
        t0 = time.perf_counter()
        st.stmt = p.run(st)
        if timing:
            print(f"accpy lower: {p.name:<32} {1e3 * (time.perf_counter() - t0):8.2f} ms", file=sys.stderr)
        if debug:
            print(f"--- after {p.name} ---\n{stmt_str(st.stmt)}\n")
    return st


def lower_loops(request: LoweringRequest) -> Stmt:
    """The loops of a request up to vectorization (what `Schedule.to_python(unswitched=True)` shows)."""
    return run_passes(request, until="parallelize").stmt


def default_arguments(stmt) -> tuple:
    """Arguments in first-use order when none are given: arrays, then runtime sizes."""
    bufs = [b for b in buffers_of(stmt) if b.role not in (BufferRole.TEMP, BufferRole.CONST, BufferRole.CACHE)]
    sizes = sorted((v for v in free_vars(stmt) if v not in bufs), key=lambda v: v.uid)
    for b in bufs:
        for s in b.shape:
            sizes.extend(x for x in free_vars(s) if x not in sizes)
    return tuple(bufs) + tuple(dict.fromkeys(sizes))


def lower_function(request: LoweringRequest, name: str) -> Function:
    """The C-ready function `name` of a request: every pass applied."""
    stmt = run_passes(request).stmt
    args = request.args if request.args is not None else default_arguments(stmt)
    return Function(name, args, stmt, {"target": request.target})  # (codegen picks the vector shapes)
