"""The fuzz driver's three generators and the outcome of each case they draw.

Every generator turns (run seed, batch number) into distinct `support.schedgen.Case`s -- plain
data that realizes, checks, minimizes and prints as a replay the same way whoever drew it:

  * "schedules": random split / tile / reorder / skew / pad sequences on the schedgen nests
    (`schedgen.random_cases`, runtime sizes included), checked by `schedgen.check_cases`;
  * "plans": random plans (caches, vectorize, unroll, parallelize, AVX2 targets) on random
    schedules (`schedgen.random_plan_cases`), checked by `schedgen.check_plan_cases`;
  * "testing": accpy.testing's hypothesis strategies (`at.schedules`, `at.plans`: caches with
    layouts, triggers and column panels, vectorize, unroll, parallelize), plus a cache in a grouped
    layout now and then, on the narrow-type nests (`schedgen.narrow_kinds()`: int8, uint8, int16
    and bfloat16 with wide accumulators, and element-wise arithmetic in the narrow type), driven
    by a seed (`hypothesis.seed`, no database); each drawn plan becomes a Case through its
    replay code (`at.replay_code`).

`check_batch` builds a batch as one package and sorts each case into an `Outcome`: "ok",
"mismatch" (a value differs from the reference, natively or in the lowered IR run in Python,
or the loops access an array out of bounds), "error" (an exception that is not a refusal),
"refused" (accpy declined the plan at build with a reason: counted by reason, not failed).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from support import schedgen as sg

GENERATORS = ("schedules", "plans", "testing")
FAILING = ("mismatch", "error", "hang", "crash")  # outcomes that fail a run


@dataclass(frozen=True)
class Outcome:
    case: sg.Case
    kind: str  # "ok" | "refused" | "mismatch" | "error" | "hang" | "crash"
    what: str = ""  # a headline: the failure, or the reason of a refusal
    details: str = ""


def batch_rng(seed: int, gen: str, index: int) -> random.Random:
    return random.Random(f"fuzz-{seed}-{gen}-{index}")


def draw_batch(gen: str, seed: int, index: int, size: int, exclude=()) -> list:
    """Batch `index` of generator `gen` in the run with seed `seed`: up to `size` distinct cases."""
    rng = batch_rng(seed, gen, index)
    if gen == "schedules":
        return sg.random_cases(rng, size, exclude=exclude)
    if gen == "plans":
        return sg.random_plan_cases(rng, size, exclude=exclude)
    if gen == "testing":
        return testing_cases(rng, size, exclude=exclude)
    raise ValueError(f"generator: expected one of {list(GENERATORS)}, got {gen!r}")


# -- the accpy.testing generator ------------------------------------------------------------------


def _strategy(state):
    """at.plans of at.schedules of the case's nest, sometimes with a cache in a grouped layout added
    (the target's group, `VNNI`, or groups of 8 bytes)."""
    from hypothesis import strategies as st

    import accpy as acc
    import accpy.testing as at

    nest = state.nests[0]
    grouped = [a for a in state.args if isinstance(a, acc.Array) and a.role is acc.Role.INPUT and len(a.shape) == 2]

    @st.composite
    def draw(d):
        plan = d(at.plans(at.schedules(nest, max_transforms=4), caches=2))
        if grouped and d(st.integers(0, 2)) == 0:
            layout = d(st.sampled_from([acc.Array.Layout.VNNI, acc.Array.Layout.grouped(8)]))
            kw = {"index": d(st.sampled_from(plan.schedule.get_indices())), "layout": layout}
            if d(st.booleans()):
                kw["panel_width"] = d(st.sampled_from([4, 8, 16]))
            try:
                plan.cache(d(st.sampled_from(grouped)), **kw)
            except (ValueError, TypeError, acc.ScheduleError):
                pass
        return plan

    return draw()


def _plans_drawn(spec, seed: int, n: int) -> list:
    """`n` plans (fewer if hypothesis runs out) of the nest `spec` from accpy.testing, seeded."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    state = sg.State(spec)
    found = []

    @with_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(_strategy(state))
    def collect(plan):
        found.append(plan)

    collect()
    return found


def plan_steps(plan) -> tuple:
    """The Steps replaying `plan` (from `accpy.testing.replay_code`; the first two lines bind the
    nest's indices and make the schedule, as a schedgen nest template does)."""
    import accpy.testing as at

    lines = at.replay_code(plan).splitlines()[2:]
    return sg.steps_from_code("\n".join(lines))


def testing_cases(rng, n: int, exclude=(), per_nest: int = 5) -> list:
    """`n` distinct cases from accpy.testing's strategies, `per_nest` plans of each drawn nest."""
    ch = sg.RandomChooser(rng)
    out, seen = [], set(exclude)
    for _ in range(4 * n // per_nest + 4):
        if len(out) >= n:
            break
        spec = sg.draw_spec(ch, kinds=sg.narrow_kinds())
        for plan in _plans_drawn(spec, rng.getrandbits(32), min(per_nest, n - len(out))):
            case = sg.Case(spec, plan_steps(plan), rng.randrange(2 ** 31))
            if case not in seen:
                seen.add(case)
                out.append(case)
    return out[:n]


# -- checking a batch -----------------------------------------------------------------------------

# exceptions with which accpy declines a plan it cannot build (the accpy.testing generator's
# plans are legal by the strategies' own checks only: what they cannot see is refused at build)
_REFUSAL = re.compile(r"^(?:accpy\.errors\.)?(ScheduleError|LogicError|ValueError|NotImplementedError): (.*)$")


def refusal_reason(error_text: str):
    """The reason of an accpy refusal (its message, numbers and index names generalized), or None."""
    last = error_text.strip().splitlines()[-1] if error_text.strip() else ""
    m = _REFUSAL.match(last.strip())
    if not m:
        return None
    msg = re.sub(r"(\w\()[A-Za-z_]\w*(\))", r"\1<ix>\2", m.group(2))  # vectorize(j1): -> vectorize(<ix>):
    msg = re.sub(r"\b\d+\b", "N", msg)
    return f"{m.group(1)}: {msg[:150]}"


def _kind_of(failure, gen: str):
    what = failure.what
    if what.startswith(("realizing the schedule raised", "lowering raised", "building raised")):
        why = refusal_reason(failure.details) if gen == "testing" else None
        return ("refused", why) if why else ("error", what + " " + failure.details.strip().splitlines()[-1].strip())
    if what.startswith(("native result differs", "lowered IR (run in Python) differs", "the lowered loops access",
                        "extra check failed")):
        return "mismatch", what
    return "error", what


def check_batch(gen: str, cases, out_dir, name: str = "fuzz") -> list:
    """One Outcome per case (in order): the batch built as one package, each case run natively
    and as lowered IR in Python, compared with the reference evaluator."""
    cases = list(cases)
    if not cases:
        return []
    out_dir = Path(out_dir)
    if gen == "schedules":
        rep = sg.check_cases(cases, out_dir, name=name)
        rejected = []
    else:
        rep = sg.check_plan_cases(cases, out_dir, name=name)
        rejected = rep.rejected
    got = {}
    for case, why in rejected:
        got[case] = Outcome(case, "refused", why)
    for f in rep.failures:
        kind, what = _kind_of(f, gen)
        if case_outcome := got.get(f.case):
            if case_outcome.kind in FAILING:
                continue
        got[f.case] = Outcome(f.case, kind, what, f.details if kind != "refused" else "")
    return [got.get(c, Outcome(c, "ok")) for c in cases]


# -- jobs run in a worker process (fuzz.engine) ---------------------------------------------------

_SEEN: set = set()  # cases this worker drew already (a new worker starts afresh)


def run_job(job, note):
    """("batch", gen, seed, index, size, dir, opt) -> [Outcome] (notes ("cases", [Case]) first);
    ("check", gen, case, dir, opt) -> Outcome; ("sanitize", [Case], dir) -> see fuzz.sanitize.
    `opt`: the C compiler's optimization level for the kernels (-O0 builds in a fraction of the time)."""
    import shutil

    from accpy.package.compile import optimization

    op = job[0]
    if op == "batch":
        _, gen, seed, index, size, out_dir, opt = job
        cases = draw_batch(gen, seed, index, size, exclude=_SEEN)
        _SEEN.update(cases)
        note(("cases", cases))
        try:
            with optimization(opt):
                return check_batch(gen, cases, out_dir, name=f"{gen}{index}")
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
    if op == "check":
        _, gen, case, out_dir, opt = job
        try:
            with optimization(opt):
                return check_batch(gen, [case], out_dir, name="one")[0]
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
    if op == "sanitize":
        from .sanitize import sanitize_cases

        _, cases, out_dir = job
        try:
            return sanitize_cases(cases, out_dir)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
    raise ValueError(f"unknown job {op!r}")
