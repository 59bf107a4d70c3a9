"""accpy.testing: strategies of schedules, plans and data, and the equivalence assertions."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import accpy as acc
import accpy.testing as at

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi.kernels import stencil_nest  # noqa: E402

FAST = settings(deadline=None, max_examples=8, database=None, suppress_health_check=list(HealthCheck))


def _matmul(n=8, dtype=acc.ScalarType.float32):
    A = acc.Array(role=acc.Role.INPUT, shape=(n, n), name="A", element_type=dtype)
    B = acc.Array(role=acc.Role.INPUT, shape=(n, n), name="B", element_type=dtype)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n, n), name="C", element_type=dtype)
    nest = acc.Nest(shape=(n, n, n))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C)


NEST, ARGS = _matmul()
STENCIL, STENCIL_ARGS, _ = stencil_nest()


@pytest.mark.slow
@given(schedule=at.schedules(NEST), data=at.arrays(ARGS))
@FAST
def test_drawn_schedules_match_the_reference(schedule, data):
    at.assert_matches_reference(schedule, ARGS, data=data)


@pytest.mark.slow
@given(plan=at.plans(at.schedules(STENCIL)), data=at.arrays(STENCIL_ARGS))
@FAST
def test_drawn_plans_match_the_reference(plan, data):
    at.assert_matches_reference(plan, STENCIL_ARGS, data=data)


@given(schedule=at.schedules(NEST, transforms=("split", "reorder"), max_transforms=3))
@FAST
def test_transforms_are_limited_to_those_asked(schedule):
    assert all(op in ("split", "reorder") for op, *_ in schedule._commands)


def _ordered_nest(n):
    """(nest, X, (i, j)): X[i + 1, j] = X[i, j + 1] + 1 over n x n, whose order matters."""
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n + 1, n + 1), name="X")
    nest = acc.Nest(shape=(n, n))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[i + 1, j] = X[i, j + 1] + 1.0

    return nest, X, (i, j)


@pytest.mark.slow
def test_ordered_nest_only_gets_legal_schedules():
    """A running sum is not order-invariant: reorders and skews that change it are skipped."""
    from hypothesis import find

    nest, X, (i, j) = _ordered_nest(8)

    from hypothesis.errors import NoSuchExample

    def swapped(s):  # the nest's second index runs outside its first
        first, second = s.nests[0].indices
        return s.get_indices()[0] is second

    # hypothesis searches for a drawn schedule with j before i: none may exist
    with pytest.raises(NoSuchExample):
        find(at.schedules(nest, transforms=("reorder",)), swapped, settings=settings(max_examples=60, database=None))
    # while for an order-invariant nest of the same shape the strategy does draw it
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(9, 9), name="Y")
    free = acc.Nest(shape=(8, 8))
    a, b = free.get_indices()

    @free.iteration_logic
    def _():
        Y[a, b] += 1.0

    assert swapped(find(at.schedules(free, transforms=("reorder",)), swapped, settings=settings(database=None)))


def test_schedules_extend_a_given_schedule_without_changing_it():
    s = NEST.create_schedule()
    kk = s.split(NEST.get_indices()[2], 4)
    before = list(s._commands)
    from hypothesis import find

    ext = find(at.schedules(s, transforms=("split",)), lambda x: len(x._commands) >= 2,
               settings=settings(database=None))
    assert list(s._commands) == before and ext._commands[0][0] == "split" and ext._commands[0][1][1] == 4
    assert kk.name in [ix.name for ix in ext.get_indices()]


def test_arrays_have_the_arguments_types_shapes_and_layouts():
    from hypothesis import find

    M = acc.Dimension("M")
    A = acc.Array(role=acc.Role.INPUT, shape=(M, 3), name="A", element_type=acc.ScalarType.int8,
                  layout=acc.Array.Layout.LAST_MAJOR)
    s = acc.Scalar(acc.ScalarType.float32, name="s")
    data = find(at.arrays((A, M, s), int_range=(-2, 2)), lambda d: d[1] > 2, settings=settings(database=None))
    a, m, sv = data
    assert a.shape == (m, 3) and a.dtype == np.int8 and a.flags.f_contiguous and a.min() >= -2 and a.max() <= 2
    assert isinstance(sv, float)


def test_a_wrong_result_names_the_element_and_replays_the_schedule():
    s = NEST.create_schedule()
    i, j, k = NEST.get_indices()
    jj = s.split(j, 4)
    s.reorder(i, j, k, jj)
    data = [np.ones((8, 8), np.float32), np.ones((8, 8), np.float32), np.zeros((8, 8), np.float32)]
    data_wrong = list(data)
    # the same schedule against a different nest: C = A @ B + 1 (a real difference)
    A, B, C = ARGS
    other = acc.Nest(shape=(8, 8, 8))
    x, y, z = other.get_indices()

    @other.iteration_logic
    def _():
        C[x, y] += A[x, z] * B[z, y] + 0.125

    with pytest.raises(AssertionError) as err:
        at.assert_equivalent(s, other, ARGS, data=data_wrong)
    text = str(err.value)
    assert "C[0, 0]: the first gives 8.0, the second gives 9.0 (64 elements differ" in text
    assert "jj = schedule.split(j, 4)\n" in text and "schedule.reorder(i, j, k, jj)" in text
    assert np.all(data[2] == 0)  # the caller's data are not modified


def test_replay_code_rebuilds_the_plan():
    s = NEST.create_schedule()
    i, j, k = NEST.get_indices()
    jj = s.split(j, 4)
    s.reorder(i, k, j, jj)
    p = s.create_plan()
    A, B, C = ARGS
    p.cache(B, index=j, layout=acc.Array.Layout.LAST_MAJOR)
    p.vectorize(jj)
    code = at.replay_code(p)
    assert code == ("i, j, k = nest.get_indices()\nschedule = nest.create_schedule()\n"
                    "jj = schedule.split(j, 4)\nschedule.reorder(i, k, j, jj)\nplan = schedule.create_plan()\n"
                    "cache0 = plan.cache(B, index=j, layout=acc.Array.Layout.LAST_MAJOR)\nplan.vectorize(jj)")
    ns = {"nest": NEST, "acc": acc, "B": B}
    exec(code, ns)  # the code runs and builds the same plan
    at.assert_equivalent(p, ns["plan"], ARGS)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"transforms: unknown \['fuse'\]"):
        at.schedules(NEST, transforms=("split", "fuse"))
    with pytest.raises(TypeError, match="nest_or_schedule: expected an acc.Nest"):
        at.schedules(3)
    with pytest.raises(TypeError, match=r"args\[0\]: expected acc.Array"):
        at.arrays((3,))
    with pytest.raises(ValueError, match="data: expected 3 values"):
        at.assert_matches_reference(NEST, ARGS, data=[np.zeros((8, 8))])
    with pytest.raises(ValueError, match="level: expected one of -O0"):
        at.assert_matches_reference(NEST, ARGS, opt="-O9")


def test_the_optimization_level_is_the_callers_choice(monkeypatch, tmp_path):
    """Kernels under test are compiled at -O0 unless asked otherwise; the results agree."""
    from accpy.package import compile as compiling

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path))  # really compiled

    levels = []
    real = compiling._run
    monkeypatch.setattr(compiling, "_run", lambda cmd, *a: (levels.append(cmd[1]), real(cmd, *a))[1])
    schedule = NEST.create_schedule()
    i, j, k = schedule.get_indices()
    schedule.reorder(k, i, j)
    for opt in ("-O0", "-O3"):
        levels.clear()
        at.assert_matches_reference(schedule, ARGS, seed=7, **({} if opt == "-O0" else {"opt": opt}))
        assert levels and set(levels) <= {opt}


@pytest.mark.slow
def test_a_wrong_schedule_is_caught_and_shrunk_to_a_short_replay():
    """A user's property test over schedules that all carry a reorder forced with unsafe=True
    (it changes what an ordered nest computes): the assertion fails, hypothesis shrinks the
    drawn transforms away, and the message replays the short schedule that is left."""
    from hypothesis import Phase

    nest, X, (i, j) = _ordered_nest(6)

    wrong = nest.create_schedule()
    wrong.reorder(j, i, unsafe=True)  # the bug: each row reads the previous one before it is written
    failing_sizes = []

    @settings(max_examples=40, database=None, deadline=None, derandomize=True,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(s=at.schedules(wrong, max_transforms=4), data=at.arrays((X,)))
    def prop(s, data):
        try:
            at.assert_matches_reference(s, (X,), data=data)
        except AssertionError:
            failing_sizes.append(len(s._commands))
            raise

    with pytest.raises(AssertionError) as err:
        prop()
    text = str(err.value)
    assert "X[" in text and "accpy gives" in text and "the reference gives" in text
    replay = [line.strip() for line in text.split("schedule:")[1].strip().splitlines()]
    assert replay == ["i, j = nest.get_indices()", "schedule = nest.create_schedule()",
                      "schedule.reorder(j, i, unsafe=True)"], replay
    assert max(failing_sizes) > 1 and failing_sizes[-1] == 1  # shrunk: the drawn transforms are gone


def test_the_transform_drawer_over_names_and_live_indices():
    """choices.draw_transform sees handles only: names (a generator that records steps) or live
    indices; seeded choices repeat, split parents stay ahead of their inner indices."""
    import random

    from accpy.testing import choices

    names, parents = ["i", "j", "ii"], {"ii": "i"}
    draws = [[choices.draw_transform(choices.RandomChooser(random.Random(seed)), kind, names,
                                     lambda n: 8, parents.get) for kind in choices.TRANSFORM_WEIGHTS]
             for seed in (1, 1, 2)]
    assert draws[0] == draws[1]  # the same seed, the same transforms
    for seed in range(50):
        ch = choices.RandomChooser(random.Random(seed))
        op, order = choices.draw_transform(ch, "reorder", names, lambda n: 8, parents.get)
        assert sorted(order) == sorted(names) and order.index("i") < order.index("ii")
        op, ix, size = choices.draw_transform(ch, "split", names, lambda n: 8, parents.get, max_split=5)
        assert ix in names and 1 <= size <= 5
        op, items = choices.draw_transform(ch, "tile", names, lambda n: None, parents.get)
        assert 1 <= len(items) <= 3 and len({n for n, _ in items}) == len(items)
        assert all(1 <= size <= 16 for _, size in items)  # a runtime extent: 1..13+3
    assert choices.draw_transform(choices.RandomChooser(random.Random(0)), "skew", ["i"], lambda n: 8,
                                  parents.get) is None  # one loop: nothing to skew
    with pytest.raises(ValueError, match="kind: expected one of"):
        choices.draw_transform(choices.RandomChooser(random.Random(0)), "fuse", names, lambda n: 8, parents.get)
    # live indices: what accpy.testing.schedules applies
    s = NEST.create_schedule()
    t = choices.draw_transform(choices.RandomChooser(random.Random(3)), "split", s.get_indices(), lambda ix: 8,
                               lambda ix: None)
    assert t[1] in s.get_indices()
    from accpy.testing.strategies import apply_transform

    assert apply_transform(s, t) and len(s.get_indices()) == 4
