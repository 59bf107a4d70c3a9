"""OUTPUT arrays whose sizes the function computes (Accera's OUTPUT dimensions set at definition):
the function allocates them and hands them back (C: `T**` and `int64_t*`, freed with
`<package>_free`; Python: returned as numpy arrays; the reference evaluator allocates them too)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

ST = acc.ScalarType


def _range_function():
    Start, Limit, Delta = acc.Scalar(name="Start"), acc.Scalar(name="Limit"), acc.Scalar(name="Delta")
    OutputDim = acc.create_dimensions(role=acc.Role.OUTPUT)
    Output = acc.Array(shape=(OutputDim,), role=acc.Role.OUTPUT, name="Output")
    OutputDim.value = acc.floor((Limit - Start) / Delta)  # computed when the function starts
    nest = acc.Nest(OutputDim)
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        Output[i] = Start + acc.cast(i, ST.float32) * Delta

    return nest, (Start, Limit, Delta, Output, OutputDim)


def test_range_allocates_its_output(tmp_path):
    nest, args = _range_function()
    Start, Limit, Delta, Output, OutputDim = args
    pkg = acc.Package()
    fn = pkg.add(nest, args=args, base_name="Range")
    assert fn.name.startswith("Range_")
    lib = pkg.build("ranges", output_dir=tmp_path, python_module=False)
    for start, limit, delta in ((1.0, 5.0, 0.5), (0.0, 3.0, 1.0), (2.0, 2.0, 1.0)):
        got = lib.Range(start, limit, delta)
        want = np.arange(start, limit, delta, dtype="f4")
        assert got.dtype == np.float32 and got.flags.owndata
        np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match=r"Range\(\) takes 3 arguments \(Start, Limit, Delta\): the OUTPUT arrays"):
        lib.Range(1.0, 2.0)
    header = (tmp_path / "ranges.h").read_text()
    assert "float Start, float Limit, float Delta, float** Output, int64_t* OutputDim);" in header
    assert "void ranges_free(void* p);" in header
    assert "float** Output" in (tmp_path / "ranges.hat").read_text()
    vals = {Start: 1.0, Limit: 5.0, Delta: 0.5}
    evaluate(nest, vals)  # the reference evaluator allocates Output and adds it
    np.testing.assert_array_equal(vals[Output], np.arange(1.0, 5.0, 0.5, dtype="f4"))
    assert vals[OutputDim.size] == 8


C_CALLER = r"""
#include <stdio.h>
#include "ranges_c.h"
int main(void) {
    float* out = 0; int64_t n = -1;
    Range(1.0f, 5.0f, 0.5f, &out, &n);
    if (ranges_c_last_error()) { printf("error %s\n", ranges_c_last_error()); return 1; }
    printf("%lld", (long long)n);
    for (int64_t k = 0; k < n; ++k) printf(" %g", out[k]);
    printf(" %d\n", (int)(((unsigned long)out) % 64));
    ranges_c_free(out);
    return 0;
}
"""


@pytest.mark.skipif(sys.platform != "linux", reason="links with gcc on Linux")
def test_range_called_from_c(tmp_path):
    nest, args = _range_function()
    pkg = acc.Package()
    pkg.add(nest, args=args, base_name="Range")
    pkg.build("ranges_c", output_dir=tmp_path, python_module=False)
    (tmp_path / "main.c").write_text(C_CALLER)
    exe = tmp_path / "main"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(tmp_path / "main.c"), f"-I{tmp_path}", f"-L{tmp_path}",
                    "-lranges_c", f"-Wl,-rpath,{tmp_path}"], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert out == ["8", "1", "1.5", "2", "2.5", "3", "3.5", "4", "4.5", "0"]  # 64-byte aligned


def test_three_output_dimensions_from_the_inputs(tmp_path):
    DataDim0, DataDim1, Copies = acc.create_dimensions()
    OutputDim0, OutputDim1, OutputDim2 = acc.create_dimensions(role=acc.Role.OUTPUT)
    Data = acc.Array(shape=(DataDim0, DataDim1), role=acc.Role.INPUT, name="Data")
    Output = acc.Array(shape=(OutputDim0, OutputDim1, OutputDim2), role=acc.Role.OUTPUT, name="Output")
    OutputDim0.value = DataDim1  # the transpose, repeated Copies + 1 times
    OutputDim1.set(DataDim0)
    OutputDim2.value = Copies + 1
    nest = acc.Nest((OutputDim0, OutputDim1, OutputDim2))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        Output[i, j, k] = Data[j, i] * acc.cast(k + 1, ST.float32)

    pkg = acc.Package()
    pkg.add(nest, args=(Data, DataDim0, DataDim1, Copies, Output, OutputDim0, OutputDim1, OutputDim2),
            base_name="Spread")
    lib = pkg.build("spread", output_dir=tmp_path, python_module=False)
    data = np.random.default_rng(0).standard_normal((5, 4)).astype("f4")
    got = lib.Spread(data, 5, 4, 2)
    want = data.T[:, :, None] * np.arange(1, 4, dtype="f4")
    assert got.shape == (4, 5, 3)
    np.testing.assert_array_equal(got, want)
    vals = {Data: data, DataDim0: 5, DataDim1: 4, Copies: 2}
    evaluate(nest, vals)
    np.testing.assert_array_equal(vals[Output], want)


def test_output_dimension_with_a_value_at_construction(tmp_path):
    M, N = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, shape=(M, N), name="A")
    out_shape = tuple(acc.Dimension(role=acc.Role.OUTPUT, value=d, name=f"O{k}") for k, d in enumerate((M, N)))
    B = acc.Array(role=acc.Role.OUTPUT, shape=out_shape, name="B")
    nest = acc.Nest((M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] = A[i, j] * 2.0

    pkg = acc.Package()
    pkg.add(nest, args=(A, M, N, B) + out_shape, base_name="twice")
    lib = pkg.build("doubled", output_dir=tmp_path, python_module=False)
    a = np.arange(12, dtype="f4").reshape(3, 4)
    np.testing.assert_array_equal(lib.twice(a, 3, 4), a * 2)


def test_output_dimension_misuse():
    N = acc.Dimension(role=acc.Role.OUTPUT, name="N")
    with pytest.raises(ValueError, match=r"the OUTPUT dimension N is set in iteration logic, so its value is known "
                                         r"only when the function ends"):
        acc.Array(role=acc.Role.OUTPUT, shape=(N,), name="X").buffer
    M = acc.create_dimensions()
    N.value = M + 1
    with pytest.raises(ValueError, match="N.value: N is already defined"):
        N.value = 3
    with pytest.raises(TypeError, match=r"K.value: expected an int, an acc.Dimension, an acc.Scalar"):
        acc.Dimension(role=acc.Role.OUTPUT, name="K").value = "three"
    X = acc.Array(role=acc.Role.OUTPUT, shape=(N,), name="X")
    n = acc.Nest((N,))
    i = n.get_indices()
    with pytest.raises(acc.LogicError, match="N.value: N is already computed when the function starts"):
        @n.iteration_logic
        def _():
            N.value = 2
    with pytest.raises(acc.LogicError, match="reads X, an OUTPUT array"):
        @n.iteration_logic
        def _():
            X[i] += 1.0
    n2 = acc.Nest((N,))
    k = n2.get_indices()

    @n2.iteration_logic
    def _():
        X[k] = 1.0

    with pytest.raises(ValueError, match="args: X is sized by the OUTPUT dimension N, which is not among"):
        acc.Package().add(n2, args=(M, X), base_name="ones")
