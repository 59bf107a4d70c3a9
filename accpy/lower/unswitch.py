"""Unswitch guarded loop nests: tighten loop bounds from guards and split loop ranges so
that no guard is left inside the loops.

Input: the perfect nest made by `scan` (loops over a box, innermost guarded bodies).
Each guarded body becomes a *piece*: a convex set of points (loop bounds + guard).
Loops are generated outer to inner; at each loop the pieces' bounds partition its range
into consecutive loops. Wherever two bounds cannot be ordered at compile time -- a
max/min of bounds inside one piece, or breakpoints of two pieces -- and their difference
varies with an outer loop, generation asks that outer loop to *cut* the pieces on the
difference's sign and starts over from it (split 12 by 5 -> full tiles j in [0, 2) and
the tail j in [2, 3); a skew -> triangle, rectangle, triangle). Differences that depend
only on runtime sizes stay as min/max bounds; pieces whose ranges then follow one another
(`i < N` and `i >= N`) get one loop each, in that order.

Guarantees afterwards: every statement runs exactly on its real points, in the same
lexicographic order as before; guards remain only when the piece budget runs out or a
cut cannot order two bounds, and for conditions on runtime sizes alone (or on enclosing
loops, when only an inner part of a nest has affine bounds) -- a guard sits at the
innermost level, never wrong.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Optional

from ..analysis.polyhedra import Bound, ConstraintSet, conjunction, implies_ge
from ..ir.affine import Affine, cond_constraints, lower_bound_constraints, upper_bound_constraints
from ..ir.expr import BinOp, Const, as_int
from ..ir.stmt import Block, For, If, block
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, free_vars, substitute

# Beyond this many pieces per nest we stop cutting and keep min/max bounds instead.
MAX_PIECES = 48


_pids = itertools.count()


@dataclass
class Piece:
    cons: ConstraintSet
    body: object
    order: int
    pending: list = field(default_factory=list)  # constraints still to check at the leaf
    cuts: frozenset = frozenset()  # cuts already applied (never cut twice on one)
    pid: int = field(default_factory=lambda: next(_pids))  # kept by restrict()
    ancestors: frozenset = frozenset()  # pids of the pieces this one was cut from
    _proj: dict = field(default_factory=dict)

    def restrict(self, *cs, cut=None) -> "Piece":
        cuts = self.cuts | {cut} if cut is not None else self.cuts
        return Piece(self.cons.add(*cs), self.body, self.order, list(self.pending), cuts, self.pid, self.ancestors)

    @property
    def lineage(self) -> frozenset:
        return self.ancestors | {self.pid}


class _NeedCut(Exception):
    """Raised where two bounds cannot be ordered: the loop at `level` must split on `g >= 0`."""

    def __init__(self, g: Affine, level: int, pids):
        self.g, self.level, self.pids = g, level, set(pids)


def unswitch(stmt, whole=frozenset()):
    """`whole`: loop vars whose range must stay one loop (parallel loops): their pieces are
    selected by a branch per iteration of that loop instead of running one after another."""
    return _Unswitch(whole).visit(stmt)


class _Unswitch(Mutator):
    def __init__(self, whole=frozenset()):
        self.whole = set(whole)

    def visit_For(self, f: For):
        loops = []
        s = f
        while isinstance(s, For):
            loops.append(s)
            s = s.body
        items = list(s.stmts) if isinstance(s, Block) else [s]
        if not any(isinstance(it, If) for it in items):
            return self.generic_visit(f)
        res = _separate(loops, items, self.whole)
        if res is None:
            return self.generic_visit(f)
        return res


def _separate(loops, items, whole=frozenset()):
    loop_vars = [lp.var for lp in loops]
    box = []
    for lp in loops:
        lo = lower_bound_constraints(lp.var, lp.lo)
        hi = upper_bound_constraints(lp.var, lp.hi)
        if lo is None or hi is None:
            return None
        box += lo + hi
    pieces = []
    for n, it in enumerate(items):
        if isinstance(it, If) and it.orelse is None:
            cs = cond_constraints(it.cond)
            if cs is None:
                return None
            pieces.append(Piece(ConstraintSet(box + cs), it.then, n))
        else:
            if isinstance(it, If):
                return None
            pieces.append(Piece(ConstraintSet(box), it, n))
    symbols = set()
    for p in pieces:
        symbols.update(v for v in p.cons.vars if v not in loop_vars)
        symbols.update(v for v in free_vars(p.body) if v not in loop_vars and v.dtype is ScalarType.index)
    ctx = ConstraintSet([Affine.var(v) for v in symbols])  # runtime sizes are >= 0
    gen = _Generator(loops, loop_vars, sorted(symbols, key=lambda v: v.uid))
    gen.whole = set(whole)
    pieces = [p for p in pieces if not p.cons.is_empty()]
    for p in pieces:
        # Loops are generated for `loop_vars` only: a constraint on none of them (a runtime
        # size, or an enclosing loop when this is an inner part of a nest whose outer bounds
        # are not affine) would be taken as a fact. Unless ctx proves it, check it at the leaf.
        p.pending.extend(c for c in p.cons if not any(c.coef(v) for v in loop_vars) and not ctx.implies(c))
    return gen.gen(0, pieces, ctx)


# -- bound helpers ---------------------------------------------------------------------------

def _simplicity(b: Bound):
    return (len(b.num.terms), b.den != 1)


def _bound_key(b: Bound):
    """A total order on bounds that does not depend on hashes (Var hashes are identities),
    so that the same schedule always lowers to the same loops."""
    return (b.den, b.num.const, tuple((v.uid, c) for v, c in b.num.terms))


class _Generator:
    def __init__(self, loops, loop_vars, symbols):
        self.loops = loops
        self.loop_vars = loop_vars
        self.symbols = symbols
        self.n = len(loops)
        self.level_of = {v: k for k, v in enumerate(loop_vars)}
        self.npieces = 0
        self.refused: set = set()  # cut constraints (both signs) given up on: see gen()
        self.whole: set = set()  # loop vars kept as one loop (parallel loops)

    # -- projections ----------------------------------------------------------------------
    def proj(self, piece: Piece, level: int) -> Optional[ConstraintSet]:
        """The piece projected onto loops 0..level (and the runtime sizes)."""
        if level not in piece._proj:
            inner = self.loop_vars[level + 1:]
            piece._proj[level] = piece.cons.project_out(inner)
        return piece._proj[level]

    def bounds(self, piece: Piece, level: int, ctx: ConstraintSet):
        """Non-redundant lower and upper bounds of loop `level` in the piece."""
        pr = self.proj(piece, level)
        if pr is None:
            return None
        v = self.loop_vars[level]
        lows, ups = pr.bounds(v)
        # Facts for pruning: the piece's constraints on outer loops, which the outer loops'
        # bounds enforce. Constraints on symbols alone (a projected `N >= 7`, or a relation
        # between enclosing loops when this is an inner part of a nest) are enforced by
        # nothing: a bound dropped because of one would let the loop run where the piece is
        # empty. They are used only when needed, and then checked at the leaf.
        enforced, symbolic = [], []
        for c in pr.without(v):
            (enforced if any(c.coef(w) for w in self.loop_vars[:level]) else symbolic).append(c)
        enforced = ctx.union_with(ConstraintSet(enforced, _trusted=True))
        assumed = enforced.union_with(ConstraintSet(symbolic, _trusted=True)) if symbolic else None
        used: list = []
        lows = self._prune(lows, enforced, True, assumed, used)
        ups = self._prune(ups, enforced, False, assumed, used)
        if used:
            piece.pending.extend(c for c in symbolic if c not in piece.pending and not ctx.implies(c))
        return lows, ups

    def _prune(self, bs, outer, lower, assumed=None, used=None):
        """Drop bounds implied by another; among equals keep the simplest. Implications
        that need `assumed` (more facts than `outer`) are recorded in `used`."""
        bs = sorted(set(bs), key=lambda b: (_simplicity(b), _bound_key(b)))  # deterministic order
        ff = (lambda b: b.ceil_as_floor()) if lower else (lambda b: b)  # compare integer values in floor form

        def ge(facts, x, y):
            return (implies_ge(facts, ff(x), ff(y), floors=True) if lower
                    else implies_ge(facts, ff(y), ff(x), floors=True))

        def wins(x, y):  # x makes y redundant: larger lower bound / smaller upper bound
            if ge(outer, x, y):
                return True
            if assumed is not None and ge(assumed, x, y):
                used.append((x, y))
                return True
            return False

        keep = []
        for b in bs:
            if any(wins(k, b) for k in keep):
                continue
            keep = [k for k in keep if not wins(b, k)]
            keep.append(b)
        return keep

    # -- cutting ---------------------------------------------------------------------------
    def _need_cut(self, b1: Bound, b2: Bound, level: int, pids, lower: Optional[bool]):
        """Raise a cut request making b1 vs b2 decidable, if their difference varies with a loop
        outside `level`. `lower` orients it so the simpler bound wins ties (None: breakpoints)."""
        g = b1.num * b2.den - b2.num * b1.den  # >= 0 where b1 >= b2
        if lower is False:
            g = -g  # for upper bounds b1 wins where b1 <= b2
        if g.is_const or g in self.refused:
            return
        inner = max((self.level_of.get(v, -1) for v in g.vars), default=-1)
        if 0 <= inner < level:
            raise _NeedCut(g, inner, pids)

    def _apply_cut(self, pieces, cut: _NeedCut, ctx):
        out = []
        for p in pieces:
            if p.pid not in cut.pids or cut.g in p.cuts or self.npieces >= MAX_PIECES:
                out.append(p)
                continue
            halves = [p.restrict(cut.g, cut=cut.g), p.restrict(-cut.g - 1, cut=cut.g)]
            kept = [q for q in halves if not q.cons.union_with(ctx).is_empty()]
            for q in kept:
                if len(kept) > 1:
                    q.ancestors = p.lineage
                    q.pid = next(_pids)
            self.npieces += len(kept) - 1
            out.extend(kept)
        return out

    # -- generation ------------------------------------------------------------------------
    def gen(self, level, pieces, ctx):
        if not pieces:
            return None
        if level == self.n:
            out = []
            for p in sorted(pieces, key=lambda p: p.order):
                out.append(If(conjunction(p.pending), p.body) if p.pending else p.body)
            return block(*out)
        applied = set()
        while True:
            try:
                return self._gen_level(level, pieces, ctx)
            except _NeedCut as cut:
                if cut.level != level:
                    raise  # a cut of an outer loop: that loop's gen() makes it
                key = (cut.g, frozenset(cut.pids))
                new = None
                if key not in applied and self.npieces < MAX_PIECES:
                    applied.add(key)
                    new = self._apply_cut(pieces, cut, ctx)
                    if len(new) == len(pieces) and all(a is b for a, b in zip(new, pieces)):
                        new = None
                if new is None:
                    # The cut cannot be made (piece budget spent), or was made and the two
                    # bounds still cannot be ordered (projection is inexact; floor forms of
                    # different denominators): stop asking for it and keep min/max bounds
                    # (or the hull's leaf guards) there instead -- never an escaping cut.
                    self.refused.update((cut.g, -cut.g))
                    continue
                pieces = new

    def _gen_level(self, level, pieces, ctx):
        loop = self.loops[level]
        v = loop.var
        info = []
        for p in pieces:
            bd = self.bounds(p, level, ctx)
            if bd is None or not bd[0] or not bd[1]:
                return None
            for group, lower in ((bd[0], True), (bd[1], False)):
                # a max/min of bounds that vary with an outer loop: split that loop instead
                for x in range(len(group)):
                    for y in range(x + 1, len(group)):
                        self._need_cut(group[x], group[y], level, p.lineage, lower)
            # a loop that runs for some values of an outer loop and not for others: split that
            # loop, so that every loop emitted runs at least once in its context (the footprints
            # of caches are computed under that assumption)
            outer = ctx.union_with(self.proj(p, level).without(loop.var))
            for lo in bd[0]:
                for hi in bd[1]:
                    g = hi.num * lo.den - lo.num * hi.den  # >= 0 where hi >= lo
                    if not g.is_const and g not in self.refused and not outer.implies(g):
                        inner = max((self.level_of.get(v, -1) for v in g.vars), default=-1)
                        if 0 <= inner < level:
                            raise _NeedCut(g, inner, p.lineage)
            info.append((p, bd[0], bd[1]))
        if len(info) == 1 or all(len(lo) == 1 and len(hi) == 1 for _, lo, hi in info):
            self._level_now = level
            seq = self._partition(info, ctx) if len(info) > 1 else None
            if len(info) == 1:
                p, lows, ups = info[0]
                return self._loop(loop, level, [p], lows, ups, ctx)
            if seq is not None and len(seq) > 1 and v in self.whole:
                return self._branches(loop, level, seq, ctx)
            if seq is not None:
                stmts = []
                for lo, hi, active in seq:
                    stmts.append(self._loop(loop, level, active, [lo], [hi], ctx, exclusive_hi=True))
                return block(*stmts)
        order = self._separated(info, level, ctx) if v not in self.whole else None
        if order is not None:
            return block(*(self._loop(loop, level, [p], lows, ups, ctx) for p, lows, ups in order))
        return self._hull(loop, level, info, ctx)

    def _separated(self, info, level, ctx):
        """The pieces in the order their ranges of loop `level` follow one another, when every
        two are apart: all iterations of one come before all of the other wherever both run
        (e.g. `i < N` and `i >= N`, whose bounds `min(8, N)` and `max(0, N)` the runtime size
        orders). Each then gets its own loop with min/max bounds; None when two may overlap."""
        facts = [ctx.union_with(self.proj(p, level).without(self.loops[level].var)) for p, _, _ in info]

        def before(x, y):  # every iteration of piece x precedes every one of piece y
            both = facts[x].union_with(facts[y])
            return any(implies_ge(both, lo.ceil_as_floor(), up.next_floor(), floors=True)
                       for up in info[x][2] for lo in info[y][1])

        n = len(info)
        rank = [0] * n
        for x in range(n):
            for y in range(x + 1, n):
                if before(x, y):
                    rank[y] += 1
                elif before(y, x):
                    rank[x] += 1
                else:
                    return None
        return [info[k] for k in sorted(range(n), key=lambda k: rank[k])]

    def _loop(self, loop, level, pieces, lows, ups, ctx, exclusive_hi=False):
        v = loop.var
        lo_cons = [Affine.var(v, b.den) - b.num for b in lows]
        if exclusive_hi:
            hi_cons = [b.num - Affine.var(v, b.den) - b.den for b in ups]
        else:
            hi_cons = [b.num - Affine.var(v, b.den) for b in ups]
        inner_ctx = ctx.add(*lo_cons, *hi_cons)
        if inner_ctx.is_empty():
            return None
        inner = [p.restrict(*lo_cons, *hi_cons) for p in pieces]
        inner = [p for p in inner if not p.cons.union_with(ctx).is_empty()]
        body = self.gen(level + 1, inner, inner_ctx)
        if body is None:
            return None
        lo_e = None
        for b in lows:
            e = b.ceil_as_floor().floor_expr()
            lo_e = e if lo_e is None else BinOp("max", lo_e, e, ScalarType.index)
        hi_e = None
        for b in ups:
            e = (b if exclusive_hi else b.next_floor()).floor_expr()
            hi_e = e if hi_e is None else BinOp("min", hi_e, e, ScalarType.index)
        return For(v, lo_e, hi_e, body, loop.kind, loop.attrs)

    def _branches(self, loop, level, seq, ctx):
        """One loop over all intervals; each iteration runs the pieces of its interval."""
        v = loop.var
        arms = []
        for lo, hi, active in seq:
            lo_c = Affine.var(v, lo.den) - lo.num
            hi_c = hi.num - Affine.var(v, hi.den) - hi.den
            inner_ctx = ctx.add(lo_c, hi_c)
            inner = [p.restrict(lo_c, hi_c) for p in active]
            inner = [p for p in inner if not p.cons.union_with(ctx).is_empty()]
            body = self.gen(level + 1, inner, inner_ctx)
            first, end = lo.ceil_as_floor().floor_expr(), hi.floor_expr()
            if body is not None and as_int(first) is not None and as_int(end) == as_int(first) + 1:
                # an interval of one iteration (e.g. a parallel loop's last, partial block): its
                # loops get constant bounds, so that they can be unrolled and vectorized
                body = substitute(body, {v: Const(as_int(first))})
            if body is not None:
                cond = BinOp("land", BinOp("ge", v, lo.ceil_as_floor().floor_expr(), ScalarType.bool),
                             BinOp("lt", v, hi.floor_expr(), ScalarType.bool), ScalarType.bool)
                arms.append(If(cond, body))
        if not arms:
            return None
        return For(v, seq[0][0].ceil_as_floor().floor_expr(), seq[-1][1].floor_expr(), block(*arms),
                   loop.kind, loop.attrs)

    def _partition(self, info, ctx):
        """Order all breakpoints; None if some pair cannot be ordered at compile time."""
        points = []  # (Bound in floor form, piece index, is_start)
        for n, (_, lows, ups) in enumerate(info):
            points.append(lows[0].ceil_as_floor())
            points.append(ups[0].next_floor())
        uniq: list = []
        for b in points:
            if not any(_equal(ctx, b, u) for u in uniq):
                uniq.append(b)
        # sort by provable order
        order = []
        owners = {}
        for n, (p, lows, ups) in enumerate(info):
            for b in (lows[0].ceil_as_floor(), ups[0].next_floor()):
                owners.setdefault((b.num, b.den), set()).update(p.lineage)
        for b in uniq:
            pos = 0
            while pos < len(order):
                if implies_ge(ctx, order[pos], b, floors=True):
                    break
                if not implies_ge(ctx, b, order[pos], floors=True):
                    pids = owners.get((b.num, b.den), set()) | owners.get((order[pos].num, order[pos].den), set())
                    self._need_cut(b, order[pos], self._level_now, pids, None)
                    return None
                pos += 1
            order.insert(pos, b)
        for x, y in zip(order, order[1:]):
            if not implies_ge(ctx, y, x, floors=True):
                return None

        def rank(b):
            for k, u in enumerate(order):
                if _equal(ctx, b, u):
                    return k
            raise AssertionError("breakpoint lost")

        spans = [(rank(lo[0].ceil_as_floor()), rank(hi[0].next_floor()), p)
                 for p, lo, hi in info]
        seq = []
        for k in range(len(order) - 1):
            active = [p for s, e, p in spans if s <= k and e >= k + 1]
            if active:
                seq.append((order[k].floor_as_ceil(), order[k + 1], active))
        return seq

    def _hull(self, loop, level, info, ctx):
        """Fallback: one loop over the union; each piece keeps its range as a leaf guard."""
        v = loop.var
        pieces = []
        lo_e = hi_e = None
        for p, lows, ups in info:
            guard = [Affine.var(v, b.den) - b.num for b in lows] + [b.num - Affine.var(v, b.den) for b in ups]
            q = Piece(p.cons, p.body, p.order, p.pending + guard, p.cuts, p.pid, p.ancestors)
            pieces.append(q)
            for b in lows:
                e = b.ceil_as_floor().floor_expr()
                lo_e = e if lo_e is None else BinOp("min", lo_e, e, ScalarType.index)
            for b in ups:
                e = b.next_floor().floor_expr()
                hi_e = e if hi_e is None else BinOp("max", hi_e, e, ScalarType.index)
        body = self.gen(level + 1, pieces, ctx)
        if body is None:
            return None
        return For(v, lo_e, hi_e, body, loop.kind, loop.attrs)


def _equal(ctx, a: Bound, b: Bound) -> bool:
    if a == b:
        return True
    return implies_ge(ctx, a, b, floors=True) and implies_ge(ctx, b, a, floors=True)

