"""Plan.auto (Accera's dsl_tests test_autoplan): heuristics leave cache choices open, Package.add adds
one function per combination, each built and equal to numpy."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc

L = acc.Array.Layout


def _matmul(M=8, N=12, S=4):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, S))
    B = acc.Array(role=acc.Role.INPUT, shape=(S, N))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N))
    nest = acc.Nest((M, N, S))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    sched = nest.create_schedule()
    jj = sched.split(j, 4)
    return sched, (A, B, C), (i, j, k, jj)


def _check_all(fns, pkg, name, tmp_path, args):
    pkg.build(name, output_dir=tmp_path)
    m = acc.load(tmp_path / name)
    rng = np.random.default_rng(0)
    A, B, C = args
    a, b, c = (rng.random(x.shape, dtype=np.float32) for x in (A, B, C))
    for f in fns:
        got = c.copy()
        getattr(m, f.name)(a, b, got)
        np.testing.assert_allclose(got, c + a @ b, rtol=1e-5)


def test_open_layout_gives_one_function_per_layout(tmp_path):
    sched, args, (i, j, k, jj) = _matmul()
    plan = sched.create_plan()
    plan.auto(acc.algorithms.NoneCacheHeuristics(source=args[1], index=j))
    assert [list(v) for v in plan.auto_parameters.values()] == [[L.FIRST_MAJOR, L.LAST_MAJOR]]
    pkg = acc.Package()
    fns = pkg.add(plan, args=args, base_name="auto_layout")
    assert isinstance(fns, list) and len(fns) == 2
    assert [f.parameters for f in fns] == [{"auto0_B_layout": L.FIRST_MAJOR}, {"auto0_B_layout": L.LAST_MAJOR}]
    _check_all(fns, pkg, "auto_layout", tmp_path, args)


def test_open_index_and_layout_multiply(tmp_path):
    sched, args, (i, j, k, jj) = _matmul()
    plan = sched.create_plan()
    plan.auto(acc.algorithms.NoneCacheHeuristics(source=args[1]))
    pkg = acc.Package()
    fns = pkg.add(plan, args=args, base_name="auto_both")
    assert len(fns) == 2 * 4  # layouts x the schedule's indices (i, j, jj, k)
    assert {f.parameters["auto0_B_index"] for f in fns} == {"i", "j", "jj", "k"}
    _check_all(fns, pkg, "auto_both", tmp_path, args)


def test_given_parameters_are_kept_and_given_choices_not_expanded():
    sched, args, (i, j, k, jj) = _matmul()
    plan = sched.create_plan()
    plan.auto(acc.algorithms.NoneCacheHeuristics(source=args[1], index=j))
    (p,) = plan.auto_parameters
    assert plan.auto_grid({p: L.LAST_MAJOR}) is None  # every open choice given: one function
    fn = acc.Package().add(plan, args=args, base_name="one", parameters={p: L.LAST_MAJOR})
    assert fn.parameters == {"auto0_B_layout": L.LAST_MAJOR}


def test_no_auto_no_grid():
    sched, args, _ = _matmul()
    plan = sched.create_plan()
    assert plan.auto_parameters == {} and plan.auto_grid(None) is None


def test_bad_heuristics():
    sched, args, (i, j, k, jj) = _matmul()
    plan = sched.create_plan()
    with pytest.raises(ValueError, match="auto: give at least one heuristic"):
        plan.auto()
    with pytest.raises(TypeError, match="auto: expected acc.algorithms.NoneCacheHeuristics, got str"):
        plan.auto("B")
    with pytest.raises(TypeError, match="source: expected the acc.Array to cache, got NoneType"):
        acc.algorithms.NoneCacheHeuristics()
    with pytest.raises(ValueError, match="layout: expected acc.Array.Layout.FIRST_MAJOR or LAST_MAJOR"):
        acc.algorithms.NoneCacheHeuristics(source=args[1], layout=L.DEFERRED)
