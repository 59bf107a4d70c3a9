"""Low-precision matmuls on the x86 tile unit (AMX) against Intel MKL, in the same process.

    python benchmarks/lowp.py [--sizes 256,512,1024,2048,4096,1000,511x513x257] [--threads 1,2]
                              [--dtypes int8,bf16] [--repeat 5] [--sgemm]

int8: C (int32) += A (uint8) . B (int8), against MKL's cblas_gemm_s8u8s32; bf16: C (float32) +=
A . B (bfloat16), against cblas_gemm_bf16bf16f32. accpy's kernel is samples/int8_matmul.py's
`tile_matmul_plan` (B packed once per column block in VNNI order, 1 x 3 accumulator tiles kept
across k), checked against numpy (int8: exactly) before it is timed. MKL runs on as many threads
as accpy. `peak_fraction`: accpy's rate over the measured tile-unit peak (a loop of tile dot
products on registers, per thread, times the threads). `--sgemm` adds accpy's own fp32 sgemm
(samples/optimized_matmul.py) of the same shape (`sgemm_gflops`, `vs_sgemm`: ops per second
over the sgemm's). One JSON object per line: kernel, dtype, path, shape, threads, accpy_gops,
mkl_gops, ratio (accpy / MKL, medians in this process), peak_fraction. Skips, saying why, where
the CPU has no tile unit or MKL is missing.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "samples"))
from _common import median_seconds  # noqa: E402

import accpy as acc  # noqa: E402
from int8_matmul import tile_matmul_plan  # noqa: E402

PEAK_C = r"""
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
/* ops per call: iters * 4 tile dot products of 16 x 16 x 64 (int8) or 16 x 16 x 32 (bf16) */
int amx_peak(long iters, int bf16) {
    if (syscall(SYS_arch_prctl, 0x1023, 18)) return -1;   /* ARCH_REQ_XCOMP_PERM, XTILEDATA */
    uint8_t cfg[64] __attribute__((aligned(64)));
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;
    for (int t = 0; t < 8; t++) { cfg[16 + 2 * t] = 64; cfg[48 + t] = 16; }
    static uint8_t buf[1024] __attribute__((aligned(64)));
    _tile_loadconfig(cfg);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, buf, 64); _tile_loadd(5, buf, 64); _tile_loadd(6, buf, 64); _tile_loadd(7, buf, 64);
    if (bf16) {
        for (long n = 0; n < iters; n++) {
            _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
        }
    } else {
        for (long n = 0; n < iters; n++) {
            _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
        }
    }
    _tile_stored(0, buf, 64);
    _tile_release();
    return 0;
}
"""


def tile_peak_gops(dtype: str, out_dir: Path) -> float:
    """One core's measured tile-unit rate (GOPS) on register operands."""
    src, lib = out_dir / "amx_peak.c", out_dir / "libamx_peak.so"
    src.write_text(PEAK_C)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-mamx-tile", "-mamx-int8", "-mamx-bf16", str(src), "-o",
                    str(lib)], check=True)
    f = ctypes.CDLL(str(lib)).amx_peak
    f.argtypes, f.restype = [ctypes.c_long, ctypes.c_int], ctypes.c_int
    iters = 200_000
    bf16 = int(dtype == "bf16")
    if f(1000, bf16) != 0:
        raise RuntimeError("the OS refused the tile unit (arch_prctl)")
    t = median_seconds(lambda: f(iters, bf16), repeat=5)
    ops = iters * 4 * 2 * 16 * 16 * (64 if dtype == "int8" else 32)
    return ops / t / 1e9


def shapes(spec: str):
    for x in spec.split(","):
        d = [int(v) for v in x.lower().split("x")]
        yield tuple((d * 3)[:3]) if len(d) == 1 else tuple(d)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024,2048,4096,1000,511x513x257")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="int8,bf16")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sgemm", action="store_true", help="also time accpy's fp32 sgemm of each shape")
    a = ap.parse_args(argv)
    host = acc.Target.HOST
    if not all(host.has(f) for f in ("amx_tile", "amx_int8", "amx_bf16")):
        print(json.dumps({"skipped": "this CPU has no AMX tile unit (int8 and bf16 tiles)"}))
        return 0
    import mklblas

    mkl, why = mklblas.load()
    if mkl is None:
        print(json.dumps({"skipped": f"MKL is not available ({why}); pip install -e '.[bench]'"}))
        return 0
    rng = np.random.default_rng(0)
    out_dir = Path(tempfile.mkdtemp(prefix="accpy_lowp_"))
    peaks = {d: tile_peak_gops(d, out_dir) for d in a.dtypes.split(",")}
    for d, p in peaks.items():
        print(json.dumps({"kernel": "tile_peak", "dtype": d, "path": "amx", "threads": 1, "gops": round(p, 1)}),
              flush=True)
    for threads in (int(t) for t in a.threads.split(",")):
        mkl.set_threads(threads)
        for dtype in a.dtypes.split(","):
            for M, N, K in shapes(a.sizes):
                plan, args = tile_matmul_plan(M, N, K, dtype, threads, target=host)
                pkg = acc.Package()
                pkg.add(plan, args=args, base_name="mm")
                fn = pkg.build(f"lowp_{dtype}_{M}_{N}_{K}_{threads}", output_dir=out_dir, python_module=False,
                               progress=False).mm
                if dtype == "int8":
                    x = rng.integers(0, 256, (M, K), dtype=np.uint8)
                    y = rng.integers(-128, 128, (K, N), dtype=np.int8)
                    c = np.zeros((M, N), np.int32)
                    fn(x, y, c)
                    assert np.array_equal(c, x.astype(np.int32) @ y.astype(np.int32)), "int8 result differs from numpy"
                    ref = lambda: mkl.gemm_s8u8s32(x, y, c)  # noqa: E731
                else:
                    x = acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32))
                    y = acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32))
                    c = np.zeros((M, N), np.float32)
                    fn(x, y, c)
                    want = acc.bfloat16_values(x) @ acc.bfloat16_values(y)
                    assert np.allclose(c, want, rtol=1e-3, atol=1e-3 * np.sqrt(K)), "bf16 result differs from numpy"
                    ref = lambda: mkl.gemm_bf16bf16f32(x, y, c)  # noqa: E731
                ops = 2.0 * M * N * K
                t_accpy = median_seconds(lambda: fn(x, y, c), repeat=a.repeat)
                t_mkl = median_seconds(ref, repeat=a.repeat)
                row = {"kernel": "matmul", "dtype": dtype, "path": "amx", "shape": [M, N, K], "threads": threads,
                       "accpy_gops": round(ops / t_accpy / 1e9, 1), "mkl_gops": round(ops / t_mkl / 1e9, 1),
                       "ratio": round(t_mkl / t_accpy, 3),
                       "peak_fraction": round(ops / t_accpy / 1e9 / (peaks[dtype] * threads), 3)}
                if a.sgemm:
                    from optimized_matmul import matmul_plan

                    sp, sargs = matmul_plan(M, N, K, threads=threads)
                    pkg = acc.Package()
                    pkg.add(sp, args=sargs, base_name="sgemm")
                    sg = pkg.build(f"lowp_sgemm_{M}_{N}_{K}_{threads}", output_dir=out_dir, python_module=False,
                                   progress=False).sgemm
                    fa, fb = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
                    fc = np.zeros((M, N), np.float32)
                    t_s = median_seconds(lambda: sg(fa, fb, fc), repeat=a.repeat)
                    row["sgemm_gflops"] = round(ops / t_s / 1e9, 1)
                    row["vs_sgemm"] = round(t_s / t_accpy, 2)
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
