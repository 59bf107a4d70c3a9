"""Vector nodes of the IR: what `vectorize` produces and the x86 intrinsic library emits.

A vector has `lanes` elements of a scalar `dtype`. Memory accesses start at the element
at `indices`, lane l at linear offset +l*stride (stride 1: contiguous; any other constant:
a gather or scatter); `count` (when set) masks the access to its first `count` lanes,
which is how tails stay on the vector path.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Optional

from .expr import Buffer, Expr
from .stmt import Stmt
from .types import ScalarType

_vids = itertools.count(1)


class VExpr(Expr):
    __slots__ = ()
    lanes: int


@dataclass(frozen=True)
class VLoad(VExpr):
    buffer: Buffer
    indices: tuple
    lanes: int
    count: Optional[Expr] = None  # masked: only the first `count` lanes are read (others are 0)
    stride: int = 1  # elements between lanes (not 1: a gather; 0: the 32 bits at the address in every slot)
    # a dot product's operand read as groups of `group` elements (a 32-bit slot) of which only the
    # first `part` are read, the others 0 (0: all); with stride 0, `part` elements at the address
    group: int = 1
    part: int = 0

    @property
    def dtype(self) -> ScalarType:  # type: ignore[override]
        return self.buffer.dtype


@dataclass(frozen=True)
class Broadcast(VExpr):
    value: Expr
    lanes: int

    @property
    def dtype(self) -> ScalarType:  # type: ignore[override]
        return self.value.dtype


@dataclass(frozen=True)
class VBinOp(VExpr):
    """Lane-wise arithmetic (add sub mul div min max and or xor). Comparisons give masks."""

    op: str
    a: Expr
    b: Expr
    dtype: ScalarType
    lanes: int


@dataclass(frozen=True)
class VFma(VExpr):
    """a * b + c, lane-wise, one rounding (op "fma"); or, op "dot4" / "dot2", c plus each lane's
    dot product of the quads (pairs) of narrow elements a and b hold in its slot (VPDPBUSD:
    uint8 a, int8 b; VDPBF16PS: bfloat16)."""

    a: Expr
    b: Expr
    c: Expr
    dtype: ScalarType
    lanes: int
    op: str = "fma"


@dataclass(frozen=True)
class VCall(VExpr):
    fn: str  # sqrt abs neg
    args: tuple
    dtype: ScalarType
    lanes: int


@dataclass(frozen=True)
class VCast(VExpr):
    value: Expr
    dtype: ScalarType
    lanes: int


@dataclass(frozen=True)
class VSelect(VExpr):
    """Lane-wise `cond ? a : b`; cond is a comparison VBinOp of the operands' type."""

    cond: Expr
    a: Expr
    b: Expr
    lanes: int

    @property
    def dtype(self) -> ScalarType:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, eq=False)
class VVar(VExpr):
    """A vector register variable (accumulators, caches promoted to registers)."""

    name: str
    dtype: ScalarType
    lanes: int
    uid: int = field(default_factory=lambda: next(_vids))


@dataclass(frozen=True)
class HReduce(Expr):
    """The scalar reduction (add mul min max) of a vector's lanes."""

    op: str
    value: Expr

    @property
    def dtype(self) -> ScalarType:  # type: ignore[override]
        return self.value.dtype


@dataclass(frozen=True)
class VStore(Stmt):
    buffer: Buffer
    indices: tuple
    value: Expr
    lanes: int
    count: Optional[Expr] = None  # masked: only the first `count` lanes are written
    stride: int = 1  # elements between lanes (not 1: a scatter; never 0)


@dataclass(frozen=True)
class VAssign(Stmt):
    var: VVar
    value: Expr


@dataclass(frozen=True)
class VDecl(Stmt):
    """Declares vector registers for the extent of `body` (uninitialised)."""

    vars: tuple
    body: Stmt


@dataclass(frozen=True)
class VMask(VExpr):
    """The lane mask selecting the first `count` lanes of a `lanes` x `dtype` vector."""

    count: Expr
    lanes: int
    of: ScalarType  # the element type of the vectors it masks

    @property
    def dtype(self) -> ScalarType:  # type: ignore[override]
        return ScalarType.bool
