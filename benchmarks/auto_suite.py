"""The automatic-scheduling benchmark's kernels, written as accpy nests (issue 31).

Each kernel is a `Kernel` record: its `name`, its `sizes` (a dict, the constructor's keyword
arguments, so tests build tiny instances), `stages()` (the `(nest, args)` pairs in program
order: one function per stage, called in that order; stages of one kernel share their
`acc.Array` objects, and an array's name is its key in `data`), `data(rng)` (fresh inputs by
array name), `reference(data)` (numpy, float64: the expected final values of the arrays named
by `outputs`), `flops` (the operations of one call as PolyBench's statements write them: a
product and a sum each count one; for int8 matmul, integer multiply-adds counted two) and
`halide` (the builder in halide_suite.py, or None where Halide cannot express the kernel or the
`halide` wheel is not installed).

Guarantees: every kernel is float32 except int8 matmul (uint8 x int8 -> int32); stages keep
PolyBench/C 4.2's arithmetic and order of accumulation (initializations that PolyBench does
inside the kernel, such as `tmp[i] = 0`, are stages of their own, so that repeated calls compute
the same thing); `reference` never changes its argument. `default_plan` also takes a schedule.

Deviations from PolyBench, and why:
- inputs are uniform random in [0, 1) (PolyBench's formulas like (i*j+1)%n/n are not needed to
  measure speed); alpha = 1.5 and beta = 1.2 as in PolyBench;
- time-iterated stencils (jacobi-1d, jacobi-2d, heat-3d) keep A and B in one ring buffer
  X[2, ...] (X[0] is A, X[1] is B) and run 2 * TSTEPS half-steps s, X[(s + 1) % 2] from
  X[s % 2]: PolyBench's two statements per time step are the even and odd half-steps;
- doitgen's `sum[p]` (one row per (r, q)) is a whole [NR, NQ, NP] array, so that its three
  loops are three nests;
- fdtd-2d's four statements per time step are one nest over (t, i, j), hz's update shifted by
  one row and column (fdtd_2d's docstring says why every value stays PolyBench's): accpy's
  fused schedules mean their nests one after the other, not interleaved per t;
- every PolyBench kernel runs at LARGE: measured at the default plan on one core of the 2-core
  EPYC this was written on, the slowest call (heat-3d) takes ~4 s and the largest kernel (heat-3d's
  two 120^3 grids, gemm's and 3mm's matrices) a few tens of MB;
- not PolyBench: batched matmul (16 x 256^3), transposed matmul (C += A^T B, 1024^3), 3x3
  convolution (samples/conv2d.py's nest, 56 x 56, 64 -> 64 channels), depthwise 3x3 convolution
  (112 x 112 x 64), int8 matmul (samples/int8_matmul.py's nest, 1024^3), sgemm 1024^3 and 1000^3.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "samples"))
sys.path.insert(1, os.path.join(HERE, ".."))  # accpy itself, where it is not installed

import accpy as acc  # noqa: E402

ALPHA, BETA = 1.5, 1.2
F32 = acc.ScalarType.float32


@dataclass(frozen=True)
class Kernel:
    """One kernel of the suite (see the module's docstring for each field's contract)."""

    name: str
    sizes: dict
    flops: float
    outputs: tuple
    make_stages: Callable = field(repr=False)
    make_data: Callable = field(repr=False)
    make_reference: Callable = field(repr=False)
    tolerance: float = 1e-3  # max |got - want| / max(|want|, 1) accepted

    def stages(self) -> list:
        """[(nest or fused schedule, args)] in program order; fresh arrays and nests each call."""
        return self.make_stages(**self.sizes)

    def data(self, rng: np.random.Generator) -> dict:
        """Fresh arrays by name (every array of every stage)."""
        return self.make_data(rng, **self.sizes)

    def reference(self, data: dict) -> dict:
        """The expected final values of `outputs` (float64, or int64 for integers)."""
        return self.make_reference({k: v.copy() for k, v in data.items()}, **self.sizes)

    @property
    def halide(self) -> Optional[Callable]:
        """halide_suite's builder of this kernel, or None (not expressible, or no halide wheel)."""
        try:
            import halide_suite
        except ImportError:
            return None
        return halide_suite.BUILDERS.get(self.name)

    def error(self, data: dict, want: dict) -> float:
        """The largest relative error of `data`'s outputs against `want` (0 for exact)."""
        worst = 0.0
        for name in self.outputs:
            got, ref = data[name].astype(np.float64), want[name].astype(np.float64)
            worst = max(worst, float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1.0)))
        return worst


def default_plan(stage_object, target=None):
    """The default plan of a stage: `nest.create_schedule().create_plan(target)` (a schedule,
    such as a fused one, is planned as it is)."""
    target = target or acc.Target.HOST
    schedule = stage_object.create_schedule() if isinstance(stage_object, acc.Nest) else stage_object
    return schedule.create_plan(target)


def c_name(kernel_name: str, stage: int, tag: str = "") -> str:
    """A C identifier for a kernel's stage (`tag` tells plans of one stage apart)."""
    return "k_" + kernel_name.replace("-", "_") + f"_s{stage}" + (f"_{tag}" if tag else "")


def call_stages(functions: list, stages: list, data: dict) -> None:
    """Call the built `functions` (one per stage, in order) on `data`'s arrays, by argument name."""
    for fn, (_, args) in zip(functions, stages):
        fn(*[data[a.name] for a in args])


def _arr(name, shape, role=acc.Role.INPUT, dtype=F32):
    return acc.Array(role=role, element_type=dtype, shape=tuple(shape), name=name)


def _io(name, shape, dtype=F32):
    return _arr(name, shape, acc.Role.INPUT_OUTPUT, dtype)


def _random(rng, shapes: dict) -> dict:
    return {n: rng.random(s, dtype=np.float32) for n, s in shapes.items()}


def _f64(d: dict) -> dict:
    return {k: v.astype(np.float64) for k, v in d.items()}


def _nest(shape, logic):
    """A nest of `shape` whose logic is `logic(*indices)`."""
    nest = acc.Nest(shape=tuple(shape))
    idx = nest.get_indices()
    idx = idx if isinstance(idx, tuple) else (idx,)

    @nest.iteration_logic
    def _():
        logic(*idx)

    return nest


def _zero(X, shape):
    """A stage X[...] = 0."""
    def logic(*ix):
        X[ix] = 0.0
    return _nest(shape, logic)


def _scale(X, shape, factor):
    def logic(*ix):
        X[ix] *= factor
    return _nest(shape, logic)


# ---------------------------------------------------------------- matmul-like (PolyBench)

def _mm_stage(C, A, B, M, N, K, alpha=None):
    """C[i, j] += (alpha *) A[i, k] * B[k, j] over (i, j, k)."""
    def logic(i, j, k):
        if alpha is None:
            C[i, j] += A[i, k] * B[k, j]
        else:
            C[i, j] += alpha * A[i, k] * B[k, j]
    return _nest((M, N, K), logic)


def gemm(NI=1000, NJ=1100, NK=1200) -> Kernel:
    """C = beta * C + alpha * A @ B (PolyBench gemm, LARGE)."""
    def stages(NI, NJ, NK):
        C, A, B = _io("C", (NI, NJ)), _arr("A", (NI, NK)), _arr("B", (NK, NJ))
        return [(_scale(C, (NI, NJ), BETA), (C,)), (_mm_stage(C, A, B, NI, NJ, NK, ALPHA), (C, A, B))]

    def data(rng, NI, NJ, NK):
        return _random(rng, {"C": (NI, NJ), "A": (NI, NK), "B": (NK, NJ)})

    def ref(d, NI, NJ, NK):
        d = _f64(d)
        return {"C": BETA * d["C"] + ALPHA * d["A"] @ d["B"]}

    return Kernel("gemm", dict(NI=NI, NJ=NJ, NK=NK), NI * NJ + 3.0 * NI * NJ * NK, ("C",), stages, data, ref)


def mm2(NI=800, NJ=900, NK=1100, NL=1200) -> Kernel:
    """tmp = alpha * A @ B; D = beta * D + tmp @ C (PolyBench 2mm, LARGE)."""
    def stages(NI, NJ, NK, NL):
        tmp, A, B = _io("tmp", (NI, NJ)), _arr("A", (NI, NK)), _arr("B", (NK, NJ))
        C, D = _arr("C", (NJ, NL)), _io("D", (NI, NL))
        return [(_zero(tmp, (NI, NJ)), (tmp,)), (_mm_stage(tmp, A, B, NI, NJ, NK, ALPHA), (tmp, A, B)),
                (_scale(D, (NI, NL), BETA), (D,)), (_mm_stage(D, tmp, C, NI, NL, NJ), (D, tmp, C))]

    def data(rng, NI, NJ, NK, NL):
        return _random(rng, {"tmp": (NI, NJ), "A": (NI, NK), "B": (NK, NJ), "C": (NJ, NL), "D": (NI, NL)})

    def ref(d, NI, NJ, NK, NL):
        d = _f64(d)
        tmp = ALPHA * d["A"] @ d["B"]
        return {"tmp": tmp, "D": BETA * d["D"] + tmp @ d["C"]}

    flops = 3.0 * NI * NJ * NK + NI * NL + 2.0 * NI * NL * NJ
    return Kernel("2mm", dict(NI=NI, NJ=NJ, NK=NK, NL=NL), flops, ("tmp", "D"), stages, data, ref)


def mm3(NI=800, NJ=900, NK=1000, NL=1100, NM=1200) -> Kernel:
    """E = A @ B; F = C @ D; G = E @ F (PolyBench 3mm, LARGE)."""
    def stages(NI, NJ, NK, NL, NM):
        E, A, B = _io("E", (NI, NJ)), _arr("A", (NI, NK)), _arr("B", (NK, NJ))
        F, C, D = _io("F", (NJ, NL)), _arr("C", (NJ, NM)), _arr("D", (NM, NL))
        G = _io("G", (NI, NL))
        return [(_zero(E, (NI, NJ)), (E,)), (_mm_stage(E, A, B, NI, NJ, NK), (E, A, B)),
                (_zero(F, (NJ, NL)), (F,)), (_mm_stage(F, C, D, NJ, NL, NM), (F, C, D)),
                (_zero(G, (NI, NL)), (G,)), (_mm_stage(G, E, F, NI, NL, NJ), (G, E, F))]

    def data(rng, NI, NJ, NK, NL, NM):
        return _random(rng, {"E": (NI, NJ), "A": (NI, NK), "B": (NK, NJ), "F": (NJ, NL), "C": (NJ, NM),
                             "D": (NM, NL), "G": (NI, NL)})

    def ref(d, NI, NJ, NK, NL, NM):
        d = _f64(d)
        E, F = d["A"] @ d["B"], d["C"] @ d["D"]
        return {"E": E, "F": F, "G": E @ F}

    flops = 2.0 * (NI * NJ * NK + NJ * NL * NM + NI * NL * NJ)
    return Kernel("3mm", dict(NI=NI, NJ=NJ, NK=NK, NL=NL, NM=NM), flops, ("E", "F", "G"), stages, data, ref)


# ---------------------------------------------------------------- matrix-vector (PolyBench)

def atax(M=1900, N=2100) -> Kernel:
    """tmp = A @ x; y = A^T @ tmp (PolyBench atax, LARGE)."""
    def stages(M, N):
        A, x, y, tmp = _arr("A", (M, N)), _arr("x", (N,)), _io("y", (N,)), _io("tmp", (M,))

        def mv(i, j):
            tmp[i] += A[i, j] * x[j]

        def mtv(i, j):
            y[j] += A[i, j] * tmp[i]

        return [(_zero(y, (N,)), (y,)), (_zero(tmp, (M,)), (tmp,)), (_nest((M, N), mv), (tmp, A, x)),
                (_nest((M, N), mtv), (y, A, tmp))]

    def data(rng, M, N):
        return _random(rng, {"A": (M, N), "x": (N,), "y": (N,), "tmp": (M,)})

    def ref(d, M, N):
        d = _f64(d)
        tmp = d["A"] @ d["x"]
        return {"tmp": tmp, "y": d["A"].T @ tmp}

    return Kernel("atax", dict(M=M, N=N), 4.0 * M * N, ("tmp", "y"), stages, data, ref)


def bicg(M=1900, N=2100) -> Kernel:
    """s = A^T @ r; q = A @ p, in one (i, j) nest (PolyBench bicg, LARGE)."""
    def stages(M, N):
        A, s, q, p, r = _arr("A", (N, M)), _io("s", (M,)), _io("q", (N,)), _arr("p", (M,)), _arr("r", (N,))

        def both(i, j):
            s[j] += r[i] * A[i, j]
            q[i] += A[i, j] * p[j]

        return [(_zero(s, (M,)), (s,)), (_zero(q, (N,)), (q,)), (_nest((N, M), both), (s, q, A, p, r))]

    def data(rng, M, N):
        return _random(rng, {"A": (N, M), "s": (M,), "q": (N,), "p": (M,), "r": (N,)})

    def ref(d, M, N):
        d = _f64(d)
        return {"s": d["A"].T @ d["r"], "q": d["A"] @ d["p"]}

    return Kernel("bicg", dict(M=M, N=N), 4.0 * M * N, ("s", "q"), stages, data, ref)


def mvt(N=2000) -> Kernel:
    """x1 += A @ y1; x2 += A^T @ y2 (PolyBench mvt, LARGE)."""
    def stages(N):
        A, x1, x2, y1, y2 = _arr("A", (N, N)), _io("x1", (N,)), _io("x2", (N,)), _arr("y_1", (N,)), _arr("y_2", (N,))

        def one(i, j):
            x1[i] += A[i, j] * y1[j]

        def two(i, j):
            x2[i] += A[j, i] * y2[j]

        return [(_nest((N, N), one), (x1, A, y1)), (_nest((N, N), two), (x2, A, y2))]

    def data(rng, N):
        return _random(rng, {"A": (N, N), "x1": (N,), "x2": (N,), "y_1": (N,), "y_2": (N,)})

    def ref(d, N):
        d = _f64(d)
        return {"x1": d["x1"] + d["A"] @ d["y_1"], "x2": d["x2"] + d["A"].T @ d["y_2"]}

    return Kernel("mvt", dict(N=N), 4.0 * N * N, ("x1", "x2"), stages, data, ref)


def gemver(N=2000) -> Kernel:
    """A += u1 v1^T + u2 v2^T; x += beta A^T y + z; w += alpha A x (PolyBench gemver, LARGE)."""
    def stages(N):
        A = _io("A", (N, N))
        u1, v1, u2, v2 = (_arr(n, (N,)) for n in ("u1", "v1", "u2", "v2"))
        x, w, y, z = _io("x", (N,)), _io("w", (N,)), _arr("y", (N,)), _arr("z", (N,))

        def rank2(i, j):
            A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]

        def atv(i, j):
            x[i] = x[i] + BETA * A[j, i] * y[j]

        def addz(i):
            x[i] = x[i] + z[i]

        def av(i, j):
            w[i] = w[i] + ALPHA * A[i, j] * x[j]

        return [(_nest((N, N), rank2), (A, u1, v1, u2, v2)), (_nest((N, N), atv), (x, A, y)),
                (_nest((N,), addz), (x, z)), (_nest((N, N), av), (w, A, x))]

    def data(rng, N):
        return _random(rng, {"A": (N, N), **{n: (N,) for n in ("u1", "v1", "u2", "v2", "x", "w", "y", "z")}})

    def ref(d, N):
        d = _f64(d)
        A = d["A"] + np.outer(d["u1"], d["v1"]) + np.outer(d["u2"], d["v2"])
        x = d["x"] + BETA * A.T @ d["y"] + d["z"]
        return {"A": A, "x": x, "w": d["w"] + ALPHA * A @ x}

    return Kernel("gemver", dict(N=N), 10.0 * N * N + N, ("A", "x", "w"), stages, data, ref)


def gesummv(N=1300) -> Kernel:
    """y = alpha A x + beta B x (PolyBench gesummv, LARGE)."""
    def stages(N):
        A, B, x, tmp, y = _arr("A", (N, N)), _arr("B", (N, N)), _arr("x", (N,)), _io("tmp", (N,)), _io("y", (N,))

        def init(i):
            tmp[i] = 0.0
            y[i] = 0.0

        def sums(i, j):
            tmp[i] = A[i, j] * x[j] + tmp[i]
            y[i] = B[i, j] * x[j] + y[i]

        def combine(i):
            y[i] = ALPHA * tmp[i] + BETA * y[i]

        return [(_nest((N,), init), (tmp, y)), (_nest((N, N), sums), (tmp, y, A, B, x)),
                (_nest((N,), combine), (y, tmp))]

    def data(rng, N):
        return _random(rng, {"A": (N, N), "B": (N, N), "x": (N,), "tmp": (N,), "y": (N,)})

    def ref(d, N):
        d = _f64(d)
        tmp = d["A"] @ d["x"]
        return {"tmp": tmp, "y": ALPHA * tmp + BETA * (d["B"] @ d["x"])}

    return Kernel("gesummv", dict(N=N), 4.0 * N * N + 3.0 * N, ("tmp", "y"), stages, data, ref)


def doitgen(NQ=140, NR=150, NP=160) -> Kernel:
    """A[r, q, :] = A[r, q, :] @ C4 (PolyBench doitgen, LARGE; `sum` a whole array)."""
    def stages(NQ, NR, NP):
        A, C4, S = _io("A", (NR, NQ, NP)), _arr("C4", (NP, NP)), _io("sum", (NR, NQ, NP))

        def contract(r, q, p, s):
            S[r, q, p] += A[r, q, s] * C4[s, p]

        def copy(r, q, p):
            A[r, q, p] = S[r, q, p]

        return [(_zero(S, (NR, NQ, NP)), (S,)), (_nest((NR, NQ, NP, NP), contract), (S, A, C4)),
                (_nest((NR, NQ, NP), copy), (A, S))]

    def data(rng, NQ, NR, NP):
        return _random(rng, {"A": (NR, NQ, NP), "C4": (NP, NP), "sum": (NR, NQ, NP)})

    def ref(d, NQ, NR, NP):
        d = _f64(d)
        out = d["A"] @ d["C4"]
        return {"A": out, "sum": out}

    return Kernel("doitgen", dict(NQ=NQ, NR=NR, NP=NP), 2.0 * NR * NQ * NP * NP, ("A", "sum"), stages, data, ref)


# ---------------------------------------------------------------- stencils (PolyBench)

def jacobi_1d(TSTEPS=500, N=2000) -> Kernel:
    """2 * TSTEPS half-steps of the 3-point average over X[2, N] (PolyBench jacobi-1d, LARGE)."""
    def stages(TSTEPS, N):
        X = _io("X", (2, N))

        def step(s, i):
            c, n = s % 2, (s + 1) % 2
            X[n, i + 1] = 0.33333 * (X[c, i] + X[c, i + 1] + X[c, i + 2])

        return [(_nest((2 * TSTEPS, N - 2), step), (X,))]

    def data(rng, TSTEPS, N):
        return _random(rng, {"X": (2, N)})

    def ref(d, TSTEPS, N):
        X = d["X"].astype(np.float64)
        for s in range(2 * TSTEPS):
            a, b = X[s % 2], X[(s + 1) % 2]
            b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        return {"X": X}

    return Kernel("jacobi-1d", dict(TSTEPS=TSTEPS, N=N), 2.0 * TSTEPS * (N - 2) * 3, ("X",), stages, data, ref)


def jacobi_2d(TSTEPS=500, N=1300) -> Kernel:
    """2 * TSTEPS half-steps of the 5-point average over X[2, N, N] (PolyBench jacobi-2d, LARGE)."""
    def stages(TSTEPS, N):
        X = _io("X", (2, N, N))

        def step(s, i, j):
            c, n = s % 2, (s + 1) % 2
            X[n, i + 1, j + 1] = 0.2 * (X[c, i + 1, j + 1] + X[c, i + 1, j] + X[c, i + 1, j + 2]
                                        + X[c, i + 2, j + 1] + X[c, i, j + 1])

        return [(_nest((2 * TSTEPS, N - 2, N - 2), step), (X,))]

    def data(rng, TSTEPS, N):
        return _random(rng, {"X": (2, N, N)})

    def ref(d, TSTEPS, N):
        X = d["X"].astype(np.float64)
        for s in range(2 * TSTEPS):
            a, b = X[s % 2], X[(s + 1) % 2]
            b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1])
        return {"X": X}

    flops = 2.0 * TSTEPS * (N - 2) ** 2 * 5
    return Kernel("jacobi-2d", dict(TSTEPS=TSTEPS, N=N), flops, ("X",), stages, data, ref)


def heat_3d(TSTEPS=500, N=120) -> Kernel:
    """2 * TSTEPS half-steps of the 7-point heat equation over X[2, N, N, N] (PolyBench heat-3d,
    LARGE)."""
    def stages(TSTEPS, N):
        X = _io("X", (2, N, N, N))

        def step(s, i, j, k):
            c, n = s % 2, (s + 1) % 2
            a = X[c, i + 1, j + 1, k + 1]
            X[n, i + 1, j + 1, k + 1] = (
                0.125 * (X[c, i + 2, j + 1, k + 1] - 2.0 * a + X[c, i, j + 1, k + 1])
                + 0.125 * (X[c, i + 1, j + 2, k + 1] - 2.0 * a + X[c, i + 1, j, k + 1])
                + 0.125 * (X[c, i + 1, j + 1, k + 2] - 2.0 * a + X[c, i + 1, j + 1, k]) + a)

        return [(_nest((2 * TSTEPS, N - 2, N - 2, N - 2), step), (X,))]

    def data(rng, TSTEPS, N):
        return _random(rng, {"X": (2, N, N, N)})

    def ref(d, TSTEPS, N):
        X = d["X"].astype(np.float64)
        m = slice(1, -1)
        for s in range(2 * TSTEPS):
            a, b = X[s % 2], X[(s + 1) % 2]
            c = a[m, m, m]
            b[m, m, m] = (0.125 * (a[2:, m, m] - 2.0 * c + a[:-2, m, m])
                          + 0.125 * (a[m, 2:, m] - 2.0 * c + a[m, :-2, m])
                          + 0.125 * (a[m, m, 2:] - 2.0 * c + a[m, m, :-2]) + c)
        return {"X": X}

    flops = 2.0 * TSTEPS * (N - 2) ** 3 * 15
    return Kernel("heat-3d", dict(TSTEPS=TSTEPS, N=N), flops, ("X",), stages, data, ref)


def fdtd_2d(TMAX=500, NX=1000, NY=1200) -> Kernel:
    """2-D finite-difference time domain (PolyBench fdtd-2d, LARGE), one nest
    over (t, i, j): at (t, i, j) it updates ey[i, j] (row 0: the source fict[t]), ex[i, j] and
    hz[i - 1, j - 1], which reads only values that PolyBench's order has already updated in
    step t (ex[i - 1, j], ey[i, j - 1]) and is read only by later iterations; every value is
    PolyBench's."""
    def stages(TMAX, NX, NY):
        ex, ey, hz, fict = _io("ex", (NX, NY)), _io("ey", (NX, NY)), _io("hz", (NX, NY)), _arr("fict", (TMAX,))

        def step(t, i, j):
            def edge():
                ey[i, j] = fict[t]

            def upd_ey():
                ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])

            def upd_ex():
                ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])

            def upd_hz():
                hz[i - 1, j - 1] = hz[i - 1, j - 1] - 0.7 * (ex[i - 1, j] - ex[i - 1, j - 1] + ey[i, j - 1]
                                                             - ey[i - 1, j - 1])

            acc._If(i < 1, edge).Else(upd_ey)
            acc._If(j >= 1, upd_ex)
            acc._If(acc.logical_and(i >= 1, j >= 1), upd_hz)

        return [(_nest((TMAX, NX, NY), step), (ex, ey, hz, fict))]

    def data(rng, TMAX, NX, NY):
        d = _random(rng, {"ex": (NX, NY), "ey": (NX, NY), "hz": (NX, NY)})
        d["fict"] = np.arange(TMAX, dtype=np.float32)
        return d

    def ref(d, TMAX, NX, NY):
        ex, ey, hz = (d[n].astype(np.float64) for n in ("ex", "ey", "hz"))
        for t in range(TMAX):
            ey[0, :] = d["fict"][t]
            ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
            ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
            hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
        return {"ex": ex, "ey": ey, "hz": hz}

    flops = TMAX * (3.0 * (NX - 1) * NY + 3.0 * NX * (NY - 1) + 5.0 * (NX - 1) * (NY - 1))
    return Kernel("fdtd-2d", dict(TMAX=TMAX, NX=NX, NY=NY), flops, ("ex", "ey", "hz"), stages, data, ref)


# ---------------------------------------------------------------- beyond PolyBench

def batched_matmul(BATCH=16, M=256, N=256, K=256) -> Kernel:
    """C[b] += A[b] @ B[b]."""
    def stages(BATCH, M, N, K):
        C, A, B = _io("C", (BATCH, M, N)), _arr("A", (BATCH, M, K)), _arr("B", (BATCH, K, N))

        def logic(b, i, j, k):
            C[b, i, j] += A[b, i, k] * B[b, k, j]

        return [(_nest((BATCH, M, N, K), logic), (C, A, B))]

    def data(rng, BATCH, M, N, K):
        return _random(rng, {"C": (BATCH, M, N), "A": (BATCH, M, K), "B": (BATCH, K, N)})

    def ref(d, BATCH, M, N, K):
        d = _f64(d)
        return {"C": d["C"] + d["A"] @ d["B"]}

    return Kernel("batched_matmul", dict(BATCH=BATCH, M=M, N=N, K=K), 2.0 * BATCH * M * N * K, ("C",),
                  stages, data, ref)


def transposed_matmul(M=1024, N=1024, K=1024) -> Kernel:
    """C += A^T @ B with A stored [K, M]."""
    def stages(M, N, K):
        C, A, B = _io("C", (M, N)), _arr("A", (K, M)), _arr("B", (K, N))

        def logic(i, j, k):
            C[i, j] += A[k, i] * B[k, j]

        return [(_nest((M, N, K), logic), (C, A, B))]

    def data(rng, M, N, K):
        return _random(rng, {"C": (M, N), "A": (K, M), "B": (K, N)})

    def ref(d, M, N, K):
        d = _f64(d)
        return {"C": d["C"] + d["A"].T @ d["B"]}

    return Kernel("transposed_matmul", dict(M=M, N=N, K=K), 2.0 * M * N * K, ("C",), stages, data, ref)


def sgemm(M=1024, N=1024, K=1024, name=None) -> Kernel:
    """C += A @ B (float32), the arrays named as samples/optimized_matmul.py names them."""
    def stages(M, N, K):
        C, A, B = _io("C", (M, N)), _arr("A", (M, K)), _arr("B", (K, N))
        return [(_mm_stage(C, A, B, M, N, K), (A, B, C))]

    def data(rng, M, N, K):
        return _random(rng, {"C": (M, N), "A": (M, K), "B": (K, N)})

    def ref(d, M, N, K):
        d = _f64(d)
        return {"C": d["C"] + d["A"] @ d["B"]}

    return Kernel(name or f"sgemm_{M}", dict(M=M, N=N, K=K), 2.0 * M * N * K, ("C",), stages, data, ref)


def conv3x3(H=56, W=56, C=64, K=64) -> Kernel:
    """O[h, w, co] += I[h + kh, w + kw, ci] * Wt[kh, kw, ci, co]: samples/conv2d.py's nest."""
    from conv2d import conv2d_nest

    def stages(H, W, C, K):
        return [conv2d_nest(H, W, C, K)]

    def data(rng, H, W, C, K):
        return _random(rng, {"I": (H + 2, W + 2, C), "Wt": (3, 3, C, K), "O": (H, W, K)})

    def ref(d, H, W, C, K):
        from conv2d import conv2d_reference
        return {"O": d["O"].astype(np.float64) + conv2d_reference(d["I"], d["Wt"])}

    return Kernel("conv3x3", dict(H=H, W=W, C=C, K=K), 2.0 * H * W * C * K * 9, ("O",), stages, data, ref)


def depthwise3x3(H=112, W=112, C=64) -> Kernel:
    """O[h, w, c] += I[h + kh, w + kw, c] * Wt[kh, kw, c]: one 3x3 filter per channel."""
    def stages(H, W, C):
        I, Wt, O = _arr("I", (H + 2, W + 2, C)), _arr("Wt", (3, 3, C)), _io("O", (H, W, C))

        def logic(h, w, c, kh, kw):
            O[h, w, c] += I[h + kh, w + kw, c] * Wt[kh, kw, c]

        return [(_nest((H, W, C, 3, 3), logic), (I, Wt, O))]

    def data(rng, H, W, C):
        return _random(rng, {"I": (H + 2, W + 2, C), "Wt": (3, 3, C), "O": (H, W, C)})

    def ref(d, H, W, C):
        d = _f64(d)
        out = d["O"].copy()
        for a in range(3):
            for b in range(3):
                out += d["I"][a:a + H, b:b + W, :] * d["Wt"][a, b]
        return {"O": out}

    return Kernel("depthwise3x3", dict(H=H, W=W, C=C), 2.0 * H * W * C * 9, ("O",), stages, data, ref)


def int8_matmul(M=1024, N=1024, K=1024) -> Kernel:
    """C (int32) += A (uint8) @ B (int8): samples/int8_matmul.py's matmul_nest."""
    from int8_matmul import matmul_nest

    def stages(M, N, K):
        return [matmul_nest(M, N, K, "int8")]

    def data(rng, M, N, K):
        return {"A": rng.integers(0, 256, (M, K), dtype=np.uint8), "B": rng.integers(-128, 128, (K, N), dtype=np.int8),
                "C": rng.integers(-1000, 1000, (M, N), dtype=np.int32)}

    def ref(d, M, N, K):
        return {"C": d["C"].astype(np.int64) + d["A"].astype(np.int64) @ d["B"].astype(np.int64)}

    return Kernel("int8_matmul", dict(M=M, N=N, K=K), 2.0 * M * N * K, ("C",), stages, data, ref, tolerance=0.0)


#: every kernel's constructor, by name, at the benchmark's sizes
KERNELS = {
    "gemm": gemm, "2mm": mm2, "3mm": mm3, "atax": atax, "bicg": bicg, "mvt": mvt, "gemver": gemver,
    "gesummv": gesummv, "doitgen": doitgen, "jacobi-1d": jacobi_1d, "jacobi-2d": jacobi_2d,
    "heat-3d": heat_3d, "fdtd-2d": fdtd_2d, "batched_matmul": batched_matmul,
    "transposed_matmul": transposed_matmul, "conv3x3": conv3x3, "depthwise3x3": depthwise3x3,
    "int8_matmul": int8_matmul, "sgemm_1024": lambda: sgemm(1024, 1024, 1024),
    "sgemm_1000": lambda: sgemm(1000, 1000, 1000),
}

#: tiny sizes (tests, `--quick`): every kernel builds and runs in well under a second
TINY = {
    "gemm": dict(NI=20, NJ=22, NK=24), "2mm": dict(NI=16, NJ=18, NK=22, NL=24),
    "3mm": dict(NI=16, NJ=18, NK=20, NL=22, NM=24), "atax": dict(M=38, N=42), "bicg": dict(M=38, N=42),
    "mvt": dict(N=40), "gemver": dict(N=40), "gesummv": dict(N=30), "doitgen": dict(NQ=10, NR=12, NP=14),
    "jacobi-1d": dict(TSTEPS=10, N=30), "jacobi-2d": dict(TSTEPS=5, N=20), "heat-3d": dict(TSTEPS=4, N=10),
    "fdtd-2d": dict(TMAX=5, NX=20, NY=30), "batched_matmul": dict(BATCH=3, M=16, N=24, K=20),
    "transposed_matmul": dict(M=24, N=32, K=20), "conv3x3": dict(H=8, W=10, C=8, K=16),
    "depthwise3x3": dict(H=10, W=12, C=16), "int8_matmul": dict(M=16, N=32, K=24),
    "sgemm_1024": dict(M=32, N=48, K=40), "sgemm_1000": dict(M=30, N=50, K=20),
}


def kernel(name: str, tiny: bool = False) -> Kernel:
    """The kernel `name` (a key of KERNELS) at the benchmark's sizes, or at TINY's."""
    if name not in KERNELS:
        raise KeyError(f"kernel: expected one of {', '.join(KERNELS)}, got {name!r}")
    if not tiny:
        return KERNELS[name]()
    if name.startswith("sgemm_"):
        return sgemm(**TINY[name], name=name)
    return KERNELS[name](**TINY[name])
