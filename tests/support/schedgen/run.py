"""Inputs, the reference outputs, and the lowered loop IR run in Python with bounds-checked arrays."""
from __future__ import annotations

import numpy as np

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.testing.strategies import value_for
from .cases import State


# -----------------------------------------------------------------------------------------
# inputs, the reference, and the lowered IR run in Python
# -----------------------------------------------------------------------------------------


def random_array(array, rng, values=None) -> np.ndarray:
    """Seeded data for an acc.Array, in the memory order its layout declares (accpy.testing's
    generator). `values` gives the runtime dimensions' sizes (acc.Dimension -> int)."""
    sizes = {id(d): int(v) for d, v in (values or {}).items()}
    return value_for(array, sizes, rng, int_range=(-9, 9))


def call_arguments(args, seed: int, values=None) -> list:
    """Arguments for a call: seeded arrays, and the sizes of runtime dimensions."""
    rng = np.random.default_rng(seed)
    values = values or {}
    return [values[a] if isinstance(a, acc.Dimension) else random_array(a, rng, values) for a in args]


def make_inputs(state: State, seed: int) -> list:
    return call_arguments(state.args, seed, state.values)


def reference_outputs(state: State, inputs: list) -> list:
    out = [_copy(x) for x in inputs]
    evaluate(state.nests, dict(zip(state.args, out)))
    return out


def _copy(x):
    return x.copy(order="K") if isinstance(x, np.ndarray) else x


class OutOfBounds(IndexError):
    pass


class OverBudget(RuntimeError):
    """The lowered loops run more iterations than `lowered_to_python`'s budget allows."""


PYTHON_LOOP_BUDGET = 300_000  # loop iterations of one run of the lowered IR in Python


class _Bounded:
    """An ndarray whose element accesses are bounds-checked (numpy would wrap -1)."""

    __slots__ = ("a", "name")

    def __init__(self, a, name):
        self.a, self.name = a, name

    def _check(self, key):
        key = key if isinstance(key, tuple) else (key,)
        for k, n in zip(key, self.a.shape):
            if not 0 <= k < n:
                raise OutOfBounds(f"{self.name}{[int(x) for x in key]} is out of bounds "
                                  f"(shape {list(self.a.shape)})")

    def __getitem__(self, key):
        self._check(key)
        return self.a[key]

    def __setitem__(self, key, value):
        self._check(key)
        self.a[key] = value


def lowered_to_python(fn, budget: int = PYTHON_LOOP_BUDGET):
    """A Python function running a lowered `Function`'s loop IR over numpy arrays.

    Expressions are translated by the reference evaluator's code generator (same scalar
    semantics); loops, guards and allocations here. Returns `run(args)` taking the
    function's arguments in order (numpy arrays, ints for runtime sizes).
    """
    from accpy.ir.expr import Buffer
    from accpy.ir.stmt import Alloc, Block, Comment, For, If, Store
    from accpy.nest import reference as R

    g = R._PyGen()
    lines: list = []

    def emit(s, depth):
        pad = "    " * depth
        if isinstance(s, Block):
            for x in s.stmts:
                emit(x, depth)
            if not s.stmts:
                lines.append(pad + "pass")
        elif isinstance(s, For):
            lines.append(f"{pad}for {g.name(s.var)} in _range({g.index(s.lo)}, {g.index(s.hi)}):")
            emit(s.body, depth + 1)
        elif isinstance(s, If):
            lines.append(f"{pad}if {g.expr(s.cond)}:")
            emit(s.then, depth + 1)
            if s.orelse is not None:
                lines.append(f"{pad}else:")
                emit(s.orelse, depth + 1)
        elif isinstance(s, Store):
            lines.append(pad + R._store_line(g, s))
        elif isinstance(s, Alloc):
            shape = ", ".join(g.index(x) for x in s.buffer.shape)
            lines.append(f"{pad}{g.buf(s.buffer)} = _Bounded(np.zeros(({shape},), "
                         f"dtype=np.{s.buffer.dtype.dtype.name}), {s.buffer.name!r})")
            emit(s.body, depth)
        elif isinstance(s, Comment):
            lines.append(f"{pad}pass  # {s.text}")
        else:
            raise NotImplementedError(f"lowered_to_python: {type(s).__name__}")

    emit(fn.body, 1)
    head = ["def _run(args):"]
    for n, a in enumerate(fn.args):  # arrays, and runtime sizes / scalars
        head.append(f"    {g.buf(a)} = _Bounded(args[{n}], {a.name!r})" if isinstance(a, Buffer)
                    else f"    {g.name(a)} = args[{n}]")
    src = "\n".join(head + lines + ["    return None"])
    ns = dict(R._HELPERS)
    ns["_Bounded"] = _Bounded
    spent = [0]

    def _range(lo, hi):
        spent[0] += max(hi - lo, 0)
        if spent[0] > budget:
            raise OverBudget(f"the lowered loops run more than {budget} iterations in Python")
        return range(lo, hi)

    ns["_range"] = _range
    ns.update(g.consts)
    ns.update(g.types)
    exec(compile(src, "<lowered ir>", "exec"), ns)
    run = ns["_run"]
    run.source = src
    return run
