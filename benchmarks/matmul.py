"""sgemm: accpy (samples/optimized_matmul.py) vs numpy (OpenBLAS), measured in one process.

Prints one JSON object per line:
  kernel, shape, threads, accpy_gflops, numpy_gflops, ratio (accpy / numpy, medians),
  peak_gflops (measured AVX-512 FMA peak for that thread count), peak_fraction,
  numpy_blas (OpenBLAS build and core type), openblas_coretype (the env override, if any).

    python benchmarks/matmul.py [--sizes 256,512,1024,2048,1000,511x513x257] [--threads 1,2]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "samples"))

import accpy as acc  # noqa: E402
from _common import Blas, fma_peak_gflops, median_seconds  # noqa: E402
from optimized_matmul import matmul_plan  # noqa: E402

DEFAULT_SIZES = "256,512,1024,2048,1000,511x513x257"


def parse_size(s: str):
    parts = [int(x) for x in s.lower().split("x")]
    return tuple(parts * 3) if len(parts) == 1 else tuple(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    blas = Blas()
    peaks = {t: fma_peak_gflops(t) for t in threads}
    out_dir = tempfile.mkdtemp(prefix="accpy_bench_matmul_")
    rng = np.random.default_rng(0)
    for M, N, K in sizes:
        pkg = acc.Package()
        for t in threads:
            plan, fargs = matmul_plan(M, N, K, threads=t)
            pkg.add(plan, args=fargs, base_name=f"sgemm_t{t}")
        lib = pkg.build(f"bench_mm_{M}_{N}_{K}", output_dir=out_dir, python_module=False)
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        c = np.zeros((M, N), np.float32)
        want = a @ b
        flop = 2.0 * M * N * K
        for t in threads:
            fn = getattr(lib, f"sgemm_t{t}")
            c[:] = 0
            fn(a, b, c)
            err = float(np.abs(c - want).max() / max(np.abs(want).max(), 1.0))
            if not err < 1e-4:
                raise SystemExit(f"sgemm {M}x{N}x{K} t={t}: wrong result (relative error {err:.2e})")
            blas.set_threads(t)
            # interleave the two measurements so that machine noise hits both alike
            ours = median_seconds(lambda: fn(a, b, c), args.repeat)
            theirs = median_seconds(lambda: np.matmul(a, b), args.repeat)
            ours = min(ours, median_seconds(lambda: fn(a, b, c), args.repeat))
            theirs = min(theirs, median_seconds(lambda: np.matmul(a, b), args.repeat))
            g_ours, g_theirs = flop / ours / 1e9, flop / theirs / 1e9
            print(json.dumps({
                "kernel": "sgemm", "shape": [M, N, K], "threads": t,
                "accpy_gflops": round(g_ours, 1), "numpy_gflops": round(g_theirs, 1),
                "ratio": round(g_ours / g_theirs, 3),
                "peak_gflops": round(peaks[t], 1),
                "peak_fraction": round(g_ours / peaks[t], 3) if peaks[t] else None,
                "numpy_blas": blas.describe(),
                "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
            }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
