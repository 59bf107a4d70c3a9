"""Every Gemmini intrinsic's C template (run on the functional model) against its reference body
(accpy/targets/gemmini.py: numpy on RefMachine), on random data."""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from accpy.package.compile import CC
from accpy.paths import native_file
from accpy.targets import gemmini as g
from accpy.targets.gemmini import machine as gm

FLOATS = {"scale"}


def _c_function(intr) -> str:
    params = []
    for p in intr.params:
        if p in intr.pointer_params:
            params.append(f"void* {p}")
        elif p in FLOATS:
            params.append(f"float {p}")
        else:
            params.append(f"uint64_t {p}")
    body = intr.c_call({p: p for p in intr.params})
    return f"void t_{intr.name.replace('.', '_')}({', '.join(params) or 'void'}) {{ {body}; }}"


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemmini_templates")
    src = d / "templates.c"
    src.write_text("#include \"gemmini.h\"\n" + "\n".join(_c_function(i) for i in g.INTRINSICS) + "\n")
    so = d / "libtemplates.so"
    model = native_file("gemmini/gemmini_model.c")
    subprocess.run([CC, "-O1", "-fPIC", "-shared", "-std=gnu11", f"-I{model.parent}", str(src), str(model), "-o",
                    str(so), "-lm", "-lpthread"], check=True)
    lib = ctypes.CDLL(str(so))
    for intr in g.INTRINSICS:
        f = getattr(lib, "t_" + intr.name.replace(".", "_"))
        f.argtypes = [ctypes.c_void_p if p in intr.pointer_params else ctypes.c_float if p in FLOATS
                      else ctypes.c_uint64 for p in intr.params]
        f.restype = None
    lib.accpy_gemmini_read_rows.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p,
                                            ctypes.c_void_p]
    lib.accpy_gemmini_write_rows.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
    lib.accpy_gemmini_error.restype = ctypes.c_char_p
    return lib


class Both:
    """Runs each intrinsic on the model (its C template) and on the reference machine."""

    def __init__(self, lib, rng):
        self.lib, self.ref = lib, g.RefMachine()
        lib.accpy_gemmini_reset()
        lib.accpy_gemmini_begin_call()
        # same random contents everywhere (written rows), so reads of "old" values agree
        spad = rng.integers(-128, 128, (gm.SPAD_ROWS, 16), dtype=np.int8)
        accm = rng.integers(-2**31, 2**31, (gm.ACC_ROWS, 16), dtype=np.int64).astype(np.int32)
        lib.accpy_gemmini_write_rows(0, 0, gm.SPAD_ROWS, spad.ctypes.data)
        lib.accpy_gemmini_write_rows(1, 0, gm.ACC_ROWS, accm.ctypes.data)
        self.ref.spad[:], self.ref.acc[:] = spad, accm

    def __call__(self, intr, **args):
        c_args = []
        for p in intr.params:
            v = args[p]
            c_args.append(None if v is None else v.ctypes.data if isinstance(v, np.ndarray) else v)
        getattr(self.lib, "t_" + intr.name.replace(".", "_"))(*c_args)
        err = self.lib.accpy_gemmini_error()
        assert err is None, err.decode()
        intr.reference(self.ref, **args)

    def check(self):
        spad = np.zeros((gm.SPAD_ROWS, 16), np.int8)
        accm = np.zeros((gm.ACC_ROWS, 16), np.int32)
        self.lib.accpy_gemmini_read_rows(0, 0, gm.SPAD_ROWS, spad.ctypes.data, None)
        self.lib.accpy_gemmini_read_rows(1, 0, gm.ACC_ROWS, accm.ctypes.data, None)
        np.testing.assert_array_equal(spad, self.ref.spad)
        np.testing.assert_array_equal(accm, self.ref.acc)


def test_every_intrinsic_has_a_template_and_a_reference():
    for intr in g.INTRINSICS:
        assert intr.reference is not None and intr.template and intr.header == g.HEADER
        for p in intr.params:
            assert "{" + p + "}" in intr.template


@pytest.mark.parametrize("seed", range(4))
def test_mvin_queues_block_stride_and_zeros(lib, seed):
    rng = np.random.default_rng(seed)
    m = Both(lib, rng)
    for q in range(3):
        rows, cols = int(rng.integers(1, 17)), int(rng.integers(1, 65))
        src = rng.integers(-128, 128, (rows, 80), dtype=np.int8)
        block_stride = int(rng.integers(16, 40))
        m(g.CONFIG_LD, stride=80, scale=1.0, shrunk=0, block_stride=block_stride, id=q)
        m(g.MVIN[q], dram=src, addr=int(rng.integers(0, 4000)), cols=cols, rows=rows)
    # accumulator: int32 rows, overwrite then accumulate; zeros from NULL (shrunk)
    src = rng.integers(-2**31, 2**31, (16, 16), dtype=np.int64).astype(np.int32)
    m(g.CONFIG_LD, stride=64, scale=1.0, shrunk=0, block_stride=16, id=0)
    m(g.MVIN[0], dram=src, addr=gm.acc_addr(100), cols=16, rows=16)
    m(g.MVIN[0], dram=src, addr=gm.acc_addr(100, accumulate=True), cols=12, rows=9)
    m(g.CONFIG_LD, stride=0, scale=1.0, shrunk=1, block_stride=20, id=0)
    m(g.MVIN[0], dram=None, addr=gm.acc_addr(300), cols=40, rows=7)
    # a broadcast row (DRAM stride 0)
    row = rng.integers(-1000, 1000, (16, 16), dtype=np.int32)
    m(g.CONFIG_LD, stride=0, scale=1.0, shrunk=0, block_stride=16, id=0)
    m(g.MVIN[0], dram=row, addr=gm.acc_addr(500), cols=16, rows=16)
    m.check()


def test_broadcast_reference_matches_stride_zero():
    # the reference reads rows r at r * stride: with stride 0 every row is row 0
    m = g.RefMachine()
    row = np.arange(16, dtype=np.int32).reshape(1, 16).repeat(16, 0)
    g.CONFIG_LD.reference(m, stride=0, scale=1.0, shrunk=0, block_stride=16, id=0)
    g.MVIN[0].reference(m, dram=row, addr=gm.acc_addr(0), cols=16, rows=4)
    assert (m.acc[:4] == np.arange(16)).all()


@pytest.mark.parametrize("seed", range(4))
def test_mvout_scaled_relu_raw(lib, seed):
    rng = np.random.default_rng(seed)
    m = Both(lib, rng)
    for act, scale, raw in ((gm.NO_ACTIVATION, 0.01, False), (gm.RELU, 0.5, False), (gm.NO_ACTIVATION, 1.0, True),
                            (gm.RELU, 3e-5, False)):
        rows, cols = int(rng.integers(1, 17)), int(rng.integers(1, 17))
        dt = np.int32 if raw else np.int8
        out_m = np.zeros((16, 16), dt)
        out_r = np.zeros((16, 16), dt)
        row = int(rng.integers(0, 1000))
        m(g.CONFIG_ST, stride=16 * out_m.itemsize, act=act, scale=scale)
        g.MVOUT.reference(m.ref, dram=out_r, addr=gm.acc_addr(row, full=raw), cols=cols, rows=rows)
        lib.t_gemmini_mvout(out_m.ctypes.data, gm.acc_addr(row, full=raw), cols, rows)
        np.testing.assert_array_equal(out_m, out_r)
    # rounding ties and saturation: values chosen to hit them
    m.ref.acc[0] = np.array([1, 3, 5, -1, -3, 255, 256, -257, 2**31 - 1, -2**31, 7, 9, 0, 2, 4, 6], np.int32)
    lib.accpy_gemmini_write_rows(1, 0, 1, m.ref.acc[0:1].ctypes.data)
    out_m, out_r = np.zeros((1, 16), np.int8), np.zeros((1, 16), np.int8)
    m(g.CONFIG_ST, stride=16, act=gm.NO_ACTIVATION, scale=0.5)
    g.MVOUT.reference(m.ref, dram=out_r, addr=gm.acc_addr(0), cols=16, rows=1)
    lib.t_gemmini_mvout(out_m.ctypes.data, gm.acc_addr(0), 16, 1)
    np.testing.assert_array_equal(out_m, out_r)


@pytest.mark.parametrize("seed", range(6))
def test_preload_compute_reuse(lib, seed):
    rng = np.random.default_rng(seed)
    m = Both(lib, rng)
    c_stride, a_stride = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    m(g.CONFIG_EX, c_stride=c_stride, a_stride=a_stride)
    tk, tj = int(rng.integers(1, 17)), int(rng.integers(1, 17))
    b = int(rng.integers(0, 2000))
    for n in range(4):
        ti = int(rng.integers(1, 17))
        c = gm.acc_addr(int(rng.integers(0, 900)), accumulate=bool(rng.integers(0, 2)))
        a = int(rng.integers(2000, 4000))
        if n == 0:
            m(g.PRELOAD, b=b, c=c, b_cols=tj, b_rows=tk, c_cols=tj, c_rows=ti)
            m(g.COMPUTE_PRELOADED, a=a, bd=gm.GARBAGE_ADDR, a_cols=tk, a_rows=ti, bd_cols=16, bd_rows=16)
        else:
            m(g.PRELOAD, b=gm.GARBAGE_ADDR, c=c, b_cols=tj, b_rows=tk, c_cols=tj, c_rows=ti)
            m(g.COMPUTE_ACCUMULATED, a=a, bd=gm.GARBAGE_ADDR, a_cols=tk, a_rows=ti, bd_cols=16, bd_rows=16)
    m(g.FENCE)
    m.check()


def test_tensor_intrinsic_reference():
    rng = np.random.default_rng(1)
    A = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    B = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    C = rng.integers(-1000, 1000, (16, 16), dtype=np.int32)
    np.testing.assert_array_equal(g.MATMUL.reference(A, B, C), C + A.astype(np.int32) @ B.astype(np.int32))
