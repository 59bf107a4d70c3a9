"""Preconditions of a function on its index arguments (values given to it that size nothing, such
as the position of a tile in a larger array): the accesses using them are in bounds exactly when
affine constraints on the arguments hold. The function checks them when it is called from C or
Python, and a function calling it proves them for every call (accpy/package/calls.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import LogicError
from ..ir.affine import Affine, to_affine


@dataclass(frozen=True)
class Precondition:
    """`constraint >= 0` over the function's index arguments and sizes, and why it is needed."""

    constraint: Affine
    why: str  # e.g. "index 0 of B (`i + k0`) >= 0 for every iteration"


def _corner(a: Affine, nest) -> tuple:
    """(smallest, largest) value of `a` over the nest's box, as Affines of the other variables."""
    ext = {v: to_affine(e) for v, e in zip(nest.index_vars, nest.extents)}
    lo = hi = Affine([(v, c) for v, c in a.terms if v not in ext], a.const)
    for v, c in a.terms:
        if v in ext:
            span = (ext[v] - 1) * c
            if c > 0:
                hi = hi + span
            else:
                lo = lo + span
    return lo, hi


def split_positional(nest, pending, symbols) -> tuple:
    """(the bounds obligations to prove for every value of the sizes, the preconditions): an access
    index using an index argument becomes two preconditions (its smallest value over the nest >= 0,
    its largest < the size), exact for the nest's box."""
    loop = set(nest.index_vars)
    rest, out = [], []
    for st, buf, affs, where in pending:
        positional = [k for k, a in enumerate(affs)
                      if any(v not in loop and v not in symbols for v in getattr(a, "vars", ()))]
        if not positional:
            rest.append((st, buf, affs, where))
            continue
        if where != [[]]:
            raise LogicError(f"{st.describe()}: an index of {buf.name} uses an index argument under an _If "
                             f"condition; accpy does not build that (its bounds are preconditions of the function "
                             f"over the whole nest)")
        for k in positional:
            lo, hi = _corner(affs[k], nest)
            size = to_affine(buf.shape[k])
            text = f"index {k} of {buf.name} (`{affs[k]}`)"
            out.append(Precondition(lo, f"{text} >= 0 at every iteration ({st.describe()})"))
            out.append(Precondition(size - 1 - hi, f"{text} < {size} at every iteration ({st.describe()})"))
        kept = [Affine.constant(0) if k in positional else a for k, a in enumerate(affs)]
        rest.append((st, buf, kept, where))
    return rest, out
