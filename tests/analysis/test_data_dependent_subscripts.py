"""A subscript read from an array (Accera's gather, `Data[Indices[i, j], k]`) is refused when the
logic is captured, saying it is not built: accpy proves every access in bounds before emitting
code, and a subscript's value is not known before run time."""
from __future__ import annotations

import pytest

import accpy as acc


def test_gather_subscript_is_refused_as_not_built():
    Data = acc.Array(shape=(5, 4), role=acc.Role.INPUT, name="Data")
    Indices = acc.Array(shape=(2, 3), role=acc.Role.INPUT, element_type=acc.ScalarType.index, name="Indices")
    Output = acc.Array(shape=(2, 3, 4), role=acc.Role.INPUT_OUTPUT, name="Output")
    nest = acc.Nest((2, 3, 4))
    i, j, k = nest.get_indices()
    with pytest.raises(acc.LogicError, match=r"index 0 of Data \(`Indices\[i, j\]`\) is read from an array \(a "
                                             r"gather\): subscripts that depend on data are not built in accpy"):
        @nest.iteration_logic
        def _():
            Output[i, j, k] = Data[Indices[i, j], k]


def test_other_non_affine_subscripts_keep_their_message():
    A = acc.Array(shape=(16,), role=acc.Role.INPUT_OUTPUT, name="A")
    nest = acc.Nest((4,))
    (i,) = nest.get_indices()
    with pytest.raises(acc.LogicError, match=r"index 0 of A \(`i \* i`\) is not an affine function"):
        @nest.iteration_logic
        def _():
            A[i * i] = 1.0
