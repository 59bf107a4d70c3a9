"""plan.prefetch: software prefetch of the lines a loop's body reads or writes `distance`
iterations later. A hint: results never change; the C shows which lines are asked for."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.testing import assert_equivalent

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "samples"))
from abi.kernels import mixed_matmul_nest  # noqa: E402

F32 = acc.ScalarType.float32
# the code read here is emitted for named models, whatever this machine is
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)  # 16 float32 lanes
AMX = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8480PLUS)  # the tile unit's instructions


def _matmul(M=64, N=64, K=64, vector=16, panel=None):
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(M, N, K, F32, F32, F32)
    s = nest.create_schedule()
    jj = s.split(j, panel or 2 * vector)
    kk = s.split(k, 16)
    jjj = s.split(jj, vector)
    s.reorder(j, k, i, jj, kk, jjj)
    return nest, s, (A, B, C), (i, j, k, jj, kk, jjj)


def _prefetches(code: str) -> list:
    return re.findall(r"__builtin_prefetch\(\(const void\*\)\(\(uintptr_t\)(\w+) \+ \(uintptr_t\)\((\d+)\*\((.*?)\)\)\), "
                      r"(\d), (\d)\);", code)


def _loop_body(code: str, var: str) -> str:
    """The text of the first loop over `var`, up to its closing brace."""
    start = code.index(f"for (int64_t {var} = ")
    depth, pos = 0, code.index("{", start)
    for q in range(pos, len(code)):
        depth += {"{": 1, "}": -1}.get(code[q], 0)
        if depth == 0:
            return code[start:q + 1]
    raise AssertionError("unbalanced")


def test_prefetch_of_a_packed_cache_and_of_an_array_row():
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul()
    p = s.create_plan(AVX512)
    p.cache(B, index=i, trigger_index=k)  # the loop reads B's packed block, not B
    p.cache(C, index=kk)
    p.vectorize(jjj)
    p.prefetch(B, index=kk, distance=4)
    p.prefetch(A, index=kk, distance=8, locality=1)
    code = p.emit_c()
    body = _loop_body(code, "kk")
    got = _prefetches(body)
    # B's block is 32 floats wide: one 64-byte line per kk at 16*jj + 32*kk, four rows ahead;
    # A: the element 8 columns ahead, kept out of the inner cache levels (locality 1)
    assert ("B_cache", "4", "16*jj + 32*kk + 128", "0", "3") in got
    assert ("A", "4", "64*i + 16*k + kk + 8", "0", "1") in got
    assert len(got) == 2
    # at the top of the body, before the FMA
    assert body.index("__builtin_prefetch") < body.index("_mm512_fmadd_ps")
    assert "prefetch=(B, index=kk, distance=4)" in repr(p) and "prefetch=(A, index=kk, distance=8, locality=1)" in repr(p)


def test_one_prefetch_per_line_of_a_run_and_one_per_far_apart_row():
    # a 48-float row of the packed block (three vector loads side by side): three lines;
    # four rows of A 4 KiB apart (unrolled): four lines
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul(M=64, N=96, K=1024, panel=48)
    ii = s.split(i, 4)
    s.reorder(j, k, i, kk, ii, jj, jjj)
    p = s.create_plan(AVX512)
    p.cache(B, index=i, trigger_index=k)
    p.unroll(ii)
    p.unroll(jj)
    p.vectorize(jjj)
    p.prefetch(B, index=kk, distance=8)
    p.prefetch(A, index=kk, distance=16)
    got = _prefetches(_loop_body(p.emit_c(), "kk"))
    b_lines = sorted(int(re.search(r"\+ (\d+)$", x[2]).group(1)) for x in got if x[0] == "B_cache")
    a_lines = sorted(int(re.search(r"\+ (\d+)$", x[2]).group(1)) for x in got if x[0] == "A")
    assert b_lines == [8 * 48, 8 * 48 + 16, 8 * 48 + 32]
    assert a_lines == [16, 16 + 1024, 16 + 2048, 16 + 3072]


def test_stores_are_prefetched_for_writing_and_fixed_addresses_not_at_all():
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul()
    p = s.create_plan(AVX512)
    p.cache(C, index=kk)
    p.vectorize(jjj)
    p.prefetch(C, index=jj, distance=1)  # the C tile loaded before kk and stored after it
    got = _prefetches(_loop_body(p.emit_c(), "jj"))
    assert got and all(g[0] == "C" and g[3] == "1" for g in got)
    # C's element moves with jj; nothing of it moves with kk (its tile is in a register there)
    with pytest.raises(ValueError, match=r"prefetch\(C, index=kk, distance=1\): .*nothing to prefetch"):
        q = s.create_plan(AVX512)
        q.cache(C, index=kk)
        q.vectorize(jjj)
        q.prefetch(C, index=kk)
        q.emit_c()


def test_prefetch_of_one_cache_only():
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul()
    p = s.create_plan(AVX512)
    bc = p.cache(B, index=i, trigger_index=k)
    p.vectorize(jjj)
    p.prefetch(bc, index=kk, distance=2)
    got = _prefetches(_loop_body(p.emit_c(), "kk"))
    assert {g[0] for g in got} == {"B_cache"}
    assert "prefetch=(B, index=kk, distance=2)" in repr(p)


@pytest.mark.parametrize("distance", [1, 3, 1000])
def test_results_do_not_change(distance):
    # prefetching past the end of the data (distance 1000) never faults
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul(M=20, N=70, K=37)
    p = s.create_plan()
    p.cache(B, index=i, trigger_index=k)
    p.cache(C, index=kk)
    p.vectorize(jjj)
    p.prefetch(B, index=kk, distance=distance)
    p.prefetch(A, index=kk, distance=distance)
    p.prefetch(C, index=jj, distance=distance)
    assert_equivalent(s, p, (A, B, C), opt="-O3")


def test_the_sgemm_sample_prefetches_its_packed_block(tmp_path):
    from optimized_matmul import block_sizes, matmul_plan

    plan, args = matmul_plan(64, 200, 900, threads=1, target=AVX512)
    assert (block_sizes(AVX512, 64, 200, 900, 1)["MR"], block_sizes(AVX512, 64, 200, 900, 1)["NR"]) == (8, 48)
    got = _prefetches(_loop_body(plan.emit_c(), "kk"))
    assert len(got) == 3 and {g[0] for g in got} == {"B_cache"}  # 8 x 48 micro-tiles: three lines ahead
    # built for this machine (its own blocks): a prefetch of the packed block, the product exact
    plan, args = matmul_plan(64, 200, 900, threads=1)
    got = _prefetches(_loop_body(plan.emit_c(), "kk"))
    assert got and {g[0] for g in got} == {"B_cache"}
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s, dtype=np.float32) for s in ((64, 900), (900, 200), (64, 200)))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="sgemm")
    lib = pkg.build("pf_sgemm", output_dir=tmp_path, python_module=False)
    want = c + a @ b
    lib.sgemm(a, b, c)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)


def test_bad_arguments_name_what_was_expected():
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul()
    p = s.create_plan()
    with pytest.raises(ValueError, match="distance: expected a positive int"):
        p.prefetch(B, index=kk, distance=0)
    with pytest.raises(ValueError, match="distance: expected a positive int"):
        p.prefetch(B, index=kk, distance=True)
    with pytest.raises(ValueError, match="locality: expected 0, 1, 2 or 3"):
        p.prefetch(B, index=kk, locality=4)
    with pytest.raises(TypeError, match="source: expected an acc.Array"):
        p.prefetch("B", index=kk)
    other = acc.Array(role=acc.Role.INPUT, shape=(4,), name="Other")
    with pytest.raises(ValueError, match="does not access array Other"):
        p.prefetch(other, index=kk)
    _, s2, (A2, B2, C2), ix2 = _matmul()
    with pytest.raises(ValueError, match="cache of another plan"):
        p.prefetch(s2.create_plan().cache(B2, index=ix2[0]), index=kk)
    with pytest.raises((TypeError, ValueError), match="index"):
        p.prefetch(B, index=ix2[4])
    assert "prefetch" not in repr(p)  # refused calls leave nothing behind
    # a loop that disappears (unrolled) has nowhere to put them: the build says so
    p.unroll(kk)
    p.prefetch(B, index=kk)
    with pytest.raises(ValueError, match=r"prefetch\(B, index=kk, distance=1\): .*unrolled or vectorized"):
        p.emit_c()


def test_prefetch_waits_for_parameter_values(tmp_path):
    P = acc.create_parameters()
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul()
    p = s.create_plan(AVX512)
    p.vectorize(jjj)
    p.prefetch(B, index=kk, distance=P)
    assert "waiting for parameters" in repr(p)
    pkg = acc.Package()
    pkg.add(p, args=(A, B, C), base_name="pf", parameters={P: 5})
    pkg.build("pf_param", output_dir=tmp_path, format=acc.Package.Format.HAT_SOURCE)
    got = _prefetches((tmp_path / "pf_param.c").read_text())
    # B's rows are 64 floats: five of them ahead
    assert got and all(g[0] == "B" and g[2].endswith("+ 320") for g in got), got


def test_tile_loads_prefetch_every_row_of_their_tiles():
    # an intrinsic declares the memory it reads (a tile load: 16 rows of 64 bytes, `stride` apart):
    # prefetching A in the k loop of the tile matmul asks for each row of the next A tile
    from int8_matmul import tile_matmul_plan

    # (1 x 3 tiles, A's tiles loaded straight from A)
    plan, (A, B, C) = tile_matmul_plan(64, 96, 256, "int8", 1, target=AMX,
                                       sizes=dict(GR=1, GC=3, NC=96, KC=256, PA=0))
    k = next(ix for ix in plan.schedule.get_indices() if ix.name == "k")  # the loop over tile depths
    plan.prefetch(A, index=k, distance=1)
    got = _prefetches(_loop_body(plan.emit_c(), "k"))
    assert {g[0] for g in got} == {"A"}
    rows = sorted(int(re.search(r"\+ (\d+)$", g[2]).group(1)) if "+" in g[2] else 0 for g in got)
    assert rows == [64 + 256 * r for r in range(16)]  # the next k step: 64 bytes on, each of 16 rows


@pytest.mark.slow
def test_tile_matmul_with_prefetches_is_exact(tmp_path):
    from int8_matmul import tile_matmul_plan

    plan, (A, B, C) = tile_matmul_plan(40, 70, 200, "int8", 1)
    k = next(ix for ix in plan.schedule.get_indices() if ix.name == "k")
    plan.prefetch(A, index=k, distance=2)
    pkg = acc.Package()
    pkg.add(plan, args=(A, B, C), base_name="mm")
    lib = pkg.build("pf_tiles", output_dir=tmp_path, python_module=False)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (40, 200), dtype=np.uint8)
    b = rng.integers(-128, 128, (200, 70), dtype=np.int8)
    c = rng.integers(-1000, 1000, (40, 70), dtype=np.int32)
    want = c + a.astype(np.int32) @ b.astype(np.int32)
    lib.mm(a, b, c)
    np.testing.assert_array_equal(c, want)


def _tile_plan_with_c_prefetch(K=256, spread=True, unroll_k=False, target=AMX):
    """The tile sample's 2 x 2 plan over a 64 x 96 x K int8 matmul, C's next 2 x 2 block of
    accumulator tiles prefetched in the loop over 32-column steps (j1), spread over the k loop;
    for `target` (None: the sample's, this machine's tile unit or its functional model)."""
    from int8_matmul import tile_matmul_plan

    plan, args = tile_matmul_plan(64, 96, K, "int8", 1, target=target, sizes=dict(GR=2, GC=2, NC=96, KC=K, PA=1))
    ix = {x.name: x for x in plan.schedule.get_indices()}
    if unroll_k:
        plan.unroll(ix["k"])
    plan.prefetch(args[2], index=ix["j1"], distance=1, locality=1, spread=ix["k"] if spread else None)
    return plan, args


def _lines_asked(code: str, var: str, trips: int, j1: int = 0) -> list:
    """The byte offsets (from C, at i = 0 and the given `j1`) of the prefetches in the first loop
    of `var`, over its `trips` iterations, honouring the `if (...)` guards around them."""
    out = []
    for t in range(trips):
        env, guard = {"i": 0, "j1": j1, var: t}, None
        for line in _loop_body(code, var).splitlines()[1:]:
            g = re.match(r"\s*if \((.*)\) \{$", line)
            if g:
                guard = g.group(1)
            elif line.strip() == "}":
                guard = None
            m = re.search(r"__builtin_prefetch\(\(const void\*\)\(\(uintptr_t\)C \+ \(uintptr_t\)\((\d+)\*\((.*?)\)\)\), "
                          r"1, 1\);", line)
            if m and (guard is None or eval(guard, {}, env)):
                out.append(int(m.group(1)) * eval(m.group(2), {}, env))
    return sorted(out)


def test_spread_shares_the_next_accumulator_block_out_over_the_k_loop():
    plan, _ = _tile_plan_with_c_prefetch(K=256)
    code = plan.emit_c()
    j1 = _loop_body(code, "j1")
    k = _loop_body(code, "k")
    # none at the top of j1's body: 32 rows of 128 bytes (two lines each) in 4 k steps, 8 rows each
    assert j1.index("__builtin_prefetch") > j1.index("for (int64_t k = ")
    assert len(re.findall(r"__builtin_prefetch", k)) == 16
    # C is loaded and stored there: prefetched for writing, kept out of L1 (locality 1)
    assert all(g[3] == "1" and g[4] == "1" for g in _prefetches(k))
    # the same lines as all of them at the top: C's rows are 96 ints (384 bytes); the next block
    # starts 32 ints (128 bytes) on
    top, _ = _tile_plan_with_c_prefetch(K=256, spread=False)
    at_top = sorted(int(c) * eval(e, {}, {"i": 0, "j1": 0}) for _, c, e, _, _ in _prefetches(_loop_body(top.emit_c(), "j1")))
    assert _lines_asked(code, "k", 4) == at_top == sorted(128 + 384 * r + 64 * h for r in range(32) for h in (0, 1))
    assert _lines_asked(code, "k", 4, j1=1) == [x + 128 for x in at_top]
    assert _lines_asked(code, "k", 4, j1=2) == []  # the last block of columns: nothing past it
    assert "spread=k" in repr(plan)


def test_spread_guards_the_slots_of_the_last_iterations():
    # 32 rows over 3 k steps: 11 per step, the last step's last slot empty
    plan, args = _tile_plan_with_c_prefetch(K=192)
    code = plan.emit_c()
    k = _loop_body(code, "k")
    assert re.search(r"if \(\(\(11\*k \+ 10\) < 32\)\) \{", k)
    assert _lines_asked(code, "k", 3) == sorted(128 + 384 * r + 64 * h for r in range(32) for h in (0, 1))


def test_spread_without_its_loop_puts_them_at_the_top():
    plan, _ = _tile_plan_with_c_prefetch(K=256, unroll_k=True)  # the k loop is unrolled away
    j1 = _loop_body(plan.emit_c(), "j1")
    assert len(re.findall(r"__builtin_prefetch", j1)) == 64
    assert j1.index("__builtin_prefetch") < j1.index("accpy_amx_dpbusd")


@pytest.mark.parametrize("K", [192, 256, 200])
def test_spread_prefetches_leave_the_tile_matmul_exact(tmp_path, K):
    plan, args = _tile_plan_with_c_prefetch(K=K, target=None)  # runs here
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build(f"pf_spread_{K}", output_dir=tmp_path, python_module=False)
    rng = np.random.default_rng(K)
    a = rng.integers(0, 256, (64, K), dtype=np.uint8)
    b = rng.integers(-128, 128, (K, 96), dtype=np.int8)
    c = rng.integers(-1000, 1000, (64, 96), dtype=np.int32)
    want = c + a.astype(np.int32) @ b.astype(np.int32)
    lib.mm(a, b, c)
    np.testing.assert_array_equal(c, want)


def test_spread_of_a_single_line_and_results_unchanged():
    # one C vector per jj iteration: asked for in the first kk iteration only
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul(M=20, N=70, K=37)
    for target in (AVX512, None):  # the code read for a named model; the results on this machine
        p = s.create_plan(target)
        p.cache(C, index=kk)
        p.vectorize(jjj)
        p.prefetch(C, index=jj, distance=1, spread=kk)
        body = _loop_body(p.emit_c(), "kk")
        assert re.search(r"if \(\(kk < 1\)\) \{\s*__builtin_prefetch", body)
    assert_equivalent(s, p, (A, B, C), opt="-O3")


def test_spread_must_be_an_index_inside():
    nest, s, (A, B, C), (i, j, k, jj, kk, jjj) = _matmul()
    p = s.create_plan()
    with pytest.raises(ValueError, match=r"spread: expected an index inside kk's loop .* got jj, which is outside"):
        p.prefetch(B, index=kk, spread=jj)
    with pytest.raises(ValueError, match=r"spread: expected an index inside kk's loop .* got kk"):
        p.prefetch(B, index=kk, spread=kk)
    with pytest.raises(TypeError, match="spread: expected an index of the schedule"):
        p.prefetch(B, index=kk, spread="jjj")
    assert "prefetch" not in repr(p)
