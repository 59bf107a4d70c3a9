"""Checking batches of plan cases (native build, reference, the IR run in Python)."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from .run import OutOfBounds, OverBudget, _copy, make_inputs, reference_outputs
from .batches import BatchReport, Failure, Realized, _indent, _safe, build_package, compare, realize_all
from .minimize import legitimate_rejection
from .plans import plan_features
from .plan_python import plan_ir_to_python


# -- checking batches of plan cases ------------------------------------------------------------


@dataclass
class PlanReport(BatchReport):
    rejected: list = field(default_factory=list)  # (case, why): legitimate build-time rejections
    python_checked: int = 0  # cases whose lowered IR also ran in Python (bounds-checked)
    features: dict = field(default_factory=dict)  # plan feature -> executed cases using it


def _run_plan_python(r: Realized, inputs, want):
    out = [_copy(x) for x in inputs]
    try:
        plan_ir_to_python(r.lowered)(out)
    except OutOfBounds as e:
        return f"{e}", True, False
    except OverBudget as e:
        r.notes.append(f"lowered IR not run in Python: {e}")
        return None, False, False
    except Exception:
        return "running the lowered IR in Python raised:\n" + traceback.format_exc(), False, True
    return compare(r.state, out, want), False, True


def check_plan_cases(cases_, output_dir, name: str = "plans") -> PlanReport:
    """Build the cases (schedules with plans) as one package, run each, compare with the
    reference; build-time rejections listed in LEGITIMATE_REJECTIONS are counted, not failed."""
    t0 = time.perf_counter()
    rep = PlanReport(cases=len(cases_))
    realized = realize_all(cases_)
    tb = time.perf_counter()
    lib = build_package(realized, Path(output_dir), name)
    rep.build_seconds = time.perf_counter() - tb
    for r in realized:
        if r.function is not None:
            rep.lower_seconds.append((r.lower_seconds, r.case.describe()))
        if r.error is not None:
            why = legitimate_rejection(r.error, r.case.nest)
            if why is not None:
                rep.rejected.append((r.case, why))
            else:
                rep.failures.append(Failure(r.case, r.error.splitlines()[0], _indent(r.error)))
            continue
        kernel = lib[r.function.name] if lib is not None else r.single.f
        st_ = r.state
        inputs = make_inputs(st_, r.case.seed)
        want = reference_outputs(st_, inputs)
        py_diff, oob, ran = _run_plan_python(r, inputs, want)
        rep.python_checked += ran
        rep.notes += [(r.case.describe(), n) for n in r.notes]
        if oob:
            rep.failures.append(Failure(r.case, "the lowered loops access an array out of bounds",
                                        f"lowered IR in Python: {py_diff}\n(the native kernel was not called)\n"
                                        f"C:\n{_indent(_safe(lambda: st_.plan.emit_c('f', st_.args)))}"))
            continue
        got = [_copy(x) for x in inputs]
        try:
            kernel(*got)
        except Exception:
            rep.failures.append(Failure(r.case, "calling the kernel raised", _indent(traceback.format_exc())))
            continue
        rep.executed += 1
        for f in plan_features(r.case):
            rep.features[f] = rep.features.get(f, 0) + 1
        diff = compare(st_, got, want)
        if diff or py_diff:
            what = "native result differs from the reference" if diff else \
                "lowered IR (run in Python) differs from the reference"
            details = [f"native: {diff or 'matches'}", f"lowered IR in Python: {py_diff or 'matches'}",
                       "C:\n" + _indent(_safe(lambda: st_.plan.emit_c("f", st_.args)))]
            rep.failures.append(Failure(r.case, what, "\n".join(details)))
    rep.total_seconds = time.perf_counter() - t0
    return rep
