"""acc.tune survives any variant: one that segfaults or hangs while building, objectives returning
NaN or -1 or raising; only the valid variants are ranked, each bad one is reported with its cause,
and no process is left behind (local processes and a Dask LocalCluster)."""
from __future__ import annotations

import functools
import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.tune import WallTime

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["good1", "segv", "hang", "nan", "neg", "raise", "good2"]


def variant(mode: str, pid_dir: str):
    """(plan, args) of y += x / 2; `mode` makes the build crash or hang, or names the output for `Scripted`."""
    Path(pid_dir, f"build-{mode}-{os.getpid()}").touch()  # every process that builds, to check it is gone
    if mode == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":
        time.sleep(10**6)
    if mode == "exit":
        os._exit(3)
    n = 128 if mode == "good2" else 64
    X = acc.Array(role=acc.Role.INPUT, shape=(n,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n,), name={"nan": "Ynan", "neg": "Yneg"}.get(mode, "Y" + mode))
    nest = acc.Nest(shape=(n,))
    j, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[j] += X[j] * 0.5

    return nest.create_plan(), (X, Y)


def halve_add(x, y):
    y += x * 0.5


class Scripted(WallTime):
    """Wall time, but NaN for the output named Ynan, -1 for Yneg, an exception for Yraise."""

    def __init__(self, pid_dir: str):
        self.pid_dir = pid_dir

    def sample(self, call, package, calls):
        Path(self.pid_dir, f"measure-{os.getpid()}").touch()
        hat = Path(package.files["hat"]).read_text()
        if '"Ynan"' in hat:
            return float("nan")
        if '"Yneg"' in hat:
            return -1
        if '"Yraise"' in hat:
            raise RuntimeError("the objective refuses this variant")
        return super().sample(call, package, calls)


def _children() -> set:
    out = set()
    for task in Path("/proc/self/task").iterdir():
        with open(task / "children") as f:
            out |= {int(p) for p in f.read().split()}
    return out


def _tune(tmp_path, executor=None):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    r = acc.tune(functools.partial(variant, pid_dir=str(pid_dir)), grid={"mode": MODES}, executor=executor,
                 objective=Scripted(str(pid_dir)), reference=halve_add, repeats=2, warmup=0, min_time=0.001,
                 timeout=30, build_timeout=5, progress=False, results_file=tmp_path / "r.jsonl")
    return r, pid_dir


def _check(r, pid_dir: Path) -> None:
    by = {v.values["mode"]: v for v in r.variants}
    assert [v.values["mode"] for v in r.ranked] in (["good1", "good2"], ["good2", "good1"]), r.table()
    assert r.best.values["mode"] in ("good1", "good2") and all(len(v.samples) == 2 for v in r.ranked)
    segv, hang, nan, neg, bad = (by[m] for m in ("segv", "hang", "nan", "neg", "raise"))
    assert (segv.status, segv.stage) == ("crashed", "build") and "signal SIGSEGV" in segv.error
    assert (hang.status, hang.stage) == ("timeout", "build") and "build_timeout=5 s" in hang.error
    assert (nan.status, nan.stage) == ("invalid", "measure") and math.isnan(nan.invalid_sample)
    assert "returned nan" in nan.error and not nan.samples
    assert (neg.status, neg.invalid_sample) == ("invalid", -1.0) and "returned -1.0" in neg.error
    assert (bad.status, bad.stage) == ("error", "measure") and "RuntimeError: the objective refuses" in bad.error
    assert [v.values["mode"] for v in r.failures()] == ["segv", "hang", "nan", "neg", "raise"]
    table = r.table()
    for text in ("crashed (build): the building process died (signal SIGSEGV)", "timeout (build)",
                 "invalid (measure): the objective returned nan", "error (measure)"):
        assert text in table, table
    # no process left behind: every process that built or measured is gone, the hanging one too
    names = [p.name for p in pid_dir.iterdir()]
    assert any(n.startswith("build-hang-") for n in names) and any(n.startswith("measure-") for n in names)
    alive = [n for n in names if os.path.exists(f"/proc/{n.rsplit('-', 1)[1]}")]
    assert not alive, f"processes left behind: {alive}"


def test_local_processes_survive_every_bad_variant(tmp_path):
    before = _children()
    t0 = time.perf_counter()
    r, pid_dir = _tune(tmp_path)
    _check(r, pid_dir)
    assert _children() <= before
    assert time.perf_counter() - t0 < 60
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    r.best_function(x, y) if r.best.values["mode"] == "good1" else None
    assert r.best.values["mode"] != "good1" or (y == 0.5).all()


def test_dask_local_cluster_survives_every_bad_variant(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed", reason="the dask extra (pip install 'accpy[dask]')")
    # the worker processes unpickle the objective and reference by reference to this module
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        workers = set(client.run(os.getpid).values())
        r, pid_dir = _tune(tmp_path, client)
        _check(r, pid_dir)
        assert set(client.run(os.getpid).values()) == workers  # no worker died: none was replaced
        from accpy.tune.tune import _executor_of

        with _executor_of(client) as ex:  # a failed task is recorded, never run again
            assert ex._kwargs == {"pure": False, "retries": 0}
