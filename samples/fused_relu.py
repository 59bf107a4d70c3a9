"""fused_relu: C = relu(C + A @ B) as two nests fused into one tiled, vectorized kernel.

    python samples/fused_relu.py [--output-dir DIR] [--m 256] [--n 256] [--k 256] [--rows R] [--tile T]

Two nests: the matmul `C[i, j] += A[i, k] * B[k, j]` over (i, j, k) and the in-place ReLU
`C[i, j] = max(C[i, j], 0)` over (i, j). `acc.fuse((s0, s1), partial=2)` lines up their
(i, j) and adds the fusing index f: the fused space is (i, j, f, k), and the ReLU of an
element runs right after its sum is complete, while the tile is still in cache:

  1. tile (i, j) and order (i, j, f, k, ii, jj): for each tile, f = 0 runs the matmul
     (k outside the tile), f = 1 the ReLU of the same tile (k == 0 only);
  2. plan: vectorize jj (AVX-512 or AVX2) and unroll ii: a register tile in both parts,
     sized from the target (`tile_shape`): two vectors of C a row, 8 x 32 with AVX-512,
     6 x 16 with AVX2 (8 x 32 on AVX2 needs 32 accumulators for 16 registers: measured on an
     AMD EPYC, one thread, 256^3, half numpy's speed; 6 x 16 about numpy's speed).

The sample times the kernel against numpy (numpy's BLAS on one thread) and says how it
compares; when it is the slower, it says why, from what it measured (numpy's matmul alone
against the whole fused kernel) and from the schedule (registers, packing).

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

# first: numpy's BLAS on one thread
from sample_support import OUTPUT_HELP, interleaved_medians, output_dir, ratio_sentence

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402


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


def tile_shape(target) -> tuple:
    """(rows, columns) of the register tile of C: two vectors a row, and as many rows (at most 8)
    as leave room next to their accumulators for B's two vectors and A's broadcast."""
    lanes = max(target.vector_bytes // 4, 1)
    return max(1, min(8, (target.vector_registers - 3) // 2)), 2 * lanes


def fused_plan(matmul, relu, tile: int, target, rows: int = 8):
    s = acc.fuse((matmul.create_schedule(), relu.create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    ii, jj = s.tile({i: rows, j: tile})
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
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--rows", type=int, default=None, help="rows of a tile (default: from the target's registers)")
    ap.add_argument("--tile", type=int, default=None,
                    help="columns of a tile (default: two vectors; a multiple of the vector width is best)")
    args = ap.parse_args(argv)

    target = acc.Target.HOST
    rows, tile = tile_shape(target)
    rows, tile = args.rows or rows, args.tile or tile
    (A, B, C), matmul, relu = define(args.m, args.n, args.k)
    for line in refusals(matmul, relu):
        print(line)
    schedule, plan = fused_plan(matmul, relu, tile, target, rows)
    print("\nfused schedule:", schedule.get_indices())
    print(f"register tile of C: {rows} x {tile}")

    pkg = acc.Package()
    pkg.add(plan, args=(A, B, C), base_name="fused_relu")
    t0 = time.perf_counter()
    out = output_dir("fused_relu", args.output_dir)
    lib = pkg.build("fused_relu", output_dir=out, python_module=False)
    print(f"built in {time.perf_counter() - t0:.2f} s -> {out}")

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

    for line in timing_lines(lib, a, b, c, rows, tile, target):
        print(line)
    return 0 if ok else 1


def timing_lines(lib, a, b, c, rows: int, tile: int, target) -> list:
    """The fused kernel against numpy, with numpy's matmul alone: where the time goes, and an
    honest sentence when the fused kernel is the slower one."""
    work = c.copy()  # the kernel updates C in place: the values grow a little, the work is the same
    t = interleaved_medians({"accpy": lambda: lib.fused_relu(a, b, work),
                             "numpy": lambda: np.maximum(c + a @ b, 0),
                             "numpy_matmul": lambda: a @ b})
    flops = 2.0 * a.shape[0] * b.shape[1] * a.shape[1]
    t_acc, t_np, t_mm = t["accpy"], t["numpy"], t["numpy_matmul"]
    out = [f"accpy fused: {flops / t_acc / 1e9:.1f} GFLOP/s ({t_acc * 1e3:.3f} ms); numpy maximum(C + A @ B, 0): "
           f"{flops / t_np / 1e9:.1f} GFLOP/s ({t_np * 1e3:.3f} ms, of which A @ B {t_mm * 1e3:.3f} ms) "
           f"(medians of 7, taking turns; numpy's BLAS on one thread)",
           ratio_sentence("accpy's fused kernel", t_acc, "numpy", t_np) + "."]
    if t_acc <= t_np:
        out.append(f"The ReLU runs on each tile while it is in cache; numpy's add and maximum are two more passes "
                   f"over C ({(t_np - t_mm) * 1e3:.3f} ms).")
    elif t_mm < t_acc:
        lanes = max(target.vector_bytes // 4, 1)
        accumulators, registers = rows * -(-tile // lanes), target.vector_registers
        tile_text = (f"its {rows} x {tile} tile of C needs {accumulators} vector accumulators, more than the "
                     f"{registers} vector registers hold, so the compiler spills them to memory"
                     if accumulators + 3 > registers else
                     f"its {rows} x {tile} tile of C fits the {registers} vector registers, but B is read in "
                     f"place, not packed, and k is not blocked for the caches")
        out.append(f"Why: numpy's A @ B alone ({t_mm * 1e3:.3f} ms: OpenBLAS's sgemm, with packed panels of A "
                   f"and B and a hand-written register-blocked micro-kernel) takes less than the whole fused "
                   f"kernel; {tile_text}. Fusing saves only what numpy's add and maximum cost "
                   f"({(t_np - t_mm) * 1e3:.3f} ms); it pays once the matmul part is blocked like a BLAS "
                   f"(see samples/optimized_matmul.py).")
    else:
        out.append(f"The difference is within the machine's noise: numpy's A @ B alone took {t_mm * 1e3:.3f} ms, "
                   f"no less than the fused kernel.")
    return out


if __name__ == "__main__":
    sys.exit(main())
