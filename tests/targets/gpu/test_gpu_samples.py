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
