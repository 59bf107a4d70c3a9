"""A budget cache (`max_elements`) over runtime sizes takes the highest key-slice whose blocks a
constant bounds: the levels above, whose blocks grow with the sizes, do not fit (Accera's
test_all_runtimesizes_matmul_two_dim_two_static_split_static_max_element_cache). The split's
inner loops bound the block also in the tail, where the sizes end inside it."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc

F32 = acc.ScalarType.float32


def _matmul(max_elements):
    M, N, K = acc.Dimension(), acc.Dimension(), acc.Dimension()
    A = acc.Array(shape=(M, K), element_type=F32, role=acc.Role.INPUT, name="A")
    B = acc.Array(shape=(K, N), element_type=F32, role=acc.Role.INPUT, name="B")
    C = acc.Array(shape=(M, N), element_type=F32, role=acc.Role.INPUT_OUTPUT, name="C")
    nest = acc.Nest((M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    jj = s.split(j, 64)
    jjj = s.split(jj, 8)
    kk = s.split(k, 32)
    kkk = s.split(kk, 4)
    s.reorder(i, j, k, jj, kk, jjj, kkk)
    plan = s.create_plan()
    plan.cache(B, max_elements=max_elements)
    return plan, (M, N, K, A, B, C)


@pytest.mark.parametrize("budget, block", [(256, 256), pytest.param(32, 32, marks=pytest.mark.slow),
                                           pytest.param(4, 4, marks=pytest.mark.slow)])
def test_budget_picks_the_highest_bounded_level(budget, block):
    """Blocks of B at kk: 32 x 8 (256); at jjj: 4 x 8 (32); at kkk: 4. Above kk (jj, k, j, i) they
    grow with N or K."""
    plan, _ = _matmul(budget)
    code = plan.emit_c()
    assert f"float B_cache[{block}]" in code


@pytest.mark.slow
def test_budget_below_every_bounded_level_caches_one_iteration():
    """A budget of 3 holds no key-slice's block (the innermost, over kkk, has 4 elements): level 0."""
    small, _ = _matmul(3)
    assert "B_cache[jjj + 32*kk + 8*kkk]" not in small.emit_c()
    assert (small.caches[0].level, small.caches[0].index) == (0, None)


@pytest.mark.slow
def test_budget_cache_over_runtime_sizes_matches_numpy(tmp_path):
    plan, args = _matmul(256)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    fn = pkg.build("mm", output_dir=tmp_path).mm
    rng = np.random.default_rng(7)
    for m, n, k in ((3, 64, 32), (5, 70, 45), (2, 128, 96), (1, 9, 3), (4, 200, 131)):
        a = rng.random((m, k), dtype=np.float32)
        b = rng.random((k, n), dtype=np.float32)
        c = rng.random((m, n), dtype=np.float32)
        expected = c + a @ b
        fn(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-5, err_msg=f"M={m}, N={n}, K={k}")
