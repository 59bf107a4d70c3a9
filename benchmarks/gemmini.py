"""Gemmini kernels on the functional model: utilization of the scheduled kernels vs a naive schedule.

Prints one JSON object per line:
  kernel ("matmul" or "conv3x3"), schedule ("scheduled" or "naive"), shape (matmul [M, N, K];
  conv [H, W, C, K]: output height, width, input and output channels), macs, cycles,
  utilization (macs / (cycles * 256): the fixed cycle model of native/gemmini/gemmini_model.c),
  instructions (total, and `by_kind`), bytes_in, bytes_out, load/execute/store cycles,
  and `gain` (on the naive line: scheduled cycles vs naive cycles, naive / scheduled).
Every run is checked bit-exactly against numpy (int32 product, float32 scale, round half to
even, int8 clip, ReLU). Shapes are ResNet-50's (as in Exo's Gemmini benchmarks).

    python benchmarks/gemmini.py                  # every shape, scheduled and naive
    python benchmarks/gemmini.py --only matmul --shapes 512x512x512
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "samples"))

import gemmini_conv  # noqa: E402
import gemmini_matmul  # noqa: E402

MATMULS = ["12544x256x64", "12544x64x256", "3136x512x128", "3136x128x512", "784x1024x256", "512x512x512"]
CONVS = ["56x56x64x64", "28x28x128x128", "14x14x256x256"]
KINDS = ("config_ex", "config_ld", "config_st", "mvin", "mvout", "preload", "compute_preloaded",
         "compute_accumulated", "fence")


def line(kernel, schedule, shape, c, seconds):
    return {"kernel": kernel, "schedule": schedule, "shape": shape, "macs": c["macs"], "cycles": c["cycles"],
            "utilization": round(c["utilization"], 4), "instructions": c["instructions"],
            "by_kind": {k: c[k] for k in KINDS}, "bytes_in": c["bytes_in"], "bytes_out": c["bytes_out"],
            "load_cycles": c["load_cycles"], "execute_cycles": c["execute_cycles"],
            "store_cycles": c["store_cycles"], "seconds": round(seconds, 2)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=("matmul", "conv"), default=None)
    p.add_argument("--shapes", default=None, help="comma-separated shapes (MxNxK or HxWxCxK)")
    p.add_argument("--no-naive", action="store_true", help="skip the naive schedules")
    a = p.parse_args(argv)
    out = os.path.join(tempfile.gettempdir(), "accpy_bench", "gemmini")
    jobs = []
    if a.only in (None, "matmul"):
        shapes = a.shapes.split(",") if a.shapes and a.only == "matmul" else MATMULS
        jobs += [("matmul", s) for s in shapes]
    if a.only in (None, "conv"):
        shapes = a.shapes.split(",") if a.shapes and a.only == "conv" else CONVS
        jobs += [("conv3x3", s) for s in shapes]
    for kernel, s in jobs:
        dims = [int(x) for x in s.lower().split("x")]
        results = {}
        for schedule in ("scheduled",) + (() if a.no_naive else ("naive",)):
            t0 = time.perf_counter()
            if kernel == "matmul":
                c = gemmini_matmul.run(*dims, naive=schedule == "naive", output_dir=out, quiet=True)
            else:
                c = gemmini_conv.run(*dims, naive=schedule == "naive", output_dir=out, quiet=True)
            rec = line(kernel, schedule, dims, c, time.perf_counter() - t0)
            results[schedule] = c
            if schedule == "naive":
                rec["gain"] = round(c["cycles"] / results["scheduled"]["cycles"], 2)
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    sys.exit(main())
