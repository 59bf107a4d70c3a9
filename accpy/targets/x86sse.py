"""x86 SSE vector shapes (16-byte xmm registers, SSE4.1): what `vectorize` emits for a target
whose `vector_bytes` is 16 (Accera's SSE-width targets, e.g. `Target("HOST", vector_bytes=16)`),
or a CPU with SSE4.1 but no AVX2.

The shapes join accpy/targets/x86.py's `LIBRARY` (registry.py joins them, `x86.add_shapes`) under the name "sse" (4 x float32, 2 x float64,
4 x int32), with the same template placeholders and meanings (accpy/ir/vector.py). SSE has no
mask registers and no masked loads or stores: a mask is a vector with every bit set in its active
lanes (as on AVX2), selects blend with it (BLENDVPS / PBLENDVB), and a masked load or store moves
only the active lanes, one element at a time, so it never touches memory past them (a vector
loop's tail). Horizontal reductions combine the lanes in order, as the AVX2 helpers of
native/accpy_runtime.h do. SSE has no FMA: a product added to an accumulator is a multiply, then
an add. Every template is run against numpy by tests/test_x86_intrinsics.py (it walks `LIBRARY`).
"""
from __future__ import annotations

from ..ir.types import ScalarType
from .x86 import X86Shape
from .x86lanes import Lanes

F32, F64, I32 = ScalarType.float32, ScalarType.float64, ScalarType.int32

# SSE4.1 for BLENDV, PMULLD, PMINSD / PMAXSD and ROUNDPS; SSSE3 (implied) for PABSD
FEATURES = ("sse4_1",)

# C's comparisons: only != is true on NaN (CMPNEQ is "not equal or unordered")
_CMP_FLOAT = {"lt": "cmplt", "le": "cmple", "gt": "cmpgt", "ge": "cmpge", "eq": "cmpeq", "ne": "cmpneq"}


def _sse_float(dtype: ScalarType) -> X86Shape:
    sfx, ctype, vtype, lanes = ("ps", "float", "__m128", 4) if dtype is F32 else ("pd", "double", "__m128d", 2)
    # lane l is active when l < n; float64 lanes are pairs of int32 lanes
    iota = "0, 1, 2, 3" if lanes == 4 else "0, 0, 1, 1"
    by_lane = Lanes(ctype, lanes, vtype, f"_mm_loadu_{sfx}(accpy_t_)", f"_mm_storeu_{sfx}(accpy_t_, accpy_v_)",
                    f"_mm_movemask_{sfx}({{m}})")
    ops = {
        "mask": f"_mm_castsi128_{sfx}(_mm_cmpgt_epi32(_mm_set1_epi32({{n}}), _mm_setr_epi32({iota})))",
        "load": f"_mm_loadu_{sfx}({{p}})",
        "store": f"_mm_storeu_{sfx}({{p}}, {{a}})",
        **by_lane.masked(),
        "set1": f"_mm_set1_{sfx}({{a}})",
        "zero": f"_mm_setzero_{sfx}()",
        "add": f"_mm_add_{sfx}({{a}}, {{b}})",
        "sub": f"_mm_sub_{sfx}({{a}}, {{b}})",
        "mul": f"_mm_mul_{sfx}({{a}}, {{b}})",
        "div": f"_mm_div_{sfx}({{a}}, {{b}})",
        # MINPS(a, b) is `a < b ? a : b` (NaN and signed zeros included), the IR's min
        "min": f"_mm_min_{sfx}({{a}}, {{b}})",
        "max": f"_mm_max_{sfx}({{a}}, {{b}})",
        "sqrt": f"_mm_sqrt_{sfx}({{a}})",
        "abs": f"_mm_andnot_{sfx}(_mm_set1_{sfx}(-0.0), {{a}})",
        "neg": f"_mm_sub_{sfx}(_mm_set1_{sfx}(-0.0), {{a}})",
        "select": f"_mm_blendv_{sfx}({{b}}, {{a}}, {{m}})",
        **by_lane.reductions(),
    }
    for k, v in _CMP_FLOAT.items():
        ops["cmp_" + k] = f"_mm_{v}_{sfx}({{a}}, {{b}})"
    if dtype is F32:
        ops["from_int32"] = "_mm_cvtepi32_ps({a})"
    # round half to even, as the scalar code's nearbyint; strided accesses lane by lane
    extra = {"round": f"_mm_round_{sfx}({{a}}, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)",
             **by_lane.strided_reads(), **by_lane.strided_writes()}
    return X86Shape("sse", dtype, lanes, vtype, ops, FEATURES, extra)


def _sse_int32() -> X86Shape:
    by_lane = Lanes("int32_t", 4, "__m128i", "_mm_loadu_si128((const __m128i*)accpy_t_)",
                    "_mm_storeu_si128((__m128i*)accpy_t_, accpy_v_)", "_mm_movemask_ps(_mm_castsi128_ps({m}))")
    ops = {
        "mask": "_mm_cmpgt_epi32(_mm_set1_epi32({n}), _mm_setr_epi32(0, 1, 2, 3))",
        "load": "_mm_loadu_si128((const __m128i*)({p}))",
        "store": "_mm_storeu_si128((__m128i*)({p}), {a})",
        **by_lane.masked(),
        "set1": "_mm_set1_epi32({a})",
        "zero": "_mm_setzero_si128()",
        "add": "_mm_add_epi32({a}, {b})",
        "sub": "_mm_sub_epi32({a}, {b})",
        "mul": "_mm_mullo_epi32({a}, {b})",
        "min": "_mm_min_epi32({a}, {b})",
        "max": "_mm_max_epi32({a}, {b})",
        "and": "_mm_and_si128({a}, {b})",
        "or": "_mm_or_si128({a}, {b})",
        "xor": "_mm_xor_si128({a}, {b})",
        "abs": "_mm_abs_epi32({a})",
        "neg": "_mm_sub_epi32(_mm_setzero_si128(), {a})",
        "select": "_mm_blendv_epi8({b}, {a}, {m})",
        **by_lane.reductions(wrap=True),
        "cmp_gt": "_mm_cmpgt_epi32({a}, {b})",
        "cmp_lt": "_mm_cmplt_epi32({a}, {b})",
        "cmp_eq": "_mm_cmpeq_epi32({a}, {b})",
        # SSE compares integers for >, < and == only: the others are their complements
        "cmp_ge": "_mm_xor_si128(_mm_cmplt_epi32({a}, {b}), _mm_set1_epi32(-1))",
        "cmp_le": "_mm_xor_si128(_mm_cmpgt_epi32({a}, {b}), _mm_set1_epi32(-1))",
        "cmp_ne": "_mm_xor_si128(_mm_cmpeq_epi32({a}, {b}), _mm_set1_epi32(-1))",
    }
    return X86Shape("sse", I32, 4, "__m128i", ops, FEATURES, {**by_lane.strided_reads(), **by_lane.strided_writes()})


SHAPES = {("sse", F32): _sse_float(F32), ("sse", F64): _sse_float(F64), ("sse", I32): _sse_int32()}
