"""conv 3x3: accpy's direct convolution (samples/conv2d.py) vs numpy im2col + sgemm, in one process.

Prints one JSON object per line:
  kernel ("conv3x3"), shape ([H, W, C, K]: output height, width, input and output channels),
  threads, accpy_gflops, numpy_gflops, ratio (accpy / numpy, medians),
  peak_gflops (AVX-512 FMA peak for that thread count, measured right after the line's
  timings, so that it sees the same machine load), peak_fraction,
  numpy_blas (OpenBLAS build and core type), openblas_coretype (the env override, if any),
  loadavg (the 1-minute load average when the line was measured: other work on the cores
  lowers all three numbers; with threads > 1 and a core taken by another process, both
  OpenMP and OpenBLAS collapse, as threads wait for a descheduled partner).

The numpy baseline is what a numpy user writes: an im2col patch matrix [H*W, 9*C] built
from a strided view (sliding_window_view, then one copy), times the weights reshaped to
[9*C, K] with `@` (OpenBLAS sgemm); im2col and sgemm are timed together.

    python benchmarks/conv.py [--sizes 56x56x64x64] [--threads 1,2]
    env -u OPENBLAS_CORETYPE python benchmarks/conv.py   # let OpenBLAS pick its AVX-512 kernels
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
from conv2d import conv2d_plan, conv2d_reference  # noqa: E402

DEFAULT_SIZES = "56x56x64x64"


def parse_size(s: str):
    parts = [int(x) for x in s.lower().split("x")]
    if len(parts) != 4:
        raise SystemExit(f"--sizes: expected HxWxCxK, got {s!r}")
    return tuple(parts)


def im2col_conv(inp: np.ndarray, w2: np.ndarray, H: int, W: int) -> np.ndarray:
    """numpy: the [H*W, 9*C] patch matrix (one copy of a strided view) @ weights [9*C, K]."""
    C = inp.shape[2]
    win = np.lib.stride_tricks.sliding_window_view(inp, (3, 3), axis=(0, 1))  # [H, W, C, 3, 3], a view
    patches = np.ascontiguousarray(win.transpose(0, 1, 3, 4, 2)).reshape(H * W, 9 * C)  # (kh, kw, ci) rows
    return patches @ w2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="HxWxCxK, comma-separated (output H, W; C -> K)")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    blas = Blas()
    out_dir = tempfile.mkdtemp(prefix="accpy_bench_conv_")
    rng = np.random.default_rng(0)
    for H, W, C, K in sizes:
        pkg = acc.Package()
        for t in threads:
            plan, fargs = conv2d_plan(H, W, C, K, threads=t)
            pkg.add(plan, args=fargs, base_name=f"conv3x3_t{t}")
        lib = pkg.build(f"bench_conv_{H}_{W}_{C}_{K}", output_dir=out_dir, python_module=False)
        inp = rng.standard_normal((H + 2, W + 2, C), dtype=np.float32)
        wt = rng.standard_normal((3, 3, C, K), dtype=np.float32)
        w2 = wt.reshape(9 * C, K)
        out = np.zeros((H, W, K), np.float32)
        want = conv2d_reference(inp, wt)
        scale = max(np.abs(want).max(), 1.0)
        err_np = float(np.abs(im2col_conv(inp, w2, H, W).reshape(H, W, K) - want).max() / scale)
        if not err_np < 1e-3:
            raise SystemExit(f"numpy im2col baseline is wrong (relative error {err_np:.2e})")
        flop = 2.0 * H * W * C * K * 9
        for t in threads:
            fn = getattr(lib, f"conv3x3_t{t}")
            out[:] = 0
            fn(inp, wt, out)
            err = float(np.abs(out - want).max() / scale)
            if not err < 1e-3:
                raise SystemExit(f"conv3x3 {H}x{W}x{C}x{K} t={t}: wrong result (relative error {err:.2e})")
            blas.set_threads(t)
            # interleave the two measurements so that machine noise hits both alike
            ours = median_seconds(lambda: fn(inp, wt, out), args.repeat)
            theirs = median_seconds(lambda: im2col_conv(inp, w2, H, W), args.repeat)
            ours = min(ours, median_seconds(lambda: fn(inp, wt, out), args.repeat))
            theirs = min(theirs, median_seconds(lambda: im2col_conv(inp, w2, H, W), args.repeat))
            g_ours, g_theirs = flop / ours / 1e9, flop / theirs / 1e9
            peak = fma_peak_gflops(t)
            print(json.dumps({
                "kernel": "conv3x3", "shape": [H, W, C, K], "threads": t,
                "accpy_gflops": round(g_ours, 1), "numpy_gflops": round(g_theirs, 1),
                "ratio": round(g_ours / g_theirs, 3),
                "peak_gflops": round(peak, 1),
                "peak_fraction": round(g_ours / peak, 3) if peak else None,
                "numpy_blas": blas.describe(),
                "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
                "loadavg": round(os.getloadavg()[0], 2),
            }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
