"""Random nests + random schedules, built natively and checked against the reference.

The unit of work is a `Case`: a nest (`NestSpec`: a kind from `NEST_KINDS`, its sizes,
element type and array layouts), a list of transform `Step`s, and a seed for the input
data. Everything in a case is plain data, so a failing case prints as a short Python
script that replays it exactly (`Case.script()`), and cases hash/compare by value.

How a case runs (`realize`): the nest kind's *template* (Python source using the public
API, the same text the replay script shows) is executed in a fresh namespace; then each
step is rendered to one line of Python (`Step.code()`, e.g. `i1 = schedule.split(i, 4)`)
and executed in that namespace. New indices are named by the step (the Python variable
receives the index, and accpy names indices after the variable), so names in printed
loops, C code and replay scripts all agree.

How cases are drawn (`draw_case(chooser)`): pick a nest kind and its sizes, then
repeatedly pick a step kind by weight and let its *drawer* (`STEP_KINDS`) choose the
step's arguments from the live schedule (`State`: current indices, extents, split
parents), applying each step as soon as it is drawn so that the next one sees the result.
The schedule transforms are drawn by accpy.testing's own drawer
(`accpy.testing.choices.draw_transform`, the one `accpy.testing.schedules` uses), here over
index names so that each becomes a replayable `Step`.
Every choice goes through a `Chooser` (accpy.testing.choices): `cases()` is the hypothesis strategy
(`HypothesisChooser`: boundary-biased, shrinkable); `random_cases(random.Random(seed), n)`
draws n distinct cases from a seeded generator (`RandomChooser`), which is how a test
gets hundreds of different cases out of a few hypothesis examples.

Running many cases cheaply (`check_cases`): all cases of a batch go into one
`acc.Package` (gcc runs once), each one is called on seeded random inputs and compared
with `accpy.nest.reference.evaluate` (exact for integers, a tolerance for floats). Before
the native call, the lowered loop IR runs in Python with bounds-checked arrays
(`lowered_to_python`): an out-of-bounds access is reported as such instead of corrupting
or crashing the test process, and a lowering bug (both disagree with the reference) is
told from a C-emission bug (only C disagrees). Runs over `PYTHON_LOOP_BUDGET` loop
iterations skip that check (`BatchReport.notes`). Each case is lowered alone first
(timed: `BatchReport.lower_seconds`), so an exception names its case, and a compile
error is attributed by rebuilding the batch's cases one by one. Nests with runtime
sizes (`kinds_with(True)`) pass their `values` as the acc.Dimension arguments.
`minimize(case, dir)` greedily simplifies a failing case (drop steps, smaller sizes and
arguments) for a regression test.

Extending it
  * a new nest: write a template (see `_MATMUL`) and register it with `nest_kind(...)`,
    giving the (lo, hi) range of each size; the template must define `nests` (run in
    order by the reference), `args` (the function's arguments, in order) and `schedule`.
  * a fused case: a template defining several nests and their schedules (`s0`, `s1`);
    steps on them are `Step(..., target="s0")`, and the fusion itself is a step too:
    `Step("fuse", (Ref("s0"), Ref("s1")), results=("schedule",), target="acc")`.
  * a new transform: write a drawer `(chooser, state) -> Step | None` and register it
    with `step_kind(name, weight, stage)`; `stage="plan"` steps run on `plan` (made from
    the schedule once the schedule steps are done), e.g. `Step("vectorize",
    (Ref("i1"),), target="plan")`. `draw_case` draws plan steps in a second phase
    (`plan_steps=` says how many).
  * an extra check on each run: `check_cases(..., extra_checks=[fn(realized, inputs,
    outputs) -> message or None])`.

Random plans (unroll, vectorize, caches, parallelize) on top of random schedules: see the
section "random PLANS" at the end (`draw_plan_case`, `random_plan_cases`, `plan_cases`,
`check_plan_cases`, `plan_ir_to_python`), used by tests/plan/test_property_plans.py.
"""
from __future__ import annotations

from .steps import Mapping, Ref, Step  # noqa: F401
from .nests import EXTENT, LAYOUTS, NEST_KINDS, NestKind, NestSpec, SMALL, _CONV1D, _CONV2D, _ELEMENTWISE, _MATMUL, _MATMUL_DYN, _MAXREDUCE, _ROWMAX_DYN, _ROWSUM, _TRANSPOSE3, kinds_with, narrow_kinds, nest_kind, order_invariant_kinds, ACCUMULATOR  # noqa: F401
from .cases import Case, Chooser, HypothesisChooser, RandomChooser, STEP_KINDS, State, StepKind, _exec, _transform_step, _weighted, cases, draw_case, draw_spec, random_cases, realize, repair_order, step_kind  # noqa: F401
from .run import OutOfBounds, OverBudget, PYTHON_LOOP_BUDGET, _Bounded, _copy, call_arguments, lowered_to_python, make_inputs, random_array, reference_outputs  # noqa: F401
from .batches import BatchReport, Failure, Realized, _first_difference, _indent, _parse_args, _run_lowered_python, _safe, build_package, check_case, check_cases, compare, realize_all, steps_from_code, tolerance_of  # noqa: F401
from .minimize import LEGITIMATE_REJECTIONS, _variants, avx2_target_steps, case_fails, legitimate_rejection, minimize  # noqa: F401
from .plans import _accesses_in_schedule, _array_name, _arrays, _cache_strides, _dim_var, _draw_caches, _draw_parallelize, _draw_unrolls, _draw_vectorize, _memory_step, _try_apply, draw_plan_case, draw_plan_steps, plan_cases, plan_features, race_free, random_plan_cases, reductions_read_elsewhere, vectorizable_along  # noqa: F401
from .plan_python import _Mem, plan_ir_to_python  # noqa: F401
from .plan_batches import PlanReport, _run_plan_python, check_plan_cases  # noqa: F401
