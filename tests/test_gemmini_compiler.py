"""Gemmini from plans: scratchpad/accumulator caches, tensorize, config hoisting, packages on the
functional model (bit-exact vs numpy), counters, and every error of tensorize / cache on Gemmini."""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

import accpy as acc
from accpy.ir.expr import Const
from accpy.ir.stmt import block
from accpy.targets import gemmini as g
from accpy.targets.gemmini.machine import ref_matmul

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "samples"))
import gemmini_conv  # noqa: E402
import gemmini_matmul  # noqa: E402

I8, I32, F32 = acc.ScalarType.int8, acc.ScalarType.int32, acc.ScalarType.float32
GEMMINI = acc.Target(acc.Target.Model.GEMMINI)
SP, ACC = acc.MemorySpace.SCRATCHPAD, acc.MemorySpace.ACCUMULATOR


def raw_matmul(M, N, K, a_type=I8, b_type=I8, c_type=I32, cast=True, transpose_b=False):
    A = acc.Array(role=acc.Role.INPUT, element_type=a_type, shape=(M, K))
    B = acc.Array(role=acc.Role.INPUT, element_type=b_type, shape=(N, K) if transpose_b else (K, N))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=c_type, shape=(M, N))
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        b = B[j, k] if transpose_b else B[k, j]
        if cast:
            C[i, j] += acc.cast(A[i, k], c_type) * acc.cast(b, c_type)
        else:
            C[i, j] += A[i, k] * b

    return nest, (A, B, C)


def tiled(nest, order="jki"):
    s = nest.create_schedule()
    i, j, k = s.get_indices()
    ii, jj, kk = s.tile({i: 16, j: 16, k: 16})
    outer = {"i": i, "j": j, "k": k}
    s.reorder(*[outer[c] for c in order], ii, jj, kk)
    return s, (i, j, k, ii, jj, kk)


def raw_plan(M, N, K, **kw):
    nest, (A, B, C) = raw_matmul(M, N, K, **kw)
    s, (i, j, k, ii, jj, kk) = tiled(nest)
    p = s.create_plan(GEMMINI)
    p.cache(C, index=j, location=ACC)
    p.cache(A, index=i, location=SP)
    p.cache(B, index=i, location=SP)
    p.tensorize(indices=(ii, jj, kk))
    return p, (A, B, C)


def build(plan, args, tmp_path, name="g"):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="kernel")
    return pkg.build(name, output_dir=tmp_path, python_module=False)


def rand(rng, shape, dtype):
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype == np.int8 else (-10**6, 10**6)
    return rng.integers(lo, hi + 1, shape, dtype=np.int64).astype(dtype)


# ---- end to end on the model -------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(16, 16, 16), (64, 48, 40), (33, 17, 50), (5, 70, 3)])
def test_raw_int32_matmul_bit_exact(tmp_path, shape):
    M, N, K = shape
    plan, args = raw_plan(M, N, K)
    lib = build(plan, args, tmp_path)
    rng = np.random.default_rng(M * N * K)
    a, b, c = rand(rng, (M, K), np.int8), rand(rng, (K, N), np.int8), rand(rng, (M, N), np.int32)
    want = c + a.astype(np.int32) @ b.astype(np.int32)
    lib.kernel(a, b, c)
    np.testing.assert_array_equal(c, want)


@pytest.mark.slow
@pytest.mark.parametrize("shape,relu,bias", [((64, 64, 64), True, False), ((70, 40, 36), False, False),
                                              ((48, 80, 100), True, True), ((1, 16, 16), False, True)])
def test_scaled_matmul_bit_exact(tmp_path, shape, relu, bias):
    c = gemmini_matmul.run(*shape, relu=relu, bias=bias, output_dir=str(tmp_path), quiet=True)
    assert c["macs"] == shape[0] * shape[1] * shape[2]


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(96, 64, 128), (40, 24, 40)])
def test_scaled_matmul_blocks_and_naive(tmp_path, shape):
    M, N, K = shape
    for blocks in ((32, 32, 32), (48, 16, 16), None):
        plan, args = gemmini_matmul.matmul_plan(M, N, K, blocks=blocks)
        lib = build(plan, args, tmp_path, "blk")
        rng = np.random.default_rng(0)
        a, b = rand(rng, (M, K), np.int8), rand(rng, (K, N), np.int8)
        out = np.zeros((M, N), np.int8)
        lib.kernel(a, b, out, np.float32(0.003))
        np.testing.assert_array_equal(out, ref_matmul(a, b, scale=0.003, act=1))
    gemmini_matmul.run(M, N, K, naive=True, output_dir=str(tmp_path), quiet=True)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(6, 20, 16, 16), (5, 9, 24, 40), (4, 18, 32, 24), (3, 65, 16, 16), (2, 7, 16, 40)])
def test_conv_bit_exact(tmp_path, shape):
    gemmini_conv.run(*shape, output_dir=str(tmp_path), quiet=True)
    gemmini_conv.run(*shape, naive=True, relu=False, output_dir=str(tmp_path), quiet=True)


def test_conv_tiles_of_pixels_run_across_image_rows(tmp_path):
    """The scheduled conv numbers output pixels p = y * W + x: at W = 14 every 16-pixel tile but the
    image's last is full (a tile per image row would leave 2 rows of 16 empty), and each weight
    tile meets every pixel tile of its band: utilization above 0.8 on the model."""
    H, W, C, K = 14, 14, 64, 64
    s = gemmini_conv.run(H, W, C, K, output_dir=str(tmp_path), quiet=True)
    n = gemmini_conv.run(H, W, C, K, naive=True, output_dir=str(tmp_path), quiet=True)
    computes = s["compute_preloaded"] + s["compute_accumulated"]
    assert computes == -(-H * W // 16) * (K // 16) * 9 * (C // 16)
    assert s["compute_preloaded"] == (K // 16) * 9 * (C // 16)  # one preload of each weight tile per band
    assert s["utilization"] > 0.8 > n["utilization"]


def test_conv_bands_must_be_whole_image_rows(tmp_path):
    """A band of pixels that starts inside an image row leaves its tiles' input rows at a division
    of the loops: a clear error, not wrong addresses."""
    plan, args = gemmini_conv.conv_plan(4, 14, 16, 16, blocks=(16, 16))
    with pytest.raises(ValueError, match=r"In_cache\) are not affine \(nor a flattened index"):
        build(plan, args, tmp_path, "band16")


def test_scheduled_beats_naive_and_reuses_weights(tmp_path):
    s = gemmini_matmul.run(128, 64, 64, output_dir=str(tmp_path), quiet=True)
    n = gemmini_matmul.run(128, 64, 64, naive=True, output_dir=str(tmp_path), quiet=True)
    assert s["compute_accumulated"] > 0 and n["compute_accumulated"] == 0
    assert s["cycles"] < n["cycles"] and s["utilization"] > 0.8


# ---- counters, python module, load -------------------------------------------------------------------
def test_counters_of_one_tile_by_hand(tmp_path):
    plan, args = raw_plan(16, 16, 16)
    lib = build(plan, args, tmp_path)
    a, b, c = (np.ones((16, 16), np.int8), np.ones((16, 16), np.int8), np.zeros((16, 16), np.int32))
    lib.gemmini_reset_counters()
    lib.kernel(a, b, c)
    assert (c == 16).all()
    got = lib.gemmini_counters()
    # configs: ld0 (C), ld1 (A), ld2 (B), ex, st = 5, each 1 cycle on every unit
    want = dict(config_ex=1, config_ld=3, config_st=1, mvin=3, mvout=1, preload=1, compute_preloaded=1,
                compute_accumulated=0, fence=1, flush=0, bytes_in=16 * 16 * 4 + 256 + 256, bytes_out=16 * 16 * 4,
                macs=4096, load_cycles=5 + 1536 // 16, execute_cycles=5 + 16 + 16, store_cycles=5 + 1024 // 16,
                cycles=5 + 96, calls=1, instructions=12)
    assert {k: got[k] for k in want} == want
    assert got["utilization"] == pytest.approx(4096 / (101 * 256))
    lib.kernel(a, b, c)
    assert lib.gemmini_counters()["calls"] == 2
    lib.gemmini_reset_counters()
    assert lib.gemmini_counters()["macs"] == 0


def test_python_module_and_load(tmp_path):
    plan, args = raw_plan(32, 32, 32)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="kernel")
    built = pkg.build("gmod", output_dir=tmp_path, python_module="sync")
    rng = np.random.default_rng(3)
    a, b = rand(rng, (32, 32), np.int8), rand(rng, (32, 32), np.int8)
    want = a.astype(np.int32) @ b.astype(np.int32)
    mod = built.python_module()
    c = np.zeros((32, 32), np.int32)
    mod.kernel(a, b, c)
    np.testing.assert_array_equal(c, want)
    loaded = acc.load(tmp_path / "gmod.hat")
    c = np.zeros((32, 32), np.int32)
    loaded.kernel(a, b, c)
    np.testing.assert_array_equal(c, want)
    loaded.gemmini_reset_counters()
    loaded.kernel(a, b, c)
    assert loaded.gemmini_counters()["macs"] == 32 ** 3


def test_model_errors_surface_as_kernel_errors(tmp_path, monkeypatch):
    # a broken tile expansion (weights never preloaded) must be caught by the strict model
    def broken(t):
        return block(g.call(g.CONFIG_EX, t.c_stride, t.a_stride),
                     g.call(g.PRELOAD, Const(g.gm.GARBAGE_ADDR), t.c, t.tj, t.tk, t.tj, t.ti),
                     g.call(g.COMPUTE_ACCUMULATED, t.a, Const(g.gm.GARBAGE_ADDR), t.tk, t.ti, 16, 16))

    monkeypatch.setattr(g.tiles, "tile_calls", broken)
    plan, args = raw_plan(16, 16, 16)
    lib = build(plan, args, tmp_path)
    with pytest.raises(acc.KernelError, match="gemmini compute_accumulated: no weights"):
        lib.kernel(np.ones((16, 16), np.int8), np.ones((16, 16), np.int8), np.zeros((16, 16), np.int32))


def test_cpu_code_on_gemmini_target_still_builds(tmp_path):
    nest, (A, B, C) = raw_matmul(20, 20, 20)
    lib = build(nest.create_schedule().create_plan(GEMMINI), (A, B, C), tmp_path)
    a, b, c = np.ones((20, 20), np.int8), np.ones((20, 20), np.int8), np.zeros((20, 20), np.int32)
    lib.kernel(a, b, c)
    assert (c == 20).all()


# ---- emitted C: configs once, outside every loop ---------------------------------------------------------
def test_config_hoisting_visible_in_c():
    plan, _ = gemmini_matmul.matmul_plan(256, 128, 128)
    text = plan.emit_c()
    lines = text.splitlines()
    first_loop = next(n for n, ln in enumerate(lines) if ln.lstrip().startswith("for ("))
    configs = [n for n, ln in enumerate(lines) if "config_" in ln]
    assert configs and all(n < first_loop for n in configs), text
    for kind in ("config_ex", "config_st"):
        assert sum(kind in ln for ln in lines) == 1
    assert sum("config_ld" in ln for ln in lines) == 3  # one per load queue
    raw = raw_plan(64, 48, 40)[0].emit_c()
    body = raw.splitlines()
    first_loop = next(n for n, ln in enumerate(body) if ln.lstrip().startswith("for ("))
    assert all(n < first_loop for n, ln in enumerate(body) if "config_" in ln)
    assert re.search(r"accpy_gemmini_begin_call\(\);", raw) and raw.rstrip().endswith(
        "gemmini_fence();\n    accpy_gemmini_end_call();\n}")


def test_hoisting_keeps_varying_configs():
    from accpy.ir.expr import Const, Var
    from accpy.ir.stmt import For, block
    from accpy.lower.config import hoist_configs

    i = Var("i")
    cfg = lambda s: g.call(g.CONFIG_LD, s, Const(1.0, F32), 0, 16, 1)  # noqa: E731
    mv = g.call(g.MVIN[1], Const(0), i, 16, 16)
    loop = For(i, Const(0), Const(4), block(cfg(Const(8)), mv, cfg(i), mv))
    out = hoist_configs(loop)
    assert isinstance(out, For)  # two different values: nothing hoisted
    same = For(i, Const(0), Const(4), block(cfg(Const(8)), mv, cfg(Const(8)), mv))
    out = hoist_configs(same)
    assert not isinstance(out, For) and out.stmts[0] == cfg(Const(8))
    assert sum("config_ld" in repr(x) for x in [out.stmts[1].body]) == 0


# ---- errors ------------------------------------------------------------------------------------------------
def test_tensorize_on_cpu_target():
    """A CPU without a tensor unit (AVX-512, no AMX) has no tensor instructions to map onto (CPUs
    with AMX do: tests/test_x86tile_tensorize.py)."""
    nest, _ = raw_matmul(32, 32, 32)
    s, (i, j, k, ii, jj, kk) = tiled(nest)
    with pytest.raises(ValueError, match="no tensor instructions"):
        s.create_plan(acc.Target("Intel 7900X")).tensorize(indices=(ii, jj, kk))


def test_tensorize_argument_errors():
    nest, _ = raw_matmul(64, 64, 64)
    s = nest.create_schedule()
    i, j, k = s.get_indices()
    ii, jj, kk = s.tile({i: 32, j: 16, k: 16})
    s.reorder(i, j, k, ii, jj, kk)
    p = s.create_plan(GEMMINI)
    with pytest.raises(ValueError, match="runs 32 iterations"):
        p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match="3 indices"):
        p.tensorize(indices=(jj, kk))
    with pytest.raises(ValueError, match="innermost"):
        p.tensorize(indices=(i, jj, kk))
    with pytest.raises(ValueError, match="twice"):
        p.tensorize(indices=(jj, jj, kk))
    with pytest.raises(ValueError, match="no intrinsic"):
        p.tensorize(indices=(ii, jj, kk), intrinsic="conv")


@pytest.mark.parametrize("kw,match", [
    (dict(a_type=F32, b_type=F32, c_type=F32), "accumulates int32|float32"),
    (dict(cast=False, c_type=I8), "int32"),
    (dict(a_type=acc.ScalarType.int16), "int16"),
])
def test_tensorize_type_mismatch(kw, match):
    nest, _ = raw_matmul(32, 32, 32, **kw)
    s, (i, j, k, ii, jj, kk) = tiled(nest)
    with pytest.raises(ValueError, match=match):
        s.create_plan(GEMMINI).tensorize(indices=(ii, jj, kk))


def test_tensorize_operand_not_in_its_memory():
    nest, (A, B, C) = raw_matmul(32, 32, 32)
    s, (i, j, k, ii, jj, kk) = tiled(nest)
    p = s.create_plan(GEMMINI)
    p.cache(C, index=j, location=ACC)
    p.cache(B, index=i, location=SP)
    p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match=r"operand A \(A\) is in host memory.*SCRATCHPAD"):
        p.emit_c()
    p = tiled(nest)[0].create_plan(GEMMINI)
    s2, (i, j, k, ii, jj, kk) = tiled(nest)
    p = s2.create_plan(GEMMINI)
    p.cache(A, index=i, location=SP)
    p.cache(B, index=i, location=SP)
    p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match=r"operand C \(C\) is in host memory.*ACCUMULATOR"):
        p.emit_c()


def test_tensorize_access_pattern_mismatch():
    nest, (A, B, C) = raw_matmul(32, 32, 32, transpose_b=True)
    s, (i, j, k, ii, jj, kk) = tiled(nest)
    p = s.create_plan(GEMMINI)
    p.cache(C, index=j, location=ACC)
    p.cache(A, index=i, location=SP)
    p.cache(B, index=i, location=SP)
    p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match="columns of B"):
        p.emit_c()


def test_untensorized_accumulator_access():
    nest, (A, B, C) = raw_matmul(32, 32, 32)
    s, _ = tiled(nest)
    p = s.create_plan(GEMMINI)
    p.cache(C, index=s.get_indices()[0], location=ACC)
    with pytest.raises(ValueError, match="ACCUMULATOR, which host code cannot access"):
        p.emit_c()


def test_epilogue_mismatch():
    M = N = K = 32
    A = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(M, K))
    B = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(K, N))
    Acc = acc.Array(role=acc.Role.TEMP, element_type=I32, shape=(M, N))
    C = acc.Array(role=acc.Role.OUTPUT, element_type=I32, shape=(M, N))
    n0 = acc.Nest(shape=(M, N, K))
    i0, j0, k0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        Acc[i0, j0] += acc.cast(A[i0, k0], I32) * acc.cast(B[k0, j0], I32)

    n1 = acc.Nest(shape=(M, N))
    i1, j1 = n1.get_indices()

    @n1.iteration_logic
    def _():
        C[i1, j1] = Acc[i1, j1] * 2

    s = acc.fuse((n0.create_schedule(), n1.create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    ii, jj, kk = s.tile({i: 16, j: 16, k: 16})
    s.reorder(i, j, f, k, ii, jj, kk)
    p = s.create_plan(GEMMINI)
    p.cache(Acc, index=f, location=ACC)
    p.cache(A, index=k, location=SP)
    p.cache(B, index=k, location=SP)
    p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match="reads the accumulator in a way Gemmini cannot do"):
        p.emit_c()


@pytest.mark.parametrize("which", ["scratchpad", "accumulator"])
def test_capacity_errors(which):
    M, N, K = (2048, 64, 256) if which == "scratchpad" else (512, 64, 16)
    nest, (A, B, C) = raw_matmul(M, N, K)
    s, (i, j, k, ii, jj, kk) = tiled(nest, order="ijk")
    p = s.create_plan(GEMMINI)
    if which == "scratchpad":
        p.cache(C, index=k, location=ACC)
        p.cache(A, index=i, location=SP)  # the whole of A: 2048 x 256 int8 = 32768 rows
        p.cache(B, index=k, location=SP)
        want = r"cache of A at index i in SCRATCHPAD: its active block is 2048 x 256 int8 = 32768 rows.*holds 16384"
    else:
        p.cache(C, index=i, location=ACC)  # the whole of C: 512 x 64 int32 = 2048 rows
        p.cache(A, index=k, location=SP)
        p.cache(B, index=k, location=SP)
        want = r"cache of C at index i in ACCUMULATOR: its active block is 512 x 64 int32 = 2048 rows.*holds 1024"
    p.tensorize(indices=(ii, jj, kk))
    with pytest.raises(ValueError, match=want):
        p.emit_c()


def test_cache_location_on_cpu_and_type_errors():
    nest, (A, B, C) = raw_matmul(32, 32, 32)
    s, (i, j, k, ii, jj, kk) = tiled(nest)
    with pytest.raises(ValueError, match="has no SCRATCHPAD memory"):
        s.create_plan(acc.Target.HOST).cache(A, index=i, location=SP)
    # an int32 array cannot go to the int8 scratchpad
    p = s.create_plan(GEMMINI)
    p.cache(C, index=i, location=SP)
    with pytest.raises(ValueError, match="scratchpad holds int8; C is int32"):
        p.emit_c()


# ---- the nest's meaning equals the model's ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("relu,bias", [(True, False), (False, True)])
def test_reference_evaluator_equals_model(tmp_path, relu, bias):
    """The fused nests (reference evaluator, default order) compute exactly what Gemmini does,
    including round-half-to-even ties and saturation (scale 0.5 makes every odd sum a tie)."""
    from accpy.nest.reference import evaluate

    M, N, K = 24, 20, 12
    plan, args = gemmini_matmul.matmul_plan(M, N, K, relu=relu, bias=bias)
    rng = np.random.default_rng(5)
    a, b = rand(rng, (M, K), np.int8), rand(rng, (K, N), np.int8)
    vals = [a, b] + ([rand(rng, (1, N), np.int32)] if bias else []) + [np.zeros((M, N), np.int8), np.float32(0.5)]
    ref = [v.copy() if isinstance(v, np.ndarray) else v for v in vals]
    evaluate([p.nest for p in plan.schedule.space.parts], dict(zip(args, ref)))
    lib = build(plan, args, tmp_path)
    lib.kernel(*vals)
    np.testing.assert_array_equal(vals[-2], ref[-2])
    want = gemmini_matmul.reference(a, b, 0.5, relu, vals[2] if bias else None)
    np.testing.assert_array_equal(vals[-2], want)
    assert (np.abs(want.astype(int)) == 127).any() or (want == -128).any()  # saturation was exercised


def test_debug_mode_compares_with_the_unscheduled_nest(tmp_path):
    plan, args = gemmini_matmul.matmul_plan(40, 24, 40)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="kernel")
    lib = pkg.build("gdebug", output_dir=tmp_path, mode=acc.Package.Mode.DEBUG, python_module=False)
    rng = np.random.default_rng(2)
    a, b = rand(rng, (40, 40), np.int8), rand(rng, (40, 24), np.int8)
    c = np.zeros((40, 24), np.int8)
    lib.kernel(a, b, c, np.float32(0.01))
    np.testing.assert_array_equal(c, ref_matmul(a, b, scale=0.01, act=1))


def test_parameters_replay_tensorize(tmp_path):
    P = acc.create_parameters()
    nest, (A, B, C) = raw_matmul(32, 32, 32)
    s, (i, j, k, ii, jj, kk) = tiled(nest)
    p = s.create_plan(GEMMINI)
    p.cache(C, index=j, location=ACC)
    p.cache(A, index=i, location=SP)
    p.cache(B, index=i, location=SP)
    p.tensorize(indices=(ii, jj, kk))
    lib = build(p, (A, B, C), tmp_path)
    a, b, c = np.ones((32, 32), np.int8), np.ones((32, 32), np.int8), np.zeros((32, 32), np.int32)
    lib.kernel(a, b, c)
    assert (c == 32).all()
    del P
