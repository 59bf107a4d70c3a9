"""A subscript that names the vectorized loop's index but does not move with it (its terms cancel,
as after a skew: `(i - max(j, 0)) * 8 + (-8*i + 8*j + jj)`) is loaded once per chunk. The vector
loop declares no variable for that index, so the emitted load must not name it (found by the
fuzz run in CI: seed 105933959, `'i' undeclared`)."""
from __future__ import annotations

import accpy as acc
from accpy.testing import assert_matches_reference

AVX2 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)


def _elementwise(M=5, N=6):
    T = acc.ScalarType.int32
    A, B = (acc.Array(role=acc.Role.INPUT, element_type=T, shape=(M, N), name=n) for n in "AB")
    C, D = (acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=T, shape=(M, N), name=n) for n in "CD")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] = A[i, j] + B[i, j]
        D[i, j] = acc.max(D[i, j], A[i, j] - C[i, j])

    return nest, (A, B, C, D)


def test_a_cached_subscript_whose_index_terms_cancel_vectorizes():
    nest, (A, B, C, D) = _elementwise()
    i, j = nest.get_indices()
    schedule = nest.create_schedule()
    schedule.reorder(j, i)
    jj = schedule.split(j, 4)
    jj2 = schedule.split(j, 2)
    schedule.skew(j, i, 5)
    plan = schedule.create_plan(AVX2)
    plan.cache(B, index=jj2)
    plan.vectorize(i)
    plan.parallelize(j, max_threads=2)
    plan.cache(A, index=jj, layout=acc.Array.Layout.grouped())
    assert_matches_reference(plan, (A, B, C, D))

