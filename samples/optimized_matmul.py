"""An sgemm written only with accpy's public API, as fast as the best BLAS on this machine.

    C[i, j] += A[i, k] * B[k, j]

Schedule (the classic five-loop blocking):  j (NC) -> k (KC) -> i (MC) -> ii (MR) -> jj (NR)
-> kk -> iii -> jjj.  Plan: B's KC x NC block is packed (a cache filled once per k block; it
takes most of the core's L2) in panels of NR columns (`panel_width`: each micro-kernel's B is one
contiguous run; measured against rows of NC, 7-11 rounds taking turns with MKL: +1.4% at 1024^3,
+2.6% at 2048^3, -1.2% at 1000^3 on one thread, within 2% elsewhere), the MR x NR block of C is
cached at kk, and with iii unrolled and
jjj vectorized that cache lives in vector registers: the inner kk loop is MR * NR/16 FMAs on
register accumulators, its A operands broadcast straight from A's rows (a long KC amortizes the
C tile's loads and stores; packing A into MR x KC panels as well is an option, `pack_a`, that
measured slower). The MR rows of A (MR x KC: 24 KiB) stay close while they meet every NR panel
of the B block, which streams from L2 (with the panels outside the rows, both streamed from L2:
measured on a Xeon at 2048^3, one thread, 129-142 -> 151-158 GFLOP/s); each kk iteration
prefetches the B lines it will read 8 iterations later (`plan.prefetch`; measured on a Xeon,
medians of 15 interleaved runs: +2 to +5% on one thread at 256^3-2048^3 and 1000^3 (one run at 2048^3:
+0.5%; none at 511x513x257), +6 to +12% on two).
The outer j (or i) loop runs on all cores.

Next to it, the same nest scheduled by `acc.autoschedule` (the cost model alone, or with
`--measure` its best candidates measured): both are built, checked and timed taking turns.

    python samples/optimized_matmul.py [M N K] [--threads T] [--measure] [--output-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# first: numpy only checks results here, its BLAS on one thread (no idle BLAS thread next to the kernel)
from sample_support import OUTPUT_HELP, interleaved_medians, output_dir, outputs_match  # noqa: E402

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
from accpy.auto.model import balanced_nc  # noqa: E402


def block_sizes(target, M, N, K, threads):
    """Tile sizes from the target: micro-tile from the registers, blocks from the caches."""
    lanes = max(target.vector_bytes // 4, 4)
    KC = max(1, min(K, 1024))
    NR = 4 * lanes if lanes == 16 else 3 * lanes  # 64 columns on AVX-512, 24 on AVX2
    MR = 6 if lanes == 16 else 4
    if lanes == 16 and KC >= 768:
        # a long k block streams its B panels from L2: 8 x 48 reads 3 vectors of B per 24 FMAs
        # where 6 x 64 reads 4 (measured on a Xeon, one thread, 1000^3 and 2048^3: 7-15% faster;
        # at 256^3 and 512^3, with short k blocks, 6 x 64 is as fast or faster)
        MR, NR = 8, 48
    l2 = target.cache_bytes[1]
    # the packed KC x NC block of B takes 3/4 of L2 (at most 256 columns)
    NC = max(NR, min(max(4 * NR, 256) // NR * NR, (3 * l2 // 4 // (4 * KC)) // NR * NR))
    MC = 96 if 96 % MR == 0 else 16 * MR
    if threads > 1 and N >= 2 * NR * threads:
        NC = balanced_nc(N, NC, NR, threads, lanes)  # the cost model's rule (accpy/auto/model.py)
    return dict(NC=NC, KC=KC, MC=MC, NR=NR, MR=MR, pack_a=False, panel_b=True, prefetch=8)


def matmul_plan(M, N, K, threads=1, target=None, sizes=None):
    """(plan, args) of a float32 matmul C += A @ B."""
    target = target or acc.Target.HOST
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    b = sizes or block_sizes(target, M, N, K, threads)
    schedule = nest.create_schedule()
    jj = schedule.split(j, b["NC"])
    kk = schedule.split(k, b["KC"])
    ii = schedule.split(i, b["MC"])
    jjj = schedule.split(jj, b["NR"])
    iii = schedule.split(ii, b["MR"])
    schedule.reorder(j, k, i, ii, jj, kk, iii, jjj)

    plan = schedule.create_plan(target)
    # the packed KC x NC block of B, in panels of NR columns (each micro-kernel's B one contiguous run)
    plan.cache(B, index=ii, trigger_index=k, panel_width=b["NR"] if b.get("panel_b", True) else None)
    if b.get("pack_a", False):
        plan.cache(A, index=kk, trigger_index=i, layout=acc.Array.Layout.LAST_MAJOR)  # MR-wide panels of A
    plan.cache(C, index=kk)  # the MR x NR micro-tile: registers
    if b.get("prefetch"):
        plan.prefetch(B, index=kk, distance=b["prefetch"])  # the packed block's lines, 8 iterations ahead
    plan.unroll(iii)
    plan.vectorize(jjj)
    if threads > 1:
        # columns blocks if there are enough of them, else rows blocks (inside the k loop)
        plan.parallelize(j if -(-N // b["NC"]) >= threads else i, max_threads=threads)
    return plan, (A, B, C)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, help="M N K (default 1024 1024 1024)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--measure", action="store_true", help="let acc.autoschedule measure its candidates (60 s)")
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    args = ap.parse_args(argv)
    M, N, K = (args.sizes + [1024, 1024, 1024])[:3] if len(args.sizes) < 3 else args.sizes[:3]
    plan, fargs = matmul_plan(M, N, K, args.threads)
    auto = acc.autoschedule(plan.schedule.nests[0], fargs, measure=args.measure, threads=args.threads)
    print(auto.explain().splitlines()[0])
    pkg = acc.Package()
    pkg.add(plan, args=fargs, base_name="sgemm")
    pkg.add(auto, args=fargs, base_name="sgemm_auto")
    t0 = time.perf_counter()
    lib = pkg.build("optimized_matmul", output_dir=output_dir("optimized_matmul", args.output_dir),
                    python_module=False)
    print(f"built {lib.files['shared']} in {time.perf_counter() - t0:.2f} s")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c0 = rng.standard_normal((M, N), dtype=np.float32)
    want = c0 + a @ b
    if not outputs_match(lib, ("sgemm", "sgemm_auto"), (a, b), c0, want, 1e-4):
        return 1
    c = c0.copy()
    med = interleaved_medians({"hand": lambda: lib.sgemm(a, b, c), "auto": lambda: lib.sgemm_auto(a, b, c)}, 7)
    gf = {k: 2 * M * N * K / v / 1e9 for k, v in med.items()}
    print(f"sgemm {M}x{N}x{K}, {args.threads} thread(s): {gf['hand']:.1f} GFLOP/s (median of 7)")
    print(f"autoscheduled: {gf['auto']:.1f} GFLOP/s, {gf['auto'] / gf['hand']:.2f} x the hand schedule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
