"""gpu_conv: a 3x3 convolution (NHWC, stride 1, no padding) on a GPU target, run on an OpenCL device.

    python samples/gpu_conv.py [--target NVIDIA_A100] [--size H W CI CO] [--output-dir DIR]

Output pixels are tiled 4 x 16 per block, one thread per output pixel, each thread looping over
the output channels and the 3 x 3 x CI window. The block's input window (its tile plus the 2-pixel
halo, all input channels) and the filter are cached in the block's SHARED memory: each input
element is read from global memory once per block instead of 9 times per thread. Both plans (with
and without the shared caches) are checked against numpy; the sample prints their launches as a
CUDA device would run them. Exit status 0 when both match.
"""
from __future__ import annotations

import argparse
import sys
import time

from sample_support import OUTPUT_HELP, output_dir

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
from accpy.targets.gpu import tools  # noqa: E402

BY, BX = 4, 16  # output pixels per block


def conv_plan(target, H, W, CI, CO, shared: bool):
    I = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(H + 2, W + 2, CI), name="I")
    F = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(3, 3, CI, CO), name="F")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(H, W, CO), name="O")
    nest = acc.Nest(shape=(H, W, CO, 3, 3, CI))
    y, x, co, ky, kx, ci = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[y, x, co] += I[y + ky, x + kx, ci] * F[ky, kx, ci, co]

    schedule = nest.create_schedule()
    yy, xx = schedule.split(y, BY), schedule.split(x, BX)
    schedule.reorder(y, x, yy, xx, co, ky, kx, ci)
    plan = schedule.create_plan(target)
    plan.bind({y: target.GridUnit.BLOCK_Y, x: target.GridUnit.BLOCK_X, yy: target.GridUnit.THREAD_Y,
               xx: target.GridUnit.THREAD_X})
    if shared:
        plan.cache(I, index=co, location=target.MemorySpace.SHARED)
        plan.cache(F, index=co, location=target.MemorySpace.SHARED)
    return plan, (I, F, O)


def reference(i, f):
    H, W = i.shape[0] - 2, i.shape[1] - 2
    out = np.zeros((H, W, f.shape[3]))
    for ky in range(3):
        for kx in range(3):
            out += np.einsum("hwc,co->hwo", i[ky:ky + H, kx:kx + W].astype(np.float64), f[ky, kx].astype(np.float64))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="NVIDIA_A100", help="a GPU model of acc.Target.Model (default NVIDIA_A100)")
    ap.add_argument("--size", type=int, nargs=4, default=(28, 28, 16, 16), metavar=("H", "W", "CI", "CO"))
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    opts = ap.parse_args(argv)
    H, W, CI, CO = opts.size
    target = acc.Target(acc.Target.Model[opts.target])
    why = tools.opencl_available()
    device = tools.opencl_device() if why is None else None
    print(f"accpy {acc.__version__}: 3x3 conv {H}x{W}x{CI} -> {CO}, float32, for {target.name}; "
          f"running on: {device or 'nothing (' + why + ')'}")
    rng = np.random.default_rng(0)
    i = rng.random((H + 2, W + 2, CI), dtype=np.float32)
    f = rng.random((3, 3, CI, CO), dtype=np.float32) - 0.5
    want = reference(i, f)
    ok = True
    for shared in (False, True):
        plan, args = conv_plan(target, H, W, CI, CO, shared)
        name = "gpu_conv_shared" if shared else "gpu_conv"
        package = acc.Package()
        package.add(plan, args=args, base_name=name)
        lib = package.build(name, output_dir=output_dir("gpu_conv", opts.output_dir), python_module=False)
        blocks = (-(-W // BX), -(-H // BY), 1)
        label = "input window and filter in SHARED memory" if shared else "global memory only"
        print(f"\n{label}: grid {blocks} of blocks {(BX, BY, 1)} (threads)")
        if device is None:
            continue
        o = np.zeros((H, W, CO), np.float32)
        getattr(lib, name)(i, f, o)  # (the first call compiles the OpenCL C)
        o = np.zeros((H, W, CO), np.float32)
        t0 = time.perf_counter()
        getattr(lib, name)(i, f, o)
        seconds = time.perf_counter() - t0
        good = np.allclose(o, want, rtol=1e-4, atol=1e-4)
        ok &= good
        print(f"  max |error| {float(np.max(np.abs(o - want))):.1e}  {'OK' if good else 'MISMATCH'}; "
              f"{seconds * 1e3:.1f} ms on {device} (a functional run, not a GPU's speed)")
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
