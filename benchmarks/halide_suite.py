"""The automatic-scheduling suite's kernels in Halide, scheduled by Halide's own autoschedulers.

`BUILDERS[name](kernel) -> Program`: fresh Halide Funcs computing the kernel of auto_suite.py
(same sizes, same arithmetic, float32 or the int8 matmul's types). `compile_program(program,
autoscheduler, threads, out_dir) -> Compiled`: the pipelines scheduled by "Adams2019" or
"Mullapudi2016" (the plugins the `halide` wheel ships in `halide/lib64`, loaded with
`hl.load_plugin`, applied with `Pipeline.apply_autoscheduler` and `AutoschedulerParams`, its
"parallelism" the thread count) for the host, compiled ahead of time into a shared library
loaded into this process. All pipelines share one Halide runtime (a standalone runtime
library, loaded once): `set_threads(n)` sets its thread pool's size
(`halide_set_num_threads`), so one process measures one and two threads.
`Compiled.bind(data) -> run()`: a call running the whole kernel on buffers bound once;
`results` then holds its outputs by array name (to check against `kernel.reference`).

Halide's functions are pure: an array accpy updates in place (C += A @ B) is a Halide input and
a separate output of the same name. Halide's first dimension is the innermost: a numpy array
of shape (a, b, c) is the Halide buffer (c, b, a), so the algorithms below index backwards.
Intermediate arrays (2mm's tmp, 3mm's E and F, atax's tmp, gesummv's tmp) are internal Funcs
that Halide may schedule as it likes; only the final outputs are returned.

Time-iterated stencils (jacobi-1d, jacobi-2d, heat-3d, fdtd-2d): one pipeline of S time steps
unrolled into S Funcs (S the largest divisor of the step count up to `MAX_UNROLLED`), called
steps / S times, its input and output ping-ponging between two buffers. A Func over t with an
RDom update would keep every time step in memory (jacobi-2d: 3.4 GB) unless scheduled with
`fold_storage`, which the autoschedulers do not do. Boundary points keep their values (`select`
on the interior), inputs are read through `repeat_edge` so that the growing bounds of unrolled
steps stay inside them.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import halide as hl

AUTOSCHEDULERS = ("Adams2019", "Mullapudi2016")
MAX_UNROLLED = 8  # time steps per stencil pipeline
ALPHA, BETA = hl.f32(1.5), hl.f32(1.2)
_PLUGINS = {"Adams2019": "autoschedule_adams2019", "Mullapudi2016": "autoschedule_mullapudi2016"}
_loaded_plugins: set = set()
_runtime = {}


class HalideUnavailable(RuntimeError):
    """A Halide piece (plugin, runtime, compiler) is missing; the message says which."""


# ---------------------------------------------------------------- programs

@dataclass
class Pipe:
    """One Halide pipeline: its outputs (Funcs) and its inputs (ImageParams), in the compiled
    function's argument order (inputs, then outputs)."""

    outputs: list
    inputs: list


@dataclass
class Program:
    """The pipelines of one kernel and the calls that run it: `calls(data)` returns
    ([(pipe index, [numpy arrays: inputs then outputs])], {output name: the array holding it})."""

    pipes: list
    calls: Callable = field(repr=False)


def _param(name: str, shape: tuple, t=None) -> hl.ImageParam:
    """An ImageParam of a numpy array of `shape` (dimensions reversed), with its estimates."""
    p = hl.ImageParam(t or hl.Float(32), len(shape), name)
    for d, extent in enumerate(reversed(shape)):
        p.dim(d).set_estimate(0, int(extent))
    return p


def _estimate(f: hl.Func, shape: tuple) -> hl.Func:
    """Estimates of output `f` for a numpy array of `shape` (its pure vars, innermost first)."""
    for v, extent in zip(f.args(), reversed(shape)):
        f.set_estimate(v, 0, int(extent))
    return f


def _like(data: dict, *names) -> list:
    """Aligned output arrays shaped like `data`'s arrays `names` (see `Compiled.bind`)."""
    return [aligned(np.empty_like(data[n])) for n in names]


def _single(outputs: list, inputs: list, names: list, arg_names: list) -> Program:
    """A program of one pipeline called once: inputs `arg_names` from data, outputs `names`."""
    def calls(data):
        outs = _like(data, *names)
        return [(0, [data[n] for n in arg_names] + outs)], dict(zip(names, outs))
    return Program([Pipe(outputs, inputs)], calls)


def _matmul(name_c, shape_c, a, b, r, c_in, scale=None, t=None):
    """out(x, y...) = c_in(x, y...) + (scale *) sum_r a(r, y...) * b(x, r...)."""
    x, y = hl.Var("x"), hl.Var("y")
    out = hl.Func(name_c)
    out[x, y] = c_in(x, y)
    prod = a(r, y) * b(x, r)
    out[x, y] = out[x, y] + (scale * prod if scale is not None else prod)
    return _estimate(out, shape_c)


def gemm(k) -> Program:
    NI, NJ, NK = (k.sizes[n] for n in ("NI", "NJ", "NK"))
    C, A, B = _param("C", (NI, NJ)), _param("A", (NI, NK)), _param("B", (NK, NJ))
    r = hl.RDom([(0, NK)])
    out = _matmul("C_out", (NI, NJ), lambda r_, y: A[r_, y], lambda x, r_: B[x, r_], r.x,
                  lambda x, y: BETA * C[x, y], ALPHA)
    return _single([out], [C, A, B], ["C"], ["C", "A", "B"])


def _product(name, shape, a, b, depth, scale=None):
    """A Func name(x, y) = sum over depth of (scale *) a(r, y) * b(x, r), from zero."""
    r = hl.RDom([(0, depth)])
    return _matmul(name, shape, a, b, r.x, lambda x, y: hl.f32(0), scale)


def mm2(k) -> Program:
    NI, NJ, NK, NL = (k.sizes[n] for n in ("NI", "NJ", "NK", "NL"))
    A, B, C, D = _param("A", (NI, NK)), _param("B", (NK, NJ)), _param("C", (NJ, NL)), _param("D", (NI, NL))
    tmp = _product("tmp", (NI, NJ), lambda r, y: A[r, y], lambda x, r: B[x, r], NK, ALPHA)
    rr = hl.RDom([(0, NJ)])
    out = _matmul("D_out", (NI, NL), lambda r, y: tmp[r, y], lambda x, r: C[x, r], rr.x, lambda x, y: BETA * D[x, y])
    return _single([out], [A, B, C, D], ["D"], ["A", "B", "C", "D"])


def mm3(k) -> Program:
    NI, NJ, NK, NL, NM = (k.sizes[n] for n in ("NI", "NJ", "NK", "NL", "NM"))
    A, B = _param("A", (NI, NK)), _param("B", (NK, NJ))
    C, D = _param("C", (NJ, NM)), _param("D", (NM, NL))
    E = _product("E", (NI, NJ), lambda r, y: A[r, y], lambda x, r: B[x, r], NK)
    F = _product("F", (NJ, NL), lambda r, y: C[r, y], lambda x, r: D[x, r], NM)
    G = _product("G_out", (NI, NL), lambda r, y: E[r, y], lambda x, r: F[x, r], NJ)
    return _single([G], [A, B, C, D], ["G"], ["A", "B", "C", "D"])


def _dot(name, n, extent, term):
    """A 1-D Func name(i) = sum over r < extent of term(i, r), estimated over n."""
    i, r = hl.Var("i"), hl.RDom([(0, extent)])
    f = hl.Func(name)
    f[i] = hl.f32(0)
    f[i] = f[i] + term(i, r.x)
    return _estimate(f, (n,))


def atax(k) -> Program:
    M, N = k.sizes["M"], k.sizes["N"]
    A, x = _param("A", (M, N)), _param("x", (N,))
    tmp = _dot("tmp", M, N, lambda i, j: A[j, i] * x[j])
    y = _dot("y_out", N, M, lambda j, i: A[j, i] * tmp[i])
    return _single([y], [A, x], ["y"], ["A", "x"])


def bicg(k) -> Program:
    M, N = k.sizes["M"], k.sizes["N"]
    A, p, r = _param("A", (N, M)), _param("p", (M,)), _param("r", (N,))
    s = _dot("s_out", M, N, lambda j, i: r[i] * A[j, i])
    q = _dot("q_out", N, M, lambda i, j: A[j, i] * p[j])
    return _single([s, q], [A, p, r], ["s", "q"], ["A", "p", "r"])


def _plus_dot(name, n, extent, base, term):
    """name(i) = base(i), then += term(i, r) over r < extent."""
    i, r = hl.Var("i"), hl.RDom([(0, extent)])
    f = hl.Func(name)
    f[i] = base(i)
    f[i] = f[i] + term(i, r.x)
    return _estimate(f, (n,))


def mvt(k) -> Program:
    N = k.sizes["N"]
    A, x1, x2, y1, y2 = (_param(n, (N, N) if n == "A" else (N,)) for n in ("A", "x1", "x2", "y_1", "y_2"))
    o1 = _plus_dot("x1_out", N, N, lambda i: x1[i], lambda i, j: A[j, i] * y1[j])
    o2 = _plus_dot("x2_out", N, N, lambda i: x2[i], lambda i, j: A[i, j] * y2[j])
    return _single([o1, o2], [A, x1, x2, y1, y2], ["x1", "x2"], ["A", "x1", "x2", "y_1", "y_2"])


def gemver(k) -> Program:
    N = k.sizes["N"]
    A = _param("A", (N, N))
    u1, v1, u2, v2, x, w, y, z = (_param(n, (N,)) for n in ("u1", "v1", "u2", "v2", "x", "w", "y", "z"))
    c, rw = hl.Var("c"), hl.Var("rw")
    A2 = hl.Func("A_out")
    A2[c, rw] = A[c, rw] + u1[rw] * v1[c] + u2[rw] * v2[c]
    _estimate(A2, (N, N))
    xs = _plus_dot("xs", N, N, lambda i: x[i], lambda i, j: BETA * A2[i, j] * y[j])
    i = hl.Var("i")
    x2 = hl.Func("x_out")
    x2[i] = xs[i] + z[i]
    _estimate(x2, (N,))
    w2 = _plus_dot("w_out", N, N, lambda i_: w[i_], lambda i_, j: ALPHA * A2[j, i_] * x2[j])
    names = ["A", "u1", "v1", "u2", "v2", "x", "w", "y", "z"]
    return _single([A2, x2, w2], [A, u1, v1, u2, v2, x, w, y, z], ["A", "x", "w"], names)


def gesummv(k) -> Program:
    N = k.sizes["N"]
    A, B, x = _param("A", (N, N)), _param("B", (N, N)), _param("x", (N,))
    tmp = _dot("tmp", N, N, lambda i, j: A[j, i] * x[j])
    yb = _dot("yb", N, N, lambda i, j: B[j, i] * x[j])
    i = hl.Var("i")
    y = hl.Func("y_out")
    y[i] = ALPHA * tmp[i] + BETA * yb[i]
    _estimate(y, (N,))
    return _single([y], [A, B, x], ["y"], ["A", "B", "x"])


def doitgen(k) -> Program:
    NQ, NR, NP = k.sizes["NQ"], k.sizes["NR"], k.sizes["NP"]
    A, C4 = _param("A", (NR, NQ, NP)), _param("C4", (NP, NP))
    p, q, rr, s = hl.Var("p"), hl.Var("q"), hl.Var("r"), hl.RDom([(0, NP)])
    out = hl.Func("A_out")
    out[p, q, rr] = hl.f32(0)
    out[p, q, rr] = out[p, q, rr] + A[s.x, q, rr] * C4[p, s.x]
    _estimate(out, (NR, NQ, NP))
    return _single([out], [A, C4], ["A"], ["A", "C4"])


def batched_matmul(k) -> Program:
    Bt, M, N, K = (k.sizes[n] for n in ("BATCH", "M", "N", "K"))
    C, A, B = _param("C", (Bt, M, N)), _param("A", (Bt, M, K)), _param("B", (Bt, K, N))
    x, y, b, r = hl.Var("x"), hl.Var("y"), hl.Var("b"), hl.RDom([(0, K)])
    out = hl.Func("C_out")
    out[x, y, b] = C[x, y, b]
    out[x, y, b] = out[x, y, b] + A[r.x, y, b] * B[x, r.x, b]
    _estimate(out, (Bt, M, N))
    return _single([out], [C, A, B], ["C"], ["C", "A", "B"])


def transposed_matmul(k) -> Program:
    M, N, K = (k.sizes[n] for n in ("M", "N", "K"))
    C, A, B = _param("C", (M, N)), _param("A", (K, M)), _param("B", (K, N))
    r = hl.RDom([(0, K)])
    out = _matmul("C_out", (M, N), lambda r_, y: A[y, r_], lambda x, r_: B[x, r_], r.x, lambda x, y: C[x, y])
    return _single([out], [C, A, B], ["C"], ["C", "A", "B"])


def sgemm(k) -> Program:
    M, N, K = (k.sizes[n] for n in ("M", "N", "K"))
    C, A, B = _param("C", (M, N)), _param("A", (M, K)), _param("B", (K, N))
    r = hl.RDom([(0, K)])
    out = _matmul("C_out", (M, N), lambda r_, y: A[r_, y], lambda x, r_: B[x, r_], r.x, lambda x, y: C[x, y])
    return _single([out], [C, A, B], ["C"], ["C", "A", "B"])


def int8_matmul(k) -> Program:
    M, N, K = (k.sizes[n] for n in ("M", "N", "K"))
    C = _param("C", (M, N), hl.Int(32))
    A, B = _param("A", (M, K), hl.UInt(8)), _param("B", (K, N), hl.Int(8))
    r = hl.RDom([(0, K)])
    out = _matmul("C_out", (M, N), lambda r_, y: hl.i32(A[r_, y]), lambda x, r_: hl.i32(B[x, r_]), r.x,
                  lambda x, y: C[x, y])
    return _single([out], [C, A, B], ["C"], ["C", "A", "B"])


def conv3x3(k) -> Program:
    H, W, C, K = (k.sizes[n] for n in ("H", "W", "C", "K"))
    I, Wt, O = _param("I", (H + 2, W + 2, C)), _param("Wt", (3, 3, C, K)), _param("O", (H, W, K))
    co, w, h, r = hl.Var("co"), hl.Var("w"), hl.Var("h"), hl.RDom([(0, C), (0, 3), (0, 3)])
    out = hl.Func("O_out")
    out[co, w, h] = O[co, w, h]
    out[co, w, h] = out[co, w, h] + I[r.x, w + r.y, h + r.z] * Wt[co, r.x, r.y, r.z]
    _estimate(out, (H, W, K))
    return _single([out], [I, Wt, O], ["O"], ["I", "Wt", "O"])


def depthwise3x3(k) -> Program:
    H, W, C = (k.sizes[n] for n in ("H", "W", "C"))
    I, Wt, O = _param("I", (H + 2, W + 2, C)), _param("Wt", (3, 3, C)), _param("O", (H, W, C))
    c, w, h, r = hl.Var("c"), hl.Var("w"), hl.Var("h"), hl.RDom([(0, 3), (0, 3)])
    out = hl.Func("O_out")
    out[c, w, h] = O[c, w, h]
    out[c, w, h] = out[c, w, h] + I[c, w + r.x, h + r.y] * Wt[c, r.x, r.y]
    _estimate(out, (H, W, C))
    return _single([out], [I, Wt, O], ["O"], ["I", "Wt", "O"])


# ---------------------------------------------------------------- time-iterated stencils

def steps_per_call(total: int, step: int = 1) -> int:
    """The largest divisor of `total` up to MAX_UNROLLED that is a multiple of `step` (stencil
    steps in one pipeline)."""
    return max(s for s in range(step, min(total, MAX_UNROLLED) + 1, step) if total % s == 0)


def _ping_pong(pipe: Pipe, calls: int, inputs_of: Callable, names: list) -> Program:
    """A program calling `pipe` `calls` times, each call's outputs the next call's inputs
    (`inputs_of(data, call, state)` gives the arguments before the state arrays)."""
    def run_calls(data):
        bufs = ([data[n] for n in names], _like(data, *names))
        out = [(0, inputs_of(data, c) + bufs[c % 2] + bufs[(c + 1) % 2]) for c in range(calls)]
        return out, dict(zip(names, bufs[calls % 2]))
    return Program([pipe], run_calls)


def _ring_stencil(k, shape: tuple, update: Callable) -> Program:
    """2 * TSTEPS half-steps over the ring X[2, *shape]: X[(s+1)%2] = update(X[s%2]) inside,
    boundary points kept; `update(cur, *vars)` is the new interior value."""
    total = 2 * k.sizes["TSTEPS"]
    S = steps_per_call(total, 2)  # even: X[0] and X[1] end where they started
    full = (2,) + tuple(shape)
    X = _param("X", full)
    edge = hl.BoundaryConditions.repeat_edge(X)
    vs = [hl.Var(f"v{d}") for d in range(len(shape))]  # innermost (numpy's last axis) first
    cur = hl.Func("s0_cur")
    cur[vs] = edge[vs + [0]]
    prev = hl.Func("s0_prev")
    prev[vs] = edge[vs + [1]]
    inside = None
    for v, extent in zip(vs, reversed(shape)):
        cond = hl.logical_not((v < 1) | (v > extent - 2))
        inside = cond if inside is None else inside & cond
    for s in range(S):
        new = hl.Func(f"s{s + 1}")
        new[vs] = hl.select(inside, update(cur, *vs), prev[vs])
        cur, prev = new, cur
    c = hl.Var("c")
    out = hl.Func("X_out")
    out[vs + [c]] = hl.select(c == 0, cur[vs], prev[vs])
    _estimate(out, full)
    return _ping_pong(Pipe([out], [X]), total // S, lambda data, c_: [], ["X"])


def jacobi_1d(k) -> Program:
    return _ring_stencil(k, (k.sizes["N"],), lambda a, i: hl.f32(0.33333) * (a[i - 1] + a[i] + a[i + 1]))


def jacobi_2d(k) -> Program:
    N = k.sizes["N"]
    return _ring_stencil(k, (N, N), lambda a, j, i: hl.f32(0.2) * (a[j, i] + a[j - 1, i] + a[j + 1, i] + a[j, i + 1]
                                                           + a[j, i - 1]))


def heat_3d(k) -> Program:
    N = k.sizes["N"]

    Q, TWO = hl.f32(0.125), hl.f32(2.0)

    def upd(a, z, y, x):  # z: numpy's last axis
        c = a[z, y, x]
        return (Q * (a[z, y, x + 1] - TWO * c + a[z, y, x - 1]) + Q * (a[z, y + 1, x] - TWO * c + a[z, y - 1, x])
                + Q * (a[z + 1, y, x] - TWO * c + a[z - 1, y, x]) + c)

    return _ring_stencil(k, (N, N, N), upd)


def fdtd_2d(k) -> Program:
    TMAX, NX, NY = k.sizes["TMAX"], k.sizes["NX"], k.sizes["NY"]
    S = steps_per_call(TMAX)
    ex0, ey0, hz0 = (_param(n, (NX, NY)) for n in ("ex", "ey", "hz"))
    fict = _param("fict", (S,))
    x, y = hl.Var("x"), hl.Var("y")  # x: j < NY, y: i < NX
    ex, ey, hz = (hl.BoundaryConditions.repeat_edge(p) for p in (ex0, ey0, hz0))
    for s in range(S):
        ey1, ex1, hz1 = hl.Func(f"ey{s}"), hl.Func(f"ex{s}"), hl.Func(f"hz{s}")
        ey1[x, y] = hl.select(y == 0, fict[s], ey[x, y] - hl.f32(0.5) * (hz[x, y] - hz[x, y - 1]))
        ex1[x, y] = hl.select(x >= 1, ex[x, y] - hl.f32(0.5) * (hz[x, y] - hz[x - 1, y]), ex[x, y])
        hz1[x, y] = hl.select((x < NY - 1) & (y < NX - 1),
                              hz[x, y] - hl.f32(0.7) * (ex1[x + 1, y] - ex1[x, y] + ey1[x, y + 1] - ey1[x, y]), hz[x, y])
        ex, ey, hz = ex1, ey1, hz1
    outs = []
    for name, f in (("ex", ex), ("ey", ey), ("hz", hz)):
        o = hl.Func(name + "_out")
        o[x, y] = f[x, y]
        outs.append(_estimate(o, (NX, NY)))
    return _ping_pong(Pipe(outs, [fict, ex0, ey0, hz0]), TMAX // S,
                      lambda data, c: [data["fict"][c * S:(c + 1) * S]], ["ex", "ey", "hz"])


#: Halide builders by kernel name (every kernel of auto_suite.py is expressible)
BUILDERS = {
    "gemm": gemm, "2mm": mm2, "3mm": mm3, "atax": atax, "bicg": bicg, "mvt": mvt, "gemver": gemver,
    "gesummv": gesummv, "doitgen": doitgen, "jacobi-1d": jacobi_1d, "jacobi-2d": jacobi_2d, "heat-3d": heat_3d,
    "fdtd-2d": fdtd_2d, "batched_matmul": batched_matmul, "transposed_matmul": transposed_matmul,
    "conv3x3": conv3x3, "depthwise3x3": depthwise3x3, "int8_matmul": int8_matmul, "sgemm_1024": sgemm,
    "sgemm_1000": sgemm,
}


# ---------------------------------------------------------------- compiling and calling

class _Dim(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("extent", ctypes.c_int32), ("stride", ctypes.c_int32),
                ("flags", ctypes.c_uint32)]


class _Type(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Buffer(ctypes.Structure):
    """HalideRuntime.h's halide_buffer_t."""
    _fields_ = [("device", ctypes.c_uint64), ("device_interface", ctypes.c_void_p),
                ("host", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("type", _Type),
                ("dimensions", ctypes.c_int32), ("dim", ctypes.POINTER(_Dim)), ("padding", ctypes.c_void_p)]


_CODES = {"i": 0, "u": 1, "f": 2}


def aligned(a: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A C-contiguous copy of `a` whose data starts on an `alignment`-byte boundary."""
    raw = np.empty(a.nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def buffer_of(a: np.ndarray) -> tuple:
    """(halide_buffer_t over `a`'s memory, dims array to keep alive): dimension 0 is the last axis."""
    if a.dtype.kind not in _CODES:
        raise TypeError(f"array: expected an integer or float numpy array, got {a.dtype}")
    dims = (_Dim * a.ndim)(*[_Dim(0, a.shape[ax], a.strides[ax] // a.itemsize, 0) for ax in reversed(range(a.ndim))])
    buf = _Buffer(0, None, a.ctypes.data, 0, _Type(_CODES[a.dtype.kind], a.itemsize * 8, 1), a.ndim, dims, None)
    return buf, dims


def load_plugin(autoscheduler: str) -> None:
    """Load the wheel's plugin of `autoscheduler` ("Adams2019" or "Mullapudi2016") once."""
    if autoscheduler not in _PLUGINS:
        raise ValueError(f"autoscheduler: expected one of {', '.join(_PLUGINS)}, got {autoscheduler!r}")
    if autoscheduler in _loaded_plugins:
        return
    path = os.path.join(hl.install_dir(), "lib64", f"lib{_PLUGINS[autoscheduler]}.so")
    if not os.path.exists(path):
        raise HalideUnavailable(f"the halide wheel has no {path}")
    hl.load_plugin(path)
    _loaded_plugins.add(autoscheduler)


def host_target() -> hl.Target:
    """The host, as Halide detects it (its features: AVX2, FMA, ... as the CPU has them)."""
    return hl.get_host_target()


def runtime(out_dir: str) -> ctypes.CDLL:
    """The one standalone Halide runtime of this process (thread pool included), loaded global."""
    if "lib" not in _runtime:
        obj, so = os.path.join(out_dir, "halide_runtime.o"), os.path.join(out_dir, "libhalide_runtime.so")
        hl.compile_standalone_runtime(obj, host_target())
        subprocess.run(["gcc", "-shared", "-o", so, obj, "-lpthread", "-ldl"], check=True)
        lib = ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL)
        lib.halide_set_num_threads.argtypes, lib.halide_set_num_threads.restype = [ctypes.c_int], ctypes.c_int
        _runtime["lib"] = lib
    return _runtime["lib"]


def set_threads(n: int) -> None:
    """The Halide thread pool's size (all pipelines of this process)."""
    if "lib" not in _runtime:
        raise HalideUnavailable("set_threads: no pipeline compiled yet (the runtime is loaded with the first)")
    _runtime["lib"].halide_set_num_threads(int(n))


@dataclass
class Compiled:
    """A program's pipelines as native functions; `schedules` holds each pipeline's schedule as
    the autoscheduler wrote it."""

    program: Program
    functions: list
    schedules: list
    seconds_scheduling: float

    def bind(self, data: dict):
        """(run, results): `run()` runs the whole kernel on buffers made once over 64-byte
        aligned copies of `data`'s arrays (and outputs allocated here); `results` are the
        outputs by array name. Aligned: code Halide vectorizes for AVX crashes (measured, 5 of 6
        runs of bicg) on numpy's 16-byte aligned small arrays, as Halide's own buffers are
        aligned."""
        calls, results = self.program.calls({n: aligned(a) for n, a in data.items()})
        bound = []
        for index, arrays in calls:
            bufs = [buffer_of(a) for a in arrays]
            ptrs = [ctypes.pointer(b) for b, _ in bufs]
            bound.append((self.functions[index], ptrs, bufs, arrays))

        def run():
            for fn, ptrs, _, _ in bound:
                rc = fn(*ptrs)
                if rc != 0:
                    raise RuntimeError(f"a Halide pipeline returned error {rc}")

        return run, results


@contextlib.contextmanager
def _stdout_to_stderr():
    """Halide's compiler prints its warnings on file descriptor 1: send them to 2 meanwhile, so
    that a benchmark's standard output stays its JSON lines."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def compile_program(program: Program, autoscheduler: str, threads: int, out_dir: str, tag: str) -> Compiled:
    """See `_compile`; Halide's messages go to standard error."""
    with _stdout_to_stderr():
        return _compile(program, autoscheduler, threads, out_dir, tag)


def _compile(program: Program, autoscheduler: str, threads: int, out_dir: str, tag: str) -> Compiled:
    """Schedule every pipeline of `program` with `autoscheduler` for `threads` threads and the
    host, compile it ahead of time (object file, without a runtime), link it into a shared
    library and load it next to the shared runtime. `tag` names the files (unique per call)."""
    import time

    load_plugin(autoscheduler)
    target = host_target()
    runtime(out_dir)
    params = {"parallelism": str(threads)}
    functions, schedules, spent = [], [], 0.0
    for n, pipe in enumerate(program.pipes):
        pipeline = hl.Pipeline(pipe.outputs)
        t0 = time.perf_counter()
        result = pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(autoscheduler, params))
        spent += time.perf_counter() - t0
        schedules.append(result.schedule_source)
        name = f"{tag}_{n}"
        obj, so = os.path.join(out_dir, name + ".o"), os.path.join(out_dir, f"lib{name}.so")
        pipeline.compile_to({hl.OutputFileType.object: obj}, pipe.inputs, name,
                            target.with_feature(hl.TargetFeature.NoRuntime))
        subprocess.run(["gcc", "-shared", "-o", so, obj], check=True)
        fn = getattr(ctypes.CDLL(so), name)
        fn.argtypes = [ctypes.POINTER(_Buffer)] * (len(pipe.inputs) + len(pipe.outputs))
        fn.restype = ctypes.c_int
        functions.append(fn)
    return Compiled(program, functions, schedules, spent)
