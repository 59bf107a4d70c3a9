"""accpy.tune: grids built, checked and measured on local processes, threads and a Dask LocalCluster."""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import sys
import time

import numpy as np
import pytest

import accpy as acc
from accpy.tune import Exhaustive, GemminiCycles, Halving, WallTime
from accpy.tune.results import ResultsFile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "samples"))

def _matmul(M=64, N=64, K=64):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C), (i, j, k)


def parameterized_plan():
    """A matmul plan whose tile sizes are acc parameters, with a grid of 4."""
    nest, args, (i, j, k) = _matmul()
    P0, P1 = acc.create_parameters()
    s = nest.create_schedule()
    ii = s.split(i, P0)
    jj = s.split(j, P1)
    s.reorder(i, j, k, ii, jj)
    plan = s.create_plan()
    return plan, args, acc.create_parameter_grid({P0: [4, 8], P1: [16, 32]}), (P0, P1)


def tiled(ti: int, bad: bool = False):
    """(plan, args) of a tiled matmul; ti=0 fails to build; bad=True computes something else."""
    nest, args, (i, j, k) = _matmul()
    A, B, C = args
    if bad:  # a variant with a bug: its logic is not the reference's
        nest = acc.Nest(shape=(64, 64, 64))
        i, j, k = nest.get_indices()

        @nest.iteration_logic
        def _():
            C[i, j] += A[i, k] * B[k, j] + 1.0

    s = nest.create_schedule()
    ii = s.split(i, ti)  # ti = 0 raises: a build error
    s.reorder(i, k, ii, j)
    return s.create_plan(), args


def numpy_matmul(a, b, c):
    c += a @ b


def repeated_axpy(R: int):
    """y += a * x, R times over: R = 10**12 runs for hours (a variant past any timeout)."""
    X = acc.Array(role=acc.Role.INPUT, shape=(64,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(64,), name="Y")
    nest = acc.Nest(shape=(R, 64))
    r, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[j] += X[j] * 0.5

    return nest.create_plan(), (X, Y)


def _events(path):
    return [json.loads(line) for line in open(path)]


def _disjoint(intervals):
    iv = sorted(intervals)
    return all(a[1] <= b[0] for a, b in zip(iv, iv[1:]))


@pytest.mark.slow
def test_plan_grid_exhaustive_results_file_and_rerun(tmp_path, capfd):
    plan, args, grid, (P0, P1) = parameterized_plan()
    path = tmp_path / "results.jsonl"
    r = acc.tune(plan, args=args, grid=grid, results_file=path, repeats=3)
    assert [v.status for v in r.variants] == ["ok"] * 4
    assert all(len(v.samples) == 3 and v.checked for v in r.variants)
    # the best is the smallest median, its parameters keyed as in the grid (usable with Package.add)
    assert r.best.value == min(v.value for v in r.variants)
    assert set(r.best_parameters) == {P0, P1} and r.best_parameters in grid
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    r.best_function(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    table = r.table()
    assert table.splitlines()[0].split()[:4] == ["#", "P0", "P1", "seconds"] and len(table.splitlines()) == 6
    err = capfd.readouterr().err
    assert "tuning plan: building [" in err and "measuring, sample 3 of 3" in err
    # the default executor runs measurements one at a time on this machine
    events = _events(path)
    measured = [e for e in events if e["status"] == "ok"]
    assert len(measured) == 12 and _disjoint([tuple(e["interval"]) for e in measured])
    # rounds are interleaved: every variant gets its k-th sample before any gets its (k+1)-th
    order = [e["key"] for e in measured]
    assert all(len(set(order[4 * n:4 * n + 4])) == 4 for n in range(3))
    # a rerun measures nothing again and finds the same best
    r2 = acc.tune(plan, args=args, grid=grid, results_file=path, repeats=3, progress=False)
    assert len(_events(path)) == len(events)
    assert r2.best_parameters == r.best_parameters and r2.best.samples == r.best.samples


@pytest.mark.slow
def test_function_source_failures_are_recorded(tmp_path):
    path = tmp_path / "r.jsonl"
    grid = [{"ti": 4}, {"ti": 0}, {"ti": 8, "bad": True}, {"ti": 16}]
    r = acc.tune(tiled, grid=grid, results_file=path, reference=numpy_matmul, repeats=2, progress=False)
    status = {json.dumps(v.values, sort_keys=True): v for v in r.variants}
    assert status['{"ti": 0}'].status == "build_error"
    assert "split sizes must be integers >= 1" in status['{"ti": 0}'].error.lower()
    wrong = status['{"bad": true, "ti": 8}']
    assert wrong.status == "wrong" and "the reference says" in wrong.error and not wrong.samples
    assert {v.values["ti"] for v in r.ranked} == {4, 16}
    assert "build_error" in r.table() and "wrong" in r.table()
    # failures are not retried on a rerun ... unless asked
    n = len(_events(path))
    acc.tune(tiled, grid=grid, results_file=path, reference=numpy_matmul, repeats=2, progress=False)
    assert len(_events(path)) == n
    r3 = acc.tune(tiled, grid=grid, results_file=path, reference=numpy_matmul, repeats=2, progress=False,
                  retry_failed=True)
    assert len(_events(path)) > n and {v.status for v in r3.variants} == {"ok", "build_error", "wrong"}


@pytest.mark.slow
def test_default_reference_checks_every_variant_once(tmp_path):
    r = acc.tune(tiled, grid={"ti": [4, 16]}, repeats=2, progress=False, results_file=tmp_path / "r.jsonl")
    assert all(v.status == "ok" and v.checked for v in r.variants)
    checked = [e for e in _events(tmp_path / "r.jsonl") if e.get("checked")]
    assert sorted(e["params"]["ti"] for e in checked) == [4, 16]  # once each, not on every sample


def ones_and_twos(seed):
    return [np.ones((64, 64), np.float32), np.full((64, 64), 2, np.float32), np.zeros((64, 64), np.float32)]


def all_128(a, b, c):
    c[...] = 128  # right for A = 1, B = 2, C = 0 (K = 64) only


@pytest.mark.slow
def test_data_function_gives_the_arguments(tmp_path):
    ok = acc.tune(tiled, grid={"ti": [4]}, data=ones_and_twos, reference=all_128, repeats=1, progress=False)
    assert ok.variants[0].status == "ok"
    wrong = acc.tune(tiled, grid={"ti": [4]}, reference=all_128, repeats=1, progress=False)  # random data
    assert wrong.variants[0].status == "wrong"


@pytest.mark.slow
def test_timeout_is_recorded_and_the_rest_is_measured(tmp_path):
    t0 = time.perf_counter()
    r = acc.tune(repeated_axpy, grid={"R": [4, 10**12]}, check=False, timeout=3.0, repeats=2, progress=False,
                 results_file=tmp_path / "r.jsonl")
    by_r = {v.values["R"]: v for v in r.variants}
    assert by_r[10**12].status == "timeout" and "3 s" in by_r[10**12].error
    assert by_r[4].status == "ok" and len(by_r[4].samples) == 2
    assert time.perf_counter() - t0 < 60


@pytest.mark.slow
def test_threads_executor_serializes_measurements(tmp_path):
    plan, args, grid, _ = parameterized_plan()
    with cf.ThreadPoolExecutor(4) as ex:
        r = acc.tune(plan, args=args, grid=grid, executor=ex, repeats=2, progress=False,
                     results_file=tmp_path / "r.jsonl")
    assert len(r.ranked) == 4
    iv = [tuple(e["interval"]) for e in _events(tmp_path / "r.jsonl") if e["status"] == "ok"]
    assert len(iv) == 8 and _disjoint(iv)


def test_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed", reason="the dask extra (pip install 'accpy[dask]')")
    plan, args, grid, _ = parameterized_plan()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        workers = set(client.scheduler_info()["workers"])
        r = acc.tune(plan, args=args, grid=grid, executor=client, repeats=2, progress=False,
                     results_file=tmp_path / "r.jsonl")
    assert len(r.ranked) == 4 and all(v.checked for v in r.variants)
    events = _events(tmp_path / "r.jsonl")
    # builds and measurements ran on the cluster's workers; measurements never overlapped
    assert {e["worker"] for e in events} <= workers and all(e["worker"] for e in events)
    assert len({e["worker"] for e in events if e["status"] == "built"}) >= 1
    iv = [tuple(e["interval"]) for e in events if e["status"] == "ok"]
    assert len(iv) == 8 and _disjoint(iv)
    c = np.zeros((64, 64), np.float32)
    a = np.ones((64, 64), np.float32)
    r.best_function(a, a, c)
    assert (c == 64).all()


@pytest.mark.slow
def test_dask_worker_processes_get_a_partial_of_a_test_function(tmp_path):
    # worker processes cannot import this test module: the function travels by value
    import functools

    distributed = pytest.importorskip("distributed", reason="the dask extra (pip install 'accpy[dask]')")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        r = acc.tune(functools.partial(tiled, bad=False), grid={"ti": [4, 16]}, executor=client, repeats=1,
                     progress=False, results_file=tmp_path / "r.jsonl")
        assert r.label == "tiled" and [v.status for v in r.variants] == ["ok", "ok"]
        pid = client.run(os.getpid)
    assert os.getpid() not in pid.values()
    assert {e["worker"] for e in _events(tmp_path / "r.jsonl")} == set(pid)


def gemmini_blocks(Mb: int, Nb: int, Kb: int):
    from gemmini_matmul import matmul_plan

    return matmul_plan(64, 64, 64, blocks=(Mb, Nb, Kb))


@pytest.mark.slow
def test_gemmini_cycles_objective(tmp_path):
    grid = {"Mb": [16, 64], "Nb": [16, 64], "Kb": [64]}
    r = acc.tune(gemmini_blocks, grid=grid, objective="gemmini_cycles", progress=False,
                 results_file=tmp_path / "r.jsonl")
    assert isinstance(r.objective, GemminiCycles)
    assert all(v.status == "ok" and len(v.samples) == 1 and v.checked for v in r.variants)  # deterministic
    assert all(0 < v.details["utilization"] <= 1 for v in r.variants)
    # the figure is the model's cycle count for one call, as the package reports it
    best = r.best
    plan, args = gemmini_blocks(**best.values)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build("tune_gemmini_check", output_dir=tmp_path / "b", python_module=False)
    a = np.ones((64, 64), np.int8)
    c = np.zeros((64, 64), np.int8)
    lib.gemmini_reset_counters()
    lib.mm(a, a, c, np.float32(0.5))
    assert best.value == lib.gemmini_counters()["cycles"]
    assert best.value == min(v.value for v in r.variants) < max(v.value for v in r.variants)
    assert "gemmini_cycles" in r.table() and "utilization" in r.table()


def test_halving_strategy_is_reproducible_and_prunes():
    h = Halving(fraction=0.25, eta=3, seed=7, min_variants=4)
    assert h.select(100) == Halving(fraction=0.25, eta=3, seed=7, min_variants=4).select(100)
    assert len(h.select(100)) == 25 and h.select(100) != Halving(fraction=0.25, seed=8).select(100)
    assert len(h.select(10)) == 4  # at least min_variants
    assert h.rungs(9) == [1, 3, 9] and h.rungs(5) == [1, 3, 5] and h.rungs(1) == [1]
    assert h.keep(list(range(10)), 0) == [0, 1, 2, 3]
    assert Exhaustive().select(5) == [0, 1, 2, 3, 4] and Exhaustive().rungs(5) == [5]


@pytest.mark.slow
def test_halving_run_measures_survivors_more(tmp_path):
    grid = {"ti": [1, 2, 4, 8, 16, 32, 64, 3]}
    r = acc.tune(tiled, grid=grid, search=Halving(fraction=0.5, eta=2, seed=3, min_variants=4), repeats=4,
                 progress=False, results_file=tmp_path / "r.jsonl")
    assert len(r.variants) == 4 and r.strategy.startswith("Halving")
    counts = sorted(len(v.samples) for v in r.variants)
    assert counts == [1, 1, 2, 4]  # 4 candidates -> 2 (2 samples) -> 1 (4 samples)
    assert len(r.best.samples) == 4  # the best is the last rung's survivor
    assert [len(v.samples) for v in r.ranked] == [4, 2, 1, 1]
    again = acc.tune(tiled, grid=grid, search=Halving(fraction=0.5, eta=2, seed=3, min_variants=4), repeats=4,
                     progress=False)
    assert [v.values for v in again.variants] == [v.values for v in r.variants]
    # a rerun replays the pruning from the stored samples, even when the survivor's later samples
    # (say, taken on a busier machine) would rank it last: nothing is measured again
    path = tmp_path / "r.jsonl"
    n = len(_events(path))
    ResultsFile(path).append({"key": r.best.key, "status": "ok", "samples": [1.0] * 5})
    rerun = acc.tune(tiled, grid=grid, search=Halving(fraction=0.5, eta=2, seed=3, min_variants=4), repeats=4,
                     progress=False, results_file=path)
    assert len(_events(path)) == n + 1
    assert [len(v.samples) for v in rerun.ranked] == [9, 2, 1, 1] and rerun.best.key == r.best.key


def test_bad_arguments_name_the_argument():
    plan, args, grid, _ = parameterized_plan()
    with pytest.raises(ValueError, match="grid"):
        acc.tune(plan, args=args)
    with pytest.raises(ValueError, match="args"):
        acc.tune(plan, grid=grid)
    with pytest.raises(ValueError, match="repeats"):
        acc.tune(plan, args=args, grid=grid, repeats=0)
    with pytest.raises(ValueError, match="objective"):
        acc.tune(plan, args=args, grid=grid, objective="flops")
    with pytest.raises(ValueError, match="search"):
        acc.tune(plan, args=args, grid=grid, search="genetic")
    with pytest.raises(TypeError, match="executor"):
        acc.tune(plan, args=args, grid=grid, executor=object())
    with pytest.raises(ValueError, match="grid\\['ti'\\]"):
        acc.tune(tiled, grid={"ti": []})
    with pytest.raises(ValueError, match="fraction"):
        Halving(fraction=0)


def test_results_file_tolerates_a_cut_line(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ResultsFile(path)
    store.append({"key": "k", "status": "ok", "samples": [1.0], "checked": True})
    with open(path, "a") as f:
        f.write('{"key": "k", "status": "ok", "sam')  # an interrupted run
    store.append({"key": "k", "status": "ok", "samples": [2.0]})
    s = store.load()["k"]
    assert s["samples"] == [1.0, 2.0] and s["checked"] and s["status"] == "ok"


def test_objectives():
    from accpy.tune.objective import objective_of

    assert isinstance(objective_of(None), WallTime) and isinstance(objective_of("gemmini_cycles"), GemminiCycles)
    assert WallTime().format(0.0021) == "2.100 ms" and GemminiCycles().format(1234.0) == "1234 cycles"


@pytest.mark.slow
def test_tune_matmul_sample_quick(tmp_path):
    import re
    import subprocess

    repo = REPO
    env = dict(os.environ, ACCPY_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=repo)
    p = subprocess.run([sys.executable, os.path.join(repo, "samples", "tune_matmul.py"), "--quick", "--table",
                        "--results", str(tmp_path / "r.jsonl")], cwd=repo, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert re.search(r"sgemm 128x128x128, 1 thread\(s\): 5 of 5 variants measured \(Exhaustive\), 5 ok, 0 failed", out)
    # the sample's blocks follow this machine's vector width (the subprocess sees the same HOST,
    # ACCPY_HOST_MODEL included): the formula's choice, the best one of the four grid entries or it
    from tune_matmul import describe, formula_choice, grid_for

    want = formula_choice(128, 128, 128, 1)
    lanes = max(acc.Target.HOST.vector_bytes // 4, 4)
    assert (want["KC"], want["MR"], want["NR"], want["prefetch"]) == \
        ((128, 6, 64, 8) if lanes == 16 else (128, 4, 3 * lanes, 8))  # 6 x 64 on AVX-512, 4 x 24 on AVX2
    measured = [describe(v) for v in grid_for(128, 128, 128, 1, quick=True)] + [describe(want)]
    assert len(set(measured)) == 5
    best = re.search(r"best: +(NC=\d+ KC=128 MC=\d+ MR=\d+ NR=\d+ pack_a=\w+ prefetch=8) +[\d.]+ [mu]?s +[\d.]+ GFLOP/s", out)
    formula = re.search(r"formula: +(\S.*\S) +[\d.]+ [mu]?s .*\(best / formula: ([\d.]+)x\)", out)
    assert best and best.group(1) in measured, out
    assert formula and formula.group(1) == describe(want) and float(formula.group(2)) >= 1.0, out
    assert "tuning sgemm_128x128x128_t1: measuring, sample 2 of 2" in p.stderr


def _child_leaves_runner(runner):
    # in a forked worker: the parent's measuring process is not this process's to use or stop
    if runner.owned:
        os._exit(3)
    runner.stop()
    os._exit(0)


def test_forked_worker_neither_uses_nor_stops_the_parents_measuring_process():
    import multiprocessing

    from accpy.tune.runner import Runner

    r = Runner()
    proc = r._start()
    child = multiprocessing.get_context("fork").Process(target=_child_leaves_runner, args=(r,))
    child.start()
    child.join(60)
    try:
        assert child.exitcode == 0 and proc.poll() is None
        assert r.request({"op": "nothing"}, 30) == {"error": "KeyError: 'variant'"}  # still answering
    finally:
        r.stop()
    assert proc.poll() is not None
