"""Scan an iteration space into loops with guards.

Guarantees afterwards: one perfect nest of `For` loops over the box, in schedule order;
its innermost body is a Block with one `If(guard, statements)` per part, where the guard
keeps exactly the real points (constraints the box already implies are left out). This
is the obviously-correct form that `unswitch` then separates.
"""
from __future__ import annotations

from ..analysis.logic_check import split_condition
from ..analysis.polyhedra import conjunction, part_guard
from ..ir.visitor import free_vars, substitute_indices
from ..ir.expr import Const
from ..ir.stmt import For, If, block
from ..ir.types import ScalarType


def part_body(space, p: int):
    """The statements of part p with nest indices replaced by their maps over the dims."""
    part = space.parts[p]
    return block(*[substitute_indices(st.store, part.index_map) for st in part.statements])


def _statement_pieces(space, p: int) -> list:
    """Part p's statements as (affine conditions over the dims, body) runs: a statement under an
    _If whose condition compares indices and runtime sizes gets that part as guards of its own,
    one per disjoint piece (unswitching then splits loop ranges on them); the rest of its
    condition stays an If around it."""
    part = space.parts[p]
    allowed = set(space.vars)
    for c in space.part_constraints(p):
        allowed.update(c.vars)
    allowed.update(v for v in _nest_symbols(part))
    runs: list = []
    for st in part.statements:
        if st.cond is None:
            pieces, body = [[]], substitute_indices(st.store, part.index_map)
        else:
            cond = substitute_indices(st.cond, part.index_map)
            pieces, rest = split_condition(cond, allowed)
            store = substitute_indices(st.assign, part.index_map)
            body = If(rest, store) if rest is not None else store
        if pieces == [[]] and runs and not runs[-1][0]:
            runs[-1][1].append(body)
            continue
        for cons in pieces:
            runs.append((cons, [body]))
    return runs


def _nest_symbols(part) -> set:
    """Runtime sizes (index-typed variables other than the nest's own indices) the part's
    conditions use."""
    out: set = set()
    own = {ix.var for ix in part.nest.indices}
    for st in part.statements:
        if st.cond is not None:
            out.update(v for v in free_vars(st.cond) if v.dtype is ScalarType.index and v not in own)
    return out


def scan(space):
    bodies = []
    for p in range(len(space.parts)):
        guard = part_guard(space, p)
        if not any(st.cond is not None for st in space.parts[p].statements):
            body = part_body(space, p)
            bodies.append(If(conjunction(guard), body) if guard else body)
            continue
        for cons, stmts in _statement_pieces(space, p):
            g = list(guard) + list(cons)
            body = block(*stmts)
            bodies.append(If(conjunction(g), body) if g else body)
    stmt = block(*bodies)
    for d in reversed(space.dims):
        stmt = For(d.var, Const(0), d.extent, stmt)
    return stmt
