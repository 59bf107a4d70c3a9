"""Low-precision matmuls on the x86 tile unit (AMX) and on AVX-512 dot products (VNNI, BF16)
against Intel MKL, in the same process.

    python benchmarks/lowp.py [--sizes 256,512,1024,2048,4096,1000,511x513x257] [--threads 1,2]
                              [--dtypes int8,bf16] [--paths amx,vector] [--repeat 5] [--sgemm]

int8: C (int32) += A (uint8) . B (int8), against MKL's cblas_gemm_s8u8s32; bf16: C (float32) +=
A . B (bfloat16), against cblas_gemm_bf16bf16f32. Two kernels of samples/int8_matmul.py: path
"amx", `build_tile_matmul` (`tile_matmul_plan`: B packed per block in VNNI order, accumulator tiles
kept across k, the grid and blocks of `tile_block_sizes`; where C's rows start 16, 32 or 48 bytes
past a cache line, as numpy's large arrays do, in two functions, the first over the columns whose
tile rows are whole lines, timed together); the vector path ("vnni" for int8: VPDPBUSD;
"avx512bf16": VDPBF16PS), `vector_matmul_plan` (a 6 x 64 register tile, B packed in VNNI order). Each is checked against
numpy (int8: exactly) before it is timed. MKL runs on as many threads as accpy. `peak_fraction`:
accpy's rate over the measured peak of the path's instruction (a loop of tile or vector dot
products on registers, per thread, times the threads; `kernel: "peak"` rows). `--sgemm` adds
accpy's own fp32 sgemm (samples/optimized_matmul.py) of the same shape (`sgemm_gflops`,
`vs_sgemm`: ops per second over the sgemm's). One JSON object per line: kernel, dtype, path,
shape, threads, accpy_gops, mkl_gops, ratio (accpy / MKL: each one's best median of two rounds in
which they take turns, in this process), peak_fraction, c_offset (where C starts past a 64-byte
cache line: numpy's arrays, as a user gets them; the tile kernel is built for it). Skips, saying
why, a path the CPU lacks, or everything when MKL is missing.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# numpy only checks results here: one OpenBLAS thread, so that no idle OpenBLAS thread spins next
# to the kernels being timed (measured: bf16 1024^3 on 2 threads at less than half speed)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "samples"))
from _common import interleaved_best, median_seconds  # noqa: E402

import accpy as acc  # noqa: E402
from int8_matmul import build_tile_matmul, has_amx, has_vector_dot, vector_matmul_plan  # noqa: E402

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
/* ops per call: iters * 12 independent dot products of 16 lanes (64 int8 or 32 bf16 products) */
#define ACC12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define DECL(n) __m512i c##n = _mm512_setzero_si512();
#define DPBUSD(n) __asm__("vpdpbusd %2, %1, %0" : "+v"(c##n) : "v"(a), "v"(b));
#define DPBF16(n) __asm__("vdpbf16ps %2, %1, %0" : "+v"(c##n) : "v"(a), "v"(b));
#define SUM(n) s += _mm512_reduce_add_epi32(c##n);
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512bf16")))
int vector_peak(long iters, int bf16) {
    __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x01010101);
    ACC12(DECL)
    if (bf16) {
        for (long n = 0; n < iters; n++) { ACC12(DPBF16) }
    } else {
        for (long n = 0; n < iters; n++) { ACC12(DPBUSD) }
    }
    int s = 0;
    ACC12(SUM)
    return s == 12345 ? 1 : 0;
}
"""


def _sig(v: float, digits: int = 4) -> float:
    """`v` to `digits` significant digits."""
    return float(f"{v:.{digits}g}")


def _peak_library(out_dir: Path):
    src, lib = out_dir / "lowp_peak.c", out_dir / "liblowp_peak.so"
    if not lib.exists():
        src.write_text(PEAK_C)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-mamx-tile", "-mamx-int8", "-mamx-bf16", str(src), "-o",
                        str(lib)], check=True)
    return ctypes.CDLL(str(lib))


def tile_peak_gops(dtype: str, out_dir: Path) -> float:
    """One core's measured tile-unit rate (GOPS) on register operands."""
    f = _peak_library(out_dir).amx_peak
    f.argtypes, f.restype = [ctypes.c_long, ctypes.c_int], ctypes.c_int
    iters = 200_000
    bf16 = int(dtype == "bf16")
    if f(1000, bf16) != 0:
        raise RuntimeError("the OS refused the tile unit (arch_prctl)")
    t = median_seconds(lambda: f(iters, bf16), repeat=5)
    ops = iters * 4 * 2 * 16 * 16 * (64 if dtype == "int8" else 32)
    return ops / t / 1e9


def vector_peak_gops(dtype: str, out_dir: Path) -> float:
    """One core's measured rate (GOPS) of VPDPBUSD (int8) or VDPBF16PS (bf16) on registers."""
    f = _peak_library(out_dir).vector_peak
    f.argtypes, f.restype = [ctypes.c_long, ctypes.c_int], ctypes.c_int
    iters = 2_000_000
    bf16 = int(dtype == "bf16")
    t = median_seconds(lambda: f(iters, bf16), repeat=5)
    ops = iters * 12 * 2 * (64 if dtype == "int8" else 32)
    return ops / t / 1e9


VECTOR_PATH = {"int8": "vnni", "bf16": "avx512bf16"}


def tile_kernel(M, N, K, dtype, threads, host, c, out_dir):
    """The tile unit's kernel (samples/int8_matmul.py's `build_tile_matmul`, for C's offset past a
    cache line: where C's rows all start 16, 32 or 48 bytes past one, as numpy's large arrays
    do, two functions, the accumulator tiles of the first on whole lines): run(a, b, c)."""
    return build_tile_matmul(M, N, K, dtype, threads, c_offset=c.ctypes.data % 64, output_dir=out_dir,
                             target=host)[1]


def vector_kernel(M, N, K, dtype, threads, host, c, out_dir):
    """The AVX-512 dot-product kernel (`vector_matmul_plan`): run(a, b, c)."""
    plan, args = vector_matmul_plan(M, N, K, dtype, threads, target=host)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    return pkg.build(f"lowp_vector_{dtype}_{M}_{N}_{K}_{threads}", output_dir=out_dir, python_module=False,
                     progress=False).mm


def available_paths(host, dtype: str, paths) -> list:
    """[(path name, kernel builder)] this CPU runs; a JSON skip line for each it does not."""
    out = []
    for p in paths:
        if p == "amx":
            if has_amx(host):
                out.append(("amx", tile_kernel))
            else:
                print(json.dumps({"skipped": f"{dtype} amx: this CPU has no AMX tile unit"}), flush=True)
        else:
            name = VECTOR_PATH[dtype]
            if has_vector_dot(dtype, host):
                out.append((name, vector_kernel))
            else:
                print(json.dumps({"skipped": f"{dtype} {name}: this CPU has no AVX-512 {name.upper()}"}), flush=True)
    return out


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
    ap.add_argument("--paths", default="amx,vector", help="amx, vector (VNNI / AVX512-BF16) or both")
    a = ap.parse_args(argv)
    host = acc.Target.HOST
    import mklblas

    mkl, why = mklblas.load()
    if mkl is None:
        print(json.dumps({"skipped": f"MKL is not available ({why}); pip install -e '.[bench]'"}))
        return 0
    rng = np.random.default_rng(0)
    out_dir = Path(tempfile.mkdtemp(prefix="accpy_lowp_"))
    dtypes = a.dtypes.split(",")
    paths = {d: available_paths(host, d, a.paths.split(",")) for d in dtypes}
    peaks = {}
    for d in dtypes:
        for name, _ in paths[d]:
            peaks[(d, name)] = tile_peak_gops(d, out_dir) if name == "amx" else vector_peak_gops(d, out_dir)
            print(json.dumps({"kernel": "peak", "dtype": d, "path": name, "threads": 1,
                              "gops": round(peaks[(d, name)], 1)}), flush=True)
    for threads in (int(t) for t in a.threads.split(",")):
        mkl.set_threads(threads)
        for dtype in dtypes:
            for M, N, K in shapes(a.sizes):
                for path, make in paths[dtype]:
                    print(json.dumps(measure(a, mkl, rng, out_dir, host, make, path, dtype, (M, N, K), threads,
                                             peaks[(dtype, path)])), flush=True)
    return 0


def _rows(M: int, rng):
    """The rows of a result checked against numpy: all of them, or 64 at random (and the last)."""
    if M <= 256:
        return np.arange(M)
    return np.unique(np.append(rng.choice(M, 63, replace=False), M - 1))


def measure(a, mkl, rng, out_dir, host, make, path, dtype, shape, threads, peak) -> dict:
    """One row: accpy's kernel of `path` checked against numpy, then timed against MKL."""
    M, N, K = shape
    if dtype == "int8":
        x = rng.integers(0, 256, (M, K), dtype=np.uint8)
        y = rng.integers(-128, 128, (K, N), dtype=np.int8)
        c = np.zeros((M, N), np.int32)
        fn = make(M, N, K, dtype, threads, host, c, out_dir)
        fn(x, y, c)
        rows = _rows(M, rng)  # (numpy's integer matmul is slow: large results are checked on 64 rows)
        assert np.array_equal(c[rows], x[rows].astype(np.int32) @ y.astype(np.int32)), "int8 result differs from numpy"
        ref = lambda: mkl.gemm_s8u8s32(x, y, c)  # noqa: E731
    else:
        x = acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32))
        y = acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32))
        c = np.zeros((M, N), np.float32)
        fn = make(M, N, K, dtype, threads, host, c, out_dir)
        fn(x, y, c)
        rows = _rows(M, rng)
        want = acc.bfloat16_values(x[rows]) @ acc.bfloat16_values(y)
        assert np.allclose(c[rows], want, rtol=1e-3, atol=1e-3 * np.sqrt(K)), "bf16 result differs from numpy"
        ref = lambda: mkl.gemm_bf16bf16f32(x, y, c)  # noqa: E731
    ops = 2.0 * M * N * K
    best = interleaved_best({"accpy": lambda: fn(x, y, c), "mkl": ref}, repeat=a.repeat)
    t_accpy, t_mkl = best["accpy"], best["mkl"]
    # (significant digits: a tiny shape on a busy machine must not round to 0)
    row = {"kernel": "matmul", "dtype": dtype, "path": path, "shape": [M, N, K], "threads": threads,
           "accpy_gops": _sig(ops / t_accpy / 1e9), "mkl_gops": _sig(ops / t_mkl / 1e9),
           "ratio": round(t_mkl / t_accpy, 3), "peak_fraction": _sig(ops / t_accpy / 1e9 / (peak * threads)),
           "c_offset": c.ctypes.data % 64}
    if a.sgemm:
        from optimized_matmul import matmul_plan

        sp, sargs = matmul_plan(M, N, K, threads=threads)
        pkg = acc.Package()
        pkg.add(sp, args=sargs, base_name="sgemm")
        sg = pkg.build(f"lowp_sgemm_{M}_{N}_{K}_{threads}", output_dir=out_dir, python_module=False,
                       progress=False).sgemm
        fa, fb = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
        fc = np.zeros((M, N), np.float32)
        # interleaved with accpy's kernel, so drift hits both alike
        ts, tk = [], []
        for _ in range(a.repeat):
            ts.append(median_seconds(lambda: sg(fa, fb, fc), repeat=1))
            tk.append(median_seconds(lambda: fn(x, y, c), repeat=1))
        t_s, t_k = float(np.median(ts)), float(np.median(tk))
        row["sgemm_gflops"] = round(ops / t_s / 1e9, 1)
        row["vs_sgemm"] = round(t_s / t_k, 2)
    return row


if __name__ == "__main__":
    sys.exit(main())
