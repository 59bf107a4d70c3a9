"""Array views (`Array.sub_array`, `Array.slice`): windows of an array used in logic.

Accesses through a view become accesses to the array it views, so schedules, caches and
generated code see one array; the view's own bounds are proved like an array's.
"""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc


def _build(source, args, tmp_path, name="v"):
    pkg = acc.Package()
    pkg.add(source, args=args, base_name=name)
    return getattr(pkg.build(name, output_dir=tmp_path), name)


def test_strided_sub_array_and_slice(tmp_path):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 10), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(8, 10), name="B")
    V = A.sub_array((2, 1), (3, 4), (2, 2))  # rows 2, 4, 6; columns 1, 3, 5, 7
    R = B.slice([0], [5])  # row 5 of B
    n = acc.Nest(shape=(3, 4))
    i, j = n.get_indices()

    @n.iteration_logic
    def _():
        V[i, j] += R[j + 3] * 2.0

    assert V.shape == (3, 4) and R.shape == [10] and V.role is acc.Role.INPUT_OUTPUT
    fn = _build(n, (A, B), tmp_path)
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 10), np.float32), rng.random((8, 10), np.float32)
    want = a.copy()
    want[2:8:2, 1:9:2] += b[5, 3:7] * 2
    fn(a, b)
    np.testing.assert_allclose(a, want, rtol=1e-6)


def test_views_made_inside_logic_with_runtime_sizes(tmp_path):
    M = acc.Dimension("M")
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, 6), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(M, 6), name="B")
    n = acc.Nest(shape=(M, 3))
    i, j = n.get_indices()

    @n.iteration_logic
    def _():
        row = A.sub_array((i, 0), (1, 6))  # the row of i
        tail = B.slice([0], [i]).sub_array((3,), (3,))  # a view of a view
        row[0, j * 2] += tail[j]

    fn = _build(n, (A, B, M), tmp_path)
    rng = np.random.default_rng(1)
    a, b = rng.random((5, 6), np.float32), rng.random((5, 6), np.float32)
    want = a.copy()
    want[:, 0:6:2] += b[:, 3:6]
    fn(a, b, 5)
    np.testing.assert_allclose(a, want, rtol=1e-6)


def test_scheduled_and_cached_nest_through_views(tmp_path):
    """A matmul on windows of bigger arrays, split, reordered, with caches of the arrays viewed."""
    A = acc.Array(role=acc.Role.INPUT, shape=(20, 24), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(24, 30), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(18, 18), name="C")
    Av, Bv, Cv = A.sub_array((2, 4), (16, 12)), B.sub_array((0, 3), (12, 16), (2, 1)), C.sub_array((1, 1), (16, 16))
    n = acc.Nest(shape=(16, 16, 12))
    i, j, k = n.get_indices()

    @n.iteration_logic
    def _():
        Cv[i, j] += Av[i, k] * Bv[k, j]

    s = n.create_schedule()
    ii = s.split(i, 4)
    jj = s.split(j, 8)
    s.reorder(i, j, k, ii, jj)
    plan = s.create_plan()
    plan.cache(B, index=k)
    plan.cache(C, index=ii)
    fn = _build(plan, (A, B, C), tmp_path)
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (20, 24)).astype(np.float32)
    b = rng.integers(-3, 4, (24, 30)).astype(np.float32)
    c = rng.integers(-3, 4, (18, 18)).astype(np.float32)
    want = c.copy()
    want[1:17, 1:17] += a[2:18, 4:16] @ b[0:24:2, 3:19]
    fn(a, b, c)
    np.testing.assert_array_equal(c, want)


def test_parameterized_view_shape(tmp_path):
    P = acc.create_parameters()
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(16,), name="A")
    n = acc.Nest(shape=(P,))
    i = n.get_indices()

    @n.iteration_logic
    def _():
        W = A.sub_array((2,), (P,))
        W[i] += 1.0

    pkg = acc.Package()
    pkg.add(n, args=(A,), base_name="pv", parameters={P: 5})
    fn = pkg.build("pv", output_dir=tmp_path).pv
    a = np.zeros(16, np.float32)
    fn(a)
    np.testing.assert_array_equal(a, np.r_[[0, 0], [1] * 5, [0] * 9].astype(np.float32))


def test_access_outside_the_view_is_refused():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 10), name="A")
    V = A.sub_array((2, 1), (3, 4), (2, 2))
    n = acc.Nest(shape=(4,))
    k = n.get_indices()
    with pytest.raises(acc.LogicError, match=r"index 1 of the sub_array of A \(`k \+ 1`\) goes out of bounds.*"
                                             r"it is 4, but the sub_array of A has shape \(3, 4\)"):
        @n.iteration_logic
        def _():
            V[0, k + 1] = 1.0  # inside A, outside the view


def test_writes_through_a_view_of_an_input_are_refused():
    # refused when InputWriteWarning is an error; by default B becomes INPUT_OUTPUT (Accera builds it)
    B = acc.Array(role=acc.Role.INPUT, shape=(8, 10), name="B")
    R = B.slice([0], [5])
    n = acc.Nest(shape=(4,))
    k = n.get_indices()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.InputWriteWarning)
        with pytest.raises(acc.LogicError, match="writes to B, which is an INPUT array"):
            @n.iteration_logic
            def _():
                R[k] = 1.0
    with pytest.warns(acc.InputWriteWarning, match="writes to B, which is an INPUT array.*INPUT_OUTPUT"):
        @n.iteration_logic
        def _():
            R[k] = 1.0
    assert B.role is acc.Role.INPUT_OUTPUT


@pytest.mark.parametrize("make, error, match", [
    (lambda A: A.sub_array((0,), (1,)), ValueError, r"expected 2 offsets and 2 sizes \(the rank of A\)"),
    (lambda A: A.sub_array((0, 0), (1, 1), (0, 1)), ValueError, r"strides\[0\]: expected an integer >= 1"),
    (lambda A: A.sub_array((7, 0), (2, 2)), ValueError, "dimension 0 reaches element 8, but A has 8"),
    (lambda A: A.sub_array((0, 1), (2, 5), (1, 2)), ValueError, "dimension 1 reaches element 9, but A has 6"),
    (lambda A: A.sub_array((-1, 0), (1, 1)), ValueError, r"offsets\[0\]: expected an integer >= 0"),
    (lambda A: A.sub_array((0, 0), (1, 0)), ValueError, r"shape\[1\]: expected an integer >= 1"),
    (lambda A: A.sub_array((0, 0), (1, "x")), TypeError, r"shape\[1\]: expected an int >= 1"),
    (lambda A: A.slice([2], [0]), ValueError, r"dims: expected dimensions of A \(0..1\)"),
    (lambda A: A.slice([0, 1], [0, 0]), ValueError, "slicing all 2 dimensions leaves no array"),
    (lambda A: A.slice([0], [8]), ValueError, "dimension 0 reaches element 8, but A has 8"),
    (lambda A: A.slice([0, 0], [1, 2]), ValueError, "a dimension is given twice"),
])
def test_bad_views(make, error, match):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 6), name="A")
    with pytest.raises(error, match=match):
        make(A)


def test_views_are_not_arguments_or_cache_sources():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 6), name="A")
    n = acc.Nest(shape=(8, 6))
    i, j = n.get_indices()

    @n.iteration_logic
    def _():
        A[i, j] += 1.0

    with pytest.raises(ValueError, match=r"is a view; a view as a function argument is not built in accpy: pass the array it views \(A\)"):
        acc.Package().add(n, args=(A.sub_array((0, 0), (2, 2)),), base_name="bad")
    with pytest.raises(TypeError, match=r"is a view; cache the array it views \(A\)"):
        n.create_plan().cache(A.slice([0], [0]), index=i)
