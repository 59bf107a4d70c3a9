"""Quantized int8 3x3 convolution as an implicit GEMM on the x86 tile unit (AMX), or on AVX-512
VNNI where there is no tile unit; checked exactly against numpy and timed next to accpy's fp32
convolution of the same shape (samples/conv2d.py).

    Acc[h, w, co] = sum over kh, kw, ci of I[h + kh, w + kw, ci] * Wt[kh, kw, ci, co]   (int32)
    Out = relu(int8(round(float32(Acc) * scale + bias[co])))    (round half to even, saturating)

    I: [H + 2, W + 2, C] uint8 (already padded; stride 1)   Wt: [3, 3, C, K] int8   Out: [H, W, K] int8

Implicit GEMM: no im2col buffer. For each output row h and tap (kh, kw), the 16 output pixels
w .. w + 15 of a tile are 16 rows of a matmul whose reduction is the C input channels: the A tile
is I[h + kh, w + kw : w + kw + 16, ci : ci + 64], 16 pixel rows C bytes apart, loaded straight from
the input (a tile load takes any row stride); the B tiles are the weights of that tap, packed once
per call in VNNI order (`layout=acc.Array.Layout.VNNI`: 4 consecutive input channels per 32-bit
slot); the GC accumulator tiles of 16 pixels x 16 output channels stay in tile registers through
all 9 * C / 64 steps of the reduction.

    co (NC channels) -> h -> w (16 pixels) -> co1 (16 GC channels) -> kh -> kw -> ci (64)
    -> co2 (the GC tiles, unrolled) -> ww, cc, cii (one tile operation: 16 x 16 x 64)

On the tile unit the epilogue (scale, bias, round, saturate, ReLU) is fused with the conv on
(h, w, co), the fusing index right outside the taps (`fused_tile_conv_plan`): each block of
accumulator tiles is quantized as soon as its reduction is done, by the same thread. On AVX-512
VNNI it is a second function of the package, over the int32 result seen as a (H * W) x K matrix
(int8_matmul.py's `quantize_plan`).

    python samples/int8_conv.py [--size H W C K] [--threads T] [--path amx|vector] [--output-dir DIR]
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
from accpy.targets.x86tile.auto import conv_tile_sizes  # noqa: E402
from int8_matmul import build_one, default_path, describe_path, quantized, tile_target, with_epilogue  # noqa: E402

S = acc.ScalarType
KH = KW = 3


def conv_nest(H: int, W: int, C: int, K: int):
    """(nest, (I, Wt, Acc)) of Acc[H, W, K] += int32(I[h + kh, w + kw, ci]) * int32(Wt[kh, kw, ci, co])."""
    I = acc.Array(role=acc.Role.INPUT, element_type=S.uint8, shape=(H + KH - 1, W + KW - 1, C), name="I")
    Wt = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(KH, KW, C, K), name="Wt")
    Acc = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int32, shape=(H, W, K), name="Acc")
    nest = acc.Nest(shape=(H, W, K, KH, KW, C))
    h, w, co, kh, kw, ci = nest.get_indices()

    @nest.iteration_logic
    def _():
        Acc[h, w, co] += acc.cast(I[h + kh, w + kw, ci], S.int32) * acc.cast(Wt[kh, kw, ci, co], S.int32)

    return nest, (I, Wt, Acc)


def tile_conv_sizes(C: int, K: int) -> dict:
    """GC accumulator tiles of 16 output channels, NC output channels per packed weight block: the
    tile library's rule (accpy/targets/x86tile/auto.py's `conv_tile_sizes`)."""
    return conv_tile_sizes(C, K, KH * KW)


def _tile_conv_schedule(s, h, w, co, kh, kw, ci, sz: dict, f=None):
    """Split and order a conv schedule (or a fused one, fusing index `f` right outside the taps)."""
    co1 = s.split(co, sz["NC"])
    ww = s.split(w, 16)
    co2 = s.split(co1, 16 * sz["GC"])
    cc = s.split(co2, 16)
    cii = s.split(ci, 64)
    s.reorder(co, h, w, co1, *((f,) if f is not None else ()), kh, kw, ci, co2, ww, cc, cii)
    return co2, ww, cc, cii


def _tile_conv_plan(s, target, I, Wt, Acc, idx, h, acc_index, threads: int):
    co2, ww, cc, cii = idx
    plan = s.create_plan(target)
    tile = acc.MemorySpace.AMX_TILE
    packed = plan.cache(Wt, index=h, layout=acc.Array.Layout.VNNI)  # once per NC block of channels
    plan.cache(Acc, index=acc_index, location=tile)  # the accumulators stay in tiles through the reduction
    plan.cache(I, index=co2, location=tile)
    plan.cache(packed, index=co2, location=tile)
    plan.unroll(co2)
    plan.tensorize(indices=(ww, cc, cii))
    if threads > 1:
        plan.parallelize(indices=(h,), max_threads=threads)
    return plan


def tile_conv_plan(H: int, W: int, C: int, K: int, threads: int = 1, target=None, sizes=None):
    """(plan, (I, Wt, Acc)): the implicit GEMM on the tile unit (see the module's docstring)."""
    target = target or tile_target()
    sz = dict(tile_conv_sizes(C, K), **(sizes or {}))
    nest, (I, Wt, Acc) = conv_nest(H, W, C, K)
    h, w, co, kh, kw, ci = nest.get_indices()
    s = nest.create_schedule()
    idx = _tile_conv_schedule(s, h, w, co, kh, kw, ci, sz)
    return _tile_conv_plan(s, target, I, Wt, Acc, idx, h, kh, threads), (I, Wt, Acc)


def fused_tile_conv_plan(H: int, W: int, C: int, K: int, relu: bool = True, threads: int = 1, target=None,
                         sizes=None):
    """(plan, (I, Wt, Acc, bias, Out, scale)): the conv and its quantizing epilogue in one function,
    fused on (h, w, co) with the fusing index right outside the taps: each block of accumulator
    tiles is quantized by the tile library's epilogue as soon as its reduction is done."""
    target = target or tile_target()
    sz = dict(tile_conv_sizes(C, K), **(sizes or {}))
    nest, (I, Wt, Acc) = conv_nest(H, W, C, K)
    bias = acc.Array(role=acc.Role.INPUT, element_type=S.float32, shape=(K,), name="bias")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(H, W, K), name="Out")
    scale = acc.Scalar(S.float32, name="scale")
    epi = acc.Nest(shape=(H, W, K))
    eh, ew, ec = epi.get_indices()

    @epi.iteration_logic
    def _():
        y = acc.cast(acc.round(acc.cast(Acc[eh, ew, ec], S.float32) * scale + bias[ec]), S.int8)
        Out[eh, ew, ec] = acc.max(y, acc.cast(0, S.int8)) if relu else y

    s = acc.fuse((nest.create_schedule(), epi.create_schedule()), partial=3)
    h, w, co, f, kh, kw, ci = s.get_indices()
    idx = _tile_conv_schedule(s, h, w, co, kh, kw, ci, sz, f)
    plan = _tile_conv_plan(s, target, I, Wt, Acc, idx, h, f, threads)
    return plan, (I, Wt, Acc, bias, Out, scale)


def vector_conv_plan(H: int, W: int, C: int, K: int, threads: int = 1, target=None, sizes=None):
    """(plan, (I, Wt, Acc)) on AVX-512 VNNI: a WB pixels x 32 channels register tile (samples/conv2d.py's
    direct convolution), each step 4 input channels (one VPDPBUSD per vector of 16 output channels,
    the pixel's 4 input bytes repeated in every lane), the weights packed in VNNI order."""
    target = target or acc.Target.HOST
    sz = dict(WB=12, CB=32, **(sizes or {}))
    nest, args = conv_nest(H, W, C, K)
    I, Wt, Acc = args
    h, w, co, kh, kw, ci = nest.get_indices()
    s = nest.create_schedule()
    ww = s.split(w, sz["WB"])
    coo = s.split(co, sz["CB"])
    cv = s.split(coo, 16)
    cq = s.split(ci, 4)
    s.reorder(co, h, w, kh, kw, ci, ww, coo, cv, cq)
    plan = s.create_plan(target)
    plan.cache(Wt, index=kh, trigger_index=co, layout=acc.Array.Layout.VNNI)
    plan.cache(Acc, index=kh)  # registers
    plan.unroll(ww)
    plan.unroll(coo)
    plan.vectorize(cv)
    if threads > 1:
        plan.parallelize(indices=(h,), max_threads=threads)
    return plan, args


def reference(x, wt, scale, bias, relu=True):
    """numpy: the int32 convolution (sum of 9 shifted matmuls), then the quantized epilogue."""
    H, W = x.shape[0] - KH + 1, x.shape[1] - KW + 1
    acc32 = np.zeros((H, W, wt.shape[3]), np.int64)
    for a in range(KH):
        for b in range(KW):
            acc32 += x[a:a + H, b:b + W].astype(np.int64) @ wt[a, b].astype(np.int64)
    acc32 = acc32.astype(np.int32)
    return quantized(acc32, scale, bias, relu), acc32


def build(H, W, C, K, threads=1, relu=True, output_dir=None, path=None):
    """The package, and `run(x, wt, bias, scale) -> (int8 result, int32 sums)`: on the tile unit one
    function (`qconv`, the fused plan), on AVX-512 two (`conv_i8`, then `quantize`)."""
    path = path or default_path("int8")
    if path == "amx":
        lib = build_one("qconv", *fused_tile_conv_plan(H, W, C, K, relu, threads), output_dir)

        def run(x, wt, bias, scale):
            c = np.zeros((H, W, K), np.int32)
            o = np.zeros((H, W, K), np.int8)
            lib.qconv(x, wt, c, bias, o, np.float32(scale))
            return o, c

        return lib, run
    make = vector_conv_plan
    conv, conv_args = make(H, W, C, K, threads)
    lib = with_epilogue("conv_i8", conv, conv_args, H * W, K, relu, output_dir)

    def run(x, wt, bias, scale):
        c = np.zeros((H, W, K), np.int32)
        lib.conv_i8(x, wt, c)
        o = np.zeros((H * W, K), np.int8)
        lib.quantize(c.reshape(H * W, K), bias, o, np.float32(scale))
        return o.reshape(H, W, K), c

    return lib, run


def fp32_conv(H, W, C, K, threads, output_dir):
    """accpy's float32 convolution of the same shape (samples/conv2d.py), for the comparison."""
    from conv2d import conv2d_plan

    plan, args = conv2d_plan(H, W, C, K, threads)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="conv_f32")
    return pkg.build("fp32_conv", output_dir=output_dir, python_module=False, progress=False).conv_f32


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", nargs=4, type=int, metavar=("H", "W", "C", "K"), default=[28, 28, 128, 128],
                    help="output height, output width, input channels, output channels (default 28 28 128 128)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--path", choices=("amx", "vector"), default=None,
                    help="the tile unit (its model without AMX) or AVX-512 VNNI (default: AMX if present, else VNNI)")
    ap.add_argument("--no-relu", action="store_true")
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--output-dir", default=None, help="where the packages are written (default: a temporary folder)")
    a = ap.parse_args(argv)
    H, W, C, K = a.size
    path = a.path or default_path("int8")
    print(f"int8 conv3x3 {H}x{W}, {C}->{K} channels on {describe_path(path)}, threads={a.threads}")
    out_dir = output_dir("int8_conv", a.output_dir)
    _, run = build(H, W, C, K, a.threads, relu=not a.no_relu, output_dir=out_dir, path=path)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (H + 2, W + 2, C), dtype=np.uint8)
    wt = rng.integers(-128, 128, (3, 3, C, K), dtype=np.int8)
    bias = (rng.standard_normal(K) * 4).astype(np.float32)
    scale = 1.0 / (64 * 9 * C)
    out, sums = run(x, wt, bias, scale)
    want, want_sums = reference(x, wt, scale, bias, relu=not a.no_relu)
    if not np.array_equal(sums, want_sums) or not np.array_equal(out, want):
        print("MISMATCH against numpy", file=sys.stderr)
        return 1
    print("exact against numpy (int32 sums and int8 output)")
    model = functional_model(tile_target()) if path == "amx" else ""
    if model:  # bit-exact, but its speed says nothing of the tile unit's: no ratio to the fp32 conv
        print(not_timed(model))
        return 0
    f32 = fp32_conv(H, W, C, K, a.threads, out_dir)
    fx = rng.standard_normal((H + 2, W + 2, C)).astype(np.float32)
    fw = rng.standard_normal((3, 3, C, K)).astype(np.float32)
    fo = np.zeros((H, W, K), np.float32)
    run(x, wt, bias, scale)
    f32(fx, fw, fo)
    ti, tf = [], []
    for _ in range(a.repeat):  # interleaved, so drift hits both alike
        t = time.perf_counter()
        run(x, wt, bias, scale)
        ti.append(time.perf_counter() - t)
        t = time.perf_counter()
        f32(fx, fw, fo)
        tf.append(time.perf_counter() - t)
    ops = 2.0 * H * W * K * KH * KW * C
    t_i, t_f = float(np.median(ti)), float(np.median(tf))
    print(f"int8 (conv + epilogue): {ops / t_i / 1e9:.1f} GOPS; fp32 conv (samples/conv2d.py): "
          f"{ops / t_f / 1e9:.1f} GFLOP/s; int8 is {t_f / t_i:.2f}x faster (medians of {a.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
