"""The Gemmini functional model (native/gemmini, driven through accpy/targets/gemmini/model.py) against
the numpy references of accpy/targets/gemmini/machine.py: every intrinsic on random data (rounding ties, saturation,
ReLU, accumulate/overwrite, garbage operands, zero fills, load queues, partial tiles, block
moves, transposes), a 64x64x64 tiled matmul driven instruction by instruction, the strict
errors (each names the instruction and the operand, changes nothing, and the model goes on),
the counters and the fixed cycle model on hand-computed examples, and the model built into a
package-like library of several units that share one machine and accpy's error channel.
"""
from __future__ import annotations

import ctypes
import functools
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accpy.paths import native_dir
from accpy.targets.gemmini.machine import (ACC_ROWS, DIM, GARBAGE_ADDR, NO_ACTIVATION, OUTPUT_STATIONARY, RELU,
                                           SPAD_ROWS, acc_addr, acc_scale, mvin_scale_acc, ref_compute, ref_matmul,
                                           ref_mvin, ref_mvin_layout, ref_mvout, ref_write_acc, transfer_cycles)
from accpy.targets.gemmini.model import GemminiError, GemminiModel

HYP = settings(max_examples=40, deadline=None)


@functools.lru_cache(maxsize=None)
def _model() -> GemminiModel:
    return GemminiModel()


@pytest.fixture
def m():
    model = _model()
    model.raise_errors = True
    model.reset()
    return model


def rand_i8(rng, *shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def configure(m, ld_stride=DIM, st_stride=DIM, **st_kw):
    m.config_ex()
    for q in range(3):
        m.config_ld(ld_stride, id=q)
    m.config_st(st_stride, **st_kw)


# ---- references ---------------------------------------------------------------------------------
def test_reference_rounding_and_saturation():
    x = np.array([1, 3, 5, 7, -1, -3, -5, 1000, -1000, 0], np.int32)
    assert acc_scale(x, 0.5).tolist() == [0, 2, 2, 4, 0, -2, -2, 127, -128, 0]
    assert acc_scale(np.array([2**31 - 1, -2**31]), 1.0).tolist() == [127, -128]
    # int32 scaling is exact: the identity keeps values float32 cannot hold
    big = np.array([2**24 + 1, -(2**31), 2**31 - 1], np.int32)
    assert mvin_scale_acc(big, 1.0).tolist() == big.tolist()
    assert mvin_scale_acc(np.array([3, 5, -3], np.int32), 0.5).tolist() == [2, 2, -2]
    assert mvin_scale_acc(np.array([2**30], np.int32), 4.0).tolist() == [2**31 - 1]
    assert ref_mvout(np.array([[-7, 9]]), scale=1.0, act=RELU).tolist() == [[0, 9]]
    old = np.array([2**31 - 1], np.int32)
    assert ref_write_acc(old, np.array([1], np.int32), True).tolist() == [-(2**31)]


# ---- mvin / mvout ----------------------------------------------------------------------------------
@HYP
@given(rows=st.integers(1, DIM), cols=st.integers(1, 64), base=st.integers(0, SPAD_ROWS - 64),
       pad=st.integers(0, 9), seed=st.integers(0, 2**32 - 1))
def test_mvin_mvout_scratchpad(rows, cols, base, pad, seed):
    m = _model()
    m.reset()
    rng = np.random.default_rng(seed)
    dram = rand_i8(rng, rows, cols + pad)
    src = dram[:, :cols]  # a view: the DRAM stride is the parent's row
    configure(m, ld_stride=dram.strides[0], st_stride=cols + 3)
    m.mvin(src, base, cols, rows)
    data, written = ref_mvin_layout(ref_mvin(src), DIM)
    span = data.shape[0]
    assert np.array_equal(m.spad_written(base, span), written)
    assert np.array_equal(np.where(written, m.read_spad(base, span), 0), data)
    out = np.full((rows, cols + 3), 99, np.int8)
    m.mvout(out, base, cols, rows)
    assert np.array_equal(out[:, :cols], src)
    assert (out[:, cols:] == 99).all()  # nothing outside the moved columns


@pytest.mark.parametrize("scale", [0.5, 1.5, -0.75, 2.5, 0.1, 3.0, -1.0])
def test_mvin_scale_into_scratchpad(m, scale):
    rng = np.random.default_rng(7)
    src = np.concatenate([np.arange(-128, 128, dtype=np.int8).reshape(16, 16), rand_i8(rng, 16, 16)], axis=1)
    m.config_ld(32, scale=scale)
    m.mvin(src, 100, 32, 16)
    want = ref_mvin(src, scale)
    assert np.array_equal(m.read_spad(100, 16), want[:, :16])
    assert np.array_equal(m.read_spad(116, 16), want[:, 16:])  # second block, block stride DIM


@pytest.mark.parametrize("scale", [1.0, 0.5, -2.0, 1e-3, 3.75])
def test_mvin_int32_into_accumulator(m, scale):
    rng = np.random.default_rng(11)
    src = rng.integers(-2**31, 2**31, size=(9, 13), dtype=np.int64).astype(np.int32)
    src[0, :4] = [2**24 + 1, -(2**24) - 3, 2**31 - 1, -(2**31)]
    src[1, :3] = [1, 3, 5]  # ties for scale 0.5
    m.config_ld(src.strides[0], scale=scale)
    m.mvin(src, acc_addr(40), 13, 9)
    assert np.array_equal(m.read_acc(40, 9)[:, :13], ref_mvin(src, scale, accumulator=True))
    assert m.acc_written(40, 9)[:, :13].all() and not m.acc_written(40, 9)[:, 13:].any()


def test_mvin_shrunk_int8_into_accumulator(m):
    rng = np.random.default_rng(3)
    src = rand_i8(rng, 16, 40)
    m.config_ld(40, scale=0.5, shrunk=True, id=1)
    m.mvin2(src, acc_addr(64), 40, 16)
    want = ref_mvin(src, 0.5, accumulator=True, shrunk=True)
    data, written = ref_mvin_layout(want)
    assert np.array_equal(np.where(written, m.read_acc(64, data.shape[0]), 0), data)


def test_mvin_accumulate_into_accumulator(m):
    rng = np.random.default_rng(5)
    first = rng.integers(-2**31, 2**31, size=(16, 16), dtype=np.int64).astype(np.int32)
    first[0, 0] = 2**31 - 1
    second = rng.integers(-2**31, 2**31, size=(16, 16), dtype=np.int64).astype(np.int32)
    second[0, 0] = 5
    m.config_ld(64)
    m.mvin(first, acc_addr(0))
    m.mvin(second, acc_addr(0, accumulate=True))
    assert np.array_equal(m.read_acc(0, 16), ref_write_acc(first, second, True))
    assert m.read_acc(0)[0, 0] == -(2**31) + 4  # int32 wrap-around


def test_mvin_zeros_from_null(m):
    rng = np.random.default_rng(9)
    m.write_spad(0, rand_i8(rng, 16, 16))
    m.write_acc(0, np.full((16, 16), 77, np.int32))
    m.config_ld(16)
    m.config_ld(64, id=1)
    before = m.counters()["bytes_in"]
    m.mvin(None, 2, 12, 5)
    m.mvin2(None, acc_addr(3), 16, 4)
    assert (m.read_spad(2, 5)[:, :12] == 0).all() and (m.read_spad(2, 5)[:, 12:] != 0).any()
    assert (m.read_acc(3, 4) == 0).all() and (m.read_acc(0, 3) == 77).all() and (m.read_acc(7) == 77).all()
    assert m.counters()["bytes_in"] == before  # a zero fill reads no DRAM


def test_load_queue_strides_scales_and_broadcast(m):
    rng = np.random.default_rng(13)
    big = rand_i8(rng, 40, 50)
    a, b = big[3:19, 5:21], big[::2, 30:46][:16]  # two views, two DRAM strides
    bias = rng.integers(-1000, 1000, size=(1, 16), dtype=np.int32)
    m.config_ld(big.strides[0], scale=1.0, id=0)
    m.config_ld(2 * big.strides[0], scale=0.5, id=1)
    m.config_ld(0, id=2)  # stride 0: every row reads the same DRAM row
    m.mvin(a, 0)
    m.mvin2(b, 16)
    m.mvin3(bias, acc_addr(0))
    assert np.array_equal(m.read_spad(0, 16), a)
    assert np.array_equal(m.read_spad(16, 16), ref_mvin(b, 0.5))
    assert np.array_equal(m.read_acc(0, 16), np.repeat(bias, 16, axis=0))


def test_block_mvin_stride(m):
    rng = np.random.default_rng(17)
    src = rand_i8(rng, 4, 64)
    m.config_ld(64, block_stride=5)  # gemmini_extended4_config_ld
    m.mvin(src, 200, 64, 4)
    data, written = ref_mvin_layout(src, 5)
    assert np.array_equal(np.where(written, m.read_spad(200, data.shape[0]), 0), data)


@HYP
@given(rows=st.integers(1, DIM), cols=st.integers(1, 64), scale=st.sampled_from([1.0, 0.5, 0.25, 1 / 3, 0.01, 7.5]),
       act=st.sampled_from([NO_ACTIVATION, RELU]), seed=st.integers(0, 2**32 - 1))
def test_mvout_accumulator_scaled(rows, cols, scale, act, seed):
    m = _model()
    m.reset()
    rng = np.random.default_rng(seed)
    blocks = -(-cols // DIM)
    acc = rng.integers(-3000, 3000, size=(blocks * DIM, DIM), dtype=np.int32)
    acc[0, :6] = [2**31 - 1, -(2**31), 1, 3, -5, 2**24 + 1]
    m.write_acc(500, acc)
    m.config_st(cols, act=act, scale=scale)
    out = np.zeros((rows, cols), np.int8)
    m.mvout(out, acc_addr(500), cols, rows)
    tile = np.concatenate([acc[b * DIM:b * DIM + rows] for b in range(blocks)], axis=1)[:, :cols]
    assert np.array_equal(out, ref_mvout(tile, scale=scale, act=act))


def test_mvout_raw_int32(m):
    rng = np.random.default_rng(19)
    acc = rng.integers(-2**31, 2**31, size=(16, 16), dtype=np.int64).astype(np.int32)
    m.write_acc(8, acc)
    m.config_st(10 * 4, act=RELU, scale=0.5)  # neither applies to raw reads
    out = np.zeros((7, 10), np.int32)
    m.mvout(out, acc_addr(8, full=True), 10, 7)
    assert np.array_equal(out, acc[:7, :10])
    # bit 30 is ignored on reads (Gemmini's own code passes its accumulate-flagged C address)
    out8 = np.zeros((7, 10), np.int8)
    m.config_st(10)
    m.mvout(out8, acc_addr(8, accumulate=True), 10, 7)
    assert np.array_equal(out8, ref_mvout(acc[:7, :10]))


# ---- execute ----------------------------------------------------------------------------------------
@HYP
@given(a_rows=st.integers(1, DIM), k=st.integers(1, DIM), b_cols=st.integers(1, DIM),
       c_rows=st.integers(1, DIM), c_cols=st.integers(1, DIM), use_d=st.booleans(), accumulate=st.booleans(),
       a_stride=st.integers(1, 3), c_stride=st.integers(1, 3), transpose=st.sampled_from(["", "a", "b"]),
       seed=st.integers(0, 2**32 - 1))
def test_compute_tile(a_rows, k, b_cols, c_rows, c_cols, use_d, accumulate, a_stride, c_stride, transpose, seed):
    m = _model()
    m.reset()
    rng = np.random.default_rng(seed)
    A, B, D = rand_i8(rng, a_rows, k), rand_i8(rng, k, b_cols), rand_i8(rng, 16, 16)
    old = rng.integers(-2**31, 2**31, size=(16 * 4, 16), dtype=np.int64).astype(np.int32)
    # place A (row i at 0 + a_stride*i; transposed: column i of row a_stride*k), B, D in the scratchpad
    a_store = np.zeros((a_stride * DIM, DIM), np.int8)
    if transpose == "a":
        a_store[::a_stride][:k, :a_rows] = A.T
    else:
        a_store[::a_stride][:a_rows, :k] = A
    b_store = np.zeros((DIM, DIM), np.int8)
    if transpose == "b":
        b_store[:b_cols, :k] = B.T
    else:
        b_store[:k, :b_cols] = B
    m.write_spad(0, a_store)
    m.write_spad(100, b_store)
    m.write_spad(200, D)
    m.write_acc(0, old)
    m.config_ex(a_stride=a_stride, c_stride=c_stride, a_transpose=transpose == "a", b_transpose=transpose == "b")
    m.preload(100, acc_addr(16, accumulate=accumulate), b_cols, k, c_cols, c_rows)
    m.compute_preloaded(0, 200 if use_d else GARBAGE_ADDR, k, a_rows, 16 if use_d else 0, 16 if use_d else 0)
    got = m.read_acc(0, 64)
    want = old.copy()
    rows = 16 + c_stride * np.arange(c_rows)
    want[rows, :c_cols] = ref_write_acc(old[rows, :c_cols],
                                        ref_compute(A, B, D if use_d else None, c_rows=c_rows, c_cols=c_cols),
                                        accumulate)
    assert np.array_equal(got, want)
    assert m.counters()["macs"] == a_rows * b_cols * k


def test_weight_reuse_and_garbage_operands(m):
    rng = np.random.default_rng(23)
    A1, A2, B = rand_i8(rng, 16, 16), rand_i8(rng, 16, 16), rand_i8(rng, 16, 16)
    D = rand_i8(rng, 16, 16)
    m.write_spad(0, A1)
    m.write_spad(16, A2)
    m.write_spad(32, B)
    m.write_spad(48, D)
    m.config_ex()
    # garbage C: the array computes (weights loaded), nothing is written
    m.preload(32, GARBAGE_ADDR)
    m.compute_preloaded(0)
    assert not m.acc_written(0, ACC_ROWS).any()
    # GARBAGE B + compute_accumulated: the weights stay
    m.preload(GARBAGE_ADDR, acc_addr(0))
    m.compute_accumulated(16)
    assert np.array_equal(m.read_acc(0, 16), ref_compute(A2, B))
    m.preload(GARBAGE_ADDR, acc_addr(0, accumulate=True))
    m.compute_accumulated(0, 48)  # + D
    assert np.array_equal(m.read_acc(0, 16), ref_compute(A2, B) + ref_compute(A1, B, D))
    # GARBAGE B + compute_preloaded: zero weights (gemmini_preload_zeros), C = D
    m.preload_zeros(acc_addr(16))
    m.compute_preloaded(0, 48)
    assert np.array_equal(m.read_acc(16, 16), D.astype(np.int32))
    m.preload(GARBAGE_ADDR, acc_addr(32))
    m.compute_accumulated(16)  # the zero weights are now in the array
    assert (m.read_acc(32, 16) == 0).all()
    c = m.counters()
    assert (c["preload"], c["compute_preloaded"], c["compute_accumulated"]) == (5, 2, 3)
    assert c["macs"] == 3 * 16 ** 3  # zero weights (no B) issue no MACs


# ---- a whole tiled matmul -----------------------------------------------------------------------------
@pytest.mark.parametrize("scale, act, with_bias", [(1 / 64, RELU, True), (0.37, NO_ACTIVATION, False),
                                                   (1.0, NO_ACTIVATION, False)])
def test_tiled_matmul_64(m, scale, act, with_bias):
    rng = np.random.default_rng(29)
    N = 64
    A, B = rand_i8(rng, N, N), rand_i8(rng, N, N)
    bias = rng.integers(-5000, 5000, size=(1, N), dtype=np.int32)
    C = np.zeros((N, N), np.int8)
    A_SP, B_SP = 0, 1024

    def c_tile(i, j):  # accumulator rows of C tile (i, j): 16 consecutive tiles per i-row
        return (i * 4 + j) * DIM

    with m.call():
        m.config_ex()
        m.config_ld(A.strides[0], id=0)
        m.config_ld(B.strides[0], id=1)
        m.config_ld(0, id=2)  # the bias row, broadcast to 16 rows
        m.config_st(C.strides[0], act=act, scale=scale)
        for i in range(4):  # A row panel i: 4 blocks of 16 columns, at A_SP + i*64 + k*16
            m.mvin(A[i * 16:(i + 1) * 16], A_SP + i * 64, 64, 16)
        for k in range(4):  # B row panel k: block j at B_SP + k*64 + j*16
            m.mvin2(B[k * 16:(k + 1) * 16], B_SP + k * 64, 64, 16)
        for i in range(4):
            for j in range(4):
                m.mvin3(bias[:, j * 16:(j + 1) * 16] if with_bias else None, acc_addr(c_tile(i, j)), 16, 16)
        for j in range(4):
            for k in range(4):
                m.preload(B_SP + k * 64 + j * 16, acc_addr(c_tile(0, j), accumulate=True))
                m.compute_preloaded(A_SP + 0 * 64 + k * 16)
                for i in range(1, 4):  # the weights stay in the array
                    m.preload(GARBAGE_ADDR, acc_addr(c_tile(i, j), accumulate=True))
                    m.compute_accumulated(A_SP + i * 64 + k * 16)
        for i in range(4):  # 4 accumulator blocks per mvout
            m.mvout(C[i * 16:(i + 1) * 16], acc_addr(c_tile(i, 0)), 64, 16)
    want = ref_matmul(A, B, scale=scale, act=act, bias=bias if with_bias else None)
    assert np.array_equal(C, want)
    if scale == 1 / 64:
        acc = A.astype(np.int64) @ B.astype(np.int64) + bias
        assert (acc % 64 == 32).any()  # rounding ties were exercised
    c = m.counters()
    # load: 5 configs + 8 int8 mvins of 16x64 (64 cycles) + 16 int32 mvins of 16x16 (64 cycles)
    # execute: 5 + 16 x (preload 16 + compute 16 + 3 x (preload 1 + compute 16)); store: 5 + 4 x 64
    assert (c["load_cycles"], c["execute_cycles"], c["store_cycles"]) == (5 + 8 * 64 + 16 * 64, 5 + 16 * 83,
                                                                          5 + 4 * 64)
    assert c["cycles"] == 1541 and c["calls"] == 1 and c["macs"] == N ** 3
    assert c["bytes_in"] == 2 * N * N + (16 * 16 * 16 * 4 if with_bias else 0) and c["bytes_out"] == N * N
    assert c["utilization"] == pytest.approx(N ** 3 / (1541 * 256))


# ---- the cycle model on a hand-computed example ------------------------------------------------------
def test_counters_and_cycle_model(m):
    rng = np.random.default_rng(31)
    A, B = rand_i8(rng, 16, 16), rand_i8(rng, 8, 16)
    c1, c2 = np.zeros((16, 16), np.int8), np.zeros((4, 16), np.int32)
    with m.call():
        m.config_ex()                                       # 1 on each unit
        m.config_ld(16)                                     # 1 on each unit
        m.config_st(16)                                     # 1 on each unit
        m.mvin(A, 0)                                        # load 256 B: 16
        m.mvin(B, 16, 16, 8)                                # load 128 B: 8
        m.preload(16, acc_addr(0), 16, 8)                   # execute 16 (new weights)
        m.compute_preloaded(0, GARBAGE_ADDR, 8, 16)         # execute 16; MACs 16 x 16 x 8
        m.preload(GARBAGE_ADDR, acc_addr(16), 16, 16, 16, 4)  # execute 1 (weights reused)
        m.compute_accumulated(0, GARBAGE_ADDR, 8, 4)        # execute 16; MACs 4 x 16 x 8
        m.mvout(c1, acc_addr(0))                            # store 256 B: 16
        m.config_st(64)                                     # 1 on each unit
        m.mvout(c2, acc_addr(16, full=True), 16, 4)         # store 4 x 16 x 4 B: 16
        m.fence()                                           # free
    # load 4 + 24 = 28, execute 4 + 49 = 53, store 4 + 32 = 36: the call costs 53
    with m.call():
        m.config_ld(16)
        m.mvin(A, 32)                                       # load 1 + 16 = 17, execute 1, store 1
    m.flush()
    m.config_st(16)                                         # outside a call: an open span of 1
    c = m.counters()
    assert {k: c[k] for k in ("config_ex", "config_ld", "config_st", "mvin", "mvout", "preload",
                              "compute_preloaded", "compute_accumulated", "fence", "flush")} == dict(
        config_ex=1, config_ld=2, config_st=3, mvin=3, mvout=2, preload=2, compute_preloaded=1,
        compute_accumulated=1, fence=1, flush=1)
    assert (c["bytes_in"], c["bytes_out"], c["macs"]) == (640, 512, 2560)
    assert (c["load_cycles"], c["execute_cycles"], c["store_cycles"]) == (28 + 17 + 1, 53 + 1 + 1, 36 + 1 + 1)
    assert (c["cycles"], c["calls"]) == (53 + 17 + 1, 2)
    assert c["utilization"] == pytest.approx(2560 / (71 * 256))
    with m.call():  # closes the open span
        pass
    assert (m.counters()["cycles"], m.counters()["calls"]) == (71, 3)
    assert transfer_cycles(16, 16, 4) == 64 and transfer_cycles(1, 1, 1) == 1
    m.reset_counters()
    assert m.counters()["cycles"] == 0 and m.utilization == 0.0


# ---- errors -------------------------------------------------------------------------------------------
def _snapshot(m):
    return (m.read_spad(0, 128).copy(), m.spad_written(0, 128).copy(), m.read_acc(0, 64).copy(),
            m.acc_written(0, 64).copy(), {k: v for k, v in m.counters().items()})


def _prepared(m):
    rng = np.random.default_rng(37)
    configure(m)
    m.mvin(rand_i8(rng, 16, 16), 0)
    m.mvin(rand_i8(rng, 16, 16), 16)
    m.config_ld(64, id=2)
    m.mvin3(rng.integers(-99, 99, size=(16, 16), dtype=np.int32), acc_addr(0))


I8 = np.zeros((16, 80), np.int8)
I32 = np.zeros((16, 17), np.int32)

ERRORS = [
    # (setup beyond _prepared, failing call, words the message must contain)
    (None, lambda m: m.mvin(I8, SPAD_ROWS - 8), ["gemmini mvin", "16376", "out of range"]),
    (None, lambda m: m.mvin(I32, acc_addr(ACC_ROWS - 4), 16, 16), ["gemmini mvin", "1020", "accumulator"]),
    (None, lambda m: m.mvin(I8, 0, 16, 17), ["gemmini mvin", "rows = 17", "1..16"]),
    (None, lambda m: m.mvin(I8, 0, 65, 16), ["gemmini mvin", "cols = 65", "1..64"]),
    (None, lambda m: m.mvin3(I32, acc_addr(0), 17, 16), ["gemmini mvin3", "cols = 17", "1..16"]),
    (None, lambda m: m.mvin(I8, 0, 0, 16), ["gemmini mvin", "cols = 0"]),
    (None, lambda m: m.mvin(I8, GARBAGE_ADDR), ["gemmini mvin", "GARBAGE_ADDR"]),
    (None, lambda m: m.mvin(I8, 0x40000005), ["gemmini mvin", "bits 30/29"]),
    (None, lambda m: m.mvin(I8, 1 << 33), ["gemmini mvin", "32 bits"]),
    (lambda m: m.config_ld(64, shrunk=False, id=2), lambda m: m.mvin3(I32, acc_addr(32, accumulate=True)),
     ["gemmini mvin3", "accumulator row 32", "never written"]),
    (lambda m: m.reset(), lambda m: m.mvin2(I8, 0), ["gemmini mvin2", "load queue 1 is not configured"]),
    (None, lambda m: m.mvout(I8, acc_addr(16)), ["gemmini mvout", "accumulator row 16", "never written"]),
    (None, lambda m: m.mvout(I8, 40), ["gemmini mvout", "scratchpad row 40", "never written"]),
    (None, lambda m: m.mvout(None, acc_addr(0)), ["gemmini mvout", "NULL"]),
    (None, lambda m: m.mvout(I32, acc_addr(0, full=True), 17, 16), ["gemmini mvout", "cols = 17", "1..16"]),
    (None, lambda m: m.mvout(I8, acc_addr(8), 16, 16), ["gemmini mvout", "row 16", "never written"]),
    (lambda m: m.reset(), lambda m: m.preload(0, acc_addr(0)), ["gemmini preload", "execute unit is not configured"]),
    (None, lambda m: m.preload(acc_addr(0), acc_addr(0)), ["gemmini preload", "B", "accumulator address"]),
    (None, lambda m: m.preload(0, 64), ["gemmini preload", "C", "scratchpad address"]),
    (None, lambda m: m.preload(0, acc_addr(1016)), ["gemmini preload", "C", "1016", "out of range"]),
    (None, lambda m: m.preload(0, acc_addr(0), 16, 17), ["gemmini preload", "BD_rows = 17"]),
    (None, lambda m: m.preload(SPAD_ROWS - 4, acc_addr(0)), ["gemmini preload", "B", "16380", "out of range"]),
    (lambda m: m.preload(0, acc_addr(0)), lambda m: m.preload(0, acc_addr(0)),
     ["gemmini preload", "previous preload", "not consumed"]),
    (None, lambda m: m.compute_preloaded(0), ["gemmini compute_preloaded", "no preload"]),
    (lambda m: m.preload(GARBAGE_ADDR, acc_addr(0)), lambda m: m.compute_accumulated(0),
     ["gemmini compute_accumulated", "no weights"]),
    (lambda m: m.preload(16, acc_addr(0)), lambda m: m.compute_accumulated(0),
     ["gemmini compute_accumulated", "B 0x10", "compute_preloaded"]),
    (lambda m: m.preload(0, acc_addr(0)), lambda m: m.compute_preloaded(GARBAGE_ADDR),
     ["gemmini compute_preloaded", "A is GARBAGE_ADDR"]),
    (lambda m: m.preload(0, acc_addr(0)), lambda m: m.compute_preloaded(40),
     ["gemmini compute_preloaded", "A reads scratchpad row 40", "never written"]),
    (lambda m: m.preload(40, acc_addr(0)), lambda m: m.compute_preloaded(0),
     ["gemmini compute_preloaded", "B (latched by preload)", "row 40", "never written"]),
    (lambda m: m.preload(0, acc_addr(32, accumulate=True)), lambda m: m.compute_preloaded(16),
     ["gemmini compute_preloaded", "accumulator row 32", "never written"]),
    (lambda m: m.preload(0, acc_addr(0)), lambda m: m.compute_preloaded(16, acc_addr(0)),
     ["gemmini compute_preloaded", "D", "accumulator address"]),
    (lambda m: m.preload(0, acc_addr(0)), lambda m: m.compute_preloaded(16, GARBAGE_ADDR, 17, 16),
     ["gemmini compute_preloaded", "A_cols = 17"]),
    (None, lambda m: m.config_ex(dataflow=OUTPUT_STATIONARY), ["gemmini config_ex", "OUTPUT_STATIONARY"]),
    (None, lambda m: m.config_ex(a_transpose=True, b_transpose=True), ["gemmini config_ex", "not permitted"]),
    (None, lambda m: m.config_ex(act=2), ["gemmini config_ex", "act = 2"]),
    (None, lambda m: m.config_ld(16, id=3), ["gemmini config_ld", "id = 3"]),
    (None, lambda m: m.config_ld(16, scale=float("nan")), ["gemmini config_ld", "finite"]),
    (None, lambda m: m.config_st(16, act=2), ["gemmini config_st", "acc_act = 2"]),
    (None, lambda m: m.end_call(), ["gemmini end_call", "no call is open"]),
]


@pytest.mark.parametrize("setup, bad, words", ERRORS, ids=[" ".join(e[2][:2]) for e in ERRORS])
def test_errors_are_reported_and_change_nothing(m, setup, bad, words):
    _prepared(m)
    if setup is not None:
        setup(m)
    before = _snapshot(m)
    with pytest.raises(GemminiError) as info:
        bad(m)
    msg = str(info.value)
    for w in words:
        assert w in msg, (w, msg)
    after = _snapshot(m)
    for x, y in zip(before[:4], after[:4]):
        assert np.array_equal(x, y)
    assert before[4] == after[4]  # a failed instruction is not counted either
    # the model goes on (raise_errors clears the error), and after a reset
    assert m.error() is None
    m.reset()
    configure(m)
    m.mvin(np.ones((16, 16), np.int8), 0)
    m.preload(0, acc_addr(0))
    m.compute_preloaded(0)
    out = np.zeros((16, 16), np.int8)
    m.mvout(out, acc_addr(0))
    assert (out == 16).all()


def test_first_error_is_kept_and_later_instructions_are_no_ops(m):
    _prepared(m)
    m.raise_errors = False
    try:
        m.mvin(I8, SPAD_ROWS)  # first error
        first = m.error()
        assert first is not None and "gemmini mvin" in first
        before = _snapshot(m)
        m.mvin(np.full((16, 16), 5, np.int8), 64)  # valid, ignored
        m.mvout(I8, acc_addr(500))  # invalid, ignored: the first error stays
        assert m.error() == first
        after = _snapshot(m)
        assert all(np.array_equal(x, y) for x, y in zip(before[:4], after[:4])) and before[4] == after[4]
        m.clear_error()
        m.mvin(np.full((16, 16), 5, np.int8), 64)
        assert (m.read_spad(64, 16) == 5).all()
        m.mvin(I8, SPAD_ROWS)
        assert m.error() is not None
        m.reset()
        assert m.error() is None
    finally:
        m.raise_errors = True


def test_calls_start_clean(m):
    _prepared(m)
    with m.call():
        with pytest.raises(GemminiError, match="load queue 0 is not configured"):
            m.mvin(I8, 0)
        m.config_ld(16)
        m.config_ex()
        m.preload(0, acc_addr(0))  # row 0 holds data from before the call: not readable in it
        with pytest.raises(GemminiError, match="compute_preloaded: A reads scratchpad row 0"):
            m.compute_preloaded(0)
        m.mvin(np.ones((16, 16), np.int8), 0)
        m.compute_preloaded(0)
    with pytest.raises(GemminiError, match="end_call: the call ended with a preload"):
        with m.call():
            m.config_ex()
            m.preload(GARBAGE_ADDR, GARBAGE_ADDR)
    with m.call():  # nested calls belong to the enclosing one
        with m.call():
            pass
        assert m.counters()["calls"] == 2
    assert m.counters()["calls"] == 3


def test_dram_operands_are_checked_in_python(m):
    configure(m)
    with pytest.raises(ValueError, match="span bytes"):
        m.mvin(np.zeros((8, 16), np.int8), 0)  # 16 rows do not fit
    with pytest.raises(TypeError, match="int32"):
        m.config_ld(64)
        m.mvin(np.zeros((16, 16), np.int8), acc_addr(0))
    with pytest.raises(ValueError, match="contiguous"):
        m.mvin(np.zeros((16, 32), np.int8)[:, ::2], 0)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros((16, 16), np.int8)
        ro.flags.writeable = False
        m.mvout(ro, 0)
    with pytest.raises(IndexError):
        m.read_acc(ACC_ROWS - 1, 2)


# ---- the model inside a package: several units, one machine, accpy's error channel ----------------------
UNIT0 = r"""
#define ACCPY_SPLIT_UNIT
#define ACCPY_DEFINE_ERROR_STATE
#include "accpy_runtime.h"
#include "gemmini/gemmini.h"
#include <string.h>

/* loads A and B, multiplies (every intrinsic spelling of Gemmini's header, in its argument order) */
void k_load_compute(const int8_t* A, const int8_t* B) {
    gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
    gemmini_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0);
    gemmini_config_ld(DIM * sizeof(elem_t));
    gemmini_extended_config_ld(DIM * sizeof(elem_t), MVIN_SCALE_IDENTITY);
    gemmini_extended3_config_ld(DIM * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
    gemmini_extended3_config_ld(0, MVIN_SCALE_IDENTITY, false, 2);
    gemmini_mvin(A, 0);
    gemmini_extended_mvin2(B, 16, DIM, DIM);
    gemmini_extended_mvin3(NULL, (uint32_t)1 << 31, DIM, DIM);
    gemmini_block_mvin(A, 32, 1);
    gemmini_extended_preload(16, ((uint32_t)1 << 31) | ((uint32_t)1 << 30), DIM, DIM, DIM, DIM);
    gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
    gemmini_preload(GARBAGE_ADDR, ((uint32_t)1 << 31) | 16);
    gemmini_extended_compute_accumulated(32, ~0, DIM, DIM, DIM, DIM);
    gemmini_preload_zeros(((uint32_t)1 << 31) | 32);
    gemmini_compute_preloaded(0, GARBAGE_ADDR);
    gemmini_preload(GARBAGE_ADDR, GARBAGE_ADDR);
    gemmini_compute_accumulated(0, GARBAGE_ADDR);
    gemmini_fence();
    gemmini_flush(0);
}

int pkg_error(char* out, int n) {
    const char* e = accpy_take_error();
    if (!e) return 0;
    strncpy(out, e, (size_t)n);
    return 1;
}
uint64_t pkg_gemmini_mvins(void) {
    accpy_gemmini_counters_t c;
    accpy_gemmini_read_counters(&c);
    return c.mvin;
}
void pkg_gemmini_reset(void) { accpy_gemmini_reset(); }
"""

UNIT1 = r"""
#define ACCPY_SPLIT_UNIT
#include "accpy_runtime.h"
#include "gemmini/gemmini.h"

/* stores what unit 0 computed: the accumulator is the same machine */
void k_store(int8_t* C, int32_t* C32) {
    gemmini_extended_config_st(DIM * sizeof(elem_t), RELU, ACC_SCALE_IDENTITY);
    gemmini_mvout(C, (uint32_t)1 << 31);
    gemmini_config_st(DIM * sizeof(acc_t));
    gemmini_extended_mvout(C32, ((uint32_t)1 << 31) | ((uint32_t)1 << 29) | 16, DIM, DIM);
    gemmini_extended_mvout(C32 + DIM * DIM, ((uint32_t)1 << 31) | ((uint32_t)1 << 29) | 32, DIM, DIM);
}
void k_bad(int8_t* C) {
    gemmini_config_st(DIM);
    gemmini_mvout(C, ((uint32_t)1 << 31) | 512);
}
"""


@pytest.fixture(scope="module")
def package_lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemmini_pkg")
    nat = native_dir()
    (d / "unit0.c").write_text(UNIT0)
    (d / "unit1.c").write_text(UNIT1)
    objs = []
    for name, src, defs in (("unit0", d / "unit0.c", []), ("unit1", d / "unit1.c", []),
                            ("model", nat / "gemmini" / "gemmini_model.c", ["-DACCPY_SPLIT_UNIT"])):
        obj = d / f"{name}.o"
        subprocess.run(["gcc", "-O1", "-fPIC", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function",
                        "-Wno-type-limits", *defs, f"-I{nat}", "-c", str(src), "-o", str(obj)], check=True,
                       capture_output=True)
        objs.append(str(obj))
    so = d / "libpkg.so"
    subprocess.run(["gcc", "-shared", *objs, "-o", str(so), "-lm", "-lpthread"], check=True, capture_output=True)
    return ctypes.CDLL(str(so))


@pytest.mark.slow
def test_package_units_share_one_machine_and_the_error_channel(package_lib):
    lib = package_lib
    lib.pkg_gemmini_mvins.restype = ctypes.c_uint64
    rng = np.random.default_rng(41)
    A, B = rand_i8(rng, 16, 16), rand_i8(rng, 16, 16)
    C, C32 = np.zeros((16, 16), np.int8), np.zeros((2, 16, 16), np.int32)
    lib.pkg_gemmini_reset()
    lib.k_load_compute(A.ctypes.data_as(ctypes.c_void_p), B.ctypes.data_as(ctypes.c_void_p))
    lib.k_store(C.ctypes.data_as(ctypes.c_void_p), C32.ctypes.data_as(ctypes.c_void_p))
    buf = ctypes.create_string_buffer(2048)
    assert lib.pkg_error(buf, 2048) == 0, buf.value
    AB = ref_compute(A, B)
    assert np.array_equal(C, ref_mvout(AB, act=RELU))  # 0 + A.B (accumulated onto the zero fill)
    assert np.array_equal(C32[0], AB)  # weights reused, A from the block mvin
    assert (C32[1] == 0).all()  # preload_zeros + compute_preloaded: zero weights
    assert lib.pkg_gemmini_mvins() == 4
    lib.k_bad(C.ctypes.data_as(ctypes.c_void_p))
    assert lib.pkg_error(buf, 2048) == 1
    assert b"gemmini mvout" in buf.value and b"accumulator row 512" in buf.value
    for hidden in ("accpy_gemmini_mvin", "accpy_gemmini_reset", "accpy_gemmini_read_counters"):
        with pytest.raises(AttributeError):
            getattr(lib, hidden)  # the model's symbols stay inside the package


def test_header_declarations_match_the_python_handle():
    text = (Path(native_dir()) / "gemmini" / "gemmini.h").read_text()
    for name in ("gemmini_extended_config_ex(dataflow, act, sys_shift, A_stride, A_transpose, B_transpose)",
                 "gemmini_extended3_config_ld(stride, scale, shrunk, id)",
                 "gemmini_extended_config_ld(stride, scale)", "gemmini_config_ld(stride)",
                 "gemmini_extended_config_st(stride, acc_act, acc_scale)", "gemmini_config_st(stride)",
                 "gemmini_extended_mvin(dram_addr, spad_addr, cols, rows)",
                 "gemmini_extended_mvin2(dram_addr, spad_addr, cols, rows)",
                 "gemmini_extended_mvin3(dram_addr, spad_addr, cols, rows)", "gemmini_mvin(dram_addr, spad_addr)",
                 "gemmini_extended_mvout(dram_addr, spad_addr, cols, rows)", "gemmini_mvout(dram_addr, spad_addr)",
                 "gemmini_extended_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows)", "gemmini_preload(BD, C)",
                 "gemmini_preload_zeros(C)",
                 "gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows)",
                 "gemmini_extended_compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows)",
                 "gemmini_compute_preloaded(A, BD)", "gemmini_compute_accumulated(A, BD)", "gemmini_fence()",
                 "gemmini_flush(skip)"):
        assert f"#define {name}" in text, name
