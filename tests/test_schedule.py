"""Schedule rules: index placement, shapes, errors and pseudo-code, as in Accera's docs
(Manual section 3, "Schedules"), on the matmul nest of that chapter (3 x 12 x 15)."""
import numpy as np
import pytest

import accpy as acc
from accpy.nest.logic import Index
from accpy.nest.reference import evaluate

ST = acc.ScalarType


def matmul(element_type=ST.float32):
    A = acc.Array(role=acc.Role.INPUT, shape=(3, 15), element_type=element_type, name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(15, 12), element_type=element_type, name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(3, 12), element_type=element_type, name="C")
    nest = acc.Nest(shape=(3, 12, 15))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C), (i, j, k)


def conv1d(element_type=ST.float32):
    """The skew example of the docs: a 10-element input, a 3-tap filter, 8 outputs."""
    N, K = 10, 3
    M = N - K + 1
    A = acc.Array(role=acc.Role.INPUT, shape=(N,), element_type=element_type, name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K,), element_type=element_type, name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M,), element_type=element_type, name="C")
    nest = acc.Nest(shape=(M, K))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[i + j] * B[j]

    return nest, (A, B, C), (i, j)


@pytest.fixture
def mm():
    return matmul()


def names(schedule):
    return tuple(ix.name for ix in schedule.get_indices())


# -- default schedule -------------------------------------------------------------------------

def test_default_schedule_is_the_nest(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    assert s.get_shape() == [3, 12, 15]
    idx = s.get_indices()
    assert idx[0] is i and idx[1] is j and idx[2] is k
    assert names(s) == ("i", "j", "k")
    assert str(s) == ("for i in range(3):\n"
                      "    for j in range(12):\n"
                      "        for k in range(15):\n"
                      "            C[i, j] += A[i, k] * B[k, j]")
    assert s.to_python() == str(s)


def test_schedules_are_independent(mm):
    nest, _, (i, j, k) = mm
    s1 = nest.create_schedule()
    s2 = nest.create_schedule()
    s1.split(j, 3)
    s1.reorder(k, i, j, s1.get_indices()[2])
    assert s2.get_shape() == [3, 12, 15]
    assert names(s2) == ("i", "j", "k")


# -- split --------------------------------------------------------------------------------------

def test_split_places_inner_index_right_after_the_split_index(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 3)
    assert isinstance(jj, Index)
    assert jj.name == "jj"  # named after the variable it is assigned to
    idx = s.get_indices()
    assert idx == [i, j, jj, k] and idx[1] is j and idx[2] is jj  # outer keeps its handle
    assert s.get_shape() == [3, 4, 3, 15]
    text = str(s)
    assert "for j in range(0, 12, 3):" in text
    assert "for jj in range(3):" in text
    assert "C[i, j + jj] += A[i, k] * B[k, j + jj]" in text
    # loop order of the text follows the schedule
    lines = [ln.strip() for ln in text.splitlines()]
    assert [ln.split()[1] for ln in lines if ln.startswith("for ")] == ["i", "j", "jj", "k"]


def test_split_of_the_last_and_first_index(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    kk = s.split(k, 5)
    assert s.get_indices() == [i, j, k, kk]
    ii = s.split(i, 2)
    assert s.get_indices() == [i, ii, j, k, kk]
    assert s.get_shape() == [2, 2, 12, 3, 5]


def test_split_after_reorder_inserts_after_the_current_position(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    s.reorder(k, i, j)
    kk = s.split(k, 3)
    assert s.get_indices() == [k, kk, i, j]
    assert s.get_shape() == [5, 3, 3, 12]


@pytest.mark.parametrize("size", [0, -1, -12, 0.0, 1.5, "3", None, True, False, (3,)])
def test_split_sizes_must_be_integers_at_least_one(mm, size):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    with pytest.raises(ValueError, match="Split sizes must be integers >= 1"):
        s.split(j, size)
    assert s.get_indices() == [i, j, k]
    assert s.get_shape() == [3, 12, 15]


def test_split_accepts_numpy_integers(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, np.int64(4))
    assert s.get_shape() == [3, 3, 4, 15]
    assert s.get_indices() == [i, j, jj, k]


def test_split_of_an_unknown_index_is_a_value_error(mm):
    nest, _, (i, j, k) = mm
    other, _, (oi, oj, ok) = matmul()
    s = nest.create_schedule()
    with pytest.raises(ValueError, match="Unknown index"):
        s.split(oj, 2)  # same name, other nest
    with pytest.raises(ValueError, match="Unknown index"):
        s.split(Index("z"), 2)
    s2 = nest.create_schedule()
    jj = s2.split(j, 3)
    with pytest.raises(ValueError, match="Unknown index"):
        s.split(jj, 2)  # an index of another schedule of the same nest
    assert s.get_indices() == [i, j, k]


def test_split_not_dividing_pads(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 5)
    assert s.get_shape() == [3, 3, 5, 15]  # 3*3*5*15 - 3*12*15 = 135 empty elements
    assert s.get_indices() == [i, j, jj, k]
    text = str(s)
    assert "for j in range(0, 12, 5):" in text
    assert "if j + jj < 12:" in text
    assert "C[i, j + jj] += A[i, k] * B[k, j + jj]" in text


def test_split_by_the_extent_renames(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 12)
    assert s.get_shape() == [3, 1, 12, 15]
    assert s.get_indices() == [i, j, jj, k]
    assert " if " not in str(s) and not str(s).lstrip().startswith("if")
    # the size-1 loop disappears when lowered
    low = s.to_python(unswitched=True)
    assert "for j " not in low
    assert "for jj in range(12):" in low


def test_split_larger_than_the_extent_pads(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 13)
    assert s.get_shape() == [3, 1, 13, 15]  # 45 empty elements
    assert s.get_indices() == [i, j, jj, k]
    assert "if j + jj < 12:" in str(s)
    low = s.to_python(unswitched=True)
    assert "if " not in low
    assert "for jj in range(12):" in low


def test_split_by_one_adds_a_size_one_dimension(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 1)
    assert s.get_shape() == [3, 12, 1, 15]
    assert s.get_indices() == [i, j, jj, k]
    low = s.to_python(unswitched=True)
    assert "for jj" not in low and "if " not in low


def test_double_split_of_the_outer_index(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 3)
    assert s.get_shape() == [3, 4, 3, 15]
    jjj = s.split(j, 2)
    assert s.get_indices() == [i, j, jjj, jj, k]
    assert names(s) == ("i", "j", "jjj", "jj", "k")
    assert s.get_shape() == [3, 2, 2, 3, 15]
    text = str(s)
    assert "for j in range(0, 12, 6):" in text
    assert "for jjj in range(0, 6, 3):" in text
    assert "for jj in range(3):" in text
    assert "C[i, j + jjj + jj] += A[i, k] * B[k, j + jjj + jj]" in text
    assert "if " not in text


def test_split_of_an_inner_index(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 3)
    jjj = s.split(jj, 2)
    assert s.get_indices() == [i, j, jj, jjj, k]
    assert s.get_shape() == [3, 4, 2, 2, 15]  # 3 split by 2 pads the inner dimension
    # an inner-inner index must follow its own parent
    assert not s.is_valid_loop_order(i, j, jjj, jj, k)
    assert s.is_valid_loop_order(j, jj, i, k, jjj)


def test_split_names_do_not_collide(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    inner = [s.split(j, 2)][0]  # not assigned to a plain name: a generated one
    assert inner.name not in ("i", "j", "k")
    again = [s.split(j, 2)][0]
    assert len(set(names(s))) == len(names(s)) == 5
    assert again is not inner


# -- tile -----------------------------------------------------------------------------------

def test_tile_splits_in_dict_order_and_returns_the_inner_indices(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj, kk = s.tile({j: 2, k: 3})
    assert (jj.name, kk.name) == ("jj", "kk")
    assert s.get_indices() == [i, j, jj, k, kk]
    assert s.get_shape() == [3, 6, 2, 5, 3]
    text = str(s)
    assert "for j in range(0, 12, 2):" in text
    assert "for k in range(0, 15, 3):" in text
    assert "C[i, j + jj] += A[i, k + kk] * B[k + kk, j + jj]" in text


def test_tile_equals_the_sequence_of_splits(mm):
    nest, _, (i, j, k) = mm
    s1 = nest.create_schedule()
    t = s1.tile({k: 4, j: 5})
    assert isinstance(t, tuple) and len(t) == 2
    kk, jj = t
    s2 = nest.create_schedule()
    kk2 = s2.split(k, 4)
    jj2 = s2.split(j, 5)
    assert s1.get_shape() == s2.get_shape() == [3, 3, 5, 4, 4]
    assert s1.get_indices() == [i, j, jj, k, kk]
    assert s2.get_indices() == [i, j, jj2, k, kk2]


def test_tile_errors_leave_the_schedule_unchanged(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    with pytest.raises(ValueError, match="Split sizes must be integers >= 1"):
        s.tile({j: 2, k: 0})
    assert s.get_indices() == [i, j, k]
    other_nest, _, (oi, oj, ok) = matmul()
    with pytest.raises(ValueError, match="Unknown index"):
        s.tile({j: 2, ok: 3})
    assert s.get_indices() == [i, j, k]
    assert s.get_shape() == [3, 12, 15]


# -- reorder ----------------------------------------------------------------------------------

def test_reorder_positional_and_keyword_forms(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    s.reorder(j, k, i)
    assert s.get_indices() == [j, k, i]
    assert s.get_shape() == [12, 15, 3]
    assert str(s) == ("for j in range(12):\n"
                      "    for k in range(15):\n"
                      "        for i in range(3):\n"
                      "            C[i, j] += A[i, k] * B[k, j]")
    s.reorder(order=(k, i, j))
    assert s.get_indices() == [k, i, j]
    s.reorder(order=[i, j, k])
    assert s.get_indices() == [i, j, k]
    s.reorder((j, i, k))
    assert s.get_indices() == [j, i, k]


def test_reorder_with_split_indices(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj, kk = s.tile({j: 2, k: 3})
    s.reorder(k, i, j, kk, jj)
    assert s.get_indices() == [k, i, j, kk, jj]
    assert s.get_shape() == [5, 3, 6, 3, 2]
    s.reorder(j, k, i, jj, kk)
    assert s.get_indices() == [j, k, i, jj, kk]


@pytest.mark.parametrize("case", ["too_few", "too_many", "duplicate", "inner_first", "inner_first_k",
                                  "unknown", "not_an_index"])
def test_invalid_reorder_raises_and_keeps_the_order(mm, case):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj, kk = s.tile({j: 2, k: 3})
    s.reorder(i, k, j, kk, jj)
    before = s.get_indices()
    shape = s.get_shape()
    text = str(s)
    other = matmul()[2][0]
    bad = {
        "too_few": ((i, j, jj, k), "Expected 5 indices"),
        "too_many": ((i, j, jj, k, kk, i), "Expected 5 indices"),
        "duplicate": ((i, j, jj, k, k), "twice"),
        "inner_first": ((i, jj, j, k, kk), "jj"),
        "inner_first_k": ((kk, i, j, jj, k), "kk"),
        "unknown": ((other, j, jj, k, kk), "Unknown index"),
        "not_an_index": (("i", j, jj, k, kk), "Unknown index"),
    }[case]
    with pytest.raises(ValueError, match=bad[1]):
        s.reorder(*bad[0])
    assert s.get_indices() == before
    assert s.get_shape() == shape
    assert str(s) == text
    with pytest.raises(ValueError):
        s.reorder(order=bad[0])
    assert s.get_indices() == before
    assert s.is_valid_loop_order(bad[0]) is False
    assert s.is_valid_loop_order(*bad[0]) is False


def test_reorder_is_a_value_error_subclass_and_mixing_forms_fails(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    with pytest.raises(ValueError):
        s.reorder((i, j, k), j)
    assert s.get_indices() == [i, j, k]


def test_is_valid_loop_order(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    jj = s.split(j, 3)
    assert s.is_valid_loop_order((i, j, jj, k)) is True
    assert s.is_valid_loop_order(k, j, i, jj) is True
    assert s.is_valid_loop_order((j, jj, k, i)) is True
    assert s.is_valid_loop_order((jj, j, k, i)) is False
    assert s.is_valid_loop_order((i, j, k)) is False
    assert s.is_valid_loop_order((i, j, j, k)) is False
    # asking never changes the schedule
    assert s.get_indices() == [i, j, jj, k]


# -- skew and pad ------------------------------------------------------------------------------

def test_skew_shapes():
    nest, _, (i, j) = conv1d()
    s = nest.create_schedule()
    assert s.get_shape() == [8, 3]
    s.skew(i, j)
    assert s.get_shape() == [10, 3]  # (N + M - 1, M)
    assert s.get_indices() == [i, j]
    s2 = nest.create_schedule()
    s2.skew(j, i)
    assert s2.get_shape() == [8, 10]
    assert s2.get_indices() == [i, j]


def test_skew_in_three_dimensions(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    s.skew(i, j)
    assert s.get_shape() == [14, 12, 15]
    s2 = nest.create_schedule()
    s2.skew(k, i)
    assert s2.get_shape() == [3, 12, 17]


def test_skew_pseudocode_matches_the_docs():
    nest, _, (i, j) = conv1d()
    s = nest.create_schedule()
    s.skew(i, j)
    text = str(s)
    assert text.startswith("for i in range(10):\n    for j in range(3):\n")
    assert "C[i - j] += A[i] * B[j]" in text
    guard = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("if ")]
    assert len(guard) == 1
    # the guard keeps exactly 0 <= i - j < 8 (checked on every point of the box)
    cond = guard[0][3:-1]
    for iv in range(10):
        for jv in range(3):
            assert eval(cond, {"i": iv, "j": jv}) == (0 <= iv - jv < 8)


def test_skew_errors():
    nest, _, (i, j) = conv1d()
    s = nest.create_schedule()
    with pytest.raises(ValueError):
        s.skew(i, i)
    with pytest.raises(ValueError, match="Unknown index"):
        s.skew(i, Index("q"))
    with pytest.raises(ValueError):
        s.skew(i, j, unroll_loops_smaller_than=-1)  # 0 means no unrolling (Accera)
    assert s.get_shape() == [8, 3]


def test_pad_shape_and_guard(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    s.pad(i, 2)
    assert s.get_shape() == [5, 12, 15]
    assert s.get_indices() == [i, j, k]
    text = str(s)
    assert "for i in range(5):" in text
    assert "if i >= 2:" in text
    assert "C[i - 2, j] += A[i - 2, k] * B[k, j]" in text
    s2 = nest.create_schedule()
    s2.pad(k, 5)
    assert s2.get_shape() == [3, 12, 20]


def test_pad_then_split(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    s.pad(j, 4)
    jj = s.split(j, 8)
    assert s.get_shape() == [3, 2, 8, 15]  # 16 = 4 empty + 12 real
    assert s.get_indices() == [i, j, jj, k]


def test_pad_errors_and_zero(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    with pytest.raises(ValueError):
        s.pad(i, -1)
    with pytest.raises(ValueError):
        s.pad(i, 1.5)
    with pytest.raises(ValueError, match="Unknown index"):
        s.pad(Index("q"), 1)
    s.pad(i, 0)
    assert s.get_shape() == [3, 12, 15]
    assert str(s) == str(nest.create_schedule())


def test_repr_shows_order_and_shape(mm):
    nest, _, (i, j, k) = mm
    s = nest.create_schedule()
    s.split(k, 4)
    assert repr(s) == "Schedule(order=(i, j, k, kk), shape=[3, 12, 4, 4])"


# -- none of the transformations changes the result ------------------------------------------

def test_degenerate_and_regular_schedules_compute_the_same_result(tmp_path):
    nest, (A, B, C), (i, j, k) = matmul(ST.int32)
    schedules = {}

    s = nest.create_schedule()
    schedules["default_order"] = s
    for size in (1, 5, 12, 13):
        s = nest.create_schedule()
        s.split(j, size)
        schedules[f"split{size}"] = s
    s = nest.create_schedule()
    s.split(j, 3)
    s.split(j, 2)
    schedules["double_split"] = s
    s = nest.create_schedule()
    jj, kk = s.tile({j: 5, k: 4})
    s.reorder(k, j, i, kk, jj)
    schedules["tile_reorder"] = s
    s = nest.create_schedule()
    s.skew(i, k)
    schedules["skew"] = s
    s = nest.create_schedule()
    s.pad(k, 3)
    kk = s.split(k, 6)
    s.reorder(k, i, kk, j)
    schedules["pad_split"] = s

    pkg = acc.Package()
    for name, sch in schedules.items():
        pkg.add(sch, args=(A, B, C), base_name=name)
    built = pkg.build("sched_equiv", output_dir=tmp_path, python_module=False)

    rng = np.random.default_rng(7)
    a = rng.integers(-100, 100, (3, 15), dtype=np.int32)
    b = rng.integers(-100, 100, (15, 12), dtype=np.int32)
    c0 = rng.integers(-100, 100, (3, 12), dtype=np.int32)
    want = c0.copy()
    evaluate(nest, {A: a, B: b, C: want})
    assert np.array_equal(want, c0 + a @ b)
    for name in schedules:
        got = c0.copy()
        getattr(built, name)(a, b, got)
        assert np.array_equal(got, want), name


def test_split_takes_the_inner_index_name():
    nest = acc.Nest(shape=(16, 8))
    i, j = nest.get_indices()
    s = nest.create_schedule()
    inner = s.split(i, 4, name="i_in")
    assert inner.name == "i_in" and [ix.name for ix in s.get_indices()] == ["i", "i_in", "j"]
    with pytest.raises(ValueError, match="already an index"):
        s.split(j, 2, name="i_in")
    with pytest.raises(ValueError, match="identifier"):
        s.split(j, 2, name="2x")
