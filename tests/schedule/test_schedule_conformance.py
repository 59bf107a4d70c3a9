"""Accera's schedule forms (issue 32): split sizes given as integral floats, fuse() of any iterable."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate


def _nest(n=64):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n,), name="A")
    nest = acc.Nest((n,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1.0

    return nest, A, i


@pytest.mark.parametrize("size", [16.0, np.float64(16.0), np.float32(16)])
def test_integral_float_split_sizes_are_accepted(size):
    nest, _, i = _nest()
    s = nest.create_schedule()
    ii = s.split(i, size)
    assert s.get_shape() == [4, 16] and s.get_indices() == [i, ii]
    t = _nest()[0].create_schedule()
    jj, = t.tile({t.get_indices()[0]: size})
    assert t.get_shape() == [4, 16]


@pytest.mark.parametrize("size", [16.5, 0.0, -2.0, float("inf")])
def test_fractional_split_sizes_name_the_argument(size):
    nest, _, i = _nest()
    s = nest.create_schedule()
    shown = repr(int(size)) if float(size).is_integer() else repr(size)
    with pytest.raises(ValueError, match=rf"size: Split sizes must be integers >= 1, got {shown}"):
        s.split(i, size)
    with pytest.raises(ValueError, match=rf"shape\[i\]: Split sizes must be integers >= 1, got {shown}"):
        s.tile({i: size})
    assert s.get_shape() == [64]


def test_fuse_takes_a_generator_of_schedules(tmp_path):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 8), name="B")
    n0, n1 = acc.Nest((4,)), acc.Nest((4, 8))
    i0 = n0.get_indices()
    i1, j1 = n1.get_indices()

    @n0.iteration_logic
    def _():
        A[i0] *= 2.0

    @n1.iteration_logic
    def _():
        B[i1, j1] += A[i1]

    fused = acc.fuse((n.create_schedule() for n in [n0, n1]), partial=1)
    assert len(fused.get_indices()) == 3 and fused.get_fusing_index() is fused.get_indices()[1]
    assert len(acc.fuse(iter([n0.create_schedule(), n0.create_schedule()])).get_indices()) == 2
    a, b = np.arange(4, dtype="f4"), np.zeros((4, 8), "f4")
    pkg = acc.Package()
    pkg.add(fused.create_plan(), args=(A, B), base_name="fused")
    lib = pkg.build("fused_gen", output_dir=tmp_path, python_module=False)
    ga, gb = a.copy(), b.copy()
    lib.fused(ga, gb)
    want_a, want_b = a * 2, np.zeros((4, 8), "f4") + (a * 2)[:, None]
    ra, rb = a.copy(), b.copy()
    evaluate([n0, n1], {A: ra, B: rb})
    np.testing.assert_array_equal(ra, want_a)
    np.testing.assert_array_equal(rb, want_b)
    np.testing.assert_array_equal(ga, want_a)
    np.testing.assert_array_equal(gb, want_b)
