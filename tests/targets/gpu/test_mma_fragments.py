"""Tensor-core fragments (accpy/targets/gpu/mma.py, native/gpu/accpy_mma.cl.h, accpy_mma.cuh): the
m16n8k16 ownership maps own every element once and agree with the PTX formulas re-derived here;
the numpy warp model matches numpy's matmul; the OpenCL emulation computes 32x32x32 matmuls on
PoCL (2 emulated warps per work-group) for f16, bf16 (within tolerance of numpy, bit-exact with
the model) and s8, u8 (bit-exact, wrapping), from global and from local memory, with Accera's
fragment operations; loading A with a transposed map gives the transposed answer, not the right
one; the CUDA header's kernels compile with nvcc for sm_80 and sm_90 into mma.sync instructions.

OpenCL tests need an OpenCL device (PoCL) and pyopencl to run kernels, CUDA tests need nvcc
(conftest.py's needs_opencl / needs_nvcc); they skip without them unless ACCPY_REQUIRE_OPENCL=1 /
ACCPY_REQUIRE_NVCC=1, then they fail.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from accpy.targets.gpu import mma, tools

NATIVE = Path(__file__).resolve().parents[3] / "native" / "gpu"
DTYPES = ("f16", "bf16", "s8", "u8")
STORAGE = {"f16": np.float16, "bf16": np.uint16, "s8": np.int8, "u8": np.uint8}
CTYPES = {"f16": ("half", "float"), "bf16": ("ushort", "float"), "s8": ("char", "int"), "u8": ("uchar", "int")}


# -- the maps ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("role", ("A", "B", "C"))
def test_every_element_of_a_tile_is_owned_once(role, dtype):
    table = mma.owner(role, dtype)
    rows, cols = mma.TILE[role]
    assert table.shape == (32, rows * cols // 32, 2)
    pairs = {tuple(rc) for rc in table.reshape(-1, 2)}
    assert pairs == {(r, c) for r in range(rows) for c in range(cols)}
    inverse = mma.holder(role, dtype)
    for lane, slot in [(0, 0), (13, 2), (31, table.shape[1] - 1)]:
        r, c = table[lane, slot]
        assert tuple(inverse[r, c]) == (lane, slot)


def _expected(role: str, bits: int, lane: int) -> list:
    """The PTX ISA's table for one lane, written out per slot (groupID g, threadID_in_group t)."""
    g, t = lane // 4, lane % 4
    if role == "C":
        return [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
    if bits == 16 and role == "A":
        return [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1),
                (g, 2 * t + 8), (g, 2 * t + 9), (g + 8, 2 * t + 8), (g + 8, 2 * t + 9)]
    if bits == 16:
        return [(2 * t, g), (2 * t + 1, g), (2 * t + 8, g), (2 * t + 9, g)]
    if role == "A":
        return [(g, 4 * t + j) for j in range(4)] + [(g + 8, 4 * t + j) for j in range(4)]
    return [(4 * t + j, g) for j in range(4)]


@pytest.mark.parametrize("lane", (0, 5, 18, 31))
@pytest.mark.parametrize("dtype", DTYPES)
def test_maps_follow_the_ptx_formulas(dtype, lane):
    bits = 16 if dtype in ("f16", "bf16") else 8
    for role in ("A", "B", "C"):
        assert [tuple(rc) for rc in mma.owner(role, dtype)[lane]] == _expected(role, bits, lane)
    assert mma.owner("D", dtype) is mma.owner("C", dtype)


def test_maps_spelled_examples():
    assert [tuple(x) for x in mma.owner("A", "f16")[5]][:4] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    assert [tuple(x) for x in mma.owner("B", "int8")[31]] == [(12, 7), (13, 7), (14, 7), (15, 7)]
    assert mma.slots("A") == 8 and mma.slots("B") == 4 and mma.slots("D") == 4
    assert mma.element_type("bfloat16").instruction == "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    assert mma.element_type("u8").instruction == "mma.sync.aligned.m16n8k16.row.col.s32.u8.u8.s32"


def test_tables_are_read_only():
    with pytest.raises(ValueError):
        mma.owner("A", "f16")[0, 0, 0] = 3


def test_errors_name_the_argument():
    with pytest.raises(mma.FragmentError, match="role: expected one of 'A', 'B', 'C'"):
        mma.owner("E", "f16")
    with pytest.raises(mma.FragmentError, match=r"dtype: expected one of .*float32"):
        mma.owner("A", "float32")
    with pytest.raises(mma.FragmentError, match="shape: expected one of"):
        mma.steps("M64xN64xK1_B4")
    with pytest.raises(mma.FragmentError, match="passes: expected an int >= 1"):
        mma.steps("M16xN16xK16_B1", passes=0)
    with pytest.raises(mma.FragmentError, match="a: expected a 16x16 tile"):
        mma.emulate_step(np.zeros((8, 16)), np.zeros((16, 8)), np.zeros((16, 8)), "f16")
    with pytest.raises(mma.FragmentError, match=r"a: expected integers in \[-128, 127\] for s8"):
        mma.emulate_step(np.full((16, 16), 200), np.zeros((16, 8), int), np.zeros((16, 8), int), "s8")


# -- Accera's shapes as steps ---------------------------------------------------------------------
def test_steps_compose_accera_shapes():
    S = mma.Step
    assert mma.steps("M16xN16xK16_B1") == (S(0, 0, 0, 16), S(0, 8, 0, 16))
    assert mma.steps((32, 8, 16)) == (S(0, 0, 0, 16), S(16, 0, 0, 16))
    assert mma.steps("M8xN32xK16_B1") == tuple(S(0, n, 0, 8) for n in (0, 8, 16, 24))
    assert mma.steps("M16xN16xK16_B1", passes=2)[2:] == (S(0, 0, 16, 16), S(0, 8, 16, 16))


# -- the numpy model ------------------------------------------------------------------------------------
def _operands(dtype: str, m: int, n: int, k: int, seed: int):
    """A (m x k), B (k x n), C (m x n) as the values type `dtype` holds (C as its accumulator)."""
    rng = np.random.default_rng(seed)
    if dtype in ("s8", "u8"):
        lo, hi = (-128, 128) if dtype == "s8" else (0, 256)
        return (rng.integers(lo, hi, (m, k)), rng.integers(lo, hi, (k, n)),
                rng.integers(-1000, 1000, (m, n)).astype(np.int32))
    quant = mma.bf16_round if dtype == "bf16" else (lambda x: x.astype(np.float16).astype(np.float32))
    return (quant(rng.standard_normal((m, k)).astype(np.float32)), quant(rng.standard_normal((k, n)).astype(np.float32)),
            rng.standard_normal((m, n)).astype(np.float32))


def _reference(a, b, c, dtype):
    if dtype in ("s8", "u8"):
        return (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int32)  # int32 wraps
    return a.astype(np.float64) @ b.astype(np.float64) + c


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulate_step_matches_numpy(dtype):
    a, b, c = _operands(dtype, 16, 8, 16, seed=3)
    d = mma.emulate_step(a, b, c, dtype)
    if dtype in ("s8", "u8"):
        assert d.dtype == np.int32 and (d == _reference(a, b, c, dtype)).all()
    else:
        assert d.dtype == np.float32
        np.testing.assert_allclose(d, _reference(a, b, c, dtype), rtol=1e-5, atol=1e-5)


def test_emulate_step_wraps_int32_like_the_hardware():
    a = np.full((16, 16), 127)
    b = np.full((16, 8), 127)
    c = np.full((16, 8), 2**31 - 1000, dtype=np.int32)
    d = mma.emulate_step(a, b, c, "s8")
    assert (d == np.int32(-(2**31) - 1000 + 16 * 127 * 127)).all()


@pytest.mark.parametrize("shape", sorted(mma.SHAPES))
@pytest.mark.parametrize("dtype", ("f16", "s8"))
def test_emulate_shape_matches_numpy(shape, dtype):
    m, n, k = mma.SHAPES[shape]
    a, b, c = _operands(dtype, m, n, 2 * k, seed=5)
    d = mma.emulate_shape(shape, a, b, c, dtype, passes=2)
    np.testing.assert_allclose(d, _reference(a, b, c, dtype), rtol=1e-5, atol=1e-5)


def test_bf16_rounds_to_nearest_even():
    x = np.float32([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 1 + 2**-7 + 2**-9])
    assert mma.bf16_round(x).tolist() == [1.0, 1.0, 1 + 2**-6, -2.5, 1 + 2**-7]
    assert mma.bf16_bits(np.float32([1.0, -2.0])).tolist() == [0x3F80, 0xC000]


# -- OpenCL: the emulated warp on PoCL ---------------------------------------------------------------
_CL = {}


@pytest.fixture
def cl_queue(needs_opencl):
    """(pyopencl, context, queue) on the first OpenCL device (PoCL's CPU device here), made once.
    pyopencl runs the kernels (a test-only tool): missing, the test skips, or fails where
    ACCPY_REQUIRE_OPENCL=1."""
    try:
        import pyopencl as cl
    except ImportError:
        if os.environ.get("ACCPY_REQUIRE_OPENCL") == "1":
            pytest.fail("ACCPY_REQUIRE_OPENCL=1 but pyopencl is not installed (pip install pyopencl)")
        pytest.skip("pyopencl is not installed (pip install pyopencl)")
    if not _CL:
        ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
        _CL["queue"] = (cl, ctx, cl.CommandQueue(ctx))
    return _CL["queue"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_opencl_header_builds_without_fp16(needs_opencl, dtype):
    """The header and a kernel using it build as OpenCL C 1.2 on a device without cl_khr_fp16."""
    tools.compile_opencl(_source(dtype), options="-cl-std=CL1.2")
    tools.compile_opencl(_source(dtype), options="-cl-std=CL1.2 -DFROM_LOCAL")


KERNEL = r"""
#define COPY(dst, di, src, si) {copy}
__kernel void mm(__global const {st}* A, __global const {st}* B, __global {acc}* C, {acc} arg) {{
    __local accpy_mma_scratch_{t} scratch[2];
    uint lane = accpy_mma_lane(), warp = accpy_mma_warp(), lid = accpy_mma_linear_id();
    int m0 = 16 * (int)get_group_id(0);
#ifdef FROM_LOCAL
    __local {raw} la_raw[16 * 32], lb_raw[32 * 32];  /* no __local half arrays without cl_khr_fp16 */
    __local {st}* la = (__local {st}*)la_raw;
    __local {st}* lb = (__local {st}*)lb_raw;
    __local {acc} lc[16 * 32];
    for (uint e = lid; e < 16 * 32; e += 64) {{ COPY(la, e, A, m0 * 32 + e); lc[e] = C[m0 * 32 + e]; }}
    for (uint e = lid; e < 32 * 32; e += 64) COPY(lb, e, B, e);
    barrier(CLK_LOCAL_MEM_FENCE);
    #define AS local
    #define TA (la + k0)
    #define TC (lc + n0)
#else
    #define AS global
    #define lb B
    #define TA (A + m0 * 32 + k0)
    #define TC (C + m0 * 32 + n0)
#endif
    for (int h = 0; h < 2; ++h) {{
        int n0 = 16 * (int)warp + 8 * h;
        accpy_mma_c_{t} acc;
        {prologue};
        for (int k0 = 0; k0 < 32; k0 += 16) {{
            accpy_mma_a_{t} a;
            accpy_mma_b_{t} b;
#ifdef WRONG_A
            for (uint i = 0; i < 8; ++i) {{ /* the A tile read transposed: (row, col) <- (col, row) */
                int2 rc = accpy_mma_coord_a{bits}(lane, i);
                a.x[i] = ACCPY_MMA_READ_{t}(TA, rc.y * 32 + rc.x);
            }}
#else
            MMA_FN(load_a)(&a, TA, 32, lane);
#endif
            MMA_FN(load_b)(&b, lb + k0 * 32 + n0, 32, lane);
            accpy_mma_sync_{t}(&acc, &a, &b, &acc, scratch, warp, lane);
        }}
        {epilogue};
        MMA_FN(store_c)(&acc, TC, 32, lane);
    }}
#ifdef FROM_LOCAL
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint e = lid; e < 16 * 32; e += 64) C[m0 * 32 + e] = lc[e];
#endif
}}
"""


def _source(t: str, prologue: str = "", epilogue: str = "") -> str:
    st, acc = CTYPES[t]
    copy = "vstore_half(vload_half((si), (src)), (di), (dst))" if t == "f16" else "(dst)[di] = (src)[si]"
    header = (NATIVE / "accpy_mma.cl.h").read_text()
    paste = ("#define MMA_Y(op, t, as) accpy_mma_##op##_##t##_##as\n"  # MMA_X expands AS first
             f"#define MMA_X(op, t, as) MMA_Y(op, t, as)\n#define MMA_FN(op) MMA_X(op, {t}, AS)\n")
    return header + paste + KERNEL.format(
        t=t, st=st, raw="ushort" if t == "f16" else st, acc=acc, copy=copy, bits=16 if t in ("f16", "bf16") else 8,
        prologue=prologue or "MMA_FN(load_c)(&acc, TC, 32, lane)", epilogue=epilogue or "(void)arg")


def _run(cl_queue, t: str, a, b, c, arg=0, options: str = "", **source) -> np.ndarray:
    """C after the kernel (2 work-groups of 64 work-items over a 32x32x32 matmul, C += A @ B)."""
    cl, ctx, queue = cl_queue
    store = (lambda x: mma.bf16_bits(x)) if t == "bf16" else (lambda x: np.ascontiguousarray(x, STORAGE[t]))
    acc = np.int32 if t in ("s8", "u8") else np.float32
    prog = cl.Program(ctx, _source(t, **source)).build(options=options)
    flags = cl.mem_flags
    bufs = [cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=store(x)) for x in (a, b)]
    out = np.array(c, dtype=acc)  # a copy: the caller's c stays the input
    cbuf = cl.Buffer(ctx, flags.READ_WRITE | flags.COPY_HOST_PTR, hostbuf=out)
    prog.mm(queue, (128,), (64,), *bufs, cbuf, acc(arg))
    cl.enqueue_copy(queue, out, cbuf)
    queue.finish()
    return out


def _model(a, b, c, t: str) -> np.ndarray:
    """The same matmul through the numpy warp model, 16x16 block by block (M16xN16xK16_B1, 2 passes)."""
    d = np.array(c)
    for m0 in (0, 16):
        for n0 in (0, 16):
            d[m0:m0 + 16, n0:n0 + 16] = mma.emulate_shape("M16xN16xK16_B1", a[m0:m0 + 16], b[:, n0:n0 + 16],
                                                          c[m0:m0 + 16, n0:n0 + 16], t, passes=2)
    return d


COORDS = {"a16": ("A", "f16"), "b16": ("B", "f16"), "a8": ("A", "s8"), "b8": ("B", "s8"), "c": ("C", "f16")}


def test_opencl_maps_are_mma_py_maps(cl_queue):
    """Each emulated lane's (row, col) of every slot, read back from the device, is mma.py's table
    (a map that is wrong but used consistently would still multiply correctly)."""
    cl, ctx, queue = cl_queue
    body = "".join(f"for (uint i = 0; i < {mma.slots(role)}; ++i) {{ int2 rc = accpy_mma_coord_{name}(lane, i); "
                   f"out[o + 2 * (lane * {mma.slots(role)} + i)] = rc.x; "
                   f"out[o + 2 * (lane * {mma.slots(role)} + i) + 1] = rc.y; }} o += {64 * mma.slots(role)};\n"
                   for name, (role, _) in COORDS.items())
    source = (NATIVE / "accpy_mma.cl.h").read_text() + (
        "__kernel void coords(__global int* out) { uint lane = accpy_mma_lane(); int o = 0;\n" + body + "}")
    out = np.zeros(sum(64 * mma.slots(role) for role, _ in COORDS.values()), dtype=np.int32)
    buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
    cl.Program(ctx, source).build().coords(queue, (32,), (32,), buf)
    cl.enqueue_copy(queue, out, buf)
    queue.finish()
    o = 0
    for name, (role, dtype) in COORDS.items():
        n = 64 * mma.slots(role)
        assert (out[o:o + n].reshape(32, -1, 2) == mma.owner(role, dtype)).all(), name
        o += n


def test_opencl_scratch_sizes_are_the_macros(cl_queue):
    cl, ctx, queue = cl_queue
    body = "".join(f"out[{2 * i}] = sizeof(accpy_mma_scratch_{t}); out[{2 * i + 1}] = ACCPY_MMA_SCRATCH_BYTES_{t.upper()};"
                   for i, t in enumerate(DTYPES))
    source = (NATIVE / "accpy_mma.cl.h").read_text() + f"__kernel void sizes(__global int* out) {{ {body} }}"
    out = np.zeros(2 * len(DTYPES), dtype=np.int32)
    buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, out.nbytes)
    cl.Program(ctx, source).build().sizes(queue, (1,), (1,), buf)
    cl.enqueue_copy(queue, out, buf)
    queue.finish()
    assert out.tolist() == [1536, 1536, 1536, 1536, 384, 384, 384, 384]


def _coord_bodies(path: Path) -> dict:
    """name -> the statements of each accpy_mma_coord_* function, with the dialects' spellings of
    unsigned and of an int2 constructor made alike."""
    text = path.read_text().replace("unsigned", "uint").replace("make_int2(", "(int2)(")
    found = re.findall(r"accpy_mma_coord_(\w+)\(uint lane, uint i\) \{(.*?)\n\}", text, flags=re.S)
    return {name: " ".join(body.split()) for name, body in found}


def test_cuda_and_opencl_headers_share_the_maps():
    cuda, opencl = _coord_bodies(NATIVE / "accpy_mma.cuh"), _coord_bodies(NATIVE / "accpy_mma.cl.h")
    assert sorted(cuda) == sorted(COORDS) and cuda == opencl


@pytest.mark.parametrize("memory", ("global", "local"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_opencl_emulated_mma_matmul(cl_queue, dtype, memory):
    a, b, c = _operands(dtype, 32, 32, 32, seed=11)
    if dtype in ("s8", "u8"):
        c[::5, ::3] = 2**31 - 7  # these sums wrap
    out = _run(cl_queue, dtype, a, b, c, options="-DFROM_LOCAL" if memory == "local" else "")
    if dtype in ("s8", "u8"):
        assert (out == _reference(a, b, c, dtype)).all()
    else:
        np.testing.assert_allclose(out, _reference(a, b, c, dtype), rtol=1e-5, atol=1e-5)
    assert (out == _model(a, b, c, dtype)).all()  # same order of sums: bit-exact with the model


def test_opencl_wrong_a_layout_gives_the_transposed_answer(cl_queue):
    a, b, c = _operands("f16", 32, 32, 32, seed=13)
    out = _run(cl_queue, "f16", a, b, c, options="-DWRONG_A")
    right = _reference(a, b, c, "f16")
    assert np.abs(out - right).max() > 1.0
    swapped = a.copy()
    for m0 in (0, 16):
        for k0 in (0, 16):
            swapped[m0:m0 + 16, k0:k0 + 16] = a[m0:m0 + 16, k0:k0 + 16].T
    np.testing.assert_allclose(out, _reference(swapped, b, c, "f16"), rtol=1e-5, atol=1e-5)


FRAGMENT_OPS = {  # name: (prologue, epilogue, arg, numpy of (A @ B, C, arg))
    "set_then_scale": ("accpy_mma_set_c_{t}(&acc, arg)", "accpy_mma_scale_c_{t}(&acc, arg)", 3,
                       lambda p, c, x: (p + x) * x),
    "clear_then_relu": ("accpy_mma_clear_c_{t}(&acc)", "accpy_mma_relu_c_{t}(&acc)", 0,
                        lambda p, c, x: np.maximum(p, 0)),
    "fill_then_relu_nc": ("accpy_mma_fill_c_{t}(&acc, arg)", "accpy_mma_relu_nc_c_{t}(&acc)", -2,
                          lambda p, c, x: np.maximum(p + x, 0)),
    "load_then_relu": ("", "accpy_mma_relu_c_{t}(&acc)", 0, lambda p, c, x: np.maximum(p + c, 0)),
}


@pytest.mark.parametrize("dtype", ("f16", "s8"))
@pytest.mark.parametrize("op", sorted(FRAGMENT_OPS))
def test_opencl_fragment_ops(cl_queue, op, dtype):
    prologue, epilogue, arg, expect = FRAGMENT_OPS[op]
    a, b, c = _operands(dtype, 32, 32, 32, seed=17)
    out = _run(cl_queue, dtype, a, b, c, arg=arg, prologue=prologue.format(t=dtype),
               epilogue=epilogue.format(t=dtype))
    zero = np.zeros_like(c)
    product = _reference(a, b, zero, dtype)
    np.testing.assert_allclose(out, expect(product, c, arg), rtol=1e-5, atol=1e-4)


# -- CUDA: the header compiles into mma.sync for sm_80 and sm_90 ---------------------------------------
CUDA_KERNEL = r"""
extern "C" __global__ void mm_{t}(const {st}* A, const {st}* B, {acc}* C, {acc} arg) {{
    unsigned lane = accpy_mma_lane(), warp = accpy_mma_warp();
    int m0 = 16 * (int)blockIdx.x;
    __shared__ {st} sb[32 * 32];
    for (int e = (int)accpy_mma_linear_id(); e < 32 * 32; e += 64) sb[e] = B[e];
    __syncthreads();
    for (int h = 0; h < 2; ++h) {{
        int n0 = 16 * (int)warp + 8 * h;
        accpy_mma_c_{t} acc;
        accpy_mma_load_c_{t}_global(&acc, C + m0 * 32 + n0, 32, lane);
        for (int k0 = 0; k0 < 32; k0 += 16) {{
            accpy_mma_a_{t} a;
            accpy_mma_b_{t} b;
            accpy_mma_load_a_{t}_global(&a, A + m0 * 32 + k0, 32, lane);
            accpy_mma_load_b_{t}_local(&b, sb + k0 * 32 + n0, 32, lane);
            accpy_mma_sync_{t}(&acc, &a, &b, &acc, 0, warp, lane);
        }}
        accpy_mma_scale_c_{t}(&acc, arg);
        accpy_mma_relu_c_{t}(&acc);
        accpy_mma_store_c_{t}_global(&acc, C + m0 * 32 + n0, 32, lane);
    }}
}}
"""
CUDA_TYPES = {"f16": ("accpy_f16_t", "float"), "bf16": ("accpy_bf16_t", "float"),
              "s8": ("signed char", "int"), "u8": ("unsigned char", "int")}


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
def test_cuda_header_compiles_to_mma_sync(needs_nvcc, arch):
    source = (NATIVE / "accpy_mma.cuh").read_text() + "".join(
        CUDA_KERNEL.format(t=t, st=st, acc=acc) for t, (st, acc) in CUDA_TYPES.items())
    build = tools.compile_cuda(source, arch=arch, mode="ptx", tools=needs_nvcc)
    for t in DTYPES:
        assert build.output.count(mma.element_type(t).instruction) == 2, t  # one per k step, unrolled
        kernel = build.kernel(f"mm_{t}")
        assert kernel.stack_bytes == 0 and kernel.spill_bytes == 0, t  # fragments stay in registers
    assert "ldmatrix" not in build.output and "warning" not in build.messages
