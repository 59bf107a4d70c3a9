"""Target memories: caches placed in an accelerator's memories get row addresses, and their
copy-in / write-back loops become the target's transfer instructions (e.g. Gemmini's mvin /
mvout), through the target library's `place`, `copy_in` and `copy_out` hooks.

Guarantees afterwards: every target-memory buffer has a layout (base address, shape) that fits
its memory (else ValueError saying how big the block is and what fits), and no copy loop into
or out of such a buffer remains; the buffers themselves are never allocated in C.
"""
from __future__ import annotations

from ..ir.affine import to_affine
from ..ir.expr import Const, Load, Var, as_int
from ..ir.stmt import For, Store
from ..ir.visitor import Mutator
from ..targets.intrinsics import memory


def is_target_buffer(buf) -> bool:
    return buf is not None and buf.memory not in ("global", "local", "heap") and memory(buf.memory) is not None


def lower_target_memories(stmt, library, buffers, describe):
    """Returns (stmt, layouts): layouts of the target buffers, copies lowered to transfers."""
    layouts = library.place([b for b in buffers if is_target_buffer(b)], describe)
    if not layouts:
        return stmt, layouts
    return _Copies(library, layouts, describe).visit(stmt), layouts


def _perfect_nest(f: For):
    loops, s = [], f
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    return loops, s


class _Copies(Mutator):
    def __init__(self, library, layouts, describe):
        self.library, self.layouts, self.describe = library, layouts, describe

    def visit_For(self, f: For):
        loops, s = _perfect_nest(f)
        if isinstance(s, Store):
            out = self._copy(loops, s)
            if out is not None:
                return out
        return self.generic_visit(f)

    def _copy(self, loops, s: Store):
        vs = [f.var for f in loops]
        if any(as_int(f.lo) != 0 for f in loops):
            return None
        exts = [f.hi for f in loops]
        lay = self.layouts.get(s.buffer)
        if lay is not None and tuple(s.indices) == tuple(vs) and len(vs) == s.buffer.rank:
            what = self.describe(s.buffer)
            if isinstance(s.value, Const) and s.value.value == 0:
                return self.library.copy_in(lay, None, [Const(0)] * len(vs), exts, what)
            if isinstance(s.value, Load) and s.value.buffer not in self.layouts:
                origin = _origin(s.value.indices, vs)
                if origin is not None:
                    return self.library.copy_in(lay, s.value.buffer, origin, exts, what)
            if not isinstance(s.value, Load):
                raise ValueError(f"{what}: the copy into Gemmini's memory converts element types "
                                 f"(element_type=): not supported")
            return None
        v = s.value
        if isinstance(v, Load) and v.buffer in self.layouts and s.buffer not in self.layouts \
                and tuple(v.indices) == tuple(vs) and len(vs) == v.buffer.rank and s.reduce is None:
            origin = _origin(s.indices, vs)
            if origin is not None:
                return self.library.copy_out(self.layouts[v.buffer], s.buffer, origin, exts,
                                             self.describe(v.buffer))
        return None


def _origin(indices, vs):
    """lo_d when indices[d] == lo_d + vs[d] (lo_d free of the copy vars), else None."""
    out = []
    for ix, v in zip(indices, vs):
        a = to_affine(ix)
        if a is None or a.coef(v) != 1 or any(a.coef(w) for w in vs if w is not v):
            return None
        out.append((a - to_affine(v)).to_expr())
    return out
