"""Footprints of a loop's body in an array: the box hull of the elements each loop over a
cache's index touches (Fourier-Motzkin over the loop bounds, as affine functions of the
enclosing loops), whether the accesses certainly cover it, the largest key-slice within an
element budget, and the proofs a cache relies on (a TEMP block private to one site execution,
a `thrifty` block already contiguous in its source). Read by the cache pass (lower/cache.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.affine import Affine, cond_constraints, lower_bound_constraints, quasi_linear, to_affine, upper_bound_constraints
from ..errors import ScheduleError
from ..ir.expr import BinOp, Buffer, Const, Var, idx_op
from ..ir.stmt import Block, For, If, Store
from ..ir.types import ScalarType
from ..ir.visitor import accesses
from .polyhedra import Bound, ConstraintSet, bounds_expr, implies_ge
from .smt import quasi_range, z3_affine


class _NoPoints(Exception):
    """The loops around an access have no integer point: it never runs."""


class _Unbounded(ScheduleError):
    """A block whose extent no constant bounds (it grows with runtime sizes): no cache can hold it.
    Raised to callers as a ScheduleError; a budget cache's search takes it as "does not fit"."""


@dataclass
class _Access:
    indices: tuple
    chain: list  # For loops from the site down to the access
    is_write: bool
    is_read: bool
    reduce: Optional[str] = None
    guarded: bool = False  # under a condition: it may not run


def loop_constraints(f) -> list:
    """Constraints a loop's bounds (or an enclosing branch's affine condition) put on its context."""
    if isinstance(f, If):
        return cond_constraints(f.cond) or []
    lo = lower_bound_constraints(f.var, f.lo)
    hi = upper_bound_constraints(f.var, f.hi)
    if lo is None or hi is None:
        raise ScheduleError(f"cache: the bounds of loop {f.var.name} are not affine")
    return lo + hi


def _collect(site: For, buf: Buffer) -> list:
    out = []

    def walk(s, chain, guarded):
        if isinstance(s, For):
            walk(s.body, chain + [s], guarded)
        elif isinstance(s, Block):
            for x in s.stmts:
                walk(x, chain, guarded)
        elif isinstance(s, Store):
            reads = [a.indices for a in accesses(s, buf) if not a.is_write]
            for r in reads:
                out.append(_Access(r, chain, False, True, guarded=guarded))
            if s.buffer is buf:
                out.append(_Access(s.indices, chain, True, s.reduce is not None, s.reduce, guarded))
        elif hasattr(s, "body"):
            walk(s.body, chain, guarded)
        elif hasattr(s, "then"):
            # what the condition reads is read here too (an _If on array values)
            out.extend(_Access(a.indices, chain, False, True, guarded=guarded) for a in accesses(s.cond, buf))
            walk(s.then, chain, True)
            if s.orelse is not None:
                walk(s.orelse, chain, True)

    walk(site, [], False)
    return out


def _extreme(expr: Affine, cons: ConstraintSet, drop: list, upper: bool, ctx: ConstraintSet):
    """Bounds on `expr` over the points of `cons` after projecting out `drop` (a list of Bounds);
    _NoPoints when `cons` is found to have no integer point."""
    t = Var("t")
    pr = cons.add(Affine.var(t) - expr, expr - Affine.var(t)).project_out(drop)
    if pr is None:
        raise ScheduleError("cache: the footprint is too complex to compute")
    if pr.infeasible:
        raise _NoPoints  # the access never runs (a piece unswitching left empty)
    lows, ups = pr.bounds(t)
    bs = ups if upper else lows
    outer = ctx.union_with(pr.without(t))
    keep = []
    for b in sorted(set(bs), key=lambda b: (len(b.num.terms), b.den)):
        if any(_dominates(outer, k, b, upper) for k in keep):
            continue
        keep = [k for k in keep if not _dominates(outer, b, k, upper)]
        keep.append(b)
    if not keep:
        raise ScheduleError("cache: the footprint is unbounded")
    return keep


def _dominates(ctx, a: Bound, b: Bound, upper: bool) -> bool:
    """For upper bounds: a <= b everywhere (a is tighter); for lower bounds: a >= b."""
    return implies_ge(ctx, b, a) if upper else implies_ge(ctx, a, b)


@dataclass
class Footprint:
    lo: list  # per dim: IR expr of the block's first element
    hi: list  # per dim: IR expr of the block's last element
    lo_aff: list  # per dim: Affine of lo when it is a single affine expression, else None
    ext_max: list  # per dim: the largest extent over all executions (int)
    reads: bool
    writes: bool
    full_overwrite: bool
    ctx: object = None  # the site's context: constraints of its enclosing loops
    hi_aff: list = None  # per dim: Affine of hi when it is a single affine expression, else None


def blocks_apart(blk: Footprint, var) -> Optional[bool]:
    """Whether the blocks of different values of the loop `var` never meet: some dimension moves by
    at least the block's largest extent per iteration. None when a bound is not affine."""
    apart = False
    for lo, hi, ext in zip(blk.lo_aff, blk.hi_aff or [None] * len(blk.lo_aff), blk.ext_max):
        if lo is None or hi is None:
            return None
        a = lo.coef(var)
        apart = apart or (a != 0 and a == hi.coef(var) and abs(a) >= ext)
    return apart


def footprint(site: For, enclosing: list, buf: Buffer, symbols, across=()) -> Optional[Footprint]:
    """The block of `buf` at `site` (None when the site does not touch it). The enclosing loops over
    the vars `across` count as loops of the site: the block is the union over their iterations
    (a cache the units of a grid's block share: each thread's loop, the block of them all)."""
    try:
        return _footprint(site, enclosing, buf, symbols, across)
    except _Unbounded as e:
        raise ScheduleError(str(e)) from None


def _footprint(site: For, enclosing: list, buf: Buffer, symbols, across=()) -> Optional[Footprint]:
    accesses = _collect(site, buf)
    if not accesses:
        return None
    spread = [f for f in enclosing if isinstance(f, For) and f.var in across]
    ctx_cons = []
    for f in enclosing:
        if not any(f is x for x in spread):
            ctx_cons += loop_constraints(f)
    ctx_cons += [Affine.var(s) for s in symbols]
    ctx = ConstraintSet(ctx_cons)
    rank = buf.rank
    los: list = [[] for _ in range(rank)]
    his: list = [[] for _ in range(rank)]
    live = []
    for acc in accesses:
        cons = ConstraintSet(ctx_cons + [c for f in spread + list(acc.chain) for c in loop_constraints(f)])
        drop = [f.var for f in spread + list(acc.chain)]
        got = _access_bounds(acc, cons, drop, ctx, buf.name)
        if got is not None:  # None: an access in a piece of no iterations touches nothing
            live.append(acc)
            for k, (lo, hi) in enumerate(got):
                los[k].append(lo)
                his[k].append(hi)
    if not live:
        return None
    accesses = live
    lo_e, hi_e, lo_aff, hi_aff, ext_max = [], [], [], [], []
    for k in range(rank):
        # union over accesses: the smallest lower bound, the largest upper bound
        lows = _union(ctx, [b for bs in los[k] for b in (bs if len(bs) == 1 else [])], los[k], lower=True)
        ups = _union(ctx, [b for bs in his[k] for b in (bs if len(bs) == 1 else [])], his[k], lower=False)
        ext_max.append(_max_extent(ctx, lows[0], ups[0], buf.name, k, los[k], his[k]))
        # Projections are rational, so the box may reach past the elements really touched
        # (never past them inside the array... but past the array's ends): clamp it there
        lo, lo_a = lows[1], lows[0]
        if lo_a is not None and not ctx.implies(lo_a) and ctx.implies(-lo_a):
            lo, lo_a = Const(0), Affine.constant(0)  # starts at or before the array: at its start
        elif lo_a is None or not ctx.implies(lo_a):
            lo, lo_a = BinOp("max", lo, Const(0), ScalarType.index), None
        hi, hi_a = ups[1], ups[0]
        last = to_affine(buf.shape[k]) - 1 if to_affine(buf.shape[k]) is not None else None
        if hi_a is not None and last is not None and not ctx.implies(last - hi_a) and ctx.implies(hi_a - last):
            hi, hi_a = last.to_expr(), last
        elif hi_a is None or last is None or not ctx.implies(last - hi_a):
            hi, hi_a = BinOp("min", hi, idx_op("sub", buf.shape[k], Const(1)), ScalarType.index), None
        lo_e.append(lo)
        hi_e.append(hi)
        lo_aff.append(lo_a)
        hi_aff.append(hi_a)
    reads = any(a.is_read for a in accesses)
    writes = any(a.is_write for a in accesses)
    full = writes and not reads and _covers_box(accesses, ctx, lo_aff, hi_aff)
    return Footprint(lo_e, hi_e, lo_aff, ext_max, reads, writes, full, ctx, hi_aff)


def _access_bounds(acc, cons: ConstraintSet, drop: list, ctx: ConstraintSet, name) -> Optional[list]:
    """Per dimension, (lower Bounds, upper Bounds) of one access's subscripts over its loops;
    None when its loops are found to have no integer point."""
    try:
        return [_subscript_bounds(ix, k, cons, drop, ctx, name) for k, ix in enumerate(acc.indices)]
    except _NoPoints:
        return None


def _subscript_bounds(ix, k: int, cons: ConstraintSet, drop: list, ctx: ConstraintSet, name) -> tuple:
    a = to_affine(ix)
    if a is not None:
        return _extreme(a, cons, drop, False, ctx), _extreme(a, cons, drop, True, ctx)
    # quasi-affine (// and % by constants): `x // m + r` or `x % m + r` is bounded like an
    # affine subscript (in the enclosing loops); others by the constant range z3 finds over
    # the site's iterations (a box that may hold more than the block, never less)
    bounds = _quasi_bounds(ix, cons, drop, ctx)
    if bounds is not None:
        return bounds
    low, high = quasi_range(ix, cons, name, k)
    return [Bound(Affine.constant(low), 1)], [Bound(Affine.constant(high), 1)]


def _quasi_bounds(ix, cons: ConstraintSet, drop: list, ctx: ConstraintSet) -> Optional[tuple]:
    """(lower Bounds, upper Bounds) of a subscript `x // m + r` (floor((x + m*r) / m), from the
    bounds of x + m*r) or `x % m + r` (r's bounds, and m - 1 above them), x and r affine; None
    for other forms or when a bound is a fraction (then the caller's constant range applies)."""
    parts = quasi_linear([(ix, 1)])
    if parts is None or len(parts[1]) != 1:
        return None
    r, ((x, m), ks) = parts[0], next(iter(parts[1].items()))
    if ks == [1, 0]:
        y = x + r * m
        lows, ups = _extreme(y, cons, drop, False, ctx), _extreme(y, cons, drop, True, ctx)
        if any(b.den != 1 for b in lows + ups):
            return None
        return [_floor_div(b.num, m, True) for b in lows], [_floor_div(b.num, m, False) for b in ups]
    if ks == [0, 1]:
        lows, ups = _extreme(r, cons, drop, False, ctx), _extreme(r, cons, drop, True, ctx)
        return lows, [Bound(b.num + (m - 1) * b.den, b.den) for b in ups]
    return None


def _floor_div(num: Affine, m: int, lower: bool) -> Bound:
    """floor(num / m) as a lower Bound (read as a ceiling: ceil((num - m + 1) / m)) or an upper
    one; exact (den 1) when m divides every coefficient."""
    if all(c % m == 0 for _, c in num.terms):
        return Bound(Affine({v: c // m for v, c in num.terms}, num.const // m), 1)
    return Bound(num - (m - 1), m) if lower else Bound(num, m)


def _union(ctx, singles, groups, lower: bool):
    """(Affine or None, IR expr) of min (lower) / max (upper) over the accesses' bounds."""
    if all(len(g) == 1 for g in groups):
        # keep the extreme ones: for a union's lower bound, the smallest
        keep = []
        for b in sorted(set(singles), key=lambda b: (len(b.num.terms), b.den)):
            # a union takes the smallest lower bound / the largest upper bound
            if any(_dominates(ctx, k, b, upper=lower) for k in keep):
                continue  # some kept k <= b (lower) or k >= b (upper) already covers b
            keep = [k for k in keep if not _dominates(ctx, b, k, upper=lower)]
            keep.append(b)
        aff = keep[0].num if len(keep) == 1 and keep[0].den == 1 else None
        expr = None
        for b in keep:
            e = bounds_expr([b], upper=not lower)
            expr = e if expr is None else BinOp("min" if lower else "max", expr, e, ScalarType.index)
        return aff, expr
    expr = None
    for g in groups:
        e = bounds_expr(g, upper=not lower)
        expr = e if expr is None else BinOp("min" if lower else "max", expr, e, ScalarType.index)
    return None, expr


def _max_extent(ctx: ConstraintSet, lo: Optional[Affine], hi: Optional[Affine], name, k, low_groups=(),
                up_groups=()) -> int:
    """The largest extent of the block along dimension k over all executions of the site.

    When the block's first or last element is not one affine expression (a min / max of
    several, e.g. in skewed loops), each access's bounds bound it: the block spans at most
    max over accesses a, b of (a's upper bound - b's lower bound + 1), with any one of the
    upper bounds of a (their min is a's upper end) and of the lower bounds of b.
    """
    if lo is not None and hi is not None:
        d = hi - lo + 1
        if d.is_const:
            return max(d.const, 0)
        v = _constant_upper(ctx, d)
        if v is None:
            raise _Unbounded(f"cache of {name}: the block's extent along dimension {k} depends on runtime "
                                f"sizes; caches need blocks of bounded size")
        return max(v, 0)
    best = 0
    for ups in up_groups:
        for lows in low_groups:
            cands = []
            for u in ups:
                for low in lows:
                    v = _constant_upper(ctx, u.num * low.den - low.num * u.den)
                    if v is not None:
                        cands.append(v // (u.den * low.den) + 1)
            if not cands:
                raise _Unbounded(f"cache of {name}: the block's extent along dimension {k} depends on runtime "
                                    f"sizes; caches need blocks of bounded size")
            best = max(best, min(cands))
    return best


def _constant_upper(ctx: ConstraintSet, d: Affine) -> Optional[int]:
    """A constant upper bound of `d` over the points of `ctx` (None: not bounded by constants)."""
    if d.is_const:
        return d.const
    t = Var("t")
    pr = ctx.add(Affine.var(t) - d, d - Affine.var(t)).project_onto([t])
    if pr is None:
        return None
    _, ups = pr.bounds(t)
    vals = [b.num.const // b.den for b in ups if b.num.is_const]
    return min(vals) if vals else None


def _covers_box(accesses, ctx: ConstraintSet, first: list, last: list) -> bool:
    """Do the writes certainly fill the whole box [first, last] (so the block need not be
    copied in)? `first` / `last`: the block's ends per dimension (Affine; None: unknown).

    Every write is unconditional and *dense*: each subscript moves with its own loops only
    (no loop feeds two subscripts), their coefficients form a mixed radix (sorted by size:
    1, then each the previous times its loop's constant trip count, e.g. `8*j + jj` with jj
    in [0, 8)), and the loops are rectangular within the site (a loop of one iteration just
    fixes its variable). Such a write fills a box exactly. The writes' boxes (e.g. the full
    tiles and the tail that unswitching made of one loop) must then merge into one: two
    boxes merge when they agree in every dimension but one, where one ends right before
    the other starts.
    """
    writes = [a for a in accesses if a.is_write]
    if not writes or any(w.guarded for w in writes):
        return False
    boxes = []
    for w in writes:
        box = _dense_box(w)
        if box is None:
            return False
        boxes.append(box)

    def same(x, y):
        return ctx.implies(x - y) and ctx.implies(y - x)

    def merge(a, b):
        differ = [d for d in range(len(a)) if not (same(a[d][0], b[d][0]) and same(a[d][1], b[d][1]))]
        if not differ:
            return a
        if len(differ) > 1:
            return None
        d = differ[0]
        for x, y in ((a, b), (b, a)):
            if same(x[d][1] + 1, y[d][0]):
                return a[:d] + [(x[d][0], y[d][1])] + a[d + 1:]
        return None

    if any(x is None for x in first + last):
        return False
    while len(boxes) > 1:
        for m in range(len(boxes)):
            for n in range(m + 1, len(boxes)):
                merged = merge(boxes[m], boxes[n])
                if merged is not None:
                    boxes = [b for k, b in enumerate(boxes) if k not in (m, n)] + [merged]
                    break
            else:
                continue
            break
        else:
            return False
    # the union is the block itself (the block's projection may be looser than the writes)
    return all(same(lo, a) and same(hi, b) for (lo, hi), a, b in zip(boxes[0], first, last))


def _dense_box(w: _Access):
    """[(first, last)] per dimension (Affine in the enclosing loops) of the elements a dense
    write fills, or None when the write is not dense (see `_covers_box`)."""
    fixed: dict = {}
    bounds = {}
    for f in w.chain:
        lo, hi = to_affine(f.lo), to_affine(f.hi)
        if lo is None or hi is None:
            return None
        lo, hi = lo.subs(fixed), hi.subs(fixed)
        bounds[f.var] = (lo, hi)
        trip = hi - lo
        if trip.is_const and trip.const == 1:
            fixed[f.var] = lo
    loops = {v: b for v, b in bounds.items() if v not in fixed}
    for lo, hi in loops.values():
        if any(v in bounds for v in lo.vars + hi.vars):
            return None  # not rectangular
    used = set()
    box = []
    for ix in w.indices:
        a = to_affine(ix)
        if a is None:
            return None
        a = a.subs(fixed)
        inner = sorted((v for v in a.vars if v in loops), key=lambda v: abs(a.coef(v)))
        if any(v in used for v in inner):
            return None
        used.update(inner)
        first = last = a
        step = 1
        for n, v in enumerate(inner):
            c = a.coef(v)
            if abs(c) != step:
                return None
            lo, hi = loops[v]
            trip = hi - lo
            if n + 1 < len(inner):
                if not trip.is_const or trip.const < 1:
                    return None
                step *= trip.const
            first = first.subs({v: lo if c > 0 else hi - 1})
            last = last.subs({v: hi - 1 if c > 0 else lo})
        box.append((first, last))
    return box


def prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def site_footprints(stmt, var, buf, symbols, enclosing=(), group_pieces: bool = False, across=()) -> list:
    """The block of `buf` at every loop over `var` (the cache's sites; with `group_pieces`, the
    consecutive pieces unswitching cut one loop into are one site; `across` as footprint's)."""
    blocks = [footprint(f, enc, buf, symbols, across)
              for f, enc in loops_with_context(stmt, var, enclosing, group_pieces)]
    return [b for b in blocks if b is not None]


def _count_accesses(stmt, buf) -> int:
    return len(accesses(stmt, buf))


def cache_is_private(stmt, info, sites, blocks) -> bool:
    """Does every access of the TEMP source sit in a site, with no two site executions sharing an
    element? Then each block starts as zeros (nothing touched it before) and nobody reads it after."""
    buf = info.source
    if _count_accesses(stmt, buf) != sum(_count_accesses(s, buf) for s, _ in sites):
        return False
    if any(a is None for b in blocks for a in list(b.lo_aff) + list(b.hi_aff or [None] * len(b.lo_aff))):
        return False
    import z3

    def encode(aff, names, tag):
        def term(v):
            if v not in names:
                names[v] = z3.Int(f"{v.name}#{v.uid}#{tag}")
            return names[v]

        return z3_affine(aff, term)

    for m, b1 in enumerate(blocks):
        for n_, b2 in enumerate(blocks):
            if n_ < m:
                continue
            s = z3.Solver()
            s.set("timeout", 2000)
            n1, n2 = {}, {}
            for c in b1.ctx:
                s.add(encode(c, n1, 1) >= 0)
            for c in b2.ctx:
                s.add(encode(c, n2, 2) >= 0)
            for d in range(buf.rank):
                s.add(encode(b1.lo_aff[d], n1, 1) <= encode(b2.hi_aff[d], n2, 2))
                s.add(encode(b2.lo_aff[d], n2, 2) <= encode(b1.hi_aff[d], n1, 1))
            if m == n_:
                common = [v for v in n1 if v in n2]
                if not common:
                    continue  # no enclosing loops: the site runs once
                s.add(z3.Or(*[n1[v] != n2[v] for v in common]))
            if s.check() != z3.unsat:
                return False
    return True


def thrifty_skips(info, blocks) -> bool:
    """A thrifty cache whose every block is already contiguous in the source, in the cache's
    layout and element type, is not made (Accera's `thrifty`): the block is one run of
    consecutive elements when, in memory order, its dimensions are single elements, then
    (at most) one partial dimension, then whole dimensions of the array."""
    c, src = info.cache, info.source
    if not c.thrifty or info.trigger_var is not None or info.dtype is not src.dtype or info.group > 1:
        return False
    shape = [to_affine(x) for x in src.shape]
    strides = [to_affine(x) for x in src.strides]
    if any(x is None or not x.is_const for x in shape + strides):
        return False
    shape, strides = [x.const for x in shape], [x.const for x in strides]
    rank = len(shape)
    last_major = rank > 1 and strides[0] < strides[-1]
    order = list(reversed(range(rank))) if last_major else list(range(rank))  # outermost first
    dense, acc_ = [0] * rank, 1
    for d in reversed(order):
        dense[d] = acc_
        acc_ *= shape[d]
    if strides != dense:
        return False  # explicit strides: not a plain FIRST_MAJOR / LAST_MAJOR array
    if c.layout_last is not None and c.layout_last != last_major:
        return False  # the cache asks for another layout
    for b in blocks:
        partial = False
        for d in order:
            if partial:
                lo, hi = b.lo_aff[d], b.hi_aff[d] if b.hi_aff else None
                whole = (lo is not None and hi is not None and b.ctx.implies(lo) and b.ctx.implies(-lo)
                         and b.ctx.implies(hi - (shape[d] - 1)) and b.ctx.implies((shape[d] - 1) - hi))
                if not whole:
                    return False
            elif b.ext_max[d] > 1:
                partial = True
    return True


def constant_extreme(e, cons: ConstraintSet, upper: bool):
    """The constant min (or max) of an affine expression over a constraint set, if bounded."""
    a = to_affine(e)
    if a is None:
        return None
    if a.is_const:
        return a.const
    bs = _extreme(a, cons, list(cons.vars | set(a.vars)), upper, ConstraintSet())
    vals = [b.num.const // b.den if upper else -((-b.num.const) // b.den) for b in bs if b.num.is_const]
    return (min(vals) if upper else max(vals)) if vals else None


def site_runs(stmts, var) -> list:
    """A block's statements with consecutive loops over `var` gathered: each item is a
    statement, or a list of two or more such loops (the pieces unswitching cut one loop into)."""
    out, run = [], []
    for x in list(stmts) + [None]:
        if isinstance(x, For) and x.var is var:
            run.append(x)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else run)
            run = []
        if x is not None:
            out.append(x)
    return out


def loops_with_context(stmt, var, enclosing=(), group_pieces: bool = False) -> list:
    """(loop, enclosing loops and branches) for every loop over `var` (not looking inside them).
    `group_pieces`: consecutive loops over `var` count as one site, a Block of them."""
    out = []

    def walk(s, enc):
        if isinstance(s, For):
            if s.var is var:
                out.append((s, enc))
                return
            walk(s.body, enc + [s])
        elif isinstance(s, Block):
            for x in (site_runs(s.stmts, var) if group_pieces else s.stmts):
                if isinstance(x, list):
                    out.append((Block(tuple(x)), enc))
                else:
                    walk(x, enc)
        elif isinstance(s, If):
            walk(s.then, enc + [s])  # the taken branch's condition is context
            if s.orelse is not None:
                walk(s.orelse, enc)
        elif hasattr(s, "body"):
            walk(s.body, enc)

    walk(stmt, list(enclosing))
    return out


def bounded_site_footprints(stmt, var, buf: Buffer, symbols) -> Optional[list]:
    """site_footprints(stmt, var, buf, symbols), or None when a block grows with runtime sizes
    (no constant bounds it)."""
    try:
        return [b for f, enc in loops_with_context(stmt, var) if (b := _footprint(f, enc, buf, symbols)) is not None]
    except _Unbounded:
        return None
