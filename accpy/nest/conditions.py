"""Conditionals in iteration logic: Accera's `_If(cond, fn).ElseIf(cond, fn).Else(fn)`.

A branch function runs once, at capture, with its condition in force: every statement it
records carries the conjunction of the conditions around it (an ElseIf's or Else's includes
the negations of the conditions tried before it). Conditions on indices alone become guards
the scheduler splits loop ranges on (lower/scan.py); others stay an `If` in the loop IR.
"""
from __future__ import annotations

from typing import Optional

from ..errors import LogicError
from ..ir.boolean import negate
from ..ir.expr import BinOp, Const, Expr, Load, UnOp
from ..ir.types import ScalarType
from ..ir.visitor import nodes_of
from .logic import LogicCapture, Value, lift, pending_and_or

def _logical(e: Expr) -> Expr:
    """`&` / `|` of booleans as the logical `and` / `or` (what they mean on conditions)."""
    if isinstance(e, BinOp) and e.dtype is ScalarType.bool and e.op in ("and", "or", "land", "lor"):
        return BinOp("land" if e.op in ("and", "land") else "lor", _logical(e.a), _logical(e.b), ScalarType.bool)
    return e


def condition_expr(cond, what: str) -> Expr:
    """A branch condition as a boolean IR expression (LogicError for anything else)."""
    cond = pending_and_or(cond)
    try:
        v = lift(cond)
    except LogicError as err:
        raise LogicError(f"{what}: the condition must be a boolean logic value (a comparison); {err}") from None
    if v.element_type is not ScalarType.bool:
        raise LogicError(f"{what}: the condition must be a boolean logic value (a comparison such as "
                         f"`i < 4` or `A[i] > 0`), got a {v.element_type.name} value")
    return _logical(v.expr)


class _Chain:
    """The buffers an If/ElseIf/Else chain's conditions read and its statements write so far."""

    def __init__(self):
        self.reads: set = set()
        self.written: dict = {}  # buffer -> statement description

    def note_condition(self, e: Expr) -> None:
        self.reads.update(n.buffer for n in nodes_of(e, Load))


class CondFrame:
    """One condition in force while a branch function runs."""

    def __init__(self, expr: Expr, chain: _Chain):
        self.expr = expr
        self.chain = chain


def _constant(e: Expr) -> Optional[bool]:
    """The value of a condition made of constants only, else None."""
    import operator

    if isinstance(e, Const):
        return bool(e.value)
    ops = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
           "ne": operator.ne}
    if isinstance(e, BinOp) and isinstance(e.a, Const) and isinstance(e.b, Const) and e.op in ops:
        return ops[e.op](e.a.value, e.b.value)
    if isinstance(e, BinOp) and e.op in ("land", "lor"):
        a, b = _constant(e.a), _constant(e.b)
        if a is None or b is None:
            return None
        return (a and b) if e.op == "land" else (a or b)
    if isinstance(e, UnOp) and e.op == "not":
        a = _constant(e.a)
        return None if a is None else not a
    return None


class If:
    """`_If(cond, fn)`: run `fn`'s statements where `cond` holds; `.ElseIf(cond, fn)` and
    `.Else(fn)` add branches taken where no earlier condition of the chain holds."""

    def __init__(self, cond, fn):
        self._prior: list = []
        self._chain = _Chain()
        self._done = False  # an Else was given
        self._taken = False  # outside logic: a constant condition held
        self._branch(cond, fn, "_If")

    def ElseIf(self, cond, fn) -> "If":  # noqa: N802 - Accera's name
        """Another branch: `fn` where `cond` holds and no earlier condition does."""
        if self._done:
            raise LogicError("ElseIf: this _If chain already ended with Else")
        self._branch(cond, fn, "ElseIf")
        return self

    def Else(self, fn) -> "If":  # noqa: N802 - Accera's name
        """The last branch: `fn` where no condition of the chain holds."""
        if self._done:
            raise LogicError("Else: this _If chain already ended with Else")
        self._branch(None, fn, "Else")
        self._done = True
        return self

    def _branch(self, cond, fn, what: str) -> None:
        if not callable(fn):
            raise TypeError(f"{what}: expected a function to run (the branch's logic), got {type(fn).__name__}")
        c = condition_expr(cond, what) if cond is not None else None
        cap = LogicCapture.current()
        if cap is None:
            # outside iteration logic only constant conditions can be decided (Accera's scalar tests)
            value = True if c is None else _constant(c)
            if value is None:
                raise LogicError(f"{what}: a condition on logic values is only meaningful inside a function "
                                 f"decorated with @nest.iteration_logic")
            if value and not self._taken:
                self._taken = True
                fn()
            return
        terms = [negate(p) for p in self._prior] + ([c] if c is not None else [])
        for t in terms:
            self._chain.note_condition(t)
        frames = [CondFrame(t, self._chain) for t in terms]
        cap.cond_stack.extend(frames)
        try:
            fn()
        finally:
            del cap.cond_stack[len(cap.cond_stack) - len(frames):]
        if c is not None:
            self._prior.append(c)

    def __repr__(self) -> str:
        return f"_If({len(self._prior)} condition(s){', Else' if self._done else ''})"


__all__ = ["If", "condition_expr", "CondFrame"]
