"""Legality of schedules and plans on nests that are *not* order-invariant.

In-place stencils and recurrences have real dependences: every transform that changes
the order (reorder, skew, fuse), every parallel loop and every vector loop is checked
against them (accpy/analysis/dependence.py). A refusal is an `acc.ScheduleError` naming
two iterations, the element and which one now runs first; what is accepted is built and
compared exactly with the reference evaluator.
"""
import logging

import numpy as np
import pytest

import accpy as acc
from accpy.analysis.dependence import order_violation, parallel_violation, vector_violation
from accpy.nest.reference import evaluate

I32 = acc.ScalarType.int32
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_GOLD_6148)  # a named model: the same code on every machine


def gauss_seidel(N=9, M=11):
    """A[i, j] = A[i-1, j] + A[i, j-1] + A[i, j] in place: dependences (1, 0) and (0, 1)."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, M), element_type=I32, name="A")
    nest = acc.Nest(shape=(N - 1, M - 1))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i + 1, j + 1] = A[i, j + 1] + A[i + 1, j] + A[i + 1, j + 1] * 3

    return A, nest, i, j


def anti_diagonal(N=8, M=9):
    """A[i+1, j] depends on A[i, j+1]: dependence (1, -1) forbids interchange."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, M), element_type=I32, name="A")
    nest = acc.Nest(shape=(N - 1, M - 1))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i + 1, j] = A[i, j + 1] * 2 + A[i + 1, j]

    return A, nest, i, j


def recurrence(N=40):
    """X[i+1] = X[i] * 3 + Y[i]: a chain through every iteration."""
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N + 1,), element_type=I32, name="X")
    Y = acc.Array(role=acc.Role.INPUT, shape=(N,), element_type=I32, name="Y")
    nest = acc.Nest(shape=(N,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[i + 1] = X[i] * 3 + Y[i]

    return (X, Y), nest, i


def build_and_check(schedule_or_plan, args, nests, tmp_path, name="f"):
    pkg = acc.Package()
    pkg.add(schedule_or_plan, args=args, base_name=name)
    lib = pkg.build(name + "_pkg", output_dir=tmp_path)
    rng = np.random.default_rng(3)
    got = [rng.integers(-3, 4, size=a.shape).astype(np.int32) for a in args]
    want = [x.copy() for x in got]
    evaluate(nests, dict(zip(args, want)))
    getattr(lib, name)(*got)
    for a, g, w in zip(args, got, want):
        np.testing.assert_array_equal(g, w, err_msg=a.name)
    return lib


# -- stencils ----------------------------------------------------------------------------------

def test_gauss_seidel_legal_reorders_are_accepted_and_correct(tmp_path):
    A, nest, i, j = gauss_seidel()
    s = nest.create_schedule()
    s.reorder(j, i)  # both dependences stay lexicographically positive
    ii, jj = s.tile({i: 3, j: 4})  # tiling a fully permutable band is legal
    s.reorder(j, i, jj, ii)
    build_and_check(s, (A,), [nest], tmp_path)


def test_gauss_seidel_parallel_rows_are_refused():
    A, nest, i, j = gauss_seidel()
    plan = nest.create_schedule().create_plan()
    with pytest.raises(acc.ScheduleError) as e:
        plan.parallelize(i)
    msg = str(e.value)
    assert msg.startswith("parallelize(i): two threads would race on A[")
    assert "iteration (i=" in msg and "at the same time" in msg
    with pytest.raises(acc.ScheduleError, match=r"parallelize\(j\)"):
        plan.parallelize(j)
    assert plan.parallel is None


def test_wavefront_with_parallel_inner_index_is_accepted_and_correct(tmp_path):
    """Skew i by j (i' = i + j): all points of one anti-diagonal i' are independent."""
    A, nest, i, j = gauss_seidel(N=12, M=10)
    s = nest.create_schedule()
    s.skew(i, j)
    plan = s.create_plan()
    plan.parallelize(j)
    assert parallel_violation(s.space, [1]) is None
    with pytest.raises(acc.ScheduleError):
        s.create_plan().parallelize(i)  # the wavefront index itself carries the dependences
    build_and_check(plan, (A,), [nest], tmp_path, "wavefront")


def test_interchange_of_an_anti_diagonal_dependence_is_refused_with_a_counterexample():
    A, nest, i, j = anti_diagonal()
    s = nest.create_schedule()
    with pytest.raises(acc.ScheduleError) as e:
        s.reorder(j, i)
    msg = str(e.value)
    assert msg.startswith("reorder(j, i): this order changes the result: A[")
    # the counterexample: the updater of A[i+1, j] (an update spelled `x = e + x`) and the reader of
    # A[i, j+1] = the same element
    assert "updates it" in msg and "reads it" in msg and "runs the second first" in msg
    assert s.get_indices() == [i, j]  # unchanged after the refusal
    v = order_violation(nest.create_schedule().space)
    assert v is None  # the default order is the program


def test_counterexample_is_a_real_conflict():
    """The two iterations of the message touch the named element, and the new order runs
    them the other way round."""
    A, nest, i, j = anti_diagonal()
    s = nest.create_schedule()
    s.reorder(j, i, unsafe=True)
    v = order_violation(s.space)
    (i1, j1), (i2, j2) = v.first_at, v.second_at
    touched1 = {(i1 + 1, j1), (i1, j1 + 1)}
    touched2 = {(i2 + 1, j2), (i2, j2 + 1)}
    assert v.element in touched1 and v.element in touched2
    assert (i1, j1) < (i2, j2)  # program order
    assert (j2, i2) < (j1, i1)  # the new order


def test_skews_are_checked_too():
    A, nest, i, j = anti_diagonal()
    s = nest.create_schedule()
    s.skew(j, i)  # (i, j + i): dependence (1, -1) becomes (1, 0): legal
    s.reorder(j, i)  # ... and after it, so is the interchange
    s2 = nest.create_schedule()
    with pytest.raises(acc.ScheduleError, match=r"skew\(i, j\): this order changes the result"):
        s2.skew(i, j)  # (i + j, j): the sink (i+1, j) now shares i' with its source (i, j+1) and runs first
    assert s2.get_shape() == [7, 8]


def test_unsafe_reorder_logs_a_warning_and_builds(tmp_path, caplog):
    A, nest, i, j = anti_diagonal(5, 5)
    s = nest.create_schedule()
    with caplog.at_level(logging.WARNING, logger="accpy"):
        s.reorder(j, i, unsafe=True)
    assert any("unsafe=True" in r.getMessage() and "reorder(j, i)" in r.getMessage() for r in caplog.records)
    pkg = acc.Package()
    pkg.add(s, args=(A,), base_name="unsafe_reorder")
    lib = pkg.build("unsafe_reorder", output_dir=tmp_path)
    a = np.arange(25, dtype=np.int32).reshape(5, 5)
    want = a.copy()
    evaluate([nest], {A: want})
    lib.unsafe_reorder(a)
    assert not np.array_equal(a, want)


# -- recurrences, vectors ----------------------------------------------------------------------

def test_recurrence_split_is_fine_but_reordering_the_pieces_is_refused(tmp_path):
    (X, Y), nest, i = recurrence()
    s = nest.create_schedule()
    ii = s.split(i, 8)  # splitting never changes the order
    with pytest.raises(acc.ScheduleError, match=r"skew\(i, ii\).*X\["):
        s.skew(i, ii)  # X[8] (i=1, ii=0) would run before X[7] (i=0, ii=7)
    build_and_check(s, (X, Y), [nest], tmp_path, "recurrence")


def test_vectorizing_a_true_dependence_is_refused():
    (X, Y), nest, i = recurrence(32)
    s = nest.create_schedule()
    plan = s.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): lanes of the vector loop depend on each other: X\["):
        plan.vectorize(i)


def test_vectorizing_the_independent_dim_of_a_stencil_is_accepted(tmp_path):
    """A[i+1, j] = A[i, j] * 2 + B[j]: the dependence is carried by i; j's lanes are independent."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(6, 32), element_type=acc.ScalarType.float32, name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(32,), element_type=acc.ScalarType.float32, name="B")
    nest = acc.Nest(shape=(5, 32))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i + 1, j] = A[i, j] * 2.0 + B[j]

    s = nest.create_schedule()
    assert vector_violation(s.space, 1) is None
    assert vector_violation(s.space, 0) is not None
    with pytest.raises(acc.ScheduleError):
        s.create_plan(AVX512).parallelize(i)
    s.create_plan(AVX512).parallelize(j)
    s2 = nest.create_schedule()
    s2.reorder(j, i)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): lanes"):
        s2.create_plan(AVX512).vectorize(i)  # i carries the dependence, even innermost
    plan = nest.create_plan(acc.Target.HOST)
    plan.vectorize(j)
    pkg = acc.Package()
    pkg.add(plan, args=(A, B), base_name="stencil_vec")
    lib = pkg.build("stencil_vec", output_dir=tmp_path)
    a = np.arange(6 * 32, dtype=np.float32).reshape(6, 32) % 7
    b = np.arange(32, dtype=np.float32) % 5
    want = a.copy()
    evaluate([nest], {A: want, B: b})
    lib.stencil_vec(a, b)
    np.testing.assert_array_equal(a, want)


def test_reductions_commute_but_race():
    """Max accumulation is a reduction: every order is legal, but not a parallel reduced dim."""
    X = acc.Array(role=acc.Role.INPUT, shape=(6, 9), element_type=I32, name="X")
    Mx = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(6,), element_type=I32, name="Mx")
    nest = acc.Nest(shape=(6, 9))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Mx[i] = acc.max(Mx[i], X[i, j])

    s = nest.create_schedule()
    s.reorder(j, i)
    s.skew(i, j)
    with pytest.raises(acc.ScheduleError, match="race on Mx"):
        s.create_plan().parallelize(j)


def test_a_plain_read_of_a_reduction_target_orders_the_nest():
    """S[i] += A[i, j] followed by R[i, j] = S[i] (a running sum): the read sees partial sums."""
    A = acc.Array(role=acc.Role.INPUT, shape=(4, 5), element_type=I32, name="A")
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), element_type=I32, name="S")
    R = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 5), element_type=I32, name="R")
    nest = acc.Nest(shape=(4, 5))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i] += A[i, j]
        R[i, j] = S[i]

    s = nest.create_schedule()
    s.reorder(j, i)  # rows are independent: legal
    s2 = nest.create_schedule()
    jj = s2.split(j, 2)
    with pytest.raises(acc.ScheduleError, match=r"R\[i, j\] = S\[i\]"):
        s2.skew(j, jj)


def test_last_write_wins_is_an_output_dependence():
    A = acc.Array(role=acc.Role.INPUT, shape=(4, 5), element_type=I32, name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), element_type=I32, name="B")
    nest = acc.Nest(shape=(4, 5))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i] = A[i, j]

    s = nest.create_schedule()
    s.reorder(j, i)  # legal: for each i the last j still writes last
    jj = s.split(j, 2)
    with pytest.raises(acc.ScheduleError, match="B\\[.*writes it.*writes it"):
        s.skew(j, jj)
    with pytest.raises(acc.ScheduleError, match="race on B"):
        nest.create_schedule().create_plan().parallelize(nest.get_indices()[1])


def test_runtime_sizes_are_symbols_of_the_check():
    """A[i, j] += A[j, i] in place: iteration (i, j) reads what (j, i) updates."""
    N = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, N), element_type=I32, name="A")
    nest = acc.Nest(shape=(N, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j] += A[j, i]

    s = nest.create_schedule()
    with pytest.raises(acc.ScheduleError, match=r"reorder\(j, i\).*A\[.*\(when N=\d+\)"):
        s.reorder(j, i)
    s.split(j, 4)  # order unchanged: fine


def test_an_update_spelled_as_an_assignment_commutes_like_plus_equals(tmp_path):
    """`t[i] = A[i, j] * x[j] + t[i]` is the update `t[i] += A[i, j] * x[j]`: its loops interchange,
    its reduction loop vectorizes (a vector accumulator), but it still may not run on two threads."""
    A = acc.Array(role=acc.Role.INPUT, shape=(24, 40), name="A")
    x = acc.Array(role=acc.Role.INPUT, shape=(40,), name="x")
    t = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(24,), name="t")
    nest = acc.Nest(shape=(24, 40))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        t[i] = A[i, j] * x[j] + t[i]

    s = nest.create_schedule()
    s.reorder(j, i)
    s.reorder(i, j)
    jj = s.split(j, 8)
    plan = s.create_plan()
    plan.vectorize(jj)
    with pytest.raises(acc.ScheduleError, match="race"):
        nest.create_schedule().create_plan().parallelize(nest.get_indices()[1])
    from accpy.testing import assert_matches_reference
    assert_matches_reference(plan, (A, x, t), opt="-O1")
