"""Simplify: fold constants, canonicalize affine index arithmetic, drop empty loops and
replace single-iteration loops by their one value.

Guarantees afterwards: no loop with a constant trip count <= 1 remains, index
expressions are in canonical affine form, and constant conditions are folded.
"""
from __future__ import annotations

from ..ir.kinds import LoopKind
from ..ir.affine import to_affine
from ..ir.expr import BinOp, Const, as_int, idx_op
from ..ir.stmt import Block, For, If, block
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, nodes_of, substitute


class Simplify(Mutator):
    def __init__(self, keep=(), keep_innermost=()):
        self.keep = set(keep)  # loop vars whose loops stay even with one iteration
        self.keep_innermost = set(keep_innermost)  # the same, when no loop is inside them

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
                if e.op in ("min", "max") and e.a == e.b:
                    return e.a
        if e.dtype is ScalarType.bool and e.op in ("lt", "le", "gt", "ge", "eq", "ne"):
            d = to_affine(BinOp("sub", e.a, e.b, ScalarType.index)) if e.a.dtype.is_int else None
            if d is not None and d.is_const:
                x = d.const
                val = {"lt": x < 0, "le": x <= 0, "gt": x > 0, "ge": x >= 0, "eq": x == 0, "ne": x != 0}[e.op]
                return Const(val, ScalarType.bool)
        if e.op == "land":
            if isinstance(e.a, Const):
                return e.b if e.a.value else e.a
            if isinstance(e.b, Const):
                return e.a if e.b.value else e.b
        return e

    def visit_For(self, f: For):
        lo, hi = self.visit(f.lo), self.visit(f.hi)
        trip = to_affine(BinOp("sub", hi, lo, ScalarType.index)) if True else None
        if trip is not None and trip.is_const:
            if trip.const <= 0:
                return Block(())
            if trip.const == 1 and f.kind in (LoopKind.SERIAL, LoopKind.UNROLLED) and f.var not in self.keep \
                    and not (f.var in self.keep_innermost and not nodes_of(f.body, For)):
                return self.visit(substitute(f.body, {f.var: lo}))
        body = self.visit(f.body)
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


def simplify(stmt, keep=(), keep_innermost=()):
    """Simplify; loops over the vars in `keep` are kept even when they run once, and so are
    those over the vars in `keep_innermost` that have no loop inside."""
    return Simplify(keep, keep_innermost).visit(stmt)
