"""The reference evaluator's fast path: a nest's statements evaluated over the whole domain at once.

Taken only where that cannot change the result beyond float reassociation: every
statement's value uses arithmetic whose numpy form has the runtime's semantics (+, -, *,
float /, max, min, negation, casts between floats or to a wider or equal integer), no
statement reads an array the nest writes (except a reduction's own target), a plain
assignment writes each element at most once (its index map is injective), and the arrays
written by several statements are all updated with the same commuting reduction.
Anything else runs the loop-by-loop evaluator.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.affine import is_quasi_affine, to_affine
from ..ir.expr import BinOp, Cast, Const, Load, UnOp, Var
from ..ir.types import ScalarType

MAX_POINTS = 1 << 22
_REDUCE = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
_INDEX_OPS = ("add", "sub", "mul", "floordiv", "mod")


class _NotVectorizable(Exception):
    pass


def _np_dtype(t: ScalarType):
    return np.dtype(np.int64) if t is ScalarType.index else t.dtype


def _check_expr(e, written: set) -> None:
    """Raise _NotVectorizable unless `e` has the same meaning evaluated elementwise by numpy."""
    if isinstance(e, (Const, Var)):
        return
    if isinstance(e, Load):
        if e.buffer.uid in written:
            raise _NotVectorizable("reads an array the nest writes")
        if e.buffer.dtype in (ScalarType.bfloat16, ScalarType.float16, ScalarType.bool):
            raise _NotVectorizable("a 16-bit float or bool array")
        for ix in e.indices:
            _check_index(ix)
        return
    if isinstance(e, UnOp) and e.op == "neg":
        _check_expr(e.a, written)
        return
    if isinstance(e, Cast):
        src, dst = e.value.dtype, e.dtype
        ok = (src.is_float and dst.is_float) or (src.is_int and dst.is_float) or \
             (src.is_int and dst.is_int and dst is not ScalarType.bool)
        if not ok or dst in (ScalarType.bfloat16, ScalarType.float16):
            raise _NotVectorizable("a cast numpy does not perform like the runtime")
        _check_expr(e.value, written)
        return
    if isinstance(e, BinOp):
        if e.dtype is ScalarType.index and e.op in _INDEX_OPS:
            _check_index(e)
            return
        if e.op in ("add", "sub", "mul", "max", "min") or (e.op == "div" and e.dtype.is_float):
            if e.dtype in (ScalarType.bfloat16, ScalarType.float16, ScalarType.bool):
                raise _NotVectorizable("16-bit float or bool arithmetic")
            _check_expr(e.a, written)
            _check_expr(e.b, written)
            return
    raise _NotVectorizable(f"{type(e).__name__} {getattr(e, 'op', '')}")


def _check_index(e) -> None:
    if not is_quasi_affine(e):
        raise _NotVectorizable("a subscript that is not (quasi-)affine")


def _plan_nest(nest) -> None:
    """Raise _NotVectorizable unless the nest's statements may all run over the whole domain."""
    if any(st.cond is not None for st in nest.statements):
        raise _NotVectorizable("a statement under an _If")  # (loop by loop: conditions per iteration)
    stmts = [st.store for st in nest.statements]
    kinds: dict = {}
    for s in stmts:
        kind = s.reduce if s.reduce is not None else "store"
        if kind not in _REDUCE and kind != "store":
            raise _NotVectorizable(f"a {kind}= update")
        prev = kinds.setdefault(s.buffer.uid, kind)
        if prev != kind or (kind == "store" and sum(x.buffer is s.buffer for x in stmts) > 1):
            raise _NotVectorizable("an array written by several statements that do not commute")
        if s.buffer.dtype in (ScalarType.bfloat16, ScalarType.float16, ScalarType.bool):
            raise _NotVectorizable("a 16-bit float or bool array")
    written = set(kinds)
    nest_vars = [ix.var for ix in nest.indices]
    for s in stmts:
        _check_expr(s.value, written)
        for ix in s.indices:
            _check_index(ix)
        if s.reduce is None:
            affs = [to_affine(ix) for ix in s.indices]
            if any(a is None for a in affs):
                raise _NotVectorizable("a plain store with a quasi-affine subscript")
            varying = [v for v, ext in zip(nest_vars, nest.extents) if not (to_affine(ext) is not None and
                                                                              to_affine(ext).is_const and
                                                                              to_affine(ext).const == 1)]
            m = np.array([[a.coef(v) for v in varying] for a in affs], dtype=float).reshape(len(affs), len(varying))
            if varying and np.linalg.matrix_rank(m) < len(varying):
                raise _NotVectorizable("a plain store that writes an element more than once")


class _Eval:
    def __init__(self, env: dict, grid: dict):
        self.env, self.grid = env, grid

    def __call__(self, e):
        if isinstance(e, Const):
            return np.asarray(e.value, dtype=_np_dtype(e.dtype))
        if isinstance(e, Var):
            if e in self.grid:
                return self.grid[e]
            v = self.env[e.uid]
            return np.asarray(v, dtype=_np_dtype(e.dtype))
        if isinstance(e, Load):
            return self.env[e.buffer.uid][tuple(self(ix) for ix in e.indices)]
        if isinstance(e, UnOp):
            return np.negative(self(e.a)).astype(_np_dtype(e.dtype), copy=False)
        if isinstance(e, Cast):
            return self(e.value).astype(_np_dtype(e.dtype), copy=False)
        a, b = self(e.a), self(e.b)
        t = _np_dtype(e.dtype)
        with np.errstate(all="ignore"):
            if e.op == "add":
                r = np.add(a, b)
            elif e.op == "sub":
                r = np.subtract(a, b)
            elif e.op == "mul":
                r = np.multiply(a, b)
            elif e.op == "div":
                r = np.divide(a, b)
            elif e.op == "max":
                r = np.where(a > b, a, b)  # the runtime's `a > b ? a : b`
            elif e.op == "min":
                r = np.where(a < b, a, b)
            elif e.op == "floordiv":
                r = np.floor_divide(a, b)
            elif e.op == "mod":
                r = np.mod(a, b)
            else:  # pragma: no cover - excluded by _check_expr
                raise _NotVectorizable(e.op)
        return np.asarray(r).astype(t, copy=False)


def vectorized_run(nests, size_of) -> Optional[callable]:
    """`run(env)` evaluating the nests with whole-domain numpy operations, or None when a nest does
    not qualify (see the module doc). `size_of(expr, env)` evaluates an extent."""
    try:
        for nest in nests:
            _plan_nest(nest)
    except _NotVectorizable:
        return None

    def run(env) -> bool:
        """Evaluate; False (nothing done) when a domain is too large for whole-domain arrays."""
        all_extents = [[int(size_of(e, env)) for e in nest.extents] for nest in nests]
        if any(int(np.prod(ext)) > MAX_POINTS for ext in all_extents):
            return False
        for nest, extents in zip(nests, all_extents):
            total = int(np.prod(extents)) if extents else 1
            if total == 0:
                continue
            grids = np.indices(extents).reshape(len(extents), -1)
            grid = {ix.var: grids[k] for k, ix in enumerate(nest.indices)}
            ev = _Eval(env, grid)
            for st in nest.statements:
                s = st.store
                target = env[s.buffer.uid]
                idx = tuple(np.broadcast_to(ev(ix), (total,)) for ix in s.indices)
                val = np.broadcast_to(ev(s.value), (total,)).astype(target.dtype, copy=False)
                if s.reduce is None:
                    target[idx] = val
                else:
                    with np.errstate(all="ignore"):
                        _REDUCE[s.reduce].at(target, idx, val)
        return True

    return run
