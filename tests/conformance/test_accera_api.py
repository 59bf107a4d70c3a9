"""Small parts of Accera's API that its own tests use and accpy provides under Accera's names."""
import numpy as np

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
