"""Scalar functions usable inside iteration logic (`acc.max`, `acc.sqrt`, `acc.cast`, ...)."""
from __future__ import annotations

from ..errors import LogicError
from ..ir.expr import BinOp, Call, UnOp
from ..ir.types import ScalarType
from .logic import Value, _coerce, _operand_types, binary, cast, lift, select

__all__ = ["max", "min", "abs", "sqrt", "exp", "fast_exp", "fast_exp_mlas", "remainderf", "type_size_bytes", "log",
           "log2", "log10", "tanh", "sin",
           "cos", "tan", "sinh", "cosh", "floor", "ceil", "round", "cast", "select",
           "logical_and", "logical_or", "logical_not"]

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
    from .logic import scalar_type

    st = scalar_type(t, "type")
    return 8 if st is ScalarType.index else max(1, st.bits // 8)


def _bool(x) -> Value:
    v = lift(x)
    if v.element_type is not ScalarType.bool:
        raise LogicError(f"a logical operation needs boolean operands, got {v.element_type.name}")
    return v


def logical_and(a, b) -> Value:
    """`acc.logical_and(a, b)`: both boolean conditions hold."""
    a, b = _bool(a), _bool(b)
    return Value(BinOp("land", a.expr, b.expr, ScalarType.bool))


def logical_or(a, b) -> Value:
    """`acc.logical_or(a, b)`: either boolean condition holds."""
    a, b = _bool(a), _bool(b)
    return Value(BinOp("lor", a.expr, b.expr, ScalarType.bool))


def logical_not(a) -> Value:
    """`acc.logical_not(a)`: the boolean condition does not hold."""
    a = _bool(a)
    return Value(UnOp("not", a.expr, ScalarType.bool))


# keep the imported helpers referenced for linters
_ = (_coerce, _operand_types, cast, select)
