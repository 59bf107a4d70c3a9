"""Building one variant of a tuning problem (source, args, grid) into artifacts a measuring process
loads, and the records of builds that failed. Runs in a building process: a forked child
(`isolate`) or an executor worker's building process (`runner`), never in the caller itself.
"""
from __future__ import annotations

import socket
import sys
import threading
import time
import traceback

from ..nest.parameters import Parameter
from ..package.package import Package
from ..paths import cache_dir
from .data import argument_specs

# accpy's parameter values are process state: builds in threads of one process take turns
_BUILD_LOCK = threading.Lock()


def host_name() -> str:
    """The name of the machine a task runs on (measurements are serialized per host)."""
    return socket.gethostname()


def where() -> dict:
    """The machine (and, on a Dask cluster, the worker) running this task."""
    out = {"host": host_name()}
    if "distributed" in sys.modules:  # (a Dask worker has imported it: importing it here costs a second)
        try:
            from distributed import get_worker

            out["worker"] = get_worker().address
        except (ImportError, ValueError):
            pass
    return out


def _error_text(e: BaseException) -> str:
    lines = traceback.format_exception_only(type(e), e)
    return "".join(lines).strip()[-1500:]


def is_plan_function(source) -> bool:
    """True for a function of the parameters (not a Nest, Schedule or Plan)."""
    return callable(source) and not hasattr(source, "create_plan") and not hasattr(source, "realize")


def _plan_and_args(source, args, params: dict):
    """The variant's plan and arguments: source(**params) for a function, else the plan itself."""
    if is_plan_function(source):
        made = source(**{(k.name if isinstance(k, Parameter) else k): v for k, v in params.items()})
        if isinstance(made, tuple) and len(made) == 2:
            return made[0], made[1], None
        if args is None:
            raise ValueError("source: the function returned a plan without its arguments; return (plan, args) "
                             "or pass args=")
        return made, args, None
    return source, args, params


def _artifact(lib, key: str, function: str, infos) -> dict:
    import hashlib

    hat, so = lib.files["hat"].read_text(), lib.files["shared"].read_bytes()
    # named by content: a measuring process never confuses two builds of one variant
    digest = hashlib.sha256(hat.encode() + so).hexdigest()[:24]
    return {"key": digest, "variant": key, "name": lib.name, "function": function, "hat": hat, "lib": so,
            "lib_file": lib.files["shared"].name, "args": argument_specs(infos)}


def build_timed_out(build_timeout) -> dict:
    """The record of a build stopped at `build_timeout` seconds."""
    return {"status": "timeout", "stage": "build",
            "error": f"the build took longer than build_timeout={build_timeout:g} s (it was stopped)"}


def build_crashed(text: str) -> dict:
    """The record of a build whose process died (`text`: how, e.g. 'the building process died (signal SIGSEGV)')."""
    return {"status": "crashed", "stage": "build", "error": text}


def build_problem_variant(problem: tuple, index: int, key: str, want_reference: bool) -> dict:
    """Build variant `index` of `problem` (source, args, grid); returns its artifacts or the error as a record."""
    t0 = time.perf_counter()
    rec = {"key": key, **where()}
    try:
        source, args, grid = problem
        params = grid[index]
        with _BUILD_LOCK:
            plan, fargs, pkg_params = _plan_and_args(source, args, params)
            out = cache_dir() / "tune" / "build"
            pkg = Package()
            fn = pkg.add(plan, args=fargs, base_name="variant", parameters=pkg_params)
            lib = pkg.build(f"v{key}", output_dir=out / key, python_module=False, progress=False)
            rec["artifact"] = _artifact(lib, key, fn.name, fn.infos)
            if want_reference:
                # the same logic in its default order, on the host CPU: the oracle of the check
                ref = Package()
                default = fn.plan.schedule.default_schedule()
                rfn = ref.add(default, args=fargs, base_name="reference", parameters=pkg_params)
                rlib = ref.build(f"r{key}", output_dir=out / key, python_module=False, progress=False)
                rec["reference"] = _artifact(rlib, key, rfn.name, rfn.infos)
    except Exception as e:  # recorded with the variant, not fatal to the tuning
        rec.update(status="build_error", stage="build", error=_error_text(e))
        return rec
    rec.update(status="built", build_seconds=round(time.perf_counter() - t0, 3))
    return rec
