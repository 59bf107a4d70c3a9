"""Scalar functions usable inside iteration logic (`acc.max`, `acc.sqrt`, `acc.cast`, ...)."""
from __future__ import annotations

from ..errors import LogicError
from ..ir.expr import BinOp, Call, Cast, Const, UnOp
from ..ir.types import ScalarType
from .logic import Value, _coerce, _operand_types, binary, cast, lift, scalar_type, select

__all__ = ["max", "min", "abs", "sqrt", "exp", "fast_exp", "fast_exp_mlas", "remainderf", "type_size_bytes", "log",
           "log2", "log10", "tanh", "sin",
           "cos", "tan", "sinh", "cosh", "floor", "ceil", "round", "cast", "select",
           "logical_and", "logical_or", "logical_not", "as_index"]

_builtin_max, _builtin_min, _builtin_abs, _builtin_round = max, min, abs, round


def max(a, b) -> Value:  # noqa: A001 - Accera's name
    """`acc.max(a, b)`: the larger of two values (Python's max when neither is a logic value)."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return _builtin_max(a, b)
    return binary("max", a, b)


def min(a, b) -> Value:  # noqa: A001
    """`acc.min(a, b)`: the smaller of two values (Python's min when neither is a logic value)."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        return _builtin_min(a, b)
    return binary("min", a, b)


def abs(a) -> Value:  # noqa: A001
    """`acc.abs(a)`: the absolute value, of the operand's type (Python's abs outside logic)."""
    return _builtin_abs(a)  # a Value's __abs__ builds the logic (logic.py)


def _float_fn(name: str):
    def fn(a) -> Value:
        v = lift(a)
        if not v.element_type.is_float:
            raise LogicError(f"acc.{name} needs a floating-point operand, got {v.element_type.name}; "
                             f"use acc.cast(x, acc.ScalarType.float32)")
        return Value(Call(name, (v.expr,), v.element_type))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} of a floating-point value (same type as its operand)."
    return fn


sqrt = _float_fn("sqrt")
exp = _float_fn("exp")
# Accera's faster exponentials: in C libm's exp, in vector code a shorter polynomial (x86_math.py)
fast_exp = _float_fn("fast_exp")
fast_exp_mlas = _float_fn("fast_exp_mlas")
log = _float_fn("log")
log2 = _float_fn("log2")
log10 = _float_fn("log10")
tanh = _float_fn("tanh")
sin = _float_fn("sin")
cos = _float_fn("cos")
tan = _float_fn("tan")
sinh = _float_fn("sinh")
cosh = _float_fn("cosh")
floor = _float_fn("floor")
ceil = _float_fn("ceil")
round = _float_fn("round")  # noqa: A001 - rounds half to even, like numpy.rint


def remainderf(a, b) -> Value:
    """`acc.remainderf(a, b)`: IEEE remainder `a - n b`, n the integer nearest a / b (ties to even),
    as C's remainder / remainderf (float operands of one type)."""
    a, b, t = _operand_types("remainderf", a, b)
    if not t.is_float:
        raise LogicError(f"acc.remainderf needs floating-point operands, got {t.name}")
    return Value(Call("remainder", (_coerce(a, t), _coerce(b, t)), t))


def type_size_bytes(t) -> int:
    """`acc.type_size_bytes(type)`: the size of one element of `type` in bytes."""
    st = scalar_type(t, "type")
    return 8 if st is ScalarType.index else max(1, st.bits // 8)


def _truth(x, what: str) -> tuple:
    """(the operand as a logic Value, its truth as a boolean IR expression): a bool as it is, a
    number as `x != 0` (Accera's logical operations take integers and test them against zero)."""
    v = lift(x)
    t = v.element_type
    if t is ScalarType.bool:
        return v, v.expr
    if t.is_int or t.is_float or t is ScalarType.index:
        return v, BinOp("ne", v.expr, Const(0 if not t.is_float else 0.0, t), ScalarType.bool)
    raise LogicError(f"{what} needs boolean or numeric operands, got {t.name}")


def _as_type_of(cond, t: ScalarType) -> Value:
    """A boolean result in the type of the first operand (1 or 0 for numbers), as Accera returns it."""
    return Value(cond if t is ScalarType.bool else Cast(cond, t))


def _binary_logical(name: str, op: str, a, b) -> Value:
    literal_a = not isinstance(a, Value)
    va, ca = _truth(a, f"acc.{name}")
    vb, cb = _truth(b, f"acc.{name}")
    t = vb.element_type if literal_a and isinstance(b, Value) else va.element_type
    return _as_type_of(BinOp(op, ca, cb, ScalarType.bool), t)


def logical_and(a, b) -> Value:
    """`acc.logical_and(a, b)`: whether both operands are true (non-zero). With boolean operands
    a condition; with a number first, that number's type holding 1 or 0 (as Accera returns it)."""
    return _binary_logical("logical_and", "land", a, b)


def logical_or(a, b) -> Value:
    """`acc.logical_or(a, b)`: whether either operand is true (non-zero); typed as logical_and."""
    return _binary_logical("logical_or", "lor", a, b)


def logical_not(a) -> Value:
    """`acc.logical_not(a)`: whether the operand is false (zero): a condition for a boolean operand,
    else 1 or 0 in the operand's type (as Accera returns it)."""
    v, c = _truth(a, "acc.logical_not")
    return _as_type_of(UnOp("not", c, ScalarType.bool), v.element_type)


def as_index(value) -> Value:
    """`acc.as_index(n)`: the integer `n` as an index-typed constant (Accera's helper for conditions
    such as `i < acc.as_index(M)`)."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"as_index: expected an integer, got {type(value).__name__} {value!r}")
    return cast(int(value), ScalarType.index)


# keep the imported helpers referenced for linters
_ = (_coerce, _operand_types, cast, select)
