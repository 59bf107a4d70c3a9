"""Scan an iteration space into loops with guards.

Guarantees afterwards: one perfect nest of `For` loops over the box, in schedule order;
its innermost body is a Block with one `If(guard, statements)` per part, where the guard
keeps exactly the real points (constraints the box already implies are left out). This
is the obviously-correct form that `unswitch` then separates.
"""
from __future__ import annotations

from ..analysis.polyhedra import part_guard
from ..ir.affine import Affine
from ..ir.visitor import substitute_indices
from ..ir.expr import BinOp, Const
from ..ir.stmt import For, If, block
from ..ir.types import ScalarType


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
    cond = None
    for c in cons:
        e = constraint_expr(c)
        cond = e if cond is None else BinOp("land", cond, e, ScalarType.bool)
    return cond


def part_body(space, p: int):
    """The statements of part p with nest indices replaced by their maps over the dims."""
    part = space.parts[p]
    return block(*[substitute_indices(st.store, part.index_map) for st in part.statements])


def scan(space):
    bodies = []
    for p in range(len(space.parts)):
        guard = part_guard(space, p)
        body = part_body(space, p)
        bodies.append(If(conjunction(guard), body) if guard else body)
    stmt = block(*bodies)
    for d in reversed(space.dims):
        stmt = For(d.var, Const(0), d.extent, stmt)
    return stmt
