"""plan.tensorize onto the x86 tile unit: int8 (every signedness) and bfloat16 matmuls with A, B and
C cached in tile registers, full and partial tiles, exact against numpy and the reference; on the
functional model always, on the CPU's own AMX where this process may use it (else skipped, saying
why); and the errors that name what did not match."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.targets import x86tile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi.kernels import mixed_matmul_nest  # noqa: E402

S = acc.ScalarType
TILE = acc.MemorySpace.AMX_TILE


def _targets():
    out = [pytest.param(x86tile.emulating(acc.Target.HOST), id="model")]
    host = acc.Target.HOST
    why = "" if all(host.has(f) for f in ("amx_tile", "amx_int8", "amx_bf16")) else "this CPU has no AMX"
    out.append(pytest.param(host, id="amx", marks=pytest.mark.skipif(bool(why), reason=why or "-")))
    return out


def _tile_plan(nest, args, idx, target, kdepth=64, c_across_k=False):
    i, j, k = idx
    A, B, C = args
    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 16), s.split(j, 16), s.split(k, kdepth)
    s.reorder(i, j, k, ii, jj, kk)
    p = s.create_plan(target)
    for X in (C, A, B):
        p.cache(X, index=k if (X is C and c_across_k) else ii, location=TILE)
    p.tensorize(indices=(ii, jj, kk))
    return p


def _run(plan, args, data, tmp_path, name):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build(name, output_dir=tmp_path, python_module=False, progress=False)
    out = [d.copy() for d in data]
    lib.mm(*out)
    return out


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("ta, tb", [(S.uint8, S.int8), (S.int8, S.int8), (S.int8, S.uint8), (S.uint8, S.uint8)])
@pytest.mark.parametrize("shape, c_across_k", [((32, 32, 128), False), ((40, 48, 136), False), ((7, 5, 3), False),
                                               ((40, 48, 200), True)])
@pytest.mark.slow
def test_int8_matmul_on_tiles_is_exact(target, ta, tb, shape, c_across_k, tmp_path):
    """(C across k: the accumulator tile is loaded before the k loop and stored after it.)"""
    M, N, K = shape
    nest, args, idx = mixed_matmul_nest(M, N, K, ta, tb, S.int32, S.int32)
    plan = _tile_plan(nest, args, idx, target, c_across_k=c_across_k)
    rng = np.random.default_rng(M * N + K)
    a = rng.integers(np.iinfo(ta.dtype).min, np.iinfo(ta.dtype).max + 1, (M, K)).astype(ta.dtype)
    b = rng.integers(np.iinfo(tb.dtype).min, np.iinfo(tb.dtype).max + 1, (K, N)).astype(tb.dtype)
    c = rng.integers(-2 ** 31, 2 ** 31, (M, N), dtype=np.int64).astype(np.int32)
    got = _run(plan, args, [a, b, c], tmp_path, f"t{ta.name}{tb.name}{int(c_across_k)}")[2]
    want = ((c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    assert np.array_equal(got, want)  # int32 wraparound included


@pytest.mark.slow
@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("shape", [(32, 32, 64), (19, 21, 45)])
def test_bf16_matmul_on_tiles_matches_the_instruction(target, shape, tmp_path):
    """Float32 sums of bf16 products in the tile unit's order (even / odd pairs, denormals as
    zero): bit-exact against the numpy model of TDPBF16PS applied tile by tile, and close to the
    reference evaluator's sequential sum."""
    from accpy.targets.x86tile import machine as mc

    M, N, K = shape
    nest, args, idx = mixed_matmul_nest(M, N, K, S.bfloat16, S.bfloat16, S.float32, S.float32)
    plan = _tile_plan(nest, args, idx, target, kdepth=32)
    rng = np.random.default_rng(K)
    a = acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32))
    b = acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32))
    c = rng.standard_normal((M, N)).astype(np.float32)
    got = _run(plan, args, [a, b, c], tmp_path, "tbf16")[2]
    # the same computation tile by tile with the instruction's numpy model (zero-padded tiles)
    want = c.copy()
    for i0 in range(0, M, 16):
        for j0 in range(0, N, 16):
            for k0 in range(0, K, 32):
                A = np.zeros((16, 32), np.uint16)
                B = np.zeros((32, 16), np.uint16)
                A[:min(16, M - i0), :min(32, K - k0)] = a[i0:i0 + 16, k0:k0 + 32]
                B[:min(32, K - k0), :min(16, N - j0)] = b[k0:k0 + 32, j0:j0 + 16]
                Bv = B.reshape(16, 2, 16).transpose(0, 2, 1).reshape(16, 32)  # pairs of k per column
                Cb = np.zeros((16, 16), np.float32)
                Cb[:min(16, M - i0), :min(16, N - j0)] = want[i0:i0 + 16, j0:j0 + 16]
                Cb = mc.tile_dpbf16ps(Cb, A, Bv)
                want[i0:i0 + 16, j0:j0 + 16] = Cb[:min(16, M - i0), :min(16, N - j0)]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    ref = c.copy()
    evaluate([nest], {args[0]: a, args[1]: b, args[2]: ref})
    assert np.allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_tensorize_says_what_did_not_match():
    target = x86tile.emulating(acc.Target.HOST)
    nest, args, idx = mixed_matmul_nest(32, 32, 64, S.float32, S.float32, S.float32, S.float32)
    i, j, k = idx
    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 16), s.split(j, 16), s.split(k, 64)
    s.reorder(i, j, k, ii, jj, kk)
    p = s.create_plan(target)
    with pytest.raises(ValueError, match="A is float32; with float32 accumulators the tile unit takes bfloat16"):
        p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match="no intrinsic 'amx.fp8'"):
        p.tensorize(indices=(ii, jj, kk), intrinsic="amx.fp8")

    nest, args, idx = mixed_matmul_nest(32, 32, 64, S.uint8, S.int8, S.int32, S.int32)
    i, j, k = idx
    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 16), s.split(j, 32), s.split(k, 64)
    s.reorder(i, j, k, ii, jj, kk)
    with pytest.raises(ValueError, match="runs 32 iterations"):
        s.create_plan(target).tensorize(indices=(ii, jj, kk))

    # an operand not in a tile register
    p = _tile_plan(*mixed_matmul_nest(32, 32, 64, S.uint8, S.int8, S.int32, S.int32), target)
    A, B, C = mixed_matmul_nest(32, 32, 64, S.uint8, S.int8, S.int32, S.int32)[1]
    nest, args, idx = mixed_matmul_nest(32, 32, 64, S.uint8, S.int8, S.int32, S.int32)
    i, j, k = idx
    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 16), s.split(j, 16), s.split(k, 64)
    s.reorder(i, j, k, ii, jj, kk)
    p = s.create_plan(target)
    p.cache(args[2], index=ii, location=TILE)
    p.cache(args[0], index=ii, location=TILE)
    p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match="B must be cached in AMX_TILE as the B operand"):
        p.emit_c()


def test_a_cpu_without_amx_gets_a_clear_error_at_plan_time():
    plain = acc.Target("Intel 7900X")  # AVX-512 without AMX
    nest, args, idx = mixed_matmul_nest(32, 32, 64, S.uint8, S.int8, S.int32, S.int32)
    i, j, k = idx
    s = nest.create_schedule()
    ii = s.split(i, 16)
    p = s.create_plan(plain)
    with pytest.raises(ValueError, match="has no AMX_TILE memory"):
        p.cache(args[0], index=ii, location=TILE)
    with pytest.raises(ValueError, match="no tensor instructions"):
        p.tensorize(indices=(ii, j, k))


def test_lowp_benchmark_runs(tmp_path):
    """benchmarks/lowp.py checks its kernels against numpy, then prints a JSON line per kernel (or
    one saying why it skipped a path the CPU lacks, or everything without MKL)."""
    import json
    import os
    import subprocess
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, ACCPY_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(root))
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "lowp.py"), "--sizes", "64,40x24x70", "--repeat",
                        "1"], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert lines
    if "skipped" in lines[0] and "MKL" in lines[0]["skipped"]:
        return
    skipped = [x["skipped"] for x in lines if "skipped" in x]
    paths = {(d, p) for d in ("int8", "bf16") for p in ("amx", {"int8": "vnni", "bf16": "avx512bf16"}[d])
             if not any(s.startswith(f"{d} {p}:") for s in skipped)}
    peaks = [x for x in lines if x.get("kernel") == "peak"]
    runs = [x for x in lines if x.get("kernel") == "matmul"]
    assert {(x["dtype"], x["path"]) for x in peaks} == paths and all(x["gops"] > 0 for x in peaks)
    assert len(runs) == 2 * 2 * len(paths)  # shapes x threads (1, 2) x (dtype, path)
    for x in runs:
        assert x["accpy_gops"] > 0 and x["mkl_gops"] > 0 and (x["dtype"], x["path"]) in paths
        assert x["threads"] in (1, 2) and 0 < x["peak_fraction"] < 1


def _blocked_plan(nest, args, idx, target, gr, gc, NC, kdepth=64, threads=None, packed_b=True, unroll=True,
                  locality=None):
    """Register blocking: C in a gr x gc grid of tiles across k, A in gr tiles, B (packed once per
    NC-column block into a VNNI-ordered cache) in gc tiles (loaded with `locality`); the grid loops
    unrolled."""
    i, j, k = idx
    A, B, C = args
    s = nest.create_schedule()
    j1 = s.split(j, NC)
    i2 = s.split(i, 16 * gr)
    ii = s.split(i2, 16)
    j2 = s.split(j1, 16 * gc)
    jj = s.split(j2, 16)
    kk = s.split(k, kdepth)
    s.reorder(j, i, j1, k, i2, j2, ii, jj, kk)
    p = s.create_plan(target)
    bsrc = p.cache(B, index=i, layout=acc.Array.Layout.VNNI) if packed_b else B
    p.cache(C, index=k, location=TILE)
    p.cache(A, index=i2, location=TILE)
    p.cache(bsrc, index=i2, location=TILE, locality=locality)
    if unroll:
        p.unroll(i2)
        p.unroll(j2)
    p.tensorize(indices=(ii, jj, kk))
    if threads:
        p.parallelize(indices=(j,), max_threads=threads)
    return p


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("grid, NC, shape, threads", [
    ((2, 2), 64, (64, 128, 128), None),
    ((2, 2), 64, (40, 72, 136), None),        # partial tiles in every grid position
    ((1, 3), 96, (50, 200, 130), None),       # a last NC block narrower than a grid row
    ((1, 3), 96, (50, 300, 130), 2),          # per-thread tile configuration
    ((2, 1), 32, (33, 17, 7), 2),
])
@pytest.mark.slow
def test_register_blocked_tiles_with_packed_b_are_exact(target, grid, NC, shape, threads, tmp_path):
    """Caches of several tiles (the grid chosen by unrolled loops), B packed once per block in VNNI
    order and loaded straight into tiles, and parallel plans whose threads each configure their
    own tiles: exact against numpy on every shape, tails included."""
    M, N, K = shape
    nest, args, idx = mixed_matmul_nest(M, N, K, S.uint8, S.int8, S.int32, S.int32)
    plan = _blocked_plan(nest, args, idx, target, *grid, NC, threads=threads)
    rng = np.random.default_rng(M + N + K)
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    got = _run(plan, args, [a, b, c], tmp_path, f"blk{grid[0]}{grid[1]}{M}{threads or 1}")[2]
    assert np.array_equal(got, c + a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.slow
@pytest.mark.parametrize("target", _targets())
def test_register_blocked_bf16_tiles_are_close(target, tmp_path):
    M, N, K = 48, 80, 100
    nest, args, idx = mixed_matmul_nest(M, N, K, S.bfloat16, S.bfloat16, S.float32, S.float32)
    plan = _blocked_plan(nest, args, idx, target, 1, 2, 64, kdepth=32, threads=2)
    rng = np.random.default_rng(5)
    a = acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32))
    b = acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32))
    c = np.zeros((M, N), np.float32)
    got = _run(plan, args, [a, b, c], tmp_path, "blkbf16")[2]
    want = acc.bfloat16_values(a).astype(np.float64) @ acc.bfloat16_values(b).astype(np.float64)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_packed_b_cache_is_loaded_into_tiles_directly():
    """A full B tile from the VNNI-ordered cache is one tile load at the cache's group-row stride (no
    per-tile packing); the tiles of the grid have constant numbers."""
    target = x86tile.emulating(acc.Target.HOST)
    nest, args, idx = mixed_matmul_nest(64, 128, 128, S.uint8, S.int8, S.int32, S.int32)
    code = _blocked_plan(nest, args, idx, target, 2, 2, 64).emit_c()
    assert "accpy_amx_emu_loadd(6, &B_cache[4096*k + 128*j1], 256);" in code
    assert "accpy_amx_emu_loadd(7, &B_cache[4096*k + 128*j1 + 64], 256);" in code
    assert "amx_scratch" not in code  # every tile is full: no scratch blocks
    for t in range(8):
        assert f"accpy_amx_emu_loadd({t}," in code
    assert "accpy_amx_emu_dpbusd(3, 5, 7)" in code


def test_a_tile_cache_with_a_low_locality_is_loaded_with_tileloaddt1():
    """`plan.cache(..., location=AMX_TILE, locality=2)`: that cache's tiles come in with TILELOADDT1
    (the other caches' with TILELOADD); with locality 3, or none, the ordinary load."""
    target = x86tile.emulating(acc.Target.HOST)
    nest, args, idx = mixed_matmul_nest(64, 128, 128, S.uint8, S.int8, S.int32, S.int32)
    code = _blocked_plan(nest, args, idx, target, 2, 2, 64, locality=2).emit_c()
    assert "accpy_amx_emu_loaddt1(6, &B_cache[4096*k + 128*j1], 256);" in code
    assert "accpy_amx_emu_loaddt1(7, &B_cache[4096*k + 128*j1 + 64], 256);" in code
    assert code.count("accpy_amx_emu_loaddt1(") == 2  # A's and C's tiles: the ordinary load
    for t in range(6):
        assert f"accpy_amx_emu_loadd({t}," in code
    nest, args, idx = mixed_matmul_nest(64, 128, 128, S.uint8, S.int8, S.int32, S.int32)
    assert "loaddt1" not in _blocked_plan(nest, args, idx, target, 2, 2, 64, locality=3).emit_c()


@pytest.mark.slow
@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("locality", [0, 2])
def test_streamed_tile_loads_give_the_same_results(target, locality, tmp_path):
    """Partial tiles in every grid position, B's tiles loaded with TILELOADDT1: exact."""
    M, N, K = 40, 72, 136
    nest, args, idx = mixed_matmul_nest(M, N, K, S.uint8, S.int8, S.int32, S.int32)
    plan = _blocked_plan(nest, args, idx, target, 2, 2, 64, threads=2, locality=locality)
    rng = np.random.default_rng(locality)
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    got = _run(plan, args, [a, b, c], tmp_path, f"nt{locality}")[2]
    assert np.array_equal(got, c + a.astype(np.int32) @ b.astype(np.int32))


def test_a_locality_is_checked():
    target = x86tile.emulating(acc.Target.HOST)
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(64, 64, 64, S.uint8, S.int8, S.int32, S.int32)
    p = nest.create_schedule().create_plan(target)
    with pytest.raises(ValueError, match=r"locality: expected 0, 1, 2 or 3 .* got 4"):
        p.cache(B, index=j, location=TILE, locality=4)
    with pytest.raises(ValueError, match=r"locality: expected 0, 1, 2 or 3 .* got True"):
        p.cache(B, index=j, location=TILE, locality=True)
    with pytest.raises(ValueError, match=r"locality: a hint for the loads into a target memory; give location="):
        p.cache(B, index=j, locality=1)
    assert not p.caches  # nothing recorded by a refused call


def test_grid_loops_must_be_unrolled():
    target = x86tile.emulating(acc.Target.HOST)
    nest, args, idx = mixed_matmul_nest(64, 64, 64, S.uint8, S.int8, S.int32, S.int32)
    plan = _blocked_plan(nest, args, idx, target, 2, 2, 64, unroll=False)
    with pytest.raises(ValueError, match=r"tile register is chosen by the loop\(s\) i2, j2 .* unroll them"):
        plan.emit_c()


def test_too_many_tiles_is_a_clear_error():
    target = x86tile.emulating(acc.Target.HOST)
    nest, args, idx = mixed_matmul_nest(64, 64, 64, S.uint8, S.int8, S.int32, S.int32)
    plan = _blocked_plan(nest, args, idx, target, 2, 3, 96)
    with pytest.raises(ValueError, match="1 x 3 tiles of 64 x 16, but only 0 of the 8 tile registers are left"):
        plan.emit_c()


def test_parallel_tile_work_outside_the_parallel_loops_is_refused():
    """Tiles are per thread: each iteration of the parallel loop configures them; a tile cache
    filled outside the parallel loop would run on unconfigured tiles, so it is refused."""
    target = x86tile.emulating(acc.Target.HOST)
    nest, args, idx = mixed_matmul_nest(64, 32, 64, S.uint8, S.int8, S.int32, S.int32)
    i, j, k = idx
    A, B, C = args
    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 16), s.split(j, 16), s.split(k, 64)
    s.reorder(i, j, k, ii, jj, kk)
    plan = s.create_plan(target)
    plan.cache(C, index=j, location=TILE)  # filled before the parallel loop over j
    plan.cache(A, index=ii, location=TILE)
    plan.cache(B, index=ii, location=TILE)
    plan.tensorize(indices=(ii, jj, kk))
    plan.parallelize(indices=(j,))
    with pytest.raises(ValueError, match="uses tiles outside its parallel loops"):
        plan.emit_c()


@pytest.mark.slow
@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("threads", [1, 2])
def test_implicit_gemm_conv(tmp_path, target, threads):
    """samples/int8_conv.py's schedule: A tiles read straight from the input at (h + kh, w + kw)
    (16 pixels, C bytes apart), B from the weights packed in VNNI order, C in tiles through the
    9 * C / 64 steps; a row of 21 pixels (a partial tile of 5), 40 output channels (a partial grid
    tile of 8), 72 input channels (a partial k step of 8); exact against numpy."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_conv import reference, tile_conv_plan

    H, W, C, K = 3, 21, 72, 40
    plan, args = tile_conv_plan(H, W, C, K, threads, target=target, sizes=dict(GC=3, NC=48))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="conv")
    lib = pkg.build("conv", output_dir=str(tmp_path), python_module=False, progress=False)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (H + 2, W + 2, C)).astype(np.uint8)
    wt = rng.integers(-128, 128, (3, 3, C, K)).astype(np.int8)
    got = np.zeros((H, W, K), np.int32)
    lib.conv(x, wt, got)
    _, want = reference(x, wt, 1.0, np.zeros(K, np.float32))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("shape, relu, threads, pf", [((37, 61, 70), True, 1, 0), ((20, 100, 33), False, 1, 0),
                                                      ((50, 130, 128), True, 2, 0), ((70, 130, 100), True, 1, 1),
                                                      ((50, 200, 64), False, 2, 3)])
@pytest.mark.slow
def test_a_fused_epilogue_quantizes_each_block_from_its_tiles(tmp_path, target, shape, relu, threads, pf):
    """The product and the quantizing epilogue fused on (i, j) (samples/int8_matmul.py's
    `fused_tile_plan`): the epilogue reads the accumulator tiles, which the tile library stores to
    16 x 16 blocks in memory, one per tile, right after the block's k loop; the statement runs on
    the block, vectorized (AVX-512 here). Exact against numpy, partial tiles at the edges, with and
    without the next block of accumulators prefetched over the k loop (`pf`, a locality)."""
    import re

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import fused_tile_plan, reference

    M, N, K = shape
    plan, args = fused_tile_plan(M, N, K, relu, threads, target=target, sizes=dict(NC=96 if pf else 48, PF=pf))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="qmm")
    name = f"fused_{M}_{N}_{K}_{int(relu)}_{threads}_{pf}"
    lib = pkg.build(name, output_dir=str(tmp_path), python_module=False, progress=False)
    src = (tmp_path / f"{name}.c").read_text()
    stored = re.findall(r"accpy_amx(?:_emu)?_stored\((\d), &amx_scratch\d+\[0\], 64\)", src)
    assert ("__builtin_prefetch((const void*)((uintptr_t)Acc" in src) == bool(pf)
    assert stored, "no accumulator tile stored to a block for the epilogue"
    if acc.Target.HOST.has("avx512f"):
        assert "_mm512_cvtepi32_ps" in src and "_mm512_roundscale_ps" in src  # the epilogue's vectors
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (M, K), dtype=np.uint8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    bias = (rng.standard_normal(N) * 3).astype(np.float32)
    scale = np.float32(1.0 / (8 * K))
    c = np.zeros((M, N), np.int32)
    out = np.full((M, N), 99, np.int8)
    lib.qmm(a, b, c, bias, out, scale)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    np.testing.assert_array_equal(out, reference(a, b, scale, bias, relu))


@pytest.mark.slow
def test_a_block_of_only_tile_operations_lowers_with_any_grid():
    """bf16 1000^3 in a 2 x 2 grid over blocks of 528 columns: the unswitched loops leave blocks
    made only of tile operations, which the generic pass regroups by their weights (as the target
    library's tile defines them: the tile unit's tiles never share any)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_matmul_plan

    plan, _ = tile_matmul_plan(1000, 1000, 1000, "bf16", target=x86tile.emulating(acc.Target.HOST),
                               sizes=dict(GR=2, GC=2, NC=528, PA=1))
    code = plan.emit_c()
    assert code.count("accpy_amx_emu_dpbf16ps(") >= 4
