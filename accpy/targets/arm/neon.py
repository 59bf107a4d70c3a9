"""AArch64 Advanced SIMD (Neon) register shapes, 128 bits each: 2 x float64, 4 x float32 (FMLA through
`vfmaq_f32`), 8 x float16 (with the half-precision extension), 4 x int32, 8 x int16 / uint16, 16 x
int8 / uint8 (also the operands of the dot products SDOT / UDOT, `vdotq_s32` / `vdotq_u32`).

Templates use the placeholders of targets/vector_isa.py `VectorShape`. Neon has no mask registers and no
masked loads or stores: a mask is a vector with every bit set in its active lanes (as the
comparisons give), and a masked load or store moves only the active lanes, one element at a time
(the helpers of `PRELUDE`), so a vector loop's tail never touches memory past its last element.
Gathers and scatters go lane by lane too. Minimum and maximum are C's `a < b ? a : b` (not FMIN,
whose NaN rule differs); float reductions add across lanes (reassociated, as the x86 shapes do),
the others combine lanes in order.
"""
from __future__ import annotations

from ...ir.types import ScalarType
from ..vector_isa import DotProduct, VectorShape

F32, I32, I8, U8 = ScalarType.float32, ScalarType.int32, ScalarType.int8, ScalarType.uint8

# element type -> (suffix, C element type, vector type, lanes, mask suffix, mask element type)
_TYPES = {
    ScalarType.float64: ("f64", "float64_t", "float64x2_t", 2, "u64", "uint64_t"),
    F32: ("f32", "float", "float32x4_t", 4, "u32", "uint32_t"),
    ScalarType.float16: ("f16", "float16_t", "float16x8_t", 8, "u16", "uint16_t"),
    I32: ("s32", "int32_t", "int32x4_t", 4, "u32", "uint32_t"),
    ScalarType.int16: ("s16", "int16_t", "int16x8_t", 8, "u16", "uint16_t"),
    ScalarType.uint16: ("u16", "uint16_t", "uint16x8_t", 8, "u16", "uint16_t"),
    I8: ("s8", "int8_t", "int8x16_t", 16, "u8", "uint8_t"),
    U8: ("u8", "uint8_t", "uint8x16_t", 16, "u8", "uint8_t"),
}
F16 = ScalarType.float16


def _helpers(dtype) -> str:
    sfx, ct, vt, n, msfx, mct = _TYPES[dtype]
    guard = dtype is F16
    text = (f"ACCPY_NEON_LANES({ct}, {vt}, {n}, {sfx}, {msfx}, {mct}, {mct[:-2]}x{n}_t)\n"
            f"ACCPY_NEON_HREDUCE(accpy_neon_hmul_{sfx}, {vt}, {ct}, {n}, {sfx}, "
            f"{'ACCPY_NEON_MUL' if dtype.is_float else 'ACCPY_NEON_IMUL'})\n")
    if dtype.is_float:
        text += (f"ACCPY_NEON_HREDUCE(accpy_neon_hmin_{sfx}, {vt}, {ct}, {n}, {sfx}, ACCPY_NEON_MIN)\n"
                 f"ACCPY_NEON_HREDUCE(accpy_neon_hmax_{sfx}, {vt}, {ct}, {n}, {sfx}, ACCPY_NEON_MAX)\n")
    if dtype is F16:
        text += f"ACCPY_NEON_HREDUCE(accpy_neon_hadd_{sfx}, {vt}, {ct}, {n}, {sfx}, ACCPY_NEON_ADD)\n"
    # float16 arithmetic: Armv8.2-A's half-precision extension (the package is compiled for it or not)
    return f"#ifdef __ARM_FEATURE_FP16_VECTOR_ARITHMETIC\n{text}#endif\n" if guard else text


# C every package with Neon code holds before its kernels: <arm_neon.h> and the lane-by-lane helpers
PRELUDE = r"""#ifndef ACCPY_NEON_PRELUDE
#define ACCPY_NEON_PRELUDE
#include <arm_neon.h>
#define ACCPY_NEON static inline __attribute__((always_inline, unused))
#define ACCPY_NEON_MASK(MSFX, MCT, MT, N)                                                             \
    ACCPY_NEON MT accpy_neon_mask_##MSFX(int64_t n) {                                              \
        MCT iota[N];                                                                              \
        for (int l = 0; l < N; ++l) iota[l] = (MCT)l;                                             \
        return vcltq_##MSFX(vld1q_##MSFX(iota), vdupq_n_##MSFX((MCT)(n < 0 ? 0 : n > N ? N : n))); \
    }
ACCPY_NEON_MASK(u64, uint64_t, uint64x2_t, 2)
ACCPY_NEON_MASK(u32, uint32_t, uint32x4_t, 4)
ACCPY_NEON_MASK(u16, uint16_t, uint16x8_t, 8)
ACCPY_NEON_MASK(u8, uint8_t, uint8x16_t, 16)
#define ACCPY_NEON_LANES(T, VT, N, SFX, MSFX, MCT, MT)                                                  \
    ACCPY_NEON VT accpy_neon_mload_##SFX(const void* q, MT m) {                   \
        const T* p = (const T*)q; MCT b[N]; T t[N];                                               \
        memset(t, 0, sizeof t); vst1q_##MSFX(b, m);                                               \
        for (int l = 0; l < N; ++l) if (b[l]) t[l] = p[l];                                        \
        return vld1q_##SFX(t);                                                                    \
    }                                                                                             \
    ACCPY_NEON void accpy_neon_mstore_##SFX(void* q, MT m, VT a) {                \
        T* p = (T*)q; MCT b[N]; T t[N];                                                           \
        vst1q_##MSFX(b, m); vst1q_##SFX(t, a);                                                    \
        for (int l = 0; l < N; ++l) if (b[l]) p[l] = t[l];                                        \
    }                                                                                             \
    ACCPY_NEON VT accpy_neon_mgather_##SFX(const void* q, int64_t s, MT m) {      \
        const T* p = (const T*)q; MCT b[N]; T t[N];                                               \
        memset(t, 0, sizeof t); vst1q_##MSFX(b, m);                                               \
        for (int l = 0; l < N; ++l) if (b[l]) t[l] = p[(int64_t)l * s];                           \
        return vld1q_##SFX(t);                                                                    \
    }                                                                                             \
    ACCPY_NEON void accpy_neon_mscatter_##SFX(void* q, int64_t s, MT m, VT a) {   \
        T* p = (T*)q; MCT b[N]; T t[N];                                                           \
        vst1q_##MSFX(b, m); vst1q_##SFX(t, a);                                                    \
        for (int l = 0; l < N; ++l) if (b[l]) p[(int64_t)l * s] = t[l];                           \
    }
#define ACCPY_NEON_HREDUCE(NAME, VT, T, N, SFX, OP)                                                \
    ACCPY_NEON T NAME(VT v) {                                                                     \
        T lanes[N];                                                                               \
        vst1q_##SFX(lanes, v);                                                                    \
        T r = lanes[0];                                                                           \
        for (int k = 1; k < N; ++k) r = (T)OP(r, lanes[k]);                                       \
        return r;                                                                                 \
    }
#define ACCPY_NEON_ADD(a, b) ((a) + (b))
#define ACCPY_NEON_MUL(a, b) ((a) * (b))
#define ACCPY_NEON_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ACCPY_NEON_MAX(a, b) ((a) > (b) ? (a) : (b))
/* a dot product's operand of which each group of g holds only its first k elements (of the first n) */
#define ACCPY_NEON_GROUPS(T, VT, N, SFX)                                                            \
    ACCPY_NEON VT accpy_neon_mload_groups_##SFX(const void* q, int g, int k, int64_t n) {         \
        const T* p = (const T*)q; T t[N] = {0};                                                   \
        for (int l = 0; l < N; ++l) if (l % g < k && (n < 0 || l < n)) t[l] = p[l];               \
        return vld1q_##SFX(t);                                                                    \
    }
ACCPY_NEON_GROUPS(int8_t, int8x16_t, 16, s8)
ACCPY_NEON_GROUPS(uint8_t, uint8x16_t, 16, u8)
ACCPY_NEON_GROUPS(uint16_t, uint16x8_t, 8, u16)
/* integer products wrap (two's complement): lanes multiplied as unsigned */
#define ACCPY_NEON_IMUL(a, b) ((uint32_t)(a) * (uint32_t)(b))
""" + "".join(_helpers(t) for t in _TYPES) + "#endif\n"


_CMP = {"lt": "vcltq", "le": "vcleq", "gt": "vcgtq", "ge": "vcgeq", "eq": "vceqq"}


def _shape(dtype: ScalarType) -> VectorShape:
    """The 128-bit register of `dtype` lanes: memory (masked and strided lane by lane), arithmetic,
    compares and selects, reductions."""
    sfx, ct, vt, n, msfx, mct = _TYPES[dtype]
    f = dtype.is_float
    p = f"(const {ct}*)({{p}})"
    w = f"({ct}*)({{p}})"
    every = f"accpy_neon_mask_{msfx}({n})"
    ops = {
        "mask": f"accpy_neon_mask_{msfx}({{n}})",
        "load": f"vld1q_{sfx}({p})",
        "mload": f"accpy_neon_mload_{sfx}({{p}}, {{m}})",
        "store": f"vst1q_{sfx}({w}, {{a}})",
        "mstore": f"accpy_neon_mstore_{sfx}({{p}}, {{m}}, {{a}})",
        "set1": f"vdupq_n_{sfx}(({ct})({{a}}))",
        "zero": f"vdupq_n_{sfx}(0)",
        "select": f"vbslq_{sfx}({{m}}, {{a}}, {{b}})",
        "add": f"vaddq_{sfx}({{a}}, {{b}})",
        "sub": f"vsubq_{sfx}({{a}}, {{b}})",
        # C's != is true when either operand is NaN: the complement of ==
        "cmp_ne": f"veorq_{msfx}(vceqq_{sfx}({{a}}, {{b}}), vdupq_n_{msfx}(({mct})-1))",
        "hmul": f"accpy_neon_hmul_{sfx}({{a}})",
    }
    for k, v in _CMP.items():
        ops["cmp_" + k] = f"{v}_{sfx}({{a}}, {{b}})"
    if f:
        ops.update({
            "mul": f"vmulq_{sfx}({{a}}, {{b}})",
            "div": f"vdivq_{sfx}({{a}}, {{b}})",
            # C's a < b ? a : b (FMIN's NaN rule differs)
            "min": f"vbslq_{sfx}(vcltq_{sfx}({{a}}, {{b}}), {{a}}, {{b}})",
            "max": f"vbslq_{sfx}(vcgtq_{sfx}({{a}}, {{b}}), {{a}}, {{b}})",
            # FMLA: {c} + {a} * {b}, one rounding
            "fma": f"vfmaq_{sfx}({{c}}, {{a}}, {{b}})",
            "sqrt": f"vsqrtq_{sfx}({{a}})",
            "abs": f"vabsq_{sfx}({{a}})",
            "neg": f"vnegq_{sfx}({{a}})",
            "hadd": f"accpy_neon_hadd_{sfx}({{a}})" if dtype is F16 else f"vaddvq_{sfx}({{a}})",
            "hmin": f"accpy_neon_hmin_{sfx}({{a}})",
            "hmax": f"accpy_neon_hmax_{sfx}({{a}})",
        })
    else:
        signed = sfx.startswith("s")
        ops.update({
            "mul": f"vmulq_{sfx}({{a}}, {{b}})",
            "min": f"vminq_{sfx}({{a}}, {{b}})",
            "max": f"vmaxq_{sfx}({{a}}, {{b}})",
            "and": f"vandq_{sfx}({{a}}, {{b}})",
            "or": f"vorrq_{sfx}({{a}}, {{b}})",
            "xor": f"veorq_{sfx}({{a}}, {{b}})",
            # an unsigned value is its own absolute value; negation wraps
            "abs": f"vabsq_{sfx}({{a}})" if signed else "({a})",
            "neg": f"vnegq_{sfx}({{a}})" if signed else f"vsubq_{sfx}(vdupq_n_{sfx}(0), {{a}})",
            "hadd": f"vaddvq_{sfx}({{a}})",
            "hmin": f"vminvq_{sfx}({{a}})",
            "hmax": f"vmaxvq_{sfx}({{a}})",
        })
    extra = {"gather": f"accpy_neon_mgather_{sfx}({{p}}, {{s}}, {every})",
             "mgather": f"accpy_neon_mgather_{sfx}({{p}}, {{s}}, {{m}})",
             "scatter": f"accpy_neon_mscatter_{sfx}({{p}}, {{s}}, {every}, {{a}})",
             "mscatter": f"accpy_neon_mscatter_{sfx}({{p}}, {{s}}, {{m}}, {{a}})"}
    if f:
        extra["round"] = f"vrndnq_{sfx}({{a}})"  # FRINTN: half to even, as the scalar nearbyint
    if dtype is F32:
        ops["from_int32"] = "vcvtq_f32_s32({a})"
    if dtype is I32:
        # FCVTZS: toward zero, saturating, NaN -> 0 (the scalar cast's meaning in accpy)
        ops["from_float32"] = "vcvtq_s32_f32({a})"
        # SDOT / UDOT: {c} plus, per int32 lane, the four products of a quad of bytes
        extra["sdot4"] = "vdotq_s32({c}, {a}, {b})"
        extra["udot4"] = "vreinterpretq_s32_u32(vdotq_u32(vreinterpretq_u32_s32({c}), {a}, {b}))"
        # USDOT (the int8 matrix multiply extension, i8mm): uint8 x int8 quads
        extra["usdot4"] = "vusdotq_s32({c}, {a}, {b})"
    if dtype in (I8, U8):
        # a dot product's operand: a quad of 4 bytes repeated in every 32-bit slot (`bcast`; `bcast_part`:
        # only its first {n} bytes read), and groups of which only the first elements are read
        extra["bcast"] = f"vreinterpretq_{sfx}_s32(vdupq_n_s32(accpy_load_i32((const void*)({{p}}))))"
        extra["bcast_part"] = f"vreinterpretq_{sfx}_s32(vdupq_n_s32(accpy_load_i32_part((const void*)({{p}}), {{n}})))"
        extra["mload_groups"] = f"accpy_neon_mload_groups_{sfx}({{p}}, {{g}}, {{k}}, {{n}})"
    if dtype in (ScalarType.int16, ScalarType.uint16, I8, U8):
        other = {ScalarType.int16: ScalarType.uint16, ScalarType.uint16: ScalarType.int16, I8: U8, U8: I8}[dtype]
        # the other signedness of the same width: the same bits (the scalar cast wraps)
        ops["from_" + other.name] = f"vreinterpretq_{sfx}_{_TYPES[other][0]}({{a}})"
    features = ("asimd", "asimdhp") if dtype is F16 else ("asimd",)
    return VectorShape("neon", dtype, n, vt, ops, features, extra)


SHAPES = {t: _shape(t) for t in _TYPES}
SHAPES[F32].extra["bfdot2"] = "vbfdotq_f32({c}, {a}, {b})"  # BFDOT (FEAT_BF16): bfloat16 pairs into float32

# bfloat16 lanes only as BFDOT's operands (accpy keeps bfloat16 as its 16-bit patterns): loads, a
# pair of 32 bits repeated in every slot, partial pairs
_BF16 = "vreinterpretq_bf16_u16({x})"
OPERANDS = {ScalarType.bfloat16: VectorShape("neon", ScalarType.bfloat16, 8, "bfloat16x8_t", {
    "mask": "accpy_neon_mask_u16({n})",
    "load": _BF16.format(x="vld1q_u16((const uint16_t*)({p}))"),
    "mload": _BF16.format(x="accpy_neon_mload_u16({p}, {m})"),
    "bcast": "vreinterpretq_bf16_s32(vdupq_n_s32(accpy_load_i32((const void*)({p}))))",
    "bcast_part": "vreinterpretq_bf16_s32(vdupq_n_s32(accpy_load_i32_part((const void*)({p}), {n})))",
    "mload_groups": _BF16.format(x="accpy_neon_mload_groups_u16({p}, {g}, {k}, {n})"),
}, ("asimd", "bf16"))}


def shape_for(target, dtype: ScalarType):
    """The Neon shape of `dtype` on `target` (float16 lanes need the half-precision extension)."""
    isa = SHAPES.get(dtype)
    if isa is None or not all(target.has(f) for f in isa.features):
        return None
    return isa


# AArch64's dot products: SDOT (int8 x int8) and UDOT (uint8 x uint8) of Armv8.2-A's dot product
# extension ("asimddp"), USDOT (uint8 x int8) of the int8 matrix multiply extension ("i8mm"): quads
# into int32 lanes, adding into the accumulator; an operand may be one quad repeated in every lane
# (A's row in C[i, j] += A[i, k] * B[k, j] with B grouped by 4 k)
DOT_PRODUCTS = (
    DotProduct("sdot4", 4, I32, (I8, I8), True, (0, 4)),
    DotProduct("udot4", 4, I32, (U8, U8), True, (0, 4)),
    DotProduct("usdot4", 4, I32, (U8, I8), True, (0, 4)),  # Armv8.6-A's i8mm (USDOT)
    DotProduct("bfdot2", 2, F32, (ScalarType.bfloat16, ScalarType.bfloat16), True, (0, 2)),  # BFDOT (bf16)
)
# the features each dot product needs
DOT_FEATURES = {"sdot4": ("asimddp",), "udot4": ("asimddp",), "usdot4": ("i8mm",), "bfdot2": ("bf16",)}
