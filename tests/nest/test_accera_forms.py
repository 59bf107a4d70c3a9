"""Accera forms accpy takes as Accera does: writes to INPUT arrays (a warning, then INPUT_OUTPUT),
float constants of another float type, `/` on indices, and the clear refusal of a nest built
inside another nest's logic."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.testing.asserts import run

F32, F64 = acc.ScalarType.float32, acc.ScalarType.float64


def _scale_input_in_place():
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(8,), name="A")
    nest = acc.Nest((8,))
    i = nest.get_indices()
    return A, nest, i


def test_write_to_input_warns_and_becomes_input_output(tmp_path):
    A, nest, i = _scale_input_in_place()
    with pytest.warns(acc.InputWriteWarning, match=r"statement 1 \(`A\[i\] \*= 2.0`, .*test_accera_forms.py:\d+\): "
                                                   r"writes to A, which is an INPUT array.*INPUT_OUTPUT"):
        @nest.iteration_logic
        def _():
            A[i] *= 2.0
    assert A.role is acc.Role.INPUT_OUTPUT and A.buffer.role == "input_output"
    assert issubclass(acc.InputWriteWarning, UserWarning)
    pkg = acc.Package()
    pkg.add(nest, args=(A,), base_name="scale")
    lib = pkg.build("scale", output_dir=tmp_path)
    a = np.arange(8, dtype=np.float32)
    lib.scale(a)
    np.testing.assert_array_equal(a, np.arange(8) * 2)
    ro = np.arange(8, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 'A' \(input_output\) is written by scale but the array is read-only"):
        lib.scale(ro)
    assert "input_output" in (tmp_path / "scale.hat").read_text()
    assert "const float" not in (tmp_path / "scale.h").read_text()


def test_write_to_input_as_an_error_is_the_old_refusal():
    A, nest, i = _scale_input_in_place()
    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.InputWriteWarning)
        with pytest.raises(acc.LogicError, match="writes to A, which is an INPUT array") as info:
            @nest.iteration_logic
            def _():
                A[i] = 1.0
    assert isinstance(info.value, acc.InputWriteWarning) and isinstance(info.value, acc.InputWriteError)
    assert A.role is acc.Role.INPUT  # nothing changed


def test_float64_constants_take_the_arrays_type():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8,))
    nest = acc.Nest((8,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] = A[i] * acc.Scalar(F64, value=2.5) + 0.1
        A[i] *= acc.cast(1.5, F64)

    a = np.arange(8, dtype=np.float32)
    want = (a * np.float32(2.5) + np.float32(0.1)) * np.float32(1.5)
    np.testing.assert_array_equal(run(nest, (A,), [a])[0], want)
    ref = a.copy()
    evaluate(nest, {A: ref})
    np.testing.assert_array_equal(ref, want)
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8,))
    n2 = acc.Nest((8,))
    k = n2.get_indices()

    @n2.iteration_logic
    def _():
        B[k] = acc.Scalar(F64, value=0.1)

    b = run(n2, (B,), [np.zeros(8, np.float32)])[0]
    assert b.dtype == np.float32 and (b == np.float32(0.1)).all()
    # a float64 *array* value still needs a cast (only constants are rounded implicitly)
    C = acc.Array(role=acc.Role.INPUT, element_type=F64, shape=(8,))
    n3 = acc.Nest((8,))
    m = n3.get_indices()
    with pytest.raises(acc.LogicError, match="mixed types"):
        @n3.iteration_logic
        def _():
            B[m] = C[m]


def test_true_division_of_indices_is_floor_division():
    # Accera's packing subscripts: Out[j, (i / 4) % 4, i % 4] = In[i, j]
    In = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(16, 3))
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(3, 4, 4))
    V = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.int32, shape=(16,))
    nest = acc.Nest((16, 3))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Out[j, (i / 4) % 4, i % 4] = In[i, j]
        V[i] = acc.cast((i - 5) / 4, acc.ScalarType.int32)  # in values too: floor ((-5) / 4 == -2)

    x = np.random.default_rng(0).random((16, 3), dtype=np.float32)
    got = run(nest, (In, Out, V), [x, np.zeros((3, 4, 4), np.float32), np.zeros(16, np.int32)])
    np.testing.assert_array_equal(got[1], x.T.reshape(3, 4, 4))
    np.testing.assert_array_equal(got[2], (np.arange(16) - 5) // 4)


def test_nest_inside_iteration_logic_is_refused_clearly():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(4, 4))
    outer = acc.Nest((4,))
    i = outer.get_indices()
    with pytest.raises(acc.LogicError, match="inside another nest's iteration logic .* not built"):
        @outer.iteration_logic
        def _():
            inner = acc.Nest((4,))
            j = inner.get_indices()

            @inner.iteration_logic
            def _():
                A[i, j] = 1.0
