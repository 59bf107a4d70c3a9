"""Loops whose ranges runtime sizes decide: statements under `i < N` and `i >= N` become two
loops, one after the other, with min/max bounds (accpy/lower/unswitch.py), so they carry no
guard and vectorize (Accera's test_dynamic_vectorized_masked_buffer_fill); a vectorized loop over
a range that a runtime size may empty (`[N, 8)` with N > 8) runs no iteration
(accpy/lower/vectorize.py)."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.ir.stmt import For, If
from accpy.ir.visitor import nodes_of

I32 = acc.ScalarType.int32
AVX2 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)


def _fill_plan(vectorize, target=acc.Target.HOST):
    """Output[i] = Input[i] where i < N_input, else 0 (Accera's masked buffer fill)."""
    N = acc.create_dimensions()
    Input = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(N,), name="Input")
    Output = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(8,), name="Output")
    nest = acc.Nest(shape=(8,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        def value():
            Output[i] = Input[i]

        def zero():
            Output[i] = 0

        acc._If(i < N, value).Else(zero)

    plan = nest.create_schedule().create_plan(target)
    if vectorize:
        plan.vectorize(i)
    return plan, (Input, N, Output)


def test_complementary_runtime_conditions_become_two_loops_without_guards():
    plan, args = _fill_plan(False)
    stmt = plan.lower("fill", args).body
    loops = nodes_of(stmt, For)
    assert len(loops) == 2 and not nodes_of(stmt, If)
    code = plan.emit_c()
    assert "accpy_min_index(8, N)" in code  # the first loop ends at min(8, N), the second starts at N


def test_vectorized_masked_fill_uses_vector_stores_and_no_guard():
    code = _fill_plan(True, AVX2)[0].emit_c()
    assert "_mm256_loadu_si256" in code and "_mm256_storeu_si256((__m256i*)(&Output[N + 8*i_v_1]), " \
        "_mm256_set1_epi32(0))" in code


@pytest.mark.parametrize("vectorize", [False, True])
def test_masked_fill_matches_numpy_for_every_size(tmp_path, vectorize):
    plan, args = _fill_plan(vectorize)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="fill")
    fn = pkg.build("fill", output_dir=tmp_path).fill
    for n in range(0, 20):
        a = np.arange(1, n + 1, dtype=np.int32)
        out = np.full(8, -1, np.int32)
        fn(a, out)
        expected = np.zeros(8, np.int32)
        expected[:min(n, 8)] = a[:8]
        np.testing.assert_array_equal(out, expected, err_msg=f"N_input={n}")


def test_vectorized_loop_over_a_range_a_runtime_size_empties(tmp_path):
    """`for i in [N, 8)` vectorized: with N > 8 it runs no iteration (its trip count 8 - N is
    negative; floor division by the vector width would have made a tail of 8 - (N - 8) lanes)."""
    N = acc.create_dimensions()
    In = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(8,), name="In")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(8,), name="Out")
    nest = acc.Nest(shape=(8,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        def copy():
            Out[i] = In[i]

        acc._If(i >= N, copy)

    plan = nest.create_schedule().create_plan()
    plan.vectorize(i)
    pkg = acc.Package()
    pkg.add(plan, args=(N, In, Out), base_name="late")
    fn = pkg.build("late", output_dir=tmp_path).late
    for n in range(0, 20):
        a = np.arange(1, 9, dtype=np.int32)
        out = np.zeros(8, np.int32)
        fn(n, a, out)
        np.testing.assert_array_equal(out, np.where(np.arange(8) >= n, a, 0), err_msg=f"N={n}")
