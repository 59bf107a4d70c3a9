"""Index arguments (acc.Dimensions that size nothing, used in indices): the logic is accepted and
its bounds become preconditions of the function (analysis/preconditions.py)."""
import pytest

import accpy as acc
from accpy import Array, Dimension, Nest, Role


def _constraints(nest):
    return sorted(str(p.constraint) for p in nest.preconditions)


def test_positions_become_exact_preconditions():
    B = Array(role=Role.INPUT, shape=(12, 32))
    T = Array(role=Role.INPUT_OUTPUT, shape=(3, 16))
    j0, k0 = Dimension("j0"), Dimension("k0")
    nest = Nest([3, 16])
    k, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        T[k, j] = B[k + k0, j + j0]

    # k0 + k in [0, 12) for k < 3: 0 <= k0 <= 9; j0 + j in [0, 32) for j < 16: 0 <= j0 <= 16
    assert _constraints(nest) == sorted(["j0", "-j0 + 16", "k0", "-k0 + 9"])
    assert "index 0 of B" in nest.preconditions[0].why


def test_preconditions_with_a_scaled_position_and_a_runtime_extent():
    A = Array(role=Role.INPUT_OUTPUT, shape=(100,))
    p, n = Dimension("p"), Dimension("n")
    nest = Nest([n])
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[2 * p - i] = 1.0

    # smallest 2p - (n - 1) >= 0, largest 2p <= 99
    assert _constraints(nest) == sorted(["2*p - n + 1", "-2*p + 99"])


def test_an_index_of_another_nest_is_still_refused():
    A = Array(role=Role.INPUT_OUTPUT, shape=(8,))
    other = Nest([8])
    oi = other.get_indices()
    nest = Nest([8])

    with pytest.raises(acc.LogicError, match="not an index of this nest"):
        @nest.iteration_logic
        def _():
            A[oi] = 1.0


def test_a_position_under_a_condition_is_not_built():
    A = Array(role=Role.INPUT_OUTPUT, shape=(8,))
    p = Dimension()
    nest = Nest([4])
    i = nest.get_indices()

    with pytest.raises(acc.LogicError, match="uses an index argument under an _If condition"):
        @nest.iteration_logic
        def _():
            acc._If(i < 2, lambda: A.__setitem__(i + p, 1.0))
