"""Building a batch of cases into one package and checking each against the reference;
parsing steps back from code."""
from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import accpy as acc
from accpy.testing.asserts import first_difference
from .steps import Mapping, Ref, Step
from .cases import Case, State, realize
from .run import OutOfBounds, OverBudget, _copy, lowered_to_python, make_inputs, reference_outputs


# -----------------------------------------------------------------------------------------
# building and checking batches
# -----------------------------------------------------------------------------------------


@dataclass
class Realized:
    case: Case
    state: Optional[State] = None
    function: object = None  # PackageFunction
    lowered: object = None  # the lowered Function
    lower_seconds: float = 0.0
    single: object = None  # a package of this case alone (after a batch failed to build)
    notes: list = field(default_factory=list)  # e.g. checks skipped
    error: Optional[str] = None  # a failure before running (realize / lower / compile)


@dataclass
class Failure:
    case: Case
    what: str
    details: str = ""

    def report(self) -> str:
        out = [f"FAILED: {self.what}", f"case: {self.case.describe()}", "replay:",
               _indent(self.case.script()), self.details]
        return "\n".join(x for x in out if x)


@dataclass
class BatchReport:
    cases: int = 0
    executed: int = 0
    failures: list = field(default_factory=list)
    lower_seconds: list = field(default_factory=list)  # (seconds, case description)
    notes: list = field(default_factory=list)  # (case description, note): checks skipped
    build_seconds: float = 0.0
    total_seconds: float = 0.0

    def raise_failures(self) -> None:
        if self.failures:
            text = "\n\n".join(f.report() for f in self.failures)
            raise AssertionError(f"{len(self.failures)} of {self.cases} generated schedules failed:\n\n{text}")


def _indent(text, pad="    "):
    return "\n".join(pad + line if line else line for line in text.splitlines())


def _first_difference(name, got, want, tol) -> Optional[str]:
    return first_difference(name, got, want, rtol=tol or 0.0, atol=tol or 0.0)


def tolerance_of(state: State) -> Optional[float]:
    dts = {a.element_type for a in state.args if isinstance(a, acc.Array)}
    return None if all(t.is_int for t in dts) else 1e-4


def compare(state: State, got: list, want: list) -> Optional[str]:
    tol = tolerance_of(state)
    diffs = [d for d in (_first_difference(a.name, g, w, tol) for a, g, w in zip(state.args, got, want)
                         if isinstance(a, acc.Array)) if d]
    return "; ".join(diffs) if diffs else None


def realize_all(cases_) -> list:
    out = []
    for c in cases_:
        r = Realized(c)
        try:
            r.state = realize(c)
        except Exception:
            r.error = "realizing the schedule raised:\n" + traceback.format_exc()
        out.append(r)
    return out


def build_package(realized: list, output_dir, name: str = "schedgen"):
    """Add every realized case (without an error) to one package and build it once.

    Each case is lowered (and timed) on its own first, so that a case whose lowering
    raises is reported alone. A compile error is attributed by rebuilding the cases one
    by one. Returns the loaded package (None when nothing was built).
    """
    pkg = acc.Package()
    for n, r in enumerate(realized):
        if r.error is not None:
            continue
        try:
            probe = acc.Package().add(r.state.plan, args=r.state.args, base_name=f"case{n}")
            t = time.perf_counter()
            r.lowered = probe.lowered(probe.name + "__impl")
            r.lower_seconds = time.perf_counter() - t
        except Exception:
            r.error = "lowering raised:\n" + traceback.format_exc()
            continue
        r.function = pkg.add(r.state.plan, args=r.state.args, base_name=f"case{n}")
        if hasattr(probe, "_lowered"):
            r.function._lowered = probe._lowered  # same plan and arguments: reuse, don't lower twice
    live = [r for r in realized if r.error is None]
    if not live:
        return None
    try:
        return pkg.build(name, output_dir=str(output_dir), python_module=False, progress=False)
    except Exception:
        if len(live) == 1:
            live[0].error = "building raised:\n" + traceback.format_exc()
            return None
    # attribute the failure: build each case alone
    for n, r in enumerate(live):
        one = acc.Package()
        r.function = one.add(r.state.plan, args=r.state.args, base_name="f")
        try:
            r.single = one.build(f"{name}_single{n}", output_dir=str(output_dir), python_module=False,
                                  progress=False)
        except Exception:
            r.error = "building raised:\n" + traceback.format_exc()
    return None


def check_cases(cases_, output_dir, name: str = "schedgen", check_lowered_python: bool = True,
                extra_checks=()) -> BatchReport:
    """Build all cases into one package, run each, compare with the reference.

    Returns a report; call `report.raise_failures()` to fail a test with readable replays.
    """
    t0 = time.perf_counter()
    rep = BatchReport(cases=len(cases_))
    realized = realize_all(cases_)
    tb = time.perf_counter()
    lib = build_package(realized, Path(output_dir), name)
    rep.build_seconds = time.perf_counter() - tb
    for r in realized:
        if r.function is not None:
            rep.lower_seconds.append((r.lower_seconds, r.case.describe()))
        if r.error is not None:
            rep.failures.append(Failure(r.case, r.error.splitlines()[0], _indent(r.error)))
            continue
        kernel = lib[r.function.name] if lib is not None else r.single.f
        st_ = r.state
        inputs = make_inputs(st_, r.case.seed)
        want = reference_outputs(st_, inputs)
        py_diff = oob = None
        if check_lowered_python:
            # first, in Python with bounds checks: an out-of-bounds access must not reach the
            # native kernel (it would corrupt or crash the test process, not fail a test)
            py_diff, oob = _run_lowered_python(r, inputs, want)
            rep.notes += [(r.case.describe(), n) for n in r.notes]
        if oob:
            details = [f"lowered IR in Python: {py_diff}", "(the native kernel was not called)",
                       "pseudo-code:\n" + _indent(_safe(st_.schedule.to_python)),
                       "lowered:\n" + _indent(_safe(lambda: st_.schedule.to_python(unswitched=True)))]
            rep.failures.append(Failure(r.case, "the lowered loops access an array out of bounds",
                                        "\n".join(details)))
            continue
        got = [_copy(x) for x in inputs]
        try:
            kernel(*got)
        except Exception:
            rep.failures.append(Failure(r.case, "calling the kernel raised", _indent(traceback.format_exc())))
            continue
        rep.executed += 1
        diff = compare(st_, got, want)
        if diff and not check_lowered_python:
            py_diff, _ = _run_lowered_python(r, inputs, want)
        extra = []
        for chk in extra_checks:
            msg = chk(r, inputs, got)
            if msg:
                extra.append(msg)
        if diff or py_diff or extra:
            what = "native result differs from the reference" if diff else \
                "lowered IR (run in Python) differs from the reference" if py_diff else "extra check failed"
            details = [f"native: {diff or 'matches'}",
                       f"lowered IR in Python: {py_diff or 'matches'}"] + extra
            details.append("pseudo-code:\n" + _indent(_safe(st_.schedule.to_python)))
            details.append("lowered:\n" + _indent(_safe(lambda: st_.schedule.to_python(unswitched=True))))
            rep.failures.append(Failure(r.case, what, "\n".join(details)))
    rep.total_seconds = time.perf_counter() - t0
    return rep


def _run_lowered_python(r: Realized, inputs, want):
    """(difference or None, out-of-bounds?) of the lowered IR run in Python."""
    out = [_copy(x) for x in inputs]
    try:
        lowered_to_python(r.lowered)(out)
    except OutOfBounds as e:
        return f"{e}", True
    except OverBudget as e:
        r.notes.append(f"lowered IR not run in Python: {e}")
        return None, False
    except Exception:
        return "running the lowered IR in Python raised:\n" + traceback.format_exc(), False
    return compare(r.state, out, want), False


def _safe(fn) -> str:
    try:
        return fn()
    except Exception as e:  # pragma: no cover - diagnostics only
        return f"<{type(e).__name__}: {e}>"


def check_case(case: Case, output_dir, **kw) -> BatchReport:
    """One case alone (for regression tests and replays)."""
    rep = check_cases([case], output_dir, **kw)
    rep.raise_failures()
    return rep


def steps_from_code(code: str) -> tuple:
    """Parse step lines in `Step.code()` form back to Steps (for pasting a failure's replay)."""
    out = []
    for line in code.strip().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"(?:([\w, ]+?),?\s*=\s*)?([\w.]+)\.(\w+)\((.*)\)", line)
        if not m:
            raise ValueError(f"not a step: {line!r}")
        results, target, op, argtext = m.groups()
        if target == "schedule" and op == "create_plan" and not argtext.strip():
            continue  # the default plan (a step with a target argument is kept)
        args, kwargs = _parse_args(argtext)
        res = tuple(x.strip() for x in results.split(",") if x.strip()) if results else ()
        out.append(Step(op, args, kwargs, res, target))
    return tuple(out)


def _parse_args(text):
    import ast

    call = ast.parse(f"f({text})", mode="eval").body

    def conv(node):
        if isinstance(node, ast.Name):
            return Ref(node.id)
        if isinstance(node, ast.Attribute):  # e.g. acc.ScalarType.int64
            return Ref(ast.unparse(node))
        if isinstance(node, ast.Call) and ast.unparse(node.func).startswith("acc."):  # acc.Array.Layout.grouped(8)
            return Ref(ast.unparse(node))
        if isinstance(node, ast.Dict):
            return Mapping((conv(k), conv(v)) for k, v in zip(node.keys, node.values))
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -conv(node.operand)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(conv(x) for x in node.elts)
        raise ValueError(f"unsupported argument {ast.dump(node)}")

    return tuple(conv(a) for a in call.args), tuple((k.arg, conv(k.value)) for k in call.keywords)
