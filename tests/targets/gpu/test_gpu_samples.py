"""samples/gpu_matmul.py (Accera's GPU tutorial sequence) runs on the OpenCL device and checks every
step against numpy."""
from __future__ import annotations

import re

from test_samples import check_ok, run_sample


def test_gpu_matmul_sample_runs_every_step(needs_opencl, tmp_path):
    out = check_ok(run_sample("gpu_matmul.py", tmp_path, "--size", "40", "24", "20"))
    for step in ("hello", "shared", "double buffered"):
        assert re.search(rf"\n{step}: grid \(2, 3, 1\) of blocks \(16, 16, 1\)", out), out
    assert out.count(" OK; ") == 3 and out.rstrip().endswith("PASS"), out


def test_gpu_conv_sample_matches_with_and_without_shared_caches(needs_opencl, tmp_path):
    out = check_ok(run_sample("gpu_conv.py", tmp_path, "--size", "10", "20", "3", "5"))
    assert "global memory only: grid (2, 3, 1) of blocks (16, 4, 1)" in out
    assert "in SHARED memory: grid (2, 3, 1)" in out
    assert out.count(" OK; ") == 2 and out.rstrip().endswith("PASS"), out


def test_the_gpu_benchmark_checks_and_times_each_plan(needs_opencl, tmp_path):
    import json
    import subprocess
    import sys

    from test_samples import REPO

    p = subprocess.run([sys.executable, "benchmarks/gpu.py", "--shapes", "48x40x32", "--repeat", "1",
                        "--output-dir", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["plan"] for r in recs] == ["hello", "shared", "double buffered"]
    assert all(r["correct"] and r["gflops"] > 0 for r in recs), recs
