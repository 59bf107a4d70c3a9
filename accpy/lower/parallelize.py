"""Parallelize: OpenMP loops, and where buffers live so that threads do not share caches.

A loop of kind `parallel` becomes `#pragma omp parallel for`; directly nested parallel
loops with rectangular bounds are collapsed into it, any other parallel loop nested
inside runs serially (no nested parallel regions). A cache filled inside a parallel loop's
body (its site index comes after the loop's index in the schedule's order, or, for a
multicache, its trigger index is the loop's index or comes after it) is private to it: allocated inside the loop's body, one per thread. Used anywhere else (a
parallel loop at or inside its fill index -- e.g. where unswitching left a single
iteration of an outer parallel index, whose loop is gone -- or code outside every parallel
loop), it is also allocated at function level and shared there: such parallel iterations
only read it or write disjoint elements of it (parallelize refuses statements whose
written element does not move with the parallel indices).

A cache shared by the threads (filled outside every parallel loop) is filled by all of them:
`parallel_fills` makes the outermost loop of such a fill a parallel loop of its own when its
iterations provably write disjoint elements (one subscript is `c * v + r` in every store, the
spread of the `r`s less than |c|), read nothing the fill writes, and call nothing.

Guarantees afterwards: parallel loops carry ("collapse", n), ("policy", p) and
("threads", t) attributes; no parallel loop is nested in another; every cache is
allocated in the scope of all its uses and private to each thread.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.kinds import LoopKind
from ..ir.affine import Affine, affine_bounds, to_affine
from ..ir.expr import Call, Expr, as_int
from ..ir.stmt import Alloc, For, Store
from ..ir.vector import VStore
from ..ir.visitor import Mutator, Visitor, accesses, buffers_of, child_nodes, walk


def mark_parallel(stmt, policy: str, threads: int):
    return _Mark(policy, threads).visit(stmt)


class _Mark(Mutator):
    def __init__(self, policy, threads):
        self.policy, self.threads = policy, threads
        self.depth = 0

    def visit_For(self, f: For):
        if f.kind != LoopKind.PARALLEL:
            return self.generic_visit(f)
        if self.depth > 0:
            # inside another parallel loop: run serially
            self.depth += 1
            body = self.visit(f.body)
            self.depth -= 1
            return For(f.var, f.lo, f.hi, body, LoopKind.SERIAL, f.attrs)
        collapse = 1
        inner = f.body
        outer_vars = {f.var}
        while isinstance(inner, For) and inner.kind == LoopKind.PARALLEL:
            lo, hi = to_affine(inner.lo), to_affine(inner.hi)
            if lo is None or hi is None or any(v in outer_vars for v in lo.vars + hi.vars):
                break
            collapse += 1
            outer_vars.add(inner.var)
            inner = inner.body
        self.depth += 1
        body = self._collapsed(f.body, collapse - 1)
        self.depth -= 1
        attrs = tuple(a for a in f.attrs if a[0] not in ("collapse", "policy", "threads")) + (
            ("collapse", collapse), ("policy", self.policy), ("threads", self.threads))
        return For(f.var, f.lo, f.hi, body, LoopKind.PARALLEL, attrs)

    def _collapsed(self, s, n):
        if n == 0:
            return self.visit(s)
        return For(s.var, s.lo, s.hi, self._collapsed(s.body, n - 1), LoopKind.PARALLEL_INNER, s.attrs)


def parallel_fills(stmt, caches, policy: str, threads: int):
    """`stmt` with the outermost loop of each fill of a shared cache in `caches` made parallel
    (see the module doc); loops inside parallel loops are left alone."""
    ids = {id(b) for b in caches}

    class M(Mutator):
        def visit_For(self, f: For):
            if f.kind in (LoopKind.PARALLEL, LoopKind.PARALLEL_INNER):
                return f
            if f.kind == LoopKind.SERIAL and _disjoint_fill(f, ids):
                return For(f.var, f.lo, f.hi, f.body, LoopKind.PARALLEL,
                           f.attrs + (("collapse", 1), ("policy", policy), ("threads", threads)))
            return self.generic_visit(f)

    return M().visit(stmt)


def _disjoint_fill(f: For, cache_ids) -> bool:
    """Whether `f` only stores into caches of `cache_ids`, each iteration into elements no other
    iteration writes (checked on one subscript), reading none of them and calling nothing."""
    lo, hi = as_int(f.lo), as_int(f.hi)
    if lo is None or hi is None or hi - lo < 2 or _stored_bytes(f) < FILL_BYTES:
        return False
    nodes = list(walk(f.body))
    stores = [n for n in nodes if isinstance(n, (Store, VStore))]
    written = {id(s.buffer) for s in stores}
    if (len(written) != 1 or not written <= cache_ids or any(isinstance(n, Call) for n in nodes)
            or len({len(s.indices) for s in stores}) != 1
            or any(isinstance(n, For) and n.kind in (LoopKind.PARALLEL, LoopKind.PARALLEL_INNER) for n in nodes)
            or any(id(a.buffer) in written for a in accesses(f.body) if not a.is_write)):
        return False
    ranges = {}
    for n in nodes:
        if isinstance(n, For):
            a, b = as_int(n.lo), as_int(n.hi)
            if a is None or b is None or b <= a:
                return False
            ranges[n.var] = (a, b - 1)
    for d in range(len(stores[0].indices)):
        forms = [to_affine(s.indices[d]) for s in stores]
        if any(a is None for a in forms):
            continue
        coefs = {dict(a.terms).get(f.var, 0) for a in forms}
        if len(coefs) != 1 or 0 in coefs:
            continue
        c = coefs.pop()
        spans = []
        for s, a in zip(stores, forms):
            rest = affine_bounds(Affine([t for t in a.terms if t[0] is not f.var], a.const), ranges)
            lanes = (s.lanes - 1) * s.stride if isinstance(s, VStore) and d == len(s.indices) - 1 else 0
            if rest is None or (isinstance(s, VStore) and (lanes < 0 or (s.stride != 1 and d == len(s.indices) - 1))):
                spans = None
                break
            spans.append((rest[0], rest[1] + lanes))
        if spans and max(h for _, h in spans) - min(lo for lo, _ in spans) < abs(c):
            return True
    return False


# fills smaller than this stay serial (a parallel region costs a few microseconds)
FILL_BYTES = 64 * 1024


def _stored_bytes(s) -> int:
    """Bytes the statement stores, counting each loop's constant trip count (0 where one is not
    constant)."""
    if isinstance(s, For):
        lo, hi = as_int(s.lo), as_int(s.hi)
        return 0 if lo is None or hi is None else max(hi - lo, 0) * _stored_bytes(s.body)
    if isinstance(s, (Store, VStore)):
        return max(s.buffer.dtype.bits // 8, 1) * (s.lanes if isinstance(s, VStore) else 1)
    return sum(_stored_bytes(c) for c in child_nodes(s) if not isinstance(c, Expr))


def _parallel_loops(stmt) -> list:
    out = []

    class V(Visitor):
        def visit_For(self, f):
            if f.kind == LoopKind.PARALLEL:
                out.append(f)
                return
            self.generic_visit(f)

    V().visit(stmt)
    return out


def place_buffers(stmt, buffers, zero: bool, fill_position=None, loop_position=None):
    """Wrap `stmt` (or the parallel loops using a buffer) in Allocs of `buffers`.

    `fill_position`: buffer -> (schedule position of the loop where it is filled, whether
    the fill is inside that loop's body (a multicache's trigger loop) or right before the
    loop (an ordinary cache's site)); `loop_position`: loop var -> its schedule position.
    See the module doc.
    """
    fill_position = fill_position or {}
    loop_position = loop_position or {}

    def private_in(p: For, b) -> bool:
        fp, inside = fill_position.get(b, (None, False))
        lp = loop_position.get(p.var)
        if fp is None or lp is None:
            return False
        # filled in p's body: once per iteration of p (or of a loop inside it)
        return fp > lp or (inside and fp == lp)

    for p in _parallel_loops(stmt):
        written, read = _written_buffers(p.body), _read_buffers(p.body)
        for b in buffers:
            if private_in(p, b) and id(b) in read and id(b) not in written:
                raise ScheduleError(f"cache {b.name} is read inside the parallel loop over {p.var.name} "
                                    f"but filled outside it")
    stmt = _WrapParallel(buffers, zero, private_in).visit(stmt)
    outside = _uses_outside_own_allocs(stmt, buffers)
    for b in reversed([b for b in buffers if id(b) in outside]):
        stmt = Alloc(b, stmt, zero=zero)
    return stmt


def _read_buffers(stmt) -> set:
    return {id(a.buffer) for a in accesses(stmt) if not a.is_write}


def _written_buffers(stmt) -> set:
    out = set()

    class V(Visitor):
        def visit_Store(self, n):
            out.add(id(n.buffer))
            self.generic_visit(n)

        def visit_VStore(self, n):
            out.add(id(n.buffer))
            self.generic_visit(n)

    V().visit(stmt)
    return out


def _uses_outside_own_allocs(stmt, bufs) -> set:
    """ids of the buffers accessed somewhere not inside an Alloc of that same buffer."""
    ids = {id(b) for b in bufs}
    found = set()

    class V(Visitor):
        def __init__(self):
            self.inside: list = []

        def visit_Alloc(self, a):
            self.inside.append(id(a.buffer))
            self.generic_visit(a)
            self.inside.pop()

        def _use(self, n):
            if id(n.buffer) in ids and id(n.buffer) not in self.inside:
                found.add(id(n.buffer))
            self.generic_visit(n)

        visit_Load = visit_Store = visit_VLoad = visit_VStore = _use

    V().visit(stmt)
    return found


class _WrapParallel(Mutator):
    def __init__(self, bufs, zero, private_in):
        self.bufs, self.zero, self.private_in = bufs, zero, private_in

    def visit_For(self, f: For):
        if f.kind != LoopKind.PARALLEL:
            return self.generic_visit(f)
        used = {id(b) for b in buffers_of(f.body)}
        body = f.body
        for b in reversed(self.bufs):
            if id(b) in used and self.private_in(f, b):
                body = Alloc(b, body, zero=self.zero)
        # collapsed inner loops must stay perfectly nested: allocate inside the innermost one
        return For(f.var, f.lo, f.hi, _sink_allocs(body), f.kind, f.attrs)


def _sink_allocs(body):
    allocs = []
    while isinstance(body, Alloc):
        allocs.append(body)
        body = body.body
    if not allocs:
        return body

    def rebuild(inner):
        for a in reversed(allocs):
            inner = Alloc(a.buffer, inner, a.zero)
        return inner

    def down(s):
        if isinstance(s, For) and s.kind == LoopKind.PARALLEL_INNER:
            return For(s.var, s.lo, s.hi, down(s.body), s.kind, s.attrs)
        return rebuild(s)

    return down(body)
