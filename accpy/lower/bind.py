"""Bound loops (`plan.bind`): right after the scan, each loop a binding names becomes a `For` of
kind BOUND carrying how its unit's index gives its iteration (attrs `unit`; `stride` and `count`:
with several loops flattened into one unit, the loop's index is (id / stride) % count, `wraps`
saying whether the remainder is needed; `units`: the number of units the binding takes). Bound
loops are kept whole by unswitching (a unit's guard handles a split's last tile) and never
replaced by their single value by simplification (it removes serial loops only), so that the
device emitter (codegen/device.py) finds every one of them."""
from __future__ import annotations

from ..ir.expr import Const, idx_op
from ..ir.kinds import LoopKind
from ..ir.stmt import For
from ..ir.visitor import Mutator


def bound_loop_attrs(bindings) -> dict:
    """Loop var -> the attrs its bound `For` carries."""
    out = {}
    for b in bindings:
        for k, v in enumerate(b.vars):
            stride = Const(1)
            for e in b.extents[k + 1:]:
                stride = idx_op("mul", stride, e)
            out[v] = (("unit", b.unit), ("stride", stride), ("count", b.extents[k]), ("units", b.extent),
                      ("wraps", k > 0))
    return out


class _MarkBound(Mutator):
    def __init__(self, attrs):
        self.attrs = attrs

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        a = self.attrs.get(f.var)
        return f if a is None else For(f.var, f.lo, f.hi, f.body, LoopKind.BOUND, f.attrs + a)


def mark_bound(stmt, bindings):
    """`stmt` with the loops of `bindings` marked BOUND."""
    return _MarkBound(bound_loop_attrs(bindings)).visit(stmt)
