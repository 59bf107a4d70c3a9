"""Target memories: caches placed in an accelerator's memories get row addresses, and their
copy-in / write-back loops become the target's transfer instructions (e.g. Gemmini's mvin /
mvout), through the `place`, `copy_in` and `copy_out` of the tensor unit whose `memories` hold
the cache's memory (accpy/targets/tensor_unit.py; the first of the target's units that has it).

Guarantees afterwards: every target-memory buffer has a layout (base address, shape) that fits
its memory (else ValueError saying how big the block is and what fits), and no copy loop into
or out of such a buffer remains; the buffers themselves are never allocated in C.
"""
from __future__ import annotations

from ..ir.kinds import HostMemory
from ..ir.affine import to_affine
from ..ir.expr import BinOp, Const, Load, Var, as_int
from ..ir.stmt import For, Store
from ..ir.visitor import Mutator, accesses, free_vars
from ..targets.library import memory


def is_target_buffer(buf) -> bool:
    return buf is not None and buf.memory not in (HostMemory.GLOBAL, HostMemory.LOCAL, HostMemory.HEAP) and memory(buf.memory) is not None


def lower_target_memories(stmt, units, buffers, describe, requests=(), locality=None):
    """Returns (stmt, layouts, owners): layouts of the target buffers, copies lowered to transfers,
    {buffer: (library, unit) that placed it}. `units`: the target's ((library, tensor unit), ...);
    `locality`: {target buffer: its cache's `locality` hint}, given to the unit's loads."""
    targets = [b for b in buffers if is_target_buffer(b)]
    owners = {}
    for b in targets:
        owner = next(((lib, u) for lib, u in units if any(m.name == b.memory for m in u.memories)), None)
        if owner is None:
            mem = memory(b.memory)
            where = f"{mem.owner}'s {mem.name}" if mem.owner else mem.name
            raise ValueError(f"{describe(b)} in {where}: none of the target's libraries places caches in that "
                             f"memory (the libraries with memories: "
                             f"{', '.join(lib.name for lib, u in units if u.memories) or 'none'})")
        owners[b] = owner
    roles = tensorize_roles(stmt, targets, requests)
    layouts: dict = {}
    for lib, unit in units:
        mine = [b for b in targets if owners[b][1] is unit]
        if mine:
            layouts.update(unit.place(mine, describe, roles=roles))
    if not layouts:
        return stmt, layouts, owners
    return _Copies(owners, layouts, describe, locality or {}).visit(stmt), layouts, owners


def tensorize_roles(stmt, buffers, requests) -> dict:
    """{buffer: per dimension, the position (0, 1, 2: i, j, k) of the tensorized index its
    subscripts follow, or None}, from the accesses of each buffer in `stmt` (first one wins)."""
    roles = [v for vars_, *_ in requests for v in vars_]
    out: dict = {}
    for a in accesses(stmt):
        if a.buffer not in buffers or a.buffer in out:
            continue
        dims = []
        for ix in a.indices:
            aff = to_affine(ix)
            hit = [k % 3 for k, v in enumerate(roles) if aff is not None and aff.coef(v)]
            dims.append(hit[0] if len(set(hit)) == 1 else None)
        if any(d is not None for d in dims):
            out[a.buffer] = tuple(dims)
    return out


def _perfect_nest(f: For):
    loops, s = [], f
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    return loops, s


class _Copies(Mutator):
    def __init__(self, owners, layouts, describe, locality):
        self.owners, self.layouts, self.describe, self.locality = owners, layouts, describe, locality

    def visit_For(self, f: For):
        loops, s = _perfect_nest(f)
        if isinstance(s, Store):
            out = self._copy(loops, s)
            if out is not None:
                return out
        return self.generic_visit(f)

    def visit_Store(self, s: Store):
        if s.reduce is not None or not isinstance(s.value, (Load, Const)):
            return s  # (the computation itself, e.g. a tensorized statement whose loops are gone)
        out = self._copy([], s)  # a copy of a single element (its loops simplified away)
        return s if out is None else out

    def _copy(self, loops, s: Store):
        if s.reduce is not None or any(as_int(f.lo) != 0 for f in loops):
            return None  # (a reduction is the computation, e.g. a tile step whose k loop ran once)
        ext = {f.var: f.hi for f in loops}
        lay = self.layouts.get(s.buffer)
        if lay is not None:
            coords = _coords(s.indices, ext)
            if coords is None:
                return None
            what = self.describe(s.buffer)
            exts = [ext.get(c, Const(1)) for c in coords]
            unit = self.owners[s.buffer][1]
            if isinstance(s.value, Const) and s.value.value == 0:
                return unit.copy_in(lay, None, [Const(0)] * len(coords), exts, what)
            if isinstance(s.value, Load) and s.value.buffer not in self.layouts:
                origin = _origin(s.value.indices, coords)
                if origin is not None:
                    return unit.copy_in(lay, s.value.buffer, origin, exts, what, locality=self.locality.get(s.buffer))
            if not isinstance(s.value, Load):
                mem = memory(s.buffer.memory)
                raise ValueError(f"{what}: the copy into {mem.owner or 'the target'}'s {mem.name} converts "
                                 f"element types (element_type=): not supported")
            return None
        v = s.value
        if isinstance(v, Load) and v.buffer in self.layouts and s.reduce is None:
            coords = _coords(v.indices, ext)
            if coords is None:
                return None
            origin = _origin(s.indices, coords)
            if origin is not None:
                exts = [ext.get(c, Const(1)) for c in coords]
                return self.owners[v.buffer][1].copy_out(self.layouts[v.buffer], s.buffer, origin, exts,
                                                         self.describe(v.buffer))
        return None


def _coords(indices, ext):
    """The copy's coordinate per cache dimension: a copy loop's var, or 0 (a dimension of extent 1
    whose loop was simplified away); None unless each loop var is used exactly once, in order."""
    out, seen = [], []
    for ix in indices:
        if isinstance(ix, Var) and ix in ext:
            out.append(ix)
            seen.append(ix)
        elif as_int(ix) == 0:
            out.append(None)
        else:
            return None
    if seen != list(ext):
        return None
    return out


def _origin(indices, coords):
    """lo_d when indices[d] == lo_d + coords[d] (lo_d free of the copy vars), else None. lo_d
    need not be affine (a block whose first row is a division of the enclosing loops)."""
    vs = [c for c in coords if c is not None]
    out = []
    for ix, v in zip(indices, coords):
        a = to_affine(ix)
        if a is None:
            lo = _minus_var(ix, v)
            if lo is None or free_vars(lo) & set(vs):
                return None
            out.append(lo)
            continue
        if any(a.coef(w) for w in vs if w is not v) or (v is not None and a.coef(v) != 1):
            return None
        out.append((a - to_affine(v)).to_expr() if v is not None else a.to_expr())
    return out


def _minus_var(ix, v):
    """`ix` without one added `v` (ix == lo + v, or v + lo; v None: ix itself), else None."""
    if v is None:
        return ix
    if isinstance(ix, BinOp) and ix.op == "add":
        if ix.b is v:
            return ix.a
        if ix.a is v:
            return ix.b
    return None
