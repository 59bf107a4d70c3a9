"""The sanitizer pass of a fuzz run: generated kernels rebuilt from their C source under
AddressSanitizer and UndefinedBehaviorSanitizer (the flags of tests/test_sanitizers.py), called
from a C driver with exactly-sized heap buffers (tests/abi/driver.py), their results compared
with the reference evaluator. A chunk that fails is rebuilt case by case to name the case."""
from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import accpy as acc
from support import schedgen as sg

RUN_TIMEOUT = 120  # seconds for one driver run (it runs every kernel of the chunk once)


def flags() -> list:
    from test_sanitizers import SAN_FLAGS

    return list(SAN_FLAGS)


def unavailable(tmp: Path):
    """Why sanitized builds cannot run here, or None."""
    if shutil.which("gcc") is None:
        return "gcc is not installed"
    from test_sanitizers import _sanitizers_available

    tmp.mkdir(parents=True, exist_ok=True)
    if not _sanitizers_available(tmp):
        return "gcc cannot link -fsanitize=address,undefined here (libasan/libubsan missing)"
    return None


def _run_chunk(cases, work: Path):
    """None when every case of `cases` runs clean and right under the sanitizers, else a message."""
    from abi.driver import read_results, write_driver
    from test_sanitizers import REPORT_MARKERS

    pkg = acc.Package()
    calls = []
    for n, case in enumerate(cases):
        state = sg.realize(case)
        f = pkg.add(state.plan, args=state.args, base_name=f"case{n}")
        inputs = sg.make_inputs(state, case.seed)
        want = sg.reference_outputs(state, inputs)
        values = {info.name: v for info, v in zip(f.infos, inputs)}
        calls.append((state, f, inputs, want, values))
    out = work / "src"
    name = "fuzzsan"
    pkg.build(name, format=acc.Package.Format.HAT_SOURCE, output_dir=out, progress=False)
    meta = tomllib.loads((out / f"{name}.hat").read_text())
    drv = work / "drv"
    drv.mkdir(parents=True, exist_ok=True)
    driven = [(f.name, f.infos, values) for _, f, _, _, values in calls]
    driver = write_driver(drv, name, driven)
    exe = drv / "driver"
    cmd = ["gcc", *flags(), f"-I{out}", str(out / f"{name}.c"), str(driver), "-o", str(exe), "-lm"]
    if meta["dependencies"]["dynamic"]:
        cmd.insert(1, "-fopenmp")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return f"compiling under sanitizers failed:\n{' '.join(cmd)}\n{p.stderr[-4000:]}"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT)
    if "LeakSanitizer has encountered a fatal error" in r.stderr:  # (under ptrace: no leak checks)
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0:halt_on_error=1"
        r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT)
    reports = [m for m in REPORT_MARKERS if m in r.stderr]
    if r.returncode != 0 or reports:
        return f"the driver exited with {r.returncode} ({', '.join(reports) or 'no sanitizer report'}):\n" \
               f"{r.stderr[-4000:]}"
    for (state, f, inputs, want, _), res in zip(calls, read_results(drv, driven)):
        got = [res.get(info.name, x) for info, x in zip(f.infos, inputs)]
        diff = sg.compare(state, got, want)
        if diff:
            return f"under sanitizers the result differs from the reference: {diff}"
    return None


def sanitize_cases(cases, out_dir) -> dict:
    """{"cases": n checked, "skipped": reason or None, "failures": [(case, message)]}."""
    out_dir = Path(out_dir)
    why = unavailable(out_dir / "probe")
    if why:
        return {"cases": 0, "skipped": why, "failures": []}
    cases = [c for c in cases if _runnable(c)]
    msg = _run_chunk(cases, out_dir / "all") if cases else None
    failures = []
    if msg is not None:  # name the case (or cases)
        for n, case in enumerate(cases):
            one = _run_chunk([case], out_dir / f"one{n}")
            if one is not None:
                failures.append((case, one))
        if not failures:
            failures.append((cases[0], "only the whole chunk fails: " + msg))
    return {"cases": len(cases), "skipped": None, "failures": failures}


def _runnable(case) -> bool:
    """Cases whose arrays are all non-empty (the C driver passes exactly-sized heap buffers)."""
    try:
        state = sg.realize(case)
        return all(getattr(x, "size", 1) > 0 for x in sg.make_inputs(state, case.seed))
    except Exception:
        return False
