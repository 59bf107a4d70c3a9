"""Checks of captured iteration logic: roles, affine indices, and in-bounds accesses.

Bounds are *proved* with z3 over the whole iteration domain (runtime dimensions
included, as unknowns >= 1); a failure names the statement and a concrete iteration.
"""
from __future__ import annotations

from ..errors import LogicError
from ..ir.kinds import BufferRole
from ..ir.affine import Affine, is_quasi_affine, to_affine

from ..ir.visitor import accesses, free_vars
from .smt import z3_affine, z3_index


def accesses_of(store) -> list:
    """(buffer, indices, is_write) for the store target and every load in it."""
    out = []
    for a in accesses(store):
        out.append((a.buffer, a.indices, a.is_write))
        if a.node is store and store.reduce is not None:
            out.append((store.buffer, store.indices, False))  # a reduction reads its element too
    return out


def _fmt_affine(a) -> str:
    if isinstance(a, Affine):
        return str(a)
    from ..ir.printer import expr_str

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


def check_statements(nest, statements, view_accesses=()) -> None:
    """Roles, affine indices and bounds of captured statements (and of accesses through views)."""
    nest_vars = set(nest.index_vars)
    symbols = _runtime_sizes(nest, statements)
    for _, view, _ in view_accesses:
        for sh in view.shape_exprs():
            a = to_affine(sh)
            if a is not None:
                symbols.update(a.vars)
    pending_bounds = []
    for where, view, indices in view_accesses:
        affs = [_affine_index(where, _ViewBounds(view), k, ix, nest_vars, symbols) for k, ix in enumerate(indices)]
        pending_bounds.append((where, _ViewBounds(view), affs))
    for st in statements:
        store = st.store
        role = store.buffer.role
        if role in (BufferRole.INPUT, BufferRole.CONST):
            raise LogicError(f"{st.describe()}: writes to {store.buffer.name}, which is an "
                             f"{role.upper()} array (read-only); use Role.INPUT_OUTPUT or OUTPUT")
        for buf, indices, is_write in accesses_of(store):
            if not is_write and buf.role == BufferRole.OUTPUT:
                raise LogicError(f"{st.describe()}: reads {buf.name}, an OUTPUT array (write-only: its "
                                 f"initial contents are undefined); use Role.INPUT_OUTPUT to accumulate into it")
            affs = [_affine_index(st, buf, k, ix, nest_vars, symbols) for k, ix in enumerate(indices)]
            pending_bounds.append((st, buf, affs))
    problems = prove_in_bounds(nest, pending_bounds)
    if problems:
        raise LogicError(problems[0])


def _affine_index(st, buf, k: int, ix, nest_vars, symbols):
    """The index as an Affine, or (quasi-affine: `//`, `%` by positive constants) the expression."""
    a = to_affine(ix)
    if a is None:
        if not is_quasi_affine(ix):
            from ..ir.printer import expr_str

            raise LogicError(f"{st.describe()}: index {k} of {buf.name} (`{expr_str(ix)}`) is not an affine "
                             f"function of the loop indices (sums and constant multiples of indices and "
                             f"runtime sizes, with `//` and `%` by positive integer constants)")
        a = ix
    for v in sorted(_index_vars(a), key=lambda v: v.uid):
        if v not in nest_vars and v not in symbols:
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
    for _, buf, affs in pending:
        for a in affs:
            symbols.update(x for x in _index_vars(a) if x not in set(nest.index_vars))
        for sh in buf.shape:
            symbols.update(to_affine(sh).vars)
    for sym in symbols:
        s.add(z(sym) >= 1)
    out = []
    for st, buf, affs in pending:
        for k, a in enumerate(affs):
            size = to_affine(buf.shape[k])
            s.push()
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
