"""A cache's footprint ignores accesses in pieces of no iterations.

Unswitching a skewed, tiled nest can leave a piece whose loops have rational points but no
integer point; its accesses never run. Found by the fuzz driver: a second cache of an array in
such a nest was refused ("the block's extent ... depends on runtime sizes") in a nest without
runtime sizes, because the empty piece's subscripts kept loop counters no bound could remove.
"""
import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate


def _conv1d(N=4, K=11):
    A = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(N + K - 1,))
    B = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(K,))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(N,))
    nest = acc.Nest(shape=(N, K))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[i + j] * B[j]

    return nest, (A, B, C), (i, j)


@pytest.mark.parametrize("second", ["budget", "none"])
def test_a_second_cache_in_a_skewed_tiled_nest_builds_and_matches(tmp_path, second):
    nest, args, (i, j) = _conv1d()
    A = args[0]
    schedule = nest.create_schedule()
    schedule.reorder(j, i)
    schedule.skew(i, j)
    i1 = schedule.split(i, 12)
    j1, i2, i3 = schedule.tile({j: 8, i: 5, i1: 10})
    plan = schedule.create_plan()
    plan.cache(A, index=j1, trigger_index=j1)
    if second == "budget":
        plan.cache(A, max_elements=1)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="conv")
    lib = pkg.build("empty_pieces", output_dir=tmp_path, python_module=False)
    rng = np.random.default_rng(7)
    a = rng.standard_normal(14).astype(np.float32)
    b = rng.standard_normal(11).astype(np.float32)
    c = rng.standard_normal(4).astype(np.float32)
    want = c.copy()
    evaluate(nest, {args[0]: a, args[1]: b, args[2]: want})
    got = c.copy()
    lib.conv(a, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want, c + np.convolve(a, b[::-1], "valid")[:4], rtol=1e-5, atol=1e-5)


def test_two_stores_to_one_element_in_a_vector_loop_say_so():
    """(The fuzz driver's budget caches of one element met this refusal: its message used to speak
    of 'different operators (= and =)'.)"""
    A = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(16,))
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(1,))
    nest = acc.Nest(shape=(16,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[0] = A[i]
        S[0] = A[15 - i]

    plan = nest.create_plan()
    plan.vectorize(i, unsafe=True)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): every iteration assigns the same element of "
                                                r"S in two statements; only reductions can be vectorized"):
        plan.emit_c("k")
