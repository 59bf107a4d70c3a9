"""Kernels shared by the tests.

Each `make_*` returns a `Kernel`: what to pass to `Package.add` (source, args, base_name),
the runtime dimension values to call it with, a generator of inputs, and a numpy oracle
that maps inputs to the expected values of the written arrays. The `*_nest` functions return
bare nests, for tests that schedule them themselves.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import accpy as acc

F32 = acc.ScalarType.float32
FIRST = acc.Array.Layout.FIRST_MAJOR
LAST = acc.Array.Layout.LAST_MAJOR


@dataclass
class Kernel:
    source: object
    args: tuple
    base_name: str
    dims: dict = field(default_factory=dict)  # runtime dimension name -> value used in tests
    inputs: Callable = None  # rng -> {arg name: numpy array or scalar}, in argument order
    oracle: Callable = None  # inputs -> {written arg name: expected array}

    def call_args(self, rng) -> dict:
        return self.inputs(rng)


def _rand(rng, shape, dtype, order="C"):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        a = rng.uniform(-1, 1, size=shape).astype(dtype)
    else:
        a = rng.integers(-5, 6, size=shape).astype(dtype)
    return np.asfortranarray(a) if order == "F" else np.ascontiguousarray(a)


def make_matmul(M=16, N=20, K=12, tiles=None, k_split=None, dtype="float32", layout_a=FIRST, layout_b=FIRST,
                base_name="matmul") -> Kernel:
    """C (+)= A @ B; `tiles` = (ti, tj) tiles i and j, order (i, j, k, [kk,] ii, jj)."""
    et = acc.ScalarType(dtype) if isinstance(dtype, str) else dtype
    A = acc.Array(role=acc.Role.INPUT, name="A", shape=(M, K), element_type=et, layout=layout_a)
    B = acc.Array(role=acc.Role.INPUT, name="B", shape=(K, N), element_type=et, layout=layout_b)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, name="C", shape=(M, N), element_type=et)
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    sched = nest.create_schedule()
    if tiles:
        ii, jj = sched.tile({i: tiles[0], j: tiles[1]})
        if k_split:
            kk = sched.split(k, k_split)
            sched.reorder(i, j, k, kk, ii, jj)
        else:
            sched.reorder(i, j, k, ii, jj)
    np_dtype = np.dtype(et.dtype) if hasattr(et, "dtype") else np.dtype(dtype)
    order_a = "F" if layout_a is LAST else "C"
    order_b = "F" if layout_b is LAST else "C"

    def inputs(rng):
        return {"A": _rand(rng, (M, K), np_dtype, order_a), "B": _rand(rng, (K, N), np_dtype, order_b),
                "C": _rand(rng, (M, N), np_dtype)}

    def oracle(v):
        acc_t = np.float64 if np_dtype.kind == "f" else np.int64
        r = v["C"].astype(acc_t) + v["A"].astype(acc_t) @ v["B"].astype(acc_t)
        return {"C": r.astype(np_dtype)}

    return Kernel(sched, (A, B, C), base_name, {}, inputs, oracle)


def make_runtime_matmul(dims=(13, 9, 7), tiles=(4, 4), base_name="rt_matmul") -> Kernel:
    """C += A @ B with runtime sizes M, N, K (args: M, N, K, A, B, C) and non-dividing tiles."""
    M, N, K = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, name="A", shape=(M, K))
    B = acc.Array(role=acc.Role.INPUT, name="B", shape=(K, N))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, name="C", shape=(M, N))
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    sched = nest.create_schedule()
    ii, jj = sched.tile({i: tiles[0], j: tiles[1]})
    sched.reorder(i, j, k, ii, jj)
    m, n, kk = dims

    def inputs(rng):
        return {"M": m, "N": n, "K": kk, "A": _rand(rng, (m, kk), "f4"), "B": _rand(rng, (kk, n), "f4"),
                "C": _rand(rng, (m, n), "f4")}

    def oracle(v):
        return {"C": (v["C"].astype("f8") + v["A"].astype("f8") @ v["B"].astype("f8")).astype("f4")}

    return Kernel(sched, (M, N, K, A, B, C), base_name, {"M": m, "N": n, "K": kk}, inputs, oracle)


def make_conv1d_skewed(N=20, K=5, unroll_below=None, base_name="conv1d") -> Kernel:
    """Y[i] += X[i + k] * W[k], scheduled with skew(i, k)."""
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(N + K - 1,))
    W = acc.Array(role=acc.Role.INPUT, name="W", shape=(K,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(N,))
    nest = acc.Nest(shape=(N, K))
    i, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i + k] * W[k]

    sched = nest.create_schedule()
    sched.skew(i, k, unroll_loops_smaller_than=unroll_below)

    def inputs(rng):
        return {"X": _rand(rng, (N + K - 1,), "f4"), "W": _rand(rng, (K,), "f4"), "Y": _rand(rng, (N,), "f4")}

    def oracle(v):
        x, w = v["X"].astype("f8"), v["W"].astype("f8")
        y = v["Y"].astype("f8") + np.array([np.dot(x[t:t + K], w) for t in range(N)])
        return {"Y": y.astype("f4")}

    return Kernel(sched, (X, W, Y), base_name, {}, inputs, oracle)


def make_last_major(M=7, N=10, K=6, base_name="lm_matmul") -> Kernel:
    """C += A @ B with A LAST_MAJOR and B in explicit, padded strides (row stride N + 3)."""
    k = make_matmul(M, N, K, tiles=(3, 4), layout_a=LAST, layout_b=(N + 3, 1), base_name=base_name)
    stride = N + 3

    def inputs(rng):
        b_store = _rand(rng, (K, stride), "f4")
        b = np.lib.stride_tricks.as_strided(b_store, shape=(K, N), strides=(stride * 4, 4))
        return {"A": _rand(rng, (M, K), "f4", "F"), "B": b, "C": _rand(rng, (M, N), "f4")}

    k.inputs = inputs
    return k


def make_int_axpy(n=37, base_name="axpy_i32") -> Kernel:
    """Y[i] += a * X[i] with an int32 scalar argument a (args: X, Y, a) and a split by 8."""
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(n,), element_type=acc.ScalarType.int32)
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(n,), element_type=acc.ScalarType.int32)
    a = acc.Scalar(acc.ScalarType.int32, name="a")
    nest = acc.Nest(shape=(n,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += a * X[i]

    sched = nest.create_schedule()
    sched.split(i, 8)

    def inputs(rng):
        return {"X": _rand(rng, (n,), "i4"), "Y": _rand(rng, (n,), "i4"), "a": 3}

    def oracle(v):
        return {"Y": (v["Y"] + v["a"] * v["X"]).astype("i4")}

    return Kernel(sched, (X, Y, a), base_name, {}, inputs, oracle)


def mixed_matmul_nest(M, N, K, ta, tb, tc, cast_to=None):
    """(nest, (A, B, C), (i, j, k)) of C[i, j] += cast(A[i, k]) * cast(B[k, j]): A of `ta`, B of `tb`,
    C of `tc`, the operands cast to `cast_to` (default `tc`) before the product."""
    cast_to = cast_to or tc
    A = acc.Array(role=acc.Role.INPUT, element_type=ta, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=tb, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=tc, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(A[i, k], cast_to) * acc.cast(B[k, j], cast_to)

    return nest, (A, B, C), (i, j, k)


def stencil_nest(n=16):
    """(nest, (X, Y), (i, t)) of the 3-tap stencil Y[i] += X[i + t] * 0.5."""
    X = acc.Array(role=acc.Role.INPUT, shape=(n + 2,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n,), name="Y")
    nest = acc.Nest(shape=(n, 3))
    i, t = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i + t] * 0.5

    return nest, (X, Y), (i, t)


def make_flattened_band(H, W, band, base_name="band", target=None) -> Kernel:
    """Out[p] += In[p // W + ky, p % W + kx] over a 3 x 3 window, output pixels p = y * W + x in
    bands of `band`, In cached per (ky, kx): its block is the band's input rows, bounded in the
    band's first and last pixel (floor divisions; clamped at the array's ends). For `target`
    (default: this machine)."""
    In = acc.Array(role=acc.Role.INPUT, shape=(H + 2, W + 2), name="In")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(H * W,), name="Out")
    nest = acc.Nest(shape=(H * W, 3, 3))
    p, ky, kx = nest.get_indices()

    @nest.iteration_logic
    def _():
        Out[p] += In[p // W + ky, p % W + kx]

    s = nest.create_schedule()
    pp = s.split(p, band)
    s.reorder(p, ky, kx, pp)
    plan = s.create_plan(target)
    plan.cache(In, index=pp)

    def inputs(rng):
        return {"In": _rand(rng, (H + 2, W + 2), "float32"), "Out": _rand(rng, (H * W,), "float32")}

    def oracle(v):
        a = v["In"]
        return {"Out": v["Out"] + sum(a[y:y + H, x:x + W] for y in range(3) for x in range(3)).reshape(-1)}

    return Kernel(plan, (In, Out), base_name, {}, inputs, oracle)


def check_outputs(kernel: Kernel, values: dict, before: dict, rtol=1e-4, atol=1e-4) -> None:
    """Compare the written arrays in `values` with the oracle applied to `before` (copies)."""
    want = kernel.oracle(before)
    for name, w in want.items():
        got = values[name]
        if np.dtype(w.dtype).kind == "f":
            np.testing.assert_allclose(got, w, rtol=rtol, atol=atol, err_msg=f"{kernel.base_name}: {name}")
        else:
            np.testing.assert_array_equal(got, w, err_msg=f"{kernel.base_name}: {name}")


def copy_inputs(values: dict) -> dict:
    out = {}
    for k, v in values.items():
        if isinstance(v, np.ndarray):
            c = np.empty_like(v)  # keeps C/F order
            c[...] = v
            out[k] = c
        else:
            out[k] = v
    return out


def run(kernel: Kernel, fn, rng) -> dict:
    """Call `fn` (a built function) on fresh inputs and check the result with the oracle."""
    values = kernel.call_args(rng)
    before = copy_inputs(values)
    fn(*values.values())
    check_outputs(kernel, values, before)
    return values
