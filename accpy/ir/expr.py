"""Expression nodes of the IR: immutable, typed, compared structurally (buffers by identity)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .kinds import BufferRole, HostMemory
from .types import ScalarType

_uids = itertools.count(1)


class Node:
    """Base of every IR node (expressions and statements)."""

    __slots__ = ()


class Expr(Node):
    __slots__ = ()
    dtype: ScalarType


@dataclass(frozen=True, eq=False)
class Buffer:
    """A named n-D memory region: a function argument, a constant, a temporary or a cache.

    `strides` are in elements. `group` > 1: the rows of the second-to-last dimension are kept in
    groups of `group` interleaved into the last one (grouped order: element [.., r, c] sits at
    (r // group) * strides[-2] + c * strides[-1] + r % group, with strides[-1] == group); see
    `element_offset`. `panel` > 1: the columns are cut into panels of `panel`, each panel's
    (group) rows one after another (strides[-2] == panel * group), the panels `panel_stride`
    elements apart. Identity, not structure, makes two buffers the same.
    """

    name: str
    dtype: ScalarType
    shape: tuple  # of Expr
    strides: tuple  # of Expr
    role: BufferRole = BufferRole.TEMP
    memory: str = HostMemory.GLOBAL  # a HostMemory, or the name of a target library's Memory
    data: Optional[np.ndarray] = field(default=None, repr=False)
    group: int = 1
    panel: int = 1
    panel_stride: int = 0
    uid: int = field(default_factory=lambda: next(_uids))

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Buffer({self.name}:{self.dtype.name}{list(self.shape)})"


@dataclass(frozen=True)
class Const(Expr):
    value: Any
    dtype: ScalarType = ScalarType.index

    def __post_init__(self):
        v = self.value
        if self.dtype.is_float:
            object.__setattr__(self, "value", float(v))
        elif self.dtype is ScalarType.bool:
            object.__setattr__(self, "value", bool(v))
        else:
            object.__setattr__(self, "value", int(v))


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A loop counter, a runtime size or a scalar argument.

    Each Var is distinct (identity equality, like a declaration): two loops named `i`
    are different variables. `uid` gives a stable order for printing and hashing.
    """

    name: str
    dtype: ScalarType = ScalarType.index
    uid: int = field(default_factory=lambda: next(_uids))

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Load(Expr):
    buffer: Buffer
    indices: tuple

    @property
    def dtype(self) -> ScalarType:  # type: ignore[override]
        return self.buffer.dtype


ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "pow")
BIT_OPS = ("and", "or", "xor", "shl", "shr")
CMP_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("land", "lor")


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: ScalarType


@dataclass(frozen=True)
class UnOp(Expr):
    op: str  # neg | not | invert
    a: Expr
    dtype: ScalarType


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    @property
    def dtype(self) -> ScalarType:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True)
class Cast(Expr):
    value: Expr
    dtype: ScalarType


@dataclass(frozen=True)
class Call(Expr):
    """A pure math function (sqrt, exp, ...) or an intrinsic with a value."""

    fn: str
    args: tuple
    dtype: ScalarType


# -- small constructors used all over the compiler ------------------------------------

def const(v, dtype: ScalarType = ScalarType.index) -> Const:
    return Const(v, dtype)


def as_int(e) -> Optional[int]:
    """The integer value of a constant expression (or a Python int), else None."""
    if isinstance(e, (int, np.integer)) and not isinstance(e, bool):
        return int(e)
    if isinstance(e, Const) and not e.dtype.is_float:
        return int(e.value)
    return None


def to_expr(v) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, (int, np.integer)):
        return Const(int(v), ScalarType.index)
    raise TypeError(f"cannot use {v!r} as an index expression")


def _fold(op: str, a: int, b: int) -> Optional[int]:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "floordiv" and b != 0:
        return a // b
    if op == "mod" and b != 0:
        return a % b
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    return None


def idx_op(op: str, a, b) -> Expr:
    """Build an index-typed binary op, folding constants and trivial identities."""
    a, b = to_expr(a), to_expr(b)
    ca, cb = as_int(a), as_int(b)
    if ca is not None and cb is not None:
        r = _fold(op, ca, cb)
        if r is not None:
            return Const(r, ScalarType.index)
    if op == "add":
        if ca == 0:
            return b
        if cb == 0:
            return a
    elif op == "sub":
        if cb == 0:
            return a
    elif op == "mul":
        if ca == 1:
            return b
        if cb == 1:
            return a
        if ca == 0 or cb == 0:
            return Const(0, ScalarType.index)
    elif op in ("floordiv",):
        if cb == 1:
            return a
    return BinOp(op, a, b, ScalarType.index)
