"""Every x86 tile-unit and VNNI / BF16 intrinsic's C template (accpy/targets/x86tile/intrinsics.py)
against its reference body (numpy on RefTiles), on random data: the templates that call the
functional model always; the templates that emit the instructions where the CPU (and the OS)
let this process use them, else skipped saying why. Each case is a small program (begin,
configure, load, operate, store, end) written with the templates, as the compiler emits them."""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

import accpy as acc
from accpy.package.compile import CC
from accpy.paths import native_dir
from accpy.targets import x86tile
from accpy.targets.x86tile import machine as mc
from accpy.targets.x86tile.intrinsics import EMULATED, HARDWARE

DOTS = ("dpbssd", "dpbsud", "dpbusd", "dpbuud", "dpbf16ps")
VECTOR_DOTS = ("vpdpbusd", "vpdpbusds", "vdpbf16ps")
HW_FLAGS = ["-mamx-tile", "-mamx-int8", "-mamx-bf16", "-mavx512f", "-mavx512vnni", "-mavx512bf16"]


def _program(ops: dict, name: str, steps) -> str:
    """A C function `name(void* p0, ..., void* p5)` running `steps` [(op, {param: C text})]."""
    body = []
    for op, args in steps:
        body.append("    " + ops[op].c_call({k: str(v) for k, v in args.items()}) + ";")
    lines = "\n".join(body[1:-1])
    return (f"void {name}(void* p0, void* p1, void* p2, void* p3, void* p4, void* p5) {{\n"
            f"    if ({ops['begin'].c_call({})}) {{\n{lines}\n    {ops['end'].c_call({})};\n    }}\n}}\n")


def _tile_steps(op, M, K4, N, strides, zero=False, stream=False):
    """C += A . B on tiles 0 (C), 1 (A), 2 (B); buffers p0 = C in, p1 = A, p2 = B, p3 = C out;
    `stream`: A and B loaded with the streaming form (TILELOADDT1)."""
    width = 4  # bytes per k group: 4 int8, or a pair of bf16
    shapes = {f"r{k}": 0 for k in range(8)} | {f"c{k}": 0 for k in range(8)}
    shapes.update(r0=M, c0=4 * N, r1=M, c1=width * K4, r2=K4, c2=4 * N)
    sc, sa, sb = strides
    load = "loaddt1" if stream else "loadd"
    steps = [("begin", {}), ("config", shapes),
             ("loadd", {"t": 0, "base": "p0", "stride": sc}), (load, {"t": 1, "base": "p1", "stride": sa}),
             (load, {"t": 2, "base": "p2", "stride": sb})]
    if zero:
        steps.append(("zero", {"t": 0}))
    steps += [(op, {"d": 0, "a": 1, "b": 2}), ("stored", {"t": 0, "base": "p3", "stride": sc}), ("end", {})]
    return steps


def _cases():
    rng = np.random.default_rng(5)
    out = []
    for op in DOTS:
        for n in range(6):
            M, K4, N = (16, 16, 16) if n == 0 else (int(rng.integers(1, 17)), int(rng.integers(1, 17)),
                                                    int(rng.integers(1, 17)))
            strides = [int(rng.integers(0, 3)) * 4 + w for w in (4 * N, 4 * K4, 4 * N)]
            out.append((op, M, K4, N, strides, n == 5, n in (2, 3)))
    return out


CASES = _cases()


def _build(tmp_path, ops, flags, tag) -> ctypes.CDLL:
    src = ["#include \"accpy_runtime.h\"", "#include \"accpy_x86tile_ops.h\"",
           "const char* take_error(void) { return accpy_take_error(); }"]
    for k, (op, M, K4, N, strides, zero, stream) in enumerate(CASES):
        src.append(_program(ops, f"tile_case{k}", _tile_steps(op, M, K4, N, strides, zero, stream)))
    for op in VECTOR_DOTS:
        src.append(_program(ops, f"vec_{op}", [("begin", {}), (op, {"acc": "p0", "a": "p1", "b": "p2"}), ("end", {})]))
    # a dot product whose tile shapes do not agree: refused (the model reports it at `end`)
    bad = _tile_steps("dpbusd", 16, 16, 16, (64, 64, 64))
    bad[1][1]["r2"] = 8
    src.append(_program(ops, "bad_shapes", bad))
    c = tmp_path / f"x86tile_{tag}.c"
    c.write_text("\n".join(src) + "\n")
    so = tmp_path / f"libx86tile_{tag}.so"
    nd = native_dir()
    subprocess.run([CC, "-O2", "-fPIC", "-shared", "-std=gnu11", f"-I{nd}", f"-I{nd / 'x86tile'}", *flags,
                    str(c), "-o", str(so)], check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(so))
    lib.take_error.restype = ctypes.c_char_p
    names = [f"tile_case{k}" for k in range(len(CASES))] + [f"vec_{op}" for op in VECTOR_DOTS] + ["bad_shapes"]
    for n in names:
        getattr(lib, n).argtypes = [ctypes.c_void_p] * 6
        getattr(lib, n).restype = None
    return lib


def _amx_usable() -> str:
    """'' when this process may run the tile instructions here, else why not."""
    t = acc.Target.HOST
    missing = [f for f in ("amx_tile", "amx_int8", "amx_bf16", "avx512_vnni", "avx512_bf16") if not t.has(f)]
    if missing:
        return f"this CPU lacks {', '.join(missing)}"
    return ""


@pytest.fixture(scope="module", params=["model", "hardware"])
def form(request, tmp_path_factory):
    if request.param == "hardware":
        why = _amx_usable()
        if why:
            pytest.skip(f"the instructions' templates need the CPU features: {why} (the model's are tested)")
        return HARDWARE, _build(tmp_path_factory.mktemp("hw"), HARDWARE, HW_FLAGS, "hw")
    return EMULATED, _build(tmp_path_factory.mktemp("emu"), EMULATED, [], "emu")


def _bytes(rng, rows, nbytes, stride, bf16):
    buf = np.zeros(rows * stride + 64, np.uint8)
    view = np.lib.stride_tricks.as_strided(buf, shape=(rows, nbytes), strides=(stride, 1))
    if bf16:
        h = mc.f32_to_bf16(rng.standard_normal((rows, nbytes // 2)).astype(np.float32))
        den = rng.random(h.shape) < 0.05  # denormal bf16 inputs (exponent 0): read as zero
        h[den] = rng.integers(1, 0x80, int(den.sum())).astype(np.uint16) | (rng.integers(0, 2, int(den.sum())) << 15).astype(np.uint16)
        view[...] = h.view(np.uint8).reshape(rows, nbytes)
    else:
        view[...] = rng.integers(0, 256, (rows, nbytes), dtype=np.uint8)
    return buf


def _acc_bytes(rng, rows, N, stride, floats):
    buf = np.zeros(rows * stride + 64, np.uint8)
    view = np.lib.stride_tricks.as_strided(buf, shape=(rows, 4 * N), strides=(stride, 1))
    vals = (rng.standard_normal((rows, N)).astype(np.float32) if floats
            else rng.integers(-2 ** 31, 2 ** 31, (rows, N), dtype=np.int64).astype(np.int32))
    view[...] = vals.view(np.uint8).reshape(rows, 4 * N)
    return buf


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(CASES)))
def test_tile_templates_match_their_reference_bodies(form, k):
    ops, lib = form
    op, M, K4, N, strides, zero, stream = CASES[k]
    rng = np.random.default_rng(100 + k)
    bf16 = op == "dpbf16ps"
    sc, sa, sb = strides
    c_in = _acc_bytes(rng, M, N, sc, bf16)
    a = _bytes(rng, M, 4 * K4, sa, bf16)
    b = _bytes(rng, K4, 4 * N, sb, bf16)
    c_out = np.full_like(c_in, 0xA5)
    want = c_out.copy()
    getattr(lib, f"tile_case{k}")(*[x.ctypes.data for x in (c_in, a, b, c_out)], None, None)
    err = lib.take_error()
    assert err is None, err.decode()
    m = mc.RefTiles()
    bufs = {"p0": c_in, "p1": a, "p2": b, "p3": want}
    for name, args in _tile_steps(op, M, K4, N, strides, zero, stream):
        intr = ops[name]
        intr.reference(m, *[bufs.get(args[p], args[p]) if isinstance(args[p], str) else args[p]
                            for p in intr.params])
    if bf16:
        got32 = np.lib.stride_tricks.as_strided(c_out, shape=(M, 4 * N), strides=(sc, 1)).copy().view(np.float32)
        want32 = np.lib.stride_tricks.as_strided(want, shape=(M, 4 * N), strides=(sc, 1)).copy().view(np.float32)
        assert np.array_equal(got32.view(np.uint32), want32.view(np.uint32)), (got32, want32)
    assert np.array_equal(c_out, want), f"{op} {M}x{K4}x{N}: bytes differ"


@pytest.mark.parametrize("op", VECTOR_DOTS)
def test_vector_dot_templates_match_their_reference_bodies(form, op):
    ops, lib = form
    rng = np.random.default_rng(len(op))
    for _ in range(20):
        if op == "vdpbf16ps":
            acc_ = rng.standard_normal(16).astype(np.float32)
            a = mc.f32_to_bf16(rng.standard_normal(32).astype(np.float32))
            b = mc.f32_to_bf16(rng.standard_normal(32).astype(np.float32))
        else:
            acc_ = rng.integers(-2 ** 31, 2 ** 31, 16, dtype=np.int64).astype(np.int32)
            if op == "vpdpbusds":
                acc_[:4] = [2 ** 31 - 5, -2 ** 31 + 5, 2 ** 31 - 1, -2 ** 31]  # saturation
            a = rng.integers(0, 256, 64, dtype=np.uint8)
            b = rng.integers(-128, 128, 64, dtype=np.int64).astype(np.int8)
        got = acc_.copy()
        getattr(lib, f"vec_{op}")(got.ctypes.data, a.ctypes.data, b.ctypes.data, None, None, None)
        want = acc_.copy()
        ops[op].reference(mc.RefTiles(), want, a, b)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (op, got, want)


@pytest.mark.slow
def test_refused_instructions_are_the_kernels_error(tmp_path):
    """On the model, a dot product whose tile shapes do not agree changes nothing and is reported
    as the kernel's error (the hardware would fault); the next call starts clean."""
    lib = _build(tmp_path, EMULATED, [], "bad")
    bufs = [np.zeros(16 * 128, np.uint8) for _ in range(4)]  # room for any case's strides
    lib.bad_shapes(*[b.ctypes.data for b in bufs], None, None)
    err = lib.take_error()
    assert err is not None and b"tile shapes do not agree" in err and b"functional model" in err
    getattr(lib, "tile_case0")(*[b.ctypes.data for b in bufs], None, None)
    assert lib.take_error() is None


def test_the_library_is_reached_through_the_target():
    """The tile library (its instructions) applies to CPUs with AMX; its model to any CPU asking for
    it; the model's target runs every operation, the plain target only what its CPU has."""
    host = acc.Target.HOST
    emu = x86tile.emulating(acc.Target("Intel 7900X"))  # AVX-512, no VNNI, no AMX
    assert x86tile.X86TILE_MODEL in emu.libraries and x86tile.X86TILE not in emu.libraries
    assert x86tile.emulated(emu) and x86tile.operations(emu) is EMULATED
    assert all(x86tile.available(emu, op) for op in EMULATED)
    plain = acc.Target("Intel 7900X")
    assert not {x86tile.X86TILE, x86tile.X86TILE_MODEL} & set(plain.libraries)
    assert not x86tile.available(plain, "dpbusd")
    assert (x86tile.X86TILE in host.libraries) == host.has("amx_tile")
    with pytest.raises(ValueError, match="has no AMX_TILE memory"):
        x86tile.X86TILE.check_cache_location(plain, acc.MemorySpace.AMX_TILE)
    x86tile.X86TILE.check_cache_location(emu, acc.MemorySpace.AMX_TILE)  # the model has tiles
