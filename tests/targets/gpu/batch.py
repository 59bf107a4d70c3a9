"""Checking many plans with one build: a batch of (plan, arguments) cases goes into ONE package (one
C compile), each case's function is called on random data, and its written arrays are compared
with the reference evaluator's. A case that fails (lowering raises, the call raises, a result
differs) is reported with the accpy code that replays its plan; the others still run.

`check_batch` guarantees: every case it counts as run was built, called and compared; a case
accpy refuses with a typed error when lowering it (REFUSED_WHEN_BUILT) is counted as refused, any
other exception is a failure; a failure of the batch's build is attributed by building each
case alone."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import accpy as acc
from accpy.errors import LimitError, ScheduleError
from accpy.nest.array import Array, Dimension, OutputDimension, Role, Scalar
from accpy.nest.reference import evaluate
from accpy.package.compile import optimization
from accpy.testing import replay_code
from accpy.testing.asserts import TEST_OPT, first_difference
from accpy.testing.strategies import value_for


# What accpy raises to refuse a plan it accepted call by call but cannot lower (e.g. a cache whose
# block has a runtime size): such a plan is counted, not failed
REFUSED_WHEN_BUILT = (ScheduleError, LimitError)


@dataclass(frozen=True)
class Case:
    """One plan to check: `label` (for messages), the `plan`, its function's `args`, the `seed` of
    its data and `max_size` (the largest value drawn for a runtime dimension)."""

    label: str
    plan: object
    args: tuple
    seed: int
    max_size: int = 12


@dataclass
class BatchResult:
    """What `check_batch` did: cases `run` (built, called, compared), cases `refused` by accpy when
    building (a typed refusal: REFUSED_WHEN_BUILT) and the `failures` (texts)."""

    run: int = 0
    refused: int = 0
    failures: list = field(default_factory=list)
    ran: list = field(default_factory=list)  # the cases run
    refusals: list = field(default_factory=list)  # the texts of the refusals counted in `refused`
    seconds: dict = field(default_factory=lambda: {"lower": 0.0, "build": 0.0, "run": 0.0})


def inputs(case: Case) -> list:
    """The case's random data: one value per argument (runtime dimensions 1..max_size)."""
    rng = np.random.default_rng(case.seed)
    dims = {id(x): x for a in case.args if isinstance(a, Array) for x in a.shape if isinstance(x, Dimension)}
    dims.update({id(a): a for a in case.args if isinstance(a, Dimension)})
    sizes = {k: int(rng.integers(1, case.max_size + 1)) for k in dims}
    return [value_for(a, sizes, rng, int_range=(-20, 20), float_range=(-2.0, 2.0)) for a in case.args]


def reference(case: Case, values: list) -> list:
    """The reference evaluator's results on copies of `values`."""
    want = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
    env = {}
    for a, v in zip(case.args, want):
        if isinstance(a, OutputDimension):
            env[a.array] = v
        elif isinstance(a, (Array, Dimension, Scalar)):
            env[a] = v
    evaluate(case.plan.schedule.nests, env)
    return want


def describe(case: Case) -> str:
    """The case's label and the accpy code that replays its plan (with its binds spelled out)."""
    try:
        code = replay_code(case.plan)
    except Exception as e:  # (printing must not hide the failure)
        code = f"(no replay code: {e})"
    binds = ", ".join(f"{'(' + ', '.join(i.name for i in ixs) + ')' if len(ixs) > 1 else ixs[0].name}: {u}"
                      for ixs, u in case.plan.bindings)
    return f"{case.label} (seed {case.seed}); bindings {{{binds}}}\n" + "\n".join("    " + x for x in code.splitlines())


def _compare(case: Case, got: list, want: list) -> str:
    floats = any(isinstance(a, Array) and a.element_type.is_float for a in case.args)
    tol = 1e-4 if floats else 0.0
    diffs = [first_difference(a.name, g, w, rtol=tol, atol=tol) for a, g, w in zip(case.args, got, want)
             if isinstance(a, Array) and a.role in (Role.INPUT_OUTPUT, Role.OUTPUT)]
    return "; ".join(d for d in diffs if d)


def _lower(case: Case, name: str):
    """The case added to a package of its own and lowered; when accpy refuses it then (a typed
    ScheduleError or LimitError, e.g. a cache whose block has a runtime size), the refusal's text."""
    fn = acc.Package().add(case.plan, args=case.args, base_name=name)
    try:
        fn.lowered(fn.name + "__impl")
    except REFUSED_WHEN_BUILT as e:
        return f"{type(e).__name__}: {e}"
    return fn


def _build(cases: list, out: Path, name: str, lowered: dict):
    """The package of `cases` (function `c<n>` per case, reusing `lowered`: n -> the case's lowered
    function, as `_lower` made it), built."""
    pkg = acc.Package()
    for n, c in cases:
        fn = pkg.add(c.plan, args=c.args, base_name=f"c{n}")
        fn._lowered = lowered[n]._lowered  # (the same plan and arguments: lowered once)
    with optimization(TEST_OPT):
        return pkg.build(name, format=acc.Package.Format.HAT_DYNAMIC, output_dir=str(out), python_module=False,
                         progress=False)


def check_batch(cases: list, out: Path, name: str) -> BatchResult:
    """Build `cases` into one package under `out` and check each against the reference; a case
    accpy refuses when building is counted in `refused`, one whose lowering or build raises
    anything else is a failure."""
    result = BatchResult()
    lowered, kernels = {}, {}
    t = time.perf_counter()
    for n, c in enumerate(cases):
        try:
            fn = _lower(c, f"c{n}")
        except Exception:
            result.failures.append(f"lowering raised:\n{traceback.format_exc()}\n{describe(c)}")
            continue
        if isinstance(fn, str):
            result.refused += 1
            result.refusals.append(fn)
        else:
            lowered[n] = fn
    live = [(n, cases[n]) for n in lowered]
    t, result.seconds["lower"] = time.perf_counter(), time.perf_counter() - t
    try:
        lib = _build(live, out, name, lowered) if live else None
        kernels = {n: getattr(lib, f"c{n}") for n, _ in live}
    except Exception:
        for n, c in live:  # attribute the failure: each case alone
            try:
                kernels[n] = getattr(_build([(n, c)], out / f"alone{n}", f"{name}_{n}", lowered), f"c{n}")
            except Exception:
                result.failures.append(f"building raised:\n{traceback.format_exc()}\n{describe(c)}")
    t, result.seconds["build"] = time.perf_counter(), time.perf_counter() - t
    for n, f in sorted(kernels.items()):
        _check(cases[n], f, result)
    result.seconds["run"] = time.perf_counter() - t
    return result


def _check(c: Case, f, result: BatchResult) -> None:
    """Call `f` (the case's built function) on the case's data; compare with the reference."""
    values = inputs(c)
    want = reference(c, values)
    got = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
    try:
        f(*got)
    except Exception:
        result.failures.append(f"calling the kernel raised:\n{traceback.format_exc()}\n{describe(c)}")
        return
    result.run += 1
    result.ran.append(c)
    diff = _compare(c, got, want)
    if diff:
        result.failures.append(f"the result differs from the reference: {diff}\n{describe(c)}")
