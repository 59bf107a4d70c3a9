"""samples/sample_support.py, and the rules every sample keeps through it: numpy's BLAS on one
thread before numpy is imported, files outside the repository, no speed measured on a model."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import accpy as acc

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
sys.path.insert(0, str(SAMPLES))

import sample_support as ss  # noqa: E402

# the samples that are scripts (property_test_example.py is a pytest file a user runs)
SCRIPTS = sorted(p.name for p in SAMPLES.glob("*.py") if p.name not in ("sample_support.py", "property_test_example.py"))


def _top_imports(path: Path) -> list:
    """The modules a file imports at its top level, in order."""
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            out += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module.split(".")[0])
    return out


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 15 and "hello_matmul.py" in SCRIPTS, SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_imports_sample_support_before_numpy_and_accpy(name):
    mods = _top_imports(SAMPLES / name)
    assert "sample_support" in mods, f"{name} does not import sample_support"
    first = mods.index("sample_support")
    for heavy in ("numpy", "accpy", "int8_matmul", "optimized_matmul", "conv2d"):
        if heavy in mods:
            assert mods.index(heavy) > first, f"{name} imports {heavy} before sample_support"


@pytest.mark.parametrize("name", SCRIPTS)
def test_no_script_names_a_folder_of_the_repository_for_its_files(name):
    text = (SAMPLES / name).read_text()
    assert "_build" not in text, f"{name} still writes under samples/_build"
    assert "OPENBLAS_NUM_THREADS" not in text, f"{name} sets the BLAS threads itself, not through sample_support"


def test_output_dir_is_the_given_folder_or_one_under_the_system_temp(tmp_path, monkeypatch):
    given = tmp_path / "a" / "b"
    assert ss.output_dir("x", str(given)) == given and given.is_dir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    d = ss.output_dir("some_sample")
    assert d.is_dir() and d.name == "some_sample"
    assert d.parent.parent == tmp_path / "tmp" and d.parent.name.startswith("accpy_samples_")


def test_functional_model_reads_the_target():
    host = acc.Target.HOST
    assert ss.functional_model(acc.Target(acc.Target.Model.GEMMINI)) == "Gemmini's functional model"
    assert ss.functional_model(host(extra=(("x86tile", "emulate"),))) == "the x86 tile unit's functional model"
    assert ss.functional_model(host) == ""
    assert ss.not_timed("M").startswith("functional model, not timed (it ran on M")


def test_ratio_sentence_says_slower_below_one():
    assert ss.ratio_sentence("a", 1.0, "b", 2.0) == "a is 2.00x faster than b"
    assert ss.ratio_sentence("a", 2.0, "b", 1.0) == "a is slower than b: 0.50x its speed"
    assert ss.ratio_sentence("a", 1.0, "b", 1.02) == "a is as fast as b (1.02x)"
    assert ss.ratio_sentence("a", 1.0, "b", 0.999) == "a is slower than b: 1.00x its speed"  # below 1, said so


def test_timing_helpers_refuse_no_calls():
    with pytest.raises(ValueError, match="repeat: expected a positive number of calls, got 0"):
        ss.median_seconds(lambda: None, 0)
    with pytest.raises(ValueError, match="repeat: expected a positive number of calls, got -1"):
        ss.interleaved_medians({"f": lambda: None}, -1)
    calls = []
    t = ss.interleaved_medians({"f": lambda: calls.append("f"), "g": lambda: calls.append("g")}, 3)
    assert set(t) == {"f", "g"} and calls == ["f", "g"] * 4  # one untimed call each, then turns


_CHILD = """
import os, sys
sys.path.insert(0, {samples!r})
{first}
import ctypes
paths = sorted({{ln.split()[-1] for ln in open("/proc/self/maps") if "openblas" in ln.lower()
                and ln.split()[-1].startswith("/")}})
n = None
for p in paths:
    lib = ctypes.CDLL(p)
    for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                 "scipy_openblas_get_num_threads", "openblas_get_num_threads"):
        if hasattr(lib, name):
            n = getattr(lib, name)()
            break
print(os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("MKL_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS"), n)
"""


@pytest.mark.parametrize("first", ["import sample_support\nimport numpy", "import numpy\nimport sample_support"])
def test_numpy_blas_on_one_thread_whichever_is_imported_first(first):
    """Imported before numpy, the variables do it; after, the loaded OpenBLAS is set directly."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: OpenBLAS runs on one thread anyway")
    env = {k: v for k, v in os.environ.items() if k not in ss.BLAS_THREAD_VARIABLES + ("OMP_NUM_THREADS",)}
    p = subprocess.run([sys.executable, "-c", _CHILD.format(samples=str(SAMPLES), first=first)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    words = p.stdout.split()
    assert words[:3] == ["1", "1", "None"], p.stdout  # OMP_NUM_THREADS left alone: see sample_support
    if words[3] != "None":  # numpy's BLAS is an OpenBLAS
        assert words[3] == "1", p.stdout


def test_the_environment_keeps_its_own_blas_threads():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    code = f"import sys, os; sys.path.insert(0, {str(SAMPLES)!r}); import sample_support; print(os.environ['OPENBLAS_NUM_THREADS'])"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "2", p.stdout + p.stderr
