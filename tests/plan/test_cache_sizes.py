"""Sizes given to `plan.cache` are checked when the cache is requested: a panel wider than the
array is clamped to its columns, a panel wider than the block to the block's rows at lowering
(either reason kept in `cache.notes` and shown by repr(plan)); zero, negative and non-integer sizes are refused, naming the
argument and the value. A clamped cache allocates no more than its block, and computes the
same values."""
from __future__ import annotations

import re

import numpy as np
import pytest

import accpy as acc


def _kernel(rows=8, cols=40, dims=False):
    """B[i, j] += A[i, j] * 3 over an (rows, cols) space: B's block at index i is the whole array."""
    if dims:
        M, N = acc.create_dimensions()
        shape = (M, N)
    else:
        shape = (rows, cols)
    A = acc.Array(role=acc.Role.INPUT, shape=shape, name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=shape, name="B")
    nest = acc.Nest(shape=shape)
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] += A[i, j] * 3.0

    args = ((M, N) if dims else ()) + (A, B)
    return nest, args, (i, j)


def _cache_elements(code: str) -> int:
    """The elements B's cache is allocated with, read from the emitted C (a stack array, or the
    shape given to the runtime's allocator)."""
    m = re.search(r"float B_cache\[(\d+)\]", code)
    if m:
        return int(m.group(1))
    m = re.search(r"accpy_alloc_array\(\"the temporary B_cache\", sizeof\(float\), \d+, \d+, "
                  r"\(const int64_t\[\]\)\{([^}]*)\}", code)
    assert m, code
    return int(np.prod([int(x) for x in re.findall(r"\((\d+)\)", m.group(1))]))


@pytest.mark.parametrize("width", [2 ** 31, 10 ** 6, 41])
def test_a_panel_wider_than_the_array_is_clamped_to_its_columns(tmp_path, width):
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    c = plan.cache(args[1], index=i, panel_width=width)
    assert c.panel_width == 40
    assert c.notes == [f"panel_width={width} clamped to 40: B has 40 columns, and a panel wider than its block "
                       f"only pads it"]
    assert f"panel_width=40, note: panel_width={width} clamped to 40" in repr(plan)
    assert _cache_elements(plan.emit_c("k")) == 8 * 40  # (was 8 * width elements, on every call)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="k")
    lib = pkg.build("wide", output_dir=tmp_path, python_module=False)
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 40), dtype=np.float32), rng.random((8, 40), dtype=np.float32)
    want = b + a * np.float32(3)
    lib.k(a, b)
    np.testing.assert_allclose(b, want, rtol=1e-6)


def test_a_panel_narrower_than_the_array_is_kept():
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    c = plan.cache(args[1], index=i, panel_width=16)
    assert (c.panel_width, c.notes) == (16, [])
    assert "panel_width=16)" in repr(plan) and "note" not in repr(plan)
    assert _cache_elements(plan.emit_c("k")) == 8 * 48  # three whole panels of 16 columns


def test_a_panel_wider_than_the_block_is_clamped_to_the_block_at_lowering():
    """The array has 40 columns, the blocks below j only 8: a panel of 32 is cut to the block's 8."""
    nest, args, (i, j) = _kernel()
    s = nest.create_schedule()
    jj = s.split(j, 8)
    s.reorder(j, i, jj)
    for index, block in ((i, 8 * 8), (jj, 8)):  # i's key-slice: 8 rows of 8; jj's: one row of 8
        plan = s.create_plan()
        c = plan.cache(args[1], index=index, panel_width=32)
        assert (c.panel_width, c.notes) == (32, [])  # (the array is wider: the block is known at lowering)
        assert _cache_elements(plan.emit_c("k")) == block  # (was 8 * 32 and 32: rows padded to a panel)
        assert c.notes == ["panel_width=32 clamped to 8: the block's rows are 8 long"]  # (recorded by lowering)
        assert "note: panel_width=32 clamped to 8: the block's rows are 8 long" in repr(plan)
        plan.emit_c("k")
        assert len(c.notes) == 1  # (lowering again adds nothing)
        from accpy.testing import assert_matches_reference

        assert_matches_reference(plan, args)


def test_runtime_sized_arrays_are_clamped_at_lowering(tmp_path):
    nest, args, (i, j) = _kernel(dims=True)
    s = nest.create_schedule()
    ii, jj = s.tile({i: 4, j: 8})
    s.reorder(i, j, ii, jj)
    plan = s.create_plan()
    c = plan.cache(args[3], index=ii, panel_width=10 ** 6)
    assert (c.panel_width, c.notes) == (10 ** 6, [])  # (the columns are not known before the call)
    assert _cache_elements(plan.emit_c("k")) == 4 * 8
    assert c.notes == ["panel_width=1000000 clamped to 8: the block's rows are 8 long"]
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="k")
    lib = pkg.build("rt", output_dir=tmp_path, python_module=False)
    rng = np.random.default_rng(1)
    for m, n in ((9, 21), (4, 8), (1, 3)):
        a, b = rng.random((m, n), dtype=np.float32), rng.random((m, n), dtype=np.float32)
        want = b + a * np.float32(3)
        lib.k(m, n, a, b)
        np.testing.assert_allclose(b, want, rtol=1e-6)


def test_a_clamped_cache_matches_the_reference_evaluator():
    from accpy.testing import assert_matches_reference

    nest, args, (i, j) = _kernel(rows=6, cols=10)
    plan = nest.create_plan()
    plan.cache(args[0], index=i, panel_width=2 ** 40)
    plan.cache(args[1], index=j, panel_width=3)
    assert_matches_reference(plan, args)


@pytest.mark.parametrize("bad", [0, -1, -2 ** 31, 2.0, 2.5, True, np.bool_(True), "16", (4,)])
def test_panel_widths_that_are_not_positive_integers_are_refused(bad):
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    with pytest.raises(ValueError, match=rf"^panel_width: expected a positive int \(columns per panel\), got "
                                         rf"{re.escape(type(bad).__name__)} {re.escape(repr(bad))}$"):
        plan.cache(args[1], index=i, panel_width=bad)
    assert plan.caches == ()


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "8"])
def test_max_elements_that_is_not_a_positive_integer_is_refused(bad):
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    with pytest.raises(ValueError, match=rf"^max_elements: expected an integer > 0 \(elements\), got "
                                         rf"{re.escape(type(bad).__name__)} {re.escape(repr(bad))}$"):
        plan.cache(args[1], max_elements=bad)


def test_numpy_integers_are_sizes_too():
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    assert plan.cache(args[1], index=i, panel_width=np.int64(8)).panel_width == 8
    plan = nest.create_plan()
    c = plan.cache(args[1], max_elements=np.int32(64))
    assert c.max_elements == 64 and type(c.max_elements) is int


def test_a_budget_larger_than_the_array_caches_the_whole_array():
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    plan.cache(args[1], max_elements=2 ** 62)
    assert _cache_elements(plan.emit_c("k")) == 8 * 40


@pytest.mark.parametrize("what", ["thrifty", "double_buffer"])
@pytest.mark.parametrize("bad", [1, "yes", 0.0])
def test_flags_are_booleans(what, bad):
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    with pytest.raises(TypeError, match=rf"^{what}: expected True or False, got {type(bad).__name__} {bad!r}$"):
        plan.cache(args[0], index=i, **{what: bad})


def test_levels_may_be_numpy_integers():
    nest, args, (i, j) = _kernel()
    plan = nest.create_plan()
    c = plan.cache(args[1], level=np.int64(1))
    assert c.level == 1 and type(c.level) is int and c.index is j
    with pytest.raises(ValueError, match=r"^level: expected an integer level in 1\.\.2, got np\.int64\(3\)$"):
        nest.create_plan().cache(args[1], level=np.int64(3))
