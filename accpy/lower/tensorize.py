"""Tensorize: the sub-nests a plan tensorized (`Plan.tensorize(indices, intrinsic)`) become the
target's tile instructions, through the target library (`match_tile`, `match_epilogue`,
`tile_calls`).

For each request with index roles (i, j, k): a perfect nest of loops over those indices around
one statement is matched: `C[i, j] += int32(A[i, k]) * int32(B[k, j])` becomes a matmul tile
(Gemmini: preload + compute; when the loop right around the tile does not move the weights,
they are preloaded at its first iteration only and reused), and an output statement reading the
accumulator (`C[i, j] = int8(round(float32(Acc[i, j]) * s))`, optional ReLU, or a raw int32
copy) becomes a mvout. A loop of extent 1 may be gone (simplified away): the match goes by the
loops that are left. Anything else touching a target memory is a ValueError saying what did
not match.

Guarantees afterwards: no load or store of a target-memory buffer remains.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.stmt import For, Store, Stmt
from ..ir.visitor import Mutator, Visitor
from .target_memory import is_target_buffer


@dataclass(frozen=True)
class _PendingTile(Stmt):
    """A matched tile, expanded into calls once its enclosing loop is known (weight reuse)."""

    tile: object


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
            if isinstance(body, _PendingTile) and f.var not in body.tile.b_vars:
                # the weights stay: preload them at the first iteration only
                calls = self.library.tile_calls(body.tile, reuse_var=f.var, first=f.lo)
                return For(f.var, f.lo, f.hi, calls, f.kind, f.attrs)
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

    def visit_Store(self, s: Store):
        if _touches_target(s, self.layouts):
            return self._match([], s)
        return s

    def _match(self, loops, s):
        if s.reduce is not None or s.buffer in self.layouts:
            return _PendingTile(self.library.match_tile(loops, s, self.roles, self.layouts, self.what))
        out = self.library.match_epilogue(loops, s, self.roles, self.layouts, self.what)
        if out is None:
            if not _touches_target(s, self.layouts):
                return _nest(loops, s)  # plain host code inside the tensorized loops (e.g. a CPU part)
            raise ValueError(f"{self.what}: the statement into {s.buffer.name} reads the accumulator in a way "
                             f"Gemmini cannot do (expected C[i, j] = int8(round(float32(Acc[i, j]) * scale)), "
                             f"optionally with max(.., 0), or a raw int32 copy)")
        return out


def _nest(loops, s):
    for f in reversed(loops):
        s = For(f.var, f.lo, f.hi, s, f.kind, f.attrs)
    return s


class _Expand(Mutator):
    def __init__(self, library):
        self.library = library

    def visit__PendingTile(self, p):
        return self.library.tile_calls(p.tile)


def _touches_target(s, layouts) -> bool:
    found = []

    class V(Visitor):
        def visit_Load(self, n):
            if n.buffer in layouts:
                found.append(n)
            self.generic_visit(n)

    V().visit(s)
    return bool(found) or s.buffer in layouts


def check_no_target_access(stmt, requests) -> None:
    """Host code cannot read or write a target memory: say which access was left."""
    bad = []

    class V(Visitor):
        def visit_Load(self, n):
            if is_target_buffer(n.buffer):
                bad.append(n.buffer)
            self.generic_visit(n)

        def visit_Store(self, n):
            if is_target_buffer(n.buffer):
                bad.append(n.buffer)
            self.generic_visit(n)

    V().visit(stmt)
    if bad:
        b = bad[0]
        hint = ("tensorize the loops that use it (plan.tensorize(indices=(i, j, k)))" if not requests else
                "make the tensorized indices the innermost loops of every statement that uses it")
        raise ValueError(f"{b.name} lives in Gemmini's {b.memory.upper()}, which host code cannot access: {hint}")
