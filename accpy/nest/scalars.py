"""`Scalar`: a runtime scalar argument (Role.INPUT, by value), a constant (a Scalar with a value), or
a scalar held in memory (`MemoryScalar`: Role.INPUT_OUTPUT / OUTPUT arguments, TEMP locals).

As in Accera, `acc.Scalar` is also the type of every scalar value iteration logic computes with:
`isinstance(i, acc.Scalar)` holds for a nest's indices, array elements and expressions such as
`s < 10` (accpy's class for them is logic.Value). Code that needs a scalar *argument* asks
`is_scalar_argument(x)`.
"""
from __future__ import annotations

import numpy as np

from ..errors import LogicError
from ..ir.expr import Const, Var
from ..ir.names import check_name
from ..ir.types import ScalarType
from .array import Array, Dimension, Role
from .handles import LogicValue
from .logic import Access, LogicCapture, Value, lift, record_assignment, scalar_type
from .naming import inferred_or_generated

_MEMORY_ROLES = (Role.INPUT_OUTPUT, Role.OUTPUT, Role.TEMP)


class _ScalarType(type):
    """`isinstance(x, Scalar)`: a Scalar, or any scalar value of iteration logic (an index, an array
    element, an expression), as Accera's Scalar is; arrays and runtime dimensions are not."""

    def __instancecheck__(cls, obj) -> bool:
        if cls is Scalar and isinstance(obj, LogicValue) and not isinstance(obj, (Array, Dimension)):
            return True
        return type.__instancecheck__(cls, obj)


def is_scalar_argument(x) -> bool:
    """Whether `x` is an acc.Scalar object itself (an INPUT argument or a constant), not another
    logic value that `isinstance(x, acc.Scalar)` also accepts."""
    return issubclass(type(x), Scalar)


def _type_and_value(element_type, value, type_):
    if type_ is not None:
        if element_type is not None:
            raise ValueError("Scalar: give the type once (as element_type or as type=)")
        element_type = type_
    if element_type is not None and not isinstance(element_type, ScalarType) and \
            isinstance(element_type, (int, float, np.number)) and not isinstance(element_type, type):
        if value is not None:
            raise ValueError("Scalar: give the value once (as the first argument or as value=)")
        value, element_type = element_type, None
    if value is not None:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"value: expected a number, got {type(value).__name__} {value!r}")
    return element_type, value


class Scalar(Value, metaclass=_ScalarType):
    """`acc.Scalar(element_type=float32, role=Role.INPUT, name="", value=None)` (`type=` is Accera's
    other name for element_type; a number first is the value).

    - INPUT (the default): an argument passed by value; read-only in logic.
    - a value given: a constant, used as a literal of its type (without a type, as the Python number).
    - INPUT_OUTPUT / OUTPUT: an argument passed by pointer, written with `s.set(expr)` in logic:
      `T*` in C, a numpy array of shape (1,) from Python (see MemoryScalar).
    - TEMP: a variable of the function, zero when it starts, never an argument.
    """

    def __new__(cls, element_type=None, role: Role = Role.INPUT, name: str = "", value=None, type=None):
        if cls is Scalar and role in _MEMORY_ROLES:
            element_type, value = _type_and_value(element_type, value, type)
            return MemoryScalar(element_type, role, name, value)
        return super().__new__(cls)

    def __init__(self, element_type=None, role: Role = Role.INPUT, name: str = "", value=None, type=None):
        element_type, value = _type_and_value(element_type, value, type)
        # a constant without a type given is used as the Python number it holds (a literal
        # takes the type of the value it meets); with a type, as a constant of that type
        self.literal = value if element_type is None and isinstance(value, (int, float)) else None
        if value is not None and element_type is None:
            element_type = ScalarType.from_dtype(value.dtype) if isinstance(value, np.number) else \
                ScalarType.int64 if isinstance(value, int) else ScalarType.float32
        t = scalar_type(element_type if element_type is not None else ScalarType.float32)
        if role is not Role.INPUT:
            raise ValueError(f"role: a Scalar is INPUT, INPUT_OUTPUT, OUTPUT or TEMP, got {role!r}"
                             + ("; a constant scalar is one with a value (acc.Scalar(value=...))"
                                if role is Role.CONST else ""))
        if name:
            check_name(name, "name")
        self.name_given = bool(name)
        self.name = name or inferred_or_generated("scalar")
        self.role = role
        self.value = value
        if value is not None:
            # a Scalar with a value is a constant: a literal of its type wherever it is used
            if t.is_int:
                if float(value) != int(value):
                    raise ValueError(f"value: {value!r} is not an integer, but the scalar's type is {t.name}")
                lift(int(value), t)  # checks the range
            super().__init__(Const(value, t))
        else:
            super().__init__(Var(self.name, t))

    @property
    def var(self) -> Var:
        """The IR variable of this scalar argument (ValueError for a constant Scalar, which has a value)."""
        if not isinstance(self._expr, Var):
            raise ValueError(f"Scalar {self.name} has a value ({self.value!r}): it is a constant, not an argument")
        return self._expr  # type: ignore[return-value]

    def set(self, value) -> None:
        """Writing is for scalars held in memory: an INPUT scalar is passed by value (LogicError)."""
        raise LogicError(f"{self.name}.set(...): {self.name} is an INPUT scalar, passed by value and read-only; "
                         f"create it with role=acc.Role.INPUT_OUTPUT (an argument the function updates) or "
                         f"acc.Role.TEMP (a variable of the function) to write it")

    def __repr__(self) -> str:
        return f"Scalar({self.name}: {self.element_type.name})"


class MemoryScalar(Array, Value):
    """A Scalar held in memory: one element, read as a value in logic and written with `s.set(expr)`
    (the last write in the scheduled order wins, as for an array element; the nest's dependences
    are checked as for any array).

    Role.INPUT_OUTPUT or OUTPUT: an argument like an array of one element (`T*` in C; from Python a
    numpy array of shape (1,) that receives the value). Role.TEMP: a variable of the function, zero
    when the function starts, never an argument. It is an acc.Array of shape (1,) for everything
    that takes arguments (args, plan.cache); `isinstance(s, acc.Scalar)` is False for it.
    """

    def __init__(self, element_type, role: Role, name: str = "", value=None):
        if value is not None:
            raise ValueError(f"value: a {role.name} scalar gets its value from the caller or from logic "
                             f"(s.set(...)); a Scalar with a value is an INPUT constant")
        t = scalar_type(element_type if element_type is not None else ScalarType.float32)
        given = bool(name)
        Array.__init__(self, role=role, name=name or inferred_or_generated("scalar"), shape=(1,), element_type=t)
        self.name_given = given

    # Array sets element_type; Value reads it from the expression: an ordinary attribute here
    element_type = property(lambda self: self.__dict__["_element_type"],
                            lambda self, t: self.__dict__.__setitem__("_element_type", t))

    @property
    def expr(self):
        """The element's value where logic reads it (an access to the one element)."""
        return Access(self, (lift(0),)).expr

    def set(self, value) -> None:
        """`s.set(expr)` inside iteration logic: store `expr` (of the scalar's type, or widening to it)."""
        if self.role is Role.INPUT:  # pragma: no cover - roles are checked at creation
            raise LogicError(f"{self.name} is read-only")
        record_assignment(self, (0,), value)

    # outside iteration logic a scalar is an object (`s in args`, `if s:`); inside, a value
    def __eq__(self, o):  # type: ignore[override]
        return Value.__eq__(self, o) if LogicCapture.current() is not None else self is o

    def __ne__(self, o):  # type: ignore[override]
        return Value.__ne__(self, o) if LogicCapture.current() is not None else self is not o

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return Value.__bool__(self) if LogicCapture.current() is not None else True

    def __repr__(self) -> str:
        return f"Scalar({self.name}: {self.role.name} {self.element_type.name})"
