"""What the samples share: numpy's BLAS on one thread, where their files go, and honest timing lines.

Import it before numpy (`import sample_support` first, then numpy): on import it sets
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS to 1 unless the environment already sets them. numpy
only checks results in the samples; an idle BLAS thread left spinning by a numpy matmul competes
with the kernels being timed (measured on 2 cores: a 2-thread kernel 1.3-23x slower right after a
numpy matmul). If numpy was imported before this module, the variables come too late for its
BLAS, so the thread count of an already loaded OpenBLAS is set directly.

OMP_NUM_THREADS is left alone: it would reach numpy's BLAS only where that is built on OpenMP
(numpy's wheels use OpenBLAS's own threads), and it changes accpy's parallel kernels. They still
start the threads they name (`num_threads(...)`), but with OMP_NUM_THREADS=1 a 2-thread sgemm
(samples/optimized_matmul.py, 512^3) ran at 9.6-11.2 GFLOP/s against 16.8 without it (medians of
5 processes taking turns, on 2 cores shared with other work).
"""
from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import time
from pathlib import Path

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: what a sample prints instead of a speed when its kernel runs on a functional model
NOT_TIMED = "functional model, not timed"

#: the help text of every sample's --output-dir
OUTPUT_HELP = "where the files go (default: a folder under the system's temporary directory)"


def _loaded_openblas_threads(n: int) -> bool:
    """Set the thread count of an OpenBLAS already loaded in this process; False if none is."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})
    except OSError:
        return False
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads", "openblas_set_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                return True
    return False


def one_blas_thread() -> None:
    """numpy's BLAS on one thread (see the module's text); the environment's own settings win."""
    preset = os.environ.get("OPENBLAS_NUM_THREADS")
    for var in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(var, "1")
    if "numpy" in sys.modules and preset is None:
        _loaded_openblas_threads(1)


one_blas_thread()


def output_dir(sample: str, given=None) -> Path:
    """Where a sample writes its files: `given` (its --output-dir), else a folder of the system's
    temporary directory (never the repository). The folder is created."""
    if given:
        path = Path(given)
    else:
        user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
        path = Path(tempfile.gettempdir()) / f"accpy_samples_{user}" / sample
    path.mkdir(parents=True, exist_ok=True)
    return path


def functional_model(target) -> str:
    """What model runs `target`'s tensor code ("" when it is the hardware itself): Gemmini always
    runs on accpy's functional model; the x86 tile unit does where the target asks for it (a CPU
    without AMX: `acc.Target.HOST(extra=(("x86tile", "emulate"),))`)."""
    if getattr(target, "family", "") == "Gemmini":
        return "Gemmini's functional model"
    if target.get("x86tile") == "emulate":
        return "the x86 tile unit's functional model"
    return ""


def not_timed(model: str) -> str:
    """The sentence a sample prints instead of a speed or a ratio when its kernel ran on `model`."""
    return f"{NOT_TIMED} (it ran on {model}: its results are checked; its wall time says nothing of the hardware)"


def median_seconds(fn, repeat: int = 7) -> float:
    """The median of `repeat` timed calls of `fn`, after one untimed call (page faults, caches)."""
    if repeat < 1:
        raise ValueError(f"repeat: expected a positive number of calls, got {repeat}")
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def outputs_match(lib, names, inputs, out0, want, tol: float, against: str = "numpy") -> bool:
    """Call each function `names` of `lib` on `inputs` and a fresh copy of `out0` (its last argument,
    updated in place), print its largest error relative to `want`, and say whether every one is
    within `tol` (printing MISMATCH at the first that is not)."""
    import numpy as np  # here: this module sets numpy's BLAS threads before numpy loads

    for name in names:
        out = out0.copy()
        getattr(lib, name)(*inputs, out)
        err = np.abs(out - want).max() / max(np.abs(want).max(), 1.0)
        print(f"{name}: max relative error vs {against}: {err:.2e}")
        if not err < tol:
            print("MISMATCH")
            return False
    return True


def interleaved_medians(contenders: dict, repeat: int = 7) -> dict:
    """{name: median seconds} of each callable of `contenders`, the calls taking turns, so that
    drift in the machine's speed (other tenants, clocks) hits them alike."""
    if repeat < 1:
        raise ValueError(f"repeat: expected a positive number of calls, got {repeat}")
    times = {name: [] for name in contenders}
    for fn in contenders.values():
        fn()
    for _ in range(repeat):
        for name, fn in contenders.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: sorted(v)[len(v) // 2] for name, v in times.items()}


def ratio_sentence(ours: str, seconds: float, theirs: str, their_seconds: float) -> str:
    """'<ours> is 1.85x faster than <theirs>', '<ours> is as fast as <theirs> (1.02x)' (less than
    3% faster) or '<ours> is slower than <theirs>: 0.48x its speed'."""
    r = their_seconds / seconds
    if r >= 1.03:
        return f"{ours} is {r:.2f}x faster than {theirs}"
    if r >= 1:
        return f"{ours} is as fast as {theirs} ({r:.2f}x)"
    return f"{ours} is slower than {theirs}: {r:.2f}x its speed"
