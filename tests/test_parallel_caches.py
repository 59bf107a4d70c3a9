"""Caches inside and around parallel loops: each thread's blocks are its own.

A cache filled in a parallel loop's body (an ordinary cache whose site is inside the loop,
or a multicache whose trigger is the parallel loop itself or inside it) must be allocated
inside that body, once per thread; a cache filled before the loop is shared. Races are
intermittent, so besides values (several calls, two threads) the tests check where the
emitted C declares the buffer.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import accpy as acc


def _matmul(M, N, K):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C), (i, j, k)


def _packed_plan(M, N, K, cache_a, par):
    """A (j, k, i, jj, ii, kk, iii, jjj) blocked matmul, as the sgemm sample builds it."""
    nest, args, (i, j, k) = _matmul(M, N, K)
    A, B, C = args
    s = nest.create_schedule()
    jj = s.split(j, 32)
    jjj = s.split(jj, 16)
    kk = s.split(k, 16)
    ii = s.split(i, 16)
    iii = s.split(ii, 4)
    s.reorder(j, k, i, jj, ii, kk, iii, jjj)
    plan = s.create_plan()
    plan.cache(B, index=jj, trigger_index=k, layout=acc.Array.Layout.FIRST_MAJOR)
    idx = {"i": i, "ii": ii, "kk": kk}
    trigger, index = cache_a
    plan.cache(A, index=idx[index], trigger_index=idx[trigger] if trigger else None,
               layout=acc.Array.Layout.LAST_MAJOR)
    plan.parallelize({"i": i, "j": j}[par], max_threads=2)
    return plan, args


def _build(plan, args, tmp_path, name):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name=name)
    lib = pkg.build(name, output_dir=tmp_path)
    return getattr(lib, name), (tmp_path / f"{name}.c").read_text()


def _declared_inside_parallel_for(c_text: str, buffer: str) -> bool:
    """True when `buffer` is declared (stack or heap) after the `omp parallel` pragma."""
    par = c_text.find("#pragma omp parallel")
    decl = re.search(rf"\b{buffer}\b(\[\d+\]| = )", c_text)
    assert par >= 0 and decl, f"no parallel loop or no declaration of {buffer}"
    return decl.start() > par


@pytest.mark.slow
@pytest.mark.parametrize("cache_a, par, private", [
    (("i", "kk"), "i", True),     # multicache triggered at the parallel index: filled per iteration
    (("ii", "kk"), "i", True),    # triggered inside the parallel loop
    ((None, "ii"), "i", True),    # an ordinary cache whose site is inside the parallel loop
    ((None, "i"), "i", False),    # filled before the parallel loop: shared, only read inside
])
def test_cache_filled_in_a_parallel_body_is_per_thread(tmp_path, cache_a, par, private):
    M, N, K = 96, 64, 48
    plan, args = _packed_plan(M, N, K, cache_a, par)
    fn, c_text = _build(plan, args, tmp_path, "pc")
    assert _declared_inside_parallel_for(c_text, "A_cache") == private
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (K, N)).astype(np.float32)
    for _ in range(20):  # a race shows up only now and then: call it many times
        c = np.zeros((M, N), np.float32)
        fn(a, b, c)
        np.testing.assert_array_equal(c, a @ b)  # small integers: exact in float32


def test_tune_sample_packed_a_at_the_parallel_index(tmp_path):
    """The blocking that gave wrong values: A packed per block of rows, parallel over them."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    try:
        from tune_matmul import sgemm_variant
    finally:
        sys.path.pop(0)
    M = N = K = 256
    plan, args = sgemm_variant(M, N, K, 2, NC=128, KC=128, MC=64, MR=8, NR=32, pack_a=True, par="i")
    fn, c_text = _build(plan, args, tmp_path, "tp")
    assert _declared_inside_parallel_for(c_text, "A_cache")
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (K, N)).astype(np.float32)
    for _ in range(10):
        c = np.zeros((M, N), np.float32)
        fn(a, b, c)
        np.testing.assert_array_equal(c, a @ b)


@pytest.mark.slow
def test_heap_caches_are_allocated_once_per_thread(tmp_path):
    """A packed panel too big for the stack, private to each iteration of the parallel loop, is
    allocated once per thread (`omp parallel` { allocate; `omp for`; free }), not per iteration."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    try:
        from optimized_matmul import matmul_plan
    finally:
        sys.path.pop(0)
    M, N, K = 200, 520, 300
    # the sample's plan with fixed blocks (its own choice follows this machine's caches and vector
    # width: on AVX2 it took blocks of 24 columns, on the stack): B's block 300 x 256 floats, 300 KiB,
    # well over the stack's 64 KiB; three blocks of columns for two threads: the parallel loop is j's
    sizes = dict(NC=256, KC=300, MC=96, MR=6, NR=64, pack_a=False, panel_b=True, prefetch=8)
    plan, args = matmul_plan(M, N, K, threads=2, sizes=sizes)
    fn, c_text = _build(plan, args, tmp_path, "hp")
    body = c_text[c_text.index("__impl("):]
    region = body.index("#pragma omp parallel num_threads")
    alloc = body.index("accpy_alloc_array(\"the temporary B_cache\"")
    loop = body.index("#pragma omp for schedule(static)")
    assert region < alloc < loop, "the panel is not allocated between the parallel region and its loop"
    assert body.count("accpy_alloc_array") == 1 and "#pragma omp parallel for" not in body
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (K, N)).astype(np.float32)
    for _ in range(5):
        c = np.zeros((M, N), np.float32)
        fn(a, b, c)
        np.testing.assert_array_equal(c, a @ b)


@pytest.mark.slow
def test_the_sgemm_sample_splits_odd_widths_evenly_between_threads(tmp_path):
    """513 columns on 2 threads: blocks of 257 (4 panels of 64 and a 1-column tail each), not
    blocks of 64 shared 5 to 4; the kernel with its tails computes the product exactly."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    try:
        from optimized_matmul import block_sizes, matmul_plan
    finally:
        sys.path.pop(0)
    avx512 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)  # panels of 64 columns
    M, N, K = 61, 513, 37
    sizes = block_sizes(avx512, M, N, K, 2)
    assert (sizes["NC"], sizes["NR"]) == (257, 64)
    assert block_sizes(avx512, M, 2048, K, 2)["NC"] % 64 == 0  # even widths keep whole panels
    plan, args = matmul_plan(M, N, K, threads=2, sizes=sizes)  # those blocks, built for this machine
    fn, _ = _build(plan, args, tmp_path, "odd")
    rng = np.random.default_rng(5)
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    fn(a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_a_shared_cache_is_filled_by_all_threads(tmp_path):
    """B cached outside the parallel loop over i (shared): its fill, 64 KiB and more, is a parallel
    loop of its own (each thread copies whole rows of the block); a small fill stays serial. Exact,
    over several calls."""
    M, N, K = 64, 256, 128
    nest, args, (i, j, k) = _matmul(M, N, K)
    A, B, C = args
    s = nest.create_schedule()
    ii = s.split(i, 8)
    s.reorder(i, j, k, ii)
    plan = s.create_plan()
    plan.cache(B, index=i)  # the whole 128 x 256 B: filled once, before the loop over i
    plan.parallelize(indices=(i,), max_threads=2)
    code = plan.emit_c()
    fill = re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(int64_t (B_\w+) = 0; \1 < 128;", code)
    assert fill is not None, code[code.index("_impl("):][:1500]
    assert code.count("#pragma omp parallel for") == 2  # the fill, then the loop over i
    fn, _ = _build(plan, args, tmp_path, "shared_fill")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    for _ in range(3):
        c = np.zeros((M, N), np.float32)
        fn(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

    small, sargs, (i, j, k) = _matmul(64, 16, 16)  # a 16 x 16 block: 1 KiB
    s = small.create_schedule()
    plan = s.create_plan()
    plan.cache(sargs[1], index=i)
    plan.parallelize(indices=(i,), max_threads=2)
    assert plan.emit_c().count("#pragma omp parallel for") == 1


def test_fills_whose_iterations_may_overlap_stay_serial():
    """parallel_fills' rule on loop IR: stores into a cache whose subscript spreads over more
    than the loop's step, reads of what the loop writes, or stores outside caches stay serial."""
    from accpy.ir.expr import Buffer, Const, Load, Var, idx_op
    from accpy.ir.kinds import BufferRole, LoopKind
    from accpy.ir.stmt import For, Store
    from accpy.ir.types import ScalarType
    from accpy.lower.parallelize import parallel_fills

    f32 = ScalarType.float32

    def buf(name, role):
        return Buffer(name, f32, (Const(1024), Const(64)), (Const(64), Const(1)), role=role)

    src, cache, out = buf("src", BufferRole.INPUT), buf("cache", BufferRole.CACHE), buf("out", BufferRole.OUTPUT)
    v, t, c = Var("v"), Var("t"), Var("c")

    def fill(row_of, value=None, into=cache):
        body = Store(into, (row_of(v, t), c), value if value is not None else Load(src, (row_of(v, t), c)))
        return For(v, Const(0), Const(256), For(t, Const(0), Const(4), For(c, Const(0), Const(64), body)))

    def parallel(stmt):
        return parallel_fills(stmt, [cache], "static", 2).kind == LoopKind.PARALLEL

    four_rows = lambda v, t: idx_op("add", idx_op("mul", v, Const(4)), t)  # noqa: E731
    assert parallel(fill(four_rows))  # rows 4v .. 4v + 3: disjoint
    overlapping = lambda v, t: idx_op("add", idx_op("mul", v, Const(3)), t)  # noqa: E731
    assert not parallel(fill(overlapping))  # rows 3v .. 3v + 3 meet the next iteration's
    assert not parallel(fill(four_rows, value=Load(cache, (Const(0), c))))  # reads what it writes
    assert not parallel(fill(four_rows, into=out))  # not a cache
    tiny = For(v, Const(0), Const(4), Store(cache, (v, Const(0)), Load(src, (v, Const(0)))))
    assert not parallel(tiny)  # 16 bytes: not worth a parallel region
