"""gpu_matmul: Accera's GPU tutorial sequence for a matmul, run on an OpenCL device.

    python samples/gpu_matmul.py [--target NVIDIA_A100] [--size M N K] [--output-dir DIR]

Steps (each a plan of the same nest, each checked against numpy):
  1. hello: the i and j loops split in 16 x 16 tiles, tiles bound to blocks, points to threads;
  2. shared: k split by 16 too, the tiles of A and B that a block uses cached in its SHARED
     memory (the block's threads fill them together, with barriers);
  3. double buffered: the next k tiles filled into a second buffer while the current ones are
     used (one barrier per step), C's element kept in each thread's registers (PRIVATE).

The kernels run through the OpenCL runtime: PoCL on a CPU will do (no GPU is needed); the
sample prints each plan's launch (grid and block) as a CUDA device would run it. Without an
OpenCL device it builds the packages and says so. Exit status 0 when every result matches.
"""
from __future__ import annotations

import argparse
import sys
import time

from sample_support import OUTPUT_HELP, output_dir

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
from accpy.targets.gpu import tools  # noqa: E402

TILE = 16


def nest_and_args(M, N, K):
    A = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C)


def plan_for(step: str, target, M, N, K):
    """The plan of one step of the tutorial, and the function's arguments."""
    nest, (A, B, C) = nest_and_args(M, N, K)
    i, j, k = nest.get_indices()
    schedule = nest.create_schedule()
    ii, jj = schedule.split(i, TILE), schedule.split(j, TILE)
    if step == "hello":
        schedule.reorder(i, j, ii, jj, k)
    else:
        kk = schedule.split(k, TILE)
        schedule.reorder(i, j, ii, jj, k, kk)
    plan = schedule.create_plan(target)
    plan.bind({i: target.GridUnit.BLOCK_Y, j: target.GridUnit.BLOCK_X,
               ii: target.GridUnit.THREAD_Y, jj: target.GridUnit.THREAD_X})
    if step != "hello":
        double = step == "double buffered"
        plan.cache(A, index=kk, location=target.MemorySpace.SHARED, double_buffer=double)
        plan.cache(B, index=kk, location=target.MemorySpace.SHARED, double_buffer=double)
        if double:
            plan.cache(C, index=k, location=target.MemorySpace.PRIVATE)
    return plan, (A, B, C)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="NVIDIA_A100", help="a GPU model of acc.Target.Model (default NVIDIA_A100)")
    ap.add_argument("--size", type=int, nargs=3, default=(256, 192, 128), metavar=("M", "N", "K"))
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    opts = ap.parse_args(argv)
    M, N, K = opts.size
    target = acc.Target(acc.Target.Model[opts.target])
    why = tools.opencl_available()
    device = tools.opencl_device() if why is None else None
    print(f"accpy {acc.__version__}: C[{M}, {N}] += A[{M}, {K}] @ B[{K}, {N}], float32, for {target.name}; "
          f"running on: {device or 'nothing (' + why + ')'}")
    rng = np.random.default_rng(0)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    c0 = rng.random((M, N), dtype=np.float32)
    want = c0.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    ok = True
    for step in ("hello", "shared", "double buffered"):
        plan, args = plan_for(step, target, M, N, K)
        package = acc.Package()
        name = "gpu_matmul_" + step.replace(" ", "_")
        package.add(plan, args=args, base_name=name)
        lib = package.build(name, output_dir=output_dir("gpu_matmul", opts.output_dir), python_module=False)
        blocks = (-(-N // TILE), -(-M // TILE), 1)
        print(f"\n{step}: grid {blocks} of blocks {(TILE, TILE, 1)} (threads); built in {lib.timings['total']:.2f} s")
        if device is None:
            continue
        c = c0.copy()
        getattr(lib, name)(a, b, c)  # the first call compiles the OpenCL C for the device
        t0 = time.perf_counter()
        c = c0.copy()
        getattr(lib, name)(a, b, c)
        seconds = time.perf_counter() - t0
        err = float(np.max(np.abs(c - want)))
        good = np.allclose(c, want, rtol=1e-4, atol=1e-3)
        ok &= good
        print(f"  max |error| {err:.1e}  {'OK' if good else 'MISMATCH'}; {seconds * 1e3:.1f} ms on {device} "
              f"(a functional run, not a GPU's speed)")
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
