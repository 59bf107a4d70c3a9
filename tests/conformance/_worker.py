"""A conformance worker: reads jobs (one JSON object a line) on stdin, runs each (a test method of
Accera's, or a documentation program) through the shim, and writes one JSON outcome a line on the
stdout it was started with. The programs' own output goes to the file named by ACCPY_CONFORMANCE_LOG."""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
import unittest

OUTCOMES = ("pass", "fail", "error", "wrong_result", "skipped", "xfail", "xpass")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ").strip()


def _is_wrong_result(exc: BaseException, tb) -> bool:
    """A value mismatch: the shim's WrongResult, accpy's DEBUG-mode comparison, or an assertion
    raised inside numpy.testing (a test's own comparison with numpy)."""
    if type(exc).__name__ == "WrongResult":
        return True
    if "differs from the reference (unscheduled) result" in str(exc):
        return True
    if isinstance(exc, AssertionError):
        for frame, _ in traceback.walk_tb(tb):
            if "numpy/testing" in frame.f_code.co_filename.replace("\\", "/"):
                return True
    return False


def classify_error(err) -> dict:
    etype, exc, tb = err
    kind = "wrong_result" if _is_wrong_result(exc, tb) else ("fail" if isinstance(exc, AssertionError) else "error")
    frames = traceback.extract_tb(tb)
    where = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frames)
                  if "/accera/test/" in f.filename.replace("\\", "/") or f.filename == "<program>"), "")
    return {"kind": kind, "error": first_line(exc), "exc_type": etype.__name__, "where": where,
            "traceback": "".join(traceback.format_exception(etype, exc, tb))[-1500:]}


class _Result(unittest.TestResult):
    """Keeps the exception objects (unittest keeps only formatted tracebacks)."""

    def __init__(self):
        super().__init__()
        self.outcome = {"outcome": "pass"}

    def addError(self, test, err):
        if self.outcome["outcome"] == "pass":
            c = classify_error(err)
            self.outcome = {"outcome": c.pop("kind")} | c

    addFailure = addError

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self.addError(test, err)

    def addSkip(self, test, reason):
        self.outcome = {"outcome": "skipped", "error": str(reason).strip().splitlines()[-1] if reason else ""}

    def addExpectedFailure(self, test, err):
        c = classify_error(err)
        self.outcome = {"outcome": "xfail", "xfail_kind": c.pop("kind")} | c

    def addUnexpectedSuccess(self, test):
        self.outcome = {"outcome": "xpass"}


def run_unittest(job: dict) -> dict:
    try:
        module = importlib.import_module(f"accera.test.{job['module']}")
    except BaseException as e:  # the whole file fails to load: every test of it reports this
        c = classify_error(sys.exc_info())
        return {"outcome": "error", "error": f"importing {job['module']}: {first_line(e)}"} | \
            {k: v for k, v in c.items() if k not in ("kind", "error")}
    cls = getattr(module, job["cls"])
    method = getattr(cls, job["method"])
    case = cls(job["method"])
    result = _Result()
    case.run(result)
    out = result.outcome
    out["accera_xfail"] = bool(getattr(method, "__unittest_expecting_failure__", False))
    return out


def run_program(job: dict) -> dict:
    """Run a documentation program; a script's folder is on the import path while it runs (its
    sibling modules, imported fresh for each program)."""
    namespace = {"__name__": "__main__", "__file__": job["path"]}
    folder = job.get("folder") or ""
    before = set(sys.modules)
    if folder:
        sys.path.insert(0, folder)
    try:
        exec(compile(job["source"], "<program>", "exec"), namespace)
    except BaseException:
        c = classify_error(sys.exc_info())
        return {"outcome": c.pop("kind")} | c
    finally:
        if folder:
            sys.path.remove(folder)
            for name in set(sys.modules) - before:
                if os.path.dirname(getattr(sys.modules[name], "__file__", None) or "") == folder:
                    del sys.modules[name]
    return {"outcome": "pass"}


def _clear_directory(path: str) -> None:
    import shutil

    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


def main():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    log = open(os.environ.get("ACCPY_CONFORMANCE_LOG", os.devnull), "a", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        job = json.loads(line)
        print(f"\n===== {job.get('id')}", flush=True)
        _clear_directory(os.getcwd())  # the previous program's outputs
        try:
            out = run_unittest(job) if job["kind"] == "unittest" else run_program(job)
        except BaseException as e:  # the runner's own failure, reported, not fatal
            out = {"outcome": "error", "error": f"conformance worker: {first_line(e)}",
                   "traceback": traceback.format_exc()[-1500:]}
        out["id"] = job.get("id")
        proto.write(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    main()
