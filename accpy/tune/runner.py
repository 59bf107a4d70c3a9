"""The measuring process: loads built variants and checks and measures them, one request at a time.

Measurements run here, in a child process of the worker, so that a variant that hangs can be
stopped (the process is killed at the timeout) and one that crashes cannot take the worker
down. Builds on an executor's workers run the same way, in a building process of their own
(request "build"). Each such process leads its own process group, so a kill stops what it
started too (the C compiler). Requests and replies are pickled frames on stdin/stdout
(`Runner` is the worker's end); `python -m accpy.tune._process` is this process's entry point
(a module of its own: running this module with -m would find it already imported by the package).
"""
from __future__ import annotations

import os
import pickle
import math
import numbers
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from ..package.compile import write_atomic
from ..package.loader import load
from ..paths import cache_dir
from .building import build_problem_variant
from .data import compare_outputs, make_arguments

_HEADER = struct.Struct("<Q")


class RunnerTimeout(RuntimeError):
    """The measuring process did not answer within the time limit (it was killed)."""


class RunnerCrashed(RuntimeError):
    """The measuring process died (e.g. the kernel crashed); the message holds its last words."""


def exit_text(returncode: int) -> str:
    """How a process ended, from its return code (negative: the signal): 'signal SIGSEGV', 'exit code 3'."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (a process started in its own session, and its children)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# -- frames ----------------------------------------------------------------------------------------

def _write_frame(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: Optional[float]) -> Optional[bytes]:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RunnerTimeout("no answer in time")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None  # end of file: the other side is gone
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, deadline: Optional[float] = None):
    head = _read_exact(fd, _HEADER.size, deadline)
    if head is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(head)[0], deadline)
    if body is None:
        return None
    return pickle.loads(body)


# -- the worker's end ------------------------------------------------------------------------------

class Runner:
    """A measuring process owned by one worker; started on first use, restarted after a kill."""

    def __init__(self, what: str = "measuring process"):
        self.what = what  # how messages name the process
        self._proc: Optional[subprocess.Popen] = None
        self._stderr = None
        self._owner = os.getpid()  # a forked child inherits this object, not the right to use it

    @property
    def owned(self) -> bool:
        """True in the process that created this runner (a forked child must not use it)."""
        return os.getpid() == self._owner

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        # the same accpy as this process, wherever it was imported from, and the same import path
        # (objectives, references and data functions are pickled by reference to their modules)
        paths = [str(Path(__file__).resolve().parents[2])] + [p for p in sys.path if p and os.path.isdir(p)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        self._stderr = tempfile.TemporaryFile()
        # its own session: stopping it kills its process group, the C compiler's processes included
        self._proc = subprocess.Popen([sys.executable, "-m", "accpy.tune._process"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr, env=env, start_new_session=True)
        # wait for its imports before any time limit starts: a limit is the variant's, not Python's
        try:
            ready = _read_frame(self._proc.stdout.fileno(), time.monotonic() + 300)
        except RunnerTimeout:
            ready = None
        if ready != {"ready": True}:
            kill_group(self._proc.pid)
            raise RunnerCrashed(f"the {self.what} did not start: " + self._last_words())
        return self._proc

    def request(self, message: dict, timeout: Optional[float]) -> dict:
        """Send one request and wait for its reply (RunnerTimeout / RunnerCrashed otherwise).

        timeout: seconds, or None for no limit."""
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            _write_frame(proc.stdin.fileno(), message)
            reply = _read_frame(proc.stdout.fileno(), deadline)
        except RunnerTimeout:
            self.stop()
            raise RunnerTimeout(f"no result within {timeout:g} s (the {self.what} was stopped)") from None
        except BrokenPipeError:
            reply = None
        if reply is None:
            raise RunnerCrashed(self._last_words())
        return reply

    def _last_words(self) -> str:
        proc = self._proc
        code = proc.wait() if proc is not None else None
        if proc is not None:
            kill_group(proc.pid)  # what it started (a compiler) dies with it
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
            proc.stdin.close()
        text = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace").strip()[-800:]
        self._proc = None
        how = exit_text(code) if code is not None else "not started"
        return f"the {self.what} died ({how})" + (f": {text}" if text else "")

    def stop(self) -> None:
        """Kill the measuring process, if this process started one."""
        if self._proc is not None and self.owned:
            kill_group(self._proc.pid)
            self._proc.kill()
            self._proc.wait()
            for f in (self._proc.stdin, self._proc.stdout):
                if f is not None:
                    f.close()
            self._proc = None

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


# -- the measuring process -----------------------------------------------------------------------

def load_artifact(artifact: dict):
    """The artifact's package, loaded (files written into the build cache once)."""
    d = cache_dir() / "tune" / "loaded" / artifact["key"]
    hat = d / f"{artifact['name']}.hat"
    if not hat.exists():
        d.mkdir(parents=True, exist_ok=True)

        lib = d / artifact["lib_file"]
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(artifact["lib"])
        os.replace(tmp, lib)
        write_atomic(hat, artifact["hat"])
    return load(hat)


class _State:
    def __init__(self):
        self.packages: dict = {}
        self.inputs: dict = {}
        self.expected: dict = {}
        self.problem: tuple = (None, None)  # (digest of the pickled tuning problem, the problem)

    def package(self, artifact: dict):
        pkg = self.packages.get(artifact["key"])
        if pkg is None:
            pkg = self.packages[artifact["key"]] = load_artifact(artifact)
        return pkg

    def inputs_for(self, specs: list, seed: int, data) -> list:
        key = (tuple(map(repr, specs)), seed, None if data is None else pickle.dumps(data))
        if key not in self.inputs:
            self.inputs[key] = make_arguments(specs, seed, data)
        return self.inputs[key]


def _copy(values: list) -> list:
    """Fresh copies of the arguments, each with the same strides as the original."""
    import numpy as np

    out = []
    for v in values:
        if not isinstance(v, np.ndarray):
            out.append(v)
        elif v.flags.c_contiguous or v.flags.f_contiguous:
            out.append(v.copy(order="K"))
        else:  # explicit strides: a view of the same shape on a fresh buffer
            extent = 1 + sum((d - 1) * s // v.itemsize for d, s in zip(v.shape, v.strides))
            view = np.lib.stride_tricks.as_strided(np.zeros(extent, v.dtype), v.shape, v.strides)
            view[...] = v
            out.append(view)
    return out


def _build(msg: dict, st: _State) -> dict:
    """Build one variant of a pickled tuning problem (unpickled once for the variants that follow)."""
    import hashlib

    digest = hashlib.sha256(msg["problem"]).hexdigest()
    if st.problem[0] != digest:
        st.problem = (digest, pickle.loads(msg["problem"]))
    return build_problem_variant(st.problem[1], msg["index"], msg["key"], msg["want_reference"])


def invalid_sample(s) -> str:
    """'' for a sample an objective may return (a finite real number >= 0), else what is wrong with it."""
    if isinstance(s, bool) or not isinstance(s, numbers.Real):
        return f"{s!r} (not a number)"
    if not math.isfinite(s) or s < 0:
        return repr(float(s))
    return ""


def _handle(msg: dict, st: _State) -> dict:
    if msg["op"] == "build":
        return _build(msg, st)
    variant = msg["variant"]
    specs = variant["args"]
    inputs = st.inputs_for(specs, msg["seed"], msg["data"])
    if msg["op"] == "reference":
        # the expected outputs, computed once per reference and data set (the oracle is slow)
        ref = msg["reference"]
        # (a callable reference serves variants of different argument shapes: the shapes are part of the key)
        rkey = (ref["key"] if isinstance(ref, dict) else pickle.dumps(ref), tuple(map(repr, specs)), msg["seed"],
                pickle.dumps(msg["data"]))
        if rkey not in st.expected:
            vals = _copy(inputs)
            if isinstance(ref, dict):
                getattr(st.package(ref), ref["function"])(*vals)
            else:
                ref(*vals)
            st.expected[rkey] = vals
        return {"expected_key": rkey}
    pkg = st.package(variant)
    fn = getattr(pkg, variant["function"])
    reply: dict = {}
    if msg.get("expected_key") is not None:
        got = _copy(inputs)
        fn(*got)
        reply["wrong"] = compare_outputs(specs, got, st.expected[msg["expected_key"]], msg["tolerance"])
        if reply["wrong"]:
            return reply
    vals = _copy(inputs)
    objective = msg["objective"]

    def call():
        fn(*vals)

    for _ in range(msg["warmup"]):
        call()
    calls = msg["calls"] or objective.calls_per_sample(call, msg["min_time"])
    samples = []
    for _ in range(msg["samples"]):
        s = objective.sample(call, pkg, calls)
        bad = invalid_sample(s)
        if bad:  # kept as the objective gave it (as text when it is not a number)
            number = isinstance(s, numbers.Real) and not isinstance(s, bool)
            return {"invalid": bad, "value": float(s) if number else repr(s)}
        samples.append(float(s))
    reply["samples"] = samples
    reply["calls"] = calls
    reply["details"] = objective.details(pkg)
    return reply


def main() -> int:
    """Entry point of the measuring process: serve measurement requests from stdin."""
    # frames go to the original stdout; anything a kernel prints goes to stderr instead
    out_fd = os.dup(1)
    os.dup2(2, 1)
    in_fd = sys.stdin.fileno()
    import numpy  # noqa: F401  (imported before saying ready: see Runner._start)

    st = _State()
    _write_frame(out_fd, {"ready": True})
    while True:
        msg = _read_frame(in_fd)
        if msg is None:
            return 0
        try:
            reply = _handle(msg, st)
        except Exception as e:  # reported to the worker, recorded with the variant
            reply = {"error": f"{type(e).__name__}: {e}"}
        _write_frame(out_fd, reply)
