"""fused_relu: C = relu(C + A @ B) as two nests fused into one tiled, vectorized kernel.

    python samples/fused_relu.py [--output-dir DIR] [--m 256] [--n 256] [--k 256] [--tile 32]

Two nests: the matmul `C[i, j] += A[i, k] * B[k, j]` over (i, j, k) and the in-place ReLU
`C[i, j] = max(C[i, j], 0)` over (i, j). `acc.fuse((s0, s1), partial=2)` lines up their
(i, j) and adds the fusing index f: the fused space is (i, j, f, k), and the ReLU of an
element runs right after its sum is complete, while the tile is still in cache:

  1. tile (i, j) and order (i, j, f, k, ii, jj): for each tile, f = 0 runs the matmul
     (k outside the tile), f = 1 the ReLU of the same tile (k == 0 only);
  2. plan: vectorize jj (AVX-512 or AVX2) and unroll ii: a register tile in both parts.

accpy checks every fused order against the program (the matmul, then the ReLU). The
sample also shows two refusals: Accera's illegal order (i, j, k, f) breaks the fusing
rules (ValueError), and fusing the matmul *after reordering it to (j, i, k)* pairs the
ReLU of C[a, b] with the sum of C[b, a]: a ScheduleError with a counterexample.

Exit status 0 when the result equals numpy's maximum(C + A @ B, 0), 1 otherwise.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import accpy as acc

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "_build" / "fused_relu"


def define(m: int, n: int, k: int):
    A = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(m, k))
    B = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(k, n))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(m, n))

    matmul = acc.Nest(shape=(m, n, k))
    i, j, kk = matmul.get_indices()

    @matmul.iteration_logic
    def _():
        C[i, j] += A[i, kk] * B[kk, j]

    relu = acc.Nest(shape=(m, n))
    i1, j1 = relu.get_indices()

    @relu.iteration_logic
    def _():
        C[i1, j1] = acc.max(C[i1, j1], 0.0)

    return (A, B, C), matmul, relu


def fused_plan(matmul, relu, tile: int, target):
    s = acc.fuse((matmul.create_schedule(), relu.create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    ii, jj = s.tile({i: 8, j: tile})
    s.reorder(i, j, f, k, ii, jj)
    plan = s.create_plan(target)
    plan.unroll(ii)
    plan.vectorize(jj)
    return s, plan


def refusals(matmul, relu) -> list:
    out = []
    s = acc.fuse((matmul.create_schedule(), relu.create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    try:
        s.reorder(i, j, k, f)
        out.append("reorder(i, j, k, f): accepted (wrong!)")
    except ValueError as e:
        out.append(f"reorder(i, j, k, f) -> ValueError: {e}")
    s0 = matmul.create_schedule()
    a, b, c = s0.get_indices()
    s0.reorder(b, a, c)
    try:
        acc.fuse((s0, relu.create_schedule()), partial=2)
        out.append("fusing (j, i, k) with (i, j): accepted (wrong!)")
    except acc.ScheduleError as e:
        out.append(f"fusing the matmul reordered to (j, i, k) -> ScheduleError: {e}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--tile", type=int, default=32, help="columns of a tile (a multiple of the vector width is best)")
    args = ap.parse_args(argv)

    target = acc.Target.HOST
    (A, B, C), matmul, relu = define(args.m, args.n, args.k)
    for line in refusals(matmul, relu):
        print(line)
    schedule, plan = fused_plan(matmul, relu, args.tile, target)
    print("\nfused schedule:", schedule.get_indices())

    pkg = acc.Package()
    pkg.add(plan, args=(A, B, C), base_name="fused_relu")
    t0 = time.perf_counter()
    lib = pkg.build("fused_relu", output_dir=args.output_dir)
    print(f"built in {time.perf_counter() - t0:.2f} s -> {args.output_dir}")

    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.m, args.k), dtype=np.float32)
    b = rng.standard_normal((args.k, args.n), dtype=np.float32)
    c = rng.standard_normal((args.m, args.n), dtype=np.float32)
    want = np.maximum(c + a @ b, 0)
    got = c.copy()
    lib.fused_relu(a, b, got)
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-3)
    print(f"result vs numpy maximum(C + A @ B, 0): {'OK' if ok else 'MISMATCH'} "
          f"(max abs diff {np.abs(got - want).max():.2e}, {np.count_nonzero(want == 0)} zeros from the ReLU)")

    def best(fn, reps=5):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return sorted(times)[len(times) // 2]

    t_acc = best(lambda: lib.fused_relu(a, b, c.copy()))
    t_np = best(lambda: np.maximum(c + a @ b, 0))
    flops = 2.0 * args.m * args.n * args.k
    print(f"accpy fused: {flops / t_acc / 1e9:.1f} GFLOP/s, numpy (matmul, add, maximum): "
          f"{flops / t_np / 1e9:.1f} GFLOP/s (medians; shared machines are noisy)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
