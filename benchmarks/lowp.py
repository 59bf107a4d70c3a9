"""Low-precision matmuls on the x86 tile unit (AMX) against Intel MKL, in the same process.

    python benchmarks/lowp.py [--sizes 256,512,1024] [--dtypes int8,bf16] [--repeat 5]

int8: C (int32) += A (uint8) . B (int8), against MKL's cblas_gemm_s8u8s32; bf16: C (float32) +=
A . B (bfloat16), against cblas_gemm_bf16bf16f32. accpy's kernel is the tensorized schedule
(16 x 16 x 64 int8 / 16 x 16 x 32 bf16 tiles; C kept in its tile across k), checked
against numpy (int8: exactly) before it is timed. One JSON object per line: kernel, dtype, path,
shape, threads, accpy_gops, mkl_gops, ratio (accpy / MKL; medians in this process). One thread
(MKL is pinned to one too). Skips, saying why, where the CPU has no tile unit or MKL is missing.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_seconds  # noqa: E402

import accpy as acc  # noqa: E402

S = acc.ScalarType


def tile_plan(M, N, K, dtype: str):
    """(plan, args) of the tensorized matmul of `dtype` ("int8" or "bf16")."""
    ta, tb, tc = (S.uint8, S.int8, S.int32) if dtype == "int8" else (S.bfloat16, S.bfloat16, S.float32)
    A = acc.Array(role=acc.Role.INPUT, element_type=ta, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=tb, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=tc, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(A[i, k], tc) * acc.cast(B[k, j], tc)

    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 16), s.split(j, 16), s.split(k, 64 if dtype == "int8" else 32)
    s.reorder(i, j, k, ii, jj, kk)
    plan = s.create_plan(acc.Target.HOST)
    tile = acc.MemorySpace.AMX_TILE
    plan.cache(C, index=k, location=tile)  # the accumulator tile stays in its register across k
    plan.cache(A, index=ii, location=tile)
    plan.cache(B, index=ii, location=tile)  # packed in VNNI order per tile
    plan.tensorize(indices=(ii, jj, kk))
    return plan, (A, B, C)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512,1024")
    ap.add_argument("--dtypes", default="int8,bf16")
    ap.add_argument("--repeat", type=int, default=5)
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
    mkl.set_threads(1)
    rng = np.random.default_rng(0)
    out_dir = Path(tempfile.mkdtemp(prefix="accpy_lowp_"))
    for dtype in a.dtypes.split(","):
        for n in (int(x) for x in a.sizes.split(",")):
            M = N = K = n
            plan, args = tile_plan(M, N, K, dtype)
            pkg = acc.Package()
            pkg.add(plan, args=args, base_name="mm")
            fn = pkg.build(f"lowp_{dtype}_{n}", output_dir=out_dir, python_module=False, progress=False).mm
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
            print(json.dumps({"kernel": "matmul", "dtype": dtype, "path": "amx", "shape": [M, N, K], "threads": 1,
                              "accpy_gops": round(ops / t_accpy / 1e9, 1), "mkl_gops": round(ops / t_mkl / 1e9, 1),
                              "ratio": round(t_mkl / t_accpy, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
