"""ACCPY_HOST_MODEL: `acc.Target.HOST` posing as a smaller machine (the features it shares with a
known model), so that one machine tests the code paths of smaller ones."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.cpu import cpu_flags

PROBE = """
import json, accpy as acc
t = acc.Target.HOST
print(json.dumps(dict(ext=list(t.extensions), vb=t.vector_bytes, vr=t.vector_registers, family=t.family,
                      posed=t.get("posing_as"), threads=t.num_threads, caches=list(t.cache_sizes))))
"""


def _host(model):
    env = dict(os.environ)
    env.pop("ACCPY_HOST_MODEL", None)
    if model is not None:
        env["ACCPY_HOST_MODEL"] = model
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)


def _values(model):
    p = _host(model)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.slow
def test_posing_as_haswell_keeps_only_avx2_and_the_machine_itself():
    real, posed = _values(None), _values("Haswell")
    assert posed["posed"] == "Intel Core i7-4770" and real["posed"] is None
    assert posed["family"] == "Haswell"
    assert set(posed["ext"]) <= set(real["ext"])
    assert not any(f.startswith(("avx512", "amx")) for f in posed["ext"])
    if "avx2" in cpu_flags():
        assert {"avx", "avx2", "fma", "f16c"} <= set(posed["ext"])
        assert (posed["vb"], posed["vr"]) == (32, 16)
    # cores and caches stay this machine's
    assert posed["threads"] == real["threads"] and posed["caches"] == real["caches"]


@pytest.mark.slow
def test_posing_as_a_larger_model_adds_nothing():
    real, posed = _values(None), _values("Intel Xeon Platinum 8480+")
    assert posed["ext"] == real["ext"] and posed["vb"] == real["vb"]


@pytest.mark.slow
@pytest.mark.parametrize("value", ["", "  "])
def test_empty_means_not_posing(value):
    assert _values(value)["posed"] is None


def test_unknown_model_is_an_error_naming_the_variable():
    p = _host("no such cpu 123")
    assert p.returncode != 0
    assert "ACCPY_HOST_MODEL='no such cpu 123'" in p.stderr and "UnknownTargetError" in p.stderr


def test_an_accelerator_is_not_a_host():
    p = _host("Gemmini")
    assert p.returncode != 0
    assert "ValueError: ACCPY_HOST_MODEL='Gemmini': expected a CPU model" in p.stderr


BUILD = """
import sys, numpy as np, accpy as acc
A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(64,))
nest = acc.Nest((64,))
i = nest.get_indices()

@nest.iteration_logic
def _():
    A[i] = A[i] * 2.0

s = nest.create_schedule()
ii = s.split(i, acc.Target.HOST.vector_bytes // 4 or 4)
plan = s.create_plan()
if acc.Target.HOST.vector_bytes:
    plan.vectorize(ii)
pkg = acc.Package()
pkg.add(plan, args=(A,), base_name="twice")
lib = pkg.build("twice", output_dir=sys.argv[1], python_module=False)
a = np.arange(64, dtype=np.float32)
lib.twice(a)
assert (a == 2 * np.arange(64)).all()
print(open(sys.argv[1] + "/twice.c").read())
"""


@pytest.mark.slow
@pytest.mark.skipif("avx2" not in cpu_flags(), reason="the posed host vectorizes with AVX2: this CPU lacks it")
def test_code_built_for_a_posed_host_uses_its_features_only(tmp_path):
    env = dict(os.environ, ACCPY_HOST_MODEL="Haswell", ACCPY_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", BUILD, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "_mm256_" in p.stdout and "_mm512_" not in p.stdout and "avx512" not in p.stdout


TILE = """
import accpy as acc
from accpy.targets.library import libraries_for
print(",".join(lib.name for lib in libraries_for(acc.Target.HOST)))
"""


def test_a_posed_host_without_the_tile_unit_uses_its_model():
    env = dict(os.environ, ACCPY_HOST_MODEL="Haswell")
    p = subprocess.run([sys.executable, "-c", TILE], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    names = p.stdout.strip().split(",")
    assert "x86 tile" not in names
