"""Simplify: fold constants, canonicalize affine index arithmetic, drop empty loops and
replace single-iteration loops by their one value.

Guarantees afterwards: no loop with a constant trip count <= 1 remains, index
expressions are in canonical affine form, and constant conditions are folded, also those
decided by the ranges of the loops around them (constant bounds): `2 * x < 512` inside
`for x in [0, 256)` is true; floor divisions and remainders by constants that those ranges
decide are affine: `(8*i + ii) // 8` is `i` and `(8*i + ii) % 8` is `ii` inside `for ii in [0, 8)`.
"""
from __future__ import annotations

from ..ir.kinds import LoopKind
from ..ir.affine import Affine, affine_bounds, to_affine
from ..ir.expr import BinOp, Const, as_int, idx_op
from ..ir.stmt import Block, For, If, block
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, nodes_of, substitute


class Simplify(Mutator):
    def __init__(self, keep=(), keep_innermost=()):
        self.keep = set(keep)  # loop vars whose loops stay even with one iteration
        self.keep_innermost = set(keep_innermost)  # the same, when no loop is inside them
        self.ranges: dict = {}  # loop var -> (first, last) of the loops around, where constant

    def visit_BinOp(self, e: BinOp):
        e = self.generic_visit(e)
        if e.dtype is ScalarType.index:
            a = to_affine(e)
            if a is not None:
                return a.to_expr()
            if e.op in ("min", "max", "floordiv", "mod"):
                ca, cb = as_int(e.a), as_int(e.b)
                if ca is not None and cb is not None:
                    return idx_op(e.op, ca, cb)
                if e.op in ("floordiv", "mod") and cb is not None and cb > 0:
                    q_r = divmod_in_ranges(to_affine(e.a), cb, self.ranges)
                    if q_r is not None:
                        return q_r[0 if e.op == "floordiv" else 1].to_expr()
                if e.op in ("min", "max") and e.a == e.b:
                    return e.a
        if e.dtype is ScalarType.bool and e.op in ("lt", "le", "gt", "ge", "eq", "ne"):
            d = to_affine(BinOp("sub", e.a, e.b, ScalarType.index)) if e.a.dtype.is_int else None
            b = affine_bounds(d, self.ranges) if d is not None else None
            val = _decided(e.op, *b) if b is not None else None
            if val is not None:
                return Const(val, ScalarType.bool)
        if e.op == "land":
            if isinstance(e.a, Const):
                return e.b if e.a.value else e.a
            if isinstance(e.b, Const):
                return e.a if e.b.value else e.b
        return e

    def visit_For(self, f: For):
        lo, hi = self.visit(f.lo), self.visit(f.hi)
        trip = to_affine(BinOp("sub", hi, lo, ScalarType.index))
        if trip is not None and trip.is_const:
            if trip.const <= 0:
                return Block(())
            if trip.const == 1 and f.kind in (LoopKind.SERIAL, LoopKind.UNROLLED) and f.var not in self.keep \
                    and not (f.var in self.keep_innermost and not nodes_of(f.body, For)):
                return self.visit(substitute(f.body, {f.var: lo}))
        la, ha = to_affine(lo), to_affine(hi)
        if la is not None and ha is not None and la.is_const and ha.is_const and ha.const > la.const:
            self.ranges[f.var] = (la.const, ha.const - 1)  # (a loop's var is bound by that loop only)
        body = self.visit(f.body)
        self.ranges.pop(f.var, None)
        if isinstance(body, Block) and not body.stmts:
            return Block(())
        if lo is f.lo and hi is f.hi and body is f.body:
            return f
        return For(f.var, lo, hi, body, f.kind, f.attrs)

    def visit_If(self, s: If):
        cond = self.visit(s.cond)
        if isinstance(cond, Const):
            if cond.value:
                return self.visit(s.then)
            return self.visit(s.orelse) if s.orelse is not None else Block(())
        then = self.visit(s.then)
        orelse = self.visit(s.orelse) if s.orelse is not None else None
        return If(cond, then, orelse)

    def visit_Block(self, b: Block):
        return block(*[self.visit(x) for x in b.stmts]) if b.stmts else b


def divmod_in_ranges(a, m: int, ranges: dict):
    """(a // m, a % m) as Affines, exactly, when the loops' ranges decide the quotient's part that
    varies: a = m*Q + R with Q the terms whose coefficients m divides, and R (the other terms and
    the constant's remainder) within one interval [m*k, m*k + m) over the ranges; then
    a // m = Q/m + k and a % m = R - m*k. None otherwise (or when `a` is not affine)."""
    if a is None:
        return None
    rest = Affine([(v, c) for v, c in a.terms if c % m], a.const % m)
    b = affine_bounds(rest, ranges)
    if b is None or b[0] // m != b[1] // m:
        return None
    k = b[0] // m
    q = Affine([(v, c // m) for v, c in a.terms if c % m == 0], a.const // m + k)
    return q, rest - m * k


def _decided(op: str, lo: int, hi: int):
    """True / False if `x op 0` holds for every / no x in [lo, hi]; None if that depends on x."""
    always = {"lt": hi < 0, "le": hi <= 0, "gt": lo > 0, "ge": lo >= 0, "eq": lo == hi == 0, "ne": lo > 0 or hi < 0}
    never = {"lt": lo >= 0, "le": lo > 0, "gt": hi <= 0, "ge": hi < 0, "eq": lo > 0 or hi < 0, "ne": lo == hi == 0}
    return True if always[op] else False if never[op] else None


def simplify(stmt, keep=(), keep_innermost=()):
    """Simplify; loops over the vars in `keep` are kept even when they run once, and so are
    those over the vars in `keep_innermost` that have no loop inside."""
    return Simplify(keep, keep_innermost).visit(stmt)
