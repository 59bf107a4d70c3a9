"""Scalars held in memory (`MemoryScalar`: Role.INPUT_OUTPUT / OUTPUT arguments, TEMP locals), which
`acc.Scalar(type, role)` makes for those roles; `Scalar` itself (INPUT arguments, constants) is in array.py.

As in Accera, `acc.Scalar` is also the type of every scalar value iteration logic computes with:
`isinstance(i, acc.Scalar)` holds for a nest's indices, array elements and expressions such as
`s < 10` (accpy's class for them is logic.Value). Code that needs a scalar *argument* asks
`is_scalar_argument(x)`.
"""
from __future__ import annotations

from ..errors import LogicError
from ..ir.types import ScalarType
from .array import Array, Role, Scalar
from .logic import Access, LogicCapture, Value, lift, record_assignment, scalar_type
from .naming import inferred_or_generated


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
    @property
    def element_type(self):
        """The scalar's element type (an acc.ScalarType)."""
        return self.__dict__["_element_type"]

    @element_type.setter
    def element_type(self, t) -> None:
        self.__dict__["_element_type"] = t

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


Scalar._memory_class = MemoryScalar
