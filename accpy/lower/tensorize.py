"""Tensorize: the sub-nests a plan tensorized (`Plan.tensorize(indices, intrinsic)`) become the
target's tile instructions, through the target library (`match_tile`, `match_epilogue`,
`tile_calls`).

For each request with index roles (i, j, k): a perfect nest of loops over those indices around
one statement is matched: `C[i, j] += int32(A[i, k]) * int32(B[k, j])` becomes a matmul tile
(e.g. Gemmini: preload + compute; when the loop right around the tile does not move the weights,
they are preloaded at its first iteration only and reused), and an output statement reading the
accumulator (`C[i, j] = int8(round(float32(Acc[i, j]) * s))`, optional ReLU, or a raw int32
copy) becomes a mvout. A loop of extent 1 may be gone (simplified away): the match goes by the
loops that are left. Anything else touching a target memory is a ValueError saying what did
not match.

Guarantees afterwards: no load or store of a target-memory buffer remains.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import BinOp, Const, as_int
from ..ir.kinds import LoopKind
from ..ir.stmt import For, Stmt, Store, block
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, accesses, free_vars
from ..targets.library import memory
from .target_memory import is_target_buffer


@dataclass(frozen=True)
class _PendingTile(Stmt):
    """Matched tiles sharing one weight operand, expanded into calls once the loops around them
    are known (weight reuse): `items` = ((tile, its own loops), ...) run one after the other,
    inside the `reuse` loops (outermost first); none of those loops moves the weights."""

    items: tuple
    reuse: tuple = ()

    @property
    def b_vars(self) -> frozenset:
        out = frozenset()
        for t, _ in self.items:
            out |= t.b_vars
        return out

    @property
    def weights(self):
        return self.items[0][0].weights  # (the target library's tile says what its weights are)

    def loops(self):
        return list(self.reuse) + [f for _, ls in self.items for f in ls]


def _loop_vars_in(e) -> frozenset:
    return frozenset(free_vars(e))


def tensorize(stmt, library, requests, layouts):
    """`requests`: [(roles (i, j, k) loop vars, description)]."""
    for roles, what in requests:
        stmt = _Tensorize(library, roles, layouts, what).visit(stmt)
        stmt = _Expand(library).visit(stmt)
    check_no_target_access(stmt, requests)
    return stmt


class _Tensorize(Mutator):
    def __init__(self, library, roles, layouts, what):
        self.library, self.roles, self.layouts, self.what = library, roles, layouts, what

    def visit_For(self, f: For):
        if f.var not in self.roles:
            body = self.visit(f.body)
            if isinstance(body, _PendingTile) and f.var not in body.b_vars and f.kind != LoopKind.PARALLEL and \
                    not any(f.var in _loop_vars_in(g.lo) | _loop_vars_in(g.hi) for g in body.loops()):
                # (inner reuse loops must not depend on this one: each of them runs from its start)
                # the weights stay across this loop: preloaded at the first iteration only
                return _PendingTile(body.items, (f,) + body.reuse)
            if isinstance(body, _PendingTile):
                body = _expand(self.library, body)
            return f if body is f.body else For(f.var, f.lo, f.hi, body, f.kind, f.attrs)
        loops, s = [], f
        while isinstance(s, For) and s.var in self.roles:
            loops.append(s)
            s = s.body
        if not isinstance(s, Store):
            names = ", ".join(v.name for v in self.roles)
            raise ValueError(f"{self.what}: the loops of ({names}) must be the innermost loops, around one "
                             f"statement; found {type(s).__name__} inside the loop of {loops[-1].var.name}")
        return self._match(loops, s)

    def visit_Block(self, b):
        out = self.generic_visit(b)
        stmts = getattr(out, "stmts", None)
        if not stmts or not all(isinstance(x, _PendingTile) for x in stmts):
            return out
        # consecutive tiles with the same weights (e.g. the full tiles and the tail of a loop the
        # unswitching cut): one preload for all of them
        first = stmts[0]
        if all(x.weights == first.weights and (not x.reuse or len(x.items) == 1) for x in stmts) and \
                all(_runs(f) for f in first.loops()):
            items = []
            for x in stmts:
                if x.reuse:
                    items.append((x.items[0][0], tuple(x.reuse) + tuple(x.items[0][1])))
                else:
                    items.extend(x.items)
            return _PendingTile(tuple(items))
        return out

    def visit_Store(self, s: Store):
        if _touches_target(s, self.layouts):
            return self._match([], s)
        return s

    def _match(self, loops, s):
        pro = self.library.match_prologue(loops, s, self.roles, self.layouts, self.what)
        if pro is not None:
            return pro
        if s.reduce is not None or s.buffer in self.layouts:
            return _PendingTile(((self.library.match_tile(loops, s, self.roles, self.layouts, self.what), ()),))
        out = self.library.match_epilogue(loops, s, self.roles, self.layouts, self.what)
        if out is None:
            if not _touches_target(s, self.layouts):
                return _nest(loops, s)  # plain host code inside the tensorized loops (e.g. a CPU part)
            raise ValueError(self.library.unmatched(s, self.what))
        return out


def _nest(loops, s):
    for f in reversed(loops):
        s = For(f.var, f.lo, f.hi, s, f.kind, f.attrs)
    return s


class _Expand(Mutator):
    def __init__(self, library):
        self.library = library

    def visit__PendingTile(self, p):
        return _expand(self.library, p)


def _first(loops):
    cond = None
    for f in loops:
        c = BinOp("eq", f.var, f.lo, ScalarType.bool)
        cond = c if cond is None else BinOp("land", cond, c, ScalarType.bool)
    return cond


def _runs(f) -> bool:
    """A loop certainly runs at least once (constant bounds)."""
    lo, hi = as_int(f.lo), as_int(f.hi)
    return lo is not None and hi is not None and hi > lo


def _wrap(loops, s):
    for f in reversed(loops):
        s = For(f.var, f.lo, f.hi, s, f.kind, f.attrs)
    return s


def _expand(library, p: _PendingTile):
    """The tiles' calls: the first tile preloads the weights when every loop around it starts
    (always, without reuse loops); the others, after it, always reuse them."""
    out = []
    for n, (tile, loops) in enumerate(p.items):
        if n == 0:
            cond = _first(list(p.reuse) + list(loops))
            calls = library.tile_calls(tile) if cond is None else library.tile_calls(tile, first_iteration=cond)
        else:
            calls = library.tile_calls(tile, first_iteration=Const(False, ScalarType.bool))
        out.append(_wrap(list(loops), calls))
    return _wrap(list(p.reuse), block(*out))


def _touches_target(s, layouts) -> bool:
    return any(a.buffer in layouts for a in accesses(s))


def check_no_target_access(stmt, requests) -> None:
    """Host code cannot read or write a target memory: say which access was left."""
    bad = [a.buffer for a in accesses(stmt) if is_target_buffer(a.buffer)]
    if bad:
        b = bad[0]
        hint = ("tensorize the loops that use it (plan.tensorize(indices=(i, j, k)))" if not requests else
                "make the tensorized indices the innermost loops of every statement that uses it")
        mem = memory(b.memory)
        where = f"{mem.owner}'s {b.memory.upper()}" if mem is not None and mem.owner else b.memory.upper()
        raise ValueError(f"{b.name} lives in {where}, which host code cannot access: {hint}")
