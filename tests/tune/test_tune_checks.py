"""acc.tune's argument checks, the results file's trust checks, the statuses of failed variants,
a user's process pool surviving a crashing build, and the measuring process's clean start."""
from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import multiprocessing
import os

import numpy as np
import pytest

import accpy as acc
from accpy.tune import TuneResult, VariantResult, WallTime
from accpy.tune.results import ResultsFile, checksum, run_stamp
from accpy.tune.runner import Runner, invalid_sample
from test_tune_robustness import halve_add, variant


def _plan():
    X = acc.Array(role=acc.Role.INPUT, shape=(16,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(16,), name="Y")
    nest = acc.Nest(shape=(16,))
    j, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[j] += X[j] * 0.5

    P = acc.create_parameters()
    s = nest.create_schedule()
    s.split(j, P)
    return s.create_plan(), (X, Y), acc.create_parameter_grid({P: [4, 8]})


@pytest.mark.parametrize("name, value, expected", [
    ("timeout", 0, "timeout: expected a finite number of seconds > 0 or float('inf') for no limit, got 0"),
    ("timeout", -1.0, "timeout: expected a finite number of seconds > 0"),
    ("timeout", float("nan"), "timeout: expected a finite number of seconds > 0"),
    ("timeout", "60", "timeout: expected a number, got '60'"),
    ("build_timeout", 0, "build_timeout: expected a finite number of seconds > 0 or float('inf')"),
    ("build_timeout", -float("inf"), "build_timeout: expected a finite number"),
    ("build_timeout", None, "build_timeout: expected a number, got None"),
    ("min_time", float("nan"), "min_time: expected a finite number of seconds > 0, got nan"),
    ("min_time", float("inf"), "min_time: expected a finite number of seconds > 0, got inf"),
    ("min_time", 0, "min_time: expected a finite number of seconds > 0, got 0"),
    ("repeats", 0, "repeats: expected an integer >= 1, got 0"),
    ("repeats", 2.5, "repeats: expected an integer >= 1, got 2.5"),
    ("repeats", True, "repeats: expected an integer >= 1, got True"),
    ("warmup", -1, "warmup: expected an integer >= 0, got -1"),
    ("tolerance", float("nan"), "tolerance: expected a finite number >= 0, got nan"),
    ("tolerance", -1e-3, "tolerance: expected a finite number >= 0, got -0.001"),
    ("tolerance", float("inf"), "tolerance: expected a finite number >= 0, got inf"),
    ("seed", 1.5, "seed: expected an integer, got 1.5"),
    ("check", "yes", "check: expected True or False, got 'yes'"),
    ("label", "", "label: expected a non-empty string, got ''"),
])
def test_bad_numbers_name_the_argument(name, value, expected):
    plan, args, grid = _plan()
    with pytest.raises(ValueError) as e:
        acc.tune(plan, args=args, grid=grid, progress=False, **{name: value})
    assert str(e.value).startswith(expected)


def test_no_limit_is_inf_and_numpy_numbers_are_numbers(tmp_path):
    plan, args, grid = _plan()
    r = acc.tune(plan, args=args, grid=grid[:1], timeout=float("inf"), build_timeout=float("inf"),
                 min_time=np.float64(0.001), repeats=np.int64(1), tolerance=np.float32(0), progress=False)
    assert [v.status for v in r.variants] == ["ok"] and r.best.samples


def test_samples_an_objective_may_return():
    assert invalid_sample(0) == invalid_sample(1e-9) == invalid_sample(np.float32(2.5)) == ""
    assert invalid_sample(float("nan")) == "nan" and invalid_sample(-1) == "-1.0"
    assert invalid_sample(float("inf")) == "inf" and invalid_sample(np.float64("-inf")) == "-inf"
    assert invalid_sample(None) == "None (not a number)" and invalid_sample(True) == "True (not a number)"
    assert invalid_sample("3") == "'3' (not a number)"


def _result(*variants) -> TuneResult:
    return TuneResult("t", WallTime(), list(variants), len(variants), "Exhaustive", 0.0, None, lambda v: None, 1)


def test_best_ranks_only_valid_variants_and_says_why_none_is():
    ok = VariantResult(0, "a", {"p": 1}, {"p": 1}, status="ok", samples=[2.0])
    nan = VariantResult(1, "b", {"p": 2}, {"p": 2}, status="ok", samples=[float("nan")])
    neg = VariantResult(2, "c", {"p": 3}, {"p": 3}, status="ok", samples=[-1.0])
    bad = VariantResult(3, "d", {"p": 4}, {"p": 4}, status="invalid", stage="measure", invalid_sample=None,
                        error="the objective returned None (not a number): a sample must be a finite number >= 0")
    r = _result(nan, ok, neg, bad)
    assert r.ranked == [ok] and r.best is ok and r.failures() == [bad]
    assert "invalid (measure): the objective returned None" in r.table()
    crashed = VariantResult(0, "e", {}, {}, status="crashed", stage="build", error="the building process died")
    with pytest.raises(RuntimeError, match=r"tuning t: no valid variant to choose from \(1 crashed, 1 invalid of "
                                           r"2\); result.failures\(\) and result.table\(\) say why"):
        _result(crashed, bad).best


# -- the results file ----------------------------------------------------------------------------

def _lines(path):
    return [json.loads(line) for line in open(path)]


def _rewrite(path, records, fix_checksum: bool):
    with open(path, "w") as f:
        for ev in records:
            if fix_checksum:
                ev["sha256"] = checksum(ev)
            f.write(json.dumps(ev) + "\n")


def test_records_carry_checksum_version_and_compiler(tmp_path):
    store = ResultsFile(tmp_path / "r.jsonl")
    store.append({"key": "k", "status": "ok", "samples": [1.0], "calls": 3})
    ev, = _lines(store.path)
    assert ev["sha256"] == checksum(ev) and ev["accpy"] == acc.__version__
    assert ev["compiler"] == run_stamp()["compiler"] and ev["compiler"].split()[0] in ("gcc", "cc", "clang")
    assert store.load()["k"]["samples"] == [1.0] and store.distrusted == {}


@pytest.mark.parametrize("edit, fix_checksum, why", [
    (lambda ev: ev.update(samples=[-1.0]), False, "a record that fails its checksum"),
    (lambda ev: ev.update(samples=[-1.0]), True, "a sample that is not a finite number >= 0"),
    (lambda ev: ev.update(samples=[float("nan")]), True, "a sample that is not a finite number >= 0"),
    (lambda ev: ev.update(samples=["fast"]), True, "a sample that is not a finite number >= 0"),
    (lambda ev: ev.update(calls=0), True, "calls that are not a positive integer"),
    (lambda ev: ev.update(accpy="0.0.1"), True, "a record written with accpy '0.0.1', not"),
    (lambda ev: ev.update(compiler="gcc (Other) 4.8.5"), True, "a record written with 'gcc (Other) 4.8.5', not"),
    (lambda ev: ev.pop("sha256"), False, "a record without a checksum"),
])
def test_a_record_not_trusted_makes_its_variant_start_over(tmp_path, edit, fix_checksum, why):
    store = ResultsFile(tmp_path / "r.jsonl")
    for key in ("k", "other"):
        store.append({"key": key, "status": "built", "build_seconds": 0.5})
        store.append({"key": key, "status": "ok", "samples": [1.0], "calls": 3, "checked": True})
    records = _lines(store.path)
    edit(records[1])
    _rewrite(store.path, records, fix_checksum)
    state = store.load()
    assert "k" not in state and store.distrusted["k"].startswith(why)
    assert state["other"]["samples"] == [1.0] and "other" not in store.distrusted
    # measured again: the later trusted records count, and the variant is trusted from then on
    store.append({"key": "k", "status": "built", "build_seconds": 0.5})
    store.append({"key": "k", "status": "ok", "samples": [2.0], "calls": 3})
    assert store.load()["k"]["samples"] == [2.0] and store.distrusted == {}


def test_a_tampered_file_is_measured_again_and_says_so(tmp_path, capfd):
    plan, args, grid = _plan()
    path = tmp_path / "r.jsonl"
    first = acc.tune(plan, args=args, grid=grid, repeats=1, min_time=0.001, results_file=path, progress=False)
    assert len(first.ranked) == 2
    records = _lines(path)
    target = next(ev for ev in records if ev["status"] == "ok")
    target["samples"] = [-1.0]  # edited to make that variant "best"
    _rewrite(path, records, fix_checksum=False)
    n = len(records)
    capfd.readouterr()
    r = acc.tune(plan, args=args, grid=grid, repeats=1, min_time=0.001, results_file=path)
    err = capfd.readouterr().err
    assert "1 variant(s) of" in err and "measured again, their records not trusted (a record that fails its " \
                                         "checksum)" in err
    new = _lines(path)[n:]
    assert {ev["key"] for ev in new} == {target["key"]} and {ev["status"] for ev in new} == {"built", "ok"}
    assert all(v.value > 0 for v in r.ranked) and len(r.ranked) == 2


# -- executors and processes ---------------------------------------------------------------------

@pytest.mark.slow
def test_a_users_process_pool_survives_builds_that_crash(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    source = functools.partial(variant, pid_dir=str(pid_dir))
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as ex:
        r = acc.tune(source, grid={"mode": ["good1", "segv", "exit", "hang"]}, executor=ex, reference=halve_add,
                     repeats=1, min_time=0.001, build_timeout=5, progress=False)
        assert ex.submit(os.getpid).result() != os.getpid()  # the pool still works
    by = {v.values["mode"]: v for v in r.variants}
    assert by["good1"].status == "ok" and r.best is by["good1"]
    assert by["segv"].status == "crashed" and "the building process died (signal SIGSEGV)" in by["segv"].error
    assert by["exit"].status == "crashed" and "the building process died (exit code 3)" in by["exit"].error
    assert by["hang"].status == "timeout" and "build_timeout=5 s" in by["hang"].error
    hung = [int(p.name.rsplit("-", 1)[1]) for p in pid_dir.iterdir() if p.name.startswith("build-hang-")]
    assert hung and not any(os.path.exists(f"/proc/{pid}") for pid in hung)


def test_local_build_that_exits_is_recorded_with_its_exit_code(tmp_path):
    r = acc.tune(functools.partial(variant, pid_dir=str(tmp_path)), grid={"mode": ["exit"]}, progress=False)
    v, = r.variants
    assert (v.status, v.stage, v.error) == ("crashed", "build", "the building process died (exit code 3)")
    with pytest.raises(RuntimeError, match="no valid variant to choose from \\(1 crashed of 1\\)"):
        r.best


def test_the_measuring_process_starts_without_warnings():
    r = Runner()
    try:
        assert r.request({"op": "nothing"}, 60) == {"error": "KeyError: 'variant'"}
        r._stderr.seek(0)
        err = r._stderr.read().decode()
    finally:
        r.stop()
    assert "RuntimeWarning" not in err and "found in sys.modules" not in err, err


def test_a_killed_process_group_takes_its_children_along(tmp_path):
    # a building process stopped at its time limit: what it started (the C compiler) goes too
    import subprocess
    import sys
    import time

    from accpy.tune.runner import kill_group

    pidfile = tmp_path / "child"
    code = (f"import subprocess, time; p = subprocess.Popen(['sleep', '1000']); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(1000)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    kill_group(proc.pid)
    proc.wait()
    for _ in range(100):  # (the orphan is reaped by init)
        if not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z"
    assert proc.returncode == -9
