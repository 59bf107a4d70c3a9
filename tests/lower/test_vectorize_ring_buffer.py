"""The vectorizer takes a stencil over a ring buffer: X[(t + 1) % 2, ..] written from X[t % 2, ..]
never meets in one loop inside t (the planes differ), so the loop vectorizes; a plane index that
moves with the vector loop itself still refuses."""
from __future__ import annotations

import pytest

import accpy as acc
from accpy.testing import assert_matches_reference


def jacobi_1d(T=6, N=40):
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, N), name="X")
    nest = acc.Nest(shape=(T, N - 2))
    t, i = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[(t + 1) % 2, i + 1] = (X[t % 2, i] + X[t % 2, i + 1] + X[t % 2, i + 2]) * 0.33333

    return X, nest, t, i


def test_ring_buffer_stencil_vectorizes_and_matches():
    X, nest, t, i = jacobi_1d()
    s = nest.create_schedule()
    ii = s.split(i, 8)
    # the emitted code of an AVX2 model has 8-lane vector loads and stores of X
    avx2 = s.create_plan(acc.Target("HOST", vector_bytes=32, extensions=["sse", "sse2", "avx", "avx2", "fma"]))
    avx2.vectorize(ii)
    c = avx2.emit_c("f", (X,))
    assert "_mm256_loadu_ps" in c and "_mm256_storeu_ps" in c
    plan = s.create_plan()
    plan.vectorize(ii)
    assert_matches_reference(plan, (X,), opt="-O1")


def test_plane_index_moving_with_the_lanes_still_refuses():
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, 16), name="X")
    nest = acc.Nest(shape=(16, 8))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[(i + 1) % 2, j] = X[i % 2, j] + 1.0

    s = nest.create_schedule()
    s.reorder(j, i)
    plan = s.create_plan()
    with pytest.raises(acc.ScheduleError):
        plan.vectorize(i)
