"""sgemm: accpy (samples/optimized_matmul.py) vs numpy (OpenBLAS) and MKL, measured in one process.

Prints one JSON object per line:
  kernel, shape, threads, accpy_gflops, numpy_gflops, ratio (accpy / numpy, medians),
  mkl_gflops, ratio_mkl (accpy / MKL's cblas_sgemm; null when the mkl wheel is not installed),
  peak_gflops (measured AVX-512 FMA peak for that thread count), peak_fraction,
  numpy_blas (OpenBLAS build and core type), mkl (MKL's version, or why it is missing),
  openblas_coretype (the env override, if any).

accpy and MKL compute C += A @ B (cblas_sgemm with beta = 1); numpy computes A @ B into a
preallocated array (`out=`), so none of the three allocates while timed. MKL comes from the
`mkl` wheel (pip install 'accpy[bench]'), loaded by benchmarks/mklblas.py.

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
import mklblas  # noqa: E402
from _common import Blas, fma_peak_gflops, interleaved_best  # noqa: E402
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
    mkl, mkl_missing = mklblas.load()
    if mkl is None:
        print(f"MKL not measured: {mkl_missing}", file=sys.stderr)
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
        c_np = np.empty((M, N), np.float32)
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
            contenders = {"accpy": lambda: fn(a, b, c), "numpy": lambda: np.matmul(a, b, out=c_np)}
            if mkl is not None:
                mkl.set_threads(t)
                c[:] = 0
                mkl.sgemm(a, b, c)
                err = float(np.abs(c - want).max() / max(np.abs(want).max(), 1.0))
                if not err < 1e-4:
                    raise SystemExit(f"MKL sgemm {M}x{N}x{K}: wrong result (relative error {err:.2e})")
                contenders["mkl"] = lambda: mkl.sgemm(a, b, c)
            best = interleaved_best(contenders, args.repeat)
            g = {name: flop / sec / 1e9 for name, sec in best.items()}
            print(json.dumps({
                "kernel": "sgemm", "shape": [M, N, K], "threads": t,
                "accpy_gflops": round(g["accpy"], 1), "numpy_gflops": round(g["numpy"], 1),
                "ratio": round(g["accpy"] / g["numpy"], 3),
                "mkl_gflops": round(g["mkl"], 1) if "mkl" in g else None,
                "ratio_mkl": round(g["accpy"] / g["mkl"], 3) if "mkl" in g else None,
                "peak_gflops": round(peaks[t], 1),
                "peak_fraction": round(g["accpy"] / peaks[t], 3) if peaks[t] else None,
                "numpy_blas": blas.describe(),
                "mkl": mkl.version() if mkl is not None else f"not measured: {mkl_missing}",
                "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
            }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
