"""bfloat16 arithmetic: arrays hold 16-bit patterns (numpy uint16); every operation on bfloat16
values is done in float32 and rounded to bfloat16 (nearest even), in the kernels and in the
reference evaluator alike; float32 accumulation of bfloat16 products is exact per product."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from abi.kernels import mixed_matmul_nest
from accpy.nest.reference import evaluate

BF16, F32 = acc.ScalarType.bfloat16, acc.ScalarType.float32


def _build(plan_or_schedule, args, tmp_path, name="bf"):
    pkg = acc.Package()
    pkg.add(plan_or_schedule, args=args, base_name=name)
    return getattr(pkg.build(name, output_dir=tmp_path, python_module=False, progress=False), name)


def _bits(rng, shape, scale=1.0):
    return acc.bfloat16_bits(rng.standard_normal(shape).astype(np.float32) * scale)


def test_conversions_round_to_nearest_even_and_keep_nan_and_denormals():
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38, 1e-40, np.inf, -np.inf], np.float32)
    bits = acc.bfloat16_bits(x)
    # 1 + 2^-8 is a tie: to even (1.0); 1 + 3*2^-8 is a tie: to even (1 + 2^-6)
    assert list(acc.bfloat16_values(bits)[:4]) == [1.0, 1.0, 1.015625, -2.5]
    assert acc.bfloat16_values(bits)[5] != 0  # a float32 denormal stays a (bfloat16) denormal
    assert np.isinf(acc.bfloat16_values(bits)[6:]).all()
    nan = acc.bfloat16_bits(np.array([np.nan], np.float32))
    assert np.isnan(acc.bfloat16_values(nan)).all() and nan[0] & 0x40


def test_float32_accumulation_of_bfloat16_products(tmp_path):
    """C (float32) += float32(A[i, k]) * float32(B[k, j]): bit-exact against the reference and
    against numpy summing the same float32 products in the same order."""
    M, N, K = 13, 24, 17
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(M, N, K, BF16, BF16, F32)
    s = nest.create_schedule()
    jj = s.split(j, 8)
    s.reorder(i, j, k, jj)
    plan = s.create_plan()
    plan.cache(B, index=k)  # copies of bfloat16 data: the bits as they are
    fn = _build(plan, (A, B, C), tmp_path)
    rng = np.random.default_rng(0)
    a, b = _bits(rng, (M, K)), _bits(rng, (K, N))
    c = rng.standard_normal((M, N)).astype(np.float32)
    got = c.copy()
    fn(a, b, got)
    want = c.copy()
    evaluate([nest], {A: a, B: b, C: want})
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    af, bf = acc.bfloat16_values(a), acc.bfloat16_values(b)
    manual = c.copy()
    for kk in range(K):
        manual = manual + af[:, kk][:, None] * bf[kk, :][None, :]  # float32, in k order
    assert np.array_equal(got, manual)


def test_bfloat16_arithmetic_rounds_every_operation(tmp_path):
    """Y = X * 3 + 0.1, max(Y, -Z) / 7, sqrt: each operation rounded to bfloat16."""
    n = 64
    X = acc.Array(role=acc.Role.INPUT, element_type=BF16, shape=(n,), name="X")
    Z = acc.Array(role=acc.Role.INPUT, element_type=BF16, shape=(n,), name="Z")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=BF16, shape=(n,), name="Y")
    W = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(n,), name="W")
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] = X[i] * 3.0 + 0.1
        Y[i] = acc.max(Y[i], -Z[i]) / 7.0
        W[i] = acc.cast(acc.sqrt(acc.abs(Y[i])), F32)

    fn = _build(nest.create_schedule(), (X, Z, Y, W), tmp_path)
    rng = np.random.default_rng(1)
    x, z = _bits(rng, n, 10.0), _bits(rng, n, 10.0)
    y = np.zeros(n, np.uint16)
    w = np.zeros(n, np.float32)
    fn(x, z, y, w)
    y_ref, w_ref = y.copy(), w.copy()
    evaluate([nest], {X: x, Z: z, Y: y_ref, W: w_ref})
    assert np.array_equal(y, y_ref) and np.array_equal(w.view(np.uint32), w_ref.view(np.uint32))

    r = acc.bfloat16_values
    xv, zv = r(x), r(z)
    t = r(acc.bfloat16_bits(r(acc.bfloat16_bits(xv * np.float32(3.0))) + r(acc.bfloat16_bits(np.float32(0.1)))))
    t = r(acc.bfloat16_bits(np.maximum(t, -zv) / np.float32(7.0)))
    assert np.array_equal(r(y), t)  # rounding after each operation, as written
    assert not np.array_equal(r(y), r(acc.bfloat16_bits(np.maximum(xv * 3 + np.float32(0.1), -zv) / 7)))


def test_vectorized_bfloat16_loops_are_left_to_the_compiler_and_stay_exact(tmp_path):
    """No vector ISA has bfloat16 arithmetic: vectorize says so (a warning) and the loop is left
    scalar (with `omp simd`); the results still match the reference bit for bit."""
    n = 64
    X = acc.Array(role=acc.Role.INPUT, element_type=BF16, shape=(n,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=BF16, shape=(n,), name="Y")
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i] * 0.3

    s = nest.create_schedule()
    ii = s.split(i, 16)
    plan = s.create_plan()
    if acc.Target.HOST.vector_isa.shape(F32) is None:
        pytest.skip("this CPU has no vector ISA accpy emits")
    plan.vectorize(ii)
    with pytest.warns(UserWarning, match="no vector instructions for bfloat16"):
        fn = _build(plan, (X, Y), tmp_path)
    rng = np.random.default_rng(2)
    x, y = _bits(rng, n), _bits(rng, n)
    got, want = y.copy(), y.copy()
    fn(x, got)
    evaluate([nest], {X: x, Y: want})
    assert np.array_equal(got, want)
