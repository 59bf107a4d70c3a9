"""Quantized int8 matmul on the x86 tile unit (AMX), with output scaling, bias and ReLU.

    Acc = A @ B                                     (A: M x K uint8, B: K x N int8, Acc int32)
    Out = relu(int8(round(float32(Acc) * scale + bias)))   (round half to even, saturating)

Two functions in one package: the product on tiles, and the epilogue as a second nest over the
int32 result (not fused yet). The product's schedule (`tile_matmul_plan`, shared with
bf16_matmul.py and benchmarks/lowp.py):

    j (NC columns) -> i (16 * GR rows) -> j1 (16 * GC columns) -> k (tile depth) -> i2, j2 (the grid)
    -> ii, jj, kk (one tile operation)

B's NC-column block is packed once, into a host cache in VNNI order (`layout=Array.Layout.VNNI`:
4 consecutive k per 32-bit slot, as the tile unit reads B), from which every B tile is one tile
load; C's GR x GC tiles stay in tile registers across all of k; A's tiles are loaded straight from
A. The grid loops i2, j2 are unrolled (tile numbers are immediates). With threads, the NC blocks
are shared between threads, each configuring its own tiles. Where the CPU has no AMX the same code
runs on the tile unit's functional model (bit-exact, much slower).

    python samples/int8_matmul.py [M N K] [--threads T] [--output-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import accpy as acc

S = acc.ScalarType


def has_amx(target=None) -> bool:
    target = target or acc.Target.HOST
    return all(target.has(f) for f in ("amx_tile", "amx_int8", "amx_bf16"))


def tile_target():
    """The host where it has AMX, else the host running the tile unit's functional model."""
    host = acc.Target.HOST
    return host if has_amx(host) else host(extra=(("x86tile", "emulate"),))


def tile_block_sizes(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1) -> dict:
    """GR x GC tiles of C (1 x 3: one A tile meets three B tiles; measured fastest here), and NC
    columns of B per packed block: the K x NC block takes about 1 MiB (half of a core's L2), and
    with threads every thread gets at least one block."""
    gr, gc = 1, 3
    eb = 1 if dtype == "int8" else 2
    step = 16 * gc
    nc = max(step, (1 << 20) // max(1, K * eb) // step * step)
    nc = min(nc, -(-N // step) * step)
    if threads > 1:
        nc = min(nc, max(step, -(-(-(-N // threads)) // step) * step))
    return dict(GR=gr, GC=gc, NC=nc)


def tile_matmul_plan(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, target=None, sizes=None):
    """(plan, (A, B, C)) of C += A @ B on the tile unit: int8 (uint8 A, int8 B, int32 C) or bf16
    (bfloat16 A and B, float32 C)."""
    target = target or tile_target()
    sz = dict(tile_block_sizes(M, N, K, dtype, threads), **(sizes or {}))
    ta, tb, tc = (S.uint8, S.int8, S.int32) if dtype == "int8" else (S.bfloat16, S.bfloat16, S.float32)
    depth = 64 if dtype == "int8" else 32  # one tile row: 64 bytes of k
    A = acc.Array(role=acc.Role.INPUT, element_type=ta, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=tb, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=tc, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(A[i, k], tc) * acc.cast(B[k, j], tc)

    s = nest.create_schedule()
    j1 = s.split(j, sz["NC"])
    i2 = s.split(i, 16 * sz["GR"])
    ii = s.split(i2, 16)
    j2 = s.split(j1, 16 * sz["GC"])
    jj = s.split(j2, 16)
    kk = s.split(k, depth)
    s.reorder(j, i, j1, k, i2, j2, ii, jj, kk)
    plan = s.create_plan(target)
    tile = acc.MemorySpace.AMX_TILE
    packed = plan.cache(B, index=i, layout=acc.Array.Layout.VNNI)  # once per NC block
    plan.cache(C, index=k, location=tile)  # the accumulators stay in their tiles across k
    plan.cache(A, index=i2, location=tile)
    plan.cache(packed, index=i2, location=tile)
    plan.unroll(i2)
    plan.unroll(j2)
    plan.tensorize(indices=(ii, jj, kk))
    if threads > 1:
        plan.parallelize(indices=(j,), max_threads=threads)
    return plan, (A, B, C)


def quantize_plan(M: int, N: int, relu: bool = True, target=None):
    """(plan, (Acc, bias, Out, scale)): Out = relu(int8(round(float32(Acc) * scale + bias[j])))."""
    Acc = acc.Array(role=acc.Role.INPUT, element_type=S.int32, shape=(M, N), name="Acc")
    bias = acc.Array(role=acc.Role.INPUT, element_type=S.float32, shape=(N,), name="bias")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(M, N), name="Out")
    scale = acc.Scalar(S.float32, name="scale")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        y = acc.cast(acc.round(acc.cast(Acc[i, j], S.float32) * scale + bias[j]), S.int8)
        Out[i, j] = acc.max(y, acc.cast(0, S.int8)) if relu else y

    # (accpy's vectorizer does not convert between element types yet: the C compiler vectorizes
    # this loop nest with AVX-512 on its own)
    return nest.create_plan(target or acc.Target.HOST), (Acc, bias, Out, scale)


def reference(a, b, scale, bias, relu=True):
    """numpy: int32 matmul, float32 scale and bias, round half to even, saturate to int8, ReLU."""
    acc32 = a.astype(np.int32) @ b.astype(np.int32)
    y = np.rint(acc32.astype(np.float32) * np.float32(scale) + bias.astype(np.float32))
    y = np.clip(y, -128, 127).astype(np.int8)
    return np.maximum(y, 0).astype(np.int8) if relu else y


def build(M, N, K, threads=1, relu=True, output_dir=None):
    """The package's two functions, and `run(a, b, bias, scale) -> int8 result`."""
    mm, mm_args = tile_matmul_plan(M, N, K, "int8", threads)
    q, q_args = quantize_plan(M, N, relu)
    pkg = acc.Package()
    pkg.add(mm, args=mm_args, base_name="matmul_i8")
    pkg.add(q, args=q_args, base_name="quantize")
    out = output_dir or tempfile.mkdtemp(prefix="accpy_int8_")
    lib = pkg.build("int8_matmul", output_dir=out, python_module=False, progress=False)

    def run(a, b, bias, scale):
        c = np.zeros((M, N), np.int32)
        lib.matmul_i8(a, b, c)
        o = np.zeros((M, N), np.int8)
        lib.quantize(c, bias, o, np.float32(scale))
        return o, c

    return lib, run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", nargs="*", type=int, default=[256, 256, 256])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--output-dir", default=None, help="where the package is written (default: a temporary folder)")
    ap.add_argument("--no-relu", action="store_true")
    a = ap.parse_args(argv)
    M, N, K = (a.shape + a.shape[-1:] * 3)[:3]
    print(f"int8 matmul {M}x{N}x{K} on the tile unit ({'AMX' if has_amx() else 'functional model: no AMX here'}), "
          f"threads={a.threads}, sizes {tile_block_sizes(M, N, K, 'int8', a.threads)}")
    _, run = build(M, N, K, a.threads, relu=not a.no_relu, output_dir=a.output_dir)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (M, K), dtype=np.uint8)
    y = rng.integers(-128, 128, (K, N), dtype=np.int8)
    bias = rng.standard_normal(N).astype(np.float32) * 4
    scale = 1.0 / (16 * K)
    out, c = run(x, y, bias, scale)
    want = reference(x, y, scale, bias, relu=not a.no_relu)
    if not np.array_equal(c, x.astype(np.int32) @ y.astype(np.int32)) or not np.array_equal(out, want):
        print("MISMATCH against numpy", file=sys.stderr)
        return 1
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        run(x, y, bias, scale)
        ts.append(time.perf_counter() - t0)
    t = float(np.median(ts))
    print(f"exact against numpy; {2 * M * N * K / t / 1e9:.1f} int8 GOPS (product + epilogue, median of 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
