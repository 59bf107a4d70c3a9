"""OUTPUT dimensions: sizes a function computes and hands back (`int64_t*` in C)."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc


def _count_function():
    M = acc.create_dimensions()
    Blocks = acc.create_dimensions(role=acc.Role.OUTPUT)
    Last = acc.Dimension(role=acc.Role.OUTPUT, name="Last")
    A = acc.Array(role=acc.Role.INPUT, shape=(M,), element_type=acc.ScalarType.int32, name="A")
    n = acc.Nest(shape=(M,))
    i = n.get_indices()

    @n.iteration_logic
    def _():
        Blocks.value = (M + 3) // 4  # ceil(M / 4): a size computed from the inputs
        Last.value = A[i] * 2 + i  # from data: the last iteration's assignment wins

    return n, (A, M, Blocks, Last), (Blocks, Last)


def test_output_dimensions_are_computed_and_returned(tmp_path):
    n, args, (Blocks, Last) = _count_function()
    from accpy.nest.array import OutputDimension

    assert isinstance(Blocks, OutputDimension) and not isinstance(Blocks, acc.Dimension)
    assert Blocks.name == "Blocks" and Last.name == "Last" and Blocks.role is acc.Role.OUTPUT
    pkg = acc.Package()
    pkg.add(n, args=args, base_name="count")
    lib = pkg.build("count", output_dir=tmp_path)
    header = (tmp_path / "count.h").read_text()
    assert "int64_t M, int64_t* Blocks, int64_t* Last)" in header
    for m in (1, 4, 10):
        a = np.arange(m, dtype=np.int32) + 5
        blocks, last = np.zeros(1, np.int64), np.zeros(1, np.int64)
        lib.count(a, m, blocks, last)
        assert blocks[0] == -(-m // 4) and last[0] == a[-1] * 2 + (m - 1)


def test_output_dimension_positional_forms():
    N = acc.Dimension("N", acc.Role.OUTPUT)
    K = acc.Dimension(acc.Role.OUTPUT, "K")
    assert (N.name, K.name) == ("N", "K") and N.role is K.role is acc.Role.OUTPUT


def test_output_dimension_misuse_is_refused():
    N = acc.Dimension(role=acc.Role.OUTPUT, name="N")
    # (set at definition, an OUTPUT dimension sizes arrays: tests/package/test_output_arrays.py)
    with pytest.raises(ValueError, match="the OUTPUT dimension N is set in iteration logic"):
        acc.Array(role=acc.Role.OUTPUT, shape=(N,), name="X").buffer
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="A")
    n = acc.Nest(shape=(4,))
    i = n.get_indices()
    with pytest.raises(acc.LogicError, match="computed by the function: set it with `N.value = ...`"):
        @n.iteration_logic
        def _():
            A[i] = acc.cast(N.value, acc.ScalarType.float32)
    with pytest.raises(acc.LogicError, match="N.value: expected an integer expression, got float32"):
        @n.iteration_logic
        def _():
            N.value = A[i]


def test_inferred_names_that_cannot_name_c_are_spelled_as_c_names():
    Ä = acc.Array(role=acc.Role.INPUT, shape=(2,))  # a Python identifier, not a C one
    auto = acc.Array(role=acc.Role.INPUT, shape=(2,))  # a C keyword
    accpy_x = acc.Array(role=acc.Role.INPUT, shape=(2,))  # reserved with any suffix: a generated name
    assert (Ä.name, auto.name) == ("A", "auto_") and accpy_x.name.startswith("array")
