"""Watched worker processes: each job runs in a child process, and a job that outlives its time
limit or kills its process is an outcome (a hang, a crash), never a stuck or dead driver.

A `Worker` is a forked child (it inherits the driver's imports, so starting one costs
milliseconds) in a session of its own: a hang is ended by killing the whole process group,
the C compiler included. It runs jobs (`jobs.run_job`) one after another and answers each with
messages over a pipe: zero or more ("note", data) messages (e.g. the cases a batch drew,
sent before they run, so that a hang can name them) and one ("done", result).
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from multiprocessing.connection import wait
from typing import Optional


RECYCLE_AFTER = 40  # jobs, then a fresh process


def _serve(conn, run_job) -> None:
    os.setsid()  # our own process group: killing it ends the compilers we started too
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is reported, not dumped (that takes seconds)
    import warnings

    warnings.simplefilter("ignore")  # (accpy's advice on plans is not a fuzz result)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        try:
            result = run_job(job, lambda data: conn.send(("note", data)))
            conn.send(("done", result))
        except BaseException:  # a bug of the driver itself: reported, the worker goes on
            conn.send(("error", traceback.format_exc()))


class Worker:
    """One child process running jobs; `submit` a job, then `poll` it until it has an outcome."""

    def __init__(self, run_job):
        self.run_job = run_job
        self.proc = None
        self.conn = None
        self.job = None
        self.deadline = None
        self.notes: list = []
        self.jobs = 0  # jobs run by the current process

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.run_job), daemon=True)
        self.proc.start()
        child.close()

    @property
    def busy(self) -> bool:
        return self.job is not None

    def submit(self, job, timeout: float) -> None:
        if self.proc is not None and self.jobs >= RECYCLE_AFTER:
            self.kill()  # (its memory holds every library it loaded)
        if self.proc is None or not self.proc.is_alive():
            self._start()
            self.jobs = 0
        self.jobs += 1
        self.job, self.notes = job, []
        self.deadline = time.monotonic() + timeout
        self.conn.send(job)

    def poll(self) -> Optional[tuple]:
        """The job's outcome once it has one: ("done", result), ("hang", seconds),
        ("crash", exit status or -signal) or ("error", traceback); else None."""
        while self.conn.poll():
            try:
                kind, data = self.conn.recv()
            except (EOFError, OSError):
                return self._finish(("crash", self._exit_status()))
            if kind == "note":
                self.notes.append(data)
                continue
            return self._finish((kind, data))
        if not self.proc.is_alive():
            return self._finish(("crash", self._exit_status()))
        if time.monotonic() > self.deadline:
            self.kill()
            return self._finish(("hang", None))
        return None

    def _finish(self, outcome):
        self.job = None
        return outcome

    def _exit_status(self) -> int:
        self.proc.join(5)
        code = self.proc.exitcode
        self.kill()
        return code if code is not None else -1

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.is_alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.join(10)
        self.conn.close()
        self.proc = None

    def call(self, job, timeout: float) -> tuple:
        """Run one job to its outcome (blocking)."""
        self.submit(job, timeout)
        while True:
            wait([self.conn, self.proc.sentinel], timeout=max(0.0, min(1.0, self.deadline - time.monotonic())))
            out = self.poll()
            if out is not None:
                return out


def wait_any(workers, timeout: float) -> None:
    """Sleep until one of the busy workers has something to say, dies, or `timeout` passes."""
    busy = [w for w in workers if w.busy]
    if not busy:
        return
    until = min(w.deadline for w in busy) - time.monotonic()
    handles = [w.conn for w in busy] + [w.proc.sentinel for w in busy]
    wait(handles, timeout=max(0.0, min(timeout, until)))
