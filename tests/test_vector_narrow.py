"""Vector loops over several element types: int32 and float32 lanes side by side, and narrow
integers (int8, uint8, int16, uint16) held widened in 32-bit lanes (loads sign- or zero-extend,
stores narrow). The quantizing epilogue of an int8 kernel -- int32 sums to float32, scaled, rounded
half to even, saturated to int8 (NaN -> 0), ReLU -- is one such loop. Every case is checked
against the scalar semantics (the reference evaluator or numpy), edge values included."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import accpy as acc
from accpy.testing import assert_matches_reference

S = acc.ScalarType
# the widened lanes are AVX-512 shapes: the code is read for a named AVX-512 model on every machine;
# the results are checked on this machine's own plan (without AVX-512, the C compiler's loop)
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)
AVX2 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)


def _plan(n, logic, arrays, split=None, target=None):
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()
    nest.iteration_logic(lambda: logic(i))
    s = nest.create_schedule()
    p = s.create_plan(target)
    p.vectorize(i)
    return p


def _vectorized(plan, args) -> str:
    """The kernel's C, built with no fallback to the C compiler's vectorizer."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return plan.emit_c()


def _matches_reference(plan, args, **kw):
    """`assert_matches_reference` of a plan for this machine (a loop it cannot vectorize is left
    to the C compiler, with a warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert_matches_reference(plan, args, **kw)


EDGES = np.array([0, 1, -1, 127, 128, -128, -129, 255, 256, 2 ** 31 - 1, -2 ** 31, 32767, -32768, 65535],
                 np.int64)


@pytest.mark.parametrize("dst", [S.int8, S.uint8, S.int16, S.uint16])
@pytest.mark.parametrize("n", [16, 37])
def test_int32_to_narrow_wraps_like_the_scalar_cast(dst, n):
    A = acc.Array(role=acc.Role.INPUT, element_type=S.int32, shape=(n,), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dst, shape=(n,), name="O")

    def logic(i):
        O[i] = acc.cast(A[i], dst)

    code = _vectorized(_plan(n, logic, (A, O), target=AVX512), (A, O))
    assert "_mm512_cvtepi32_epi" in code
    p = _plan(n, logic, (A, O))
    rng = np.random.default_rng(0)
    a = rng.integers(-2 ** 31, 2 ** 31 - 1, n).astype(np.int32)
    m = min(n, len(EDGES))
    a[:m] = EDGES[:m].astype(np.int32)
    _matches_reference(p, (A, O), data=[a, np.zeros(n, dst.dtype)])


@pytest.mark.parametrize("dst", [S.int8, S.uint8, S.int16, S.int32])
def test_float_to_int_saturates_and_maps_nan_to_zero(dst):
    n = 40
    A = acc.Array(role=acc.Role.INPUT, element_type=S.float32, shape=(n,), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dst, shape=(n,), name="O")

    def logic(i):
        O[i] = acc.cast(acc.round(A[i]), dst)

    code = _vectorized(_plan(n, logic, (A, O), target=AVX512), (A, O))
    assert "_mm512_cvttps_epi32(" in code and "_mm512_roundscale_ps(" in code
    if dst is S.int32:  # AVX2 has both too (its narrow types are left to the C compiler)
        code = _vectorized(_plan(n, logic, (A, O), target=AVX2), (A, O))
        assert "_mm256_cvttps_epi32(" in code and "_mm256_round_ps(" in code
    p = _plan(n, logic, (A, O))
    vals = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 127.4, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0, 3e9, -3e9,
                     2147483520.0, np.nan, np.inf, -np.inf, 65535.4, -32768.6], np.float32)
    a = np.resize(vals, n).astype(np.float32)
    _matches_reference(p, (A, O), data=[a, np.zeros(n, dst.dtype)])


def test_widened_loads_and_mixed_lanes():
    """uint8 and int16 loads widened, int32 and float32 lanes mixed in one float32 loop."""
    n = 53
    U = acc.Array(role=acc.Role.INPUT, element_type=S.uint8, shape=(n,), name="U")
    H = acc.Array(role=acc.Role.INPUT, element_type=S.int16, shape=(n,), name="H")
    I = acc.Array(role=acc.Role.INPUT, element_type=S.int32, shape=(n,), name="I")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.float32, shape=(n,), name="O")

    def logic(i):
        O[i] = acc.cast(U[i], S.float32) * 0.5 + acc.cast(H[i], S.float32) + acc.cast(I[i], S.float32)

    args = (U, H, I, O)
    code = _vectorized(_plan(n, logic, args, target=AVX512), args)
    assert "_mm512_cvtepu8_epi32(" in code and "_mm512_cvtepi16_epi32(" in code
    _matches_reference(_plan(n, logic, args), args)


def test_narrow_min_max_select_in_widened_lanes():
    """int8 max and min, a select, between int8 values held in 32-bit lanes; uint16 to int8."""
    n = 45
    H = acc.Array(role=acc.Role.INPUT, element_type=S.uint16, shape=(n,), name="H")
    B = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(n,), name="B")
    O8 = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(n,), name="O8")

    def logic(i):
        x = acc.max(acc.cast(H[i], S.int8), acc.cast(-3, S.int8))
        O8[i] = acc.select(B[i] > acc.cast(0, S.int8), acc.min(x, B[i]), x)

    args = (H, B, O8)
    code = _vectorized(_plan(n, logic, args, target=AVX512), args)
    assert "_mm512_cvtepu16_epi32(" in code and "_mm512_max_epi32(" in code
    _matches_reference(_plan(n, logic, args), args)


@pytest.mark.parametrize("shape", [(5, 64), (3, 45)])
def test_the_quantizing_epilogue_is_vectorized_and_exact(shape):
    """samples/int8_matmul.py's epilogue: relu(int8(round(float32(Acc) * scale + bias)))."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import quantize_plan

    M, N = shape
    plan, args = quantize_plan(M, N, relu=True, target=AVX512)
    code = _vectorized(plan, args)
    assert "_mm512_mask_cvtepi32_storeu_epi8(" in code or "_mm512_cvtepi32_epi8(" in code
    plan, args = quantize_plan(M, N, relu=True)  # for this machine
    rng = np.random.default_rng(3)
    acc32 = rng.integers(-2 ** 31, 2 ** 31 - 1, (M, N)).astype(np.int32)
    acc32.flat[:5] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31]
    bias = (rng.standard_normal(N) * 50).astype(np.float32)
    bias[:3] = [np.nan, np.inf, -np.inf]
    _matches_reference(plan, args, data=[acc32, bias, np.zeros((M, N), np.int8), np.float32(3e-8)])


def test_int8_sums_are_byte_lanes():
    """int8 + int8 wraps at 8 bits: a loop of int8 values only runs in byte lanes (VPADDB; more in
    tests/targets/test_narrow_int_vectors.py), not widened, and is still right."""
    n = 20
    A = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(n,), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(n,), name="O")

    def logic(i):
        O[i] = A[i] + A[i]

    assert "_mm512_add_epi8" in _vectorized(_plan(n, logic, (A, O), target=AVX512), (A, O))
    _matches_reference(_plan(n, logic, (A, O)), (A, O))
