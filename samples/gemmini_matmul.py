"""int8 matmul on Gemmini (run here on accpy's functional model), with output scaling and ReLU.

    C = relu(int8(round(float32(A @ B) * scale)))      (A: M x K int8, B: K x N int8)

written as two nests fused into one schedule: the int32 product into a TEMP accumulator
`Acc`, and the epilogue reading it. The plan caches `Acc` in Gemmini's ACCUMULATOR (it lives
only there: zeroed, accumulated, and moved out scaled by one mvout per tile), blocks of A and
B in the SCRATCHPAD, and tensorizes the 16x16x16 tiles. The loop order keeps each weight tile
(of B) in the array while it meets every row tile of A in the block (weight-stationary reuse).
The result is checked bit-exactly against numpy, and the model's counters are printed.

    python samples/gemmini_matmul.py                     # 256 x 256 x 128 (a few seconds)
    python samples/gemmini_matmul.py --shape 512x512x512 --naive
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# first: numpy's BLAS on one thread
import sample_support  # noqa: E402
from sample_support import OUTPUT_HELP, functional_model, not_timed  # noqa: E402

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
from accpy.targets.gemmini.auto import matmul_blocks  # noqa: E402

I8, I32, F32 = acc.ScalarType.int8, acc.ScalarType.int32, acc.ScalarType.float32
DIM = 16


def blocks_for(M: int, N: int, K: int) -> tuple:
    """Block sizes (Mb, Nb, Kb): the Gemmini library's rule (accpy/targets/gemmini/auto.py's
    `matmul_blocks`, which acc.autoschedule uses too): the output block fills the accumulator,
    with Mb large (each weight tile meets Mb / 16 row tiles); A and B blocks fit the scratchpad."""
    return matmul_blocks(M, N, K)


def matmul_plan(M: int, N: int, K: int, relu: bool = True, bias: bool = False, naive: bool = False, blocks=None):
    """(plan, args) of the scaled int8 matmul on Gemmini; args = (A, B, [bias,] C, scale).

    naive: no reuse at all: every 16x16x16 tile moves its operands in (and each output tile
    is zeroed and moved out on its own), the way a straightforward loop over tiles would run.
    """
    A = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(M, K))
    B = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(K, N))
    C = acc.Array(role=acc.Role.OUTPUT, element_type=I8, shape=(M, N))
    Acc = acc.Array(role=acc.Role.TEMP, element_type=I32, shape=(M, N))
    Bias = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(1, N)) if bias else None
    scale = acc.Scalar(F32)

    nests = []
    if bias:
        nb = acc.Nest(shape=(M, N))
        bi, bj = nb.get_indices()

        @nb.iteration_logic
        def _():
            Acc[bi, bj] = Bias[0, bj]

        nests.append(nb)
    n0 = acc.Nest(shape=(M, N, K))
    i0, j0, k0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        Acc[i0, j0] += acc.cast(A[i0, k0], I32) * acc.cast(B[k0, j0], I32)

    n1 = acc.Nest(shape=(M, N))
    i1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        y = acc.cast(acc.round(acc.cast(Acc[i1, j1], F32) * scale), I8)
        C[i1, j1] = acc.max(y, acc.cast(0, I8)) if relu else y

    nests += [n0, n1]
    schedule = acc.fuse(tuple(n.create_schedule() for n in nests), partial=2)
    i, j, f, k = schedule.get_indices()
    gemmini = acc.Target(acc.Target.Model.GEMMINI)
    if naive:
        ii, jj, kk = schedule.tile({i: DIM, j: DIM, k: DIM})
        schedule.reorder(i, j, f, k, ii, jj, kk)
        plan = schedule.create_plan(gemmini)
        plan.cache(Acc, index=f, location=acc.MemorySpace.ACCUMULATOR)
        plan.cache(A, index=ii, location=acc.MemorySpace.SCRATCHPAD)
        plan.cache(B, index=ii, location=acc.MemorySpace.SCRATCHPAD)
        plan.tensorize(indices=(ii, jj, kk))
    else:
        Mb, Nb, Kb = blocks or blocks_for(M, N, K)
        i2, j2, k2 = schedule.tile({i: Mb, j: Nb, k: Kb})
        i3, j3, k3 = schedule.tile({i2: DIM, j2: DIM, k2: DIM})
        # output block (i, j) in the accumulator; per K block: for each weight tile (j2, k2),
        # every row tile i2 of the block (weights stay in the array)
        schedule.reorder(i, j, f, k, j2, k2, i2, i3, j3, k3)
        plan = schedule.create_plan(gemmini)
        plan.cache(Acc, index=f, location=acc.MemorySpace.ACCUMULATOR)
        plan.cache(A, index=j2, location=acc.MemorySpace.SCRATCHPAD)
        plan.cache(B, index=j2, location=acc.MemorySpace.SCRATCHPAD)
        plan.tensorize(indices=(i3, j3, k3))
    args = (A, B) + ((Bias,) if bias else ()) + (C, scale)
    return plan, args


def reference(a, b, scale, relu=True, bias=None):
    """numpy: int32 matmul (+ bias), float32 scale, round half to even, clip to int8, ReLU."""
    acc32 = a.astype(np.int32) @ b.astype(np.int32)
    if bias is not None:
        acc32 = acc32 + bias.astype(np.int32)
    y = np.clip(np.rint(acc32.astype(np.float32) * np.float32(scale)), -128, 127).astype(np.int8)
    return np.maximum(y, 0).astype(np.int8) if relu else y


def run(M, N, K, relu=True, bias=False, naive=False, seed=0, output_dir=None, quiet=False):
    """Build, run on the model, check bit-exactly; returns the counters."""
    plan, args = matmul_plan(M, N, K, relu=relu, bias=bias, naive=naive)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="gemmini_matmul")
    lib = pkg.build("gemmini_matmul", output_dir=sample_support.output_dir("gemmini_matmul", output_dir), python_module=False)
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    bvec = rng.integers(-5000, 5000, (1, N), dtype=np.int32) if bias else None
    scale = np.float32(1.0 / (4 * K))
    c = np.zeros((M, N), np.int8)
    lib.gemmini_reset_counters()
    lib.gemmini_matmul(a, b, *((bvec,) if bias else ()), c, scale)
    counters = lib.gemmini_counters()
    want = reference(a, b, scale, relu, bvec)
    if not np.array_equal(c, want):
        bad = np.argwhere(c != want)[0]
        raise AssertionError(f"C{tuple(bad)} = {c[tuple(bad)]}, numpy says {want[tuple(bad)]}")
    if not quiet:
        kinds = ("config_ex", "config_ld", "config_st", "mvin", "mvout", "preload", "compute_preloaded",
                 "compute_accumulated")
        print(f"{M}x{N}x{K} int8 matmul{' + bias' if bias else ''}{' + ReLU' if relu else ''}"
              f"{' (naive schedule)' if naive else ''}: equals numpy bit for bit")
        print("  instructions: " + ", ".join(f"{k} {counters[k]}" for k in kinds))
        print(f"  bytes in {counters['bytes_in']}, out {counters['bytes_out']}; MACs {counters['macs']}")
        print(f"  cycles {counters['cycles']} (load {counters['load_cycles']}, execute "
              f"{counters['execute_cycles']}, store {counters['store_cycles']}); "
              f"utilization {counters['utilization']:.3f}")
        print(f"  {not_timed(functional_model(plan.target))}; the cycles above are the model's estimate")
    return counters


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="256x256x128", help="MxNxK (default 256x256x128)")
    p.add_argument("--no-relu", action="store_true")
    p.add_argument("--bias", action="store_true", help="add an int32 bias row before scaling")
    p.add_argument("--naive", action="store_true", help="the schedule without reuse, for comparison")
    p.add_argument("--output-dir", help=OUTPUT_HELP)
    a = p.parse_args(argv)
    M, N, K = (int(x) for x in a.shape.lower().split("x"))
    run(M, N, K, relu=not a.no_relu, bias=a.bias, naive=a.naive, output_dir=a.output_dir)


if __name__ == "__main__":
    sys.exit(main())
