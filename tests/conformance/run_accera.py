#!/usr/bin/env python3
"""Accera conformance: run Accera's own test programs (from its PyPI wheel) and, given a checkout
of Accera's repository, its documentation examples, unchanged, through the translation-only shim
in tests/conformance/accera_shim, and write RESULTS.md and a JSON file of per-program outcomes.

    python tests/conformance/run_accera.py [--docs ACCERA_CHECKOUT] [-j 2] [--timeout 180]

Nothing of Accera's is kept in the repository: the wheel is downloaded with pip into
~/.cache/accpy-conformance (ACCPY_CONFORMANCE_CACHE) on the first run.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from accera_programs import Program, collect_docs, collect_tests  # noqa: E402
import accera_report  # noqa: E402

WHEEL_VERSION = "1.2.29"
SHIM = HERE / "accera_shim"
WORKER = HERE / "_worker.py"
RESTART_EVERY = 40  # jobs per worker process (bounds what one test's leftovers can do to later ones)


class WheelUnavailable(RuntimeError):
    """Accera's wheel could not be downloaded (no access to PyPI)."""


def cache_root() -> Path:
    return Path(os.environ.get("ACCPY_CONFORMANCE_CACHE") or Path.home() / ".cache" / "accpy-conformance")


def ensure_wheel(version: str = WHEEL_VERSION, cache: Path | None = None) -> Path:
    """The `accera` folder of Accera's wheel (its tests and samples only), downloaded once with pip."""
    dest = (cache or cache_root()) / f"accera-{version}"
    if (dest / "accera" / "test" / "smoke_tests.py").exists():
        return dest / "accera"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", f"accera=={version}", "--no-deps", "--python-version", "3.10",
               "--only-binary=:all:", "-d", tmp, "-q"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("accera-*.whl"))
        if r.returncode != 0 or not wheels:
            raise WheelUnavailable(f"pip download accera=={version} failed: {(r.stderr or r.stdout).strip()[-500:]}")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as z:
            for member in z.namelist():
                if member.endswith(".py") and member.startswith(("accera/test/", "accera/samples/")):
                    z.extract(member, unpacked)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(unpacked, dest)
    return dest / "accera"


def worker_environment(wheel: Path, log: Path) -> dict:
    env = dict(os.environ)
    paths = [str(SHIM)]
    try:
        import cpuinfo  # noqa: F401  (py-cpuinfo, which Accera's test_utils imports)
    except ImportError:
        paths.append(str(SHIM / "fallback"))
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["ACCERA_WHEEL_DIR"] = str(wheel)
    env["ACCPY_CONFORMANCE_LOG"] = str(log)
    env.setdefault("OMP_NUM_THREADS", "2")
    return env


class Worker:
    """One worker process; killed (with its process group: compilers included) on a timeout."""

    def __init__(self, env: dict, workdir: Path):
        self.env, self.workdir, self.proc, self.jobs = env, workdir, None, 0

    def start(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     cwd=self.workdir, env=self.env, text=True, start_new_session=True)
        self.jobs = 0
        ready = self._read(120)
        if not ready or "ready" not in ready:
            raise RuntimeError(f"conformance worker did not start: {ready}")

    def _read(self, timeout: float):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        line = self.proc.stdout.readline()
        if not line:
            return {"eof": True}
        return json.loads(line)

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def run(self, job: dict, timeout: float) -> dict:
        if self.proc is None or self.jobs >= RESTART_EVERY:
            self.stop()
            self.start()
        self.jobs += 1
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        out = self._read(timeout)
        seconds = round(time.perf_counter() - t0, 2)
        if out is None:
            self.stop()
            return {"outcome": "timeout", "error": f"Timeout: no result within {timeout:g} s", "seconds": seconds}
        if out.get("eof"):
            code = self.proc.wait()
            self.proc = None
            why = f"signal {-code}" if code < 0 else f"exit status {code}"
            return {"outcome": "crash", "error": f"Crash: the worker process died ({why})", "seconds": seconds}
        out["seconds"] = seconds
        if out["outcome"] not in ("pass", "skipped", "xfail", "xpass"):
            self.stop()  # a fresh process for the next program
        return out


def run_programs(programs: list[Program], wheel: Path, jobs: int, timeout: float, scratch: Path,
                 progress: bool = True) -> dict:
    """Outcomes by program id, running in-scope programs on `jobs` worker processes."""
    todo: queue.Queue = queue.Queue()
    for p in programs:
        todo.put(p)
    results, lock, total, t0 = {}, threading.Lock(), len(programs), time.perf_counter()

    def loop(n: int):
        w = Worker(worker_environment(wheel, scratch / f"worker{n}.log"), scratch / f"work{n}")
        try:
            while True:
                try:
                    p = todo.get_nowait()
                except queue.Empty:
                    return
                out = w.run(dict(p.job(), id=p.id), timeout)
                with lock:
                    results[p.id] = out
                    if progress:
                        print(f"[{len(results)}/{total} {time.perf_counter() - t0:.0f}s] {out['outcome']:12} {p.id}"
                              f"{'  ' + out.get('error', '')[:120] if out.get('error') else ''}", file=sys.stderr)
        finally:
            w.stop()

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def select_programs(programs: list[Program], pattern: str | None, every: int | None) -> list[Program]:
    chosen = [p for p in programs if p.in_scope and (not pattern or pattern in p.id)]
    if every and every > 1:
        chosen = chosen[::every]
    return chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, help="a checkout of github.com/microsoft/Accera (its docs/ folder is read)")
    ap.add_argument("--wheel-dir", type=Path, help="an unpacked wheel's `accera` folder (default: download it)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--timeout", type=float, default=180, help="seconds per program (default 180)")
    ap.add_argument("-k", dest="pattern", help="only programs whose id contains this text")
    ap.add_argument("--every", type=int, help="only every n-th in-scope program (a representative part)")
    ap.add_argument("--results", type=Path, help="the Markdown report (default: tests/conformance/RESULTS.md "
                                                 "for a whole run, the cache folder otherwise)")
    ap.add_argument("--json", type=Path, help="per-program outcomes (default: beside the report, accera_results.json)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no line per program")
    ap.add_argument("--gpu", action="store_true",
                    help="measure the GPU programs instead (run on the OpenCL device, each GPU function checked "
                         "in DEBUG mode; report RESULTS_GPU.md)")
    args = ap.parse_args(argv)

    try:
        wheel = args.wheel_dir or ensure_wheel()
    except WheelUnavailable as e:
        print(f"run_accera: {e}", file=sys.stderr)
        return 2
    programs = collect_tests(wheel / "test", gpu=args.gpu)
    if args.docs:
        programs += collect_docs(args.docs, gpu=args.gpu)
    chosen = select_programs(programs, args.pattern, args.every)
    whole = not args.pattern and not args.every
    report_name = "RESULTS_GPU.md" if args.gpu else "RESULTS.md"
    report = args.results or (HERE / report_name if whole else cache_root() / "last_run" / report_name)
    out_json = args.json or report.with_name("accera_results_gpu.json" if args.gpu else "accera_results.json")
    scratch = Path(tempfile.mkdtemp(prefix="accera-conformance-", dir=cache_root()))
    t0 = time.perf_counter()
    try:
        results = run_programs(chosen, wheel, args.jobs, args.timeout, scratch, progress=not args.quiet)
    finally:
        logs = sorted(scratch.glob("worker*.log"))
        keep = cache_root() / "last_run"
        keep.mkdir(parents=True, exist_ok=True)
        for log in logs:
            shutil.copy(log, keep / log.name)
        shutil.rmtree(scratch, ignore_errors=True)
    summary = accera_report.summarize(programs, chosen, results)
    meta = accera_report.run_metadata(wheel, args, time.perf_counter() - t0, whole)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(accera_report.markdown(summary, meta))
    out_json.write_text(json.dumps({"meta": meta, "summary": summary["counts"], "programs": summary["rows"]},
                                   indent=1, default=str) + "\n")
    c = summary["counts"]
    print(f"run_accera: {c['pass']} of {c['measured']} in-scope programs pass ({c['pass_rate']:.1%}); "
          f"wrong results: {c['wrong_result']}; report: {report}", file=sys.stderr)
    return 1 if c["wrong_result"] else 0


if __name__ == "__main__":
    sys.exit(main())
