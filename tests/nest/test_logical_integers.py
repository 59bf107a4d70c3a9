"""acc.logical_and / logical_or / logical_not on numbers (Accera's dsl_tests test_logical_operations):
an operand is true when non-zero; the result is 1 or 0 in the first operand's type (a condition
for boolean operands), in the reference evaluator and in compiled code."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.errors import LogicError
from accpy.nest.reference import evaluate

T = acc.ScalarType


def _nest(t, shape=(4, 5, 3)):
    M, N, S = shape
    A = acc.Array(role=acc.Role.INPUT, element_type=t, shape=(M, S))
    B = acc.Array(role=acc.Role.INPUT, element_type=t, shape=(S, N))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=t, shape=(M, N))
    nest = acc.Nest((M, N, S))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.logical_not(A[i, k])
        C[i, j] += acc.logical_and(A[i, k], B[k, j])
        C[i, j] += acc.logical_or(A[i, k], B[k, j])

    return nest, A, B, C


def _expected(a, b, c):
    na, nb = (a != 0).astype(np.int64), (b != 0).astype(np.int64)
    out = c.astype(np.int64)
    for k in range(a.shape[1]):
        x, y = na[:, k][:, None], nb[k, :][None, :]
        out += (1 - x) + (x & y) + (x | y)
    return out


@pytest.mark.parametrize("t", [T.int8, T.uint8, T.int16, T.int32, T.uint64, T.float32])
def test_numbers_are_tested_against_zero(t, tmp_path):
    nest, A, B, C = _nest(t)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 3, A.shape).astype(t.dtype)
    b = rng.integers(0, 3, B.shape).astype(t.dtype)
    c = rng.integers(0, 5, C.shape).astype(t.dtype)
    want = _expected(a, b, c)
    ref = c.copy()
    evaluate([nest], {A: a, B: b, C: ref})
    np.testing.assert_array_equal(ref.astype(np.int64), want)
    pkg = acc.Package()
    pkg.add(nest, args=(A, B, C), base_name="logical")
    pkg.build("logical_" + t.name, output_dir=tmp_path)
    m = acc.load(tmp_path / ("logical_" + t.name))
    got = c.copy()
    m.logical(a, b, got)
    np.testing.assert_array_equal(got, ref)


def test_result_types():
    A = acc.Array(role=acc.Role.INPUT, element_type=T.int16, shape=(2,))
    B = acc.Array(role=acc.Role.INPUT, element_type=T.int8, shape=(2,))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=T.int16, shape=(2,))
    seen = {}
    nest = acc.Nest((2,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        seen["not"] = acc.logical_not(A[i]).element_type
        seen["and"] = acc.logical_and(A[i], B[i]).element_type
        seen["or_bool"] = acc.logical_or(i < 1, B[i]).element_type
        seen["literal_first"] = acc.logical_and(1, B[i]).element_type
        seen["cond"] = acc.logical_and(i < 1, i > 0).element_type
        C[i] += acc.logical_not(A[i])

    assert seen == {"not": T.int16, "and": T.int16, "or_bool": T.bool, "literal_first": T.int8, "cond": T.bool}


def test_bool_arrays_keep_conditions(tmp_path):
    nest, A, B, C = _nest(T.bool, (3, 4, 2))
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 2, A.shape).astype(bool), rng.integers(0, 2, B.shape).astype(bool)
    c = np.zeros(C.shape, bool)
    ref = c.copy()
    evaluate([nest], {A: a, B: b, C: ref})
    pkg = acc.Package()
    pkg.add(nest, args=(A, B, C), base_name="logical_bool")
    pkg.build("logical_bool", output_dir=tmp_path)
    got = c.copy()
    acc.load(tmp_path / "logical_bool").logical_bool(a, b, got)
    np.testing.assert_array_equal(got, ref)


def test_non_numeric_operand_is_refused():
    A = acc.Array(role=acc.Role.INPUT, element_type=T.int8, shape=(2,))
    nest = acc.Nest((2,))
    i, = nest.get_indices()
    with pytest.raises(LogicError, match="cannot use str"):
        @nest.iteration_logic
        def _():
            acc.logical_not("x")
            A[i] = 1
