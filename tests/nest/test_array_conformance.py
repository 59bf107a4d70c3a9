"""Accera's array forms (issue 32): AllocateFlags, acc.inf sizes, shapes as lists, split
dimensions and index-dependent windows of views."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

ST = acc.ScalarType


def _build(nest, args, tmp_path, name):
    pkg = acc.Package()
    pkg.add(nest, args=args, base_name=name)
    return pkg.build(name, output_dir=tmp_path, python_module=False)


# -- AllocateFlags ---------------------------------------------------------------------------------

def test_allocate_flags_are_accera_s_members():
    F = acc.AllocateFlags
    assert [m.name for m in (F.NONE, F.GLOBAL, F.STACK, F.HEAP, F.THREAD_LOCAL)] == \
        ["NONE", "GLOBAL", "STACK", "HEAP", "THREAD_LOCAL"]
    A = acc.Array(role=acc.Role.TEMP, shape=(8,), flags=F.STACK)
    assert A.flags is F.STACK and acc.Array(role=acc.Role.INPUT, shape=(2,)).flags is F.NONE
    with pytest.raises(TypeError, match=r"flags: expected an acc.AllocateFlags .* got 'heap'"):
        acc.Array(role=acc.Role.TEMP, shape=(8,), flags="heap")
    with pytest.raises(ValueError, match="flags: an array is allocated either on the STACK or on the HEAP"):
        acc.Array(role=acc.Role.TEMP, shape=(8,), flags=F.STACK | F.HEAP)


@pytest.mark.parametrize("flags", ["NONE", "HEAP", "STACK", "GLOBAL", "THREAD_LOCAL"])
def test_temp_arrays_honour_heap_and_stack(tmp_path, flags):
    T = acc.Array(role=acc.Role.TEMP, shape=(32,), element_type=ST.int32, flags=getattr(acc.AllocateFlags, flags))
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(32,), element_type=ST.int32, name="O")
    n = acc.Nest((32,))
    i = n.get_indices()

    @n.iteration_logic
    def _():
        T[i] = acc.cast(i, ST.int32)
        O[i] = T[i] * 3

    lib = _build(n, (O,), tmp_path, "temp_" + flags.lower())
    o = np.zeros(32, np.int32)
    lib.__getattr__("temp_" + flags.lower())(o)
    np.testing.assert_array_equal(o, np.arange(32) * 3)
    c = (tmp_path / f"temp_{flags.lower()}.c").read_text().split("end of the prelude")[-1]
    on_heap = 'accpy_alloc_array("the temporary T"' in c
    assert on_heap == (flags == "HEAP")  # 128 bytes: a local array unless HEAP is asked for


# -- acc.inf: the last size taken from the nest -----------------------------------------------------

def test_unbounded_last_dimension_takes_the_nest_extent(tmp_path):
    with pytest.raises(ValueError, match=r"shape: only the last dimension can be acc.inf \(unbounded\), "
                                         r"got \[inf, inf\]"):
        acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(acc.inf, acc.inf))
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(10, acc.inf), name="A")
    assert A.shape[1] == acc.inf
    with pytest.raises(ValueError, match="the size is acc.inf"):
        A.buffer
    nest = acc.Nest(shape=(10, 16))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j] += A[i, j]

    assert A.shape == [10, 16]
    lib = _build(nest, (A,), tmp_path, "inf_test")
    a = np.arange(160, dtype="f4").reshape(10, 16)
    want = a * 2
    lib.inf_test(a)
    np.testing.assert_array_equal(a, want)


def test_unbounded_dimension_needs_a_plain_index():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, acc.inf), name="A")
    nest = acc.Nest(shape=(4, 4))
    i, j = nest.get_indices()
    with pytest.raises(acc.LogicError, match="the last dimension of A is acc.inf"):
        @nest.iteration_logic
        def _():
            A[i, j + 1] = 1.0


# -- Array.shape is a list -------------------------------------------------------------------------

def test_shape_is_a_list_as_in_accera():
    M, N = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, shape=(2, 3))
    assert isinstance(A.shape, list) and A.shape == [2, 3] and A.shape == (2, 3)
    assert A.shape + [M, N] == [2, 3, M, N] and [1] + A.shape == [1, 2, 3]
    assert A.shape + (4,) == [2, 3, 4] and (1,) + A.shape == (1, 2, 3)  # tuples as before
    rows, cols = A.shape
    assert (rows, cols, len(A.shape), A.shape[-1], list(A.shape)) == (2, 3, 2, 3, [2, 3])
    assert hash(A.shape) == hash((2, 3))
    s = A.shape
    s.append(9)
    assert A.shape == [2, 3]  # a copy
    nest = acc.Nest(A.shape + [4])  # usable wherever a shape is taken
    assert nest.get_shape() == [2, 3, 4]


# -- _split_dimension ------------------------------------------------------------------------------

def test_split_dimension_of_a_sub_array(tmp_path):
    N = 4
    Input = acc.Array(role=acc.Role.INPUT, shape=(N, N), name="Input")
    Output = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N * N + N,), name="Output")
    nest = acc.Nest(shape=(N, N))
    ti, tj = nest.get_indices()

    @nest.iteration_logic
    def _():
        packed = Output.sub_array(offsets=(N,), shape=(N * N,))
        split = packed._split_dimension(0, acc.cast(N, ST.index))
        assert split.shape == [N, N]
        split[tj, ti] = Input[ti, tj]

    x = np.random.default_rng(0).random((N, N), dtype="f4")
    ref = np.zeros(N * N + N, "f4")
    evaluate(nest, {Input: x, Output: ref})
    np.testing.assert_array_equal(ref[N:].reshape(N, N), x.T)
    lib = _build(nest, (Input, Output), tmp_path, "transpose")
    got = np.zeros(N * N + N, "f4")
    lib.transpose(x, got)
    np.testing.assert_array_equal(got, ref)


def test_repeated_split_dimensions(tmp_path):
    N, n = 4, 2
    Input = acc.Array(role=acc.Role.INPUT, shape=(N, N), name="Input")
    Output = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N * N,), name="Output")
    nest = acc.Nest(shape=(N // n, N // n, n, n))
    a, b, c, d = nest.get_indices()

    @nest.iteration_logic
    def _():
        s0 = Output._split_dimension(0, N)
        s1 = s0._split_dimension(1, n)
        s2 = s1._split_dimension(0, n)
        assert (s0.shape, s1.shape, s2.shape) == ([4, 4], [4, 2, 2], [2, 2, 2, 2])
        s2[a, b, d, c] = Input[a * n + c, b * n + d]

    x = np.arange(N * N, dtype="f4").reshape(N, N)
    want = np.zeros(N * N, "f4")
    for i in range(0, N, n):
        for j in range(0, N, n):
            for ii in range(n):
                for jj in range(n):
                    want[i * N + j * n + jj * n + ii] = x[i + ii, j + jj]
    lib = _build(nest, (Input, Output), tmp_path, "quadrants")
    got = np.zeros(N * N, "f4")
    lib.quadrants(x, got)
    np.testing.assert_array_equal(got, want)


def test_split_dimension_errors():
    A = acc.Array(role=acc.Role.INPUT, shape=(12,), name="A")
    M = acc.create_dimensions()
    with pytest.raises(NotImplementedError, match=r"split of A: size: a split size known only at run time"):
        A._split_dimension(0, M)
    with pytest.raises(ValueError, match=r"split of A: dim: expected a dimension of A \(0..0\), got 1"):
        A._split_dimension(1, 4)
    with pytest.raises(ValueError, match=r"split of A: size: expected an integer >= 1, got 0"):
        A._split_dimension(0, 0)
    assert A._split_dimension(0, 5).shape == [3, 5]  # ceil(12 / 5) rows; the root's bounds hold the rest
    nest = acc.Nest(shape=(3, 5))
    i, j = nest.get_indices()
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(3, 5))
    with pytest.raises(acc.LogicError, match=r"index 0 of A \(`5\*i \+ j`\) goes out of bounds: at iteration \(i=2, j=2\) it is 12"):
        @nest.iteration_logic
        def _():
            O[i, j] = A._split_dimension(0, 5)[i, j]


# -- sub_array of an index-dependent shape -------------------------------------------------------

def test_sub_array_shrinking_with_the_index(tmp_path):
    N = 64
    Input = acc.Array(role=acc.Role.INPUT, shape=(N,), name="Input")
    Output = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N,), name="Output")
    nest = acc.Nest(shape=(N,))
    idx = nest.get_indices()

    @nest.iteration_logic
    def _():
        sub = Input.sub_array(offsets=(idx,), shape=(N - idx,))
        Output[0] = sub[0]

    lib = _build(nest, (Input, Output), tmp_path, "shrink")
    x = np.random.default_rng(1).random(N, dtype="f4")
    out = x.copy()
    lib.shrink(x, out)
    assert out[0] == x[-1]


def test_sub_array_of_a_split_tail(tmp_path):
    M = 50
    Input = acc.Array(role=acc.Role.INPUT, shape=(M,), name="Input")
    Output = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M,), name="Output")
    nest = acc.Nest(shape=(M,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        start = (i // 16) * 16
        tile = Input.sub_array(offsets=(start,), shape=(acc.min(M - start, acc.cast(16, ST.index)),))
        Output[i] = tile[i % 16] * 2.0

    x = np.random.default_rng(2).random(M, dtype="f4")
    ref = np.zeros(M, "f4")
    evaluate(nest, {Input: x, Output: ref})
    np.testing.assert_array_equal(ref, x * 2)
    lib = _build(nest, (Input, Output), tmp_path, "tail")
    got = np.zeros(M, "f4")
    lib.tail(x, got)
    np.testing.assert_array_equal(got, ref)
    bad = acc.Nest(shape=(M,))
    k = bad.get_indices()
    with pytest.raises(acc.LogicError, match=r"index 0 of the sub_array of Input \(`k % 16`\) goes out of "
                                             r"bounds: at iteration \(k=8\) it is 8"):
        @bad.iteration_logic
        def _():
            start = (k // 16) * 16
            tile = Input.sub_array(offsets=(start,), shape=(acc.min(M - start, acc.cast(8, ST.index)),))
            Output[k] = tile[k % 16]
