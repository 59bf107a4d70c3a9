"""Invalid plans: every bad argument combination of cache / parallelize / vectorize /
kernelize / unroll raises ValueError (TypeError for a wrong type) with a clear message,
following Accera's argument rules (reference/accera-api.md §1.5, §5.2); rules that need the
lowered loops (non-contiguous vector accesses, races, budgets nothing fits) raise
`acc.ScheduleError` (a ValueError) when the package is built, naming the array or index.
A rejected call leaves the plan as it was."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.plan.cache import MemorySpace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi.kernels import stencil_nest  # noqa: E402

I32, F32 = acc.ScalarType.int32, acc.ScalarType.float32
FM, LM = acc.Array.Layout.FIRST_MAJOR, acc.Array.Layout.LAST_MAJOR
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_GOLD_6148)  # a named model: the same code on every machine
# AVX2 has no scatters and accpy emits no AVX2 gathers: strided vector accesses are refused
# there (on AVX-512 they become gathers/scatters: tests/test_vectorize_subtree.py)
AVX2 = acc.Target.HOST(extensions=("avx2", "fma"), vector_bytes=32)


def matmul(role_a=acc.Role.INPUT, role_c=acc.Role.INPUT_OUTPUT, target=None, M=8, N=32, K=4, data=None):
    """Tiled matmul, order (i, j, k, ii, jj): levels 5 4 3 2 1."""
    if role_a is acc.Role.CONST:
        A = acc.Array(role=role_a, data=np.ones((M, K), np.float32), name="A")
    else:
        A = acc.Array(role=role_a, element_type=F32, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(K, N), name="B")
    C = acc.Array(role=role_c, element_type=F32, shape=(M, N), name="C")
    Z = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(M,), name="Z")  # not used by the logic
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    ii = s.split(i, 2)
    jj = s.split(j, 16)
    s.reorder(i, j, k, ii, jj)
    plan = s.create_plan(target)
    return plan, dict(A=A, B=B, C=C, Z=Z, i=i, j=j, k=k, ii=ii, jj=jj, nest=nest, schedule=s)


def state(plan):
    """What a rejected call must leave unchanged."""
    return (plan.caches, tuple(plan.loop_annotations().items()), plan.parallel)


def rejects(call, exc=ValueError, match=None):
    """`call(plan, x)` raises `exc` (message matching `match`) and changes nothing."""
    plan, x = matmul()
    before = state(plan)
    with pytest.raises(exc, match=match) as e:
        call(plan, x)
    assert state(plan) == before
    assert str(e.value)  # a message, not a bare exception
    return e.value


# ------------------------------------------------------------------------------------------
# cache: which of index / level / max_elements, and triggers
# ------------------------------------------------------------------------------------------

EXACTLY_ONE = "exactly one of index, level or max_elements"


@pytest.mark.parametrize("kw", [
    dict(),
    dict(index="k", level=2),
    dict(index="k", max_elements=10),
    dict(level=2, max_elements=10),
    dict(index="k", level=3, max_elements=10),
    dict(trigger_index="i"),
    dict(trigger_level=5),
    dict(layout=LM, thrifty=True),
], ids=lambda kw: ",".join(kw) or "nothing")
def test_cache_needs_exactly_one_of_index_level_max_elements(kw):
    rejects(lambda p, x: p.cache(x["A"], **{k: x[v] if k.endswith("index") else v for k, v in kw.items()}),
            match=EXACTLY_ONE)


def test_index_excludes_trigger_level():
    rejects(lambda p, x: p.cache(x["A"], index=x["ii"], trigger_level=4),
            match="index cannot be combined with level or trigger_level")


def test_level_excludes_trigger_index():
    rejects(lambda p, x: p.cache(x["A"], level=2, trigger_index=x["k"]),
            match="level cannot be combined with index or trigger_index")


def test_not_both_triggers():
    rejects(lambda p, x: p.cache(x["A"], max_elements=8, trigger_index=x["k"], trigger_level=3),
            match="at most one of trigger_index and trigger_level")


def test_max_elements_excludes_triggers():
    for kw in (dict(trigger_level=3), dict(trigger_index="k")):
        rejects(lambda p, x: p.cache(x["A"], max_elements=8, **{k: x[v] if isinstance(v, str) else v
                                                                  for k, v in kw.items()}),
                match="max_elements cannot be combined with a trigger")


@pytest.mark.parametrize("level,trigger", [(2, 1), (3, 2), (5, 4)])
def test_level_must_not_exceed_the_trigger_level(level, trigger):
    rejects(lambda p, x: p.cache(x["A"], level=level, trigger_level=trigger),
            match=rf"trigger level \({trigger}\) must be >= the cache level \({level}\)")
    order = ["i", "j", "k", "ii", "jj"]
    rejects(lambda p, x: p.cache(x["A"], index=x[order[5 - level]], trigger_index=x[order[5 - trigger]]),
            match="must be >= the cache level")


@pytest.mark.parametrize("bad", [0, -1, 6, 100])
def test_levels_are_between_1_and_the_number_of_indices(bad):
    rejects(lambda p, x: p.cache(x["A"], level=bad), match=r"level: expected an integer level in 1\.\.5")
    rejects(lambda p, x: p.cache(x["A"], level=1, trigger_level=bad),
            match=r"trigger_level: expected an integer level in 1\.\.5")


@pytest.mark.parametrize("bad", [2.0, "2", True, (2,)])
def test_levels_are_integers(bad):
    rejects(lambda p, x: p.cache(x["A"], level=bad), match="level")


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_max_elements_is_a_positive_integer(bad):
    rejects(lambda p, x: p.cache(x["A"], max_elements=bad), match=r"max_elements: expected an integer > 0")


@pytest.mark.parametrize("arr", ["C"])
@pytest.mark.parametrize("kw", [dict(index="ii", trigger_index="k"), dict(level=2, trigger_level=3),
                                dict(index="k", double_buffer=True), dict(level=1, trigger_level=1)])
def test_triggers_and_double_buffer_need_an_input(arr, kw):
    e = rejects(lambda p, x: p.cache(x[arr], **{k: x[v] if isinstance(v, str) else v for k, v in kw.items()}),
                match="need an INPUT or CONST source")
    assert "C is INPUT_OUTPUT" in str(e)


def test_triggers_and_double_buffer_on_an_output():
    C = acc.Array(role=acc.Role.OUTPUT, element_type=F32, shape=(4, 4), name="C")
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(4, 4), name="A")
    nest = acc.Nest(shape=(4, 4))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] = A[i, j]

    plan = nest.create_plan()
    with pytest.raises(ValueError, match="C is OUTPUT"):
        plan.cache(C, index=j, trigger_index=i)
    with pytest.raises(ValueError, match="C is OUTPUT"):
        plan.cache(C, index=j, double_buffer=True)
    assert plan.caches == ()
    plan.cache(A, index=j, trigger_index=i, double_buffer=True)  # an INPUT may


def test_triggers_and_double_buffer_are_fine_on_input_and_const():
    for role in (acc.Role.INPUT, acc.Role.CONST):
        plan, x = matmul(role_a=role)
        plan.cache(x["A"], index=x["ii"], trigger_index=x["k"], double_buffer=True)
        plan.cache(x["B"], level=1, trigger_level=4, double_buffer=True, double_buffer_location=MemorySpace.NONE)


def test_double_buffer_location_requires_double_buffer():
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], double_buffer_location=MemorySpace.SHARED),
            match="double_buffer_location requires double_buffer=True")


# -- caches of caches -----------------------------------------------------------------------------


@pytest.mark.parametrize("outer,inner", [(3, 3), (3, 4), (2, 5), (1, 1)])
def test_inner_cache_sits_at_a_lower_level(outer, inner):
    plan, x = matmul()
    c = plan.cache(x["C"], level=outer)
    before = state(plan)
    with pytest.raises(ValueError, match=rf"lower level than its source \(source level {outer}, requested {inner}\)"):
        plan.cache(c, level=inner)
    assert state(plan) == before


def test_outer_level_must_reach_the_inner_trigger_level():
    plan, x = matmul()
    outer = plan.cache(x["A"], level=3)
    with pytest.raises(ValueError, match=r"source cache's level \(3\) must be >= this cache's trigger level \(4\)"):
        plan.cache(outer, level=2, trigger_level=4)
    plan.cache(outer, level=2, trigger_level=3)  # equal is fine


def test_budget_caches_nest_only_in_budget_caches_with_a_larger_budget():
    plan, x = matmul()
    budget = plan.cache(x["B"], max_elements=100)
    fixed = plan.cache(x["A"], level=4)
    with pytest.raises(ValueError, match="budget .* only be nested in another budget cache"):
        plan.cache(budget, level=2)
    with pytest.raises(ValueError, match="budget .* only be nested in another budget cache"):
        plan.cache(fixed, max_elements=4)
    for bad in (100, 101):
        with pytest.raises(ValueError, match="smaller max_elements than its source"):
            plan.cache(budget, max_elements=bad)
    plan.cache(budget, max_elements=99)


def test_cache_of_a_cache_of_another_plan():
    plan, x = matmul()
    other, y = matmul()
    c = other.cache(y["A"], level=4)
    with pytest.raises(ValueError, match="belongs to another plan"):
        plan.cache(c, level=2)


# -- indices, sources, types ---------------------------------------------------------------------


def test_unknown_indices():
    _, y = matmul()  # indices of another schedule
    rejects(lambda p, x: p.cache(x["A"], index=y["k"]), match="Unknown index")
    rejects(lambda p, x: p.cache(x["A"], index=x["ii"], trigger_index=y["i"]), match="Unknown index")


def test_wrong_types():
    rejects(lambda p, x: p.cache("A", index=x["k"]), TypeError, match="source: expected an acc.Array or a Cache")
    rejects(lambda p, x: p.cache(x["A"], index="k"), TypeError, match="index: expected an index")
    rejects(lambda p, x: p.cache(x["A"], index=x["ii"], trigger_index=4), TypeError,
            match="trigger_index: expected an index")
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], location="SHARED"), TypeError, match="location")


def test_bad_layout_element_type_strategy_location():
    # (coefficients in first- or last-major order are layouts: tests/package/test_package_conformance.py)
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], layout=(4, 4)), match=r"layout: the coefficients \(4, 4\)")
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], layout=(1, 4, 16)), match="layout: expected 2 coefficients")
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], layout="row"), match="layout: expected")
    with pytest.raises((TypeError, ValueError), match="element_type"):
        plan, x = matmul()
        plan.cache(x["A"], index=x["k"], element_type="float33")
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], strategy="BLOCKED"), exc=TypeError,
            match="strategy: expected an acc.CacheStrategy")
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], strategy=acc.CacheStrategy.BLOCKED),
            match="is for GPU targets; a CPU cache takes only acc.AUTO")
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], location=MemorySpace.GLOBAL), match="GLOBAL")
    rejects(lambda p, x: p.cache(x["A"], index=x["k"], location=MemorySpace.SCRATCHPAD),
            match="has no SCRATCHPAD memory")


def test_source_must_be_used_by_the_logic():
    rejects(lambda p, x: p.cache(x["Z"], index=x["k"]), match="Z is not used by this schedule's logic")


def test_budget_below_every_key_slice_caches_one_iteration(tmp_path):
    """As Accera: level 0, the element one iteration reads (tests/lower/test_level0_budget_cache.py
    has the refusal, a budget below what one iteration touches)."""
    plan, x = matmul()
    c = plan.cache(x["B"], max_elements=15)  # B's smallest block (level 1): 16 elements
    pkg = acc.Package()
    pkg.add(plan, args=(x["A"], x["B"], x["C"]), base_name="f")
    pkg.build("budget", output_dir=str(tmp_path), python_module=False)
    assert (c.level, c.index) == (0, None)


# ------------------------------------------------------------------------------------------
# parallelize
# ------------------------------------------------------------------------------------------

CONTIGUOUS = "must be contiguous in the schedule's order, and in that order"


@pytest.mark.parametrize("names", [("i", "k"), ("j", "i"), ("i", "j", "ii"), ("k", "jj"), ("ii", "k")])
def test_parallel_indices_are_contiguous_and_in_order(names):
    rejects(lambda p, x: p.parallelize(tuple(x[n] for n in names)), match=CONTIGUOUS)


@pytest.mark.parametrize("policy", ["Static", "guided", "", None, 1])
def test_policy_is_static_or_dynamic(policy):
    rejects(lambda p, x: p.parallelize(x["i"], policy=policy), match="policy: expected 'static' or 'dynamic'")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_max_threads_is_a_positive_integer(bad):
    rejects(lambda p, x: p.parallelize(x["i"], max_threads=bad), match="max_threads: expected an integer > 0")


def test_parallelize_bad_indices():
    _, y = matmul()
    rejects(lambda p, x: p.parallelize(y["i"]), match="Unknown index")
    rejects(lambda p, x: p.parallelize((x["i"], y["j"])), match="Unknown index")
    rejects(lambda p, x: p.parallelize(()), TypeError, match="indices")
    rejects(lambda p, x: p.parallelize("i"), TypeError, match="indices")
    rejects(lambda p, x: p.parallelize(("i",)), TypeError, match="index")
    rejects(lambda p, x: p.parallelize(x["i"], pin=(0, 1)), match="pin")


def test_parallelize_an_unrolled_or_vectorized_index():
    plan, x = matmul()
    plan.unroll(x["ii"])
    with pytest.raises(ValueError, match="ii is already unrolled"):
        plan.parallelize(x["ii"])
    plan.vectorize(x["jj"])
    with pytest.raises(ValueError, match="jj is already vectorized"):
        plan.parallelize(x["jj"])
    assert plan.parallel is None


def test_parallelizing_the_reduction_index_names_the_race():
    plan, x = matmul()
    before = state(plan)
    with pytest.raises(acc.ScheduleError) as e:
        plan.parallelize(x["k"])
    assert isinstance(e.value, ValueError)
    msg = str(e.value)
    assert "C[i, j] += A[i, k] * B[k, j]" in msg and "race on C[" in msg
    assert "k=0)" in msg and "k=1)" in msg and "at the same time" in msg
    assert state(plan) == before


def test_parallelizing_a_skewed_index_that_races():
    A = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(6,), name="A")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(64,), name="C")
    nest = acc.Nest(shape=(64, 6))
    i, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[k]

    s = nest.create_schedule()
    s.skew(i, k)
    plan = s.create_plan()
    try:
        plan.parallelize(i)
    except acc.ScheduleError as e:
        assert "race" in str(e)
    else:
        raise AssertionError("parallelize(i) accepted a loop whose iterations write the same element of C")


def test_parallelizing_a_reduction_index_of_a_row_sum_names_the_race():
    A = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(6, 10), name="A")
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(6,), name="S")
    nest = acc.Nest(shape=(6, 10))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i] = acc.max(S[i], A[i, j])

    s = nest.create_schedule()
    plan = s.create_plan()
    with pytest.raises(acc.ScheduleError, match=r"parallelize\(j\): two threads would race on S\["):
        plan.parallelize(j)
    with pytest.raises(acc.ScheduleError, match=r"parallelize\(i, j\): two threads would race on S\["):
        plan.parallelize((i, j))
    plan.parallelize(i)


# ------------------------------------------------------------------------------------------
# vectorize, unroll, kernelize
# ------------------------------------------------------------------------------------------


def test_unroll_vectorize_unknown_and_wrong_indices():
    _, y = matmul()
    for op in ("unroll", "vectorize"):
        rejects(lambda p, x: getattr(p, op)(y["k"]), match="Unknown index")
        rejects(lambda p, x: getattr(p, op)("k"), TypeError, match="expected an index")
        rejects(lambda p, x: getattr(p, op)(2), TypeError, match="expected an index")


def test_vectorize_needs_vector_instructions():
    plan, x = matmul(target=acc.Target.HOST(extensions=("sse", "sse2"), vector_bytes=16))
    with pytest.raises(RuntimeError, match="no vector instructions"):
        plan.vectorize(x["jj"])
    assert not plan.loop_annotations()


def test_kernelize_rules():
    rejects(lambda p, x: p.kernelize((x["ii"], x["jj"]), x["jj"]), match="jj is both unrolled and vectorized")
    rejects(lambda p, x: p.kernelize([x["jj"]]), match="jj is both unrolled and vectorized")  # default: innermost
    rejects(lambda p, x: p.kernelize((x["ii"],), [x["k"], x["ii"]]), match="ii is both unrolled and vectorized")
    rejects(lambda p, x: p.kernelize(x["ii"], x["jj"]), TypeError, match="unroll_indices: expected a sequence")
    _, y = matmul()
    rejects(lambda p, x: p.kernelize((y["ii"],), x["jj"]), match="Unknown index")
    rejects(lambda p, x: p.kernelize((x["ii"],), y["jj"]), match="Unknown index")
    rejects(lambda p, x: p.kernelize(("ii",), x["jj"]), TypeError, match="expected an index")


def build(plan, args, tmp_path, name="f"):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name=name)
    return pkg.build(name, output_dir=str(tmp_path), python_module=False)


def test_vectorizing_a_non_contiguous_access_gathers_it(tmp_path):
    # (values: tests/targets/test_sse_vectors.py runs strided lanes on SSE and AVX2)
    plan, x = matmul(target=AVX2)
    plan.schedule.reorder(x["i"], x["j"], x["ii"], x["jj"], x["k"])
    plan = plan.schedule.create_plan(AVX2)
    plan.vectorize(x["k"])  # B[k, j]: a stride of N elements along k, gathered (VGATHERDPS)
    build(plan, (x["A"], x["B"], x["C"]), tmp_path)
    assert "_mm256_mask_i32gather_ps(" in plan.emit_c("f", (x["A"], x["B"], x["C"]))  # K = 4 of 8 lanes


def test_vectorizing_a_last_major_array_along_its_last_dimension(tmp_path):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(8, 16), layout=LM, name="Acol")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8, 16), name="C")
    nest = acc.Nest(shape=(8, 16))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, j]

    plan = nest.create_plan(AVX2)
    plan.vectorize(j)
    build(plan, (A, C), tmp_path)
    assert "_mm256_i32gather_ps(" in plan.emit_c("f", (A, C))  # Acol: lanes 8 elements apart


def test_vectorizing_a_scattered_store_writes_lane_by_lane(tmp_path):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(16, 16), name="A")
    T = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(16, 16), name="T")
    nest = acc.Nest(shape=(16, 16))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        T[j, i] = A[i, j]

    plan = nest.create_plan(AVX2)
    plan.vectorize(j)
    build(plan, (A, T), tmp_path)  # AVX2 has no scatters: T's lanes are stored one by one
    assert "accpy_q_[(long long)accpy_l_ * (16)] = accpy_t_[accpy_l_]" in plan.emit_c("f", (A, T))


def test_vectorizing_an_outer_loop_with_strided_stores_scatters_lane_by_lane(tmp_path):
    """vectorize(ii) vectorizes its subtree (jj unrolled inside); the stores to C move by a row
    per lane, which AVX2 (no scatters) stores one lane at a time."""
    plan, x = matmul(target=AVX2)
    plan.vectorize(x["ii"])
    build(plan, (x["A"], x["B"], x["C"]), tmp_path)
    plan, x = matmul(target=AVX2)
    plan.vectorize(x["ii"])
    plan.unroll(x["jj"])  # the same loops: jj unrolled by request instead of as part of the subtree
    build(plan, (x["A"], x["B"], x["C"]), tmp_path / "unrolled")
    assert "accpy_q_[(long long)accpy_l_ * (32)]" in plan.emit_c("f", (x["A"], x["B"], x["C"]))


def test_vectorizing_dependent_lanes_is_refused(tmp_path):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(4, 17), name="A")
    nest = acc.Nest(shape=(4, 16))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j + 1] += A[i, j]

    plan = nest.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(j\): lanes of the vector loop depend on each other: A\["):
        plan.vectorize(j)
    plan.vectorize(j, unsafe=True)  # the vectorizer still refuses it when the package is built
    with pytest.raises(acc.ScheduleError, match="A is written and read at different elements"):
        build(plan, (A,), tmp_path)


def test_reading_a_vectorized_reduction_target_is_refused(tmp_path):
    """S[i] is accumulated in a vector register across the loop: another statement reading
    it (a running sum) would see a stale value."""
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(4, 16), name="A")
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(4,), name="S")
    R = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(4, 16), name="R")
    nest = acc.Nest(shape=(4, 16))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i] += A[i, j]
        R[i, j] = S[i]

    plan = nest.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(j\): lanes .*S\[.*R\[i, j\] = S\[i\]"):
        plan.vectorize(j)
    plan.vectorize(j, unsafe=True)
    with pytest.raises(acc.ScheduleError, match="S is written and read at different elements"):
        build(plan, (A, S, R), tmp_path)


def test_different_reductions_into_one_element_are_refused(tmp_path):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(4, 16), name="A")
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(4,), name="S")
    nest = acc.Nest(shape=(4, 16))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i] += A[i, j]
        S[i] *= A[i, j]

    plan = nest.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(j\): lanes .*S\[.*S\[i\] \*= A\[i, j\]"):
        plan.vectorize(j)
    plan.vectorize(j, unsafe=True)
    with pytest.raises(acc.ScheduleError, match=r"reduce into the same element of S with different operators "
                                                r"\(add and mul\)"):
        build(plan, (A, S), tmp_path)


def test_unrolling_too_much_asks_for_a_split(tmp_path):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(5000,), name="A")
    nest = acc.Nest(shape=(5000,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1

    plan = nest.create_plan()
    plan.unroll(i)
    with pytest.raises(acc.ScheduleError, match=r"unrolling loop i would emit more than \d+ copies.*split it"):
        build(plan, (A,), tmp_path)


def _split_stencil():
    """A stencil whose vectorized subtree holds the tail of a split of the parallel index."""
    X = acc.Array(role=acc.Role.INPUT, shape=(18,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(16,), name="Y")
    nest = acc.Nest(shape=(16, 3))
    i, t = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i + t] * 0.5

    s = nest.create_schedule()
    tt = s.split(t, 2)
    ii = s.split(i, 5)
    iii = s.split(ii, 2)
    ii2 = s.split(i, 2)
    ii22 = s.split(ii2, 2)
    s.reorder(t, tt, i, ii2, ii22, ii, iii)
    return s, i, ii22, (X, Y)


def test_a_parallel_loops_last_partial_block_gets_constant_bounds():
    """A parallel loop is kept whole, its full blocks and its partial last block selected by a
    branch per iteration; the last block is one iteration, whose loops get constant bounds. So a
    vectorized subtree holding the tail of a split of the parallel index keeps a constant trip
    count: both orders of the calls are accepted and compute what the nest says (this plan was
    refused before the one-iteration intervals were specialized)."""
    from accpy.testing import assert_matches_reference

    for vectorize_first in (True, False):
        s, i, ii22, args = _split_stencil()
        p = s.create_plan()
        if vectorize_first:
            p.vectorize(ii22)
            p.parallelize(i)
        else:
            p.parallelize(i)
            p.vectorize(ii22)
        assert p.parallel is not None
        assert_matches_reference(p, args)


def test_cache_inside_a_vectorized_subtree_is_refused_by_the_call():
    """A one-element cache of C at k inside vectorize(j) is filled and reduced into by every lane:
    the call that creates the conflict says so, in either order, and leaves the plan buildable
    (found by accpy.testing's plan strategy in samples/property_test_example.py)."""
    def plan_of():
        A = acc.Array(role=acc.Role.INPUT, shape=(24, 16), name="A")
        B = acc.Array(role=acc.Role.INPUT, shape=(16, 20), name="B")
        C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(24, 20), name="C")
        nest = acc.Nest(shape=(24, 20, 16))
        i, j, k = nest.get_indices()

        @nest.iteration_logic
        def _():
            C[i, j] += acc.max(A[i, k] * B[k, j], 0.0)

        return nest.create_schedule().create_plan(), (A, B, C), (i, j, k)

    p, (A, B, C), (i, j, k) = plan_of()
    p.vectorize(j)
    with pytest.raises(acc.ScheduleError, match=r"cache of C at index k: with it, vectorize\(j\)"):
        p.cache(C, index=k)
    assert p.caches == () and "kernel" in p.emit_c()

    p, (A, B, C), (i, j, k) = plan_of()
    p.cache(C, index=k)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(j\): two statements reduce"):
        p.vectorize(j)
    assert "kernel" in p.emit_c()


def test_cache_blocks_written_back_by_two_threads_are_refused():
    """A skewed stencil whose cache of Y at t holds a 5-element hull per iteration of ii: two
    iterations of the parallel ii would each store their whole block, elements the other one
    wrote included (found by accpy.testing's plans). Refused by whichever call comes second."""
    nest, (X, Y), (i, t) = stencil_nest(16)

    def schedule():
        s = nest.create_schedule()
        ii = s.split(i, 2)
        s.reorder(i, ii, t)
        s.skew(i, t)
        return s, ii

    s, ii = schedule()
    p = s.create_plan()
    p.cache(Y, index=t)
    with pytest.raises(acc.ScheduleError, match=r"cache of Y: .*parallel loop ii.*meets the block of another"):
        p.parallelize(ii, max_threads=2)
    assert p.parallel is None
    s, ii = schedule()
    p = s.create_plan()
    p.parallelize(ii, max_threads=2)
    with pytest.raises(acc.ScheduleError, match=r"meets the block of another"):
        p.cache(Y, index=t)
    assert not p.caches
    from accpy.testing import assert_matches_reference

    assert_matches_reference(p, (X, Y))  # what is left is right
