"""The x86 tile unit's functional model (native/x86tile/accpy_x86tile.h).

Always: the model against numpy on random data (int8 dot products with int32 wraparound, the
bf16 dot products' order of additions with denormals read as zero and flushed, conversions,
shape checks). Where the CPU has them: the model against the real AMX, AVX512-VNNI and
AVX512-BF16 instructions, bit for bit (NaN results compared as NaN), else skipped saying why.
"""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADER_DIR = ROOT / "native" / "x86tile"
HERE = Path(__file__).resolve().parent / "x86tile"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("x86tile") / "model.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", f"-I{HEADER_DIR}", str(HERE / "model_api.c"), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(out))
    lib.tile_dp.restype = ctypes.c_char_p
    lib.tile_dp.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p, ctypes.c_long] * 3
    lib.tile_shapes.restype = ctypes.c_char_p
    return lib


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _tile_dp(lib, kind, a, b, c):
    M, N = c.shape
    K4 = a.shape[1] // 4
    err = lib.tile_dp(kind, M, K4, N, _ptr(a), a.strides[0], _ptr(b), b.strides[0], _ptr(c), c.strides[0])
    assert err is None, err.decode()
    return c


@pytest.mark.parametrize("kind, a_signed, b_signed", [(0, True, True), (1, True, False), (2, False, True),
                                                      (3, False, False)])
def test_int8_tile_dot_products_wrap_like_int32(model, kind, a_signed, b_signed):
    rng = np.random.default_rng(kind)
    for _ in range(40):
        M, K4, N = (int(x) for x in rng.integers(1, 17, 3))
        a = rng.integers(0, 256, (M, 4 * K4), dtype=np.uint8)
        b = rng.integers(0, 256, (K4, 4 * N), dtype=np.uint8)
        a[rng.random(a.shape) < 0.3] = 0x80  # extremes: -128 / 128
        b[rng.random(b.shape) < 0.3] = 0xFF  # -1 / 255
        c = rng.integers(-2 ** 31, 2 ** 31, (M, N), dtype=np.int64).astype(np.int32)
        av = a.view(np.int8).astype(np.int64) if a_signed else a.astype(np.int64)
        bv = b.view(np.int8).astype(np.int64) if b_signed else b.astype(np.int64)
        bp = bv.reshape(K4, N, 4).transpose(0, 2, 1).reshape(4 * K4, N)
        want = ((c.astype(np.int64) + av @ bp) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        got = _tile_dp(model, kind, a, b, c.copy())
        np.testing.assert_array_equal(got, want)


def _daz(x):
    x = np.asarray(x, np.float32).copy()
    tiny = (np.abs(x) < np.finfo(np.float32).tiny) & (x != 0)
    x[tiny] = np.copysign(np.float32(0), x[tiny])  # a denormal becomes a zero of its sign
    return x


def _bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_bf16_tile_dot_product_sums_even_and_odd_products_apart(model):
    """The order measured on hardware: even products summed over k, odd ones likewise, then added."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        M, K4, N = (int(x) for x in rng.integers(1, 17, 3))
        a = (rng.standard_normal((M, 2 * K4)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        b = (rng.standard_normal((K4, 2 * N)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        c = rng.standard_normal((M, N)).astype(np.float32)
        A, B = _bf16(a), _bf16(b)
        even = np.zeros((M, N), np.float32)
        odd = np.zeros((M, N), np.float32)
        with np.errstate(all="ignore"):
            for k in range(K4):
                even = _daz(even + np.outer(A[:, 2 * k], B[k, 0::2]).astype(np.float32))
                odd = _daz(odd + np.outer(A[:, 2 * k + 1], B[k, 1::2]).astype(np.float32))
            want = _daz(c + _daz(even + odd))
        got = _tile_dp(model, 4, a.view(np.uint8), b.view(np.uint8), c.copy())
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_bf16_conversion_rounds_to_nearest_even_and_reads_denormals_as_zero(model):
    x = np.array([1.0, 1.00390625, 1.01171875, 1.0078125 + 2 ** -9, -2.5, 3e38, np.inf, -np.inf,
                  1e-40, -1e-40, 0.0, -0.0], np.float32)
    out = np.zeros(len(x), np.uint16)
    model.f32_to_bf16(_ptr(x), _ptr(out), ctypes.c_long(len(x)))
    # 1+2^-8 is a tie: to even (1.0); 1+3*2^-8 is a tie: to even (1+2^-6); denormals -> signed zero
    assert [hex(v) for v in out] == ["0x3f80", "0x3f80", "0x3f82", "0x3f81", "0xc020", "0x7f62", "0x7f80", "0xff80",
                                     "0x0", "0x8000", "0x0", "0x8000"]
    nan = np.array([np.nan], np.float32)
    model.f32_to_bf16(_ptr(nan), _ptr(out), ctypes.c_long(1))
    assert _bf16(out[:1])[0] != _bf16(out[:1])[0]  # still a NaN


def test_vnni_dot_product_wraps_and_saturates(model):
    a = np.full(64, 255, np.uint8)
    b = np.full(64, 127, np.int8)
    acc = np.full(16, 2 ** 31 - 100, np.int32)
    model.vpdpbusd(_ptr(acc), _ptr(a), _ptr(b), 1)
    assert (acc == 2 ** 31 - 1).all()  # VPDPBUSDS saturates
    acc = np.full(16, 2 ** 31 - 100, np.int32)
    model.vpdpbusd(_ptr(acc), _ptr(a), _ptr(b), 0)
    assert (acc.astype(np.int64) == (2 ** 31 - 100 + 4 * 255 * 127) - 2 ** 32).all()  # VPDPBUSD wraps


@pytest.mark.parametrize("rows, colsb, ok", [
    ((4, 4, 2), (16, 8, 16), True),     # C 4x4, A 4x(2 groups), B 2x16 bytes
    ((4, 4, 2), (16, 12, 16), False),   # A has 3 groups of 4 bytes, B 2 rows
    ((4, 3, 2), (16, 8, 16), False),    # A's rows differ from C's
    ((4, 4, 2), (16, 8, 12), False),    # B's columns differ from C's
    ((17, 4, 2), (16, 8, 16), False),   # more than 16 rows
    ((4, 4, 2), (68, 8, 68), False),    # more than 64 bytes a row
])
def test_tile_shapes_are_checked(model, rows, colsb, ok):
    r = (ctypes.c_int * 3)(*rows)
    c = (ctypes.c_int * 3)(*colsb)
    err = model.tile_shapes(r, c)
    assert (err is None) == ok, err


@pytest.mark.slow
def test_model_matches_the_real_instructions(tmp_path):
    """Bit for bit on random shapes and data (edge bytes, bf16 NaN / inf / denormals), where the CPU can."""
    exe = tmp_path / "check_model"
    flags = ["-mamx-tile", "-mamx-int8", "-mamx-bf16", "-mavx512f", "-mavx512bw", "-mavx512vnni", "-mavx512bf16"]
    p = subprocess.run(["gcc", "-O2", *flags, f"-I{HEADER_DIR}", str(HERE / "check_model.c"), "-o", str(exe)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"this gcc cannot build AMX / AVX512-BF16 code: {p.stderr.strip()[:200]}")
    r = subprocess.run([str(exe), "400", "11"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ran, skipped = [], []
    for line in r.stdout.splitlines():
        op, rest = line.split(" ", 1)
        if rest.startswith("skipped"):
            skipped.append(f"{op}: {rest[len('skipped '):]}")
            continue
        cases, bad, first = rest.split(" ", 2)
        assert int(bad) == 0, f"{op}: {bad} of {cases} cases differ; first: {first}"
        ran.append(op)
    if not ran:
        pytest.skip("no tile or vector dot-product instruction on this CPU: " + "; ".join(skipped))
    assert len(ran) + len(skipped) == 9


def test_peak_benchmark_runs():
    """benchmarks/amx_peak.py prints a figure (or why it skipped) for each instruction."""
    import json
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "amx_peak.py"), "--seconds", "0.01", "--repeat", "1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    assert recs
    for rec in recs:
        assert rec.get("skipped") or rec["tera_ops_per_second"] > 0, rec
