"""three_matmul: E += (A @ B) @ D as two matmuls fused row by row, the middle product a TEMP.

    python samples/three_matmul.py [--output-dir DIR] [--m 192] [--n 128] [--k 160] [--l 144] [--rows 4]

Nest 0 computes T[i, j] += A[i, k] * B[k, j] (T is a TEMP array: internal, zero-filled);
nest 1 computes E[i, l] += T[i, j] * D[j, l]. Fusing them on i (`partial=1`) gives the
space (i, f, j0, k0, l1, j1): each block of rows of T is computed and then consumed while
it is hot in cache, instead of the whole M x N product going through memory.

Fusing one more index is *not* legal: pairing (i, j) of nest 0 with (i, l) of nest 1 would
use T[i, j] in E[i, l] before T's row is complete. accpy refuses it with a counterexample
(the check is z3 over the affine model; `python benchmarks/legality.py` times it).

The sample builds the row-fused schedule with a vectorized inner loop in each part and
checks it against numpy. Exit status 0 on a match, 1 otherwise.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import accpy as acc

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "_build" / "three_matmul"


def define(m: int, n: int, k: int, l: int):
    A = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(m, k))
    B = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(k, n))
    D = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(n, l))
    E = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(m, l))
    T = acc.Array(role=acc.Role.TEMP, element_type=acc.ScalarType.float32, shape=(m, n))

    first = acc.Nest(shape=(m, n, k))
    i0, j0, k0 = first.get_indices()

    @first.iteration_logic
    def _():
        T[i0, j0] += A[i0, k0] * B[k0, j0]

    second = acc.Nest(shape=(m, l, n))
    i1, l1, j1 = second.get_indices()

    @second.iteration_logic
    def _():
        E[i1, l1] += T[i1, j1] * D[j1, l1]

    return (A, B, D, E), first, second


def fused_schedule(first, second, rows: int):
    """Fuse on i; per block of `rows` rows: T's rows (k outside, j vectorized), then E's."""
    s = acc.fuse((first.create_schedule(), second.create_schedule()), partial=1)
    i, f, j0, k0, l1, j1 = s.get_indices()
    ii = s.split(i, rows)
    s.reorder(i, f, k0, j1, ii, j0, l1)
    return s, (i, f, j0, k0, l1, j1, ii)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--m", type=int, default=192)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--k", type=int, default=160)
    ap.add_argument("--l", type=int, default=144)
    ap.add_argument("--rows", type=int, default=4)
    args = ap.parse_args(argv)

    (A, B, D, E), first, second = define(args.m, args.n, args.k, args.l)
    try:
        acc.fuse((first.create_schedule(), second.create_schedule()), partial=2)
        print("fusing (i, j) with (i, l): accepted (wrong!)")
        return 1
    except acc.ScheduleError as e:
        print(f"fusing (i, j) with (i, l) -> ScheduleError: {e}\n")

    s, (i, f, j0, k0, l1, j1, ii) = fused_schedule(first, second, args.rows)
    print("fused on i:", s.get_indices())
    plan = s.create_plan(acc.Target.HOST)
    plan.unroll(ii)
    plan.vectorize(j0)
    plan.vectorize(l1)

    pkg = acc.Package()
    pkg.add(plan, args=(A, B, D, E), base_name="three_matmul")
    t0 = time.perf_counter()
    lib = pkg.build("three_matmul", output_dir=args.output_dir)
    print(f"built in {time.perf_counter() - t0:.2f} s -> {args.output_dir}")

    rng = np.random.default_rng(1)
    a = rng.standard_normal((args.m, args.k), dtype=np.float32)
    b = rng.standard_normal((args.k, args.n), dtype=np.float32)
    d = rng.standard_normal((args.n, args.l), dtype=np.float32)
    e = rng.standard_normal((args.m, args.l), dtype=np.float32)
    want = e + (a @ b) @ d
    got = e.copy()
    lib.three_matmul(a, b, d, got)
    scale = np.abs(want).max()
    ok = np.allclose(got, want, rtol=1e-3, atol=1e-4 * scale)
    print(f"result vs numpy E + (A @ B) @ D: {'OK' if ok else 'MISMATCH'} "
          f"(max abs diff {np.abs(got - want).max():.2e} of values up to {scale:.1f})")

    def median(fn, reps=5):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return sorted(times)[len(times) // 2]

    flops = 2.0 * args.m * args.n * (args.k + args.l)
    t_acc = median(lambda: lib.three_matmul(a, b, d, e.copy()))
    t_np = median(lambda: e + (a @ b) @ d)
    print(f"accpy fused: {flops / t_acc / 1e9:.1f} GFLOP/s, numpy: {flops / t_np / 1e9:.1f} GFLOP/s (medians)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
