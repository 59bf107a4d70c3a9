"""Statement nodes of the loop IR (close to C): loops, guards, stores, allocations, calls."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .expr import Buffer, Expr, Node, Var
from .kinds import LoopKind


class Stmt(Node):
    __slots__ = ()


# Reduction operators of a compound assignment `A[..] op= value`.
REDUCE_OPS = ("add", "sub", "mul", "div", "max", "min", "and", "or", "xor")


@dataclass(frozen=True)
class Store(Stmt):
    """`buffer[indices] = value`, or `buffer[indices] = buffer[indices] <reduce> value`."""

    buffer: Buffer
    indices: tuple
    value: Expr
    reduce: Optional[str] = None


LOOP_KINDS = tuple(LoopKind)


@dataclass(frozen=True)
class For(Stmt):
    """`for var in [lo, hi)`. `attrs` carries pass-specific annotations as (key, value) pairs."""

    var: Var
    lo: Expr
    hi: Expr
    body: Stmt
    kind: LoopKind = LoopKind.SERIAL
    attrs: tuple = ()

    def attr(self, key, default=None):
        for k, v in self.attrs:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: Stmt
    orelse: Optional[Stmt] = None


@dataclass(frozen=True)
class Block(Stmt):
    stmts: tuple = ()


@dataclass(frozen=True)
class Alloc(Stmt):
    """A buffer that lives for the extent of `body`; zero-filled when `zero` is set."""

    buffer: Buffer
    body: Stmt
    zero: bool = True


@dataclass(frozen=True)
class Evaluate(Stmt):
    """An expression evaluated for its effect (an intrinsic call)."""

    value: Expr


@dataclass(frozen=True)
class Prefetch(Stmt):
    """A hint: bring the cache line of `buffer`'s element at flat element `offset` closer to the
    core (`write`: for a store; `locality` 0-3, as __builtin_prefetch's). No effect on results, and
    never a fault: the address may lie past the buffer's end (loop bounds are not checked)."""

    buffer: Buffer
    offset: Expr
    write: bool = False
    locality: int = 3


@dataclass(frozen=True)
class Comment(Stmt):
    text: str = ""


def block(*stmts) -> Stmt:
    """A Block of the given statements, flattening nested blocks and dropping empties."""
    out: list = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Block):
            out.extend(s.stmts)
        elif isinstance(s, (list, tuple)):
            inner = block(*s)
            out.extend(inner.stmts if isinstance(inner, Block) else [inner])
        else:
            out.append(s)
    if len(out) == 1:
        return out[0]
    return Block(tuple(out))


@dataclass(frozen=True)
class Function:
    """A lowered function: named arguments (buffers or scalar vars) and a body."""

    name: str
    args: tuple  # of Buffer | Var
    body: Stmt
    attrs: dict = field(default_factory=dict, compare=False)
