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
