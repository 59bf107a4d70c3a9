"""GPU matmul plans: GFLOP/s of accpy's kernels next to the library a user would call instead.

Prints one JSON object per line per plan: plan ("bound", "shared", "double buffered": the steps
of samples/gpu_matmul.py), shape [M, N, K], device (the OpenCL device that ran it), seconds (median
of --repeat calls, copies to and from the device included, as a call from numpy does), gflops,
and, where cupy and a CUDA device are present, `cublas_gflops` (cupy.matmul: cuBLAS, measured in the
same process, taking turns) and `ratio_cublas`. Every result is checked against numpy first. (A
fraction of the device's peak is not computed yet: it needs a device whose peak is known.)

On PoCL (OpenCL on this machine's CPU) this is a smoke run: it proves the kernels run and are
correct at a benchmark's size, and its times are a CPU's emulation of a GPU, not a GPU's speed.
GPU figures are owed from a machine with a GPU.

    python benchmarks/gpu.py                        # 256 x 256 x 256 on the OpenCL device
    python benchmarks/gpu.py --shapes 1024x1024x1024 --repeat 5
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "samples"))

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
import gpu_matmul  # noqa: E402
from accpy.targets.gpu import tools  # noqa: E402

STEPS = ("hello", "shared", "double buffered")


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _cublas(a, b):
    """cuBLAS through cupy: (seconds per call, copies included) or None without cupy and a device."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # (no cupy, no driver, no device)
        return None

    def call():
        c = cupy.matmul(cupy.asarray(a), cupy.asarray(b))
        cupy.asnumpy(c)
    call()
    return call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["256x256x256"], help="MxNxK ...")
    ap.add_argument("--target", default="NVIDIA_A100")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--output-dir", default=None)
    opts = ap.parse_args(argv)
    why = tools.opencl_available()
    if why is not None:
        print(json.dumps({"skipped": f"no OpenCL device: {why}"}))
        return 0
    device = tools.opencl_device()
    target = acc.Target(acc.Target.Model[opts.target])
    out_dir = opts.output_dir or os.path.join(os.path.expanduser("~"), ".cache", "accpy", "bench_gpu")
    ok = True
    for shape in opts.shapes:
        M, N, K = (int(x) for x in shape.split("x"))
        rng = np.random.default_rng(0)
        a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
        want = a.astype(np.float64) @ b.astype(np.float64)
        cublas = _cublas(a, b)
        for step in STEPS:
            plan, args = gpu_matmul.plan_for(step, target, M, N, K)
            name = "bench_gpu_" + step.replace(" ", "_")
            package = acc.Package()
            package.add(plan, args=args, base_name=name)
            fn = getattr(package.build(name, output_dir=out_dir, python_module=False), name)
            c = np.zeros((M, N), np.float32)
            fn(a, b, c)  # (compiles the OpenCL C for the device) and checks
            good = bool(np.allclose(c, want, rtol=1e-4, atol=1e-3))
            ok &= good
            rec = {"plan": step, "shape": [M, N, K], "device": device, "correct": good}
            if good:
                seconds = _median_seconds(lambda: fn(a, b, np.zeros((M, N), np.float32)), opts.repeat)
                rec.update(seconds=round(seconds, 6), gflops=round(2.0 * M * N * K / seconds / 1e9, 3))
                if cublas is not None:
                    theirs = _median_seconds(cublas, opts.repeat)
                    rec.update(cublas_gflops=round(2.0 * M * N * K / theirs / 1e9, 3),
                               ratio_cublas=round(theirs / seconds, 3))
                else:
                    rec["cublas"] = "not measured: no cupy or no CUDA device here"
                rec["note"] = "a functional run on the OpenCL device, not a GPU's speed" if "Portable" in device \
                    else "OpenCL device"
            print(json.dumps(rec), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
