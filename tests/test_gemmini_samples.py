"""The Gemmini samples run as scripts (on the functional model, checked against numpy), and the
benchmark prints its JSON lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def run(*args):
    p = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.mark.slow
@pytest.mark.parametrize("args", [(), ("--shape", "100x40x72", "--bias", "--no-relu"), ("--naive",)])
def test_gemmini_matmul_sample(args):
    out = run("samples/gemmini_matmul.py", *args)
    assert "equals numpy bit for bit" in out and "utilization" in out


@pytest.mark.slow
@pytest.mark.parametrize("args", [(), ("--shape", "10x20x24x40", "--naive")])
def test_gemmini_conv_sample(args):
    out = run("samples/gemmini_conv.py", *args)
    assert "equals numpy bit for bit" in out and "utilization" in out


@pytest.mark.slow
def test_gemmini_conv_sample_tunes_its_blocks_on_cycles():
    out = run("samples/gemmini_conv.py", "--shape", "4x14x16x32", "--tune")
    assert "8 variants on the model" in out and "formula Pb=56 Kb=32" in out and "best    Pb=" in out


@pytest.mark.slow
def test_gemmini_benchmark_lines():
    out = run("benchmarks/gemmini.py", "--only", "matmul", "--shapes", "256x128x64")
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["schedule"] for x in lines] == ["scheduled", "naive"]
    for x in lines:
        assert {"kernel", "shape", "macs", "cycles", "utilization", "instructions"} <= set(x)
    assert lines[0]["utilization"] >= 0.8 and lines[1]["gain"] > 1.5
