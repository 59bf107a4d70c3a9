"""CONST arrays with a deferred layout: the data are packed at build time as a cache lays
them out (block after block, each in the cache's layout), so the cache costs no copy."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc


def _matmul(M, N, K, bdata, layout, tiles=(8, 6), name="dl"):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.CONST, data=bdata, name="B", layout=acc.Array.Layout.DEFERRED)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    n = acc.Nest(shape=(M, N, K))
    i, j, k = n.get_indices()

    @n.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = n.create_schedule()
    jj = s.split(j, tiles[0])
    kk = s.split(k, tiles[1])
    s.reorder(j, k, i, jj, kk)
    plan = s.create_plan()
    cache = plan.cache(B, index=i, layout=layout)
    return plan, (A, B, C), cache


@pytest.mark.parametrize("layout", [acc.Array.Layout.FIRST_MAJOR, acc.Array.Layout.LAST_MAJOR])
@pytest.mark.parametrize("shape", [(20, 24, 18), (13, 21, 17)])  # whole tiles; partial tiles at the ends
def test_packed_constant_replaces_the_cache(tmp_path, layout, shape):
    M, N, K = shape
    rng = np.random.default_rng(0)
    bdata = rng.integers(-3, 4, (K, N)).astype(np.float32)
    plan, (A, B, C), cache = _matmul(M, N, K, bdata, layout)
    B.deferred_layout(cache=cache)
    pkg = acc.Package()
    pkg.add(plan, args=(A, C), base_name="dl")
    fn = pkg.build("dl", output_dir=tmp_path).dl
    a = rng.integers(-3, 4, (M, K)).astype(np.float32)
    c = rng.integers(-3, 4, (M, N)).astype(np.float32)
    want = c + a @ bdata
    fn(a, c)
    np.testing.assert_array_equal(c, want)
    body = (tmp_path / "dl.c").read_text()
    body = body[body.index("__impl("):]
    assert "B_packed[" in body and "B_cache" not in body  # read in place: no copy loops
    # the packed constant holds the blocks in order, each in the cache's layout
    packed_stride_inner = "6*jj + kk" if layout is acc.Array.Layout.LAST_MAJOR else "jj + 8*kk"
    assert packed_stride_inner in body


def test_deferred_layout_errors():
    bdata = np.ones((6, 8), np.float32)
    plan, (A, B, C), cache = _matmul(4, 8, 6, bdata, acc.Array.Layout.FIRST_MAJOR)
    with pytest.raises(ValueError, match="A is INPUT; only CONST arrays have a deferred layout"):
        A.deferred_layout(cache)
    with pytest.raises(TypeError, match=r"expected the Cache returned by plan.cache\(B, ...\)"):
        B.deferred_layout("cache")
    other = plan.cache(C, index=plan.schedule.get_indices()[2])
    with pytest.raises(ValueError, match="that cache is of C, not of B"):
        B.deferred_layout(other)
    fixed = acc.Array(role=acc.Role.CONST, data=bdata, name="F")
    with pytest.raises(ValueError, match="the layout of F is already set"):
        fixed.deferred_layout(cache)


def test_blocks_that_do_not_tile_the_array_are_refused(tmp_path):
    """A 3-tap window cached per output tile: blocks of 6 start every 4 elements."""
    w = np.arange(20, dtype=np.float32)
    X = acc.Array(role=acc.Role.CONST, data=w, name="X", layout=acc.Array.Layout.DEFERRED)
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(16,), name="Y")
    n = acc.Nest(shape=(16, 3))
    i, t = n.get_indices()

    @n.iteration_logic
    def _():
        Y[i] += X[i + t]

    s = n.create_schedule()
    ii = s.split(i, 4)
    plan = s.create_plan()
    X.deferred_layout(plan.cache(X, index=ii))
    pkg = acc.Package()
    pkg.add(plan, args=(Y,), base_name="win")
    with pytest.raises(acc.ScheduleError, match=r"deferred_layout of X: the cache's blocks \(6\) must tile the array, "
                                                r"but a block starts at 4\*i in dimension 0, not at a multiple of 6"):
        pkg.build("win", output_dir=tmp_path)


def test_a_deferred_constant_without_its_cache_is_first_major(tmp_path):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    X = acc.Array(role=acc.Role.CONST, data=data, name="X", layout=acc.Array.Layout.DEFERRED)
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, 3), name="Y")
    n = acc.Nest(shape=(2, 3))
    i, j = n.get_indices()

    @n.iteration_logic
    def _():
        Y[i, j] += X[i, j]

    pkg = acc.Package()
    pkg.add(n, args=(Y,), base_name="plain")
    fn = pkg.build("plain", output_dir=tmp_path).plain
    y = np.zeros((2, 3), np.float32)
    fn(y)
    np.testing.assert_array_equal(y, data)
