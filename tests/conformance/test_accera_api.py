"""Small parts of Accera's API that its own tests use and accpy provides under Accera's names."""
import numpy as np
import pytest

import accpy as acc


def test_a_package_function_keeps_its_arguments_as_requested_args():
    A = acc.Array(role=acc.Role.INPUT, shape=(3, 4), layout=acc.Array.Layout.LAST_MAJOR)
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(3, 4), element_type=acc.ScalarType.int32)
    nest = acc.Nest((3, 4))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] += acc.cast(A[i, j], acc.ScalarType.int32)

    fn = acc.Package().add(nest, args=(A, B), base_name="f")
    assert fn.requested_args == (A, B)
    # Accera's tests make their numpy arguments from them
    made = [np.ndarray(p.shape, dtype=np.dtype(p.element_type.name), order=p.requested_layout.to_numpy_order())
            for p in fn.requested_args]
    assert made[0].flags.f_contiguous and made[0].dtype == np.float32
    assert made[1].flags.c_contiguous and made[1].dtype == np.int32


def test_layouts_name_their_numpy_order():
    assert acc.Array.Layout.FIRST_MAJOR.to_numpy_order() == "C"
    assert acc.Array.Layout.LAST_MAJOR.to_numpy_order() == "F"
    assert acc.Array.Layout.DEFERRED.to_numpy_order() is None


def test_runtime_sizes_can_be_left_out_when_the_arrays_give_them(tmp_path):
    """As hatlib calls Accera's packages: f(A, B) for f(N, M, A, B), N and M read from A's shape."""
    N, M = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, shape=(N, M))
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, M))
    nest = acc.Nest((N, M))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] += A[i, j] * 2.0

    pkg = acc.Package()
    pkg.add(nest, args=(N, M, A, B), base_name="twice")
    lib = pkg.build("twice", output_dir=tmp_path, python_module=False)
    a = np.arange(12, dtype="f4").reshape(3, 4)
    b = np.ones((3, 4), "f4")
    lib.twice(a, b)
    np.testing.assert_array_equal(b, 1 + 2 * a)
    lib.twice(3, 4, a, b)  # the sizes given, as before
    np.testing.assert_array_equal(b, 1 + 4 * a)
    with pytest.raises(ValueError):
        lib.twice(a, np.ones((3, 5), "f4"))  # B's shape disagrees with the sizes read from A
    with pytest.raises(TypeError, match="missing argument"):
        lib.twice(a)


def test_schedules_show_their_order_under_accera_private_name():
    nest = acc.Nest((4, 6))
    i, j = nest.get_indices()
    s = nest.create_schedule()
    jj = s.split(j, 3)
    s.reorder(j, i, jj)
    assert s._indices == [j, i, jj] == s.get_indices()
