"""Property tests: random plans on random legal schedules leave results unchanged.

Random nests (matmul, convolutions, element-wise, reductions, a transpose; int32 exact,
float32 within a tolerance; FIRST_MAJOR / LAST_MAJOR; some with runtime sizes) get random
schedules (split / tile / reorder / skew / pad) and random plans on top: caches of inputs
and outputs at random indices, levels and budgets (sometimes multicaches, other layouts,
wider element types, caches of caches, double buffering), vectorization of an index along
which the accesses are contiguous (the indices inside it unrolled), unrolling of small
inner indices, parallelization of outer indices the written elements move with; a quarter
of the plans target AVX2 instead of the host. Each batch is one package; every case runs
natively and, first, as lowered IR in Python with bounds-checked memory. A plan that accpy
refuses when it is built passes only for a reason listed in
`schedgen.LEGITIMATE_REJECTIONS` (counted and printed). The generator lives in
tests/support/schedgen/ (`draw_plan_case`, `check_plan_cases`).
"""
from __future__ import annotations

import collections
import functools
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import schedgen as sg

BATCH = 25
BATCHES = 8  # 200 distinct cases from seeded generators
MIN_EXECUTED = 150
MAX_REJECTED = 0.25  # at most this share of the cases may be refused (legitimately) at build


@functools.lru_cache(maxsize=None)
def plan_batches() -> tuple:
    seen: set = set()
    out = []
    for b in range(BATCHES):
        batch = sg.random_plan_cases(random.Random(f"plangen-{b}"), BATCH, exclude=seen)
        seen.update(batch)
        out.append(tuple(batch))
    return tuple(out)


MIXED_TYPES = "ignore:vectorize.*no vector instructions for mixed element types"  # (wider caches: C's vectorizer)


@pytest.mark.slow
@pytest.mark.filterwarnings(MIXED_TYPES)
def test_random_plans_match_reference(tmp_path):
    """>= 150 random (schedule, plan) cases executed, all equal to the reference."""
    t0 = time.perf_counter()
    executed = python_checked = 0
    failures, rejected, notes = [], [], []
    features: collections.Counter = collections.Counter()
    cases = 0
    for b, batch in enumerate(plan_batches()):
        rep = sg.check_plan_cases(batch, tmp_path / f"b{b}", name=f"plans{b}")
        cases += rep.cases
        executed += rep.executed
        python_checked += rep.python_checked
        failures += rep.failures
        rejected += rep.rejected
        notes += rep.notes
        features.update(rep.features)
    why = collections.Counter(w for _, w in rejected)
    print(f"{cases} cases: {executed} executed ({python_checked} also as IR in Python), {len(rejected)} "
          f"rejected at build, {len(failures)} failed, in {time.perf_counter() - t0:.1f} s")
    for w, n in why.most_common():
        print(f"  rejected {n}x: {w}")
    print("  plan features executed:", dict(sorted(features.items())))
    if failures:
        text = "\n\n".join(f.report() for f in failures)
        raise AssertionError(f"{len(failures)} of {cases} random plans failed:\n\n{text}")
    assert executed >= MIN_EXECUTED
    assert python_checked >= 0.9 * executed  # nearly every case also ran bounds-checked in Python
    assert len(rejected) <= MAX_REJECTED * cases, why
    # the plans exercise every kind of plan step
    for f in ("cache", "index", "level", "max_elements", "trigger_index", "trigger_level", "layout", "element_type",
              "cache_of_cache", "double_buffer", "vectorize", "unroll", "parallelize", "parallelize_2", "avx2"):
        assert features[f] > 0, f"no executed case used {f}: {dict(features)}"


@pytest.mark.filterwarnings(MIXED_TYPES)
@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(batch=st.lists(sg.plan_cases(), min_size=1, max_size=6, unique=True))
def test_hypothesis_plans_match_reference(batch, tmp_path_factory):
    """The same property on hypothesis-drawn cases (shrinkable when one fails)."""
    rep = sg.check_plan_cases(batch, tmp_path_factory.mktemp("hypplans"), name="hypplans")
    rep.raise_failures()
    assert rep.executed + len(rep.rejected) == len(batch)


# -- minimized random cases that once failed (each one a bug fixed in accpy/lower) ----------------

REGRESSIONS = {
    # a private cache of a parallel loop (j1 inside j): where padding leaves j a single
    # iteration, j1 is the outermost parallel loop and the cache must be shared there
    "parallel_cache_in_padded_piece": ("matmul", (13, 7, 13), "int32", """
        schedule.pad(j, 3)
        k1 = schedule.split(k, 5)
        k2, k3 = schedule.tile({k: 2, k1: 6})
        j1 = schedule.split(j, 7)
        cache0 = plan.cache(A, index=j1)
        plan.unroll(k2)
        plan.parallelize((j, j1), policy='dynamic')"""),
    # a cache block from rational projections reached past the end of A (copy-in read A[9])
    "cache_block_clamped_to_the_array": ("matmul", (1, 4, 9), "float32", """
        k1 = schedule.split(k, 7)
        k2 = schedule.split(k1, 2)
        cache0 = plan.cache(A, max_elements=1000)
        plan.parallelize((i, j), max_threads=3)"""),
    # ... and its (vectorized) copy loop starts at a clamped, non-affine origin
    "vectorized_copy_of_a_clamped_block": ("conv1d", (4, 6), "int32", """
        schedule.reorder(i, j)
        schedule.pad(i, 3)
        schedule.skew(i, j, unroll_loops_smaller_than=2)
        j1 = schedule.split(j, 4)
        cache0 = plan.cache(B, index=j)
        cache1 = plan.cache(A, max_elements=200, element_type=acc.ScalarType.int64)"""),
    # skewed loops: the block's ends are a min / max of several bounds ("not affine" before)
    "skewed_cache_extent": ("rowsum", (8, 6), "float32", """
        schedule.skew(j, i, unroll_loops_smaller_than=5)
        schedule.reorder(j, i)
        schedule.skew(i, j)
        schedule.reorder(i, j)
        cache0 = plan.cache(S, index=j, layout=acc.Array.Layout.LAST_MAJOR)"""),
    # a multicache whose site loop unswitching cut into full tiles and a tail
    "multicache_site_cut_by_unswitching": ("matmul", (5, 7, 3), "int32", """
        i1 = schedule.split(i, 2)
        j1 = schedule.split(j, 4)
        schedule.reorder(i, j, k, i1, j1)
        cache0 = plan.cache(B, index=j, trigger_index=i)"""),
    # vectorized with unrolled rows inside (the copies were thought to depend on each other)
    # unrolled copies of U[j] += .. one element apart after a skew: reductions commute
    "vectorized_overlapping_reductions": ("rowsum", (6, 13), "int32", """
        i1, = schedule.tile({i: 3})
        schedule.reorder(j, i, i1)
        schedule.skew(j, i1, unroll_loops_smaller_than=5)
        plan.unroll(i)
        plan.unroll(i1)
        plan.vectorize(j)"""),
    "vectorized_with_unrolled_rows_inside": ("elementwise", (3, 5), "float32", """
        schedule.reorder(j, i)
        plan.unroll(i)
        plan.vectorize(j)"""),
    # (a harness bug) a vectorized loop of one iteration: its counter k stays in subscripts where it
    # cancels (Y[j - k, k - i] of a Y of shape (8, 1)); the IR run in Python raised NameError
    "vectorized_loop_of_one_iteration": ("maxreduce", (6, 8, 1), "int32", """
        schedule.skew(k, i)
        schedule.skew(j, k)
        cache0 = plan.cache(X, index=k)
        plan.vectorize(k)"""),
}


def regression_case(name) -> sg.Case:
    kind, sizes, dtype, code = REGRESSIONS[name]
    steps = sg.steps_from_code("\n".join(line.strip() for line in code.strip().splitlines()))
    return sg.Case(sg.NestSpec(kind, sizes, dtype), steps, seed=7)


def test_minimized_regressions(tmp_path):
    cases = [regression_case(n) for n in REGRESSIONS]
    rep = sg.check_plan_cases(cases, tmp_path, name="planregr")
    rep.raise_failures()
    assert rep.executed == len(cases), rep.rejected
    assert rep.python_checked == len(cases)


@pytest.mark.slow
def test_vectorized_loops_of_every_extent_run_in_python_and_natively(tmp_path):
    """The case of issue 33 (a vectorized reduction loop of one iteration) at every extent of
    the vectorized loop, and a vectorized element-wise loop of 1..17 iterations (masked tails,
    whole vectors, both): the lowered IR runs in Python for each, and both it and the native
    kernel give the reference's results."""
    code = """
        schedule.skew(k, i)
        schedule.skew(j, k)
        cache0 = plan.cache(X, index=k)
        plan.vectorize(k)"""
    steps = sg.steps_from_code("\n".join(line.strip() for line in code.strip().splitlines()))
    cases = [sg.Case(sg.NestSpec("maxreduce", (6, 8, K), "int32"), steps, seed=K) for K in range(1, 10)]
    steps = sg.steps_from_code("plan.vectorize(j)")
    cases += [sg.Case(sg.NestSpec("elementwise", (2, N), "float32"), steps, seed=N) for N in range(1, 18)]
    rep = sg.check_plan_cases(cases, tmp_path, name="extents")
    rep.raise_failures()
    assert rep.executed == rep.python_checked == len(cases), rep.rejected


# -- the generator itself ---------------------------------------------------------------------


@pytest.mark.slow
def test_plan_cases_replay_identically():
    """Plan steps print as Python and parse back; realizing a case twice gives the same plan."""
    cases = sg.random_plan_cases(random.Random("plan-roundtrip"), 12)
    assert any(s.op == "create_plan" for c in cases for s in c.steps)  # some target AVX2
    def emitted(state):
        try:
            return state.plan.emit_c("f", state.args)
        except ValueError as e:  # (a plan refused when lowered: refused the same way)
            return repr(e)

    for case in cases:
        assert sg.steps_from_code(case.step_code()) == case.steps
        assert emitted(sg.realize(case)) == emitted(sg.realize(case))


@pytest.mark.slow
def test_generated_parallel_plans_are_race_free_by_the_generators_rule():
    for case in sg.random_plan_cases(random.Random("plan-races"), 40):
        state = sg.realize(case)
        if state.plan.parallel is not None:
            names = [ix.name for ix in state.plan.parallel[0]]
            assert sg.race_free(state, names), case.describe()


def test_legitimate_rejections_are_recognized():
    text = "Traceback ...\naccpy.errors.ScheduleError: cache of B: no key-slice has an active block within " \
           "max_elements=4"
    assert sg.legitimate_rejection(text) is not None
    runtime_only = "accpy.errors.ScheduleError: cache of A: the block's extent along dimension 1 depends on " \
                   "runtime sizes; caches need blocks of bounded size"
    # (only where the nest has runtime sizes: in another nest it is a bug)
    assert sg.legitimate_rejection(runtime_only, sg.NestSpec("matmul", (2, 2, 2))) is None
    assert "runtime size" in sg.legitimate_rejection(runtime_only, sg.NestSpec("matmul_dyn", (2, 2, 2)))
    assert sg.legitimate_rejection("accpy.errors.ScheduleError: vectorize(j): A is accessed with a stride of 9") \
        is None


def test_python_ir_memory_checks_every_vector_lane():
    import numpy as np

    m = sg._Mem(np.arange(9, dtype=np.float32), (9,), (1,), "A")
    assert m.vld((4,), 8, 5) == [4, 5, 6, 7, 8, 0, 0, 0]  # masked: the skipped lanes read 0
    with pytest.raises(sg.OutOfBounds, match="vector lane 5 of A"):
        m.vld((4,), 8, 6)
    with pytest.raises(sg.OutOfBounds, match=r"A\[9\] is out of bounds"):
        m.ld((9,))
    m.vst((0,), [1.5] * 8, 8, 3)  # masked store: lanes 3.. untouched
    assert m.flat[:4].tolist() == [1.5, 1.5, 1.5, 3]
    with pytest.raises(sg.OutOfBounds):
        m.vst((2,), [0] * 8, 8, None)


def test_python_ir_memory_sums_subscripts_of_removed_loop_counters():
    """Subscripts naming the counter of a loop lowering removed are checked as C uses them:
    summed times the strides (the same sum for any value of the counter), inside the buffer."""
    import numpy as np
    from support.schedgen.plan_python import _Loose

    y = sg._Mem(np.arange(8, dtype=np.int32), (8, 1), (1, 1), "Y")
    assert y.ld(_Loose((5, 0), (4, 1), ["k"])) == 5  # Y[j - k, k - i] with j - i = 5
    with pytest.raises(AssertionError, match=r"the address of Y\[5, 0\] moves with \['k'\]"):
        y.ld(_Loose((5, 0), (5, 1), ["k"]))
    with pytest.raises(sg.OutOfBounds, match="Y at element offset 8"):
        y.ld(_Loose((8, 0), (7, 1), ["k"]))
