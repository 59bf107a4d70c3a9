"""A direct 3x3 convolution (HWC layout) written only with accpy's public API.

    O[h, w, co] += I[h + kh, w + kw, ci] * Wt[kh, kw, ci, co]

    I: [H + 2, W + 2, C] (the input, already padded: a "valid" convolution, stride 1)
    Wt: [3, 3, C, K]     (kh, kw, input channel, output channel)
    O: [H, W, K]

Schedule (a register-blocked direct convolution, no im2col):

    co (K / CB) -> h -> w (W / WB) -> kh -> kw -> ci -> ww (WB) -> coo (CB / lanes) -> cv (lanes)

(or h -> w -> co -> kh ... when the weights are not packed: see below.)

The register tile is WB output pixels of one row by CB output channels: O is cached at
kh, the first reduction index, so its block O[h, w:w+WB, co:co+CB] is loaded once, then
the whole 3 x 3 x C reduction runs on it, then it is stored once; with ww and coo unrolled
and cv vectorized, that cache lives in vector registers (WB * CB / lanes accumulators:
14 x 2 = 28 zmm registers on AVX-512, leaving room for the CB / lanes weight vectors and
one broadcast input). Each step of the reduction loop (kh, kw, ci) is WB broadcasts of
an input value and CB / lanes vector loads of weights feeding WB * CB / lanes independent
FMAs. Large weights are packed by a multicache triggered at co: once per block of output
channels, Wt[:, :, :, co:co+CB] is copied into a contiguous [3, 3, C, CB] buffer, so the
weight vectors of consecutive steps are adjacent (worth 20% at C = K = 256); weights that
sit comfortably in L2, like 3 x 3 x 64 x 64, are read in place (packing them costs ~1%),
and the channel blocks then move inside the rows, so that with threads > 1 the rows h run
on all threads in a single parallel loop per call (with packing: one per channel block).

Next to it, the same nest scheduled by `acc.autoschedule` (the cost model alone, or with
`--measure` its best candidates measured): both are built, checked and timed taking turns.

    python samples/conv2d.py [--threads T] [--measure] [--output-dir DIR] [--size H W C K]
"""
from __future__ import annotations

import argparse
import sys
import time

from sample_support import OUTPUT_HELP, interleaved_medians, output_dir, outputs_match  # first: numpy's BLAS on one thread

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402

KH = KW = 3


def block_sizes(target, W, C, K, dtype=acc.ScalarType.float32):
    """Register tile from the target's vector width and register count; packing from the L2 size."""
    itemsize = np.dtype(dtype.dtype).itemsize
    lanes = max(target.vector_bytes // itemsize, 1)
    regs = target.vector_registers
    nv = 2  # weight vectors per step
    # accumulators + weight vectors + one broadcast register must fit the register file
    WB = max(1, (regs - nv - 1) // nv)  # 14 on AVX-512 (32 registers), 6 on AVX2 (16)
    CB = nv * lanes
    # small problems: do not block beyond the problem (rounded up to whole vectors)
    CB = min(CB, -(-K // lanes) * lanes)
    WB = min(WB, W)
    # Packing the weights costs one pass over them per call; it pays off once they no longer
    # sit comfortably in L2 (a channel block's rows are then far apart: 20% at C = K = 256),
    # not for 3x3x64x64 (147 KiB, where it costs about 1%).
    pack = KH * KW * C * K * itemsize > target.cache_bytes[1] // 2
    return dict(WB=WB, CB=CB, lanes=lanes, pack=pack)


def conv2d_nest(H, W, C, K, element_type=acc.ScalarType.float32):
    """(nest, (I, Wt, O)) of a 3x3 stride-1 valid convolution O[H, W, K] += I[H+2, W+2, C] * Wt[3, 3, C, K]."""
    I = acc.Array(role=acc.Role.INPUT, element_type=element_type, shape=(H + KH - 1, W + KW - 1, C), name="I")
    Wt = acc.Array(role=acc.Role.INPUT, element_type=element_type, shape=(KH, KW, C, K), name="Wt")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=element_type, shape=(H, W, K), name="O")
    nest = acc.Nest(shape=(H, W, K, KH, KW, C))
    h, w, co, kh, kw, ci = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[h, w, co] += I[h + kh, w + kw, ci] * Wt[kh, kw, ci, co]

    return nest, (I, Wt, O)


def conv2d_schedule(nest, args, threads=1, target=None, sizes=None):
    """The register-blocked plan of `conv2d_nest`'s nest (see the module's docstring).

    `sizes` overrides the blocking: dict(WB=output pixels per tile, CB=output channels per
    tile, lanes=vector length, pack=whether to pack the weights); tiles need not divide W or K.
    """
    target = target or acc.Target.HOST
    I, Wt, O = args
    H, W, K = O.shape
    C = I.shape[2]
    h, w, co, kh, kw, ci = nest.get_indices()
    b = sizes or block_sizes(target, W, C, K, O.element_type)
    schedule = nest.create_schedule()
    ww = schedule.split(w, b["WB"])  # WB output pixels of a row per register tile
    coo = schedule.split(co, b["CB"])  # CB output channels per register tile
    cv = schedule.split(coo, b["lanes"])  # ... as CB / lanes vectors
    pack = b.get("pack", True)
    if pack:
        schedule.reorder(co, h, w, kh, kw, ci, ww, coo, cv)
    else:
        # the channel blocks inside the rows: threads > 1 fork and join once per call
        schedule.reorder(h, w, co, kh, kw, ci, ww, coo, cv)

    plan = schedule.create_plan(target)
    if pack:
        plan.cache(Wt, index=kh, trigger_index=co)  # weights of a channel block, packed once per block
    plan.cache(O, index=kh)  # the WB x CB output tile: registers during the whole reduction
    plan.unroll(ww)
    plan.unroll(coo)
    plan.vectorize(cv)
    if threads > 1:
        plan.parallelize(h, max_threads=threads)
    return plan


def conv2d_plan(H, W, C, K, threads=1, target=None, sizes=None, element_type=acc.ScalarType.float32):
    """(plan, (I, Wt, O)): the nest of `conv2d_nest` with the schedule of `conv2d_schedule`."""
    nest, args = conv2d_nest(H, W, C, K, element_type)
    return conv2d_schedule(nest, args, threads, target, sizes), args


def conv2d_reference(inp, wt):
    """float64 reference: the sum of 9 shifted matmuls."""
    KH_, KW_, C, K = wt.shape
    H, W = inp.shape[0] - KH_ + 1, inp.shape[1] - KW_ + 1
    out = np.zeros((H, W, K), np.float64)
    for a in range(KH_):
        for b in range(KW_):
            out += inp[a:a + H, b:b + W, :].astype(np.float64) @ wt[a, b].astype(np.float64)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", nargs=4, type=int, metavar=("H", "W", "C", "K"), default=[56, 56, 64, 64],
                    help="output height, output width, input channels, output channels (default 56 56 64 64)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--measure", action="store_true", help="let acc.autoschedule measure its candidates (60 s)")
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    args = ap.parse_args(argv)
    H, W, C, K = args.size
    plan, fargs = conv2d_plan(H, W, C, K, args.threads)
    b = block_sizes(plan.target, W, C, K)
    print(f"conv3x3 O[{H}, {W}, {K}] += I[{H + 2}, {W + 2}, {C}] * Wt[3, 3, {C}, {K}]: register tile "
          f"{b['WB']} pixels x {b['CB']} channels ({b['WB'] * -(-b['CB'] // b['lanes'])} vector accumulators), "
          f"weights {'packed' if b['pack'] else 'read in place'}")
    nest = plan.schedule.nests[0]
    auto = acc.autoschedule(nest, fargs, measure=args.measure, threads=args.threads)
    print(auto.explain().splitlines()[0])
    pkg = acc.Package()
    pkg.add(plan, args=fargs, base_name="conv3x3")
    pkg.add(auto, args=fargs, base_name="conv3x3_auto")
    t0 = time.perf_counter()
    lib = pkg.build("conv2d", output_dir=output_dir("conv2d", args.output_dir), python_module=False)
    print(f"built {lib.files['shared']} in {time.perf_counter() - t0:.2f} s")
    rng = np.random.default_rng(0)
    inp = rng.standard_normal((H + 2, W + 2, C), dtype=np.float32)
    wt = rng.standard_normal((3, 3, C, K), dtype=np.float32)
    out0 = rng.standard_normal((H, W, K), dtype=np.float32)
    want = out0.astype(np.float64) + conv2d_reference(inp, wt)
    if not outputs_match(lib, ("conv3x3", "conv3x3_auto"), (inp, wt), out0, want, 1e-3, "numpy (float64)"):
        return 1
    out = out0.copy()
    med = interleaved_medians({"hand": lambda: lib.conv3x3(inp, wt, out),
                               "auto": lambda: lib.conv3x3_auto(inp, wt, out)}, 21)
    gf = {k: 2 * H * W * C * K * 9 / v / 1e9 for k, v in med.items()}
    print(f"conv3x3 {H}x{W}, {C}->{K} channels, {args.threads} thread(s): {gf['hand']:.1f} GFLOP/s (median of 21)")
    print(f"autoscheduled: {gf['auto']:.1f} GFLOP/s, {gf['auto'] / gf['hand']:.2f} x the hand schedule")
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
