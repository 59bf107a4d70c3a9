"""Checks of captured iteration logic: roles, affine indices, and in-bounds accesses.

Bounds are *proved* with z3 over the whole iteration domain (runtime dimensions
included, as unknowns >= 1); a failure names the statement and a concrete iteration.
"""
from __future__ import annotations

from typing import Optional

from ..errors import InputWriteError, InputWriteWarning, LogicError
from ..ir.affine import Affine, cond_constraints, is_quasi_affine, to_affine
from ..ir.boolean import conjunction, conjuncts, negate
from ..ir.expr import BinOp, Const, UnOp
from ..ir.kinds import BufferRole
from ..ir.printer import expr_str
from ..ir.types import ScalarType
from ..ir.visitor import accesses, free_vars
from .preconditions import split_positional
from .smt import z3_affine, z3_index


def accesses_of(store) -> list:
    """(buffer, indices, is_write) for the store target and every load in it (and in the
    condition of a statement under an _If)."""
    out = []
    for a in accesses(store):
        out.append((a.buffer, a.indices, a.is_write))
        if a.is_write and getattr(a.node, "reduce", None) is not None:
            out.append((a.buffer, a.indices, False))  # a reduction reads its element too
    return out


def statement_constraints(st, nest_vars, symbols) -> list:
    """The index conditions a statement runs under, as a disjunction (a list) of conjunctions of
    Affines >= 0 over the nest's indices and runtime sizes: the parts of its _If conditions that
    the scheduler turns into loop bounds (see `split_condition`). [[]] when there is none."""
    if st.cond is None:
        return [[]]

    # the same variables scan and the dependence test allow: what the proof assumes is a guard there
    allowed = set(nest_vars) | {v for v in free_vars(st.cond) if v.dtype is ScalarType.index}
    return split_condition(st.cond, allowed)[0]


# at most this many disjoint pieces per statement become guards (the rest stays an If)
MAX_GUARD_PIECES = 8


def split_condition(cond, allowed) -> tuple:
    """(pieces, rest): `cond` == (OR of the conjunctions in `pieces`) and `rest`, where `pieces`
    are disjoint conjunctions of affine constraints (Affine >= 0) on the `allowed` variables, made
    of the conjuncts of `cond` that are comparisons of indices and sizes (`!=`, `or` and negations
    included), and `rest` the conjunction of the other conjuncts (None when there is none)."""
    pieces, rest = [[]], []
    for c in conjuncts(cond):
        d = _affine_dnf(c, allowed)
        if d is None or len(pieces) * len(d) > MAX_GUARD_PIECES:
            rest.append(c)
            continue
        pieces = [p + q for p in pieces for q in d]
    return pieces, conjunction(rest)


def _affine_dnf(e, allowed) -> Optional[list]:
    """`e` as a list of disjoint conjunctions of affine constraints, or None."""
    if isinstance(e, Const):
        return [[]] if e.value else []
    if isinstance(e, UnOp) and e.op == "not":
        inner = e.a
        if isinstance(inner, BinOp) and inner.op in ("land", "lor"):
            op = "lor" if inner.op == "land" else "land"
            return _affine_dnf(BinOp(op, negate(inner.a), negate(inner.b), inner.dtype), allowed)
        n = negate(inner)
        return None if isinstance(n, UnOp) else _affine_dnf(n, allowed)
    if not isinstance(e, BinOp):
        return None
    if e.op == "land":
        a, b = _affine_dnf(e.a, allowed), _affine_dnf(e.b, allowed)
        if a is None or b is None or len(a) * len(b) > MAX_GUARD_PIECES:
            return None
        return [x + y for x in a for y in b]
    if e.op == "lor":  # a or (not a and b): disjoint
        a, na, b = _affine_dnf(e.a, allowed), _affine_dnf(negate(e.a), allowed), _affine_dnf(e.b, allowed)
        if a is None or na is None or b is None or len(a) + len(na) * len(b) > MAX_GUARD_PIECES:
            return None
        return a + [x + y for x in na for y in b]
    if e.op == "ne":
        if e.a.dtype.is_float:
            return None
        return _affine_dnf(BinOp("lor", BinOp("lt", e.a, e.b, e.dtype), BinOp("gt", e.a, e.b, e.dtype), e.dtype),
                           allowed)
    if e.op in ("lt", "le", "gt", "ge", "eq") and not e.a.dtype.is_float:
        cs = cond_constraints(e)
        if cs is not None and all(v in allowed for a in cs for v in a.vars):
            return [cs]
    return None


def guard_formula(pieces, zaff):
    """The z3 formula `OR of (AND of c >= 0)` of `split_condition`'s pieces."""
    import z3

    if pieces == [[]]:
        return z3.BoolVal(True)
    return z3.Or(*[z3.And(*[zaff(c) >= 0 for c in p]) for p in pieces]) if pieces else z3.BoolVal(False)


def _promote_input(store, arrays, where) -> None:
    """A write to an INPUT array: warn (naming the statement) and treat the array as INPUT_OUTPUT."""
    import warnings

    buf = store.buffer
    msg = (f"{where.describe()}: writes to {buf.name}, which is an INPUT array (read-only); accpy treats "
           f"{buf.name} as INPUT_OUTPUT, as Accera does: declare it Role.INPUT_OUTPUT (or OUTPUT)")
    try:
        warnings.warn_explicit(msg, InputWriteWarning, where.file, where.line or 1)
    except InputWriteWarning:
        raise InputWriteError(msg) from None
    promote_to_input_output(buf, arrays)


def promote_to_input_output(buf, arrays=()) -> None:
    """Make `buf` (and the Arrays owning it) INPUT_OUTPUT everywhere: signature, binder, caches, .hat."""
    object.__setattr__(buf, "role", BufferRole.INPUT_OUTPUT)  # buffers are identities: the same one everywhere
    for a in arrays:
        owners = [a] + ([a.parent] if getattr(a, "parent", None) is not None else [])
        for arr in owners:
            bufs = [getattr(arr, "_buffer", None)] + list(getattr(arr, "_buffers", {}).values())
            role = getattr(arr, "role", None)
            if any(b is buf for b in bufs) and getattr(role, "name", None) == "INPUT":
                arr.role = type(role).INPUT_OUTPUT  # (acc.Role: analysis does not import the nest layer)
                for b in bufs:
                    if b is not None:
                        object.__setattr__(b, "role", BufferRole.INPUT_OUTPUT)


def _fmt_affine(a) -> str:
    if isinstance(a, Affine):
        return str(a)

    return expr_str(a)


def _index_vars(a) -> set:
    return set(a.vars) if isinstance(a, Affine) else set(free_vars(a))


def _runtime_sizes(nest, statements) -> set:
    """Variables that stand for runtime dimensions: those in the nest's or the arrays' shapes."""
    out: set = set()
    for e in nest.extents:
        out.update(to_affine(e).vars)
    for st in statements:
        for buf, _, _ in accesses_of(st.store):
            for sh in buf.shape:
                a = to_affine(sh)
                if a is not None:
                    out.update(a.vars)
    return out


class _ViewBounds:
    """What the bounds proof needs of an array view: a name and sizes."""

    def __init__(self, view):
        self.name = f"the {view.kind} of {view.parent.name}"
        self.shape = view.shape_exprs()


def check_statements(nest, statements, view_accesses=(), arrays=(), index_arguments=()) -> list:
    """Roles, affine indices and bounds of captured statements (and of accesses through views).
    A write to an INPUT array warns (InputWriteWarning) and makes it INPUT_OUTPUT (`arrays`: the
    Arrays the logic uses, whose role changes with their buffer's).

    Returns the preconditions of the logic: where an index uses one of `index_arguments` (variables
    of values given to the function that size nothing, e.g. a tile's position), the accesses are in
    bounds exactly when these affine constraints (>= 0) on the arguments hold (preconditions.py)."""
    nest_vars = set(nest.index_vars)
    symbols = _runtime_sizes(nest, statements)
    for _, view, _ in view_accesses:
        for sh in view.shape_exprs():
            a = to_affine(sh)
            if a is not None:
                symbols.update(a.vars)
    pending_bounds = []
    for where, view, indices in view_accesses:
        affs = [_affine_index(where, _ViewBounds(view), k, ix, nest_vars, symbols, index_arguments)
                for k, ix in enumerate(indices)]
        pending_bounds.append((where, _ViewBounds(view), affs, [[]]))  # ([[]]: no condition assumed)
    for st in statements:
        store = st.assign
        role = store.buffer.role
        if role == BufferRole.CONST:
            raise LogicError(f"{st.describe()}: writes to {store.buffer.name}, which is an "
                             f"{role.upper()} array (read-only); use Role.INPUT_OUTPUT or OUTPUT")
        if role == BufferRole.INPUT:
            _promote_input(store, arrays, st)
        # accesses under an _If are proved in bounds where its affine conditions hold (those the
        # scheduler makes loop bounds of); other conditions are not relied on
        where = statement_constraints(st, nest_vars, symbols)
        for buf, indices, is_write in accesses_of(st.store):
            if not is_write and buf.role == BufferRole.OUTPUT:
                raise LogicError(f"{st.describe()}: reads {buf.name}, an OUTPUT array (write-only: its "
                                 f"initial contents are undefined); use Role.INPUT_OUTPUT to accumulate into it")
            affs = [_affine_index(st, buf, k, ix, nest_vars, symbols, index_arguments)
                    for k, ix in enumerate(indices)]
            pending_bounds.append((st, buf, affs, where))
    pending_bounds, pre = split_positional(nest, pending_bounds, symbols)
    problems = prove_in_bounds(nest, pending_bounds)
    if problems:
        raise LogicError(problems[0])
    return pre


def _affine_index(st, buf, k: int, ix, nest_vars, symbols, index_arguments=()):
    """The index as an Affine, or (quasi-affine: `//`, `%` by positive constants) the expression."""
    a = to_affine(ix)
    if a is None:
        if not is_quasi_affine(ix):
            if accesses(ix):
                raise LogicError(f"{st.describe()}: index {k} of {buf.name} (`{expr_str(ix)}`) is read from an "
                                 f"array (a gather): subscripts that depend on data are not built in accpy, "
                                 f"which proves every access in bounds before it emits code")
            raise LogicError(f"{st.describe()}: index {k} of {buf.name} (`{expr_str(ix)}`) is not an affine "
                             f"function of the loop indices (sums and constant multiples of indices and "
                             f"runtime sizes, with `//` and `%` by positive integer constants)")
        a = ix
    for v in sorted(_index_vars(a), key=lambda v: v.uid):
        if v not in nest_vars and v not in symbols and not (isinstance(a, Affine) and v in index_arguments):
            raise LogicError(f"{st.describe()}: index {k} of {buf.name} uses `{v.name}`, which "
                             f"is not an index of this nest (or a runtime dimension)")
    return a


def prove_in_bounds(nest, pending) -> list:
    """For each (statement, buffer, affine indices): prove 0 <= index < size for every iteration."""
    if not pending:
        return []
    return _z3_check(nest, pending)


def _oob_message(st, buf, k, a, point, value, size) -> str:
    at = ", ".join(f"{v.name}={point.get(v, 0)}" for v in point)
    shape = ", ".join(str(to_affine(s)) for s in buf.shape)
    return (f"{st.describe()}: index {k} of {buf.name} (`{_fmt_affine(a)}`) goes out of bounds: at "
            f"iteration ({at}) it is {value}, but {buf.name} has shape ({shape}{',' if len(buf.shape) == 1 else ''})")


def _z3_check(nest, pending) -> list:
    import z3

    zv: dict = {}

    def z(v):
        if v not in zv:
            zv[v] = z3.Int(f"{v.name}_{v.uid}")
        return zv[v]

    def zaff(a):
        return z3_affine(a, z) if isinstance(a, Affine) else z3_index(a, z)

    s = z3.Solver()
    s.set("timeout", 5000)
    symbols = set()
    for v, ext in zip(nest.index_vars, nest.extents):
        ea = to_affine(ext)
        s.add(z(v) >= 0, z(v) < zaff(ea))
        symbols.update(ea.vars)
    for _, buf, affs, where in pending:
        for a in list(affs) + [c for p in where for c in p]:
            symbols.update(x for x in _index_vars(a) if x not in set(nest.index_vars))
        for sh in buf.shape:  # (a view's size may depend on the nest's indices: those are not sizes)
            symbols.update(x for x in to_affine(sh).vars if x not in set(nest.index_vars))
    for sym in symbols:
        s.add(z(sym) >= 1)
    out = []
    for st, buf, affs, where in pending:
        for k, a in enumerate(affs):
            size = to_affine(buf.shape[k])
            s.push()
            s.add(guard_formula(where, zaff))
            s.add(z3.Or(zaff(a) < 0, zaff(a) >= zaff(size)))
            r = s.check()
            if r == z3.sat:
                m = s.model()
                point = {v: m.eval(z(v), model_completion=True).as_long() for v in nest.index_vars}
                syms = {v: m.eval(z(v), model_completion=True).as_long() for v in symbols}
                value = m.eval(zaff(a), model_completion=True).as_long()
                sizev = m.eval(zaff(size), model_completion=True).as_long()
                msg = _oob_message(st, buf, k, a, point, value, sizev)
                if syms:
                    msg += " when " + ", ".join(f"{v.name}={x}" for v, x in sorted(syms.items(), key=lambda t: t[0].name))
                out.append(msg)
            elif r == z3.unknown:
                out.append(f"{st.describe()}: could not prove that index {k} of {buf.name} stays in bounds")
            s.pop()
    return out
