"""Gemmini's weight reuse, a pass of its library run right after the generic tensorize pass.

Tensorize leaves every matched tile as its three calls: config_ex, preload (the weights B into
the systolic array, and the accumulator rows it writes), compute_preloaded. Here, bottom-up:

* a loop around a tile (or a group of tiles, below) that does not move the weights (their address
  and extents do not depend on its var), is not parallel, and whose inner loops' bounds do not
  depend on it, becomes a *reuse* loop: the weights are preloaded at its first iteration only
  (`If(first iteration, preload B + compute_preloaded, preload GARBAGE + compute_accumulated)`);
* consecutive tiles with equal weights in one block (e.g. the full tiles and the tail of a loop
  the unswitching cut), all of whose loops certainly run, share one preload: the first preloads
  (at the first iteration of every loop around it), the others compute on what is there.

Reused weights are still in the array because nothing else between those calls preloads.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.expr import BinOp, Call, Const, as_int
from ...ir.kinds import LoopKind
from ...ir.stmt import Block, Evaluate, For, If, Stmt, block
from ...ir.types import ScalarType
from ...ir.visitor import Mutator, free_vars
from . import machine as gm
from .intrinsics import COMPUTE_ACCUMULATED, COMPUTE_PRELOADED, CONFIG_EX, PRELOAD, call

_TILE = (CONFIG_EX.name, PRELOAD.name, COMPUTE_PRELOADED.name)


def reuse_weights(stmt, request=None):
    """`stmt` with the weights of tiles preloaded once where loops or neighbours allow (the pass)."""
    return _Expand().visit(_Reuse().visit(stmt))


def _fn(s):
    return s.value.fn if isinstance(s, Evaluate) and isinstance(s.value, Call) else None


def _weights(calls) -> tuple:
    """What a tile's preload holds: (B's address, k extent, j extent); tiles with equal ones share it."""
    b, _, tj, tk = calls[1].value.args[:4]
    return b, tk, tj


@dataclass(frozen=True)
class _Pending(Stmt):
    """Tiles sharing one preload, expanded into calls once the loops around them are known:
    `items` = ((the tile's calls, its own loops), ...) run one after the other, inside the `reuse`
    loops (outermost first); none of those loops moves the weights."""

    items: tuple
    reuse: tuple = ()

    @property
    def weights(self) -> tuple:
        return _weights(self.items[0][0])

    @property
    def b_vars(self) -> frozenset:
        out = frozenset()
        for calls, _ in self.items:
            for e in _weights(calls):
                out |= frozenset(free_vars(e))
        return out

    def loops(self):
        return list(self.reuse) + [f for _, ls in self.items for f in ls]


def _segments(stmts) -> list:
    """The statements with each run of a tile's three calls as one _Pending."""
    out, n = [], 0
    while n < len(stmts):
        if tuple(_fn(s) for s in stmts[n:n + 3]) == _TILE:
            out.append(_Pending(((tuple(stmts[n:n + 3]), ()),)))
            n += 3
        else:
            out.append(stmts[n])
            n += 1
    return out


class _Reuse(Mutator):
    def visit_For(self, f: For):
        body = self.visit(f.body)
        if isinstance(body, _Pending) and f.var not in body.b_vars and f.kind != LoopKind.PARALLEL and \
                not any(f.var in free_vars(g.lo) | free_vars(g.hi) for g in body.loops()):
            # (inner reuse loops must not depend on this one: each of them runs from its start)
            return _Pending(body.items, (f,) + body.reuse)
        if isinstance(body, _Pending):
            body = _expand(body)
        return f if body is f.body else For(f.var, f.lo, f.hi, body, f.kind, f.attrs)

    def visit_Block(self, b):
        out = self.generic_visit(b)
        if not isinstance(out, Block):
            return out
        stmts = _segments(out.stmts)
        if not all(isinstance(x, _Pending) for x in stmts):
            return block(*stmts)
        # consecutive tiles with the same weights: one preload for all of them
        first = stmts[0]
        if all(x.weights == first.weights and (not x.reuse or len(x.items) == 1) for x in stmts) and \
                all(_runs(f) for f in first.loops()):
            items = []
            for x in stmts:
                if x.reuse:
                    items.append((x.items[0][0], tuple(x.reuse) + tuple(x.items[0][1])))
                else:
                    items.extend(x.items)
            return _Pending(tuple(items))
        return block(*stmts)


class _Expand(Mutator):
    def visit__Pending(self, p):
        return _expand(p)


def _first(loops):
    cond = None
    for f in loops:
        c = BinOp("eq", f.var, f.lo, ScalarType.bool)
        cond = c if cond is None else BinOp("land", cond, c, ScalarType.bool)
    return cond


def _runs(f) -> bool:
    """A loop certainly runs at least once (constant bounds)."""
    lo, hi = as_int(f.lo), as_int(f.hi)
    return lo is not None and hi is not None and hi > lo


def _wrap(loops, s):
    for f in reversed(loops):
        s = For(f.var, f.lo, f.hi, s, f.kind, f.attrs)
    return s


def _calls(calls, first_iteration):
    """A tile's calls when its weights are preloaded only if `first_iteration` holds (None: always;
    a constant False: never, GARBAGE preloaded and compute_accumulated reusing the array's)."""
    cfg, pre, comp = calls
    if first_iteration is None:
        return block(cfg, pre, comp)
    g = Const(gm.GARBAGE_ADDR)
    reuse = block(call(PRELOAD, g, *pre.value.args[1:]), call(COMPUTE_ACCUMULATED, *comp.value.args))
    if isinstance(first_iteration, Const):
        return block(cfg, block(pre, comp) if first_iteration.value else reuse)
    return block(cfg, If(first_iteration, block(pre, comp), reuse))


def _expand(p: _Pending):
    """The tiles' calls: the first tile preloads the weights when every loop around it starts
    (always, without reuse loops); the others, after it, always reuse them."""
    out = []
    for n, (calls, loops) in enumerate(p.items):
        cond = _first(list(p.reuse) + list(loops)) if n == 0 else Const(False, ScalarType.bool)
        out.append(_wrap(list(loops), _calls(calls, cond)))
    return _wrap(list(p.reuse), block(*out))
