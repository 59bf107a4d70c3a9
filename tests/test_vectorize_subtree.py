"""Vectorizing a loop that is not innermost: the loop and its whole subtree (Accera's rule).

The loops inside a vectorized loop are unrolled, and each statement instance runs on all
lanes of the vectorized index: contiguous accesses as vector loads/stores, invariant ones
as broadcasts, other constant strides as AVX-512 gathers/scatters. Recipes from Accera's
documentation, built for a named AVX-512 model and, where this CPU runs its code, run and
compared with the reference evaluator (exactly for ints):
  - a matmul micro-kernel, `kernelize(unroll_indices=(kk,), vectorize_indices=(jj, ii))`:
    lanes along jj (columns of C and B), the rows ii and the reduction kk unrolled inside;
  - a transpose tile `B[j, i] = A[i, j]` vectorized along i with j inside (gathers), and
    along its innermost index (scatters);
  - int16 multiply-accumulate `C[i] += int32(A[i, k]) * int32(B[i, k])` vectorized over
    (i, k) with k of extent 2: one VPMADDWD per 16 outputs (checked with objdump).
Illegal requests raise when `vectorize` / `kernelize` is called, naming the index and why.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

F32, I16, I32 = acc.ScalarType.float32, acc.ScalarType.int16, acc.ScalarType.int32
# the code is emitted, compiled and read for a named AVX-512 model on every machine; it runs where
# HOST has that model's features (not on a CPU without them, nor on one posing as a smaller host)
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_GOLD_6148)
AVX2 = acc.Target.HOST(extensions=("avx2", "fma"), vector_bytes=32)


def runs_here(target) -> bool:
    """Whether code built for `target` may run on `acc.Target.HOST`."""
    return all(acc.Target.HOST.has(f) for f in target.required_features())


def build_and_check(plan, args, nests, tmp_path, name="f", low=-1.0, high=1.0, seed=0):
    """Build `plan`; where its target's code runs here, run it on random data and compare with the
    reference evaluator. Returns (the emitted C, the path of the shared library)."""
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name=name)
    lib = pkg.build(name, output_dir=str(tmp_path), python_module=False)
    so = sorted(Path(tmp_path).rglob("*.so"), key=lambda p: p.stat().st_mtime)
    if not runs_here(plan.target):
        return plan.emit_c(name, args), so[-1] if so else None
    rng = np.random.default_rng(seed)
    got = []
    for a in args:
        dt = a.element_type.dtype
        if np.issubdtype(dt, np.integer):
            got.append(rng.integers(int(low), int(high) + 1, size=a.shape).astype(dt))
        else:
            got.append(rng.uniform(low, high, size=a.shape).astype(dt))
    want = [x.copy() for x in got]
    evaluate(nests, dict(zip(args, want)))
    getattr(lib, name)(*got)
    for a, g, w in zip(args, got, want):
        if np.issubdtype(g.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=a.name)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=a.name)
    return plan.emit_c(name, args), so[-1] if so else None


def disassembly(so: Path) -> str:
    return subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(so)], capture_output=True, text=True,
                          check=True).stdout


# ------------------------------------------------------------------------------------------
# (a) matmul micro-kernel: vectorized jj with the rows ii and the reduction kk unrolled inside
# ------------------------------------------------------------------------------------------


def matmul_kernel(M=12, N=40, K=20):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    ii = s.split(i, 4)
    jj = s.split(j, 16)  # 40 = 2 x 16 + 8: the last column tile is masked
    kk = s.split(k, 4)
    s.reorder(i, j, k, kk, jj, ii)
    return s, (A, B, C), nest, dict(i=i, j=j, k=k, ii=ii, jj=jj, kk=kk)


def test_matmul_micro_kernel_vectorizes_the_subtree_of_jj(tmp_path):
    s, args, nest, x = matmul_kernel()
    plan = s.create_plan(AVX512)
    plan.kernelize(unroll_indices=(x["kk"],), vectorize_indices=(x["jj"], x["ii"]))
    c, _ = build_and_check(plan, args, [nest], tmp_path)
    body = c[c.index("void f("):]
    assert "_mm512_fmadd_ps" in body
    assert "_mm512_mask_storeu_ps" in body  # the 8-column tail stays on the vector path
    assert "for (int64_t ii" not in body and "for (int64_t jj" not in body
    assert "gather" not in body and "scatter" not in body  # every access is contiguous or a broadcast


def test_matmul_micro_kernel_keeps_its_c_tile_in_registers(tmp_path):
    """With C cached at k (a 4 x 16 tile per (i, j)), the tile's every access in the vectorized
    subtree is a whole vector at a constant offset: it lives in four zmm accumulators."""
    s, args, nest, x = matmul_kernel(M=12, N=32, K=20)
    plan = s.create_plan(AVX512)
    plan.cache(args[2], index=x["k"])
    plan.kernelize(unroll_indices=(x["kk"],), vectorize_indices=(x["jj"], x["ii"]))
    c, _ = build_and_check(plan, args, [nest], tmp_path)
    assert all(f"__m512 C_cache_{off};" in c for off in (0, 16, 32, 48)), c
    assert c.count("_mm512_fmadd_ps") == 16  # 4 rows x 4 unrolled kk per k


def test_vectorize_an_outer_index_directly(tmp_path):
    """`plan.vectorize(jj)` alone: ii (inside) is unrolled as part of the subtree."""
    s, args, nest, x = matmul_kernel(M=8, N=32, K=6)
    plan = s.create_plan(AVX512)
    plan.vectorize(x["jj"])
    c, _ = build_and_check(plan, args, [nest], tmp_path)
    assert "_mm512_fmadd_ps" in c and "for (int64_t ii" not in c


def test_vectorizing_rows_of_a_matmul_uses_scatters(tmp_path):
    """Lanes along ii (rows): C and A move by a row per lane, so their accesses are gathers and
    scatters; B[k, jj] does not move with ii and is broadcast."""
    s, args, nest, x = matmul_kernel(M=8, N=32, K=4)
    s.reorder(x["i"], x["j"], x["k"], x["kk"], x["ii"], x["jj"])
    plan = s.create_plan(AVX512)
    plan.vectorize(x["ii"])
    c, so = build_and_check(plan, args, [nest], tmp_path)
    assert "_mm512_mask_i32scatter_ps" in c and "_mm512_mask_i32gather_ps" in c  # 4 rows: 4 of 16 lanes
    asm = disassembly(so)
    assert "vscatterdps" in asm and "vgatherdps" in asm


# ------------------------------------------------------------------------------------------
# (b) transpose tile
# ------------------------------------------------------------------------------------------


def transpose(M=20, N=24, tile=4):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(M, N), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(N, M), name="B")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[j, i] = A[i, j]

    s = nest.create_schedule()
    jj = s.split(j, tile)
    s.reorder(j, i, jj)
    return s, (A, B), nest, dict(i=i, j=j, jj=jj)


def test_transpose_tile_vectorized_along_i_gathers_rows(tmp_path):
    """Lanes along i (20 = 16 + a masked 4) with jj (4) unrolled inside: B[jj, i] is a
    contiguous store, A[i, jj] a gather of lanes a row apart."""
    s, args, nest, x = transpose()
    plan = s.create_plan(AVX512)
    plan.vectorize(x["i"])
    c, so = build_and_check(plan, args, [nest], tmp_path)
    assert "_mm512_i32gather_ps" in c and "_mm512_mask_i32gather_ps" in c and "_mm512_storeu_ps" in c
    assert "vgatherdps" in disassembly(so)


def test_transpose_vectorized_along_its_innermost_index_scatters(tmp_path):
    s, args, nest, x = transpose(M=16, N=48, tile=16)
    plan = s.create_plan(AVX512)
    plan.vectorize(x["jj"])
    c, so = build_and_check(plan, args, [nest], tmp_path)
    assert "_mm512_i32scatter_ps" in c
    assert "vscatterdps" in disassembly(so)


def test_a_last_major_array_along_its_last_dimension_is_gathered(tmp_path):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(8, 20), layout=acc.Array.Layout.LAST_MAJOR,
                  name="Acol")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8, 20), name="C")
    nest = acc.Nest(shape=(8, 20))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, j]

    plan = nest.create_plan(AVX512)
    plan.vectorize(j)
    pkg = acc.Package()
    pkg.add(plan, args=(A, C), base_name="f")
    lib = pkg.build("f", output_dir=str(tmp_path), python_module=False)
    assert "_mm512_i32gather_ps" in plan.emit_c("f", (A, C))
    if runs_here(AVX512):
        rng = np.random.default_rng(1)
        a = np.asfortranarray(rng.uniform(-1, 1, (8, 20)).astype(np.float32))
        c = rng.uniform(-1, 1, (8, 20)).astype(np.float32)
        want = c + a
        lib.f(a, c)
        np.testing.assert_allclose(c, want, rtol=1e-6)


def test_strided_lanes_are_gathered_on_avx2(tmp_path):
    """AVX2's VGATHERDPS (masked in the tail) reads A's lanes a row apart."""
    s, args, nest, x = transpose()
    plan = s.create_plan(AVX2)
    plan.vectorize(x["i"])
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="f")
    pkg.build("f", output_dir=str(tmp_path), python_module=False)
    c = plan.emit_c("f", args)
    assert "_mm256_i32gather_ps(" in c and "_mm256_mask_i32gather_ps(" in c


# ------------------------------------------------------------------------------------------
# (c) int16 multiply-accumulate: VPMADDWD
# ------------------------------------------------------------------------------------------


def int16_dot_pairs(M=40):
    A = acc.Array(role=acc.Role.INPUT, element_type=I16, shape=(M, 2), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=I16, shape=(M, 2), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(M,), name="C")
    nest = acc.Nest(shape=(M, 2))
    i, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += acc.cast(A[i, k], I32) * acc.cast(B[i, k], I32)

    return nest, (A, B, C), i, k


def test_int16_pair_products_become_vpmaddwd(tmp_path):
    nest, args, i, k = int16_dot_pairs()
    plan = nest.create_plan(AVX512)
    plan.vectorize(i)  # the (i, k) subtree: k of extent 2 unrolled, lanes along i
    c, so = build_and_check(plan, args, [nest], tmp_path, low=-32768, high=32767)
    assert "_mm512_madd_epi16" in c and "_mm512_maskz_loadu_epi16" in c  # 40 = 2 x 16 + a masked 8
    assert "vpmaddwd" in disassembly(so)


def test_int16_packed_pairs_accumulate_over_k_with_vpmaddwd(tmp_path):
    """A packed layout (k pairs, rows, 2): C[i] += sum over k, p of A[k, i, p] * B[k, i, p]."""
    K2, M = 3, 32
    A = acc.Array(role=acc.Role.INPUT, element_type=I16, shape=(K2, M, 2), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=I16, shape=(K2, M, 2), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(M,), name="C")
    nest = acc.Nest(shape=(K2, M, 2))
    k, i, p = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += acc.cast(A[k, i, p], I32) * acc.cast(B[k, i, p], I32)

    plan = nest.create_plan(AVX512)
    plan.kernelize(unroll_indices=(), vectorize_indices=(i, p))
    c, so = build_and_check(plan, (A, B, C), [nest], tmp_path, low=-32768, high=32767)
    assert "_mm512_madd_epi16" in c
    assert "vpmaddwd" in disassembly(so)


# ------------------------------------------------------------------------------------------
# errors when vectorize / kernelize is called; the build checks again
# ------------------------------------------------------------------------------------------


def test_inner_loops_of_runtime_extent_are_refused_when_vectorize_is_called():
    N = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(16, N), name="A")
    nest = acc.Nest(shape=(16, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j] += 1.0

    plan = nest.create_plan(AVX512)
    with pytest.raises(ValueError, match=r"vectorize\(i\): the loop of j inside it has a runtime extent"):
        plan.vectorize(i)
    with pytest.raises(ValueError, match=r"vectorize\(i\): the loop of j inside it has a runtime extent"):
        plan.kernelize(unroll_indices=(), vectorize_indices=i)
    assert not plan.loop_annotations()
    plan.vectorize(j)  # innermost: a runtime extent is fine (masked tail)


def test_too_many_unrolled_copies_are_refused_when_vectorize_is_called():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(16, 128, 64), name="A")
    nest = acc.Nest(shape=(16, 128, 64))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j, k] += 1.0

    plan = nest.create_plan(AVX512)
    with pytest.raises(ValueError, match=r"vectorize\(i\): the loops inside it run 8192 or more iterations"):
        plan.vectorize(i)
    plan.vectorize(j)


def test_a_dependence_carried_in_the_subtree_is_refused_when_vectorize_is_called(tmp_path):
    """Lanes along i with j inside: statement instance (i, j) runs before (i - 1, j + 1) in
    vector order, but reads what that one writes."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(17, 5), name="A")
    nest = acc.Nest(shape=(16, 4))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i + 1, j] += A[i, j + 1]

    plan = nest.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): lanes of the vector loop depend on each other"):
        plan.vectorize(i)
    assert not plan.loop_annotations()
    plan.vectorize(i, unsafe=True)  # the vectorizer refuses it again when the package is built
    pkg = acc.Package()
    pkg.add(plan, args=(A,), base_name="f")
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): A is written and read at different elements"):
        pkg.build("f", output_dir=str(tmp_path), python_module=False)


def test_an_inner_loop_whose_extent_depends_on_the_vector_index_is_refused_at_the_call(tmp_path):
    """A triangle (skew): the trip count of the inner loop varies with the lanes (refused when
    `vectorize` is called, not when the package is built)."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8, 8), name="A")
    nest = acc.Nest(shape=(8, 8))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j] += 1.0

    s = nest.create_schedule()
    s.skew(i, j)
    plan = s.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): the loop over j is inside it and runs a "
                                                r"number of iterations that is not a compile-time constant"):
        plan.vectorize(i)
    plan.vectorize(j)  # the innermost loop is fine
    pkg = acc.Package()
    pkg.add(plan, args=(A,), base_name="f")
    pkg.build("f", output_dir=str(tmp_path), python_module=False)


# ------------------------------------------------------------------------------------------
# repr
# ------------------------------------------------------------------------------------------


def test_plan_repr_shows_its_annotations():
    s, (A, B, C), nest, x = matmul_kernel()
    plan = s.create_plan(AVX512)
    assert repr(plan) == f"Plan(target={AVX512.name}, order=(i, j, k, kk, jj, ii))"
    plan.kernelize(unroll_indices=(x["kk"],), vectorize_indices=(x["jj"], x["ii"]))
    plan.cache(B, index=x["kk"], layout=acc.Array.Layout.FIRST_MAJOR)
    plan.parallelize(x["i"])
    r = repr(plan)
    assert "unrolled=(kk)" in r and "vectorized=(jj, ii)" in r, r
    assert "parallel=(i; policy=static, threads=" in r, r
    assert "cache=(B, index=kk, level=3, layout=FIRST_MAJOR)" in r, r


# ------------------------------------------------------------------------------------------
# the sample
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_vectorized_subtrees_sample(tmp_path):
    """The sample runs on any host (the subprocess sees the same HOST, ACCPY_HOST_MODEL included):
    every kernel equals numpy, and contains each instruction whose extensions HOST has."""
    import re
    import shutil

    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, ACCPY_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(repo))
    p = subprocess.run([sys.executable, str(repo / "samples" / "vectorized_subtrees.py"), "--output-dir",
                        str(tmp_path / "out")], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    for name, exact, instruction, features in (("matmul", "", "vfmadd", ("fma",)),
                                               ("transpose", "", "vgatherdps", ("avx2",)),
                                               ("int16", " (exact)", "vpmaddwd", ("avx512f", "avx512bw"))):
        line = re.search(rf"  ok  {name}: C == numpy{re.escape(exact)}; instructions: (.*)", p.stdout)
        assert line, p.stdout
        if shutil.which("objdump") and all(acc.Target.HOST.has(f) for f in features):
            assert instruction in line.group(1), p.stdout
    assert p.stdout.rstrip().endswith("PASS")


def test_plan_repr_of_a_plan_waiting_for_parameters_lists_its_calls():
    P = acc.create_parameters()
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(16, 32), name="A")
    nest = acc.Nest(shape=(16, 32))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j] += 1.0

    s = nest.create_schedule()
    jj = s.split(j, P)
    plan = s.create_plan(AVX512)
    plan.vectorize(jj)
    plan.cache(A, index=jj)
    assert repr(plan) == (f"Plan(target={AVX512.name}, order=known when the parameters have values, "
                          f"waiting for parameters=[vectorize(jj); cache(A, index=jj)])")


def test_the_property_tests_ir_interpreter_reads_strided_lanes():
    """The Python interpreter of lowered plans (tests/support) follows a gather's stride."""
    from support import schedgen as sg

    m = sg._Mem(np.arange(12, dtype=np.float32), (12,), (1,), "A")
    assert m.vld((1,), 4, None, 3) == [1, 4, 7, 10]
    assert m.vld((1,), 4, 2, 3) == [1, 4, 0, 0]
    with pytest.raises(sg.OutOfBounds, match="vector lane 3 of A"):
        m.vld((3,), 4, None, 3)  # lane 3 at element 12
    m.vst((0,), [-1, -2, -3, -4], 4, 3, 4)
    assert list(m.flat[[0, 4, 8]]) == [-1, -2, -3] and m.flat[12 - 1] == 11


def test_kernelize_is_all_or_nothing_and_inner_vector_indices_join_the_outer_subtree(tmp_path):
    """An index inside a vectorized one is unrolled in its subtree: its own lanes, which would
    depend on each other here (A[i + 1, j] reads A[i, j]), are never formed."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(9, 16), name="A")
    nest = acc.Nest(shape=(8, 16))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i + 1, j] += A[i, j]

    s = nest.create_schedule()
    s.reorder(j, i)
    plan = s.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): lanes of the vector loop depend on each other"):
        plan.kernelize(unroll_indices=(), vectorize_indices=i)
    plan2 = nest.create_plan(AVX512)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): lanes"):
        plan2.kernelize(unroll_indices=(j,), vectorize_indices=i)  # i outermost: its lanes would race
    assert not plan2.loop_annotations()  # j's unroll was undone
    plan3 = s.create_plan(AVX512)
    plan3.kernelize(unroll_indices=(), vectorize_indices=(i, j))  # j outer: lanes along j, i unrolled
    assert "vectorized=(j, i)" in repr(plan3)
    build_and_check(plan3, (A,), [nest], tmp_path)
    # unrolling j instead would give i lanes of its own: checked (and refused) then
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): lanes"):
        plan3.unroll(j)
    assert "vectorized=(j, i)" in repr(plan3)


def test_skewed_inner_loops_of_variable_trip_count_are_refused_at_the_call():
    """After a skew the box's extents are constants but the loops inside may be triangles: the
    call lowers the plan and refuses it then (not at build)."""
    A = acc.Array(role=acc.Role.INPUT, shape=(32, 32), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(32, 32), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(32, 32), name="C")
    nest = acc.Nest(shape=(32, 32, 32))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    s.reorder(j, k, i)
    s.skew(k, j)
    jj = s.split(j, 7)
    s.split(k, 8)
    plan = s.create_plan()
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(jj\): the loop over k is inside it and runs a number "
                                                r"of iterations that is not a compile-time constant"):
        plan.vectorize(jj)
    assert plan._kinds == []  # nothing recorded: the plan still builds
    pkg = acc.Package()
    pkg.add(plan, args=(A, B, C), base_name="skv")
