"""Promote small caches to registers.

A cache whose every access (after unrolling and vectorization) is a whole-vector access
at a compile-time-constant position, and whose vector slots do not overlap, needs no
memory: each slot becomes a vector variable (a register, e.g. the C tile of a matmul
micro-kernel). Masked accesses read or write the slot as a whole: lanes past the mask
only ever meet other masked accesses, never memory.

Guarantees afterwards: promoted caches have no Alloc, no loads and no stores; their
values live in `VVar`s declared where the Alloc was.
"""
from __future__ import annotations

from ..ir.kinds import BufferRole, HostMemory
from ..ir.affine import element_offset, to_affine
from ..ir.expr import Load
from ..ir.stmt import Alloc, Store
from ..ir.vector import VAssign, VDecl, VLoad, VStore, VVar
from ..ir.visitor import Mutator, Visitor


def _offset(buffer, indices):
    a = to_affine(element_offset(buffer, indices))
    return a.const if a is not None and a.is_const else None


def _slots(stmt, buf):
    """{offset: lanes} if every access to `buf` is a constant whole-vector access, else None."""
    slots: dict = {}
    ok = [True]

    class V(Visitor):
        def _vec(self, n):
            if n.buffer is buf:
                off = _offset(buf, n.indices)
                if off is None or n.stride != 1 or slots.get(off, n.lanes) != n.lanes:
                    ok[0] = False
                else:
                    slots[off] = n.lanes

        def visit_VLoad(self, n):
            self._vec(n)
            self.generic_visit(n)

        def visit_VStore(self, n):
            self._vec(n)
            self.generic_visit(n)

        def visit_Load(self, n):
            if n.buffer is buf:
                ok[0] = False
            self.generic_visit(n)

        def visit_Store(self, n):
            if n.buffer is buf:
                ok[0] = False
            self.generic_visit(n)

    V().visit(stmt)
    if not ok[0] or not slots:
        return None
    offs = sorted(slots)
    for a, b in zip(offs, offs[1:]):
        if a + slots[a] > b:
            return None
    return slots


class _Promote(Mutator):
    def __init__(self, buf, regs):
        self.buf, self.regs = buf, regs

    def visit_VLoad(self, n: VLoad):
        n = self.generic_visit(n)
        if n.buffer is self.buf:
            return self.regs[_offset(self.buf, n.indices)]
        return n

    def visit_VStore(self, n: VStore):
        n = self.generic_visit(n)
        if n.buffer is self.buf:
            return VAssign(self.regs[_offset(self.buf, n.indices)], n.value)
        return n


class _PromoteAllocs(Mutator):
    def visit_Alloc(self, a: Alloc):
        body = self.visit(a.body)
        if a.buffer.role != BufferRole.CACHE or a.buffer.memory != HostMemory.LOCAL:
            return a if body is a.body else Alloc(a.buffer, body, a.zero)
        slots = _slots(body, a.buffer)
        if slots is None:
            return a if body is a.body else Alloc(a.buffer, body, a.zero)
        regs = {off: VVar(f"{a.buffer.name}_{off}", a.buffer.dtype, lanes) for off, lanes in sorted(slots.items())}
        return VDecl(tuple(regs.values()), _Promote(a.buffer, regs).visit(body))


def promote_registers(stmt):
    return _PromoteAllocs().visit(stmt)


_ = (Load, Store)
