"""The work an executor runs: build one variant; check and measure one variant (one host at a time).

Both are plain module-level functions of picklable arguments, so any
`concurrent.futures.Executor` (threads, processes, Dask workers) can run them. Neither runs
the variant in the task's own process: a build runs in a building process and a measurement
in a measuring process (`runner.Runner`, children of the worker), so a plan function, compiler
or kernel that crashes or hangs costs that variant only, never the worker (a Dask worker that
died would make the scheduler retry the task on other workers, which it would kill too).
Builds run in parallel. Measurements hold a lock per host (a file lock named after the host
name, so every worker process and thread on one machine shares it): two measurements never
overlap on one machine, whatever executor runs them.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
import time
from typing import Optional

from .building import build_crashed, build_timed_out, host_name, where
from .runner import Runner, RunnerCrashed, RunnerTimeout

_RUNNER_LOCK = threading.Lock()
_RUNNER: Optional[Runner] = None
# idle building processes of this process (one is taken per build: threads build in parallel)
_BUILDERS: list = []
_BUILDERS_LOCK = threading.Lock()


def release() -> None:
    """Stop this process's idle measuring and building processes (at the end of a tuning run)."""
    global _RUNNER
    with _BUILDERS_LOCK:
        idle = [b for b in _BUILDERS if b.owned]
        _BUILDERS.clear()
    for b in idle:
        b.stop()
    if _RUNNER_LOCK.acquire(blocking=False):  # (one in use belongs to another tuning run)
        try:
            if _RUNNER is not None and _RUNNER.owned:
                _RUNNER.stop()
            _RUNNER = None
        finally:
            _RUNNER_LOCK.release()


@contextlib.contextmanager
def host_lock():
    """Exclusive use of this machine for measuring (held across processes and threads)."""
    path = os.path.join(tempfile.gettempdir(), f"accpy-tune-{host_name()}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # flock: per open file, so threads of one process exclude each other too
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def build_variant(payload: bytes, index: int, key: str, want_reference: bool,
                  build_timeout: Optional[float] = None) -> dict:
    """Build variant `index` of the pickled tuning problem (source, args, grid) in a building process
    of this worker, stopped after `build_timeout` seconds (None: no limit); returns its artifacts or
    what went wrong, as a record."""
    with _BUILDERS_LOCK:
        builder = _BUILDERS.pop() if _BUILDERS else None
    if builder is None or not builder.owned:
        builder = Runner("building process")
    message = {"op": "build", "problem": payload, "index": index, "key": key, "want_reference": want_reference}
    try:
        rec = builder.request(message, build_timeout)
    except RunnerTimeout:
        rec = build_timed_out(build_timeout)
    except RunnerCrashed as e:
        rec = build_crashed(str(e))
    with _BUILDERS_LOCK:
        _BUILDERS.append(builder)
    rec.setdefault("status", "build_error")
    return {**rec, "key": key, **where()}


def measure_variant(artifact: dict, job: dict) -> dict:
    """Check (if asked) and measure one variant in this host's measuring process, holding the host lock.

    job: objective, samples, warmup, calls, min_time, timeout, seed, data, tolerance,
    reference (an artifact, a picklable callable, or None for no check); timeouts in seconds
    or None (no limit). A failure's record says at which stage: "check" (the reference) or
    "measure" (the variant's check and samples).
    """
    global _RUNNER
    out = {"key": artifact["variant"], **where()}
    stage = "check"
    with _RUNNER_LOCK, host_lock():
        if _RUNNER is None or not _RUNNER.owned:  # (a forked worker starts its own measuring process)
            _RUNNER = Runner()
        t0 = time.time()
        try:
            common = {"variant": artifact, "seed": job["seed"], "data": job["data"]}
            expected = None
            if job.get("reference") is not None:
                r = _RUNNER.request({"op": "reference", "reference": job["reference"], **common},
                                    job["reference_timeout"])
                if "error" in r:
                    return {**out, "status": "error", "stage": stage, "error": f"the reference failed: {r['error']}",
                            "interval": (t0, time.time())}
                expected = r["expected_key"]
            stage = "measure"
            reply = _RUNNER.request({"op": "measure", "expected_key": expected, "objective": job["objective"],
                                     "samples": job["samples"], "warmup": job["warmup"], "calls": job["calls"],
                                     "min_time": job["min_time"], "tolerance": job["tolerance"], **common},
                                    job["timeout"])
        except RunnerTimeout as e:
            reply = {"status": "timeout", "error": str(e)}
        except RunnerCrashed as e:
            reply = {"status": "crashed", "error": str(e)}
        out["interval"] = (t0, time.time())
    if "status" in reply:
        out.update(reply, stage=stage)
    elif "error" in reply:
        out.update(status="error", stage=stage, error=reply["error"])
    elif reply.get("wrong"):
        out.update(status="wrong", stage="check", error=reply["wrong"])
    elif reply.get("invalid"):
        out.update(status="invalid", stage="measure", invalid_sample=reply["value"],
                   error=f"the objective returned {reply['invalid']}: a sample must be a finite number >= 0")
    else:
        out.update(status="ok", samples=reply["samples"], calls=reply["calls"], details=reply["details"])
    return out
