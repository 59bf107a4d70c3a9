"""One Visitor and one Mutator over IR nodes; every pass builds on these two."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from .affine import to_affine
from .expr import Buffer, Expr, Load, Node, Var
from .stmt import Block, Stmt, Store, block
from .vector import VLoad, VStore


def _children(node):
    for f in dataclasses.fields(node):
        yield f.name, getattr(node, f.name)


class Visitor:
    """Walks a tree; override `visit_<Class>` and call `self.generic_visit(node)` to descend."""

    def visit(self, node):
        m = getattr(self, "visit_" + type(node).__name__, None)
        if m is not None:
            return m(node)
        return self.generic_visit(node)

    def generic_visit(self, node):
        for _, v in _children(node):
            if isinstance(v, Node):
                self.visit(v)
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, Node):
                        self.visit(x)


class Mutator:
    """Rebuilds a tree bottom-up; unchanged subtrees are returned as the same objects."""

    def visit(self, node):
        m = getattr(self, "visit_" + type(node).__name__, None)
        if m is not None:
            return m(node)
        return self.generic_visit(node)

    def generic_visit(self, node):
        changes = {}
        for name, v in _children(node):
            if isinstance(v, Node):
                nv = self.visit(v)
                if nv is not v:
                    changes[name] = nv
            elif isinstance(v, tuple) and any(isinstance(x, Node) for x in v):
                nt = tuple(self.visit(x) if isinstance(x, Node) else x for x in v)
                if any(a is not b for a, b in zip(nt, v)):
                    if isinstance(node, Block):
                        nt = tuple(x for x in nt if x is not None)
                    changes[name] = nt
            # Buffers and plain values are leaves
        if not changes:
            return node
        if isinstance(node, Block):
            return block(*changes["stmts"])
        return dataclasses.replace(node, **changes)


class Substitute(Mutator):
    """Replace variables by expressions."""

    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_Var(self, v: Var):
        return self.mapping.get(v, v)


def substitute(node, mapping: dict):
    if not mapping:
        return node
    return Substitute(mapping).visit(node)


class _FreeVars(Visitor):
    def __init__(self):
        self.vars: set = set()
        self.bound: set = set()

    def visit_Var(self, v):
        self.vars.add(v)

    def visit_For(self, f):
        self.bound.add(f.var)
        self.generic_visit(f)


def free_vars(node) -> set:
    fv = _FreeVars()
    fv.visit(node)
    return fv.vars - fv.bound


def buffers_of(node) -> list:
    """Buffers referenced by loads and stores, in first-use order."""
    seen: dict = {}

    class V(Visitor):
        def visit_Load(self, n):
            seen.setdefault(n.buffer, None)
            self.generic_visit(n)

        def visit_Store(self, n):
            seen.setdefault(n.buffer, None)
            self.generic_visit(n)

        def visit_Alloc(self, n):
            seen.setdefault(n.buffer, None)
            self.generic_visit(n)

        # vector accesses (accpy.ir.vector) name their buffer the same way
        visit_VLoad = visit_Load
        visit_VStore = visit_Store

    V().visit(node)
    return list(seen)


__all__ = ["Visitor", "Mutator", "Substitute", "substitute", "free_vars", "buffers_of",
           "Expr", "Stmt", "Buffer"]


def child_nodes(n):
    """The IR nodes directly under `n`, in evaluation order (a store: its value, then its subscripts)."""
    if isinstance(n, (Store, VStore)):
        yield n.value
        yield from (ix for ix in n.indices if isinstance(ix, Node))
        return
    for _, v in _children(n):
        if isinstance(v, Node):
            yield v
        elif isinstance(v, tuple):
            yield from (x for x in v if isinstance(x, Node))


def walk(node):
    """Every node of the tree under `node` (itself first), outer before inner, in evaluation order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(child_nodes(n))))


def nodes_of(node, types) -> list:
    """Every node of the tree under `node` (itself included) that is an instance of `types`,
    in `walk` order."""
    return [n for n in walk(node) if isinstance(n, types)]


def substitute_indices(node, mapping: dict):
    """Replace variables by Affine expressions; affine subscripts stay in canonical form."""
    expr_map = {v: a.to_expr() for v, a in mapping.items()}

    class Sub(Mutator):
        def _index(self, ix):
            a = to_affine(ix)
            if a is not None:
                return a.subs(mapping).to_expr()
            return self.visit(ix)

        def visit_Var(self, v):
            return expr_map.get(v, v)

        def visit_Load(self, n: Load):
            return Load(n.buffer, tuple(self._index(i) for i in n.indices))

        def visit_Store(self, s: Store):
            return Store(s.buffer, tuple(self._index(i) for i in s.indices), self.visit(s.value), s.reduce)

    return Sub().visit(node)


@dataclass(frozen=True)
class Access:
    """One array access of the IR: `node` (a Load / Store, or a vector load / store) touches
    `buffer` at `indices`; a write when `is_write` (a store; with `node.reduce` set it also reads the element)."""

    buffer: Buffer
    indices: tuple
    is_write: bool
    node: Node


def accesses(node, buffer: Optional[Buffer] = None) -> list:
    """Every array access under `node` (of `buffer` only, when given), one per Load / Store node,
    in evaluation order: a store's target first, then the reads of its value, then those of its
    subscripts."""
    return [Access(n.buffer, n.indices, isinstance(n, (Store, VStore)), n) for n in walk(node)
            if isinstance(n, (Load, VLoad, Store, VStore)) and (buffer is None or n.buffer is buffer)]
