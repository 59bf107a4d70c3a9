"""Accera's `_If(cond, fn).ElseIf(cond, fn).Else(fn)` in iteration logic: capture, the reference
evaluator, bounds proofs under conditions, dependences, unswitched guards, C and vector code."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy import _If
from accpy.nest.reference import evaluate
from accpy.testing.asserts import assert_matches_reference, run

F32, I32 = acc.ScalarType.float32, acc.ScalarType.int32


def test_index_condition_becomes_loop_bounds():
    # Accera's unit test: `and` of two index conditions (Accera's own test writes Python's `and`)
    M, N = 10, 20
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(M, N))
    nest = acc.Nest(shape=(M * 2, N * 2))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        def if_block():
            A[i, j] += 1.0

        _If(i < M and j < N, if_block)

    a = np.random.rand(M, N).astype(np.float32)
    got, = run(nest, (A,), [a])
    np.testing.assert_array_equal(got, a + 1)
    # the condition is a guard the scheduler turned into loop bounds: no `if` is left in the loops
    c = nest.create_plan().emit_c()
    assert "i < 10; ++i" in c and "j < 20; ++j" in c and "if" not in c


def test_data_conditions_match_numpy():
    # Accera's test_relational_operations, on int32 and float32
    for t in (I32, F32):
        A = acc.Array(role=acc.Role.INPUT, element_type=t, shape=(16, 11))
        B = acc.Array(role=acc.Role.INPUT, element_type=t, shape=(11, 10))
        C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=t, shape=(16, 10))
        nest = acc.Nest(shape=(16, 10, 11))
        i, j, k = nest.get_indices()

        @nest.iteration_logic
        def _():
            def f1():
                C[i, j] += A[i, k] + B[k, j]

            def f2():
                C[i, j] -= A[i, k] + B[k, j]

            _If(A[i, k] == B[k, j], f1)
            _If(A[i, k] != B[k, j], f2)
            _If(A[i, k] < B[k, j], f1)
            _If(A[i, k] >= B[k, j], f2)

        rng = np.random.default_rng(1)
        a = rng.integers(0, 3, (16, 11)).astype(t.dtype)
        b = rng.integers(0, 3, (11, 10)).astype(t.dtype)
        c = rng.integers(0, 5, (16, 10)).astype(t.dtype)
        want = c.astype(np.float64).copy()
        for ii in range(16):
            for jj in range(10):
                for kk in range(11):
                    x, y = float(a[ii, kk]), float(b[kk, jj])
                    want[ii, jj] += (x + y) * ((x == y) - (x != y) + (x < y) - (x >= y))
        got = run(nest, (A, B, C), [a, b, c])[2]
        np.testing.assert_allclose(got, want.astype(t.dtype), rtol=1e-6)
        assert_matches_reference(nest, (A, B, C), data=[a, b, c])


def test_elseif_else_chain_with_a_temp():
    # Accera's test_logic_function_conditionals (smaller)
    A = acc.Array(shape=(40, 8), role=acc.Role.INPUT)
    B = acc.Array(shape=(40, 8), role=acc.Role.INPUT)
    C = acc.Array(shape=(40, 8), role=acc.Role.INPUT_OUTPUT)
    T = acc.Array(role=acc.Role.TEMP, element_type=F32, shape=(40, 8))
    nest = acc.Nest((40, 8))
    i, j = nest.get_indices()

    def if_func():
        T[i, j] = A[i, j] + B[i, j]
        C[i, j] += T[i, j] ** 2.0

    def elseif_func():
        T[i, j] = A[i, j] - B[i, j]
        C[i, j] += T[i, j] ** 2.0

    def else_func():
        C[i, j] = A[i, j] + B[i, j]

    @nest.iteration_logic
    def _():
        _If(j < 5, if_func).ElseIf(i > 30, elseif_func).Else(else_func)

    rng = np.random.default_rng(2)
    a, b, c = (rng.random((40, 8), dtype=np.float32) for _ in range(3))
    want = c.copy()
    want[:, :5] += (a + b)[:, :5] ** 2
    want[31:, 5:] += (a - b)[31:, 5:] ** 2
    want[:31, 5:] = (a + b)[:31, 5:]
    got = run(nest, (A, B, C), [a, b, c])[2]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    ref = c.copy()
    evaluate(nest, {A: a, B: b, C: ref})
    np.testing.assert_allclose(ref, want, rtol=1e-6)
    # conditions on indices are affine after negation: j >= 5 and i > 30
    s = nest.statements
    assert len(s) == 5 and all(st.cond is not None for st in s)


def test_runtime_size_condition_and_else():
    N = acc.create_dimensions()
    In = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(N,))
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(16,))
    nest = acc.Nest((16,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        def load():
            Out[i] = In[i]

        def zero():
            Out[i] = 0.0

        _If(i < N, load).Else(zero)

    x = np.arange(1, 10, dtype=np.float32)
    got = run(nest, (In, N, Out), [x, 9, np.full(16, 7, np.float32)])[2]
    np.testing.assert_array_equal(got, np.concatenate([x, np.zeros(7, np.float32)]))


def test_access_in_bounds_only_under_its_condition():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(10,))
    nest = acc.Nest((20,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        _If(i < 10, lambda: A.__setitem__(i, 1.0))

    with pytest.raises(acc.LogicError, match=r"index 0 of A .* goes out of bounds"):
        nest2 = acc.Nest((20,))
        k = nest2.get_indices()

        @nest2.iteration_logic
        def _():
            _If(k < 11, lambda: A.__setitem__(k, 1.0))
    # a data condition proves nothing: the access must be in bounds for every iteration
    B = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(20,))
    with pytest.raises(acc.LogicError, match="goes out of bounds"):
        nest3 = acc.Nest((20,))
        m = nest3.get_indices()

        @nest3.iteration_logic
        def _():
            _If(B[m] > 100.0, lambda: A.__setitem__(m, 1.0))


def test_nested_conditions_and_reference():
    A = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(12, 12))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(12, 12))
    nest = acc.Nest((12, 12))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        def inner():
            C[i, j] = A[i, j] * 2

        def outer():
            _If(A[i, j] > 3, inner).Else(lambda: C.__setitem__((i, j), -1))

        _If(i >= j, outer)

    a = np.random.default_rng(3).integers(0, 8, (12, 12)).astype(np.int32)
    c = np.zeros((12, 12), np.int32)
    want = c.copy()
    lower = np.tril(np.ones((12, 12), bool))
    want[lower & (a > 3)] = 2 * a[lower & (a > 3)]
    want[lower & (a <= 3)] = -1
    sched = nest.create_schedule()
    ii = sched.split(i, 5)
    plan = sched.create_plan()
    got = run(plan, (A, C), [a, c])[1]
    np.testing.assert_array_equal(got, want)
    ref = c.copy()
    evaluate(nest, {A: a, C: ref})
    np.testing.assert_array_equal(ref, want)
    _ = ii


def test_conditional_reduction_races_when_parallel():
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(64,))
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(1,))
    nest = acc.Nest((64,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        def add():
            S[0] += A[i]

        _If(A[i] > 0.5, add)

    plan = nest.create_plan()
    with pytest.raises(acc.ScheduleError, match="race"):
        plan.parallelize(indices=(i,))


def test_condition_reading_what_the_chain_wrote_is_refused():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8,))
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8,))
    nest = acc.Nest((8,))
    i = nest.get_indices()

    def body():
        A[i] = 0.0
        B[i] = 1.0

    with pytest.raises(acc.LogicError, match=r"statement 2 .*condition reads A, which statement 1 .* not built"):
        @nest.iteration_logic
        def _():
            _If(A[i] > 0.0, body)


def test_python_truth_tests_outside_a_condition_are_refused():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8,))
    nest = acc.Nest((8,))
    i = nest.get_indices()
    with pytest.raises(acc.LogicError, match="no Python truth value"):
        @nest.iteration_logic
        def _():
            if A[i] > 0.0:
                A[i] = 1.0
    nest = acc.Nest((8,))
    i = nest.get_indices()
    with pytest.raises(acc.LogicError, match="only directly inside an _If"):
        @nest.iteration_logic
        def _():
            c = (i < 4) and (i > 1)
            A[i] = acc.cast(acc.select(i < 2, 1.0, 2.0), F32) if c is None else 1.0


def test_or_and_logical_ops_in_conditions():
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(16,))
    nest = acc.Nest((16,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        _If(i < 3 or i > 12, lambda: C.__setitem__(i, 1))
        _If(acc.logical_and(i >= 5, i <= 6), lambda: C.__setitem__(i, 2))
        _If((i == 8) | (i == 9), lambda: C.__setitem__(i, 3))

    want = np.zeros(16, np.int32)
    want[[0, 1, 2, 13, 14, 15]] = 1
    want[[5, 6]] = 2
    want[[8, 9]] = 3
    got, = run(nest, (C,), [np.zeros(16, np.int32)])
    np.testing.assert_array_equal(got, want)


def test_chain_misuse():
    nest = acc.Nest((4,))
    i = nest.get_indices()
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(4,))
    with pytest.raises(acc.LogicError, match="already ended with Else"):
        @nest.iteration_logic
        def _():
            _If(i < 2, lambda: A.__setitem__(i, 1.0)).Else(lambda: A.__setitem__(i, 2.0)).Else(lambda: None)
    with pytest.raises(acc.LogicError, match="must be a boolean"):
        nest2 = acc.Nest((4,))
        k = nest2.get_indices()

        @nest2.iteration_logic
        def _():
            _If(k + 1, lambda: A.__setitem__(k, 1.0))
    with pytest.raises(TypeError, match="expected a function"):
        _If(acc.Scalar(1) < acc.Scalar(2), 3)
    # outside logic, a constant condition runs its branch (Accera's LogicTypesTests.test_if_context)
    ran = []
    _If(acc.Scalar(10) < acc.Scalar(20), lambda: ran.append("if")).ElseIf(
        acc.Scalar(10) > acc.Scalar(20), lambda: ran.append("elif")).Else(lambda: ran.append("else"))
    assert ran == ["if"]


def test_vectorized_data_condition_blends():
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(64,))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(64,))
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(1,))
    nest = acc.Nest((64,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        def pos():
            C[i] = A[i] * 2.0
            S[0] += A[i]

        _If(A[i] > 0.0, pos)

    sched = nest.create_schedule()
    ii = sched.split(i, 8)
    plan = sched.create_plan()
    plan.vectorize(ii)
    a = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    c = np.full(64, 5.0, np.float32)
    s = np.zeros(1, np.float32)
    got_c, got_s = run(plan, (A, C, S), [a, c, s])[1:]
    np.testing.assert_array_equal(got_c, np.where(a > 0, a * 2, 5.0).astype(np.float32))
    np.testing.assert_allclose(got_s, [a[a > 0].sum()], rtol=1e-5)


def test_vectorized_index_condition_unswitched():
    # Accera's smoke test shape: _If(i == 0, ...).Else(...) with i vectorized
    In = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(24,))
    acc_ = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8,))
    vecs = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(2, 8))
    nest = acc.Nest((3, 8))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        def first():
            acc_[j] += In[i * 8 + j]

        def rest():
            vecs[i - 1, j] += In[i * 8 + j]

        _If(i == 0, first).Else(rest)

    plan = nest.create_plan()
    plan.vectorize(j)
    x = np.arange(24, dtype=np.float32)
    got = run(plan, (In, acc_, vecs), [x, np.zeros(8, np.float32), np.zeros((2, 8), np.float32)])
    np.testing.assert_array_equal(got[1], x[:8])
    np.testing.assert_array_equal(got[2], x[8:].reshape(2, 8))
