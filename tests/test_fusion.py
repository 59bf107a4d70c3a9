"""Fused schedules (`acc.fuse`): Accera's fusion examples, its index rules, and the
legality check that refuses fused orders that change the result.

Every legal schedule here is built (one package for the module) and compared exactly
(int32) with the reference evaluator running the nests one after the other.
"""
import logging

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

ST = acc.ScalarType
I32 = ST.int32
RNG = np.random.default_rng(7)


def arr(role, *shape, name=""):
    return acc.Array(role=role, shape=shape, element_type=I32, name=name)


def rand(*shape):
    return RNG.integers(-4, 5, size=shape).astype(np.int32)


# -- nests used below -----------------------------------------------------------------------

def shift_scale(M=8, N=12):
    """C = (C + A) * B as two nests: Accera's first fusion example."""
    A, B, C = arr(acc.Role.INPUT, M, N, name="A"), arr(acc.Role.INPUT, M, N, name="B"), \
        arr(acc.Role.INPUT_OUTPUT, M, N, name="C")
    n0 = acc.Nest(shape=(M, N))
    i0, j0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        C[i0, j0] += A[i0, j0]

    n1 = acc.Nest(shape=(M, N))
    i1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        C[i1, j1] *= B[i1, j1]

    return (A, B, C), (n0, n1), (i0, j0), (i1, j1)


def matmul_relu(M=10, N=9, K=7):
    """C = relu(C + A @ B): matmul (i, j, k), then an in-place ReLU (i, j)."""
    A, B, C = arr(acc.Role.INPUT, M, K, name="A"), arr(acc.Role.INPUT, K, N, name="B"), \
        arr(acc.Role.INPUT_OUTPUT, M, N, name="C")
    n0 = acc.Nest(shape=(M, N, K))
    i0, j0, k0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        C[i0, j0] += A[i0, k0] * B[k0, j0]

    n1 = acc.Nest(shape=(M, N))
    i1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        C[i1, j1] = acc.max(C[i1, j1], 0)

    return (A, B, C), (n0, n1), (i0, j0, k0), (i1, j1)


def three_matmul(M=6, N=5, K=4, L=7):
    """E += (A @ B) @ D with the middle product T a TEMP array."""
    A, B, D = arr(acc.Role.INPUT, M, K, name="A"), arr(acc.Role.INPUT, K, N, name="B"), \
        arr(acc.Role.INPUT, N, L, name="D")
    E = arr(acc.Role.INPUT_OUTPUT, M, L, name="E")
    T = arr(acc.Role.TEMP, M, N, name="T")
    n0 = acc.Nest(shape=(M, N, K))
    i0, j0, k0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        T[i0, j0] += A[i0, k0] * B[k0, j0]

    n1 = acc.Nest(shape=(M, L, N))
    i1, l1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        E[i1, l1] += T[i1, j1] * D[j1, l1]

    return (A, B, D, E), (n0, n1), (i0, j0, k0), (i1, l1, j1)


# -- building and checking ---------------------------------------------------------------------

class Built:
    """All legal schedules of this module in one package (one compiler run)."""

    cases: list = []

    @classmethod
    def add(cls, name, schedule, args, nests):
        cls.cases.append((name, schedule, args, nests))


def _inputs(args):
    out = []
    for a in args:
        out.append(rand(*a.shape))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    _register_all()
    pkg = acc.Package()
    for name, schedule, args, _ in Built.cases:
        pkg.add(schedule, args=args, base_name=name)
    return pkg.build("fusion_cases", output_dir=tmp_path_factory.mktemp("fusion"))


def _register_all():
    if Built.cases:
        return
    for fn in REGISTRY:
        fn()


REGISTRY = []


def case(fn):
    REGISTRY.append(fn)
    return fn


def run_and_compare(built, name):
    _register_all()
    (_, schedule, args, nests) = next(c for c in Built.cases if c[0] == name)
    got = _inputs(args)
    want = [x.copy() for x in got]
    evaluate(nests, dict(zip(args, want)))
    getattr(built, name)(*got)
    for a, g, w in zip(args, got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"{name}: {a.name}")


# -- Accera's examples -------------------------------------------------------------------------

@case
def _full():
    args, nests, _, _ = shift_scale()
    s = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    Built.add("full", s, args, nests)


@case
def _full_tiled():
    args, nests, _, _ = shift_scale()
    s = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    i, j, f = s.get_indices()
    ii, jj = s.tile({i: 4, j: 5})
    s.reorder(i, j, f, ii, jj)
    Built.add("full_tiled", s, args, nests)


@case
def _full_f_first():
    args, nests, _, _ = shift_scale()
    s = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    i, j, f = s.get_indices()
    s.reorder(f, i, j)  # the same as running the schedules one after the other
    Built.add("full_f_first", s, args, nests)


@case
def _relu_partial2():
    args, nests, _, _ = matmul_relu()
    s = acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    ii, jj = s.tile({i: 4, j: 4})
    s.reorder(i, j, ii, jj, f, k)
    Built.add("relu_partial2", s, args, nests)


@case
def _relu_partial2_f_outside_tile():
    args, nests, _, _ = matmul_relu()
    s = acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    ii, jj = s.tile({i: 4, j: 4})
    s.reorder(i, j, f, ii, jj, k)
    Built.add("relu_partial2_tile_f", s, args, nests)


@case
def _partial1_split_unfused():
    args, nests, (i0, j0), (i1, j1) = shift_scale(M=5, N=11)
    s0, s1 = nests[0].create_schedule(), nests[1].create_schedule()
    s = acc.fuse((s0, s1), partial=1)
    i, f, j0_, j1_ = s.get_indices()
    assert (j0_, j1_) == (j0, j1)
    j0i = s.split(j0, 3)
    s.reorder(i, f, j1, j0, j0i)
    Built.add("partial1_split", s, args, nests)


@case
def _unequal_extents():
    # s0 over 8 x 6, s1 over 5 x 10: the fused space is 8 x 10, each padded
    A, X = arr(acc.Role.INPUT, 8, 6), arr(acc.Role.INPUT_OUTPUT, 8, 6)
    B, Y = arr(acc.Role.INPUT, 5, 10), arr(acc.Role.INPUT_OUTPUT, 5, 10)
    n0 = acc.Nest(shape=(8, 6))
    i0, j0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        X[i0, j0] += A[i0, j0] * 3

    n1 = acc.Nest(shape=(5, 10))
    i1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        Y[i1, j1] -= B[i1, j1]

    s = acc.fuse(n0.create_schedule(), n1.create_schedule())
    assert s.get_shape() == [8, 10, 2]
    i, j, f = s.get_indices()
    jj = s.split(j, 4)
    s.reorder(i, j, f, jj)
    Built.add("unequal", s, (A, X, B, Y), [n0, n1])


def _line(n, role_out=acc.Role.INPUT_OUTPUT):
    X = arr(acc.Role.INPUT, n)
    Y = arr(role_out, n)
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i] * 2 + 1

    return X, Y, nest


@case
def _concat3():
    parts = [_line(n) for n in (11, 7, 5)]
    s = acc.fuse(tuple(p[2].create_schedule() for p in parts), partial=0)
    f, a, b, c = s.get_indices()
    assert s.get_shape() == [3, 11, 7, 5]
    assert s.get_fusing_index() is f and s.get_fused_indices() == ()
    args = tuple(x for p in parts for x in p[:2])
    Built.add("concat3", s, args, [p[2] for p in parts])


@case
def _nested():
    args, nests, _, _ = shift_scale(M=6, N=6)
    A, B, C = args
    D = arr(acc.Role.INPUT, 6, 6)
    n2 = acc.Nest(shape=(6, 6))
    i2, j2 = n2.get_indices()

    @n2.iteration_logic
    def _():
        C[i2, j2] -= D[i2, j2]

    inner = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    outer = acc.fuse((inner, n2.create_schedule()), partial=2)
    i, j, g, f = outer.get_indices()  # g fuses the two; f, the inner fuse's index, is unfused here
    assert outer.get_fusing_index() is g and outer.get_unfused_indices() == (f,)
    Built.add("nested", outer, (A, B, C, D), [nests[0], nests[1], n2])


@case
def _three_matmul_row_fused():
    args, nests, _, _ = three_matmul()
    s = acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=1)
    i, f, j0, k0, l1, j1 = s.get_indices()
    Built.add("three_matmul", s, args, nests)


@case
def _fused_runtime_sizes():
    M, N = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, shape=(M, N), element_type=I32)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), element_type=I32)
    n0 = acc.Nest(shape=(M, N))
    i0, j0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        C[i0, j0] += A[i0, j0]

    n1 = acc.Nest(shape=(M, N))
    i1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        C[i1, j1] *= A[i1, j1]

    s = acc.fuse(n0.create_schedule(), n1.create_schedule())
    i, j, f = s.get_indices()
    jj = s.split(j, 4)
    s.reorder(i, j, f, jj)
    Built.cases.append(("runtime", s, (M, N, A, C), [n0, n1]))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["full", "full_tiled", "full_f_first", "relu_partial2", "relu_partial2_tile_f",
                                  "partial1_split", "unequal", "concat3", "nested", "three_matmul"])
def test_fused_schedule_matches_reference(built, name):
    run_and_compare(built, name)


def test_fused_runtime_sizes(built):
    _register_all()
    A, C = next(c for c in Built.cases if c[0] == "runtime")[2][2:]
    for m, n in ((3, 9), (7, 4), (1, 1)):
        a, c = rand(m, n), rand(m, n)
        want = (c + a) * a
        built.runtime(m, n, a, c)
        np.testing.assert_array_equal(c, want)


def test_fused_loops_have_no_guards():
    """Fusing adds `f == s` to each part: unswitching leaves no `if` in the loops."""
    args, nests, _, _ = shift_scale(M=8, N=12)
    s = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    i, j, f = s.get_indices()
    ii, jj = s.tile({i: 4, j: 5})  # 12 = 5 + 5 + 2: full tiles and a tail
    s.reorder(i, j, f, ii, jj)
    text = s.to_python(unswitched=True)
    assert "if" not in text, text
    assert text.count("for jj") == 4 and text.count("*= B") == 2, text


def test_printed_fused_schedule_shows_parts():
    args, nests, _, _ = matmul_relu(4, 4, 4)
    s = acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=2)
    text = str(s)
    assert "for f in range(2)" in text and "for k" in text and "max" in text


# -- indices and rules ------------------------------------------------------------------------

def test_index_queries_and_initial_order():
    args, nests, (i0, j0, k0), (i1, j1) = matmul_relu()
    s = acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    assert s.get_fused_indices() == (i, j)
    assert s.get_fusing_index() is f
    assert s.get_unfused_indices() == (k0,)
    assert k is k0
    assert (i.name, j.name, f.name) == ("i0", "j0", "f")
    assert s.get_shape() == [10, 9, 2, 7]


def test_full_fusion_needs_equal_rank():
    args, nests, _, _ = matmul_relu()
    with pytest.raises(ValueError, match="equal rank"):
        acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=3)


def test_fusing_index_precedes_unfused_indices():
    args, nests, (i0, j0, k0), _ = matmul_relu()
    s = acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    with pytest.raises(ValueError, match="fusing index f must precede the unfused index k0"):
        s.reorder(i, j, k, f)  # Accera's illegal order: ReLU would run before the sum is complete
    assert s.get_indices() == [i, j, f, k]
    kk = s.split(k, 2)
    with pytest.raises(ValueError, match="must precede the unfused index"):
        s.reorder(i, j, k, kk, f)  # ... split children of unfused indices too
    assert s._unfused_set(s._structure()) == {id(k), id(kk)}
    assert not s.is_valid_loop_order((i, kk, j, k, f))
    assert s.is_valid_loop_order((f, i, j, k, kk))  # f may precede fused indices


def test_fusing_index_cannot_be_split_vectorized_or_parallelized():
    args, nests, _, _ = shift_scale()
    s = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    i, j, f = s.get_indices()
    with pytest.raises(ValueError, match="cannot be split"):
        s.split(f, 2)
    s.reorder(i, f, j)
    p = s.create_plan()
    with pytest.raises(ValueError, match="fusing index"):
        p.parallelize(f)
    s2 = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    with pytest.raises(ValueError, match="fusing index"):
        s2.create_plan().vectorize(s2.get_fusing_index())


def test_old_handles_of_fused_indices_are_refused_with_a_hint():
    args, nests, (i0, j0), _ = shift_scale()
    s = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    with pytest.raises(ValueError, match="i0 was fused into i0"):
        s.split(i0, 2)


def test_fuse_argument_errors():
    args, nests, _, _ = shift_scale()
    s0 = nests[0].create_schedule()
    with pytest.raises(ValueError, match="same schedule"):
        acc.fuse(s0, s0)
    with pytest.raises(TypeError, match="schedules\\[1\\]"):
        acc.fuse(s0, nests[1])
    with pytest.raises(ValueError, match="partial"):
        acc.fuse((s0, nests[1].create_schedule()), partial=-1)
    s1 = nests[1].create_schedule()
    s1.split(s1.get_indices()[0], 2)
    with pytest.raises(ValueError, match="different steps"):
        acc.fuse((nests[0].create_schedule(), s1), partial=1)


# -- legality -------------------------------------------------------------------------------

def test_accera_unsafe_example_is_refused_with_a_counterexample():
    """Reorder s0 to (j, i), then fuse C += A with C *= B: element C[a, b] is multiplied
    at fused point (a, b) but only shifted at (b, a), so for a < b the multiply runs first."""
    args, nests, (i0, j0), _ = shift_scale()
    s0, s1 = nests[0].create_schedule(), nests[1].create_schedule()
    s0.reorder(j0, i0)
    with pytest.raises(acc.ScheduleError) as e:
        acc.fuse(s0, s1)
    msg = str(e.value)
    assert "changes the result" in msg and "C[" in msg
    assert "nest 0" in msg and "nest 1" in msg and "runs the second first" in msg
    assert "unsafe=True" in msg


def test_unsafe_builds_anyway_and_logs_a_warning(tmp_path, caplog):
    args, nests, (i0, j0), _ = shift_scale(M=4, N=4)
    s0, s1 = nests[0].create_schedule(), nests[1].create_schedule()
    s0.reorder(j0, i0)
    with caplog.at_level(logging.WARNING, logger="accpy"):
        s = acc.fuse(s0, s1, unsafe=True)
    assert any("unsafe=True" in r.getMessage() for r in caplog.records)
    pkg = acc.Package()
    pkg.add(s, args=args, base_name="unsafe_fused")
    lib = pkg.build("unsafe_fused", output_dir=tmp_path)
    A, B, C = args
    a, b = np.ones((4, 4), np.int32), np.full((4, 4), 2, np.int32)
    c = np.zeros((4, 4), np.int32)
    want = (c + a) * b
    lib.unsafe_fused(a, b, c)
    assert not np.array_equal(c, want)  # the warning was right: the result changed


def test_matmul_relu_with_swapped_fused_indices_is_refused():
    args, nests, (i0, j0, k0), _ = matmul_relu()
    s0 = nests[0].create_schedule()
    s0.reorder(j0, i0, k0)
    with pytest.raises(acc.ScheduleError, match=r"C\[.*max\(C"):
        acc.fuse((s0, nests[1].create_schedule()), partial=2)


def test_three_matmul_fusing_the_inner_index_is_refused():
    """E[i, l] needs the whole row T[i, :]: fusing (i, j) of T += A B with (i, l) of E += T D
    would use T[i, j] before its sum is complete."""
    args, nests, _, _ = three_matmul()
    with pytest.raises(acc.ScheduleError, match="T\\["):
        acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=2)


def test_transforms_after_fusing_are_checked():
    args, nests, _, _ = matmul_relu()
    s = acc.fuse((nests[0].create_schedule(), nests[1].create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    s.reorder(j, i, f, k)  # column-major tiles: still legal
    s.skew(i, j)  # legal too: every (i, j) still finishes its sum before its ReLU
    with pytest.raises(acc.ScheduleError, match=r"C\[0, 0\].*k0=1.*updates it"):
        s.skew(j, k)  # matmul instance (i, j, k) moves to j + k: after the ReLU of (i, j)


def test_parameters_caches_and_debug_mode_on_a_fused_schedule(tmp_path):
    """A split size as a parameter after fusing, a cache at the fusing index, and DEBUG mode
    (which runs the nests one after the other as its oracle)."""
    P = acc.create_parameters()
    args, nests, _, _ = shift_scale(M=9, N=14)
    A, B, C = args
    s = acc.fuse(nests[0].create_schedule(), nests[1].create_schedule())
    i, j, f = s.get_indices()
    jj = s.split(j, P)
    s.reorder(i, j, f, jj)
    plan = s.create_plan()
    plan.cache(C, index=f)
    pkg = acc.Package()
    fns = pkg.add(plan, args=args, base_name="pfused", parameters=[{P: 4}, {P: 5}])
    lib = pkg.build("pfused", output_dir=tmp_path, mode=acc.Mode.DEBUG)
    for fn in fns:
        a, b, c = rand(9, 14), rand(9, 14), rand(9, 14)
        want = (c + a) * b
        getattr(lib, fn.name)(a, b, c)
        np.testing.assert_array_equal(c, want)


def test_fused_nests_whose_unfused_indices_share_a_name_are_checked_apart():
    """Two fused nests each with an unfused index named j: the legality check keeps the two dims
    apart (one that merged them missed the conflicts needing j != 0 and accepted this order)."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 3), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 3), name="B")

    def doubling():
        n = acc.Nest(shape=(4, 3))
        i, j = n.get_indices()

        @n.iteration_logic
        def _():
            A[i, j] = A[i, j] * 2.0

        return n

    def reading():
        n = acc.Nest(shape=(4, 3))
        i, j = n.get_indices()

        @n.iteration_logic
        def _():
            B[i, j] = A[3 - i, 2]

        return n

    with pytest.raises(acc.ScheduleError, match="changes the result"):
        acc.fuse((doubling().create_schedule(), reading().create_schedule()), partial=1)
