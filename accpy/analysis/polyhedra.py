"""Conjunctions of affine constraints over integers: projection, emptiness, implication.

Projection is Fourier–Motzkin elimination with integer tightening (divide by the gcd,
floor the constant). That is a relaxation of the integer projection, so every answer
here is *sound*: `is_empty()` is True only for sets proven empty, `implies()` only for
implications proven to hold. An inexact "don't know" just leaves an extra loop bound.
"""
from __future__ import annotations

from typing import Iterable, Optional

from ..ir.affine import Affine, normalize
from ..ir.expr import BinOp, Const, Var, idx_op
from ..ir.types import ScalarType

# A guard against the (rare) doubly-exponential growth of Fourier–Motzkin.
_MAX_CONSTRAINTS = 400


# Emptiness answers by constraint set: lowering asks about the same sets many times (each
# piece and loop level of unswitching). Bounded; the keys hold their variables alive, so an
# identity-hashed variable is never mistaken for a later one.
_EMPTY: dict = {}
_EMPTY_MAX = 20000


def _uid(v: Var) -> int:
    """Vars hash by identity; elimination order goes by creation order instead."""
    return v.uid


class Bound:
    """`var >= ceil(num / den)` (lower) or `var <= floor(num / den)` (upper), den > 0."""

    __slots__ = ("num", "den")

    def __init__(self, num: Affine, den: int):
        self.num, self.den = num, den

    def __eq__(self, o):
        return isinstance(o, Bound) and self.num == o.num and self.den == o.den

    def __hash__(self):
        return hash((self.num, self.den))

    def __repr__(self):
        return f"({self.num})/{self.den}" if self.den != 1 else f"{self.num}"

    @property
    def vars(self):
        return self.num.vars

    # -- the bound algebra of scanning and footprints (one place) ---------------------------
    def floor_expr(self):
        """floor(num / den) as an index expression."""
        e = self.num.to_expr()
        return e if self.den == 1 else idx_op("floordiv", e, Const(self.den))

    def ceil_as_floor(self) -> "Bound":
        """The same value for a lower bound: ceil(n / d) == floor((n + d - 1) / d)."""
        return Bound(self.num + (self.den - 1), self.den)

    def ceil_expr(self):
        """ceil(num / den) as an index expression."""
        return self.ceil_as_floor().floor_expr()

    def floor_as_ceil(self) -> "Bound":
        """The same value for an upper bound read as a lower one: floor(n / d) == ceil((n - d + 1) / d)."""
        return Bound(self.num - (self.den - 1), self.den)

    def next_floor(self) -> "Bound":
        """floor(n / d) + 1 == floor((n + d) / d): an inclusive upper bound made exclusive."""
        return Bound(self.num + self.den, self.den)


def implies_ge(ctx: "ConstraintSet", a: Bound, b: Bound, floors: bool = False) -> bool:
    """Proves a >= b everywhere in `ctx`, as rationals (num / den); with `floors`, proves
    floor(a) >= floor(b) (exact when one side is an integer)."""
    if floors and a.den == 1 and b.den != 1:  # y >= floor(x/q)  <=>  q*y + q - 1 - x >= 0
        return ctx.implies(a.num * b.den + (b.den - 1) - b.num)
    return ctx.implies(a.num * b.den - b.num * a.den)  # (with b.den == 1: x >= p*y, exact)


def bounds_expr(bounds, upper: bool):
    """min of floor(b) over upper bounds, or max of ceil(b) over lower ones, as an expression."""
    out = None
    for b in bounds:
        e = b.floor_expr() if upper else b.ceil_expr()
        out = e if out is None else BinOp("min" if upper else "max", out, e, ScalarType.index)
    return out


class ConstraintSet:
    """An immutable conjunction of constraints `c >= 0`."""

    __slots__ = ("cons", "infeasible", "_ranges")

    def __init__(self, cons: Iterable[Affine] = (), _trusted: bool = False):
        self._ranges = None
        if _trusted:
            self.cons = tuple(cons)
            self.infeasible = False
            return
        best: dict = {}
        infeasible = False
        for c in cons:
            c = normalize(c)
            if c.is_const:
                if c.const < 0:
                    infeasible = True
                continue
            # keep the tightest constant for each linear part
            prev = best.get(c.terms)
            if prev is None or c.const < prev:
                best[c.terms] = c.const
        self.infeasible = infeasible
        self.cons = tuple(Affine(t, k) for t, k in best.items())

    def __iter__(self):
        return iter(self.cons)

    def __len__(self):
        return len(self.cons)

    def __repr__(self):
        return "{" + ", ".join(f"{c} >= 0" for c in self.cons) + ("  (INFEASIBLE)" if self.infeasible else "") + "}"

    def add(self, *cs: Affine) -> "ConstraintSet":
        if self.infeasible:
            return self
        return self.union_with(ConstraintSet(cs))

    def union_with(self, other: "ConstraintSet") -> "ConstraintSet":
        """Conjunction of both sets."""
        if self.infeasible:
            return self
        if other.infeasible:
            return other
        if not other.cons:
            return self
        if not self.cons:
            return other
        # both are normalized already: keep the tighter constant of each linear part
        best = {c.terms: c.const for c in self.cons}
        for c in other.cons:
            prev = best.get(c.terms)
            if prev is None or c.const < prev:
                best[c.terms] = c.const
        return ConstraintSet((Affine._of(t, k) for t, k in best.items()), _trusted=True)

    @property
    def vars(self) -> set:
        out: set = set()
        for c in self.cons:
            out.update(c.vars)
        return out

    # -- Fourier–Motzkin ----------------------------------------------------------------
    def eliminate(self, v: Var) -> Optional["ConstraintSet"]:
        """Project `v` out. None when the result would grow beyond the size guard."""
        if self.infeasible:
            return self
        lo, hi, rest = [], [], []
        for c in self.cons:
            k = c.coef(v)
            if k > 0:
                lo.append((k, c.drop(v)))
            elif k < 0:
                hi.append((-k, c.drop(v)))
            else:
                rest.append(c)
        if len(lo) * len(hi) + len(rest) > _MAX_CONSTRAINTS:
            return None
        # k1*v + r1 >= 0 and -k2*v + r2 >= 0  =>  k2*r1 + k1*r2 >= 0
        combined = ConstraintSet(r1 * k2 + r2 * k1 for k1, r1 in lo for k2, r2 in hi)
        return ConstraintSet(rest, _trusted=True).union_with(combined)  # (rest: normalized already)

    def project_out(self, vs: Iterable[Var]) -> Optional["ConstraintSet"]:
        cur: Optional[ConstraintSet] = self
        todo = [v for v in vs]
        while todo and cur is not None and not cur.infeasible:
            present = cur.vars
            todo = [v for v in todo if v in present]
            if not todo:
                break
            # cheapest elimination first: the fewest constraints made (p*n) for those removed (p+n)
            pos: dict = {}
            neg: dict = {}
            for c in cur.cons:
                for w, k in c.terms:
                    side = pos if k > 0 else neg
                    side[w] = side.get(w, 0) + 1

            def cost(v):
                p, n = pos.get(v, 0), neg.get(v, 0)
                return p * n - p - n

            v = min(todo, key=cost)
            todo.remove(v)
            cur = cur.eliminate(v)
        return cur

    def project_onto(self, keep: Iterable[Var]) -> Optional["ConstraintSet"]:
        keep = set(keep)
        return self.project_out(sorted((v for v in self.vars if v not in keep), key=_uid))

    def ranges(self) -> dict:
        """Per-variable [lo, hi] from the single-variable constraints (None = unbounded)."""
        if self._ranges is None:
            r: dict = {}
            for c in self.cons:
                if len(c.terms) != 1:
                    continue
                (v, k), = c.terms
                lo, hi = r.get(v, (None, None))
                if k > 0:  # k*v + c >= 0 -> v >= ceil(-c/k)
                    b = -((c.const) // k)
                    lo = b if lo is None else max(lo, b)
                else:  # -|k|*v + c >= 0 -> v <= floor(c/|k|)
                    b = c.const // (-k)
                    hi = b if hi is None else min(hi, b)
                r[v] = (lo, hi)
            self._ranges = r
        return self._ranges

    def _interval_min(self, c: Affine):
        """A lower bound of c over the variable ranges, or None if unbounded below."""
        r = self.ranges()
        total = c.const
        for v, k in c.terms:
            lo, hi = r.get(v, (None, None))
            b = lo if k > 0 else hi
            if b is None:
                return None
            total += k * b
        return total

    def is_empty(self) -> bool:
        """True only if the set provably has no integer point."""
        if self.infeasible:
            return True
        for lo, hi in self.ranges().values():
            if lo is not None and hi is not None and lo > hi:
                return True
        key = frozenset(self.cons)  # the answer depends on the constraints only, not their order
        known = _EMPTY.get(key)
        if known is None:
            p = self.project_out(sorted(self.vars, key=_uid))  # a fixed order: same answer every run
            known = p is not None and p.infeasible
            if len(_EMPTY) >= _EMPTY_MAX:
                _EMPTY.clear()
            _EMPTY[key] = known
        return known

    def implies(self, c: Affine) -> bool:
        """True only if every integer point of the set satisfies `c >= 0`."""
        c = normalize(c)
        if c.is_const:
            return c.const >= 0 or self.is_empty()
        for own in self.cons:
            if own.terms == c.terms and own.const <= c.const:
                return True
        m = self._interval_min(c)
        if m is not None and m >= 0:
            return True
        if self._has_counterexample(c):
            return False
        return self.add(-c - 1).is_empty()

    def _has_counterexample(self, c: Affine) -> bool:
        """Try the corners of the variable ranges: a member point with c < 0 refutes `c >= 0`."""
        r = self.ranges()
        vs = list(self.vars | set(c.vars))
        for pick in (0, 1):
            point = {}
            for v in vs:
                lo, hi = r.get(v, (None, None))
                x = (lo if pick == 0 else hi) if (lo if pick == 0 else hi) is not None else (hi if lo is None else lo)
                if x is None:
                    x = 0
                point[v] = x
            if all(_eval(k, point) >= 0 for k in self.cons) and _eval(c, point) < 0:
                return True
        return False

    # -- bounds -------------------------------------------------------------------------
    def bounds(self, v: Var) -> tuple[list, list]:
        """Lower and upper bounds on `v` from the constraints that mention it."""
        lows, ups = [], []
        for c in self.cons:
            k = c.coef(v)
            if k > 0:  # k*v + r >= 0  ->  v >= ceil(-r / k)
                lows.append(Bound(-c.drop(v), k))
            elif k < 0:  # -k*v + r >= 0 ->  v <= floor(r / -k)
                ups.append(Bound(c.drop(v), -k))
        return lows, ups

    def without(self, v: Var) -> "ConstraintSet":
        """The constraints that do not mention `v` (not a projection)."""
        return ConstraintSet([c for c in self.cons if c.coef(v) == 0], _trusted=True)


def _eval(a: Affine, point: dict) -> int:
    return a.const + sum(k * point[v] for v, k in a.terms)


def lower_constraint(v: Var, b: Bound) -> Affine:
    """The constraint `v >= ceil(b)`, i.e. `den*v - num >= 0`."""
    return Affine.var(v, b.den) - b.num


def upper_constraint(v: Var, b: Bound) -> Affine:
    """The constraint `v <= floor(b)`, i.e. `num - den*v >= 0`."""
    return b.num - Affine.var(v, b.den)


def part_guard(space, p: int) -> list:
    """The constraints of part p of an iteration space that its box does not already imply
    (the guard a scan puts around the part's statements)."""
    box = ConstraintSet(space.box_constraints() + _symbol_assumptions(space))
    return [c for c in ConstraintSet(space.part_constraints(p)) if not box.implies(c)]


def _symbol_assumptions(space) -> list:
    dim_vars = set(space.vars)
    syms = set()
    for p in range(len(space.parts)):
        for c in space.part_constraints(p):
            syms.update(v for v in c.vars if v not in dim_vars)
    return [Affine.var(s) for s in syms]  # runtime sizes are >= 0


def constraint_expr(c: Affine):
    """`c >= 0` as a readable comparison: positive terms on the left."""
    pos = Affine([(v, k) for v, k in c.terms if k > 0])
    neg = Affine([(v, -k) for v, k in c.terms if k < 0])
    const = c.const
    # pos + const >= neg   ->  choose the side for the constant that keeps it non-negative
    if pos.is_const:
        return BinOp("le", neg.to_expr(), Const(const), ScalarType.bool)
    if neg.is_const:
        return BinOp("ge", pos.to_expr(), Const(-const), ScalarType.bool)
    if const >= 0:
        return BinOp("le", neg.to_expr(), (pos + const).to_expr(), ScalarType.bool)
    return BinOp("ge", pos.to_expr(), (neg - const).to_expr(), ScalarType.bool)


def conjunction(cons):
    """The comparisons `c >= 0` of constraints `cons` joined by `and` (None for none)."""
    cond = None
    for c in cons:
        e = constraint_expr(c)
        cond = e if cond is None else BinOp("land", cond, e, ScalarType.bool)
    return cond
