"""The automatic-scheduling benchmark's suite (benchmarks/auto_suite.py, halide_suite.py,
autoschedule.py) at tiny sizes: every kernel's default plans match its numpy reference, the
Halide versions (where the halide wheel is installed) match it too, and the benchmark prints
valid JSON lines."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import auto_suite as suite  # noqa: E402

import accpy as acc  # noqa: E402


@pytest.fixture(scope="module")
def default_library(tmp_path_factory):
    """Every tiny kernel's default plans, one function per stage, in one package."""
    pkg, kernels = acc.Package(), {}
    for name in suite.KERNELS:
        k = suite.kernel(name, tiny=True)
        stages = k.stages()
        kernels[name] = (k, stages)
        for n, (obj, args) in enumerate(stages):
            pkg.add(suite.default_plan(obj), args=args, base_name=suite.c_name(name, n))
    lib = pkg.build("auto_suite_tiny", output_dir=str(tmp_path_factory.mktemp("suite")), python_module=False,
                    progress=False)
    return lib, kernels


@pytest.mark.parametrize("name", list(suite.KERNELS))
def test_default_plan_matches_reference(default_library, name):
    lib, kernels = default_library
    k, stages = kernels[name]
    data = k.data(np.random.default_rng(1))
    want = k.reference(data)
    suite.call_stages([getattr(lib, suite.c_name(name, n)) for n in range(len(stages))], stages, data)
    assert set(want) == set(k.outputs)
    assert k.error(data, want) <= k.tolerance  # 0 for int8: exact
    assert k.flops > 0


def test_reference_leaves_data_alone():
    k = suite.kernel("jacobi-1d", tiny=True)
    data = k.data(np.random.default_rng(0))
    before = data["X"].copy()
    k.reference(data)
    np.testing.assert_array_equal(data["X"], before)


def test_unknown_kernel_is_named():
    with pytest.raises(KeyError, match="kernel: expected one of"):
        suite.kernel("gemmm")


@pytest.mark.parametrize("name", ["gemm", "bicg", "gemver", "jacobi-2d", "fdtd-2d", "int8_matmul", "conv3x3"])
def test_halide_builders_match_reference(tmp_path, name):
    pytest.importorskip("halide", reason="the halide wheel is not installed (pip install 'accpy[bench]')")
    import halide_suite as hs

    k = suite.kernel(name, tiny=True)
    compiled = hs.compile_program(hs.BUILDERS[name](k), "Mullapudi2016", 1, str(tmp_path), "t_" + name.replace("-", "_"))
    data = k.data(np.random.default_rng(2))
    want = k.reference(data)
    run, results = compiled.bind(data)
    hs.set_threads(1)
    run()
    assert results and set(results) <= set(k.outputs)
    for out, got in results.items():
        ref = want[out].astype(np.float64)
        assert np.abs(got.astype(np.float64) - ref).max() <= k.tolerance * max(np.abs(ref).max(), 1.0), out


def test_every_kernel_has_a_halide_builder():
    pytest.importorskip("halide", reason="the halide wheel is not installed (pip install 'accpy[bench]')")
    import halide_suite as hs

    assert set(hs.BUILDERS) == set(suite.KERNELS)


def test_benchmark_quick_prints_json_lines():
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "autoschedule.py"), "--quick", "--kernels",
           "gemm,jacobi-1d", "--threads", "1", "--budget", "1", "--skip-halide"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert [x["kernel"] for x in lines[:-1]] == ["gemm", "jacobi-1d"]
    for x in lines[:-1]:
        assert x["threads"] == 1 and x["gflops"]["default"] > 0
        assert all(e <= 1e-3 for e in x["errors"].values())
    assert lines[-1]["summary"] is True and lines[-1]["kernels"] == 2
