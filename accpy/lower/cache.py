"""Caches: local copies of active blocks, inserted at their key-slices.

Runs right after `unswitch`, when every loop's bounds are exact (no padding is left), so
footprints computed from loop bounds touch only real elements. For a cache at index d:
every loop over d is a *site*; the block is the box hull of the elements its body
touches (Fourier–Motzkin over the loop bounds, per array dimension), as affine
functions of the enclosing loops, clamped to the array's bounds (the projections are
rational, so they may reach a little past the elements really touched). Before the site
the block is copied in (if the array is read there, or not certainly all written: see
`_covers_box`), after it written back (mutable arrays only); inside, accesses go to the
cache. A multicache (trigger index t) copies, at each loop over t, every block the inner
sites will visit, into a buffer with one leading dimension per intermediate loop the
blocks move with (packed panels). When the blocks are not one affine function of those
loops (e.g. unswitching cut the site loop into a full tiles piece and a tail), the
multicache holds the trigger slice's block instead: the same elements, as one panel. A
trigger at the cache's own index is an ordinary cache. A `thrifty` cache whose blocks are
already contiguous in the source (same layout and element type) is not made at all.

Guarantees afterwards: each cache is a `Buffer` of role "cache", allocated once at
function level, accessed only inside its sites (and copy loops); results are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..analysis.polyhedra import Bound, ConstraintSet
from ..errors import ScheduleError
from ..ir.affine import Affine, cond_constraints, lower_bound_constraints, to_affine, upper_bound_constraints
from ..ir.expr import BinOp, Buffer, Cast, Const, Load, Var, idx_op
from ..ir.stmt import Block, For, If, Store, block
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, Visitor

# Caches at most this many elements whose copies are unrolled (candidates for registers).
REGISTER_CACHE_ELEMENTS = 512


@dataclass
class _Access:
    indices: tuple
    chain: list  # For loops from the site down to the access
    is_write: bool
    is_read: bool
    reduce: Optional[str] = None
    guarded: bool = False  # under a condition: it may not run



def _loop_cons(f) -> list:
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
            reads = []

            class V(Visitor):
                def visit_Load(self, n):
                    if n.buffer is buf:
                        reads.append(n.indices)
                    self.generic_visit(n)

            V().visit(s.value)
            for ix in s.indices:
                V().visit(ix)
            for r in reads:
                out.append(_Access(r, chain, False, True, guarded=guarded))
            if s.buffer is buf:
                out.append(_Access(s.indices, chain, True, s.reduce is not None, s.reduce, guarded))
        elif hasattr(s, "body"):
            walk(s.body, chain, guarded)
        elif hasattr(s, "then"):
            walk(s.then, chain, True)
            if s.orelse is not None:
                walk(s.orelse, chain, True)

    walk(site, [], False)
    return out


def _extreme(expr: Affine, cons: ConstraintSet, drop: list, upper: bool, ctx: ConstraintSet):
    """Bounds on `expr` over the points of `cons` after projecting out `drop` (a list of Bounds)."""
    t = Var("t")
    pr = cons.add(Affine.var(t) - expr, expr - Affine.var(t)).project_out(drop)
    if pr is None:
        raise ScheduleError("cache: the footprint is too complex to compute")
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
    d = a.num * b.den - b.num * a.den
    return ctx.implies(-d if upper else d)


def _bound_expr(bs, upper: bool):
    out = None
    for b in bs:
        e = b.num.to_expr() if b.den == 1 else idx_op("floordiv", (b.num + (0 if upper else b.den - 1)).to_expr(),
                                                       Const(b.den))
        out = e if out is None else BinOp("min" if upper else "max", out, e, ScalarType.index)
    return out


@dataclass
class _Block:
    lo: list  # per dim: IR expr of the block's first element
    hi: list  # per dim: IR expr of the block's last element
    lo_aff: list  # per dim: Affine of lo when it is a single affine expression, else None
    ext_max: list  # per dim: the largest extent over all executions (int)
    reads: bool
    writes: bool
    full_overwrite: bool
    ctx: object = None  # the site's context: constraints of its enclosing loops
    hi_aff: list = None  # per dim: Affine of hi when it is a single affine expression, else None


def _footprint(site: For, enclosing: list, buf: Buffer, symbols) -> Optional[_Block]:
    accesses = _collect(site, buf)
    if not accesses:
        return None
    ctx_cons = []
    for f in enclosing:
        ctx_cons += _loop_cons(f)
    ctx_cons += [Affine.var(s) for s in symbols]
    ctx = ConstraintSet(ctx_cons)
    rank = buf.rank
    los: list = [[] for _ in range(rank)]
    his: list = [[] for _ in range(rank)]
    for acc in accesses:
        cons = ConstraintSet(ctx_cons + [c for f in acc.chain for c in _loop_cons(f)])
        drop = [f.var for f in acc.chain]
        for k, ix in enumerate(acc.indices):
            a = to_affine(ix)
            if a is None:
                # quasi-affine (// and % by constants): the constant range z3 finds over the
                # site's iterations (a box that may hold more than the block, never less)
                rng = _quasi_range(ix, cons, buf.name, k)
                los[k].append([Bound(Affine.constant(rng[0]), 1)])
                his[k].append([Bound(Affine.constant(rng[1]), 1)])
                continue
            los[k].append(_extreme(a, cons, drop, False, ctx))
            his[k].append(_extreme(a, cons, drop, True, ctx))
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
    return _Block(lo_e, hi_e, lo_aff, ext_max, reads, writes, full, ctx, hi_aff)


def _quasi_range(ix, cons: ConstraintSet, name: str, k: int) -> tuple:
    """(min, max) of a quasi-affine subscript over a constraint set (z3), or ScheduleError."""
    import z3

    from ..analysis.smt import z3_affine, z3_index
    from ..ir.affine import is_quasi_affine

    if not is_quasi_affine(ix):
        raise ScheduleError(f"cache of {name}: subscript {k} is not affine")
    zv: dict = {}

    def term(v):
        if v not in zv:
            zv[v] = z3.Int(f"{v.name}#{v.uid}")
        return zv[v]

    out = []
    for minimize in (True, False):
        opt = z3.Optimize()
        opt.set("timeout", 5000)
        for c in cons.cons:
            opt.add(z3_affine(c, term) >= 0)
        e = z3_index(ix, term)
        h = opt.minimize(e) if minimize else opt.maximize(e)
        if opt.check() != z3.sat:
            raise ScheduleError(f"cache of {name}: could not bound subscript {k} (a `//` or `%` index)")
        v = (opt.lower(h) if minimize else opt.upper(h))
        if not z3.is_int_value(v):
            raise ScheduleError(f"cache of {name}: subscript {k} (a `//` or `%` index) is unbounded over "
                                f"the cache's block; cache at an index whose loops have constant extents")
        out.append(v.as_long())
    return out[0], out[1]


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
            e = _bound_expr([b], upper=not lower)
            expr = e if expr is None else BinOp("min" if lower else "max", expr, e, ScalarType.index)
        return aff, expr
    expr = None
    for g in groups:
        e = _bound_expr(g, upper=not lower)
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
            raise ScheduleError(f"cache of {name}: the block's extent along dimension {k} depends on runtime "
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
                raise ScheduleError(f"cache of {name}: the block's extent along dimension {k} depends on runtime "
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


# -- the pass ---------------------------------------------------------------------------------------

@dataclass
class _CacheInfo:
    cache: object
    source: Buffer
    site_var: Var
    trigger_var: Optional[Var]
    dtype: ScalarType
    layout_last: bool
    target: object = None
    buffer: Optional[Buffer] = None
    lead_vars: list = field(default_factory=list)  # multicache: intermediate loop vars
    lead_lo: list = field(default_factory=list)
    lead_ext: list = field(default_factory=list)
    alias: bool = False  # thrifty: the source serves as the cache
    memory: Optional[str] = None  # a target memory (e.g. "scratchpad"), else host memory
    private: bool = False  # a TEMP living only in this cache: filled with zeros, never written back
    deferred: bool = False  # a CONST source whose data are stored packed as this cache lays them out
    tile: list = field(default_factory=list)  # deferred: the block extents the data are packed by


def cache_loop_vars(plan) -> set:
    """Loop vars that caches attach to (their loops must survive simplification)."""
    space = plan.schedule.space
    out = set()
    for c in plan.caches:
        for ix in (c.index, c.trigger_index):
            if ix is not None:
                out.add(space.dim(ix).var)
        if c.trigger_index is not None:
            # the loops between trigger and site index a multicache's panels
            lo, hi = space.position(c.trigger_index), space.position(c.index)
            out.update(d.var for d in space.dims[lo:hi + 1])
        if c.budget:
            out.update(space.vars)
    return out


def _target_memory(c) -> Optional[str]:
    """The target memory a cache's location names (Gemmini's scratchpad / accumulator), or None."""
    loc = getattr(c, "location", None)
    v = getattr(loc, "value", None)
    return v if v in ("scratchpad", "accumulator") else None


def insert_caches(stmt, plan, symbols, owners=None):
    """Returns (stmt, [cache buffers], {id(buffer): (loop var, inside)}) with every requested
    cache inserted. A multicache is filled inside the body of its trigger loop (once per
    iteration: inside=True); any other cache right before its site loop (inside=False)."""
    from ..nest.array import Array

    space = plan.schedule.space
    n = len(space.dims)
    caches = sorted(plan.caches, key=lambda c: -_resolved_level(c, stmt, space, symbols))
    buffers: dict = {}
    out_bufs = []
    fills: dict = {}
    for c in caches:
        level = _resolved_level(c, stmt, space, symbols)
        site_var = space.dims[n - level].var
        trig_var = space.dims[n - c.trigger_level].var if c.trigger_level is not None else None
        if trig_var is site_var:
            trig_var = None  # triggered at its own key-slice: one block per slice, an ordinary cache
        source = buffers[id(c.source)] if not isinstance(c.source, Array) else c.source_buffer
        layout_last = c.layout is not None and c.layout is Array.Layout.LAST_MAJOR
        info = _CacheInfo(c, source, site_var, trig_var, c.element_type or source.dtype, layout_last, plan.target)
        info.memory = _target_memory(c)
        info.deferred = getattr(c.source, "_deferred_cache", None) is c
        stmt = _apply(stmt, info, symbols)
        if info.deferred:
            buffers[id(c)] = info.buffer if info.buffer is not None else info.source
            continue  # a packed constant: nothing to allocate or fill
        if info.buffer is not None:
            buffers[id(c)] = info.buffer
            out_bufs.append(info.buffer)
            if owners is not None:
                owners[info.buffer] = c
            # (_apply may have turned a multicache into an ordinary cache at its trigger)
            fills[id(info.buffer)] = ((info.trigger_var, True) if info.trigger_var is not None
                                      else (info.site_var, False))
        elif info.alias:
            buffers[id(c)] = info.source  # a thrifty cache that needed no copy
    return stmt, out_bufs, fills


def _resolved_level(c, stmt, space, symbols) -> int:
    if not c.budget:
        return c.level
    if getattr(c, "_resolved", None) is not None:
        return c._resolved
    from ..nest.array import Array

    n = len(space.dims)
    top = n
    root = c
    if not isinstance(c.source, Array):
        # a budget cache of a budget cache: the highest level below its source's that fits
        top = _resolved_level(c.source, stmt, space, symbols) - 1
        while not isinstance(root.source, Array):
            root = root.source
    buf = root.source_buffer
    for level in range(top, 0, -1):
        var = space.dims[n - level].var
        sizes = _site_blocks(stmt, var, buf, symbols)
        if not sizes:
            continue
        need = max(_prod(b.ext_max) for b in sizes)
        if need <= c.max_elements:
            c._resolved = level
            c.index = space.dims[n - level].index
            c.level = level
            return level
    raise ScheduleError(f"cache of {buf.name}: no key-slice has an active block within max_elements={c.max_elements}")


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def _site_blocks(stmt, var, buf, symbols, enclosing=()) -> list:
    """The block of `buf` at every loop over `var` (the cache's sites)."""
    blocks = [_footprint(f, enc, buf, symbols) for f, enc in _loops_with_context(stmt, var, enclosing)]
    return [b for b in blocks if b is not None]


class _NoPanels(ScheduleError):
    """A multicache's blocks are not one affine function of the loops between trigger and site."""


def _apply(stmt, info: _CacheInfo, symbols):
    if info.trigger_var is None:
        return _apply_once(stmt, info, symbols)
    try:
        return _apply_once(stmt, info, symbols)
    except _NoPanels:
        # e.g. unswitching cut the site loop into pieces (full tiles, a tail) whose blocks
        # start at unrelated places: hold the trigger slice's block instead (the same
        # elements as all its panels together), filled where the trigger slice starts
        info.site_var, info.trigger_var = info.trigger_var, None
        info.lead_vars, info.lead_lo, info.lead_ext = [], [], []
        return _apply_once(stmt, info, symbols)


def _apply_once(stmt, info: _CacheInfo, symbols):
    # 1. analyse every site: blocks, the buffer's shape
    if info.deferred and (info.memory is not None or info.trigger_var is not None):
        raise ScheduleError(f"deferred_layout of {info.source.name}: its cache must be an ordinary cache in "
                            f"host memory (no trigger, no target memory)")
    if info.memory is not None:
        return _apply_target(stmt, info, symbols)
    blocks = _site_blocks(stmt, info.site_var, info.source, symbols)
    if not blocks:
        return stmt
    if info.deferred:
        return _apply_deferred(stmt, info, blocks, symbols)
    if _thrifty_skips(info, blocks):
        info.alias = True  # the source itself serves as the cache: no copies at all
        return stmt
    rank = info.source.rank
    shape = [max(b.ext_max[k] for b in blocks) for k in range(rank)]
    # rows a whole number of vectors long: vector slots never straddle two rows (registers)
    from ..targets.x86 import vector_isa_for

    isa = vector_isa_for(info.target, info.dtype) if info.target is not None else None
    if isa is not None and shape and not info.layout_last and shape[-1] > 1:
        shape[-1] = -(-shape[-1] // isa.lanes) * isa.lanes
    lead_shape = []
    if info.trigger_var is not None:
        lead_shape = _multicache_leads(stmt, info, blocks, symbols)
    full_shape = lead_shape + shape
    strides = _strides(full_shape, lead=len(lead_shape), last_major=info.layout_last)
    name = f"{info.source.name}_cache"
    info.buffer = Buffer(name, info.dtype, tuple(Const(s) for s in full_shape), tuple(Const(s) for s in strides),
                         role="cache", memory="local")
    # 2. rewrite sites (and, for a multicache, copy at the trigger loops)
    return _Rewrite(info, symbols).visit(stmt)


def _apply_deferred(stmt, info: _CacheInfo, blocks, symbols):
    """A CONST source with a deferred layout: its data, packed now block after block (each in the
    cache's layout), replace the cache; the sites read the packed constant, nothing is copied."""
    import numpy as np

    src = info.source
    rank = src.rank
    tile = [max(b.ext_max[k] for b in blocks) for k in range(rank)]
    for b in blocks:
        for k in range(rank):
            a = b.lo_aff[k]
            if a is None or a.const % tile[k] or any(c % tile[k] for _, c in a.terms):
                where = "not a single affine position" if a is None else f"at {a}"
                raise ScheduleError(
                    f"deferred_layout of {src.name}: the cache's blocks ({' x '.join(map(str, tile))}) must tile "
                    f"the array, but a block starts {where} in dimension {k}, not at a multiple of {tile[k]}")
    n = [int(to_affine(x).const) for x in src.shape]
    tiles = [-(-n[k] // tile[k]) for k in range(rank)]
    padded = np.zeros([t * e for t, e in zip(tiles, tile)], dtype=src.data.dtype)
    padded[tuple(slice(0, x) for x in n)] = src.data
    split = padded.reshape([v for t, e in zip(tiles, tile) for v in (t, e)])
    packed = split.transpose(list(range(0, 2 * rank, 2)) + list(range(1, 2 * rank, 2)))
    if info.dtype is not src.dtype:
        packed = packed.astype(info.dtype.dtype)
    full = tiles + tile
    strides = _strides(full, lead=rank, last_major=info.layout_last)
    info.tile = tile
    info.buffer = Buffer(f"{src.name}_packed", info.dtype, tuple(Const(x) for x in full),
                         tuple(Const(x) for x in strides), role="const", data=np.ascontiguousarray(packed))
    return _Rewrite(info, symbols).visit(stmt)


def _apply_target(stmt, info: _CacheInfo, symbols):
    """A cache in a target memory: its key-slice is all the pieces of its index's loop under one
    iteration of the enclosing loops (unswitching may have cut the loop, e.g. a fused schedule's
    f into one loop per nest): one block, filled before the first piece, written after the last."""
    if info.trigger_var is not None:
        raise ScheduleError(f"cache of {info.source.name} in {info.memory}: triggers (multicaches) are not "
                            f"supported in target memories")
    sites = _loops_with_context(stmt, info.site_var, group_pieces=True)
    blocks = [b for b in (_footprint(s, enc, info.source, symbols) for s, enc in sites) if b is not None]
    if not blocks:
        return stmt
    shape = [max(b.ext_max[k] for b in blocks) for k in range(info.source.rank)]
    info.private = info.source.role == "temp" and _private(stmt, info, sites, blocks)
    info.buffer = Buffer(f"{info.source.name}_cache", info.dtype, tuple(Const(x) for x in shape),
                         tuple(Const(x) for x in _strides(shape, 0, False)), role="cache", memory=info.memory)
    return _Rewrite(info, symbols).visit(stmt)


def _count_accesses(stmt, buf) -> int:
    n = [0]

    class V(Visitor):
        def visit_Load(self, e):
            if e.buffer is buf:
                n[0] += 1
            self.generic_visit(e)

        def visit_Store(self, e):
            if e.buffer is buf:
                n[0] += 1
            self.generic_visit(e)

    V().visit(stmt)
    return n[0]


def _private(stmt, info, sites, blocks) -> bool:
    """Does every access of the TEMP source sit in a site, with no two site executions sharing an
    element? Then each block starts as zeros (nothing touched it before) and nobody reads it after."""
    buf = info.source
    if _count_accesses(stmt, buf) != sum(_count_accesses(s, buf) for s, _ in sites):
        return False
    if any(a is None for b in blocks for a in list(b.lo_aff) + list(b.hi_aff or [None] * len(b.lo_aff))):
        return False
    import z3

    from ..analysis.smt import z3_affine

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


def _thrifty_skips(info: _CacheInfo, blocks) -> bool:
    """A thrifty cache whose every block is already contiguous in the source, in the cache's
    layout and element type, is not made (Accera's `thrifty`): the block is one run of
    consecutive elements when, in memory order, its dimensions are single elements, then
    (at most) one partial dimension, then whole dimensions of the array."""
    from ..nest.array import Array

    c, src = info.cache, info.source
    if not getattr(c, "thrifty", None) or info.trigger_var is not None or info.dtype is not src.dtype:
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
    if c.layout is not None and (c.layout is Array.Layout.LAST_MAJOR) != last_major:
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


def _strides(shape, lead: int, last_major: bool) -> list:
    n = len(shape)
    strides = [0] * n
    acc = 1
    block_dims = list(range(lead, n))
    order = block_dims if last_major else list(reversed(block_dims))
    for d in order:
        strides[d] = acc
        acc *= max(shape[d], 1)
    for d in reversed(range(lead)):
        strides[d] = acc
        acc *= max(shape[d], 1)
    return strides


def _multicache_leads(stmt, info, blocks, symbols) -> list:
    """Leading dims of a multicache: the loops between trigger and site the blocks move with."""
    lo_vars = set()
    for b in blocks:
        for a in b.lo_aff:
            if a is None:
                raise _NoPanels(f"cache of {info.source.name}: multicache blocks must start at affine positions")
            lo_vars.update(a.vars)
    between = _loops_between(stmt, info.trigger_var, info.site_var)
    leads = [v for v in between if v in lo_vars]
    info.lead_vars = leads
    # constant hull of each lead loop's range
    info.lead_lo, info.lead_ext = [], []
    for v in leads:
        los, his = [], []
        for f, enclosing in _loops_with_context(stmt, v):
            cons = ConstraintSet([c for e in enclosing for c in _loop_cons(e)] + [Affine.var(x) for x in symbols])
            lo, hi = _constant_extreme(f.lo, cons, False), _constant_extreme(f.hi, cons, True)
            if lo is None or hi is None:
                raise _NoPanels(f"cache of {info.source.name}: the range of the multicache's loop {v.name} "
                                f"must be bounded by constants")
            los.append(lo)
            his.append(hi)
        info.lead_lo.append(min(los))
        info.lead_ext.append(max(his) - min(los))
    return list(info.lead_ext)


def _constant_extreme(e, cons: ConstraintSet, upper: bool):
    """The constant min (or max) of an affine expression over a constraint set, if bounded."""
    a = to_affine(e)
    if a is None:
        return None
    if a.is_const:
        return a.const
    bs = _extreme(a, cons, list(cons.vars | set(a.vars)), upper, ConstraintSet())
    vals = [b.num.const // b.den if upper else -((-b.num.const) // b.den) for b in bs if b.num.is_const]
    return (min(vals) if upper else max(vals)) if vals else None


def _site_runs(stmts, var) -> list:
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


def _loops_with_context(stmt, var, enclosing=(), group_pieces: bool = False) -> list:
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
            for x in (_site_runs(s.stmts, var) if group_pieces else s.stmts):
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


def _loops_between(stmt, outer: Var, inner: Var) -> list:
    """Vars of the loops strictly between loops over `outer` and `inner`, outermost first."""
    found: list = []
    for _, enc in _loops_with_context(stmt, inner):
        chain = [f.var for f in enc if isinstance(f, For)]
        if outer in chain:
            for v in chain[chain.index(outer) + 1:]:
                if v not in found:
                    found.append(v)
    return found


class _Rewrite(Mutator):
    def __init__(self, info: _CacheInfo, symbols):
        self.info = info
        self.symbols = symbols
        self.enclosing: list = []

    def visit_Block(self, b: Block):
        info = self.info
        if info.memory is None:
            return self.generic_visit(b)
        # a target-memory cache: consecutive pieces of the site loop form one key-slice
        out = []
        for x in _site_runs(b.stmts, info.site_var):
            if not isinstance(x, list):
                out.append(self.visit(x))
                continue
            site = Block(tuple(x))
            blk = _footprint(site, self.enclosing, info.source, self.symbols)
            if blk is None:
                out.extend(x)
            else:
                out.extend([*self._copy_in(blk), _RedirectAccesses(info, blk).visit(site), *self._write_back(blk)])
        return block(*out)

    def visit_If(self, s: If):
        # the taken branch's affine condition is context for the footprints inside it (e.g. a
        # parallel loop's full tiles, guarded by `j < 3` instead of split off as a loop)
        self.enclosing.append(s)
        then = self.visit(s.then)
        self.enclosing.pop()
        orelse = self.visit(s.orelse) if s.orelse is not None else None
        if then is s.then and orelse is s.orelse:
            return s
        return If(s.cond, then, orelse)

    def visit_For(self, f: For):
        info = self.info
        if f.var is info.site_var:
            blk = _footprint(f, self.enclosing, info.source, self.symbols)
            if blk is None:
                return f
            body = _RedirectAccesses(info, blk).visit(f)
            if info.trigger_var is not None or info.deferred:
                return body  # copies happen at the trigger loop (none: a packed constant)
            return block(*self._copy_in(blk), body, *self._write_back(blk))
        if info.trigger_var is not None and f.var is info.trigger_var:
            self.enclosing.append(f)
            inner = self.visit(f.body)
            self.enclosing.pop()
            new = For(f.var, f.lo, f.hi, block(*self._multicopy(f, inner)), f.kind, f.attrs)
            return new
        self.enclosing.append(f)
        body = self.visit(f.body)
        self.enclosing.pop()
        if body is f.body:
            return f
        return For(f.var, f.lo, f.hi, body, f.kind, f.attrs)

    # -- copies ---------------------------------------------------------------------------
    def _copy_nest(self, exts, make_body, small: bool, starts=None):
        """Loops over a block's elements (`starts` (default 0) to `exts` per dimension)."""
        vs = [Var(f"{self.info.source.name}_c{k}") for k in range(len(exts))]
        body = make_body(vs)
        for k in reversed(range(len(exts))):
            kind = "serial"
            if small:
                kind = "vectorized" if k == len(exts) - 1 and self._vectorizable_copy() else "unrolled"
            body = For(vs[k], starts[k] if starts else Const(0), exts[k], body, kind)
        return body

    def _vectorizable_copy(self) -> bool:
        from ..targets.x86 import vector_isa_for

        src = self.info.source
        last = to_affine(src.strides[-1]) if src.strides else None
        return (vector_isa_for(self.info.target, self.info.dtype) is not None and self.info.dtype is src.dtype
                and last is not None and last.is_const and last.const == 1 and not self.info.layout_last)

    def _small(self) -> bool:
        if self.info.memory is not None:
            return False
        return _prod(int(to_affine(s).const) for s in self.info.buffer.shape) <= REGISTER_CACHE_ELEMENTS

    def _exts(self, blk):
        return [idx_op("add", idx_op("sub", hi, lo), Const(1)) for lo, hi in zip(blk.lo, blk.hi)]

    def _copy_in(self, blk, lead_vals=()):
        info = self.info
        if not blk.reads and blk.full_overwrite:
            return []
        src = info.source
        if info.private:
            return [self._copy_nest(self._exts(blk), lambda vs: Store(info.buffer, tuple(vs), Const(0, info.dtype)),
                                    False)]

        def body(vs):
            val = Load(src, tuple(idx_op("add", lo, v) for lo, v in zip(blk.lo, vs)))
            if info.dtype is not src.dtype:
                val = Cast(val, info.dtype)
            return Store(info.buffer, tuple(lead_vals) + tuple(vs), val)

        return [self._copy_nest(self._exts(blk), body, self._small())]

    def _write_back(self, blk):
        info = self.info
        if not blk.writes or info.source.role in ("input", "const") or info.private:
            return []
        src = info.source

        def body(vs):
            val = Load(info.buffer, tuple(vs))
            if info.dtype is not src.dtype:
                val = Cast(val, src.dtype)
            return Store(src, tuple(idx_op("add", lo, v) for lo, v in zip(blk.lo, vs)), val)

        return [self._copy_nest(self._exts(blk), body, self._small())]

    def _multicopy(self, trig: For, inner_body):
        """At each trigger iteration: copy every block the inner sites will use."""
        info = self.info
        blk_all = _footprint(trig, self.enclosing, info.source, self.symbols)  # the trigger-level hull
        if blk_all is None:
            return [inner_body]
        # the block at a site, as a function of the lead vars (identical formula at every site)
        site_blocks = _site_blocks(trig.body, info.site_var, info.source, self.symbols, self.enclosing + [trig])
        if not site_blocks:
            return [inner_body]
        # the most general formula (most variables) must agree with every site's own origin
        ref = max(site_blocks, key=lambda b: sum(len(a.vars) for a in b.lo_aff if a is not None))
        for b in site_blocks:
            for x, y in zip(b.lo_aff, ref.lo_aff):
                if x is None or y is None or not (b.ctx.implies(x - y) and b.ctx.implies(y - x)):
                    raise _NoPanels(f"cache of {info.source.name}: the multicache's blocks start at {x} and {y}, "
                                    f"not one affine function of the loops")
        lead_vars = info.lead_vars
        shape_blk = [int(to_affine(s).const) for s in info.buffer.shape[len(lead_vars):]]
        # per lead combination: block origin (affine in lead vars), extents clipped to the hull
        copies = []
        lvs = [Var(v.name + "_p") for v in lead_vars]
        sub = {v: Affine.var(lv) + lo for v, lv, lo in zip(lead_vars, lvs, info.lead_lo)}
        origin = [a.subs(sub) for a in ref.lo_aff]
        # Each panel is copied only where it meets the trigger slice's hull (which lies inside the
        # array): a lead combination the loops do not visit for this trigger iteration (a skewed
        # or padded range) or a block reaching past the array's start or end copies nothing
        # there. Both ends are clipped: a panel's origin may lie before the hull.
        exts, starts = [], []
        for k, o in enumerate(origin):
            full = Const(shape_blk[k])
            exts.append(BinOp("min", full, idx_op("add", _relative(blk_all.hi[k], o), Const(1)), ScalarType.index))
            start = _relative(blk_all.lo[k], o)
            starts.append(Const(0) if _is_nonpositive(start) else BinOp("max", Const(0), start, ScalarType.index))
        src = info.source

        def body(vs):
            val = Load(src, tuple(idx_op("add", o.to_expr(), v) for o, v in zip(origin, vs)))
            if info.dtype is not src.dtype:
                val = Cast(val, info.dtype)
            return Store(info.buffer, tuple(lvs) + tuple(vs), val)

        nest = self._copy_nest(exts, body, False, starts)
        for lv, ext in reversed(list(zip(lvs, info.lead_ext))):
            nest = For(lv, Const(0), Const(ext), nest)
        copies.append(nest)
        return copies + [inner_body]


def _relative(bound, origin: Affine):
    """`bound` - `origin` as an index expression (affine when `bound` is)."""
    a = to_affine(bound)
    if a is not None:
        return (a - origin).to_expr()
    return idx_op("sub", bound, origin.to_expr())  # (a min / max, e.g. clamped to the array's end)


def _is_nonpositive(e) -> bool:
    a = to_affine(e)
    return a is not None and a.is_const and a.const <= 0


class _RedirectAccesses(Mutator):
    """Inside a site: accesses to the source go to the cache, relative to the block's origin."""

    def __init__(self, info: _CacheInfo, blk: _Block):
        self.info = info
        self.blk = blk

    def _index(self, indices):
        info = self.info
        if info.deferred:  # the packed constant: which block, then where in it
            tiles = [Affine([(v, c // e) for v, c in a.terms], a.const // e).to_expr()
                     for a, e in zip(self.blk.lo_aff, info.tile)]
            return tuple(tiles) + tuple(idx_op("sub", ix, o) for ix, o in zip(indices, self.blk.lo))
        lead = [idx_op("sub", v, Const(lo)) for v, lo in zip(info.lead_vars, info.lead_lo)]
        if info.trigger_var is not None:
            origin = [a.to_expr() if a is not None else lo for a, lo in zip(self.blk.lo_aff, self.blk.lo)]
        else:
            origin = self.blk.lo
        return tuple(lead) + tuple(idx_op("sub", ix, o) for ix, o in zip(indices, origin))

    def visit_Load(self, e: Load):
        e = self.generic_visit(e)
        if e.buffer is not self.info.source:
            return e
        val = Load(self.info.buffer, self._index(e.indices))
        return Cast(val, e.buffer.dtype) if self.info.dtype is not e.buffer.dtype else val

    def visit_Store(self, s: Store):
        s = self.generic_visit(s)
        if s.buffer is not self.info.source:
            return s
        value = s.value
        if self.info.dtype is not s.buffer.dtype:
            value = Cast(value, self.info.dtype)
        return Store(self.info.buffer, self._index(s.indices), value, s.reduce)

