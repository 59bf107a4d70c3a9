"""Tensorize: the sub-nests a plan tensorized (`Plan.tensorize(indices, intrinsic)`) become the
target's tile instructions, through the tensor unit (accpy/targets/tensor_unit.py) whose
intrinsic the request names: `match_prologue`, `match_tile`, `match_epilogue`, `tile_calls`.

For each request with index roles (i, j, k): a perfect nest of loops over those indices around
one statement is matched: `C[i, j] += int32(A[i, k]) * int32(B[k, j])` becomes a tile (an object
of the unit's), emitted as the unit's calls; a statement filling an accumulator from host memory
(a prologue) or reading one out (an epilogue) becomes the unit's transfers. A loop of extent 1 may
be gone (simplified away): the match goes by the loops that are left. Anything else touching a
target memory is a ValueError saying what did not match (and, when the memories are another
library's, which library matched and which placed them). What a unit does across tiles (e.g.
reusing weights already loaded) is a pass of its library, run after this one.

Guarantees afterwards: no load or store of a target-memory buffer remains.
"""
from __future__ import annotations

from ..ir.stmt import For, Store
from ..ir.visitor import Mutator, accesses
from ..targets.library import memory
from .target_memory import is_target_buffer


def tensorize(stmt, requests, layouts, placed_by=None, matched_by=None):
    """`requests`: [(roles (i, j, k) loop vars, description, tensor unit)]; `layouts`: {buffer: layout}
    of the target-memory caches. For messages: `placed_by` {buffer: the library that placed it},
    `matched_by` {unit: its library}."""
    for roles, what, unit in requests:
        lib = (matched_by or {}).get(unit)
        stmt = _Tensorize(unit, lib, roles, layouts, what, placed_by or {}).visit(stmt)
    check_no_target_access(stmt, requests)
    return stmt


class _Tensorize(Mutator):
    def __init__(self, unit, library, roles, layouts, what, placed_by):
        self.unit, self.library, self.roles, self.layouts, self.what = unit, library, roles, layouts, what
        self.placed_by = placed_by

    def visit_For(self, f: For):
        if f.var not in self.roles:
            return self.generic_visit(f)
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
        try:
            return self._match_unit(loops, s)
        except ValueError as e:
            raise ValueError(f"{e}{self._libraries(s)}") from None

    def _match_unit(self, loops, s):
        unit = self.unit
        pro = unit.match_prologue(loops, s, self.roles, self.layouts, self.what)
        if pro is not None:
            return pro
        if s.reduce is not None or s.buffer in self.layouts:
            return unit.tile_calls(unit.match_tile(loops, s, self.roles, self.layouts, self.what))
        out = unit.match_epilogue(loops, s, self.roles, self.layouts, self.what)
        if out is None:
            if not _touches_target(s, self.layouts):
                return _nest(loops, s)  # plain host code inside the tensorized loops (e.g. a CPU part)
            raise ValueError(unit.unmatched(s, self.what))
        return out

    def _libraries(self, s) -> str:
        """" (...)" naming the libraries when the statement's target memories are another's, else ""."""
        mine = self.library
        others = {}
        for a in accesses(s):
            lib = self.placed_by.get(a.buffer)
            if lib is not None and lib is not mine:
                others.setdefault(lib.name, []).append(a.buffer.name)
        if not others:
            return ""
        where = "; ".join(f"{', '.join(dict.fromkeys(names))} placed by library {lib!r}" for lib, names in others.items())
        who = f"library {mine.name!r}" if mine is not None else self.unit.name
        return f" ({self.unit.name}'s tiles, matched by {who}; {where})"


def _nest(loops, s):
    for f in reversed(loops):
        s = For(f.var, f.lo, f.hi, s, f.kind, f.attrs)
    return s


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
