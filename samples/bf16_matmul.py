"""bfloat16 matmul on the x86 tile unit (AMX) or AVX-512 BF16: C (float32) += A (bf16) @ B (bf16).

The schedule is int8_matmul.py's (`tile_matmul_plan`): B packed once per column block in VNNI
order (pairs of consecutive k per 32-bit slot), accumulator tiles kept across k (or across blocks
of k), tiles of 16 x 16 x 32; where C's rows start 16, 32 or 48 bytes past a cache line, as
numpy's large arrays do, two functions (`build_tile_matmul`): the columns from the first on a line
in every row, then the few before it. Inputs are bfloat16 bit patterns in uint16 arrays
(`acc.bfloat16_bits`); the result is checked against numpy's float64 product of the same bf16
values, within a tolerance that grows with sqrt(K) (the tile unit sums pairs of products in
float32). Where the CPU has no AMX
the product runs on VDPBF16PS (int8_matmul.py's `vector_matmul_plan`), or `--path amx` runs the
tile schedule on the functional model.

    python samples/bf16_matmul.py [M N K] [--threads T] [--path amx|vector] [--output-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# first: numpy only checks results here, its BLAS on one thread (no idle BLAS thread next to the kernels)
from sample_support import functional_model, not_timed, output_dir  # noqa: E402

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
from int8_matmul import (build_tile_matmul, default_path, describe_path, matmul_plan,  # noqa: E402
                         tile_matmul_layout, tile_target, vector_block_sizes)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", nargs="*", type=int, default=[256, 256, 256])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--output-dir", default=None, help="where the package is written (default: a temporary folder)")
    ap.add_argument("--path", choices=("amx", "vector"), default=None,
                    help="the tile unit (its model without AMX) or AVX-512 BF16 (default: AMX if present)")
    a = ap.parse_args(argv)
    M, N, K = (a.shape + a.shape[-1:] * 3)[:3]
    path = a.path or default_path("bf16")
    rng = np.random.default_rng(0)
    x = acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32))
    y = acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32))
    c = np.zeros((M, N), np.float32)
    out = output_dir("bf16_matmul", a.output_dir)
    if path == "amx":
        # the kernel is built for this C's place past a cache line
        (_, (first, _), sizes, lined), *_ = tile_matmul_layout(M, N, K, "bf16", a.threads, c_offset=c.ctypes.data % 64)
        where = (f", columns from {first} (tile rows on cache lines), then 0-{first - 1}" if first
                 else ", tile rows on cache lines" if lined else "")
        _, run = build_tile_matmul(M, N, K, "bf16", a.threads, c_offset=c.ctypes.data % 64, output_dir=out)
    else:
        sizes, where = vector_block_sizes(M, N, K, "bf16", a.threads), ""
        plan, args = matmul_plan(M, N, K, "bf16", a.threads, path)
        pkg = acc.Package()
        pkg.add(plan, args=args, base_name="matmul_bf16")
        run = pkg.build("bf16_matmul", output_dir=out, python_module=False, progress=False).matmul_bf16
    print(f"bf16 matmul {M}x{N}x{K} on {describe_path(path, 'bf16')}, threads={a.threads}, sizes {sizes}{where}")
    run(x, y, c)
    want = acc.bfloat16_values(x).astype(np.float64) @ acc.bfloat16_values(y).astype(np.float64)
    err = float(np.max(np.abs(c - want)))
    tol = 1e-5 * np.sqrt(K) * float(np.max(np.abs(want)) + 1)
    if err > tol:
        print(f"MISMATCH against numpy: max error {err:.3g} > {tol:.3g}", file=sys.stderr)
        return 1
    model = functional_model(tile_target()) if path == "amx" else ""
    if model:  # bit-exact, but its speed says nothing of the tile unit's
        print(f"matches numpy (max error {err:.2g}, tolerance {tol:.2g}); {not_timed(model)}")
        return 0
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        run(x, y, c)
        ts.append(time.perf_counter() - t0)
    t = float(np.median(ts))
    print(f"matches numpy (max error {err:.2g}, tolerance {tol:.2g}); {2 * M * N * K / t / 1e9:.1f} GFLOP/s "
          f"(median of 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
