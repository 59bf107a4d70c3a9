"""The one bridge from affine forms to z3 terms (bounds proofs, dependences, cache privacy)."""
from __future__ import annotations

from typing import Callable

from ..ir.affine import Affine


def z3_affine(a: Affine, term: Callable):
    """`a` as a z3 integer term; `term(v)` gives the z3 term of each variable."""
    import z3

    e = z3.IntVal(a.const)
    for v, c in a.terms:
        x = term(v)
        e = e + (x if c == 1 else c * x)
    return e


def z3_index(e, term: Callable):
    """An index expression (affine, or quasi-affine: see `is_quasi_affine`) as a z3 integer term.

    z3's integer `/` and `%` by a positive constant are floor division and a non-negative
    remainder: exactly Python's (and the generated code's) `//` and `%`.
    """
    import z3

    from ..ir.affine import to_affine
    from ..ir.expr import BinOp, Cast, UnOp, as_int

    a = to_affine(e)
    if a is not None:
        return z3_affine(a, term)
    if isinstance(e, Affine):
        return z3_affine(e, term)
    if isinstance(e, UnOp) and e.op == "neg":
        return -z3_index(e.a, term)
    if isinstance(e, Cast):
        return z3_index(e.value, term)
    if isinstance(e, BinOp):
        if e.op == "add":
            return z3_index(e.a, term) + z3_index(e.b, term)
        if e.op == "sub":
            return z3_index(e.a, term) - z3_index(e.b, term)
        if e.op == "mul":
            c = as_int(e.a)
            return c * z3_index(e.b, term) if c is not None else z3_index(e.a, term) * as_int(e.b)
        if e.op in ("floordiv", "mod"):
            c = as_int(e.b)
            x = z3_index(e.a, term)
            return x / z3.IntVal(c) if e.op == "floordiv" else x % z3.IntVal(c)
    raise ValueError(f"not a quasi-affine index: {e!r}")
