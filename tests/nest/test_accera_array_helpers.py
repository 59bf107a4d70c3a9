"""Accera's private Array helpers its programs call (`_size_str`, `_allocate`, `_get_native_array`,
`_get_memory_buffer`, `_reinterpret_cast`) and `ArrayView.layout` / `offset` (dsl_tests test_subarray,
test_temp_array_materialization_3, test_all_dynamic_sized_fp32_mlas_matmul)."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

R = acc.Role


def test_size_str():
    M, N, K = acc.create_dimensions()
    assert acc.Array(role=R.INPUT, shape=(M, K))._size_str == "M*K"
    assert acc.Array(role=R.INPUT, shape=(16, N))._size_str == "16*N"
    assert acc.Array(role=R.INPUT, shape=(4,))._size_str == "4"


def test_temp_array_made_inside_logic(tmp_path):
    A = acc.Array(shape=(6, 4), role=R.INPUT_OUTPUT)
    B = acc.Array(shape=(6, 4), role=R.INPUT_OUTPUT)
    nest = acc.Nest(A.shape)
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        T = acc.Array(role=R.TEMP, element_type=A.element_type, shape=(1,))
        T._allocate()
        T = T._get_native_array()
        T[0] = B[i, j]
        B[i, j] += A[i, j] * 2.0
        A[i, j] = T[0]

    pkg = acc.Package()
    pkg.add(nest, args=(A, B), base_name="swapish")
    pkg.build("swapish", output_dir=tmp_path)
    rng = np.random.default_rng(3)
    a, b = rng.random((6, 4), dtype=np.float32), rng.random((6, 4), dtype=np.float32)
    ga, gb = a.copy(), b.copy()
    acc.load(tmp_path / "swapish").swapish(ga, gb)
    np.testing.assert_array_equal(ga, b)
    np.testing.assert_allclose(gb, b + a * 2.0, rtol=1e-6)
    ra, rb = a.copy(), b.copy()
    evaluate([nest], {A: ra, B: rb})
    np.testing.assert_array_equal(ra, ga)
    np.testing.assert_array_equal(rb, gb)


def test_allocate_is_for_temp_arrays():
    with pytest.raises(ValueError, match="_allocate: A is INPUT; only TEMP arrays are allocated"):
        A = acc.Array(role=R.INPUT, shape=(2,))
        A._allocate()


def test_reinterpretation_is_not_built():
    A = acc.Array(role=R.INPUT, element_type=acc.ScalarType.int32, shape=(4,))
    with pytest.raises(NotImplementedError, match="not built in accpy"):
        A._get_memory_buffer()
    with pytest.raises(NotImplementedError, match="not built in accpy"):
        A._reinterpret_cast(acc.ScalarType.float32)


def test_view_layout_and_offset():
    arr = acc.Array(role=R.INPUT_OUTPUT, shape=(256, 256))
    a0 = arr.sub_array(offsets=(0, 0), shape=(128, 128))
    a00 = a0.sub_array(offsets=(64, 64), shape=(64, 64))
    assert a0.layout == (256, 1) == a00.layout == arr.sub_array((0, 0), (128, 128)).layout
    assert (a0.offset, a00.offset) == (0, 64 * 256 + 64)
    assert arr.slice([0], [3]).layout == (1,) and arr.slice([0], [3]).offset == 3 * 256
    assert arr._split_dimension(1, 16).layout == (256, 16, 1)
    assert arr.sub_array((2, 1), (3, 4), strides=(2, 3)).layout == (512, 3)
    last = acc.Array(role=R.INPUT, shape=(4, 8), layout=acc.Array.Layout.LAST_MAJOR)
    assert last.sub_array((1, 2), (2, 2)).layout == (1, 4) and last.sub_array((1, 2), (2, 2)).offset == 9
    # the layout matches numpy's view of the same window (strides in elements)
    data = np.zeros((256, 256), np.float32)
    window = data[64:128, 64:128]
    assert tuple(s // 4 for s in window.strides) == a00.layout

