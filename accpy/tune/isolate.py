"""Local builds, each in a forked child process of its own (the default executor's builds).

Why a child per build rather than a pool of worker processes: a plan function or compiler
that crashes (SIGSEGV, `os._exit`) or hangs then costs that child only. There is no pool to
break (a pool whose worker died fails every pending build) and nothing to replace or
resubmit; a build past its time limit is killed with its process group (the C compiler's
processes included) and recorded. Forking also hands the child the tuning problem as it is
in this process: plans hold the user's logic functions, which plain pickle cannot send.
A fork costs little next to a build (which runs the C compiler).
"""
from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import sys
import time
from typing import Iterator, Optional

from .runner import exit_text, kill_group
from .building import build_crashed, build_problem_variant, build_timed_out, where


_FATAL = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")


def _default_fatal_signals() -> None:
    """A crash ends the child, whatever handlers the parent installed: a library loaded into the
    parent may catch fatal signals and return (LLVM's, inside an OpenCL runtime such as PoCL: a
    `kill(SIGSEGV)` then ran on), and faulthandler would print a traceback for a crash the record
    already reports."""
    faulthandler.disable()
    for name in _FATAL:
        try:
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        except (AttributeError, OSError, ValueError):
            pass


def _child(problem: tuple, index: int, key: str, want_reference: bool, fd: int) -> None:
    """In the forked child: build, send the record, and leave without running the parent's exit handlers."""
    code = 0
    try:
        try:
            os.setpgid(0, 0)  # its own process group (the parent sets it too: whichever runs first)
        except OSError:
            pass
        _default_fatal_signals()
        data = memoryview(pickle.dumps(build_problem_variant(problem, index, key, want_reference),
                                       protocol=pickle.HIGHEST_PROTOCOL))
        while data:
            data = data[os.write(fd, data):]
    except SystemExit as e:  # the plan function called sys.exit: its code, as if the process had ended
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: B036  (nothing may escape into the parent's code)
        code = 70
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


class _Build:
    def __init__(self, index: int, key: str, pid: int, fd: int, deadline: Optional[float]):
        self.index, self.key, self.pid, self.fd, self.deadline = index, key, pid, fd, deadline
        self.chunks: list = []

    def end(self, killed: bool) -> int:
        """Stop (if `killed`) and reap the child; the wait status as a return code."""
        if killed:
            kill_group(self.pid)
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        kill_group(self.pid)  # anything of its group still running (a compiler it started)
        return os.waitstatus_to_exitcode(status)


def _start(problem: tuple, index: int, key: str, want_reference: bool, timeout: Optional[float]) -> _Build:
    r, w = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # the child must not print the parent's buffered output again
        try:
            stream.flush()
        except Exception:
            pass
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(problem, index, key, want_reference, w)
    os.close(w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    return _Build(index, key, pid, r, None if timeout is None else time.monotonic() + timeout)


# what a build imports on first use, imported before forking so that children do not each import it
_WARM = ("z3", "accpy.lower", "accpy.plan.lowering", "accpy.package.calls", "accpy.tune.data")


def _warm() -> None:
    import importlib

    for name in _WARM:
        try:
            importlib.import_module(name)
        except ImportError:  # (a module renamed: its children import it, as before)
            pass


def build_in_children(problem: tuple, jobs: list, want_reference: bool, build_timeout: Optional[float],
                      width: Optional[int] = None) -> Iterator[tuple]:
    """Build `jobs` ([(index, key)] of variants of `problem`), at most `width` at once (default: one
    per core), each in its own child process; yields (index, record) as each ends: built,
    build_error, crashed (with the signal or exit code) or timeout (past `build_timeout` s, None: no limit)."""
    width = width or os.cpu_count() or 1
    _warm()
    waiting = list(jobs)
    running: dict = {}  # fd -> _Build
    try:
        while waiting or running:
            while waiting and len(running) < width:
                index, key = waiting.pop(0)
                b = _start(problem, index, key, want_reference, build_timeout)
                running[b.fd] = b
            deadlines = [b.deadline for b in running.values() if b.deadline is not None]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            ready, _, _ = select.select(list(running), [], [], wait)
            for fd in ready:
                b = running[fd]
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    b.chunks.append(chunk)
                    continue
                del running[fd]  # end of file: the child exited (or died)
                code = b.end(killed=False)
                rec = None
                if code == 0 and b.chunks:
                    try:
                        rec = pickle.loads(b"".join(b.chunks))
                    except Exception:
                        rec = None
                if rec is None:
                    rec = {**build_crashed(f"the building process died ({exit_text(code)})"), "key": b.key, **where()}
                yield b.index, rec
            now = time.monotonic()
            for fd, b in list(running.items()):
                if b.deadline is not None and now >= b.deadline:
                    del running[fd]
                    b.end(killed=True)
                    yield b.index, {**build_timed_out(build_timeout), "key": b.key, **where()}
    finally:  # the caller stopped early (an exception, ^C): no child outlives it
        for b in running.values():
            b.end(killed=True)
