"""Permutable bands, coincident and reduction loops, and wavefront skews (accpy/auto/bands.py).

Facts on classic nests (matmul, matrix-vector, transposed operands, ring-buffer jacobi-1d/2d,
running sums, fused nests, runtime sizes), one skewed stencil built and compared with the
reference evaluator, and a property: on random schedules of small nests, every permutation of a
band passes accpy's own order check and every coincident loop passes its parallel check."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import accpy as acc
import accpy.testing as at
from accpy.analysis.dependence import parallel_violation
from accpy.auto.bands import Bands, find_bands
from accpy.nest.reference import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "analysis"))
from test_directions import flat_prefix, gauss_seidel, jacobi_1d, matmul, transpose_in_place  # noqa: E402

F32, I32 = acc.ScalarType.float32, acc.ScalarType.int32
FAST = settings(deadline=None, max_examples=10, database=None, suppress_health_check=list(HealthCheck))


def names(indices) -> list:
    return [ix.name for ix in indices]


def band_names(b: Bands) -> list:
    return [names(band) for band in b.bands]


def matvec(M=6, N=7):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, N), name="A")
    x = acc.Array(role=acc.Role.INPUT, shape=(N,), name="x")
    y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M,), name="y")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        y[i] += A[i, j] * x[j]

    return nest


def transposed_matmul(M=4, N=5, K=6):
    """C += A^T B^T: both operands read across their rows."""
    A = acc.Array(role=acc.Role.INPUT, shape=(K, M), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(N, K), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[k, i] * B[j, k]

    return nest


def jacobi_2d(T=4, N=8):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, N, N), name="A")
    nest = acc.Nest(shape=(T, N - 2, N - 2))
    t, i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[(t + 1) % 2, i + 1, j + 1] = (A[t % 2, i + 1, j + 1] + A[t % 2, i, j + 1] + A[t % 2, i + 2, j + 1]
                                        + A[t % 2, i + 1, j] + A[t % 2, i + 1, j + 2]) * 0.2

    return nest


def row_prefix(M=4, N=5):
    """P[i, j + 1] = P[i, j] + X[i, j]: distance (0, 1), rows independent."""
    P = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N + 1), name="P")
    X = acc.Array(role=acc.Role.INPUT, shape=(M, N), name="X")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        P[i, j + 1] = P[i, j] + X[i, j]

    return nest


def shift_scale(M=4, N=5):
    """C += A, then C *= B: two nests, fused below."""
    A, B, C = (acc.Array(role=r, shape=(M, N), name=n) for r, n in
               ((acc.Role.INPUT, "A"), (acc.Role.INPUT, "B"), (acc.Role.INPUT_OUTPUT, "C")))
    n0, n1 = acc.Nest(shape=(M, N)), acc.Nest(shape=(M, N))
    i0, j0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        C[i0, j0] += A[i0, j0]

    i1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        C[i1, j1] *= B[i1, j1]

    return n0, n1


# -- facts ----------------------------------------------------------------------------------------

def test_matmul_is_one_band_with_parallel_rows_and_columns():
    s = matmul(5, 6, 7).create_schedule()
    i, j, k = s.get_indices()
    before = repr(s)
    b = find_bands(s)
    assert b.schedule is s and b.bands == [[i, j, k]] and b.order() == [i, j, k]
    assert b.coincident == {i, j} and b.reduction == {k} and b.skews == []
    assert repr(s) == before  # nothing skewed: the schedule is untouched
    assert b.describe() == ["dependences: 1 (1 of commuting reductions)",
                            "  C: output S0 -> S0, distance (0, 0, +) (commuting)",
                            "bands: (i, j, k)", "parallel (coincident): i, j", "reductions: k", "skews: none"]


def test_matrix_vector_and_transposed_operands():
    b = find_bands(matvec().create_schedule())
    assert band_names(b) == [["i", "j"]] and names(b.coincident) == ["i"] and names(b.reduction) == ["j"]
    b = find_bands(transposed_matmul().create_schedule())
    assert band_names(b) == [["i", "j", "k"]]
    assert sorted(names(b.coincident)) == ["i", "j"] and names(b.reduction) == ["k"]


def test_a_reordered_tiled_matmul_keeps_tiles_before_points():
    s = matmul(8, 8, 8).create_schedule()
    i, j, k = s.get_indices()
    ii, jj = s.split(i, 4), s.split(j, 4)
    s.reorder(j, i, k, jj, ii)
    b = find_bands(s)
    assert b.bands == [[j, i, k], [jj, ii]]
    assert b.coincident == {i, j, ii, jj} and b.reduction == {k}


def test_jacobi_1d_with_a_ring_buffer():
    s = jacobi_1d().create_schedule()
    t, i = s.get_indices()
    b = find_bands(s, skew=False)
    assert b.bands == [[t], [i]] and b.coincident == {i} and b.skews == []
    b = find_bands(s)
    assert b.bands == [[t, i]] and b.skews == [(i, t)] and b.coincident == set()
    assert all(sg <= frozenset("0+") for d in b.deps for sg in d.signs)  # one permutable 2-D band
    assert s.get_shape() == [4, 8]  # i skewed by t: 5 + 4 - 1


def test_jacobi_2d_skews_both_space_loops():
    s = jacobi_2d().create_schedule()
    t, i, j = s.get_indices()
    b = find_bands(s, skew=False)
    assert b.bands == [[t], [i, j]] and b.coincident == {i, j}
    b = find_bands(s)
    assert b.bands == [[t, i, j]] and b.skews == [(i, t), (j, t)]
    assert b.describe()[-1] == "skews: i by t; j by t"


def test_distance_minus_two_is_skewed_twice():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, 12), name="A")
    nest = acc.Nest(shape=(4, 8))
    t, i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[(t + 1) % 2, i + 2] = (A[t % 2, i] + A[t % 2, i + 2] + A[t % 2, i + 4]) * 0.25

    s = nest.create_schedule()
    b = find_bands(s)
    assert b.bands == [[t, i]] and b.skews == [(i, t), (i, t)]  # i + 2t: distances -2..2 become 0..4


def test_a_skewed_stencil_computes_the_same(tmp_path):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, 9), name="A", element_type=I32)
    nest = acc.Nest(shape=(4, 7))
    t, i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[(t + 1) % 2, i + 1] = A[t % 2, i] + A[t % 2, i + 1] - A[t % 2, i + 2]

    s = nest.create_schedule()
    b = find_bands(s)
    assert b.skews == [(i, t)]
    s.reorder(i, t)  # the skewed band is permutable: run it column-major
    pkg = acc.Package()
    pkg.add(s, args=(A,), base_name="jac")
    lib = pkg.build("jac_pkg", output_dir=tmp_path)
    got = np.random.default_rng(1).integers(-3, 4, size=(2, 9)).astype(np.int32)
    want = got.copy()
    evaluate([nest], {A: want})
    lib.jac(got)
    np.testing.assert_array_equal(got, want)


def test_running_sums():
    s = row_prefix().create_schedule()
    i, j = s.get_indices()
    b = find_bands(s)
    assert b.bands == [[i, j]] and b.coincident == {i} and b.reduction == set()
    s = flat_prefix().create_schedule()
    i, j = s.get_indices()
    b = find_bands(s)  # distances (0, 1) and (1, -3): j goes back across rows, and no skew by i helps
    assert b.bands == [[i], [j]] and b.coincident == set() and b.skews == []


def test_in_place_transpose():
    s = transpose_in_place().create_schedule()
    i, j = s.get_indices()
    b = find_bands(s, skew=False)
    assert b.bands == [[i], [j]] and b.coincident == {j}  # within a row, j's pairs meet only on the diagonal
    b = find_bands(s)
    assert b.bands == [[i, j]] and b.skews == [(j, i)] and b.coincident == {j}


def test_fused_loops_form_one_band():
    n0, n1 = shift_scale()
    s = acc.fuse((n0.create_schedule(), n1.create_schedule()))
    i, j, f = s.get_indices()
    b = find_bands(s)
    assert b.bands == [[i, j, f]] and b.coincident == {i, j}
    n0, n1 = shift_scale()
    s = acc.fuse((n0.create_schedule(), n1.create_schedule()), partial=1)
    i, f, j0, j1 = s.get_indices()
    b = find_bands(s)
    assert b.bands == [[i, f], [j0, j1]]  # unfused loops after the fusing loop, in a band of their own
    assert b.coincident == {i, j0, j1}


def test_runtime_sizes():
    M, N, K = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    b = find_bands(nest.create_schedule())
    assert b.bands == [[i, j, k]] and b.coincident == {i, j} and b.reduction == {k}

    T, L = acc.create_dimensions()
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, L), name="X")
    n2 = acc.Nest(shape=(T, L))
    t, n = n2.get_indices()

    @n2.iteration_logic
    def _():
        X[(t + 1) % 2, n] = X[t % 2, n] * 0.5

    b = find_bands(n2.create_schedule())
    assert b.bands == [[t, n]] and b.coincident == {n} and b.skews == []


# -- the property ---------------------------------------------------------------------------------

NESTS = [matmul(), jacobi_1d(), gauss_seidel(), flat_prefix(), transpose_in_place(), matvec(4, 5)]


def _position(schedule, index) -> int:
    return next(k for k, ix in enumerate(schedule.get_indices()) if ix is index)


@given(data=st.data(), which=st.integers(0, len(NESTS) - 1), skew=st.booleans())
@FAST
def test_bands_are_permutable_and_coincident_loops_parallel(data, which, skew):
    s = data.draw(at.schedules(NESTS[which], max_transforms=3, max_split=3))
    b = find_bands(s, skew=skew)
    order = b.order()
    assert sorted(names(order)) == sorted(names(s.get_indices()))
    for n, band in enumerate(b.bands):
        shuffled = data.draw(st.permutations(band))
        s.reorder(*[ix for m, other in enumerate(b.bands) for ix in (shuffled if m == n else other)])
    s.reorder(*order)
    for ix in b.coincident:
        assert parallel_violation(s.space, [_position(s, ix)]) is None, ix.name
