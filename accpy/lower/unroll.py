"""Unroll: replace loops marked for unrolling by copies of their body.

Guarantees afterwards: every loop marked `unrolled` whose trip count is a compile-time
constant is gone (its copies follow each other in order); loops marked with a skew's
`unroll_loops_smaller_than` threshold are unrolled when their constant trip count is
below it. A marked loop with a runtime trip count stays a loop with an unroll hint.
`unroll_subtree` unrolls every loop inside a vectorized loop (for accpy/lower/vectorize.py).
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.kinds import LoopKind
from ..ir.affine import to_affine
from ..ir.kinds import MAX_UNROLLED_COPIES
from ..ir.expr import BinOp, Const
from ..ir.stmt import For, block
from ..ir.types import ScalarType
from ..ir.visitor import Mutator, substitute
from .simplify import simplify



def unroll(stmt, kinds: dict, below: dict):
    """`kinds`: loop var -> "unrolled"; `below`: loop var -> threshold (skew)."""
    return _Unroll(kinds, below).visit(stmt)


class _Unroll(Mutator):
    def __init__(self, kinds, below):
        self.kinds, self.below = kinds, below
        self.copies = 0

    def visit_For(self, f: For):
        want = self.kinds.get(f.var) == "unrolled" or f.kind == LoopKind.UNROLLED
        threshold = self.below.get(f.var)
        trip = to_affine(BinOp("sub", f.hi, f.lo, ScalarType.index))
        lo = to_affine(f.lo)
        const = trip is not None and trip.is_const and lo is not None and lo.is_const
        if const and (want or (threshold is not None and trip.const < threshold)):
            n = max(trip.const, 0)
            self.copies += n
            if self.copies > MAX_UNROLLED_COPIES:
                raise ScheduleError(
                    f"unrolling loop {f.var.name} would emit more than {MAX_UNROLLED_COPIES} copies of its body; "
                    f"split it first and unroll the inner index")
            return block(*[self.visit(simplify(substitute(f.body, {f.var: Const(lo.const + k)})))
                           for k in range(n)])
        body = self.visit(f.body)
        kind = "unrolled" if want else f.kind
        if body is f.body and kind == f.kind:
            return f
        return For(f.var, f.lo, f.hi, body, kind, f.attrs)


def unroll_subtree(body, what: str):
    """`body` with every loop in it fully unrolled, copies in loop order: the body of a
    vectorized loop, whose inner loops run statement instance by statement instance on
    the vector lanes. Raises ScheduleError (prefixed by `what`) when a loop's trip count is
    not a compile-time constant or the copies would exceed MAX_UNROLLED_COPIES."""
    return _UnrollAll(what).visit(body)


class _UnrollAll(Mutator):
    def __init__(self, what: str):
        self.what = what
        self.copies = 0

    def visit_For(self, f: For):
        trip = to_affine(simplify(BinOp("sub", f.hi, f.lo, ScalarType.index)))
        if trip is None or not trip.is_const:
            raise ScheduleError(f"{self.what}: the loop over {f.var.name} is inside it and runs a number of "
                                f"iterations that is not a compile-time constant; the loops inside a "
                                f"vectorized loop are unrolled, so their trip counts must be constants")
        n = max(trip.const, 0)
        self.copies += n
        if self.copies > MAX_UNROLLED_COPIES:
            raise ScheduleError(f"{self.what}: unrolling the loops inside it would emit more than "
                                f"{MAX_UNROLLED_COPIES} statement copies; split them and vectorize an inner index")
        # the lower bound may be any expression of outer loops (a tile origin): each copy is lo + k
        return block(*[self.visit(simplify(substitute(f.body, {f.var: _plus(f.lo, k)}))) for k in range(n)])


def _plus(e, k: int):
    return e if k == 0 else BinOp("add", e, Const(k), ScalarType.index)
