"""3x3 convolution on Gemmini as an implicit GEMM (run here on accpy's functional model).

    Out[y, x, o] = relu(int8(round(float32(sum_{ky, kx, c} In[y + ky, x + kx, c] * W[ky, kx, c, o]) * scale)))

(stride 1, no padding: In is (H + 2) x (W + 2) x C, Out is H x W x K, channels last). The
conv is a matmul per kernel position: output pixels are the rows (16 per tile), output
channels the columns, input channels the reduction; ky, kx and the input-channel tiles sit
outside the 16x16x16 tile, so no im2col copy is made. The scheduled version numbers the output
pixels p = y * W + x and reads In[p // W + ky, p % W + kx, c]: a tile of 16 pixels runs across
the ends of output rows, so every tile is full whatever W is (a tile per output row would
leave 2 of 16 rows empty at W = 14). For each (ky, kx) the input block cached in the
SCRATCHPAD is a band of rows W pixels wide, where pixel p sits at row p: its 16 rows are
consecutive. The int32 sums live in Gemmini's ACCUMULATOR (a fused epilogue moves them out
scaled); each weight tile stays in the array while it meets every pixel tile of the band.
Checked bit-exactly against numpy.

    python samples/gemmini_conv.py                       # 28 x 28, 64 -> 64 (a few seconds)
    python samples/gemmini_conv.py --shape 56x56x64x64 --naive
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# first: numpy's BLAS on one thread
import sample_support  # noqa: E402
from sample_support import OUTPUT_HELP, functional_model, not_timed  # noqa: E402

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
from accpy.targets.gemmini import ACCUMULATOR, SCRATCHPAD  # noqa: E402
from accpy.targets.gemmini.auto import conv_blocks  # noqa: E402

I8, I32, F32 = acc.ScalarType.int8, acc.ScalarType.int32, acc.ScalarType.float32
DIM = 16


ACC_ROWS, SP_ROWS = ACCUMULATOR.rows, SCRATCHPAD.rows  # Gemmini's accumulator and scratchpad, in rows of 16 elements


def blocks_for(H: int, W: int, C: int, K: int) -> tuple:
    """(output pixels per band Pb, output channels per block Kb) of the scheduled conv: the Gemmini
    library's rule (accpy/targets/gemmini/auto.py's `conv_blocks`). The band's int32 sums fill the
    accumulator; Pb is a multiple of W (a band of whole output rows) and, where the accumulator
    allows, of 16 (every pixel tile full); the band's input block for one (ky, kx) and the block's
    weights for it fit the scratchpad."""
    return conv_blocks(H, W, C, K)


def conv_plan(H: int, W: int, C: int, K: int, relu: bool = True, naive: bool = False, blocks=None):
    """(plan, args) of the 3x3 conv on Gemmini; args = (In, Wt, Out, scale)."""
    In = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(H + 2, W + 2, C))
    Wt = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(3, 3, C, K))
    Out = acc.Array(role=acc.Role.OUTPUT, element_type=I8, shape=(H, W, K))
    scale = acc.Scalar(F32)
    if not naive:
        return _flat_plan(H, W, C, K, relu, blocks or blocks_for(H, W, C, K), In, Wt, Out, scale), (In, Wt, Out, scale)

    # naive: a tile per 16 pixels of an output row, nothing kept between tiles
    Acc = acc.Array(role=acc.Role.TEMP, element_type=I32, shape=(H, W, K))
    n0 = acc.Nest(shape=(H, W, K, 3, 3, C))
    y0, x0, o0, ky, kx, c0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        Acc[y0, x0, o0] += acc.cast(In[y0 + ky, x0 + kx, c0], I32) * acc.cast(Wt[ky, kx, c0, o0], I32)

    n1 = acc.Nest(shape=(H, W, K))
    y1, x1, o1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        v = acc.cast(acc.round(acc.cast(Acc[y1, x1, o1], F32) * scale), I8)
        Out[y1, x1, o1] = acc.max(v, acc.cast(0, I8)) if relu else v

    schedule = acc.fuse((n0.create_schedule(), n1.create_schedule()), partial=3)
    y, x, o, f, ky, kx, c = schedule.get_indices()
    x2, o2, c2 = schedule.tile({x: DIM, o: DIM, c: DIM})
    schedule.reorder(y, x, o, f, ky, kx, c, x2, o2, c2)
    plan = schedule.create_plan(acc.Target(acc.Target.Model.GEMMINI))
    plan.cache(Acc, index=f, location=acc.MemorySpace.ACCUMULATOR)
    plan.cache(In, index=x2, location=acc.MemorySpace.SCRATCHPAD)
    plan.cache(Wt, index=x2, location=acc.MemorySpace.SCRATCHPAD)
    plan.tensorize(indices=(x2, o2, c2))
    return plan, (In, Wt, Out, scale)


def _flat_plan(H, W, C, K, relu, blocks, In, Wt, Out, scale):
    """The scheduled conv over flattened output pixels p = y * W + x (see the module's text)."""
    Pb, Kb = blocks
    P = H * W
    Acc = acc.Array(role=acc.Role.TEMP, element_type=I32, shape=(P, K))
    n0 = acc.Nest(shape=(P, K, 3, 3, C))
    p0, o0, ky, kx, c0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        Acc[p0, o0] += acc.cast(In[p0 // W + ky, p0 % W + kx, c0], I32) * acc.cast(Wt[ky, kx, c0, o0], I32)

    n1 = acc.Nest(shape=(P, K))
    p1, o1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        v = acc.cast(acc.round(acc.cast(Acc[p1, o1], F32) * scale), I8)
        Out[p1 // W, p1 % W, o1] = acc.max(v, acc.cast(0, I8)) if relu else v

    schedule = acc.fuse((n0.create_schedule(), n1.create_schedule()), partial=2)
    p, o, f, ky, kx, c = schedule.get_indices()
    p2, o2 = schedule.tile({p: Pb, o: Kb})
    p3, o3, c3 = schedule.tile({p2: DIM, o2: DIM, c: DIM})
    # a band of Pb pixels x a block of Kb channels in the accumulator; per (ky, kx) the band's
    # input and the block's weights in the scratchpad; per weight tile, every pixel tile
    schedule.reorder(p, o, f, ky, kx, c, o2, p2, p3, o3, c3)
    plan = schedule.create_plan(acc.Target(acc.Target.Model.GEMMINI))
    plan.cache(Acc, index=f, location=acc.MemorySpace.ACCUMULATOR)
    plan.cache(In, index=c, location=acc.MemorySpace.SCRATCHPAD)
    plan.cache(Wt, index=c, location=acc.MemorySpace.SCRATCHPAD)
    plan.tensorize(indices=(p3, o3, c3))
    return plan


def reference(inp, w, scale, relu=True):
    """numpy: int32 3x3 conv (stride 1, no padding), float32 scale, round half to even, int8, ReLU."""
    H, W = inp.shape[0] - 2, inp.shape[1] - 2
    acc32 = np.zeros((H, W, w.shape[3]), np.int32)
    for ky in range(3):
        for kx in range(3):
            acc32 += inp[ky:ky + H, kx:kx + W, :].astype(np.int32) @ w[ky, kx].astype(np.int32)
    y = np.clip(np.rint(acc32.astype(np.float32) * np.float32(scale)), -128, 127).astype(np.int8)
    return np.maximum(y, 0).astype(np.int8) if relu else y


def run(H, W, C, K, relu=True, naive=False, seed=0, output_dir=None, quiet=False):
    """Build, run on the model, check bit-exactly; returns the counters."""
    plan, args = conv_plan(H, W, C, K, relu=relu, naive=naive)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="gemmini_conv")
    lib = pkg.build("gemmini_conv", output_dir=sample_support.output_dir("gemmini_conv", output_dir), python_module=False)
    rng = np.random.default_rng(seed)
    inp = rng.integers(-128, 128, (H + 2, W + 2, C), dtype=np.int8)
    w = rng.integers(-128, 128, (3, 3, C, K), dtype=np.int8)
    scale = np.float32(1.0 / (36 * C))
    res = np.zeros((H, W, K), np.int8)
    lib.gemmini_reset_counters()
    lib.gemmini_conv(inp, w, res, scale)
    counters = lib.gemmini_counters()
    want = reference(inp, w, scale, relu)
    if not np.array_equal(res, want):
        bad = tuple(np.argwhere(res != want)[0])
        raise AssertionError(f"Out{bad} = {res[bad]}, numpy says {want[bad]}")
    if not quiet:
        print(f"conv 3x3 {H}x{W}, {C} -> {K} channels{' + ReLU' if relu else ''}"
              f"{' (naive schedule)' if naive else ''}: equals numpy bit for bit")
        print(f"  instructions {counters['instructions']} (mvin {counters['mvin']}, mvout {counters['mvout']}, "
              f"preload {counters['preload']}, compute {counters['compute_preloaded'] + counters['compute_accumulated']}"
              f"); bytes in {counters['bytes_in']}, out {counters['bytes_out']}; MACs {counters['macs']}")
        print(f"  cycles {counters['cycles']} (load {counters['load_cycles']}, execute {counters['execute_cycles']}, "
              f"store {counters['store_cycles']}); utilization {counters['utilization']:.3f}")
        print(f"  {not_timed(functional_model(plan.target))}; the cycles above are the model's estimate")
    return counters


def conv_variant(H: int, W: int, C: int, K: int, Pb: int, Kb: int):
    """(plan, args) of the scheduled conv with bands of Pb pixels and blocks of Kb channels."""
    return conv_plan(H, W, C, K, blocks=(Pb, Kb))


def tune_grid(H: int, W: int, C: int, K: int) -> list:
    """Bands of whole image rows (multiples of W; the formula's multiples of 16 among them) x
    channel blocks of 16..128 that fit the accumulator."""
    out = []
    for Kb in range(DIM, min(-(-K // DIM) * DIM, 128) + 1, DIM):
        cap = ACC_ROWS * DIM // Kb
        for Pb in range(W, min(cap, H * W) + 1, W):
            if Pb * (-(-C // DIM)) + C * Kb // DIM <= SP_ROWS:
                out.append({"Pb": Pb, "Kb": Kb})
    return out


def tune(H: int, W: int, C: int, K: int, results_file=None):
    """The blocks with the fewest cycles on the model (acc.tune, objective "gemmini_cycles"),
    next to blocks_for's choice."""
    import functools

    Pb, Kb = blocks_for(H, W, C, K)
    r = acc.tune(functools.partial(conv_variant, H, W, C, K), grid=tune_grid(H, W, C, K),
                 objective="gemmini_cycles", label=f"gemmini_conv {H}x{W}x{C}x{K}", results_file=results_file,
                 baseline={"Pb": Pb, "Kb": Kb})
    base = next(v for v in r.variants if v.values == {"Pb": Pb, "Kb": Kb})
    print(f"conv 3x3 {H}x{W}, {C} -> {K}: {len(r.variants)} variants on the model")
    print(f"  formula Pb={Pb} Kb={Kb}: {base.value:.0f} cycles, utilization {base.details['utilization']:.3f}")
    print(f"  best    Pb={r.best.values['Pb']} Kb={r.best.values['Kb']}: {r.best.value:.0f} cycles, "
          f"utilization {r.best.details['utilization']:.3f}")
    return r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="28x28x64x64", help="HxWxCxK: output height, width, in and out channels")
    p.add_argument("--no-relu", action="store_true")
    p.add_argument("--naive", action="store_true", help="the schedule without reuse, for comparison")
    p.add_argument("--tune", action="store_true", help="measure every band / channel block on the model (cycles)")
    p.add_argument("--output-dir", help=OUTPUT_HELP)
    a = p.parse_args(argv)
    H, W, C, K = (int(v) for v in a.shape.lower().split("x"))
    if a.tune:
        tune(H, W, C, K)
        return
    run(H, W, C, K, relu=not a.no_relu, naive=a.naive, output_dir=a.output_dir)


if __name__ == "__main__":
    sys.exit(main())
