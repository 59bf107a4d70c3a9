"""Software prefetch (`plan.prefetch`), the last pass. Guarantees: each loop of a prefetch's
index (every piece unswitching made of it) starts its body with Prefetch statements for the
cache lines that the body's accesses of the chosen buffers (those outside inner loops) touch
`distance` iterations later; nothing else changes. Accesses that do not move with the loop are
not prefetched (their lines are already there).

Which lines: the accesses' flat element offsets are grouped by their varying part (e.g.
`240*kk + 48*jj`) and sorted by constant offset; accesses whose bytes lie within one cache
line of the run before them extend it, and a run gets one prefetch per line it spans (three
16-float loads side by side: three prefetches; eight rows of A 4 KiB apart: eight).

Spread (`plan.prefetch(..., spread=index)`): the lines of one iteration are asked for a few at a
time, in the iterations of an inner loop of that index (the longest directly in the body), not all
at its top: where a group's runs are alike (as many lines each, a constant distance apart, e.g. the
rows of a block of accumulator tiles), iteration t of the inner loop asks for runs q*t .. q*t+q-1
(q = ceil(runs / trips)), and none in the last `distance` iterations of the index (those lines
lie past its loop: another block's, or another thread's). Other groups, and bodies without such
a loop of constant trips, keep their prefetches at the top."""
from __future__ import annotations

from typing import Optional

from ..ir.affine import Affine, element_offset, to_affine
from ..ir.expr import BinOp, Call, Const, Load, as_int, idx_op
from ..ir.stmt import For, If, Prefetch, Store, block
from ..ir.types import ScalarType
from ..ir.vector import VLoad, VStore
from ..ir.visitor import Mutator, child_nodes, free_vars, substitute
from ..targets.library import intrinsic

LINE_BYTES = 64


def _roots(owners) -> dict:
    """Cache buffer -> (its key, the array buffer at the end of its chain of caches)."""
    by_key = {r.key: r for r in owners.values()}

    def root(r):
        while r.outer is not None:
            r = by_key[r.outer]
        return r.source

    return {b: (r.key, root(r)) for b, r in owners.items()}


def _chooser(req, roots):
    """Whether a buffer is one that prefetch request `req` is about."""
    if req.cache_key is not None:
        return lambda buf: buf in roots and roots[buf][0] == req.cache_key
    return lambda buf: buf is req.array or (buf in roots and roots[buf][1] is req.array)


def _intrinsic_rows(n: Call, chosen) -> Optional[list]:
    """The rows an intrinsic call touches through its pointer arguments (its library's
    `footprint`), as accesses; None when it declares none."""
    intr = intrinsic(n.fn)
    if intr is None or intr.footprint is None:
        return None
    args = dict(zip(intr.params, n.args))
    out = []
    for param, rows, stride, row_bytes in intr.footprint(args):
        at = args[param]
        if not isinstance(at, Load) or not chosen(at.buffer):
            continue
        size = at.buffer.dtype.bits // 8
        step, write = as_int(stride), param not in intr.read_only
        if step is None or step % size:
            continue  # rows at a distance only known at run time: not prefetched
        base = element_offset(at.buffer, at.indices)
        for r in range(rows):
            out.append((at.buffer, idx_op("add", base, Const(r * step // size)), row_bytes, write))
    return out


def _direct_accesses(body, chosen) -> list:
    """(buffer, flat element offset, bytes touched, is a write) of the accesses in `body` to
    chosen buffers, outside nested loops (an intrinsic's rows, when its library declares them)."""
    out, stack = [], [body]
    while stack:
        n = stack.pop()
        if isinstance(n, For):
            continue
        if isinstance(n, Call):
            rows = _intrinsic_rows(n, chosen)
            if rows is not None:
                out.extend(rows)
                continue
        if isinstance(n, (Load, VLoad, Store, VStore)) and chosen(n.buffer):
            size = n.buffer.dtype.bits // 8
            if isinstance(n, (Load, Store)):
                nbytes = size
            elif n.stride == 0:  # the 32 bits at the address, in every slot
                nbytes = 4
            else:  # lanes `stride` elements apart (a gather or scatter when not 1)
                nbytes = ((n.lanes - 1) * abs(n.stride) + 1) * size
            out.append((n.buffer, element_offset(n.buffer, n.indices), nbytes, isinstance(n, (Store, VStore))))
        stack.extend(child_nodes(n))
    return out


def _ahead(off, var, distance: int, elements: int):
    """The flat offset `off` at `var + distance`, plus `elements`."""
    a = to_affine(off)
    if a is not None:
        return (a + Affine.constant(a.coef(var) * distance + elements)).to_expr()
    e = substitute(off, {var: BinOp("add", var, Const(distance))})
    return BinOp("add", e, Const(elements)) if elements else e


def _runs(accs, var) -> list:
    """The accesses `accs` (see `_direct_accesses`) that move with `var`, as groups
    (buffer, varying part (an expression), [[first byte, end byte, is a write], ...]): in each
    group, runs of bytes no more than a cache line apart, by first byte."""
    groups: dict = {}
    for buf, off, nbytes, write in accs:
        a = to_affine(off)
        if a is not None:
            if a.coef(var) == 0:
                continue  # the same element every iteration
            key, c = Affine._of(a.terms, 0), a.const
        elif var in free_vars(off):
            key, c = off, 0
        else:
            continue
        groups.setdefault((buf, key), []).append((c, nbytes, write))
    out = []
    for (buf, key), items in groups.items():
        size = buf.dtype.bits // 8
        runs: list = []
        for c, nbytes, write in sorted(items, key=lambda t: t[0]):
            lo = c * size
            if runs and lo < runs[-1][1] + LINE_BYTES:
                runs[-1][1] = max(runs[-1][1], lo + nbytes)
                runs[-1][2] |= write
            else:
                runs.append([lo, lo + nbytes, write])
        out.append((buf, key.to_expr() if isinstance(key, Affine) else key, runs))
    return out


def _lines(buf, base, var, distance: int, locality: int, runs) -> list:
    """One Prefetch per cache line of `runs`, `distance` iterations of `var` ahead."""
    size = buf.dtype.bits // 8
    return [Prefetch(buf, _ahead(base, var, distance, b // size), write, locality)
            for lo, hi, write in runs for b in range(lo, hi, LINE_BYTES)]


def prefetches(accs, var, distance: int, locality: int) -> list:
    """Prefetch statements for the lines of `accs` (see `_direct_accesses`), `distance`
    iterations of `var` ahead."""
    return [p for buf, base, runs in _runs(accs, var) for p in _lines(buf, base, var, distance, locality, runs)]


def _alike(runs) -> Optional[tuple]:
    """(lines per run, bytes between runs) when every run spans as many lines and the runs are
    evenly spaced; else None."""
    counts = {len(range(lo, hi, LINE_BYTES)) for lo, hi, _ in runs}
    steps = {b[0] - a[0] for a, b in zip(runs, runs[1:])}
    if len(counts) != 1 or len(steps) > 1:
        return None
    return counts.pop(), steps.pop() if steps else 0


def spread_prefetches(accs, var, distance: int, locality: int, inner: For) -> tuple:
    """(the statements for the top of loop `inner`'s body, the prefetches left for the top of
    `var`'s): the lines of `accs` `distance` iterations of `var` ahead, each group of alike runs
    shared out over `inner`'s iterations (see the module's doc); `inner` runs a constant number of
    times (`_spread_loop`)."""
    trips = as_int(idx_op("sub", inner.hi, inner.lo))
    spread, top = [], []
    for buf, base, runs in _runs(accs, var):
        shape = _alike(runs)
        if shape is None or trips < 2:
            top.extend(_lines(buf, base, var, distance, locality, runs))
            continue
        lines, step = shape
        size = buf.dtype.bits // 8
        per = -(-len(runs) // trips)  # runs per iteration of `inner`
        t = idx_op("sub", inner.var, inner.lo)
        write = any(w for _, _, w in runs)
        for v in range(per):
            run = idx_op("add", idx_op("mul", Const(per), t), Const(v))  # the run this slot asks for
            at = idx_op("add", _ahead(base, var, distance, (runs[0][0] + v * step) // size),
                        idx_op("mul", Const(per * step // size), t))
            stmts = [Prefetch(buf, idx_op("add", at, Const(n * LINE_BYTES // size)), write, locality)
                     for n in range(lines)]
            if per * (trips - 1) + v >= len(runs):  # the last iterations have no run in this slot
                stmts = [If(BinOp("lt", run, Const(len(runs)), ScalarType.bool), block(*stmts))]
            spread.extend(stmts)
    return spread, top


def _spread_loop(body, var) -> Optional[For]:
    """The longest loop of `var` directly in `body` (not inside another loop), the first if tied."""
    best, stack = None, [body]
    while stack:
        n = stack.pop(0)
        if isinstance(n, For):
            if n.var is var:
                trips = as_int(idx_op("sub", n.hi, n.lo))
                if trips is not None and (best is None or trips > best[0]):
                    best = (trips, n)
            continue
        stack.extend(child_nodes(n))
    return best[1] if best else None


class _Insert(Mutator):
    def __init__(self, req, chosen):
        self.req, self.chosen, self.count = req, chosen, 0

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        if f.var is not self.req.var:
            return f
        req, accs = self.req, _direct_accesses(f.body, self.chosen)
        inner = _spread_loop(f.body, req.spread) if req.spread is not None else None
        if inner is None:
            pre, spread = prefetches(accs, f.var, req.distance, req.locality), []
        else:
            spread, pre = spread_prefetches(accs, f.var, req.distance, req.locality, inner)
        self.count += len(pre) + len(spread)
        body = f.body
        if spread:
            # not past the loop's last iteration: those lines would be another block's (another
            # thread's, when the loop outside is parallel)
            ahead = BinOp("lt", idx_op("add", f.var, Const(req.distance)), f.hi, ScalarType.bool)
            moved = For(inner.var, inner.lo, inner.hi, block(If(ahead, block(*spread)), inner.body), inner.kind,
                        inner.attrs)
            body = _Replace(inner, moved).visit(body)
        if not pre and not spread:
            return f
        return For(f.var, f.lo, f.hi, block(*pre, body), f.kind, f.attrs)


class _Replace(Mutator):
    """One node (by identity) replaced."""

    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit(self, n):
        return self.new if n is self.old else super().visit(n)


def insert_prefetches(stmt, requests, owners):
    """`stmt` with the prefetches of `requests` (PrefetchRequests) at the top of their loops.
    `owners`: cache buffer -> CacheRequest (to follow a cache back to its array)."""
    roots = _roots(owners)
    for req in requests:
        ins = _Insert(req, _chooser(req, roots))
        stmt = ins.visit(stmt)
        if not ins.count:
            v = req.var.name
            raise ValueError(f"{req.describe}: no loop of {v} accesses it, outside inner loops, at an address "
                             f"that moves with {v} (is {v} unrolled or vectorized, or its block cached in "
                             f"registers?): nothing to prefetch")
    return stmt
