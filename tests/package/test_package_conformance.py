"""Accera's package and plan forms (issue 32): CONST arrays among the arguments, deferred layouts
given as coefficients, emit_runtime_init_pack."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc


def test_const_array_among_the_arguments_is_an_input(tmp_path):
    data = np.arange(12, dtype="f4").reshape(3, 4)
    K = acc.Array(role=acc.Role.CONST, data=data, name="K")
    A = acc.Array(role=acc.Role.INPUT, shape=(3, 4), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(3, 4), name="O")
    n = acc.Nest((3, 4))
    i, j = n.get_indices()

    @n.iteration_logic
    def _():
        O[i, j] += A[i, j] * K[i, j]

    for mode in (acc.Package.Mode.RELEASE, acc.Package.Mode.DEBUG):
        pkg = acc.Package()
        pkg.add(n, args=(A, K, O), base_name="scaled")
        lib = pkg.build("constarg_" + mode.name.lower(), output_dir=tmp_path / mode.name, mode=mode,
                        python_module=False)
        header = (tmp_path / mode.name / f"constarg_{mode.name.lower()}.h").read_text()
        assert "(const float* A, const float* K, float* O)" in header
        a, k, o = np.ones((3, 4), "f4"), np.full((3, 4), 0.5, "f4"), np.zeros((3, 4), "f4")
        lib.scaled(a, k, o)
        np.testing.assert_array_equal(o, a * k)  # the caller's K, not the data given at definition
        c = (tmp_path / mode.name / f"constarg_{mode.name.lower()}.c").read_text()
        assert "static const float" not in c.split("end of the prelude")[-1]  # no built-in copy


def test_const_array_outside_the_arguments_keeps_its_data(tmp_path):
    data = np.arange(4, dtype="f4")
    K = acc.Array(role=acc.Role.CONST, data=data, name="K")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="O")
    n = acc.Nest((4,))
    i = n.get_indices()

    @n.iteration_logic
    def _():
        O[i] = K[i]

    pkg = acc.Package()
    pkg.add(n, args=(O,), base_name="copy")
    lib = pkg.build("constdata", output_dir=tmp_path, python_module=False)
    o = np.zeros(4, "f4")
    lib.copy(o)
    np.testing.assert_array_equal(o, data)


@pytest.mark.parametrize("layout", [(16, 1), (1, 16), "FIRST_MAJOR", "LAST_MAJOR"])
def test_deferred_layout_from_a_cache_with_coefficients(tmp_path, layout):
    lay = getattr(acc.Array.Layout, layout) if isinstance(layout, str) else layout
    matrix = np.random.default_rng(0).random((16, 16), dtype="f4")
    A = acc.Array(role=acc.Role.CONST, data=matrix, layout=acc.Array.Layout.DEFERRED, name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=matrix.shape, name="B")
    nest = acc.Nest(shape=matrix.shape)
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] += A[i, j]

    plan = nest.create_plan()
    AA = plan.cache(A, i, layout=lay)
    assert AA.layout == lay
    A.deferred_layout(cache=AA)
    assert A.layout == AA.layout
    with pytest.raises(ValueError, match="deferred_layout: the layout of A is already set"):
        A.deferred_layout(cache=AA)
    pkg = acc.Package()
    pkg.add(plan, args=(B,), base_name="deferred")
    lib = pkg.build("deferred_" + str(layout).translate(str.maketrans("(), ", "___x")), output_dir=tmp_path,
                    python_module=False)
    b = np.ones_like(matrix)
    lib.deferred(b)
    np.testing.assert_array_equal(b, np.float32(1) + matrix)


def test_cache_coefficients_in_another_order_are_refused():
    A = acc.Array(role=acc.Role.INPUT, shape=(4, 4, 4), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 4, 4), name="B")
    nest = acc.Nest(shape=(4, 4, 4))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j, k] += A[i, j, k]

    plan = nest.create_plan()
    with pytest.raises(ValueError, match=r"layout: the coefficients \(4, 1, 16\) are in neither first-major"):
        plan.cache(A, i, layout=(4, 1, 16))
    with pytest.raises(ValueError, match=r"layout: expected 3 coefficients"):
        plan.cache(A, i, layout=(4, 1))
    assert plan.cache(A, i, layout=(1, 4, 16)).storage_layout is acc.Array.Layout.LAST_MAJOR


def test_emit_runtime_init_pack_says_what_to_use_instead():
    A = acc.Array(role=acc.Role.INPUT, shape=(8, 8), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(8, 8), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 8), name="C")
    nest = acc.Nest((8, 8, 8))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    plan = nest.create_plan()
    with pytest.raises(NotImplementedError, match=r"emit_runtime_init_pack\(B, 'pack', 'packed_size'\): accpy "
                                                  r"does not emit separate packing functions.*plan.cache\(B"):
        plan.emit_runtime_init_pack(B, "pack", "packed_size")
    with pytest.raises(ValueError, match="packing_func_name: expected the name of the function to emit"):
        plan.emit_runtime_init_pack(B, "", "packed_size")
