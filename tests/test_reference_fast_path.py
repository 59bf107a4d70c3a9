"""The reference evaluator's whole-domain fast path gives exactly the loop-by-loop values, and
is not taken where the order of iterations matters."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.nest.reference_vec import vectorized_run

F32, I32 = acc.ScalarType.float32, acc.ScalarType.int32


def _both(nests, args_values):
    """(fast, loops) results on copies of the same values."""
    out = []
    for vec in (True, False):
        vals = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args_values.items()}
        evaluate(nests, vals, vectorize=vec)
        out.append(vals)
    return out


def _matmul(t):
    A = acc.Array(role=acc.Role.INPUT, shape=(7, 5), name="A", element_type=t)
    B = acc.Array(role=acc.Role.INPUT, shape=(5, 6), name="B", element_type=t)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(7, 6), name="C", element_type=t)
    n = acc.Nest(shape=(7, 6, 5))
    i, j, k = n.get_indices()

    @n.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return n, (A, B, C)


@pytest.mark.parametrize("t", [F32, I32])
def test_matmul_is_exact(t):
    n, (A, B, C) = _matmul(t)
    rng = np.random.default_rng(0)
    vals = {A: rng.standard_normal((7, 5)).astype(t.dtype) * 1000 if t is F32 else
            rng.integers(-2 ** 31, 2 ** 31, (7, 5), dtype=np.int64).astype(np.int32),
            B: rng.standard_normal((5, 6)).astype(t.dtype) if t is F32 else
            rng.integers(-2 ** 31, 2 ** 31, (5, 6), dtype=np.int64).astype(np.int32),
            C: np.zeros((7, 6), t.dtype)}
    assert vectorized_run([n], lambda e, env: 0) is not None
    fast, loops = _both([n], vals)
    np.testing.assert_array_equal(fast[C], loops[C])  # bit for bit (wrapping ints, float sums in loop order)


def test_stencil_quasi_affine_and_casts():
    X = acc.Array(role=acc.Role.INPUT, shape=(20,), name="X", element_type=acc.ScalarType.int8)
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 4), name="Y", element_type=F32)
    n = acc.Nest(shape=(16, 3))
    i, t = n.get_indices()

    @n.iteration_logic
    def _():
        Y[i // 4, i % 4] += acc.cast(X[i + t], F32) * 0.5 - acc.max(acc.cast(X[i], F32), 1.0)

    vals = {X: np.random.default_rng(1).integers(-128, 128, 20).astype(np.int8), Y: np.zeros((4, 4), np.float32)}
    assert vectorized_run([n], lambda e, env: 0) is not None
    fast, loops = _both([n], vals)
    np.testing.assert_array_equal(fast[Y], loops[Y])


def test_order_dependent_nests_take_the_loops():
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(10,), name="X", element_type=F32)
    n = acc.Nest(shape=(9,))
    i = n.get_indices()

    @n.iteration_logic
    def _():
        X[i + 1] = X[i] * 2.0 + 1.0  # reads what an earlier iteration wrote

    assert vectorized_run([n], lambda e, env: 0) is None
    Z = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(3,), name="Z", element_type=F32)
    W = acc.Array(role=acc.Role.INPUT, shape=(3, 4), name="W", element_type=F32)
    m = acc.Nest(shape=(3, 4))
    a, b = m.get_indices()

    @m.iteration_logic
    def _():
        Z[a] = W[a, b]  # the last b wins: written 4 times

    assert vectorized_run([m], lambda e, env: 0) is None
    vals = {Z: np.zeros(3, np.float32), W: np.arange(12, dtype=np.float32).reshape(3, 4)}
    fast, loops = _both([m], vals)
    np.testing.assert_array_equal(fast[Z], [3, 7, 11])
    np.testing.assert_array_equal(loops[Z], [3, 7, 11])
    q = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="q", element_type=I32)
    r = acc.Nest(shape=(4,))
    x = r.get_indices()

    @r.iteration_logic
    def _():
        q[x] = q[x] // 2  # integer division: the runtime's semantics, not numpy's

    assert vectorized_run([r], lambda e, env: 0) is None
