"""`acc.tune`: build every variant of a parameter grid, check each once, measure, keep the fastest.

Work runs on a `concurrent.futures.Executor` (local processes by default) or a Dask
`distributed.Client`: builds in parallel, then measurement rounds in which every variant
still in the race takes one sample, in a shuffled order (so that drift in the machine's
speed hits all variants alike), each measurement holding its host's lock.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import hashlib
import inspect
import itertools
import json
import os
import pickle
import random
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

from .objective import Objective, objective_of
from .progress import Progress
from .results import FAILED, ResultsFile, TuneResult, VariantResult, json_value, parameter_name, variant_key
from .search import Exhaustive, Halving, strategy_of
from .tasks import build_problem_variant, build_variant, forget, inherit, is_plan_function, measure_variant


def _is_dask_client(x) -> bool:
    return type(x).__module__.split(".")[0] == "distributed" and hasattr(x, "get_executor")


@contextlib.contextmanager
def _executor_of(executor):
    if executor is None:
        # forked workers inherit the tuning problem (plans hold the user's logic functions,
        # which plain pickle cannot send)
        import multiprocessing

        ex = cf.ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=multiprocessing.get_context("fork"))
        try:
            yield ex
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
    elif _is_dask_client(executor):
        # pure=False: two measurements of one variant are two tasks, not one cached result
        yield executor.get_executor(pure=False)
    elif isinstance(executor, cf.Executor):
        yield executor
    else:
        raise TypeError(f"executor: expected a concurrent.futures.Executor or a dask.distributed.Client, "
                        f"got {type(executor).__name__}")


def _grid_of(grid) -> list:
    """The grid as a list of dicts (a dict of choices gives every combination)."""
    from ..nest.parameters import Parameter, create_parameter_grid

    if isinstance(grid, dict):
        if grid and all(isinstance(k, Parameter) for k in grid):
            return create_parameter_grid(grid)
        for k, v in grid.items():
            if not isinstance(v, (list, tuple, range)) or not len(v):
                raise ValueError(f"grid[{parameter_name(k)!r}]: expected a non-empty list of values, got {v!r}")
        keys = list(grid)
        return [dict(zip(keys, c)) for c in itertools.product(*(list(grid[k]) for k in keys))]
    if isinstance(grid, (list, tuple)) and grid and all(isinstance(p, dict) for p in grid):
        return list(grid)
    raise ValueError("grid: expected a non-empty list of parameter dicts (e.g. from acc.create_parameter_grid) "
                     f"or a dict {{name or parameter: list of values}}, got {grid!r}")


def _label_of(source) -> str:
    if isinstance(source, functools.partial):
        return _label_of(source.func)
    if inspect.isfunction(source) or inspect.ismethod(source):
        return source.__qualname__
    return type(source).__name__.lower()


def _fingerprint(source, args) -> str:
    """What names the tuning problem beyond its label: a plan function's source text, or a plan's
    target and argument signature (editing them invalidates stored results)."""
    if args is None:
        bound = ""
        if isinstance(source, functools.partial):  # the function's text and the values bound to it
            bound = json.dumps([json_value(list(source.args)), {k: json_value(v) for k, v in source.keywords.items()}],
                               sort_keys=True, default=str)
            source = source.func
        try:
            text = inspect.getsource(source)
        except (TypeError, OSError):
            text = ""
        return hashlib.sha256((text + bound).encode()).hexdigest()[:16] if text or bound else ""
    sig = [getattr(source, "target", None) and source.target.describe()]
    for a in args:
        sig.append([str(getattr(a, k, "")) for k in ("name", "role", "element_type", "shape")])
    return hashlib.sha256(json.dumps(sig, default=str).encode()).hexdigest()[:16]


def _installed(mod) -> bool:
    """True for accpy and modules of the standard library or installed packages (workers have them)."""
    import sysconfig

    f = getattr(mod, "__file__", None)
    if f is None or mod.__name__.split(".")[0] == "accpy":
        return True
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(os.path.abspath(f).startswith(os.path.abspath(r) + os.sep) for r in roots)


def _dumps(obj, dask: bool) -> bytes:
    """Pickle the tuning problem; cloudpickle (when present) also takes closures and lambdas."""
    try:
        import cloudpickle
    except ImportError:
        cloudpickle = None
    try:
        if cloudpickle is None:
            return pickle.dumps(obj)
        src = obj[0]
        while isinstance(src, functools.partial):
            src = src.func
        mod = inspect.getmodule(src) if callable(src) else None
        by_value = dask and mod is not None and mod.__name__ != "__main__" and not _installed(mod)
        if by_value:  # Dask workers may not be able to import the user's script
            cloudpickle.register_pickle_by_value(mod)
        try:
            return cloudpickle.dumps(obj)
        finally:
            if by_value:
                cloudpickle.unregister_pickle_by_value(mod)
    except Exception as e:
        raise TypeError(f"source: the plan (or plan function), its arguments and the grid must be picklable to "
                        f"run on an executor: {type(e).__name__}: {e}") from e


def tune(source: Any, args: Optional[tuple] = None, grid: Union[list, dict, None] = None, *,
         objective: Union[Objective, str, None] = None, search: Union[str, Exhaustive, Halving] = "auto",
         executor=None, results_file: Union[str, os.PathLike, None] = None, label: Optional[str] = None,
         repeats: int = 5, warmup: int = 1, min_time: float = 0.05, timeout: float = 60.0,
         check: bool = True, reference: Optional[Callable] = None, tolerance: float = 1e-4,
         data: Optional[Callable] = None, seed: int = 0, retry_failed: bool = False,
         baseline: Optional[dict] = None, progress: bool = True) -> TuneResult:
    """Measure the variants of a parameter grid and return them with the best one.

    source: a Plan (Schedule, Nest) using acc parameters, with `args` and a grid of
        `{parameter: value}` dicts (`acc.create_parameter_grid`); or a function called as
        `source(**values)` for each grid entry (`{name: value}` dicts, or a dict of name ->
        choices) returning `(plan, args)` (or a plan, with `args`).
    objective: what to minimize: wall time per call (default), `"gemmini_cycles"` (the
        Gemmini model's cycles: `accpy.tune.GemminiCycles`) or any `accpy.tune.Objective`.
    search: "auto" (exhaustive up to 64 variants, else halving), "exhaustive", "halving",
        or `accpy.tune.Exhaustive()` / `accpy.tune.Halving(fraction, eta, seed)`.
    executor: a `concurrent.futures.Executor` or a Dask `distributed.Client`; default local
        processes (one per core). Measurements never overlap on one machine.
    results_file: a JSON-lines file; variants already in it (measured or failed) are not
        measured again (`retry_failed=True` retries the failed ones). A variant is named by
        `label`, its parameter values, the plan function's source text and the objective.
    repeats, warmup, min_time: samples per variant (medians are compared), calls before
        measuring, and the least time one sample lasts (it averages enough calls).
    timeout: seconds a variant's measurement may take; past it, it is recorded as a timeout.
    check, reference, tolerance: each variant's outputs are compared once with the
        reference (default: the same logic in its default order, built by accpy; or a
        picklable `reference(*arrays)` updating the outputs in place), floats within
        `tolerance` of the largest magnitude, integers exactly.
    data: a picklable `data(seed) -> values` for the arguments; default random arrays.
    baseline: one grid entry (added to the grid if absent) that every search measures in
        full, never pruned: today's choice, to compare the best with (`result.baseline`).
    """
    t_start = time.perf_counter()
    obj = objective_of(objective)
    for name, v, lo in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    for name, v in (("min_time", min_time), ("timeout", timeout), ("tolerance", tolerance)):
        if not isinstance(v, (int, float)) or v < 0 or (name == "timeout" and v == 0):
            raise ValueError(f"{name}: expected a positive number, got {v!r}")
    if args is not None and not isinstance(args, (tuple, list)):
        raise ValueError("args: give the function's arguments as a tuple, e.g. args=(A, B, C)")
    is_function = is_plan_function(source)
    if not is_function and args is None:
        raise ValueError("args: tuning a plan needs its arguments, e.g. args=(A, B, C)")
    if grid is None:
        raise ValueError("grid: give the parameter values to try (e.g. acc.create_parameter_grid({...}))")
    params_list = _grid_of(grid)
    base_index = None
    if baseline is not None:
        if not isinstance(baseline, dict):
            raise ValueError(f"baseline: expected one grid entry (a dict), got {baseline!r}")
        named = [{parameter_name(k): json_value(v) for k, v in p.items()} for p in params_list]
        want = {parameter_name(k): json_value(v) for k, v in baseline.items()}
        if want in named:
            base_index = named.index(want)
        else:
            params_list.append(dict(baseline))
            base_index = len(params_list) - 1
    label = label or _label_of(source)
    fingerprint = _fingerprint(source, None if is_function else args)
    strategy = strategy_of(search, len(params_list), seed)
    store = ResultsFile(results_file) if results_file is not None else None
    known = store.load() if store is not None else {}
    variants = []
    selected = strategy.select(len(params_list))
    if base_index is not None and base_index not in selected:
        selected = sorted(selected + [base_index])
    for i in selected:
        p = params_list[i]
        values = {parameter_name(k): json_value(v) for k, v in p.items()}
        v = VariantResult(i, variant_key(label, fingerprint, values, obj.name), p, values)
        s = known.get(v.key)
        if s is not None and (s["status"] not in FAILED or not retry_failed):
            for k in ("status", "error", "samples", "calls", "checked", "details", "build_seconds", "host"):
                if k in s:
                    setattr(v, k, s[k])
            if v.status == "built":
                v.status = "pending"  # its library is not kept in the file: build it again
        elif s is not None and store is not None:
            store.append({"key": v.key, "label": label, "params": values, "status": "retry"})
        variants.append(v)
    repeats = 1 if obj.deterministic else repeats
    # the default executor's forked processes inherit the problem: register it before they start
    payload = inherit((source, args, params_list)) if executor is None else None
    bar = Progress(label, progress)
    job_base = {"objective": obj, "warmup": warmup, "min_time": min_time, "timeout": timeout,
                "reference_timeout": max(600.0, 10 * timeout), "seed": seed, "data": data,
                "tolerance": tolerance}
    want_reference = check and reference is None
    order = random.Random(seed)

    def record(v: VariantResult, event: dict) -> None:
        if store is not None:
            store.append({"key": v.key, "label": label, "params": v.values, **event})

    def build(vs: list, ex) -> None:
        nonlocal payload
        vs = [v for v in vs if v.artifact is None and not v.failed]
        if not vs:
            return
        if payload is None:
            payload = _dumps((source, args, params_list), _is_dask_client(executor))
        bar.start("building", len(vs))
        futs = {ex.submit(build_variant, payload, v.index, v.key, want_reference): v for v in vs}
        for done, f in enumerate(cf.as_completed(futs), 1):
            v, rec = futs[f], f.result()
            v.host, v.status = rec["host"], rec["status"]
            if rec["status"] == "build_error":
                v.error = rec["error"]
                record(v, {"status": "build_error", "error": v.error, "host": v.host, "worker": rec.get("worker")})
            else:
                v.artifact, v.reference, v.build_seconds = rec["artifact"], rec.get("reference"), rec["build_seconds"]
                record(v, {"status": "built", "build_seconds": v.build_seconds, "host": v.host,
                           "worker": rec.get("worker")})
            bar.update(done)

    def measure_until(vs: list, target: int, ex) -> None:
        while True:
            need = [v for v in vs if not v.failed and len(v.samples) < target]
            if not need:
                return
            build(need, ex)
            need = [v for v in need if not v.failed]
            order.shuffle(need)  # a new order every round: drift does not favour early or late variants
            bar.start(f"measuring, sample {min(len(v.samples) for v in need) + 1} of {target}", len(need))
            futs = {}
            for v in need:
                checking = check and not v.checked  # each variant is checked once, on its first measurement
                job = dict(job_base, samples=1, calls=v.calls,
                           reference=(v.reference if reference is None else reference) if checking else None)
                futs[ex.submit(measure_variant, v.artifact, job)] = (v, checking)
            for done, f in enumerate(cf.as_completed(futs), 1):
                (v, checking), rec = futs[f], f.result()
                ev = {"status": rec["status"], "host": rec["host"], "worker": rec.get("worker"),
                      "interval": rec.get("interval")}
                if rec["status"] == "ok":
                    ev.update(samples=rec["samples"], calls=rec["calls"], details=rec["details"], checked=checking)
                    v.status, v.calls, v.details = "ok", rec["calls"], rec["details"]
                    v.samples = v.samples + rec["samples"]
                    v.checked = v.checked or checking
                else:
                    v.status, v.error = rec["status"], rec.get("error", "")
                    ev["error"] = v.error
                record(v, ev)
                best = min((x.value for x in vs if x.value is not None), default=None)
                bar.update(done, f"best {obj.format(best)}" if best is not None else "")

    try:
        with _executor_of(executor) as ex:
            alive = variants
            rungs = strategy.rungs(repeats)
            for r, target in enumerate(rungs):
                measure_until(alive, target, ex)
                # each rung decides on the samples its rung asked for (a rerun with more samples
                # stored, e.g. from later rungs, replays the same decisions)
                ranked = sorted((v for v in alive if v.value is not None),
                                key=lambda v: statistics.median(v.samples[:target]))
                if r + 1 < len(rungs):
                    alive = strategy.keep(ranked, r)
                    alive += [v for v in variants if v.index == base_index and all(v is not a for a in alive)]
    finally:
        forget(payload)

    def build_best(v: VariantResult):
        from .runner import load_artifact

        art = v.artifact
        if art is None:
            rec = build_problem_variant((source, args, params_list), v.index, v.key, False)
            if rec["status"] != "built":
                raise RuntimeError(f"tuning {label}: the best variant no longer builds: {rec['error']}")
            art = rec["artifact"]
        return getattr(load_artifact(art), art["function"])

    name = type(strategy).__name__ if isinstance(strategy, Exhaustive) else repr(strategy)
    result = TuneResult(label, obj, variants, len(params_list), name, time.perf_counter() - t_start,
                        Path(results_file) if results_file is not None else None, build_best, repeats)
    result.baseline = next((v for v in variants if v.index == base_index), None)
    bar.message(result.summary())
    return result
