"""Compile latency: seconds from a defined schedule to a callable, for hello_matmul's schedule.

    python benchmarks/compile_latency.py [--runs 5] [--json] [--strict]

Two phases, each measured in FRESH processes (one per run; the median is reported):
  cold    an empty build cache (a new ACCPY_CACHE_DIR per run): lowering, C emission, gcc,
          loading the library;
  cached  a build-cache hit (the cache filled by one unmeasured warm-up run; a fresh
          output directory per run): lowering, C emission, cache lookup, copies, loading.

Inside each process the schedule is defined first (samples/hello_matmul.py's
`define_schedule`), then the clock runs over `Package()` + `add` + `build` + getting the
function: "schedule -> callable". Interpreter start-up is not in it; `import accpy` (with
numpy) is timed separately and reported as its own column, and so is the import of the
modules `build` would load on first use (lowering passes, code generator, binder), which
the child loads before starting the clock. The first call of the function
is reported separately too.

The package's pybind11 module is built in a background thread, not on the path to the
callable; its build time is reported anyway (cold: a g++ run; cached: a cache hit).

Output: a table, PASS/FAIL against the targets (cold < 1.5 s, cache hit < 50 ms), then one
JSON object per line per phase (keys: kernel, phase, seconds_median, seconds_runs,
gcc_share, pybind11_seconds, ...). Exit status 0, or 1 with --strict when a target fails.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "hello_matmul.py"
KERNEL = "hello_matmul"
TARGETS = {"cold": 1.5, "cached": 0.050}  # seconds, schedule -> callable (median)
LAZY_MODULES = ("accpy.lower", "accpy.codegen.c", "accpy.analysis.polyhedra", "accpy.ir.printer",
                "accpy.package.pymodule", "accpy.plan.plan")


# --------------------------------------------------------------------------- child process
def child(output_dir: str) -> None:
    """One measurement, in a fresh interpreter; prints one JSON line."""
    t = time.perf_counter()
    import numpy as np

    import accpy  # noqa: F401  (the import is what is timed)

    import_seconds = time.perf_counter() - t

    # modules `build` would import on first use (lowering passes, codegen, the binder):
    # loaded here so that the schedule -> callable figure holds no Python import time
    import importlib

    t = time.perf_counter()
    for name in LAZY_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from accpy.package.loader import get_binder

    get_binder()
    lazy_import_seconds = time.perf_counter() - t

    import importlib.util

    spec = importlib.util.spec_from_file_location("hello_matmul_sample", SAMPLE)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)  # type: ignore[union-attr]

    t = time.perf_counter()
    schedule, args = sample.define_schedule()
    define_seconds = time.perf_counter() - t

    # ---- schedule -> callable
    t0 = time.perf_counter()
    lib = sample.build(schedule, args, output_dir)
    fn = lib.matmul
    callable_seconds = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    a = rng.random((sample.M, sample.K), dtype=np.float32)
    b = rng.random((sample.K, sample.N), dtype=np.float32)
    c = np.zeros((sample.M, sample.N), dtype=np.float32)
    t = time.perf_counter()
    fn(a, b, c)
    first_call_seconds = time.perf_counter() - t
    correct = bool(np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4))

    # ---- the background pybind11 module
    t = time.perf_counter()
    module = lib.python_module()
    waited = time.perf_counter() - t
    module_ready = time.perf_counter() - t0
    timings = dict(lib.timings)
    print(json.dumps({
        "schedule_to_callable": callable_seconds,
        "import_seconds": import_seconds,
        "lazy_import_seconds": lazy_import_seconds,
        "define_seconds": define_seconds,
        "first_call_seconds": first_call_seconds,
        "correct": correct,
        "emit": timings.get("emit"),
        "gcc": timings.get("gcc"),
        "cache_hit": timings.get("cache_hit"),
        "compile_total": timings.get("compile_total"),
        "build_total": timings.get("total"),
        "pybind11": timings.get("pybind11"),
        "pybind11_cache_hit": timings.get("pybind11_cache_hit"),
        "pybind11_waited": waited,
        "module_ready_after": module_ready,
        "module": module.__name__,
    }))


# -------------------------------------------------------------------------- parent process
def run_child(cache_dir: Path, output_dir: Path) -> dict:
    env = dict(os.environ)
    env["ACCPY_CACHE_DIR"] = str(cache_dir)
    env.pop("ACCPY_DEBUG_LOWER", None)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(output_dir)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"the measuring process failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["process_wall_seconds"] = wall
    if not r["correct"]:
        raise SystemExit("the built function gave a wrong result; latency figures would be meaningless")
    return r


def median(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def summarize(phase: str, rows: list) -> dict:
    secs = [r["schedule_to_callable"] for r in rows]
    med = statistics.median(secs)
    gcc_med = median(rows, "gcc") or 0.0
    shares = [(r["gcc"] or 0.0) / r["schedule_to_callable"] for r in rows]
    return {
        "kernel": KERNEL,
        "phase": phase,
        "seconds_median": med,
        "seconds_runs": secs,
        "target_seconds": TARGETS[phase],
        "pass": med < TARGETS[phase],
        "gcc_seconds_median": gcc_med,
        "gcc_share": statistics.median(shares),
        "emit_seconds_median": median(rows, "emit"),
        "cache_hit": all(bool(r["cache_hit"]) for r in rows),
        "first_call_seconds_median": median(rows, "first_call_seconds"),
        "import_seconds_median": median(rows, "import_seconds"),
        "lazy_import_seconds_median": median(rows, "lazy_import_seconds"),
        "define_seconds_median": median(rows, "define_seconds"),
        "process_wall_seconds_median": median(rows, "process_wall_seconds"),
        "pybind11_seconds": median(rows, "pybind11"),
        "pybind11_seconds_runs": [r["pybind11"] for r in rows],
        "pybind11_cache_hit": all(bool(r["pybind11_cache_hit"]) for r in rows),
        "module_ready_after_seconds_median": median(rows, "module_ready_after"),
        "runs": len(rows),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per phase (default 5)")
    ap.add_argument("--json", action="store_true", help="print only the JSON lines")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--child", metavar="OUTPUT_DIR", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.child:
        child(opts.child)
        return 0
    if opts.runs < 1:
        ap.error("--runs must be >= 1")
    say = (lambda *a, **k: None) if opts.json else (lambda *a, **k: print(*a, **k, flush=True))

    work = Path(tempfile.mkdtemp(prefix="accpy-compile-latency-"))
    results = []
    try:
        say(f"compile latency of {KERNEL} (samples/hello_matmul.py's schedule), "
            f"{opts.runs} fresh processes per phase")
        cold = []
        for r in range(opts.runs):
            cold.append(run_child(work / f"cold-cache-{r}", work / f"cold-out-{r}"))
            say(f"  cold   run {r + 1}: {cold[-1]['schedule_to_callable']:.3f} s "
                f"(pybind11 module {cold[-1]['pybind11']:.1f} s in the background)")
        results.append(summarize("cold", cold))

        shared = work / "cache"
        run_child(shared, work / "warmup-out")  # fills the cache (library and module)
        cached = []
        for r in range(opts.runs):
            cached.append(run_child(shared, work / f"cached-out-{r}"))
            say(f"  cached run {r + 1}: {cached[-1]['schedule_to_callable'] * 1e3:.1f} ms")
        results.append(summarize("cached", cached))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    say("")
    say(f"{'phase':<8}{'schedule->callable':>20}{'gcc':>9}{'gcc share':>11}{'emit':>9}"
        f"{'1st call':>10}{'import accpy':>14}{'+ build modules':>17}{'pybind11 (background)':>26}")
    for s in results:
        pyb = f"{s['pybind11_seconds']:.2f} s ({'cache hit' if s['pybind11_cache_hit'] else 'built'})"
        say(f"{s['phase']:<8}{s['seconds_median'] * 1e3:>17.1f} ms{s['gcc_seconds_median'] * 1e3:>6.0f} ms"
            f"{s['gcc_share'] * 100:>10.0f}%{s['emit_seconds_median'] * 1e3:>6.1f} ms"
            f"{s['first_call_seconds_median'] * 1e3:>7.2f} ms{s['import_seconds_median']:>12.3f} s"
            f"{s['lazy_import_seconds_median']:>15.3f} s{pyb:>26}")
    say("(medians; runs: " + "; ".join(
        f"{s['phase']} " + " ".join(f"{x * 1e3:.0f}" if s['phase'] == 'cold' else f"{x * 1e3:.1f}"
                                    for x in s["seconds_runs"]) + " ms" for s in results) + ")")
    say("")
    labels = {"cold": "cold (empty cache) schedule->callable", "cached": "build-cache hit schedule->callable"}
    for s in results:
        say(f"{'PASS' if s['pass'] else 'FAIL'}  {labels[s['phase']]:<40} {s['seconds_median'] * 1e3:8.1f} ms"
            f"  (target < {s['target_seconds'] * 1e3:.0f} ms)")
    for s in results:
        print(json.dumps(s))
    return 1 if opts.strict and not all(s["pass"] for s in results) else 0


if __name__ == "__main__":
    sys.exit(main())
