"""Configuration writes: hoist them out of loops and drop those that cannot change the state.

A call of an intrinsic with a `config` state (e.g. Gemmini's config_ld of queue 1) writes that
state; instructions read it. Two rules, both exact:
  - hoisting: when every write of a state inside a loop (or branch) is the same call, with
    arguments that do not depend on the loop's variables, one copy of it placed before the loop
    leaves every instruction in the loop reading the same value, and the state after the loop
    is that value either way (the loop writes nothing else into it);
  - redundancy: a write of the value the state certainly holds already is removed (a forward
    walk; a loop or branch that writes a state makes it unknown unless all its writes are the
    value it holds).
Applied bottom-up, a tiled matmul's configs end up once, before all loops. Emitted code
issues every instruction right after the configuration it reads, so moving a write of a value
the state holds at every reader earlier (before the loop, or to the start) changes nothing.

Guarantees afterwards: the same instructions read the same configuration values as before.
"""
from __future__ import annotations

from ..ir.expr import Call
from ..ir.stmt import Block, Evaluate, For, If, block
from ..ir.visitor import Mutator, Visitor, free_vars
from ..targets.library import intrinsic


def _config_of(s):
    """(state, the call) when `s` is a configuration write, else None."""
    if isinstance(s, Evaluate) and isinstance(s.value, Call):
        intr = intrinsic(s.value.fn)
        if intr is not None and intr.config is not None:
            return intr.config_state(s.value.args), s.value
    return None


def _writes(stmt) -> dict:
    """state -> list of write calls anywhere inside `stmt`."""
    out: dict = {}

    class V(Visitor):
        def visit_Evaluate(self, s):
            c = _config_of(s)
            if c is not None:
                out.setdefault(c[0], []).append(c[1])

    V().visit(stmt)
    return out


def _bound_vars(stmt) -> set:
    out = set()

    class V(Visitor):
        def visit_For(self, f):
            out.add(f.var)
            self.generic_visit(f)

    V().visit(stmt)
    return out


class _Remove(Mutator):
    def __init__(self, states):
        self.states = states

    def visit_Evaluate(self, s):
        c = _config_of(s)
        return None if c is not None and c[0] in self.states else s

    def visit_Block(self, b):
        stmts = [self.visit(x) for x in b.stmts]
        return block(*[x for x in stmts if x is not None]) if any(x is not y for x, y in zip(stmts, b.stmts)) else b


class _Hoist(Mutator):
    def _hoist(self, node, rebuilt):
        writes = _writes(rebuilt)
        bound = _bound_vars(rebuilt)
        hoisted = []
        for state, calls in writes.items():
            first = calls[0]
            if "?" in state or any(c != first for c in calls[1:]):
                continue
            if free_vars(first) & bound:
                continue
            hoisted.append((state, first))
        if not hoisted:
            return rebuilt
        inner = _Remove({s for s, _ in hoisted}).visit(rebuilt)
        pre = [Evaluate(c) for _, c in hoisted]
        if inner is None:
            return block(*pre)
        return block(*pre, inner)

    def visit_For(self, f: For):
        return self._hoist(f, self.generic_visit(f))

    def visit_If(self, s: If):
        return self._hoist(s, self.generic_visit(s))


def _redundant(stmt, known: dict):
    """Remove writes of values the state holds already; returns (stmt, known after)."""
    if isinstance(stmt, Block):
        out = []
        for x in stmt.stmts:
            y, known = _redundant(x, known)
            if y is not None:
                out.append(y)
        return block(*out) if out else None, known
    c = _config_of(stmt)
    if c is not None:
        state, value = c
        if known.get(state) == value:
            return None, known
        return stmt, {**known, state: value}
    if isinstance(stmt, (For, If)):
        writes = _writes(stmt)
        entry = {k: v for k, v in known.items() if k not in writes}
        if isinstance(stmt, For):
            body, _ = _redundant(stmt.body, entry)
            new = For(stmt.var, stmt.lo, stmt.hi, body if body is not None else block(), stmt.kind, stmt.attrs)
        else:
            then, _ = _redundant(stmt.then, entry)
            orelse = _redundant(stmt.orelse, entry)[0] if stmt.orelse is not None else None
            new = If(stmt.cond, then if then is not None else block(), orelse)
        after = {k: v for k, v in known.items()
                 if k not in writes or all(w == v for w in writes[k])}
        return new, after
    if hasattr(stmt, "body") and not isinstance(stmt, (For, If)):
        import dataclasses

        body, known = _redundant(stmt.body, known)
        return dataclasses.replace(stmt, body=body if body is not None else block()), known
    return stmt, known


def hoist_configs(stmt):
    """Hoist loop-invariant configuration writes, then drop the redundant ones; a state written
    with one value only (after hoisting) is written once, first."""
    stmt = _Hoist().visit(stmt)
    out, _ = _redundant(stmt, {})
    if out is None:
        return block()
    writes = _writes(out)
    once = {st: calls[0] for st, calls in writes.items() if "?" not in st and all(c == calls[0] for c in calls)
            and not free_vars(calls[0]) & _bound_vars(out)}
    if not once:
        return out
    rest = _Remove(set(once)).visit(out)
    return block(*[Evaluate(c) for c in once.values()], rest if rest is not None else block())
