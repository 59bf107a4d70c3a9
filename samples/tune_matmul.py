"""Tune the sgemm sample's blocking per shape and thread count, and compare with its formula.

samples/optimized_matmul.py picks its blocks with a formula (`block_sizes`: the micro-tile
from the registers, KC/NC/MC from the caches, the parallel loop from the block count). This
script measures a grid around it with `acc.tune`: NC, KC, MC, the micro-tile MR x NR, whether
A is packed too, and with threads the parallel loop (j or i) and the OpenMP policy. The
formula's choice is the baseline: it is always measured in full, next to the best found.
Grids larger than --variants are searched by random sampling plus successive halving.

    python samples/tune_matmul.py [--sizes 1024,512x512x2048] [--threads 1,2] [--variants 60]
                                  [--seed 0] [--results FILE] [--table] [--dask ADDRESS|local]
    python samples/tune_matmul.py --quick        # a small shape and grid: a smoke test
"""
from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# first: numpy's BLAS on one thread (the variants' results are checked with numpy)
import sample_support  # noqa: E402

import accpy as acc  # noqa: E402
from optimized_matmul import block_sizes, matmul_plan  # noqa: E402

MICRO_TILES = ((6, 64), (4, 64), (8, 48), (8, 32), (12, 32))  # MR x NR: MR * NR / 16 accumulators fit 32 zmm registers
# 8 lanes (AVX2): MR * NR / 8 accumulators, with NR / 8 vectors of B and A's broadcast, fit 16 ymm registers
MICRO_TILES_8 = ((4, 24), (6, 16), (3, 32), (4, 16), (2, 32))


def micro_tiles(target) -> tuple:
    """The grid's micro-tiles for the target's vector width (the formula's among them)."""
    return MICRO_TILES if target.vector_bytes >= 64 else MICRO_TILES_8


def sgemm_variant(M: int, N: int, K: int, threads: int, NC: int, KC: int, MC: int, MR: int, NR: int,
                  pack_a: bool, par: str = "", policy: str = "static", prefetch: int = 8):
    """(plan, args) of optimized_matmul's schedule with these blocks (and parallel loop, policy;
    B's lines prefetched `prefetch` k iterations ahead, 0: not)."""
    sizes = dict(NC=NC, KC=KC, MC=MC, MR=MR, NR=NR, pack_a=pack_a, prefetch=prefetch)
    plan, args = matmul_plan(M, N, K, threads=1, sizes=sizes)
    if threads > 1:
        j, _k, i = plan.schedule.get_indices()[:3]  # the order is (j, k, i, ii, jj, kk, iii, jjj)
        plan.parallelize(j if par == "j" else i, policy=policy, max_threads=threads)
    return plan, args


def formula_choice(M: int, N: int, K: int, threads: int) -> dict:
    """optimized_matmul's own choice, as a grid entry."""
    b = block_sizes(acc.Target.HOST, M, N, K, threads)
    out = {k: b[k] for k in ("NC", "KC", "MC", "MR", "NR", "pack_a", "prefetch")}
    if threads > 1:
        out.update(par="j" if -(-N // b["NC"]) >= threads else "i", policy="static")
    return out


def grid_for(M: int, N: int, K: int, threads: int, quick: bool = False) -> list:
    """Blocks around the formula's: NC = NR x {1, 2, 4, 8}, KC in {128, 256, 512, K}, MC = MR x {8, 16, 32}."""
    out = []
    micro = micro_tiles(acc.Target.HOST)
    micro = micro[:2] if quick else micro
    for MR, NR in micro:
        ncs = [NR] if quick else sorted({NR * m for m in (1, 2, 4, 8) if NR * m <= max(N, NR)})
        kcs = [min(K, 128)] if quick else sorted({min(K, kc) for kc in (128, 256, 512, K) if kc <= 1024})
        mcs = [MR * 8] if quick else [MR * m for m in (8, 16, 32)]
        for NC, KC, MC, pack_a in itertools.product(ncs, kcs, mcs, (False, True)):
            entry = dict(NC=NC, KC=KC, MC=MC, MR=MR, NR=NR, pack_a=pack_a, prefetch=8)
            if threads == 1:
                out.append(entry)
            else:
                pars = ("j", "i") if not quick else ("j",)
                for par, policy in itertools.product(pars, ("static", "dynamic")[:1 if quick else 2]):
                    out.append(dict(entry, par=par, policy=policy))
    return out


def parse_size(s: str) -> tuple:
    parts = [int(x) for x in s.lower().split("x")]
    return tuple(parts * 3) if len(parts) == 1 else tuple(parts)


def describe(values: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024", help="comma-separated MxNxK (or N for N^3); default 1024")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts; default 1")
    ap.add_argument("--variants", type=int, default=60, help="variants measured per shape (default 60)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--results", default=None,
                    help="the results file, kept between runs (default: results.jsonl in --output-dir)")
    ap.add_argument("--output-dir", help=sample_support.OUTPUT_HELP)
    ap.add_argument("--table", action="store_true", help="print every measured variant")
    ap.add_argument("--dask", metavar="ADDRESS", help="a Dask scheduler's address, or 'local' for a LocalCluster")
    ap.add_argument("--quick", action="store_true", help="128^3, 1 thread, 4 variants, 2 samples each")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.threads, args.repeats = "128", "1", 2
    if args.results is None:
        args.results = str(sample_support.output_dir("tune_matmul", args.output_dir) / "results.jsonl")
    executor = None
    if args.dask:
        from distributed import Client, LocalCluster

        executor = Client(LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, dashboard_address=None)
                          if args.dask == "local" else args.dask)
    try:
        for size in args.sizes.split(","):
            M, N, K = parse_size(size)
            for threads in (int(t) for t in args.threads.split(",")):
                grid = grid_for(M, N, K, threads, args.quick)
                n = min(args.variants, len(grid))
                search = acc.tune.Exhaustive() if n >= len(grid) else \
                    acc.tune.Halving(fraction=n / len(grid), seed=args.seed, min_variants=n)
                t0 = time.perf_counter()
                r = acc.tune(functools.partial(sgemm_variant, M, N, K, threads), grid=grid, search=search,
                             baseline=formula_choice(M, N, K, threads), results_file=args.results,
                             repeats=args.repeats, timeout=args.timeout, seed=args.seed, executor=executor,
                             label=f"sgemm_{M}x{N}x{K}_t{threads}")
                seconds = time.perf_counter() - t0
                flop = 2.0 * M * N * K
                print(f"sgemm {M}x{N}x{K}, {threads} thread(s): {len(r.variants)} of {r.grid_size} variants measured "
                      f"({r.strategy}), {len(r.ranked)} ok, {len(r.failures())} failed, {seconds:.1f} s")
                if args.table:
                    print(r.table())
                best, base = r.best, r.baseline
                print(f"  best:    {describe(best.values):64s} {r.objective.format(best.value)}  "
                      f"{flop / best.value / 1e9:6.1f} GFLOP/s")
                if base is not None and base.value is not None:
                    print(f"  formula: {describe(base.values):64s} {r.objective.format(base.value)}  "
                          f"{flop / base.value / 1e9:6.1f} GFLOP/s  (best / formula: {base.value / best.value:.2f}x)")
                elif base is not None:
                    print(f"  formula: {describe(base.values)}: {base.status} {base.error}")
    finally:
        if executor is not None:
            executor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
