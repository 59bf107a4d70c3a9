"""acc.Scalar as Accera has it: the type of every scalar logic value (unit_tests test_scalar_conditionals,
test_conditional_function), `Scalar(type=...)`, and scalars held in memory: INPUT_OUTPUT / OUTPUT
arguments and TEMP variables (dsl_tests test_output_array_range_node1/2), checked against numpy and
the reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.errors import LogicError, ScheduleError
from accpy.nest.array import is_scalar_argument
from accpy.nest.reference import evaluate

T = acc.ScalarType
R = acc.Role


def _build(pkg, name, tmp_path):
    pkg.build(name, output_dir=tmp_path)
    return acc.load(tmp_path / name)


def test_every_logic_value_is_a_scalar():
    s = acc.Scalar(42)
    for v in (s < 10, s > 10, s <= 10, s >= 10, s == 10, s != 10, acc.as_index(3)):
        assert isinstance(v, acc.Scalar)
    A = acc.Array(role=R.INPUT_OUTPUT, shape=(4,))
    N = acc.create_dimensions()
    nest = acc.Nest((4,))
    i, = nest.get_indices()
    seen = []

    @nest.iteration_logic
    def _():
        seen.extend([isinstance(i, acc.Scalar), isinstance(A[i], acc.Scalar), isinstance(A[i] * 2.0, acc.Scalar)])
        A[i] += 1.0

    assert seen == [True, True, True]
    # arrays and runtime sizes are not; only Scalar objects are scalar arguments
    assert not isinstance(A, acc.Scalar) and not isinstance(N, acc.Scalar) and not isinstance(3, acc.Scalar)
    assert is_scalar_argument(s) and not is_scalar_argument(i) and not is_scalar_argument(s < 10)


def test_an_index_is_not_an_argument():
    A = acc.Array(role=R.INPUT_OUTPUT, shape=(4,))
    nest = acc.Nest((4,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1.0

    with pytest.raises(TypeError, match=r"args.*expected acc.Array, acc.Dimension or acc.Scalar, got Index"):
        acc.Package().add(nest, args=(A, i))


def test_type_keyword_and_roles():
    assert acc.Scalar(type=T.int16).element_type is T.int16
    with pytest.raises(ValueError, match="give the type once"):
        acc.Scalar(T.int8, type=T.int16)
    with pytest.raises(ValueError, match="a constant scalar is one with a value"):
        acc.Scalar(T.int8, R.CONST)
    with pytest.raises(ValueError, match="a TEMP scalar gets its value from the caller or from logic"):
        acc.Scalar(T.int8, R.TEMP, value=3)
    with pytest.raises(TypeError, match="as_index: expected an integer, got float"):
        acc.as_index(2.5)
    t = acc.Scalar(type=T.float32, role=R.TEMP)
    assert isinstance(t, acc.Array) and t.shape == [1] and t.role is R.TEMP and t.name == "t"
    assert repr(t) == "Scalar(t: TEMP float32)"


def _range_nest():
    delta = acc.Scalar(T.float32)
    N = acc.create_dimensions()
    out = acc.Array(shape=(N,), role=R.INPUT_OUTPUT)
    cur = acc.Scalar(T.float32, R.INPUT_OUTPUT)
    nest = acc.Nest([N])
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        out[i] = cur
        cur.set(cur + delta)

    return nest, (N, out, cur, delta)


def test_input_output_scalar_is_updated_by_the_function(tmp_path):
    nest, args = _range_nest()
    N, out, cur, delta = args
    pkg = acc.Package()
    pkg.add(nest, args=args, base_name="arange")
    m = _build(pkg, "arange", tmp_path)
    got, c = np.zeros(8, np.float32), np.array([1.0], np.float32)
    m.arange(8, got, c, np.float32(0.5))
    np.testing.assert_array_equal(got, np.arange(1.0, 5.0, 0.5, dtype=np.float32))
    assert c[0] == 5.0
    ref, rc = np.zeros(8, np.float32), np.array([1.0], np.float32)
    evaluate([nest], {N: 8, out: ref, cur: rc, delta: 0.5})
    np.testing.assert_array_equal(ref, got)
    np.testing.assert_array_equal(rc, c)


def test_order_dependence_through_a_scalar_is_checked():
    nest, args = _range_nest()
    plan = nest.create_schedule().create_plan()
    i, = nest.get_indices()
    with pytest.raises(ScheduleError, match="race"):
        plan.parallelize(i)


def test_temp_scalar_is_a_zeroed_local(tmp_path):
    A = acc.Array(role=R.INPUT, shape=(6,))
    B = acc.Array(role=R.INPUT_OUTPUT, shape=(6,))
    total = acc.Scalar(type=T.float32, role=R.TEMP)
    nest = acc.Nest((6,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        total.set(total + A[i])
        B[i] = total

    pkg = acc.Package()
    pkg.add(nest, args=(A, B), base_name="prefix")
    m = _build(pkg, "prefix", tmp_path)
    a = np.arange(1, 7, dtype=np.float32)
    for _ in range(2):  # zero again at every call
        b = np.zeros(6, np.float32)
        m.prefix(a, b)
        np.testing.assert_array_equal(b, np.cumsum(a))


def test_output_scalar_receives_the_last_write(tmp_path):
    A = acc.Array(role=R.INPUT, element_type=T.int32, shape=(5,))
    last = acc.Scalar(T.int32, R.OUTPUT)
    nest = acc.Nest((5,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        last.set(A[i] * 2)

    pkg = acc.Package()
    pkg.add(nest, args=(A, last), base_name="last")
    m = _build(pkg, "last", tmp_path)
    got = np.zeros(1, np.int32)
    m.last(np.array([3, 1, 4, 1, 5], np.int32), got)
    assert got[0] == 10


def test_input_scalar_is_read_only():
    s = acc.Scalar(T.float32)
    A = acc.Array(role=R.INPUT_OUTPUT, shape=(2,))
    nest = acc.Nest((2,))
    i, = nest.get_indices()
    with pytest.raises(LogicError, match=r"s.set\(...\): s is an INPUT scalar, passed by value and read-only"):
        @nest.iteration_logic
        def _():
            s.set(A[i])
