"""`acc.autoschedule`: the bands, the model's candidates, the best few measured, the result kept.

    plan = acc.autoschedule(nest, args=(A, B, C))                 # model, then measurement (60 s)
    plan = acc.autoschedule(nest, args=(A, B, C), measure=False)  # the model alone: fast, deterministic
    print(plan.explain())

With `measure=True` the nest's own order and the model's best candidates (as many as `budget_s`
allows by their estimated cost, at most `MAX_MEASURED`: `affordable`) are measured with
`acc.tune` on `executor` (any `concurrent.futures` executor or a Dask client; default local
processes), each checked against the nest's default order first; the fastest wins (when the
budget allows no two, the model decides, and `explain()` says so). With `measure=False` the
model's best estimate wins. Either way the choice is kept
in the build cache (`<cache>/autoschedule/<key>.json`, key: the schedule's text, its arrays'
shapes, types and strides, the target, the threads, the mode and accpy's version), so a second
call makes the same plan at once, without measuring.
"""
from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

from ..errors import ScheduleError
from ..nest.nest import Nest
from ..paths import cache_dir
from ..schedule.schedule import Schedule
from ..targets import Target
from ..tune import tune
from ..version import __version__
from .bands import find_bands
from .explain import Report
from .model import _REFUSED, candidates
from .recipe import CacheStep, Recipe, copy_of

MAX_MEASURED = 6
MODEL_SECONDS = 1.2  # the model stops estimating more candidates after this (with measure=False)
BUILD_SECONDS = 3.0  # building one candidate for measurement (checks, gcc -O3, loading), as seen here
REPEATS = 3  # samples per measured candidate (their median is compared)


def autoschedule(source, args, target=None, budget_s: float = 60.0, measure: bool = True, executor=None,
                 threads: Optional[int] = None):
    """A plan for `source` (an acc.Nest, or a Schedule whose transforms are kept and extended) on
    `target` (default acc.Target.HOST) using up to `threads` threads (default the target's
    num_threads). See the module docstring; `plan.explain()` says what was chosen and why."""
    t0 = time.perf_counter()
    schedule = _schedule_of(source)
    args = _args_of(args)
    target = Target.HOST if target is None else target
    if not isinstance(target, Target):
        raise TypeError(f"target: expected an acc.Target, got {type(target).__name__} {target!r}")
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not budget_s > 0:
        raise ValueError(f"budget_s: expected a number of seconds > 0, got {budget_s!r}")
    threads = target.num_threads if threads is None else threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: expected an integer >= 1, got {threads!r}")
    key = _key(schedule, args, target, threads, measure)
    kept = _load(key)
    if kept is not None:
        try:
            plan = kept["recipe"].apply(schedule, args, target)
            plan._auto_report = Report.from_json(kept["report"], cached=True,
                                                 seconds=time.perf_counter() - t0)
            return plan
        except _REFUSED:
            pass  # a stale entry: decide again
    bands, skewed_bands = _bands(schedule)
    skewed = skewed_bands.schedule if skewed_bands is not None and skewed_bands.skews else None  # made once
    deadline = t0 + (MODEL_SECONDS if not measure else max(MODEL_SECONDS, min(budget_s / 4, 15.0)))
    cands = candidates(schedule, args, target, threads, bands, skewed_bands, deadline)
    usable = [c for c in cands if c.refused is None]
    if not usable:
        raise ScheduleError("autoschedule: every candidate was refused: " +
                            "; ".join(f"{c.recipe.family}: {c.refused}" for c in cands))
    measured = {}
    if measure:
        measured = _measure(schedule, args, target, usable, budget_s - (time.perf_counter() - t0), executor, skewed)
        ok = [c for c in usable if measured.get(c.recipe.key(), {}).get("seconds") is not None]
        ranked = sorted(ok, key=lambda c: measured[c.recipe.key()]["seconds"]) + [c for c in usable if c not in ok]
    else:
        ranked = usable
    best, plan = _first_plan(ranked, schedule, args, target, skewed)
    report = Report.build(skewed_bands if best.recipe.skews else bands, cands, best, measured, threads, target, measure,
                          seconds=time.perf_counter() - t0)
    plan._auto_report = report
    _store(key, best.recipe, report)
    return plan


def _first_plan(ranked: list, schedule, args, target, skewed=None) -> tuple:
    """(candidate, plan) of the first candidate whose whole plan passes the checks (the parallel
    loop's is made only here); a refused one is marked with the reason."""
    for c in ranked:
        try:
            return c, c.recipe.apply(schedule, args, target, skewed=skewed)
        except _REFUSED as e:
            c.refused = f"{type(e).__name__}: {e}"
    raise ScheduleError("autoschedule: every candidate was refused: " +
                        "; ".join(f"{c.recipe.family}: {c.refused}" for c in ranked))


def _schedule_of(source):
    if isinstance(source, Nest):
        return source.create_schedule()
    if isinstance(source, Schedule):
        if source.is_parameterized:
            raise ValueError("source: autoschedule needs a schedule without parameters (realize it first)")
        return source
    raise TypeError(f"source: expected an acc.Nest or a Schedule, got {type(source).__name__} {source!r}")


def _args_of(args):
    if not isinstance(args, (tuple, list)) or not args:
        raise ValueError(f"args: expected the function's arguments as a tuple, e.g. args=(A, B, C), got {args!r}")
    return tuple(args)


def _bands(schedule) -> tuple:
    """(the permutable bands of `schedule`, those of a copy skewed where that grows a band: None
    when no skew does)."""
    plain = find_bands(copy_of(schedule), skew=False)
    skewed = find_bands(copy_of(schedule), skew=True)
    return plain, (skewed if skewed.skews else None)


# -- measurement ---------------------------------------------------------------------------------------

def affordable(usable: list, budget: float) -> list:
    """The candidates worth measuring within `budget` seconds: the nest's own order first (the
    baseline: a measured choice is then never slower than it), then the best estimates, while the
    sum of their expected costs -- a build (`BUILD_SECONDS`) and a check, a warm-up call and
    `REPEATS` samples at the model's estimate, after one call of the reference (the default
    order) -- stays within 80% of the budget; at most `MAX_MEASURED`. Fewer than two: nothing to
    compare (the model decides)."""
    default = next((c for c in usable if c.recipe.family == "default order"), None)
    cost = lambda c: BUILD_SECONDS + (2 + REPEATS) * min(c.seconds, 60.0)  # noqa: E731
    spent = min(default.seconds, 60.0) if default is not None else 0.0  # the reference's call
    chosen = []
    for c in ([default] if default is not None else []) + [c for c in usable if c is not default]:
        if len(chosen) < MAX_MEASURED and spent + cost(c) <= 0.8 * budget:
            chosen.append(c)
            spent += cost(c)
    return chosen if len(chosen) >= 2 else []


def _measure(schedule, args, target, usable: list, budget: float, executor, skewed=None) -> dict:
    """{recipe key: {"seconds": median or None, "status": ...}} of the candidates `affordable`
    picks within `budget` (empty: none measured)."""
    chosen = affordable(usable, budget)
    if not chosen:
        return {}
    recipes = {str(k): c.recipe for k, c in enumerate(chosen)}

    def variant(candidate: str):
        return recipes[candidate].apply(schedule, args, target, skewed=skewed), args

    per = max(1.0, budget / len(chosen))
    r = tune(variant, grid=[{"candidate": k} for k in recipes], executor=executor, repeats=REPEATS,
             timeout=per, build_timeout=max(per, 30.0), progress=False, label="autoschedule")
    out = {}
    for v in r.variants:
        rec = recipes[str(v.values["candidate"])]
        out[rec.key()] = {"seconds": v.value if v.status == "ok" else None, "status": v.status}
    return out


# -- the result cache ------------------------------------------------------------------------------------

def _key(schedule, args, target, threads: int, measure: bool) -> str:
    arrays = []
    for a in args:
        buf = getattr(a, "buffer", None)
        if buf is None:
            arrays.append(repr(a))
            continue
        arrays.append((buf.name, str(buf.dtype), [str(s) for s in buf.shape], [str(s) for s in buf.strides],
                       str(getattr(a, "role", ""))))
    t = (target.name, target.vector_bytes, target.vector_registers, tuple(target.cache_sizes),
         tuple(sorted(target.extensions or ())), repr(target.extra))
    text = json.dumps([schedule.to_python(), arrays, repr(t), threads, bool(measure), __version__, _model_hash()],
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def _model_hash() -> str:
    """A hash of the model's source (this layer and the libraries' recipe modules, `auto*.py` under
    accpy/targets): a changed model decides again instead of reusing old choices."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for f in sorted(here.glob("*.py")) + sorted((here.parent / "targets").rglob("*auto*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _path(key: str):
    d = cache_dir() / "autoschedule"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{key}.json"


def _load(key: str) -> Optional[dict]:
    p = _path(key)
    try:
        data = json.loads(p.read_text())
        r = data["recipe"]
        r["caches"] = tuple(CacheStep(**c) for c in r["caches"])
        for f in ("splits", "skews", "prefetch"):
            r[f] = tuple(tuple(x) for x in r[f])
        r["tensorize"] = tuple((tuple(loops), dict(opts)) for loops, opts in r.get("tensorize", ()))
        for f in ("order", "unroll", "parallel", "why"):
            r[f] = tuple(r[f])
        return {"recipe": Recipe(**r), "report": data["report"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(key: str, recipe: Recipe, report) -> None:
    data = {"recipe": asdict(recipe), "report": report.to_json()}
    p = _path(key)
    tmp = p.with_suffix(f".{time.time_ns()}.tmp")
    tmp.write_text(json.dumps(data, default=str))
    tmp.replace(p)
