"""x86 vector intrinsics (AVX-512, AVX2; SSE4.1 in x86sse.py) as a library: C templates per operation.

Each `X86Shape` (a `VectorShape`) describes one register shape (e.g. 16 x float32 in a zmm register):
its C type, and a C template for every vector operation the IR has. Templates use
`{a}`, `{b}`, `{c}` (operands), `{p}` (address), `{m}` (lane mask), `{n}` (lane count).
The meaning of each operation is the IR's (see accpy/ir/vector.py); tests run every
template against numpy on random data (tests/test_x86_intrinsics.py). The `extra`
templates (strided accesses `{s}` elements apart, the int16 pair multiply-add) are
checked end to end, through kernels that use them (tests/test_vectorize_subtree.py,
tests/targets/test_sse_vectors.py). Operations an ISA has no instruction for (AVX2's scatters)
handle one lane at a time (x86lanes.py).
"""
from __future__ import annotations

from typing import Optional

from ..ir.types import ScalarType
from .library import TargetLibrary
from .vector_isa import DotProduct, VectorISA, VectorShape
from .x86_math import add_math
from .x86_toolchain import x86_toolchain
from .x86lanes import Lanes

F32, F64, I32, I64 = ScalarType.float32, ScalarType.float64, ScalarType.int32, ScalarType.int64


class X86Shape(VectorShape):
    """An x86 register shape (targets/vector_isa.py `VectorShape`): masks of AVX-512 are bit masks, so a
    dot product's partial groups are loaded with a constant lane pattern."""

    def group_mask(self, lanes: int, group: int, part: int, count_mask: Optional[str]) -> Optional[str]:
        slot = (1 << part) - 1
        pattern = 0
        for g in range(lanes // group):
            pattern |= slot << (g * group)
        m = f"0x{pattern:x}ull"
        return m if count_mask is None else f"({m} & {count_mask})"


_CMP_PS = {"lt": "_CMP_LT_OQ", "le": "_CMP_LE_OQ", "gt": "_CMP_GT_OQ", "ge": "_CMP_GE_OQ",
           "eq": "_CMP_EQ_OQ", "ne": "_CMP_NEQ_UQ"}
_CMP_INT = {"lt": "_MM_CMPINT_LT", "le": "_MM_CMPINT_LE", "gt": "_MM_CMPINT_NLE", "ge": "_MM_CMPINT_NLT",
            "eq": "_MM_CMPINT_EQ", "ne": "_MM_CMPINT_NE"}


def _avx512_float(dtype, lanes, sfx, ctype, mtype):
    ops = {
        "mask": f"(({mtype})((1u << ({{n}})) - 1u))",
        "load": f"_mm512_loadu_{sfx}({{p}})",
        "mload": f"_mm512_maskz_loadu_{sfx}({{m}}, {{p}})",
        "store": f"_mm512_storeu_{sfx}({{p}}, {{a}})",
        "mstore": f"_mm512_mask_storeu_{sfx}({{p}}, {{m}}, {{a}})",
        "set1": f"_mm512_set1_{sfx}({{a}})",
        "zero": f"_mm512_setzero_{sfx}()",
        "add": f"_mm512_add_{sfx}({{a}}, {{b}})",
        "sub": f"_mm512_sub_{sfx}({{a}}, {{b}})",
        "mul": f"_mm512_mul_{sfx}({{a}}, {{b}})",
        "div": f"_mm512_div_{sfx}({{a}}, {{b}})",
        # MINPS(a, b) is exactly `a < b ? a : b` (NaN and signed zero included): our scalar min
        "min": f"_mm512_min_{sfx}({{a}}, {{b}})",
        "max": f"_mm512_max_{sfx}({{a}}, {{b}})",
        "fma": f"_mm512_fmadd_{sfx}({{a}}, {{b}}, {{c}})",
        "sqrt": f"_mm512_sqrt_{sfx}({{a}})",
        "abs": f"_mm512_abs_{sfx}({{a}})",
        "neg": f"_mm512_sub_{sfx}(_mm512_set1_{sfx}(-0.0), {{a}})",
        "select": f"_mm512_mask_blend_{sfx}({{m}}, {{b}}, {{a}})",
        "hadd": f"_mm512_reduce_add_{sfx}({{a}})",
        "hmul": f"_mm512_reduce_mul_{sfx}({{a}})",
        "hmin": f"_mm512_reduce_min_{sfx}({{a}})",
        "hmax": f"_mm512_reduce_max_{sfx}({{a}})",
    }
    for k, v in _CMP_PS.items():
        ops["cmp_" + k] = f"_mm512_cmp_{sfx}_mask({{a}}, {{b}}, {v})"
    if dtype is F32:
        ops["from_int32"] = "_mm512_cvtepi32_ps({a})"
    else:
        ops["from_int32"] = "_mm512_cvtepi32_pd(_mm512_castsi512_si256({a}))"
    return X86Shape("avx512", dtype, lanes, ctype, ops, ("avx512f", "avx512dq"))


def _avx512_int(dtype, lanes, sfx, mtype):
    ops = {
        "mask": f"(({mtype})((1u << ({{n}})) - 1u))",
        "load": "_mm512_loadu_si512((const void*)({p}))",
        "mload": f"_mm512_maskz_loadu_{sfx}({{m}}, (const void*)({{p}}))",
        "store": "_mm512_storeu_si512((void*)({p}), {a})",
        "mstore": f"_mm512_mask_storeu_{sfx}((void*)({{p}}), {{m}}, {{a}})",
        "set1": f"_mm512_set1_{sfx}({{a}})",
        "zero": "_mm512_setzero_si512()",
        "add": f"_mm512_add_{sfx}({{a}}, {{b}})",
        "sub": f"_mm512_sub_{sfx}({{a}}, {{b}})",
        "mul": f"_mm512_mullo_{sfx}({{a}}, {{b}})",
        "min": f"_mm512_min_{sfx}({{a}}, {{b}})",
        "max": f"_mm512_max_{sfx}({{a}}, {{b}})",
        "and": "_mm512_and_si512({a}, {b})",
        "or": "_mm512_or_si512({a}, {b})",
        "xor": "_mm512_xor_si512({a}, {b})",
        "abs": f"_mm512_abs_{sfx}({{a}})",
        "neg": f"_mm512_sub_{sfx}(_mm512_setzero_si512(), {{a}})",
        "select": f"_mm512_mask_blend_{sfx}({{m}}, {{b}}, {{a}})",
        "hadd": f"_mm512_reduce_add_{sfx}({{a}})",
        "hmul": f"_mm512_reduce_mul_{sfx}({{a}})",
        "hmin": f"_mm512_reduce_min_{sfx}({{a}})",
        "hmax": f"_mm512_reduce_max_{sfx}({{a}})",
    }
    for k, v in _CMP_INT.items():
        ops["cmp_" + k] = f"_mm512_cmp_{sfx}_mask({{a}}, {{b}}, {v})"
    return X86Shape("avx512", dtype, lanes, "__m512i", ops, ("avx512f", "avx512dq"))


_NARROW = {ScalarType.int8: ("epi8", 8, True), ScalarType.uint8: ("epu8", 8, False),
           ScalarType.int16: ("epi16", 16, True), ScalarType.uint16: ("epu16", 16, False)}


def _widened(dtype: ScalarType) -> X86Shape:
    """16 lanes of a narrow integer type held in 32-bit lanes (sign- or zero-extended): loads widen,
    stores narrow (the lanes hold values of the type, so truncation keeps them), the operations
    whose 32-bit result is the narrow one (min, max, select, compares, bitwise), and those that
    wrap (+, -, *, negation, abs) with the result's low bits extended again; conversions keep the
    invariant (from int32: the low bits extended; from float32: NaN -> 0, saturating)."""
    sfx, bits, signed = _NARROW[dtype]
    half = "_mm_loadu_si128((const __m128i*)({p}))" if bits == 8 else "_mm256_loadu_si256((const __m256i*)({p}))"
    mhalf = (f"_mm_maskz_loadu_epi{bits}({{m}}, (const void*)({{p}}))" if bits == 8 else
             f"_mm256_maskz_loadu_epi{bits}({{m}}, (const void*)({{p}}))")
    ext = f"_mm512_cvt{sfx}_epi32"
    down = f"_mm512_cvtepi32_epi{bits}"
    shift = 32 - bits
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    # the 32-bit lanes back to values of the type: the low bits sign- or zero-extended
    norm = (f"_mm512_srai_epi32(_mm512_slli_epi32({{x}}, {shift}), {shift})" if signed else
            f"_mm512_and_si512({{x}}, _mm512_set1_epi32({hi}))")
    ops = {
        "mask": "((__mmask16)((1u << ({n})) - 1u))",
        "load": f"{ext}({half})",
        "mload": f"{ext}({mhalf})",
        "store": (f"_mm_storeu_si128((__m128i*)({{p}}), {down}({{a}}))" if bits == 8 else
                  f"_mm256_storeu_si256((__m256i*)({{p}}), {down}({{a}}))"),
        "mstore": f"_mm512_mask_cvtepi32_storeu_epi{bits}((void*)({{p}}), {{m}}, {{a}})",
        "set1": "_mm512_set1_epi32((int32_t)({a}))",
        "min": "_mm512_min_epi32({a}, {b})",
        "max": "_mm512_max_epi32({a}, {b})",
        "select": "_mm512_mask_blend_epi32({m}, {b}, {a})",
        "from_int32": norm.format(x="{a}"),
        "from_float32": _to_int(f"{lo}.0f", f"{hi + 1}.0f", str(hi)),
        # +, -, * wrap: the low bits of the 32-bit result are the narrow one's; and, or, xor of
        # extended values are extended; reductions of the lanes as int32 keep the low bits
        "add": norm.format(x="_mm512_add_epi32({a}, {b})"),
        "sub": norm.format(x="_mm512_sub_epi32({a}, {b})"),
        "mul": norm.format(x="_mm512_mullo_epi32({a}, {b})"),
        "neg": norm.format(x="_mm512_sub_epi32(_mm512_setzero_si512(), {a})"),
        "abs": norm.format(x="_mm512_abs_epi32({a})") if signed else "({a})",
        "and": "_mm512_and_si512({a}, {b})",
        "or": "_mm512_or_si512({a}, {b})",
        "xor": "_mm512_xor_si512({a}, {b})",
        "zero": "_mm512_setzero_si512()",
        "hadd": "_mm512_reduce_add_epi32({a})",
        "hmul": "_mm512_reduce_mul_epi32({a})",
        "hmin": "_mm512_reduce_min_epi32({a})",
        "hmax": "_mm512_reduce_max_epi32({a})",
    }
    for t in _NARROW:  # from another narrow type: its low bits, as from int32
        ops["from_" + t.name] = ops["from_int32"]
    for k, v in _CMP_INT.items():
        ops["cmp_" + k] = f"_mm512_cmp_epi32_mask({{a}}, {{b}}, {v})"
    return X86Shape("avx512", dtype, 16, "__m512i", ops, ("avx512f", "avx512bw"))


def _to_int(lo: str, hi_f: str, hi_i: str) -> str:
    """The template converting float32 lanes {a} to int32 lanes as the scalar cast to an integer
    type of range [lo, hi_f) does: NaN -> 0, below lo -> lo, from hi_f up -> hi_i, else toward
    zero (lo and hi_f exact floats). A statement expression: {a} is evaluated once."""
    return ("__extension__({{ __m512 accpy_x_ = ({a}); "
            "__mmask16 accpy_big_ = _mm512_cmp_ps_mask(accpy_x_, _mm512_set1_ps(" + hi_f + "), _CMP_GE_OQ); "
            "__mmask16 accpy_ord_ = _mm512_cmp_ps_mask(accpy_x_, accpy_x_, _CMP_ORD_Q); "
            "__m512i accpy_r_ = _mm512_cvttps_epi32(_mm512_max_ps(accpy_x_, _mm512_set1_ps(" + lo + "))); "
            "accpy_r_ = _mm512_mask_mov_epi32(accpy_r_, accpy_big_, _mm512_set1_epi32(" + hi_i + ")); "
            "_mm512_maskz_mov_epi32(accpy_ord_, accpy_r_); }})")


def _lane_offsets(lanes: int) -> str:
    """C for the int32 element offsets {s}*l of lanes l = 0..lanes-1 (gather / scatter index)."""
    w = 512 if lanes == 16 else 256
    iota = ", ".join(str(l) for l in range(lanes))
    return f"_mm{w}_mullo_epi32(_mm{w}_set1_epi32({{s}}), _mm{w}_setr_epi32({iota}))"


def _avx512_strided(sfx: str, lanes: int, size: int, zero: str, cast: bool) -> dict:
    """Gathers and scatters of lanes {s} elements apart (32-bit offsets, scale = element size)."""
    idx = _lane_offsets(lanes)
    isfx = "i32gather_" + sfx
    ssfx = "i32scatter_" + sfx
    rp, wp = ("(const void*)({p})", "(void*)({p})") if cast else ("{p}", "{p}")
    return {
        "gather": f"_mm512_{isfx}({idx}, {rp}, {size})",
        "mgather": f"_mm512_mask_{isfx}({zero}, {{m}}, {idx}, {rp}, {size})",
        "scatter": f"_mm512_{ssfx}({wp}, {idx}, {{a}}, {size})",
        "mscatter": f"_mm512_mask_{ssfx}({wp}, {{m}}, {idx}, {{a}}, {size})",
    }


def _with_extra(isa: X86Shape, extra: dict) -> X86Shape:
    return X86Shape(isa.name, isa.dtype, isa.lanes, isa.ctype, isa.ops, isa.features, extra)


def _avx2_float(dtype, lanes, sfx, ctype):
    ivec = "_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)" if lanes == 8 else "_mm256_setr_epi64x(0, 1, 2, 3)"
    cmpgt = "_mm256_cmpgt_epi32" if lanes == 8 else "_mm256_cmpgt_epi64"
    set1 = "_mm256_set1_epi32" if lanes == 8 else "_mm256_set1_epi64x"
    ops = {
        # masks are vectors with all bits set in active lanes
        "mask": f"_mm256_castsi256_{sfx}({cmpgt}({set1}({{n}}), {ivec}))",
        "load": f"_mm256_loadu_{sfx}({{p}})",
        "mload": f"_mm256_maskload_{sfx}({{p}}, _mm256_cast{sfx}_si256({{m}}))",
        "store": f"_mm256_storeu_{sfx}({{p}}, {{a}})",
        "mstore": f"_mm256_maskstore_{sfx}({{p}}, _mm256_cast{sfx}_si256({{m}}), {{a}})",
        "set1": f"_mm256_set1_{sfx}({{a}})",
        "zero": f"_mm256_setzero_{sfx}()",
        "add": f"_mm256_add_{sfx}({{a}}, {{b}})",
        "sub": f"_mm256_sub_{sfx}({{a}}, {{b}})",
        "mul": f"_mm256_mul_{sfx}({{a}}, {{b}})",
        "div": f"_mm256_div_{sfx}({{a}}, {{b}})",
        "min": f"_mm256_min_{sfx}({{a}}, {{b}})",
        "max": f"_mm256_max_{sfx}({{a}}, {{b}})",
        "fma": f"_mm256_fmadd_{sfx}({{a}}, {{b}}, {{c}})",
        "sqrt": f"_mm256_sqrt_{sfx}({{a}})",
        "abs": f"_mm256_andnot_{sfx}(_mm256_set1_{sfx}(-0.0), {{a}})",
        "neg": f"_mm256_sub_{sfx}(_mm256_set1_{sfx}(-0.0), {{a}})",
        "select": f"_mm256_blendv_{sfx}({{b}}, {{a}}, {{m}})",
        "hadd": f"accpy_hadd_m256{'' if sfx == 'ps' else 'd'}({{a}})",
        "hmul": f"accpy_hmul_m256{'' if sfx == 'ps' else 'd'}({{a}})",
        "hmin": f"accpy_hmin_m256{'' if sfx == 'ps' else 'd'}({{a}})",
        "hmax": f"accpy_hmax_m256{'' if sfx == 'ps' else 'd'}({{a}})",
    }
    for k, v in _CMP_PS.items():
        ops["cmp_" + k] = f"_mm256_cmp_{sfx}({{a}}, {{b}}, {v})"
    if dtype is F32:
        ops["from_int32"] = "_mm256_cvtepi32_ps({a})"
    return X86Shape("avx2", dtype, lanes, ctype, ops, ("avx2", "fma"))


def _avx2_int32():
    ops = {
        "mask": "_mm256_cmpgt_epi32(_mm256_set1_epi32({n}), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))",
        "load": "_mm256_loadu_si256((const __m256i*)({p}))",
        "mload": "_mm256_maskload_epi32((const int*)({p}), {m})",
        "store": "_mm256_storeu_si256((__m256i*)({p}), {a})",
        "mstore": "_mm256_maskstore_epi32((int*)({p}), {m}, {a})",
        "set1": "_mm256_set1_epi32({a})",
        "zero": "_mm256_setzero_si256()",
        "add": "_mm256_add_epi32({a}, {b})",
        "sub": "_mm256_sub_epi32({a}, {b})",
        "mul": "_mm256_mullo_epi32({a}, {b})",
        "min": "_mm256_min_epi32({a}, {b})",
        "max": "_mm256_max_epi32({a}, {b})",
        "and": "_mm256_and_si256({a}, {b})",
        "or": "_mm256_or_si256({a}, {b})",
        "xor": "_mm256_xor_si256({a}, {b})",
        "abs": "_mm256_abs_epi32({a})",
        "neg": "_mm256_sub_epi32(_mm256_setzero_si256(), {a})",
        "select": "_mm256_blendv_epi8({b}, {a}, {m})",
        "hadd": "accpy_hadd_m256i({a})",
        "hmul": "accpy_hmul_m256i({a})",
        "hmin": "accpy_hmin_m256i({a})",
        "hmax": "accpy_hmax_m256i({a})",
        "cmp_gt": "_mm256_cmpgt_epi32({a}, {b})",
        "cmp_lt": "_mm256_cmpgt_epi32({b}, {a})",
        "cmp_eq": "_mm256_cmpeq_epi32({a}, {b})",
        # AVX2 compares integers only for > and ==: the others are their complements
        "cmp_ge": "_mm256_xor_si256(_mm256_cmpgt_epi32({b}, {a}), _mm256_set1_epi32(-1))",
        "cmp_le": "_mm256_xor_si256(_mm256_cmpgt_epi32({a}, {b}), _mm256_set1_epi32(-1))",
        "cmp_ne": "_mm256_xor_si256(_mm256_cmpeq_epi32({a}, {b}), _mm256_set1_epi32(-1))",
    }
    # fma too: the horizontal reductions (native/accpy_runtime.h) are compiled for "avx2,fma"
    return X86Shape("avx2", I32, 8, "__m256i", ops, ("avx2", "fma"))


def _avx2_strided(dtype: ScalarType) -> dict:
    """AVX2 gathers (VGATHERDPS / VGATHERDPD / VPGATHERDD: a masked gather reads only its active
    lanes) of lanes {s} elements apart; AVX2 has no scatters, so those go lane by lane."""
    sfx, ctype, vtype, lanes = {F32: ("ps", "float", "__m256", 8), F64: ("pd", "double", "__m256d", 4),
                                I32: ("epi32", "int", "__m256i", 8)}[dtype]
    size = dtype.bits // 8
    # int32 offsets {s} * l: 8 of them in a ymm register, 4 (for float64 lanes) in an xmm one
    idx = (_lane_offsets(8) if lanes == 8 else
           "_mm_mullo_epi32(_mm_set1_epi32({s}), _mm_setr_epi32(0, 1, 2, 3))")
    zero = "_mm256_setzero_si256()" if dtype is I32 else f"_mm256_setzero_{sfx}()"
    p = f"(const {ctype}*)({{p}})"
    if dtype is I32:
        store, movemask = "_mm256_storeu_si256((__m256i*)accpy_t_, accpy_v_)", "_mm256_movemask_ps(_mm256_castsi256_ps({m}))"
    else:
        store, movemask = f"_mm256_storeu_{sfx}(accpy_t_, accpy_v_)", f"_mm256_movemask_{sfx}({{m}})"
    by_lane = Lanes("int32_t" if dtype is I32 else ctype, lanes, vtype, "", store, movemask)
    return {"gather": f"_mm256_i32gather_{sfx}({p}, {idx}, {size})",
            "mgather": f"_mm256_mask_i32gather_{sfx}({zero}, {p}, {idx}, {{m}}, {size})",
            **by_lane.strided_writes()}


_AVX2_ROUND = "_mm256_round_{sfx}({{a}}, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)"
# float32 lanes to int32 as the scalar cast: NaN -> 0, from 2^31 up -> INT_MAX, below -2^31 -> INT_MIN
# (VCVTTPS2DQ's out-of-range value), else toward zero; {a} evaluated once
_AVX2_TO_INT32 = ("__extension__({{ __m256 accpy_x_ = ({a}); "
                  "__m256i accpy_big_ = _mm256_castps_si256(_mm256_cmp_ps(accpy_x_, _mm256_set1_ps(2147483648.0f), "
                  "_CMP_GE_OQ)); "
                  "__m256i accpy_ord_ = _mm256_castps_si256(_mm256_cmp_ps(accpy_x_, accpy_x_, _CMP_ORD_Q)); "
                  "__m256i accpy_r_ = _mm256_blendv_epi8(_mm256_cvttps_epi32(accpy_x_), "
                  "_mm256_set1_epi32(2147483647), accpy_big_); "
                  "_mm256_and_si256(accpy_r_, accpy_ord_); }})")

LIBRARY = {
    # dot2: {c} plus, per lane, the two bfloat16 products of adjacent pairs (VDPBF16PS); round
    # (half to even); conversions from narrow integers, which travel widened to 32-bit lanes
    ("avx512", F32): _with_extra(_avx512_float(F32, 16, "ps", "__m512", "__mmask16"),
                                 {**_avx512_strided("ps", 16, 4, "_mm512_setzero_ps()", False),
                                  "dot2": "accpy_dpbf16ps({c}, {a}, {b})",
                                  "round": "_mm512_roundscale_ps({a}, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)",
                                  **{"from_" + t: "_mm512_cvtepi32_ps({a})" for t in ("int8", "uint8", "int16",
                                                                                     "uint16")}}),
    ("avx512", F64): _with_extra(_avx512_float(F64, 8, "pd", "__m512d", "__mmask8"),
                                 _avx512_strided("pd", 8, 8, "_mm512_setzero_pd()", False)),
    # madd16: 16 int32 lanes, each the sum of two int16 products of adjacent pairs (VPMADDWD);
    # dot4: {c} plus, per lane, the sum of four uint8 x int8 products of adjacent quads (VPDPBUSD)
    ("avx512", I32): _with_extra(_avx512_int(I32, 16, "epi32", "__mmask16"),
                                 {**_avx512_strided("epi32", 16, 4, "_mm512_setzero_si512()", True),
                                  "madd16": "_mm512_madd_epi16({a}, {b})",
                                  "dot4": "accpy_dpbusd({c}, {a}, {b})",
                                  # float -> int as the scalar cast: NaN -> 0, saturating, toward zero
                                  "from_float32": _to_int("-2147483648.0f", "2147483648.0f", "2147483647"),
                                  # widened narrow integers: the lanes already hold the value
                                  **{"from_" + t: "({a})" for t in ("int8", "uint8", "int16", "uint16")}}),
    ("avx512", I64): _with_extra(_avx512_int(I64, 8, "epi64", "__mmask8"),
                                 _avx512_strided("epi64", 8, 8, "_mm512_setzero_si512()", True)),
    # round half to even (as SSE4.1's and AVX-512's); float -> int32 as the scalar cast
    ("avx2", F32): _with_extra(_avx2_float(F32, 8, "ps", "__m256"),
                               {**_avx2_strided(F32), "round": _AVX2_ROUND.format(sfx="ps")}),
    ("avx2", F64): _with_extra(_avx2_float(F64, 4, "pd", "__m256d"),
                               {**_avx2_strided(F64), "round": _AVX2_ROUND.format(sfx="pd")}),
    ("avx2", I32): _with_extra(_avx2_int32(), {**_avx2_strided(I32), "from_float32": _AVX2_TO_INT32}),
}

add_math(LIBRARY)  # float32 exp, fast_exp, log, tanh, floor, ceil (x86_math.py)


def _operand_shape(dtype: ScalarType, lanes: int, sfx: str, mtype: str) -> X86Shape:
    """A shape that only loads operands of another shape's instruction (madd16's int16 pairs, dot4's
    byte quads, dot2's bfloat16 pairs): a load, a masked load, and `bcast`, the 32 bits at {p}
    repeated in every 32-bit slot (one quad or pair for all lanes; a VLoad of stride 0), and
    `bcast_part`, the same with only the first {n} bytes read (the rest of the slot 0)."""
    return X86Shape("avx512", dtype, lanes, "__m512i", {
        "mask": f"(({mtype})((1ull << ({{n}})) - 1ull))",
        "load": "_mm512_loadu_si512((const void*)({p}))",
        "mload": f"_mm512_maskz_loadu_{sfx}({{m}}, (const void*)({{p}}))",
        "bcast": "_mm512_set1_epi32(accpy_load_i32((const void*)({p})))",
        "bcast_part": "_mm512_set1_epi32(accpy_load_i32_part((const void*)({p}), {n}))",
    }, ("avx512f", "avx512bw"))


# not vector types of their own, so `widest_shape` never picks them (the byte quads and int16
# pairs of VPDPBUSD and VPMADDWD are read by the narrow shapes' own `bcast`: x86narrow.py)
OPERAND_SHAPES = {
    ("avx512", ScalarType.bfloat16): _operand_shape(ScalarType.bfloat16, 32, "epi16", "__mmask32"),
    **{("avx512w", t): _widened(t) for t in _NARROW},
}

# narrow integers in lanes of their own width (x86narrow.py's, joined by `add_shapes`): AVX-512BW, AVX2, SSE4.1
NARROW: dict = {}


def add_shapes(shapes: dict, narrow: bool = False) -> None:
    """Join register shapes {(name, dtype): X86Shape} to x86's: to `LIBRARY` (16-byte shapes of
    x86sse.py), or with `narrow` to `NARROW` (x86narrow.py's integer lanes of their own width).
    The registry (registry.py) joins them; joining the same shapes again changes nothing."""
    (NARROW if narrow else LIBRARY).update(shapes)


def widened_shape(target, dtype: ScalarType) -> Optional[X86Shape]:
    """The 32-bit-lane shape of a narrow integer type on `target` (AVX-512), or None."""
    if dtype in _NARROW and target.has("avx512f") and target.has("avx512bw") and target.vector_bytes >= 64:
        return OPERAND_SHAPES[("avx512w", dtype)]
    return None

# the instructions of the operations beyond the base shapes' features
_OP_FEATURES = {"madd16": ("avx512f", "avx512bw"), "dot4": ("avx512f", "avx512bw", "avx512_vnni"),
                "dot2": ("avx512f", "avx512bw", "avx512_bf16")}
_OP_DTYPE = {"madd16": I32, "dot4": I32, "dot2": F32}

# x86's dot products (the vectorizer's table; accpy/lower/vector_products.py): VPMADDWD (int16
# pairs, every operand moving, C += its result), VPDPBUSD (uint8 x int8 quads into int32) and
# VDPBF16PS (bfloat16 pairs into float32), which add into the accumulator themselves and whose
# first operand may be one group repeated in every lane
DOT_PRODUCTS = (
    DotProduct("madd16", 2, I32, (ScalarType.int16, ScalarType.int16), False, (2,)),
    DotProduct("dot4", 4, I32, (ScalarType.uint8, ScalarType.int8), True, (0, 4)),
    DotProduct("dot2", 2, F32, (ScalarType.bfloat16, ScalarType.bfloat16), True, (0, 2)),
)


def _shape(name: str, dtype: ScalarType) -> Optional[X86Shape]:
    return LIBRARY.get((name, dtype)) or NARROW.get((name, dtype))


def widest_shape(target, dtype: ScalarType) -> Optional[X86Shape]:
    """The widest vector shape the target offers for `dtype`, or None."""
    # the target's vector width decides: an AVX-512 CPU told vector_bytes=32 gets 256-bit code
    wide = _shape("avx512", dtype)
    if (wide is not None and target.has("avx512f") and target.vector_bytes >= 64
            and (("avx512", dtype) in LIBRARY or target.has("avx512bw"))):  # byte / word lanes: AVX-512BW
        return wide
    if target.has("avx2") and target.vector_bytes >= 32 and _shape("avx2", dtype) is not None:
        return _shape("avx2", dtype)
    # 16-byte registers (x86sse.py): told vector_bytes=16, or SSE4.1 without AVX2
    sse = _shape("sse", dtype)
    if sse is not None and target.vector_bytes >= 16 and all(target.has(f) for f in sse.features):
        return sse
    return None


class X86VectorISA(VectorISA):
    """The x86 vector ISA of one target (SSE4.1, AVX2 or AVX-512, by its features and `vector_bytes`):
    what `vectorize` emits. Narrow integers next to 32-bit values are widened to 32-bit lanes on
    AVX-512 (`widened_shape`)."""

    name = "x86 vector"

    def shape(self, dtype: ScalarType) -> Optional[X86Shape]:
        return widest_shape(self.target, dtype)

    def lane_shape(self, dtype: ScalarType, lanes: int) -> Optional[X86Shape]:
        isa = widest_shape(self.target, dtype)
        if isa is not None and isa.lanes == lanes:
            return isa
        w = widened_shape(self.target, dtype)
        return w if w is not None and w.lanes == lanes else None

    def shape_of(self, dtype: ScalarType, lanes: int) -> Optional[X86Shape]:
        # (16 x int16 are AVX2's own lanes, or AVX-512's widened ones)
        for isa in (widest_shape(self.target, dtype), widened_shape(self.target, dtype),
                    OPERAND_SHAPES.get(("avx512", dtype))):
            if isa is not None and isa.lanes == lanes:
                return isa
        for isa in list(LIBRARY.values()) + list(OPERAND_SHAPES.values()) + list(NARROW.values()):
            if isa.dtype is dtype and isa.lanes == lanes:
                return isa
        return None

    def supports(self, dtype: ScalarType, op: str) -> bool:
        if op in _OP_FEATURES:  # VPMADDWD, VPDPBUSD, VDPBF16PS on zmm registers
            return (dtype is _OP_DTYPE[op] and all(self.target.has(f) for f in _OP_FEATURES[op])
                    and self.target.vector_bytes >= 64)
        return super().supports(dtype, op)

    def dot_products(self) -> tuple:
        return tuple(p for p in DOT_PRODUCTS if self.supports(p.acc, p.op))


class X86VectorLibrary(TargetLibrary):
    """The x86 vector ISA (SSE4.1, AVX2, AVX-512) behind the target interface, and x86's toolchain."""

    name = "x86 vector"

    def applies_to(self, target) -> bool:
        return target.has("avx2") or target.has("avx512f") or target.has("sse4_1")

    def vector_isa(self, target) -> X86VectorISA:
        return X86VectorISA(target)

    def dot_products(self, target=None) -> tuple:
        return DOT_PRODUCTS if target is None else X86VectorISA(target).dot_products()

    def schedule_recipes(self, kernel, target, threads: int) -> list:
        """Contractions on the target's dot products (x86_auto.py)."""
        from .x86_auto import dot_recipes

        return dot_recipes(kernel, target, threads)

    def precompiled_header(self) -> Optional[str]:
        # <immintrin.h> is the largest header a kernel includes (about 0.2 s of every compile)
        return "#include <immintrin.h>\n"

    def toolchain(self, target):
        return x86_toolchain(target)


X86_VECTOR = X86VectorLibrary()  # registered by registry.py
