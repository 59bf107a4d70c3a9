"""Property tests: any sequence of split/tile/reorder/skew/pad leaves a nest's results unchanged.

Random nests (matmul, 1-D and 2-D convolution, element-wise with several statements,
sum/max/min reductions; extents 1..13; int32 compared exactly, float32 with a tolerance;
FIRST_MAJOR/LAST_MAJOR layouts) get random schedules of 0..6 transforms, are built
natively -- a batch of cases per package, so gcc runs once per batch -- and are compared
with the reference evaluator. The lowered loop IR is also run in Python, with bounds
checks, before each native call. Runtime extents (acc.Dimension) get a smaller run.
The generator lives in tests/support/schedgen/; a failure prints each failing case as a
replay script.
"""
from __future__ import annotations

import functools
import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import accpy as acc
from support import schedgen as sg

BATCH = 20
BATCHES = 26  # 520 distinct cases from seeded generators
MIN_CASES = 500
SLOW_LOWERING = 0.5  # seconds; reported (not failed) when exceeded


def _report_slow(rep_list, label):
    slow = sorted(((s, d) for s, d in rep_list if s > SLOW_LOWERING), reverse=True)
    for s, d in slow[:5]:
        print(f"[{label}] slow lowering {s:.2f} s: {d}")


@functools.lru_cache(maxsize=None)
def bulk_batches() -> tuple:
    """BATCHES batches of BATCH cases, all distinct, from fixed seeds (reproducible)."""
    seen: set = set()
    out = []
    for b in range(BATCHES):
        batch = sg.random_cases(random.Random(f"schedgen-{b}"), BATCH, exclude=seen, kinds=sg.kinds_with(False))
        seen.update(batch)
        out.append(tuple(batch))
    return tuple(out)


@pytest.mark.slow
def test_random_schedules_match_reference(tmp_path):
    """>= 500 distinct random (nest, schedule) cases, built in batches, all equal the reference."""
    seen: set = set()
    executed = 0
    failures: list = []
    lower_times: list = []
    notes: list = []
    t0 = time.perf_counter()
    for b, batch in enumerate(bulk_batches()):
        assert len(batch) == BATCH
        seen.update(batch)
        rep = sg.check_cases(batch, tmp_path / f"b{b}", name=f"props{b}")
        executed += rep.executed
        failures += rep.failures
        lower_times += rep.lower_seconds
        notes += rep.notes
    _report_slow(lower_times, "random schedules")
    worst = max(lower_times)
    print(f"{executed} cases in {time.perf_counter() - t0:.1f} s; slowest lowering {worst[0]:.3f} s ({worst[1]})")
    if failures:
        text = "\n\n".join(f.report() for f in failures)
        raise AssertionError(f"{len(failures)} of {len(seen)} generated schedules failed:\n\n{text}")
    assert len(seen) >= MIN_CASES
    assert executed == len(seen) >= MIN_CASES
    # the bounds-checked Python run of the lowered loops (which guards the native call) ran
    # for nearly every case; it is skipped only above its loop budget
    assert len(notes) <= len(seen) // 50, notes


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(batch=st.lists(sg.cases(kinds=sg.kinds_with(False)), min_size=1, max_size=10, unique=True))
def test_hypothesis_schedules_match_reference(batch, tmp_path_factory):
    """The same property on hypothesis-drawn cases (boundary-biased: extent 1, split by 1,
    split by extent + 3, ...), which hypothesis shrinks when one fails."""
    rep = sg.check_cases(batch, tmp_path_factory.mktemp("hyp"), name="hyp")
    rep.raise_failures()
    assert rep.executed == len(batch)


@pytest.mark.slow
def test_random_schedules_with_runtime_sizes_match_reference(tmp_path):
    """Runtime extents (acc.Dimension): splits of unknown extents, skews of them, tails."""
    seen: set = set()
    failures: list = []
    executed = 0
    for b in range(4):
        batch = sg.random_cases(random.Random(f"schedgen-dyn-{b}"), 15, exclude=seen, max_steps=4,
                                kinds=sg.kinds_with(True))
        seen.update(batch)
        rep = sg.check_cases(batch, tmp_path / f"d{b}", name=f"dyn{b}")
        executed += rep.executed
        failures += rep.failures
    if failures:
        text = "\n\n".join(f.report() for f in failures)
        raise AssertionError(f"{len(failures)} of {len(seen)} generated schedules failed:\n\n{text}")
    assert executed == len(seen) == 60


# -- the generator itself ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.slow
@given(case=sg.cases(step_kinds=["split", "tile", "skew", "pad"]), data=st.data())
def test_is_valid_loop_order_matches_the_split_rule(case, data):
    """A permutation is valid exactly when every split inner index follows its outer index;
    an invalid reorder raises ValueError and leaves the order unchanged; the repaired
    permutation the generator uses is always valid."""
    state = sg.realize(case)
    schedule = state.schedule
    dims = state.dims()
    parents = {n: p for n, _, p in dims}
    perm = data.draw(st.permutations([n for n, _, _ in dims]))
    pos = {n: k for k, n in enumerate(perm)}
    valid = all(p is None or pos[p] < pos[n] for n, p in parents.items())
    handles = [state.ns[n] for n in perm]
    assert schedule.is_valid_loop_order(handles) == valid
    assert schedule.is_valid_loop_order(*handles) == valid
    before = state.names()
    if valid:
        schedule.reorder(*handles)
        assert state.names() == list(perm)
    else:
        with pytest.raises(ValueError):
            schedule.reorder(*handles)
        assert state.names() == before
    repaired = sg.repair_order(perm, parents)
    assert sorted(repaired) == sorted(perm)
    assert schedule.is_valid_loop_order([state.ns[n] for n in repaired])


@pytest.mark.slow
def test_case_replay_round_trip():
    """Steps print as Python and parse back to equal data; a case realizes identically twice."""
    for case in sg.random_cases(random.Random("roundtrip"), 30):
        assert sg.steps_from_code(case.step_code()) == case.steps
        a, b = sg.realize(case), sg.realize(case)
        assert a.names() == b.names()
        assert a.schedule.to_python() == b.schedule.to_python()
        script = case.script()
        for step in case.steps:
            assert step.code() in script


@pytest.mark.slow
def test_generator_covers_the_requested_space():
    """The bulk run's cases include every nest kind, dtype and transform, layouts, sizes 1
    and primes, non-dividing / full / oversized splits, skews with unrolling, and 0..6 steps."""
    cases = [c for batch in bulk_batches() for c in batch]
    assert set(c.nest.kind for c in cases) == set(sg.kinds_with(False))
    assert {c.nest.dtype for c in cases} == {"int32", "float32"}
    assert any("LAST_MAJOR" in c.nest.layouts for c in cases)
    assert {len(c.steps) for c in cases} == set(range(7))
    ops = [s for c in cases for s in c.steps]
    assert {s.op for s in ops} == {"split", "tile", "reorder", "skew", "pad"}
    assert any(s.op == "skew" and s.kwargs for s in ops)
    sizes = {x for c in cases for x in c.nest.sizes}
    assert {1, 2, 3, 5, 7, 11, 13} <= sizes
    kinds_of_split = set()
    for c in cases:
        state = sg.State(c)
        for s in c.steps:
            if s.op == "split":
                ext, size = state.extent(s.args[0]), s.args[1]
                kinds_of_split.add("1" if size == 1 else "==" if size == ext else ">" if size > ext
                                   else "divides" if ext % size == 0 else "non-dividing")
            state.apply(s)
    assert kinds_of_split == {"1", "==", ">", "divides", "non-dividing"}


def test_harness_reports_failures_readably(tmp_path, monkeypatch):
    """The checker is not vacuous: a wrong result, a raising schedule and a failed extra check
    are each reported with the case's replay script and the first differing element."""
    good = sg.Case(sg.NestSpec("matmul", (3, 4, 5)), sg.steps_from_code("i1 = schedule.split(i, 2)"), 7)
    bad_step = sg.Case(sg.NestSpec("conv1d", (4, 2)), sg.steps_from_code("i1 = schedule.split(i, 0)"))
    rep = sg.check_cases([good, bad_step], tmp_path / "a",
                         extra_checks=[lambda r, inputs, got: "forced failure" if r.case is good else None])
    assert rep.executed == 1 and len(rep.failures) == 2
    with pytest.raises(AssertionError) as err:
        rep.raise_failures()
    text = str(err.value)
    assert "forced failure" in text and "realizing the schedule raised" in text
    assert "i1 = schedule.split(i, 0)" in text and "C[i, j] += A[i, k] * B[k, j]" in text

    real = sg.reference_outputs

    def off_by_one(state, inputs):
        out = real(state, inputs)
        out[-1][(0,) * out[-1].ndim] += 1
        return out

    monkeypatch.setattr(sg.batches, "reference_outputs", off_by_one)  # where check_cases looks it up
    rep = sg.check_cases([good], tmp_path / "b")
    assert [f.what for f in rep.failures] == ["native result differs from the reference"]
    assert "C[0, 0]: got" in rep.failures[0].details
    assert "lowered IR in Python: C[0, 0]" in rep.failures[0].details


# -- regressions found by the generator -----------------------------------------------------------

def _check(tmp_path, spec, code, seed=0):
    case = sg.Case(spec, sg.steps_from_code(code), seed)
    rep = sg.check_case(case, tmp_path)
    assert rep.executed == 1


def test_regression_skewed_split_inner_keeps_its_lower_bound(tmp_path):
    """A split's inner index is only real on [0, size). Its lower bound used to be left to
    the loop box (0 <= ii), so after a skew moved it (ii -> ii - i1) the points with a
    negative inner coordinate ran too (space.py: split recorded only `ii <= size - 1`)."""
    _check(tmp_path, sg.NestSpec("conv1d", (2, 2)),
           "i1 = schedule.split(i, 2)\nj1 = schedule.split(j, 1)\nschedule.skew(j1, i1)")
    _check(tmp_path, sg.NestSpec("conv1d", (7, 11), "float32"),
           "i1 = schedule.split(i, 3)\nj1 = schedule.split(j, 1)\nschedule.skew(j1, i1)", seed=1215)


def test_regression_padded_split_inner_keeps_its_lower_bound(tmp_path):
    """Same cause as above, through pad: pad(ii, 1) shifts the inner index to [1, size + 1)."""
    _check(tmp_path, sg.NestSpec("conv1d", (3, 1)), "i1 = schedule.split(i, 1)\nschedule.pad(i1, 1)")
    _check(tmp_path, sg.NestSpec("conv1d", (13, 12), "float32"),
           "i1, = schedule.tile({i: 10})\ni2 = schedule.split(i1, 11)\nschedule.pad(i2, 2)", seed=885893)


def test_regression_split_inner_guard_is_exact():
    """The model-level statement of the fix: with a padded split inner index, every real
    point runs exactly once (the lowered loops run in Python count the visits)."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.int32, shape=(6,))
    nest = acc.Nest(shape=(6,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1

    s = nest.create_schedule()
    ii = s.split(i, 2)
    s.pad(ii, 1)
    fn = acc.Package().add(s, args=(A,), base_name="f").lowered("f")
    a = np.zeros(6, np.int32)
    sg.lowered_to_python(fn)([a])
    assert a.tolist() == [1] * 6, s.to_python(unswitched=True)


# Schedules whose unswitching asked for a loop cut it could not make (the cut had been made
# already and the two bounds were still unordered, or the piece budget was spent): the
# internal `_NeedCut` request escaped from lowering as an exception (lower/unswitch.py).
UNSWITCH_CUT_CASES = [
    (sg.NestSpec("elementwise", (5, 2)), "schedule.skew(j, i)\ni1, = schedule.tile({i: 2})\nschedule.reorder(j, i, i1)"),
    (sg.NestSpec("matmul", (6, 6, 10)), "schedule.skew(j, k)\nschedule.skew(i, k)\nj1 = schedule.split(j, 13)"),
    (sg.NestSpec("maxreduce", (2, 1, 3)), "i1 = schedule.split(i, 5)\nschedule.skew(i1, k)\ni2 = schedule.split(i1, 6)"),
    (sg.NestSpec("maxreduce", (4, 2, 8)), "schedule.skew(k, i)\nschedule.skew(j, k)\nk1 = schedule.split(k, 9)"),
    (sg.NestSpec("elementwise", (2, 1)), "schedule.skew(i, j)\nj1 = schedule.split(j, 3)\nschedule.skew(j, i)\n"
                                         "i1 = schedule.split(i, 2)\nschedule.reorder(i, j, j1, i1)"),
]


@pytest.mark.slow
@pytest.mark.parametrize("spec,code", UNSWITCH_CUT_CASES, ids=[s.kind + str(n) for n, (s, _) in
                                                                enumerate(UNSWITCH_CUT_CASES)])
def test_regression_unswitch_cut_requests_never_escape(tmp_path, spec, code):
    case = sg.Case(spec, sg.steps_from_code(code))
    text = sg.realize(case).schedule.to_python(unswitched=True)
    assert "for " in text
    sg.check_case(case, tmp_path)


@pytest.mark.slow
def test_regression_lowering_is_deterministic():
    """The same schedule lowers to the same loops every time. Bounds used to be ordered by
    Var hashes (identities), so which cut unswitching tried first -- and whether it failed,
    see above -- changed from run to run (lower/unswitch.py `_prune`, and the variable
    elimination order of analysis/polyhedra.py `is_empty`)."""
    cases = [sg.Case(s, sg.steps_from_code(c)) for s, c in UNSWITCH_CUT_CASES]
    cases += sg.random_cases(random.Random("determinism"), 25, kinds=["matmul", "conv1d", "maxreduce"])
    for case in cases:
        texts = {sg.realize(case).schedule.to_python(unswitched=True) for _ in range(4)}
        assert len(texts) == 1, case.describe()


# -- runtime sizes --------------------------------------------------------------------------------

def _run_lowered_with_sizes(case, sizes):
    """Run the case's lowered loops in Python (bounds-checked) for each (M, N, ...) in `sizes`."""
    state = sg.realize(case)
    fn = acc.Package().add(state.plan, args=state.args, base_name="f").lowered("f")
    dims = [a for a in state.args if isinstance(a, acc.Dimension)]
    for vals in sizes:
        state.ns["values"] = dict(zip(dims, vals))
        inputs = sg.make_inputs(state, 1)
        want = sg.reference_outputs(state, inputs)
        got = [sg._copy(x) for x in inputs]
        sg.lowered_to_python(fn)(got)  # raises OutOfBounds on a bad access
        assert sg.compare(state, got, want) is None, (vals, case.describe())


def test_regression_unswitch_checks_constraints_on_enclosing_loops(tmp_path):
    """When an outer loop bound is not affine (here ceil(N/3) + ceil(M/2) - 1 after the skew),
    unswitching handles the inner loops alone, with the outer loop counters as symbols. Their
    constraints (e.g. `2*i + i1 < M`) were taken as facts and never checked, so the tail
    rows ran past the end of S (lower/unswitch.py `_separate`)."""
    code = "i1 = schedule.split(i, 2)\nj1 = schedule.split(j, 3)\nschedule.skew(j, i)"
    case = sg.Case(sg.NestSpec("rowmax_dyn", (5, 7)), sg.steps_from_code(code))
    _run_lowered_with_sizes(case, [(5, 7), (1, 1), (2, 9), (8, 3), (13, 13)])
    sg.check_cases([sg.Case(sg.NestSpec("rowmax_dyn", s), case.steps) for s in [(5, 7), (1, 1), (13, 13)]],
                   tmp_path).raise_failures()


def test_regression_unswitch_prunes_only_with_enforced_facts():
    """A bound may be dropped as redundant only under facts the generated loops enforce. A
    projected constraint on runtime sizes alone (`M >= 1`) is enforced by nothing, so with
    M = 0 the loops ran and wrote S[0] of an empty S (lower/unswitch.py `bounds`)."""
    code = "j1 = schedule.split(j, 16)\nschedule.skew(i, j, unroll_loops_smaller_than=1)"
    case = sg.Case(sg.NestSpec("rowmax_dyn", (2, 5)), sg.steps_from_code(code))
    _run_lowered_with_sizes(case, [(0, 3), (0, 0), (3, 0), (2, 5), (7, 20)])


def test_nested_runtime_splits_unswitch_without_guards(tmp_path):
    """ceil(ceil(N/2)/4) is built as one division, (N + 7) // 8, and loop bounds of the form
    floor(Y/d) + R convert to exact affine constraints, so a split of a split runtime extent
    lowers to guard-free full tiles and tails (ir/expr.py `ceildiv`, ir/affine.py)."""
    code = "j1 = schedule.split(j, 2)\nj2 = schedule.split(j, 4)"
    case = sg.Case(sg.NestSpec("rowmax_dyn", (5, 7)), sg.steps_from_code(code))
    text = sg.realize(case).schedule.to_python(unswitched=True)
    assert "if " not in text and "(N + 7) // 8" in text, text
    _run_lowered_with_sizes(case, [(5, 7), (1, 1), (3, 8), (2, 17), (4, 0)])
    sg.check_case(case, tmp_path)


def test_floor_form_loop_bounds_are_exact():
    """lower/upper_bound_constraints of floor(Y/d) + R forms agree with direct evaluation."""
    from accpy.ir.affine import lower_bound_constraints, upper_bound_constraints
    from accpy.ir.affine import ceildiv
    from accpy.ir.expr import BinOp, Const, Var, idx_op

    N, v = Var("N"), Var("v")
    ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "floordiv": lambda a, b: a // b}

    def ev(e, env):
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            return env[e]
        assert isinstance(e, BinOp)
        return ops[e.op](ev(e.a, env), ev(e.b, env))

    skewed = idx_op("sub", idx_op("add", Const(11), ceildiv(N, 11)), Const(1))
    exprs = [ceildiv(ceildiv(N, 2), 4), idx_op("add", ceildiv(N, 3), Const(5)), skewed, ceildiv(skewed, 6),
             ceildiv(ceildiv(skewed, 6), 7), idx_op("floordiv", idx_op("sub", N, Const(3)), Const(4)),
             idx_op("add", N, Const(2)), idx_op("sub", idx_op("floordiv", N, Const(3)), N)]
    for e in exprs:
        lo, up = lower_bound_constraints(v, e), upper_bound_constraints(v, e)
        assert lo is not None and up is not None
        for n in range(-4, 70):
            for x in range(-50, 50):
                env = {N: n, v: x}
                holds = [all(c.const + sum(k * env[w] for w, k in c.terms) >= 0 for c in cs) for cs in (lo, up)]
                assert holds == [x >= ev(e, env), x < ev(e, env)], (e, n, x)


# ---- the same nests through accpy.testing (the strategies users write their tests with) ----------

@pytest.mark.slow
@given(data=st.data())
@settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_accpy_testing_schedules_of_the_nest_kinds(data):
    """accpy.testing's strategies on every single-nest kind of the generator (ordered ones
    included): drawn schedules match the reference evaluator (plans: tests/test_testing.py)."""
    import accpy.testing as at

    kinds = sorted(k for k, v in sg.NEST_KINDS.items() if v.default)  # (the narrow ones: tests/fuzz)
    spec = sg.draw_spec(sg.HypothesisChooser(data.draw), kinds=kinds)
    state = sg.State(spec)
    assume(len(state.nests) == 1)
    schedule = data.draw(at.schedules(state.nests[0], max_transforms=3))
    values = data.draw(at.arrays(state.args))
    at.assert_matches_reference(schedule, state.args, data=values)
