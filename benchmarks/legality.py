"""Legality check latency: how long accpy takes to prove a schedule legal (or find a counterexample).

    python benchmarks/legality.py [--runs 5] [--strict]

Each measurement runs in a FRESH process ("cold": nothing cached, the solver's first
queries). The nests are defined first (their bounds proofs already load z3; the import is
timed separately as `z3_import_seconds`), then the clock runs over the transform calls
whose legality is checked:

  three_matmul_fuse   acc.fuse((T += A B, E += T D), partial=1): fused on rows, legal;
  three_matmul_refuse acc.fuse(..., partial=2): illegal, the time to the counterexample;
  three_matmul_tiled  fuse on rows, split i, reorder both parts (two checks);
  stencil_skew        an in-place 2-D Gauss-Seidel stencil: skew(i, j) + reorder (legal),
                      then parallelize the inner index of the wavefront (a race check);
  stencil_refuse      the same stencil's refused parallelize(i) (race counterexample).

Output: one JSON object per line (kernel, seconds_median, seconds_runs, z3_import_seconds,
target_seconds, pass) and a PASS/FAIL line; the issue's bar is three_matmul_fuse < 0.5 s.
Exit status 0, or 1 with --strict when a target fails.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = {"three_matmul_fuse": 0.5}

CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
import z3  # noqa: F401
z3_seconds = time.perf_counter() - t0
sys.path.insert(0, {samples!r})
import accpy as acc
from three_matmul import define

kernel = {kernel!r}
out = {{"kernel": kernel, "z3_import_seconds": z3_seconds}}
if kernel.startswith("three_matmul"):
    (A, B, D, E), first, second = define(256, 256, 256, 256)
    s0, s1 = first.create_schedule(), second.create_schedule()
    t = time.perf_counter()
    if kernel == "three_matmul_fuse":
        acc.fuse((s0, s1), partial=1)
    elif kernel == "three_matmul_refuse":
        try:
            acc.fuse((s0, s1), partial=2)
            raise SystemExit("accepted an illegal fusion")
        except acc.ScheduleError:
            pass
    else:
        s = acc.fuse((s0, s1), partial=1)
        i, f, j0, k0, l1, j1 = s.get_indices()
        ii = s.split(i, 4)
        s.reorder(i, f, k0, j1, ii, j0, l1)
    out["seconds"] = time.perf_counter() - t
else:
    N = 512
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N + 1, N + 1), element_type=acc.ScalarType.float32)
    nest = acc.Nest(shape=(N, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i + 1, j + 1] = (A[i, j + 1] + A[i + 1, j] + A[i + 1, j + 1]) * 0.25

    s = nest.create_schedule()
    t = time.perf_counter()
    if kernel == "stencil_skew":
        s.skew(i, j)
        s.reorder(i, j)
        s.create_plan().parallelize(j)
    else:
        try:
            s.create_plan().parallelize(i)
            raise SystemExit("accepted a racing parallel loop")
        except acc.ScheduleError:
            pass
    out["seconds"] = time.perf_counter() - t
print(json.dumps(out))
'''

KERNELS = ("three_matmul_fuse", "three_matmul_refuse", "three_matmul_tiled", "stencil_skew", "stencil_refuse")


def measure(kernel: str) -> dict:
    code = CHILD.format(samples=str(REPO / "samples"), kernel=kernel)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"{kernel}: child failed\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args(argv)
    ok = True
    for kernel in KERNELS:
        runs = [measure(kernel) for _ in range(args.runs)]
        secs = [r["seconds"] for r in runs]
        med = statistics.median(secs)
        target = TARGETS.get(kernel)
        passed = None if target is None else med < target
        ok = ok and passed is not False
        print(json.dumps({"kernel": kernel, "seconds_median": round(med, 4),
                          "seconds_runs": [round(x, 4) for x in secs],
                          "z3_import_seconds": round(statistics.median(r["z3_import_seconds"] for r in runs), 4),
                          "target_seconds": target, "pass": passed}))
    print("PASS" if ok else "FAIL", "(three_matmul_fuse legality check, cold, < 0.5 s)")
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
