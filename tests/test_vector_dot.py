"""Dot-product instructions from the vectorizer: accumulations over a group of adjacent narrow
elements (k = 4 uint8 x int8, or 2 bfloat16, an inner loop inside the vectorized one) become one
VPDPBUSD / VDPBF16PS per vector of lanes (accpy/lower/vectorize.py `_Product`). Checked end to
end against numpy (int8 exactly) over shapes with tails in every direction, including reductions
that are no multiple of the group (a partial group reads the missing elements as 0); where the
pattern does not hold (int8 x int8, B not in VNNI order) the loop is still right, without them."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi.kernels import mixed_matmul_nest  # noqa: E402

S = acc.ScalarType
HOST = acc.Target.HOST
HAS_VNNI = all(HOST.has(f) for f in ("avx512f", "avx512bw", "avx512_vnni"))
HAS_BF16 = all(HOST.has(f) for f in ("avx512f", "avx512bw", "avx512_bf16"))
needs_vnni = pytest.mark.skipif(not HAS_VNNI, reason="this CPU has no AVX-512 VNNI")
needs_bf16 = pytest.mark.skipif(not HAS_BF16, reason="this CPU has no AVX-512 BF16")
# code read without running it is emitted for named models, whatever this machine is
VNNI = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)  # AVX-512 VNNI, no BF16
BF16 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8480PLUS)  # AVX-512 VNNI and BF16
AVX2 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)


def _matmul(M, N, K, types, packed=True, kc=16, mr=3, nr=32, target=None):
    ta, tb, tc = types
    group = 4 if ta.bits == 8 else 2
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(M, N, K, ta, tb, tc)
    s = nest.create_schedule()
    jj = s.split(j, nr)
    kk = s.split(k, kc)
    ii = s.split(i, mr)
    jjj = s.split(jj, 16)
    kkk = s.split(kk, group)
    s.reorder(j, k, i, jj, kk, ii, jjj, kkk)
    p = s.create_plan(target)
    if packed:
        p.cache(B, index=jj, layout=acc.Array.Layout.VNNI)
    p.cache(C, index=kk)
    p.unroll(ii)
    p.vectorize(jjj)
    return p, (A, B, C)


def _build(tmp_path, plan, args, name):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    out = tmp_path / name
    lib = pkg.build(name, output_dir=str(out), python_module=False, progress=False)
    return lib.mm, (out / f"{name}.c").read_text()


def _calls(src: str, fn: str) -> bool:
    """Whether the kernel calls `fn` (beyond the runtime's definition of it)."""
    return src.count(fn + "(") > 1


def _int8_data(M, N, K, tb=np.int8, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    lo, hi = (-128, 128) if tb is np.int8 else (0, 256)
    b = rng.integers(lo, hi, (K, N)).astype(tb)
    return a, b


@needs_vnni
@pytest.mark.parametrize("M,N,K", [(8, 32, 16), (7, 61, 43), (5, 40, 42), (4, 17, 41), (3, 16, 4), (10, 50, 1)])
def test_vpdpbusd_matmul_exact(tmp_path, M, N, K):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no loop left to the C compiler: partial groups included
        fn, src = _build(tmp_path, *_matmul(M, N, K, (S.uint8, S.int8, S.int32)), f"dot4_{M}_{N}_{K}")
    assert _calls(src, "accpy_dpbusd")
    a, b = _int8_data(M, N, K)
    c = np.arange(M * N, dtype=np.int32).reshape(M, N)  # C += A @ B
    want = c + a.astype(np.int32) @ b.astype(np.int32)
    fn(a, b, c)
    np.testing.assert_array_equal(c, want)


@needs_vnni
def test_vpdpbusd_extremes_wrap_like_int32(tmp_path):
    """255 x -128 everywhere: the products and sums are the scalar ones, bit for bit."""
    M, N, K = 4, 16, 4096 + 3
    fn, src = _build(tmp_path, *_matmul(M, N, K, (S.uint8, S.int8, S.int32), kc=256), "dot4_ext")
    a = np.full((M, K), 255, np.uint8)
    b = np.full((K, N), -128, np.int8)
    c = np.zeros((M, N), np.int32)
    fn(a, b, c)
    np.testing.assert_array_equal(c, np.full((M, N), 255 * -128 * K, np.int32))


@needs_vnni
def test_dot_with_operands_swapped_and_both_moving(tmp_path):
    """`int32(B) * int32(A)` (int8 first) still maps A to the unsigned operand; and a row-wise
    dot product whose operands both move by 4 per lane (C[i] += A[i, k] * B[i, k], k < 4)."""
    M, K = 37, 4
    A = acc.Array(role=acc.Role.INPUT, element_type=S.uint8, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(M, K), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int32, shape=(M,), name="C")
    nest = acc.Nest(shape=(M, K))
    i, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += acc.cast(B[i, k], S.int32) * acc.cast(A[i, k], S.int32)

    s = nest.create_schedule()
    ii = s.split(i, 16)
    s.reorder(i, ii, k)
    p = s.create_plan()
    p.vectorize(ii)
    fn, src = _build(tmp_path, p, (A, B, C), "dot4_rows")
    assert _calls(src, "accpy_dpbusd")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (M, K)).astype(np.int8)
    c = np.zeros(M, np.int32)
    fn(a, b, c)
    np.testing.assert_array_equal(c, (a.astype(np.int32) * b.astype(np.int32)).sum(axis=1))


@pytest.mark.parametrize("case", ["int8 x int8", "B row-major"])
def test_no_dot_where_the_pattern_does_not_hold(tmp_path, case):
    """No VPDPBUSD for signed x signed bytes, or for B whose quads are not contiguous: contiguous
    bytes are widened to int32 lanes instead (one multiply-add per k), others left to the C
    compiler (a warning says so); the result is exact either way."""
    import warnings

    M, N, K = 6, 20, 12
    tb = S.int8
    types = (S.int8, tb, S.int32) if case == "int8 x int8" else (S.uint8, tb, S.int32)
    # the code for a model with VPDPBUSD (the instruction is there, the pattern is not)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        src = _matmul(M, N, K, types, packed=case != "B row-major", target=VNNI)[0].emit_c()
    assert "accpy_dpbusd(" not in src
    if case == "B row-major":  # contiguous bytes: widened lanes
        assert "_mm512_cvtepi8_epi32(" in src and not seen
    else:  # B's bytes 4 apart in VNNI order: no byte gathers, the C compiler's vectorizer
        assert any("C compiler" in str(w.message) for w in seen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (without AVX-512, the loop is the C compiler's: a warning)
        fn, src = _build(tmp_path, *_matmul(M, N, K, types, packed=case != "B row-major"), "nodot")
    assert not _calls(src, "accpy_dpbusd")
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8) if case == "int8 x int8" else \
        rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = np.zeros((M, N), np.int32)
    fn(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


@needs_bf16
@pytest.mark.parametrize("M,N,K", [(6, 32, 16), (7, 45, 33), (2, 16, 1)])
def test_vdpbf16ps_matmul(tmp_path, M, N, K):
    fn, src = _build(tmp_path, *_matmul(M, N, K, (S.bfloat16, S.bfloat16, S.float32)), f"dot2_{M}_{N}_{K}")
    assert _calls(src, "accpy_dpbf16ps")
    rng = np.random.default_rng(3)
    a = acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32))
    b = acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32))
    c = np.ones((M, N), np.float32)
    fn(a, b, c)
    want = 1 + acc.bfloat16_values(a).astype(np.float64) @ acc.bfloat16_values(b).astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * np.sqrt(K))


@needs_bf16
def test_vdpbf16ps_partial_pair_ignores_what_follows(tmp_path):
    """K odd: the last pair reads only its first bfloat16 of A; the element after it (here a NaN
    past the end of the row, in the next row) must not reach the sum."""
    M, N, K = 2, 16, 3
    fn, _ = _build(tmp_path, *_matmul(M, N, K, (S.bfloat16, S.bfloat16, S.float32)), "dot2_nan")
    a = acc.bfloat16_bits(np.array([[1, 2, 3], [np.nan, 5, 6]], np.float32))
    b = acc.bfloat16_bits(np.ones((K, N), np.float32))
    c = np.zeros((M, N), np.float32)
    fn(a, b, c)
    assert np.all(c[0] == 6) and np.all(np.isnan(c[1]))


@pytest.mark.slow
@pytest.mark.parametrize("types, instruction, model", [
    ((S.uint8, S.int8, S.int32), "accpy_dpbusd", VNNI), ((S.bfloat16, S.bfloat16, S.float32), "accpy_dpbf16ps", BF16)])
def test_the_dot_instructions_are_emitted_for_a_model_that_has_them(types, instruction, model):
    """What the tests above run where this CPU has the instructions, checked in the code for a named
    model on every machine: the dot product on 16-lane vectors; none for a model without them
    (AVX2) or without that one (no BF16 on the 8380)."""
    import warnings

    src = _matmul(7, 61, 43, types, target=model)[0].emit_c()
    assert instruction + "(" in src and "__m512" in src
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loops left to the C compiler say so
        assert instruction + "(" not in _matmul(7, 61, 43, types, target=AVX2)[0].emit_c()
    if instruction == "accpy_dpbf16ps":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert instruction + "(" not in _matmul(7, 61, 43, types, target=VNNI)[0].emit_c()
