"""A budget cache (`max_elements`) smaller than the block of every key-slice sits at level 0: each
iteration is its own key-slice, and the cache holds the elements one iteration touches (Accera
places it in a loop of one iteration inside the innermost loop; Accera's test_small_budget_cache)."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc


def _matmul(budget):
    A = acc.Array(role=acc.Role.INPUT, shape=(8, 8), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(8, 8), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 8), name="C")
    nest = acc.Nest(shape=(8, 8, 8))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    jj = s.split(j, 4)
    s.reorder(j, k, i, jj)
    plan = s.create_plan()
    caches = [plan.cache(A, max_elements=budget, layout=acc.Array.Layout.LAST_MAJOR),
              plan.cache(B, max_elements=budget, layout=acc.Array.Layout.LAST_MAJOR),
              plan.cache(C, max_elements=budget)]
    return plan, (A, B, C), caches, jj


def test_a_budget_of_one_element_caches_each_iteration(tmp_path):
    plan, args, caches, jj = _matmul(1)
    code = plan.emit_c()
    for name in "ABC":
        assert f"float {name}_cache[1]" in code
    # A[i, k] does not move with jj: its level-1 block (over jj) is one element already
    assert caches[0].index is jj and caches[0].level == 1
    assert [(c.index, c.level) for c in caches[1:]] == [(None, 0), (None, 0)]
    assert repr(caches[1]) == "Cache(B, level=0)"
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    fn = pkg.build("mm", output_dir=tmp_path).mm
    rng = np.random.default_rng(3)
    a, b, c = (rng.random((8, 8), dtype=np.float32) for _ in range(3))
    expected = c + a @ b
    fn(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-5)


def _stencil(budget):
    A = acc.Array(role=acc.Role.INPUT, shape=(9,), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8,), name="B")
    nest = acc.Nest(shape=(8,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i] = A[i] + A[i + 1]

    plan = nest.create_schedule().create_plan()
    plan.cache(A, max_elements=budget)
    return plan, (A, B)


def test_one_iteration_of_two_elements_fits_a_budget_of_two(tmp_path):
    plan, args = _stencil(2)
    assert "B[i] = (A_cache[0] + A_cache[1]);" in plan.emit_c()  # the two elements of iteration i
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="st")
    fn = pkg.build("st", output_dir=tmp_path).st
    a = np.arange(9, dtype=np.float32)
    b = np.zeros(8, np.float32)
    fn(a, b)
    np.testing.assert_array_equal(b, a[:-1] + a[1:])


def test_a_budget_below_one_iteration_is_refused():
    plan, _ = _stencil(1)
    with pytest.raises(acc.ScheduleError, match=r"cache of A: no key-slice has an active block within max_elements=1"):
        plan.emit_c()
