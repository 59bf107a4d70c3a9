"""The one bridge from affine forms to z3 terms (bounds proofs, dependences, cache privacy, the
ranges of `//` and `%` subscripts)."""
from __future__ import annotations

from typing import Callable

from ..errors import ScheduleError
from ..ir.affine import Affine, is_quasi_affine, to_affine
from ..ir.expr import BinOp, Cast, UnOp, as_int
from .polyhedra import ConstraintSet


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


def quasi_range(ix, cons: ConstraintSet, name: str, k: int) -> tuple:
    """(min, max) of a quasi-affine subscript over a constraint set (z3), or ScheduleError."""
    import z3

    if not is_quasi_affine(ix):
        raise ScheduleError(f"cache of {name}: subscript {k} is not affine")
    zv: dict = {}

    def term(v):
        if v not in zv:
            zv[v] = z3.Int(f"{v.name}#{v.uid}")
        return zv[v]

    out = []
    for minimize in (True, False):
        opt = z3.Optimize()
        opt.set("timeout", 5000)
        for c in cons.cons:
            opt.add(z3_affine(c, term) >= 0)
        e = z3_index(ix, term)
        h = opt.minimize(e) if minimize else opt.maximize(e)
        if opt.check() != z3.sat:
            raise ScheduleError(f"cache of {name}: could not bound subscript {k} (a `//` or `%` index)")
        v = (opt.lower(h) if minimize else opt.upper(h))
        if not z3.is_int_value(v):
            raise ScheduleError(f"cache of {name}: subscript {k} (a `//` or `%` index) is unbounded over "
                                f"the cache's block; cache at an index whose loops have constant extents")
        out.append(v.as_long())
    return out[0], out[1]
