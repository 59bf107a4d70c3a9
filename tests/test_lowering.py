"""Lowering: padding never costs a branch inside the loops (unswitching), skewed loops
become triangle / rectangle / triangle, small loops unroll on request, and every lowered
schedule computes exactly what the reference evaluator computes."""
import re

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

ST = acc.ScalarType


def matmul(element_type=ST.int32, shape=(3, 12, 15)):
    M, N, K = shape
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), element_type=element_type, name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), element_type=element_type, name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), element_type=element_type, name="C")
    nest = acc.Nest(shape=shape)
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C), (i, j, k)


def conv1d(element_type=ST.int32):
    A = acc.Array(role=acc.Role.INPUT, shape=(10,), element_type=element_type, name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(3,), element_type=element_type, name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8,), element_type=element_type, name="C")
    nest = acc.Nest(shape=(8, 3))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[i + j] * B[j]

    return nest, (A, B, C), (i, j)


def counter(shape):
    """Cnt[p] += 1 at every iteration: any schedule must leave exactly one per element."""
    Cnt = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=shape, element_type=ST.int32, name="Cnt")
    nest = acc.Nest(shape=shape)
    idx = nest.get_indices()

    @nest.iteration_logic
    def _():
        Cnt[idx] += 1

    return nest, Cnt, idx


def top_level_loops(text):
    return [ln for ln in text.splitlines() if ln.startswith("for ")]


def c_function_body(c_source, name):
    """The body of the C function `name` (the kernel, without the CPU-check wrapper)."""
    m = re.search(r"void (%s_[0-9a-f]{16}__impl)\(" % name, c_source) or \
        re.search(r"void (%s_[0-9a-f]{16})\(" % name, c_source)
    assert m, f"no function for {name} in the emitted C"
    start = c_source.index("{", m.end())
    end = c_source.index("\n}", start)
    return c_source[start:end]


def has_branch(c_text):
    return re.search(r"\bif\s*\(", c_text) is not None or "?" in c_text


# -- non-dividing split --------------------------------------------------------------------

def test_non_dividing_split_is_unswitched():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    s.split(j, 5)
    assert "if j + jj < 12:" in s.to_python()  # the model has the guard ...
    low = s.to_python(unswitched=True)  # ... lowering removes it
    assert "if" not in low
    # full tiles j in [0, 2), then the tail of 2 columns as its own loop
    assert "for j in range(2):" in low
    assert "for jj in range(5):" in low
    assert "for jj in range(2):" in low
    assert "C[i, jj + 10]" in low
    c = s.create_plan().emit_c("split5")
    assert not has_branch(c)
    assert c.count("for (") == 6  # i, then (j, jj, k) for the full tiles and (jj, k) for the tail


def test_non_dividing_split_of_the_innermost_index_is_unswitched():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    kk = s.split(k, 4)
    s.reorder(k, i, j, kk)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert "for kk in range(4):" in low and "for kk in range(3):" in low
    assert not has_branch(s.create_plan().emit_c("f"))


def test_nested_non_dividing_splits_are_unswitched():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    jj, kk = s.tile({j: 5, k: 4})
    jjj = s.split(jj, 2)
    s.reorder(j, k, i, jj, kk, jjj)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert "min(" not in low and "max(" not in low
    assert not has_branch(s.create_plan().emit_c("f"))


def test_split_by_more_than_the_extent_lowers_to_the_plain_loop():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    s.split(j, 13)
    low = s.to_python(unswitched=True)
    assert low == ("for i in range(3):\n"
                   "    for jj in range(12):\n"
                   "        for k in range(15):\n"
                   "            C[i, jj] += A[i, k] * B[k, jj]")


# -- skew ------------------------------------------------------------------------------------

def test_skew_gives_triangle_rectangle_triangle():
    nest, _, (i, j) = conv1d()
    s = nest.create_schedule()
    s.skew(i, j)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert top_level_loops(low) == ["for i in range(2):", "for i in range(2, 8):", "for i in range(8, 10):"]
    # the rectangle is the full 3-tap loop
    rect = low.split("for i in range(2, 8):\n")[1].split("\nfor ")[0]
    assert "for j in range(3):" in rect
    assert "C[i - j] += A[i] * B[j]" in rect
    c = s.create_plan().emit_c("skewed")
    assert not has_branch(c)


def test_skew_with_unroll_threshold_unrolls_the_triangles():
    nest, _, (i, j) = conv1d()
    s = nest.create_schedule()
    s.skew(i, j, unroll_loops_smaller_than=3)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert top_level_loops(low) == ["for i in range(2, 8):"]
    lines = low.splitlines()
    head = lines[:lines.index("for i in range(2, 8):")]
    tail = lines[lines.index("for i in range(2, 8):") + 3:]
    # upper triangle: A[0] feeds C[0]; A[1] feeds C[1] and C[0]
    assert sorted(head) == sorted(["C[0] += A[0] * B[0]", "C[1] += A[1] * B[0]", "C[0] += A[1] * B[1]"])
    # lower triangle: A[8] feeds C[7] and C[6]; A[9] feeds C[7]
    assert sorted(tail) == sorted(["C[7] += A[8] * B[1]", "C[6] += A[8] * B[2]", "C[7] += A[9] * B[2]"])
    # the rectangle's inner loop (3 iterations) is not below the threshold
    assert "    for j in range(3):" in low
    c = s.create_plan().emit_c("skewed_unrolled")
    assert c.count("for (") == 2
    assert not has_branch(c)


def test_skew_of_the_reference_index_other_way_round():
    nest, _, (i, j) = conv1d()
    s = nest.create_schedule()
    s.skew(j, i)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert not has_branch(s.create_plan().emit_c("f"))


def test_skew_in_three_dimensions_has_no_guards():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    s.skew(k, j)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert not has_branch(s.create_plan().emit_c("f"))


# -- pad -----------------------------------------------------------------------------------

def test_pad_is_unswitched_away():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    s.pad(i, 2)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert top_level_loops(low) == ["for i in range(2, 5):"]
    assert "C[i - 2, j] += A[i - 2, k] * B[k, j]" in low


def test_pad_then_split_gives_a_head_and_full_tiles():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    s.pad(j, 3)
    s.split(j, 5)  # 15 = 3 empty + 12 real: tiles [0,5) (2 real), [5,10), [10,15)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert "for jj in range(3, 5):" in low  # the partial first tile: only its real elements
    assert not has_branch(s.create_plan().emit_c("f"))


# -- the emitted C of a built package ------------------------------------------------------------

def test_built_kernels_equal_the_reference_and_have_no_branches(tmp_path):
    mm, (A, B, C), (i, j, k) = matmul()
    cv, (CA, CB, CC), (ci, cj) = conv1d()
    cases = {}

    s = mm.create_schedule()
    s.split(j, 5)
    cases["mm_split5"] = (s, (A, B, C))
    s = mm.create_schedule()
    jj, kk = s.tile({j: 5, k: 4})
    s.reorder(k, j, i, kk, jj)
    cases["mm_tile"] = (s, (A, B, C))
    s = mm.create_schedule()
    s.pad(j, 3)
    s.split(j, 5)
    cases["mm_pad_split"] = (s, (A, B, C))
    s = mm.create_schedule()
    s.skew(k, j)
    cases["mm_skew"] = (s, (A, B, C))
    s = cv.create_schedule()
    cases["cv_default"] = (s, (CA, CB, CC))
    s = cv.create_schedule()
    s.skew(ci, cj)
    cases["cv_skew"] = (s, (CA, CB, CC))
    s = cv.create_schedule()
    s.skew(ci, cj, unroll_loops_smaller_than=3)
    cases["cv_skew_unrolled"] = (s, (CA, CB, CC))
    s = cv.create_schedule()
    s.skew(cj, ci)
    s.reorder(cj, ci)
    cases["cv_skew_ji"] = (s, (CA, CB, CC))
    s = cv.create_schedule()
    s.pad(ci, 2)
    s.split(ci, 4)
    cases["cv_pad_split"] = (s, (CA, CB, CC))

    # counters: every real iteration runs exactly once
    cnt_nest, Cnt, (p, q) = counter((7, 5))
    cnt_cases = {}
    s = cnt_nest.create_schedule()
    s.split(q, 3)
    s.split(p, 4)
    cnt_cases["cnt_split"] = s
    s = cnt_nest.create_schedule()
    s.skew(p, q)
    cnt_cases["cnt_skew"] = s
    s = cnt_nest.create_schedule()
    s.skew(q, p)
    s.reorder(q, p)
    s.split(q, 4)
    cnt_cases["cnt_skew_split"] = s
    s = cnt_nest.create_schedule()
    s.pad(p, 3)
    s.pad(q, 1)
    s.split(p, 4)
    cnt_cases["cnt_pad"] = s

    pkg = acc.Package()
    for name, (sch, args) in cases.items():
        pkg.add(sch, args=args, base_name=name)
    for name, sch in cnt_cases.items():
        pkg.add(sch, args=(Cnt,), base_name=name)
    built = pkg.build("lowering_equiv", output_dir=tmp_path, python_module=False)

    source = (tmp_path / "lowering_equiv.c").read_text()
    for name in list(cases) + list(cnt_cases):
        body = c_function_body(source, name)
        assert not has_branch(body), f"{name} has a branch in its loops:\n{body}"
    # the unrolled skew has only the rectangle's two loops
    assert c_function_body(source, "cv_skew_unrolled").count("for (") == 2

    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, (3, 15), dtype=np.int32)
    b = rng.integers(-50, 50, (15, 12), dtype=np.int32)
    c0 = rng.integers(-50, 50, (3, 12), dtype=np.int32)
    ca = rng.integers(-50, 50, 10, dtype=np.int32)
    cb = rng.integers(-50, 50, 3, dtype=np.int32)
    cc0 = rng.integers(-50, 50, 8, dtype=np.int32)
    want_mm = c0.copy()
    evaluate(mm, {A: a, B: b, C: want_mm})
    want_cv = cc0.copy()
    evaluate(cv, {CA: ca, CB: cb, CC: want_cv})
    assert np.array_equal(want_cv, cc0 + np.convolve(ca, cb[::-1], mode="valid"))
    for name in cases:
        if name.startswith("mm"):
            got = c0.copy()
            getattr(built, name)(a, b, got)
            assert np.array_equal(got, want_mm), name
        else:
            got = cc0.copy()
            getattr(built, name)(ca, cb, got)
            assert np.array_equal(got, want_cv), name
    for name in cnt_cases:
        got = np.zeros((7, 5), np.int32)
        getattr(built, name)(got)
        assert np.array_equal(got, np.ones((7, 5), np.int32)), name


def test_plan_unroll_removes_the_loop():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    kk = s.split(k, 4)
    plan = s.create_plan()
    plan.unroll(kk)
    c = plan.emit_c("unrolled")
    assert not has_branch(c)
    # loops left: i, j, then k over the full tiles; the tail (k = 12..14) is straight code
    assert "kk" not in c
    assert c.count("for (") == 3
    assert "A[15*i + 14]" in c


def test_lowered_loops_respect_the_schedule_order():
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    s.reorder(k, j, i)
    low = s.to_python(unswitched=True)
    fors = [ln.strip().split()[1] for ln in low.splitlines() if ln.strip().startswith("for ")]
    assert fors == ["k", "j", "i"]


@pytest.mark.parametrize("size", [2, 3, 4, 5, 7, 12, 13, 20])
def test_split_tail_sizes(size):
    nest, _, (i, j, k) = matmul()
    s = nest.create_schedule()
    s.split(j, size)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    full, tail = divmod(12, size)
    if full and tail:
        assert f"for jj in range({size}):" in low and f"for jj in range({tail}):" in low
    elif not full:
        assert "for jj in range(12):" in low


def skewed_then_split_counter():
    nest, Cnt, (p, q) = counter((7, 5))
    s = nest.create_schedule()
    s.skew(q, p)
    s.reorder(q, p)
    s.split(q, 4)
    return s


def test_split_of_a_skewed_dimension_is_unswitched():
    s = skewed_then_split_counter()
    low = s.to_python(unswitched=True)
    assert "if" not in low


def test_split_of_a_runtime_dimension_has_no_guard_in_the_inner_loop():
    N = acc.Dimension(name="N")
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N,), element_type=ST.int32, name="X")
    nest = acc.Nest(shape=(N,))
    n = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[n] += 1

    s = nest.create_schedule()
    s.split(n, 4)
    low = s.to_python(unswitched=True)
    assert "if" not in low
    assert "range(4)" in low  # full tiles have a constant trip count


def test_split_of_a_runtime_dimension_runs_every_iteration_once(tmp_path):
    import numpy as np

    N = acc.Dimension(name="N")
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N,), element_type=ST.int32, name="X")
    nest = acc.Nest(shape=(N,))
    n = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[n] += 1

    s = nest.create_schedule()
    s.split(n, 4)
    pkg = acc.Package()
    pkg.add(s, args=(X, N), base_name="count")
    lib = pkg.build("rtsplit", output_dir=tmp_path, python_module=False)
    for size in range(0, 10):
        x = np.zeros(size, dtype=np.int32)
        lib.count(x, size)
        assert (x == 1).all(), (size, x)


def test_loops_with_overlapping_writes_compute_right_under_gcc_O3(tmp_path):
    """gcc 12.2 -O3 vectorizes `for i: C[2i] += 1; C[2i+1] += 1; C[2i-1] += 1` wrongly (lost
    updates). accpy's emitter must keep such loops correct."""
    import numpy as np

    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(64,), element_type=ST.int32, name="X")
    nest = acc.Nest(shape=(19,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        # the element 2i+1 is written by iteration i (second statement) and i+1 (third)
        X[2 * i + 2] += 1
        X[2 * i + 3] += 1
        X[2 * i + 1] += 1

    pkg = acc.Package()
    pkg.add(nest.create_schedule(), args=(X,), base_name="overlap")
    lib = pkg.build("overlap", output_dir=tmp_path, python_module=False)
    x = np.zeros(64, dtype=np.int32)
    lib.overlap(x)
    want = np.zeros(64, dtype=np.int32)
    for a in range(19):
        want[2 * a + 2] += 1
        want[2 * a + 3] += 1
        want[2 * a + 1] += 1
    assert (x == want).all(), x


@pytest.mark.slow
def test_no_loop_is_empty_for_some_values_of_an_outer_loop(tmp_path):
    """Unswitching used to emit `for ii in range(1 - i)` / `range(1 - i, 1)` (empty for some i):
    a cache's footprint at such a loop covered elements another thread owns, and a parallel
    write-back raced (wrong sums in ~10% of calls). Every loop must run in its context."""
    import numpy as np

    N, M, R = 20, 40, 3
    A = acc.Array(role=acc.Role.INPUT, element_type=ST.int32, shape=(M, N, R), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=ST.int32, shape=(M, N), name="O")
    nest = acc.Nest(shape=(N, M, R))
    i, j, r = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[j, i] += A[j, i, r]

    s = nest.create_schedule()
    ii = s.split(i, 16)
    iii = s.split(ii, 16)
    s.reorder(i, r, j, ii, iii)
    low = s.to_python(unswitched=True)
    assert "range(1 - i" not in low and "- i)" not in low, low
    plan = s.create_plan()
    plan.cache(O, index=r)
    plan.parallelize(i, max_threads=2)
    pkg = acc.Package()
    pkg.add(plan, args=(A, O), base_name="f")
    lib = pkg.build("peel", output_dir=tmp_path, python_module=False)
    a = np.ones((M, N, R), np.int32)
    for _ in range(300):
        o = np.zeros((M, N), np.int32)
        lib.f(a, o)
        assert (o == 3).all()


def test_a_one_column_tail_of_a_register_tile_stays_in_registers():
    """A vectorized loop left with one iteration (the tail column of a register tile, N = 17 in
    lanes of 16) runs as one masked lane: the tile's cache stays in vector registers in every
    piece (as scalar code, its elements were the cache's memory, and so in the full tiles too)."""
    from accpy.testing import assert_matches_reference

    def plan(target=None):
        nest, (A, B, C), (i, j, k) = matmul(ST.float32, shape=(6, 17, 4))
        s = nest.create_schedule()
        jj = s.split(j, 16)
        s.reorder(j, i, k, jj)
        p = s.create_plan(target)
        p.cache(C, index=k)
        p.unroll(i)
        p.vectorize(jj)
        return p, (A, B, C)

    # AVX-512 (16 lanes): the tail is one masked 16-lane vector
    code = plan(acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380))[0].emit_c()
    assert "C_cache[" not in code and "__m512 C_cache_0" in code
    assert re.search(r"C_cache_0 = _mm512_maskz_loadu_ps\(\(\(__mmask16\)\(\(1u << \(1\)\) - 1u\)\), &C\[16\]\)", code)
    # AVX2 (8 lanes): the full columns two vectors, the tail one masked 8-lane vector
    code = plan(acc.Target(acc.Target.Model.INTEL_CORE_I7_4770))[0].emit_c()
    assert "C_cache[" not in code and "__m256 C_cache_0" in code and "__m256 C_cache_8" in code
    assert re.search(r"C_cache_0 = _mm256_maskload_ps\(&C\[16\], ", code)
    assert_matches_reference(*plan())  # on this machine


def test_simplify_folds_conditions_the_loop_ranges_decide():
    """A guard that the ranges of the loops around it decide is folded (the k-blocked pack of a
    VNNI cache had `2 * x < 512` inside `for x in [0, 256)` left in its vector loop); one that
    they do not decide stays, and so does one over a loop with a runtime bound."""
    from accpy.ir.expr import BinOp, Const, Var
    from accpy.ir.stmt import Block, Evaluate, For, If
    from accpy.ir.types import ScalarType as T
    from accpy.ir.visitor import nodes_of
    from accpy.lower.simplify import simplify

    x, n = Var("x"), Var("n")

    def cmp(op, a, b):
        return BinOp(op, a, b, T.bool)

    def twice(v, c=0):
        return BinOp("add", BinOp("mul", Const(2, T.index), v, T.index), Const(c, T.index), T.index)

    def guarded(cond, hi=Const(256, T.index)):
        body = If(cond, Evaluate(Const(1, T.int32)), Evaluate(Const(2, T.int32)))
        return simplify(For(x, Const(0, T.index), hi, Block((body,))))

    def kept(stmt):
        return {node.value.value for node in nodes_of(stmt, Evaluate)}

    assert kept(guarded(cmp("lt", twice(x, 1), Const(512, T.index)))) == {1}  # max 511 < 512
    assert kept(guarded(cmp("ge", twice(x), Const(512, T.index)))) == {2}
    assert kept(guarded(cmp("ne", x, Const(300, T.index)))) == {1}
    assert kept(guarded(cmp("lt", twice(x), Const(300, T.index)))) == {1, 2}  # true for some x only
    assert kept(guarded(cmp("lt", x, Const(8, T.index)), hi=n)) == {1, 2}  # runtime bound: unknown
