"""The vector shape of a vectorized loop: the element type its stores write, held in lanes of its
own width (16 x float32, 64 x int8 in a 512-bit register) when every type the statements touch is that wide,
or, for a narrow integer next to 32-bit values, widened to the lanes of the target's int32 vectors.
Shared by the vectorizer (vectorize.py) and the plan-time check of its operations (vector_check.py)."""
from __future__ import annotations

from ..ir.types import ScalarType
from ..ir.visitor import Visitor
from .vector_products import product_kind


def loop_types(stores) -> tuple:
    """(the element types the stores write, the other types the statements read or convert to)."""
    types = set()

    class V(Visitor):
        def visit_Load(self, n):
            types.add(n.buffer.dtype)
            self.generic_visit(n)

        def visit_Call(self, n):
            if product_kind(n.fn)[0] is None:  # its narrow operands are loaded as groups per lane
                self.generic_visit(n)

        def visit_Cast(self, n):
            types.add(n.dtype)
            self.generic_visit(n)

    for s in stores:
        types.add(s.buffer.dtype)
        V().visit(s.value)
    types.discard(ScalarType.bool)
    stored = {s.buffer.dtype for s in stores}
    # int32 indices converted to float32 are fine: the vector type is the stores' type
    return stored, {x for x in types if x not in stored and x is not ScalarType.index}


def loop_shape(target, dtype: ScalarType, others=()):
    """The vector shape of a loop storing `dtype` next to values of the types `others`: its own
    lanes when all are as wide (or `dtype` is 32 bits or more), else a narrow integer widened to
    the lanes of the target's int32 vectors; None when there is neither."""
    if target is None:
        return None
    isa = target.vector_isa
    own = isa.shape(dtype)
    if own is not None and (dtype.bits >= 32 or all(x.bits == dtype.bits for x in others)):
        return own
    wide = isa.shape(ScalarType.int32)
    return isa.lane_shape(dtype, wide.lanes) if wide is not None else None


def vector_dtype(stores, target=None):
    """The loop's vector type: the stores' element type, when every type the statements touch
    has a shape of as many lanes on `target` (the same width; int32 and float32 lanes together;
    narrow integers held widened in 32-bit lanes); else None (left to the C compiler). Without
    `target`: the stores' type when every type is as wide."""
    stored, others = loop_types(stores)
    if len(stored) != 1:
        return None
    t = next(iter(stored))
    if target is None:
        return t if all(x.bits == t.bits for x in others) else None
    loop = loop_shape(target, t, others)
    if loop is None:
        return t  # (no vectors of the stores' type: the caller says so)
    if any(target.vector_isa.lane_shape(x, loop.lanes) is None for x in others):
        return None
    return t


def shape_of_loop(stores, target):
    """(the loop's vector type, its shape on `target`): (None, None) when its types mix beyond
    what lanes hold, (dtype, None) when `target` has no vectors of its type."""
    dtype = vector_dtype(stores, target)
    if dtype is None:
        return None, None
    return dtype, loop_shape(target, dtype, loop_types(stores)[1])
