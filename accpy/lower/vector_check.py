"""The vector operations a vectorized sub-nest needs, asked of the target when `plan.vectorize` is
called: a loop whose lanes would need an instruction the target's vector shape lacks (an int8
division, a shift of int16 lanes where the ISA has none, ...) is refused there, naming the index, the operation,
the element type and the target, rather than when the package is built.

The statements are those of the nest, written over the schedule's loop counters; each is turned
into vector operations exactly as the vectorizer turns it (vectorize.py's `_Chunk`), and only a
missing operation is reported here. Everything else a loop may still fail on (strides, panels,
lanes that depend on each other) is the build's to say, as before; a loop the vectorizer would
leave to the C compiler (element types of several widths) is not refused.
"""
from __future__ import annotations

from typing import Optional

from ..errors import ScheduleError
from ..ir.affine import cond_constraints
from ..ir.stmt import If, Store
from ..ir.visitor import substitute_indices
from .lanes import MissingVectorOp, NotVectorizable, lane_coef
from .vector_shapes import shape_of_loop
from .vectorize import _REDUCE_H, _as_accumulation, _Chunk, _combine, _masked_store, refused

_OP_TEXT = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "floordiv": "//", "pow": "**",
            "shl": "<<", "shr": ">>", "and": "&", "or": "|", "xor": "^", "land": "and", "lor": "or",
            "cmp_lt": "<", "cmp_le": "<=", "cmp_gt": ">", "cmp_ge": ">=", "cmp_eq": "==", "cmp_ne": "!=",
            "invert": "~", "not": "not", "neg": "unary -", "select": "select (a condition on values)",
            "hadd": "+= (a sum across the lanes)", "hmul": "*= (a product across the lanes)",
            "hmin": "min (across the lanes)", "hmax": "max (across the lanes)"}


def operation_text(op: str) -> str:
    """How a message names the IR vector operation `op`."""
    if op.startswith("from_"):
        return f"the conversion from {op[5:]}"
    return f"`{_OP_TEXT.get(op, op)}`"


def missing_vector_op(stores, lane, target) -> Optional[tuple]:
    """(the first operation the lanes of the loop over `lane` running `stores` need and `target`
    lacks, as a MissingVectorOp; the index in `stores` of its statement), or None. Loops the
    vectorizer leaves to the C compiler need nothing."""
    dtype, isa = shape_of_loop(stores, target)
    if isa is None or not refused(stores, target):
        return None
    for k, s in enumerate(stores):
        try:
            s, _ = _as_accumulation(s, lane)
            value, _ = _Chunk(isa, lane, lane, None, target).vec(s.value)
            if s.reduce is None or s.buffer.dtype is not isa.dtype:
                continue
            if lane_coef(s.buffer, s.indices, lane) == 0 and s.reduce in _REDUCE_H:
                h = _REDUCE_H[s.reduce]
                if isa.template(h) is None:
                    raise MissingVectorOp(h, isa.dtype, isa)
            _combine("add" if s.reduce == "sub" else s.reduce, value, value, isa)
        except MissingVectorOp as e:
            return e, k
        except (NotVectorizable, ScheduleError):
            continue  # not an operation: the build says what it is
    return None


def _stores(space, lane) -> list:
    """(store over the loop counters, its LogicStatement) of every nest that runs in the loop of `lane`."""
    out = []
    for part in space.parts:
        if not any(a.coef(lane) for a in part.index_map.values()):
            continue
        for st in part.statements:
            if not isinstance(st.assign, Store):
                continue
            s = substitute_indices(st.assign, part.index_map)
            if isinstance(st.store, If) and cond_constraints(st.store.cond) is None:
                # a condition on values: every lane computes, and blends (as the vectorizer does)
                try:
                    s = _masked_store(s, substitute_indices(st.store.cond, part.index_map), lane)
                except ScheduleError:
                    continue
            out.append((s, st))
    return out


def check_vector_ops(space, position: int, target, what: str) -> None:
    """ScheduleError when the loop at `position` of `space`, vectorized on `target`, needs a vector
    operation the target has no instruction for."""
    lane = space.dims[position].var
    pairs = _stores(space, lane)
    found = missing_vector_op([s for s, _ in pairs], lane, target)
    if found is None:
        return
    e, k = found
    raise ScheduleError(f"{what}: target {target.name} has no vector instruction for {operation_text(e.op)} on "
                        f"{e.dtype.name} ({e.shape.name} lanes), which {pairs[k][1].describe()} needs; vectorize "
                        f"a loop without it, or leave this one to the C compiler (no vectorize)")
