"""Boolean conditions of the IR: negation (comparisons of integers flip), conjunctions."""
from __future__ import annotations

from typing import Optional

from .expr import BinOp, Const, Expr, UnOp
from .types import ScalarType

_FLIP = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def negate(e: Expr) -> Expr:
    """`not e` for a boolean expression; comparisons of integers flip (`i < 4` -> `i >= 4`), so
    that an ElseIf / Else on indices stays affine (floats keep `not`: NaN compares false both ways)."""
    if isinstance(e, Const) and e.dtype is ScalarType.bool:
        return Const(not e.value, ScalarType.bool)
    if isinstance(e, BinOp) and e.op in _FLIP and not e.a.dtype.is_float:
        return BinOp(_FLIP[e.op], e.a, e.b, ScalarType.bool)
    if isinstance(e, UnOp) and e.op == "not":
        return e.a
    return UnOp("not", e, ScalarType.bool)


def conjuncts(e: Optional[Expr]) -> list:
    """The operands of a chain of `land` (one item for anything else; none for None)."""
    if e is None:
        return []
    if isinstance(e, BinOp) and e.op == "land":
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def conjunction(es) -> Optional[Expr]:
    """`e1 and e2 and ...` (None for no operand)."""
    out = None
    for e in es:
        out = e if out is None else BinOp("land", out, e, ScalarType.bool)
    return out
