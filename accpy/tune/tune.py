"""`acc.tune`: build every variant of a parameter grid, check each once, measure, keep the fastest.

Work runs on a `concurrent.futures.Executor` or a Dask `distributed.Client` (by default, each
build in a forked child process and measurements in this process's measuring process):
builds in parallel, then measurement rounds in which every variant still in the race takes
one sample, in a shuffled order (so that drift in the machine's speed hits all variants
alike), each measurement holding its host's lock. No stage of a variant runs in the caller or
in an executor's worker itself, so a variant that crashes or hangs is recorded and the others
are tuned.
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

from ..nest.parameters import Parameter, create_parameter_grid
from .objective import Objective, objective_of
from .isolate import build_in_children
from .progress import Progress
from .options import check_options
from .results import FAILED, STORED, ResultsFile, TuneResult, VariantResult, json_value, parameter_name, variant_key
from .runner import load_artifact
from .search import Exhaustive, Halving, strategy_of
from .building import is_plan_function
from .tasks import build_variant, measure_variant, release


def _is_dask_client(x) -> bool:
    return type(x).__module__.split(".")[0] == "distributed" and hasattr(x, "get_executor")


class _InProcess(cf.Executor):
    """The default executor's measurements: run at once in this process (its measuring process does
    the work; measurements on one machine never overlap anyway). Its builds go to `build_in_children`."""

    def submit(self, fn, /, *args, **kwargs):
        f: cf.Future = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except Exception as e:
            f.set_exception(e)
        return f


@contextlib.contextmanager
def _executor_of(executor):
    if executor is None:
        yield _InProcess()
    elif _is_dask_client(executor):
        # pure=False: two measurements of one variant are two tasks, not one cached result;
        # retries=0: a failed task is recorded, not run again (tasks never kill their worker:
        # builds and measurements run in child processes of the worker)
        yield executor.get_executor(pure=False, retries=0)
    elif isinstance(executor, cf.Executor):
        yield executor
    else:
        raise TypeError(f"executor: expected a concurrent.futures.Executor or a dask.distributed.Client, "
                        f"got {type(executor).__name__}")


def _submit(ex, fn, *args) -> cf.Future:
    """ex.submit(fn, *args); a submit that raises (a broken pool) gives a future holding the error."""
    try:
        return ex.submit(fn, *args)
    except Exception as e:
        f: cf.Future = cf.Future()
        f.set_exception(e)
        return f


def _outcome(f: cf.Future, stage: str) -> dict:
    """A task's record; a task that raised (its worker lost, a broken pool) is recorded as crashed."""
    try:
        return f.result()
    except Exception as e:
        return {"status": "crashed", "stage": stage, "host": "",
                "error": f"the task failed: {type(e).__name__}: {e}".strip()}


def _release(executor) -> None:
    """Stop the idle measuring and building processes this run started (here and on Dask workers)."""
    release()
    if _is_dask_client(executor):
        with contextlib.suppress(Exception):
            executor.run(release)


def _grid_of(grid) -> list:
    """The grid as a list of dicts (a dict of choices gives every combination)."""
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


def _dumps(obj) -> bytes:
    """Pickle the tuning problem for an executor's building processes (fresh interpreters that may not
    import the user's script); cloudpickle (when present) also takes closures and lambdas."""
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
        by_value = mod is not None and mod.__name__ != "__main__" and not _installed(mod)
        if by_value:  # workers may not be able to import the user's script
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
         build_timeout: float = 600.0, check: bool = True, reference: Optional[Callable] = None,
         tolerance: float = 1e-4, data: Optional[Callable] = None, seed: int = 0, retry_failed: bool = False,
         baseline: Optional[dict] = None, progress: bool = True) -> TuneResult:
    """Measure the variants of a parameter grid and return them with the best one.

    source: a Plan (Schedule, Nest) using acc parameters, with `args` and a grid of
        `{parameter: value}` dicts (`acc.create_parameter_grid`); or a function called as
        `source(**values)` for each grid entry (`{name: value}` dicts, or a dict of name ->
        choices) returning `(plan, args)` (or a plan, with `args`).
    objective: what to minimize: wall time per call (default), the name of an objective a
        target library registers (e.g. its model's cycles: accpy/targets/objective.py) or any
        `accpy.tune.Objective`.
        Every sample must be a finite number >= 0, else the variant is `invalid`.
    search: "auto" (exhaustive up to 64 variants, else halving), "exhaustive", "halving",
        or `accpy.tune.Exhaustive()` / `accpy.tune.Halving(fraction, eta, seed)`.
    executor: a `concurrent.futures.Executor` or a Dask `distributed.Client`; default local
        processes (each build in a child process of its own, one per core at a time).
        Measurements never overlap on one machine.
    results_file: a JSON-lines file; variants already in it (measured or failed) are not
        measured again (`retry_failed=True` retries the failed ones). A variant is named by
        `label`, its parameter values, the plan function's source text and the objective.
        Records carry a checksum and the accpy version and C compiler of the run: a variant
        with a record that fails the checksum, holds an invalid value, or comes from another
        accpy or compiler is measured again.
    repeats, warmup, min_time: samples per variant (medians are compared), calls before
        measuring, and the least time in seconds one sample lasts (it averages enough calls).
    timeout: seconds a variant's check or measurement may take; past it, the variant is
        recorded as a `timeout` (its measuring process is stopped). `float("inf")`: no limit.
    build_timeout: seconds one variant's build (plan function, lowering, C compiler) may
        take; past it the build is killed with the processes it started and the variant is
        recorded as a `timeout` at stage "build". `float("inf")`: no limit.
    check, reference, tolerance: each variant's outputs are compared once with the
        reference (default: the same logic in its default order, built by accpy; or a
        picklable `reference(*arrays)` updating the outputs in place), floats within
        `tolerance` of the largest magnitude, integers exactly.
    data: a picklable `data(seed) -> values` for the arguments; default random arrays.
    baseline: one grid entry (added to the grid if absent) that every search measures in
        full, never pruned: today's choice, to compare the best with (`result.baseline`).

    A variant that fails is recorded and the others are tuned: its `status` is
    `build_error` (an exception while building), `crashed` (a process died: the signal or
    exit code), `timeout`, `wrong` (outputs differ from the reference), `error` (an
    exception while checking or measuring) or `invalid` (a sample that is not a finite
    number >= 0, kept in `invalid_sample`); `stage` says where ("build", "check", "measure").
    """
    t_start = time.perf_counter()
    obj = objective_of(objective)
    opts = check_options(repeats=repeats, warmup=warmup, min_time=min_time, timeout=timeout,
                         build_timeout=build_timeout, tolerance=tolerance, seed=seed, check=check,
                         retry_failed=retry_failed, progress=progress, label=label)
    repeats, timeout, build_timeout = opts["repeats"], opts["timeout"], opts["build_timeout"]
    if args is not None and not isinstance(args, (tuple, list)):
        raise ValueError("args: give the function's arguments as a tuple, e.g. args=(A, B, C)")
    is_function = is_plan_function(source)
    if not is_function and args is None:
        raise ValueError("args: tuning a plan needs its arguments, e.g. args=(A, B, C)")
    if grid is None:
        raise ValueError("grid: give the parameter values to try (e.g. acc.create_parameter_grid({...}))")
    if executor is not None and not (_is_dask_client(executor) or isinstance(executor, cf.Executor)):
        raise TypeError(f"executor: expected a concurrent.futures.Executor or a dask.distributed.Client, "
                        f"got {type(executor).__name__}")
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
    bar = Progress(label, progress)
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
            for k in STORED:
                if k in s:
                    setattr(v, k, s[k])
            if v.status == "built":
                v.status = "pending"  # its library is not kept in the file: build it again
        elif s is not None and store is not None:
            store.append({"key": v.key, "label": label, "params": v.values, "status": "retry"})
        variants.append(v)
    distrusted = {v.key: store.distrusted[v.key] for v in variants if store is not None and v.key in store.distrusted}
    if distrusted:
        reasons = sorted(set(distrusted.values()))
        bar.message(f"tuning {label}: {len(distrusted)} variant(s) of {store.path} measured again, their records "
                    f"not trusted ({'; '.join(reasons)})")
    repeats = 1 if obj.deterministic else repeats
    problem = (source, args, params_list)
    payload = None  # the problem pickled, for an executor's building processes
    job_base = {"objective": obj, "warmup": opts["warmup"], "min_time": opts["min_time"], "timeout": timeout,
                "reference_timeout": None if timeout is None else max(600.0, 10 * timeout), "seed": opts["seed"],
                "data": data, "tolerance": opts["tolerance"]}
    want_reference = check and reference is None
    order = random.Random(seed)

    def record(v: VariantResult, event: dict) -> None:
        if store is not None:
            store.append({"key": v.key, "label": label, "params": v.values, **event})

    def built(v: VariantResult, rec: dict) -> None:
        v.host, v.status = rec.get("host", ""), rec["status"]
        if rec["status"] == "built":
            v.artifact, v.reference, v.build_seconds = rec["artifact"], rec.get("reference"), rec["build_seconds"]
            record(v, {"status": "built", "build_seconds": v.build_seconds, "host": v.host, "worker": rec.get("worker")})
        else:
            v.error, v.stage = rec.get("error", ""), rec.get("stage", "build")
            record(v, {"status": v.status, "stage": v.stage, "error": v.error, "host": v.host,
                       "worker": rec.get("worker")})

    def build(vs: list, ex) -> None:
        nonlocal payload
        vs = [v for v in vs if v.artifact is None and not v.failed]
        if not vs:
            return
        bar.start("building", len(vs))
        if executor is None:
            by_index = {v.index: v for v in vs}
            jobs = [(v.index, v.key) for v in vs]
            for done, (index, rec) in enumerate(build_in_children(problem, jobs, want_reference, build_timeout), 1):
                built(by_index[index], rec)
                bar.update(done)
            return
        if payload is None:
            payload = _dumps(problem)
        futs = {_submit(ex, build_variant, payload, v.index, v.key, want_reference, build_timeout): v for v in vs}
        for done, f in enumerate(cf.as_completed(futs), 1):
            built(futs[f], _outcome(f, "build"))
            bar.update(done)

    def measure_until(vs: list, target: int, ex) -> None:
        while True:
            need = [v for v in vs if not v.failed and len(v.samples) < target]
            if not need:
                return
            build(need, ex)
            need = [v for v in need if not v.failed]
            if not need:
                return
            order.shuffle(need)  # a new order every round: drift does not favour early or late variants
            bar.start(f"measuring, sample {min(len(v.samples) for v in need) + 1} of {target}", len(need))
            futs = {}
            for v in need:
                checking = check and not v.checked  # each variant is checked once, on its first measurement
                job = dict(job_base, samples=1, calls=v.calls,
                           reference=(v.reference if reference is None else reference) if checking else None)
                futs[_submit(ex, measure_variant, v.artifact, job)] = (v, checking)
            for done, f in enumerate(cf.as_completed(futs), 1):
                (v, checking), rec = futs[f], _outcome(f, "measure")
                ev = {"status": rec["status"], "host": rec.get("host", ""), "worker": rec.get("worker"),
                      "interval": rec.get("interval")}
                if rec["status"] == "ok":
                    ev.update(samples=rec["samples"], calls=rec["calls"], details=rec["details"], checked=checking)
                    v.status, v.calls, v.details = "ok", rec["calls"], rec["details"]
                    v.samples = v.samples + rec["samples"]
                    v.checked = v.checked or checking
                else:
                    v.status, v.error, v.stage = rec["status"], rec.get("error", ""), rec.get("stage", "measure")
                    ev.update(error=v.error, stage=v.stage)
                    if "invalid_sample" in rec:
                        v.invalid_sample = ev["invalid_sample"] = rec["invalid_sample"]
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
        _release(executor)

    def build_best(v: VariantResult):
        art = v.artifact
        if art is None:  # built again here, in a child process (a crash costs the child only)
            (_, rec), = build_in_children(problem, [(v.index, v.key)], False, build_timeout)
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
