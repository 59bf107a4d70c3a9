"""Dot-product instructions for the vectorizer: runs of adjacent statements accumulating products of
narrow elements over a group (an inner loop over 2, 4 or more adjacent elements, unrolled) that one
instruction computes per vector lane, matched into one statement with a Call marker the vectorizer
turns into that instruction. The instructions are the target libraries' data (`DotProduct` rows of
targets/vector_isa.py, e.g. x86's in targets/x86.py, AArch64's in targets/arm/): those of the
target's vector ISA (`target.vector_isa.dot_products()`)."""
from __future__ import annotations

from collections.abc import Mapping

from ..ir.expr import BinOp, Call, Cast, Load, Var
from ..ir.stmt import Store
from ..targets.library import all_dot_products, libraries
from ..targets.vector_isa import DotProduct
from .lanes import NotVectorizable, access_offset, lane_coef


class _ProductOps(Mapping):
    """{operation name: DotProduct} of every registered library (built again when the registry
    changes: a library registered later is seen)."""

    def __init__(self):
        self._key, self._ops = None, {}

    def _table(self) -> dict:
        key = libraries()
        if key != self._key:
            self._key, self._ops = key, {p.op: p for p in all_dot_products()}
        return self._ops

    def __getitem__(self, op: str) -> DotProduct:
        return self._table()[op]

    def __iter__(self):
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


PRODUCT_OPS = _ProductOps()


def group_products(stores, lane: Var, target):
    """Runs of adjacent statements one dot-product instruction of `target` computes (`DotProduct`) as
    one `C[x] += op(A[p], B[r])`; the others unchanged."""
    kinds = list(target.vector_isa.dot_products())
    if not kinds:
        return stores
    out, k = [], 0
    while k < len(stores):
        # a whole group, else (the tail of a reduction that is no multiple of it) a partial one
        # (dot products only: the missing elements are read as 0)
        for p, n in [(p, n) for p in kinds for n in range(p.group, 0 if p.accumulates else p.group - 1, -1)]:
            merged = _product_of(p, stores[k:k + n], lane) if k + n <= len(stores) else None
            if merged is not None:
                out.append(merged)
                k += n
                break
        else:
            out.append(stores[k])
            k += 1
    return out


def _factors(s: Store, p: DotProduct):
    """The loads of `C[x] += T(A[.]) * T(B[.])` in the instruction's operand order, or None."""
    v = s.value
    if not (isinstance(v, BinOp) and v.op == "mul" and v.dtype is p.acc):
        return None
    loads = []
    for x in (v.a, v.b):
        if not (isinstance(x, Cast) and x.dtype is p.acc and isinstance(x.value, Load)):
            return None
        loads.append(x.value)
    types = tuple(x.buffer.dtype for x in loads)
    if types == p.factors:
        return loads
    if types[::-1] == p.factors:
        return loads[::-1]
    return None


def _product_of(p: DotProduct, run, lane: Var):
    s1 = run[0]
    if not (all(s.buffer is s1.buffer and s.indices == s1.indices and s.reduce == "add" for s in run)
            and s1.buffer.dtype is p.acc and lane_coef(s1.buffer, s1.indices, lane) == 1):
        return None
    fs = [_factors(s, p) for s in run]
    if any(f is None for f in fs):
        return None
    for n in range(2):
        first = fs[0][n]
        try:
            moves = lane_coef(first.buffer, first.indices, lane)
        except NotVectorizable:
            return None
        if moves not in p.moves:
            return None
        o0 = access_offset(first.buffer, first.indices)
        for q, f in enumerate(fs[1:], 1):
            o = access_offset(f[n].buffer, f[n].indices)
            if f[n].buffer is not first.buffer or o0 is None or o is None or not (o - o0).is_const \
                    or (o - o0).const != q or lane_coef(f[n].buffer, f[n].indices, lane) != moves:
                return None
    if not any(lane_coef(f.buffer, f.indices, lane) for f in fs[0]):
        return None  # neither operand moves: nothing for the lanes to share
    op = p.op if len(run) == p.group else f"{p.op}:{len(run)}"  # a partial group: its first elements
    return Store(s1.buffer, s1.indices, Call(op, tuple(fs[0]), p.acc), "add")


def product_kind(fn: str):
    """(the `DotProduct`, elements per group read) of a product Call marker, or (None, 0)."""
    op, _, part = fn.partition(":")
    p = PRODUCT_OPS.get(op)
    return (p, int(part) if part else (p.group if p else 0))
