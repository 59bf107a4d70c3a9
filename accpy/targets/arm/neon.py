"""AArch64 Advanced SIMD (Neon) register shapes: 4 x float32 (FMLA through `vfmaq_f32`), 4 x int32,
and 16 x int8 / uint8 operands of the dot products SDOT / UDOT (`vdotq_s32`, `vdotq_u32`).

Templates use the placeholders of targets/library.py `VectorISA`. Neon has no mask registers and no
masked loads or stores: a mask is a vector with every bit set in its active lanes (as the
comparisons give), and a masked load or store moves only the active lanes, one element at a time
(the helpers of `PRELUDE`), so a vector loop's tail never touches memory past its last element.
Gathers and scatters go lane by lane too. Minimum and maximum are C's `a < b ? a : b` (not FMIN,
whose NaN rule differs); float reductions add across lanes (reassociated, as the x86 shapes do),
the others combine lanes in order.
"""
from __future__ import annotations

from ...ir.types import ScalarType
from ..library import DotProduct, VectorISA

F32, I32, I8, U8 = ScalarType.float32, ScalarType.int32, ScalarType.int8, ScalarType.uint8

# C every package with Neon code holds before its kernels: <arm_neon.h> and the lane-by-lane helpers
PRELUDE = r"""#include <arm_neon.h>
#define ACCPY_NEON static inline __attribute__((always_inline, unused))
ACCPY_NEON uint32x4_t accpy_neon_mask32(int64_t n) {
    static const uint32_t iota[4] = {0, 1, 2, 3};
    return vcltq_u32(vld1q_u32(iota), vdupq_n_u32((uint32_t)(n < 0 ? 0 : n > 4 ? 4 : n)));
}
ACCPY_NEON uint8x16_t accpy_neon_mask8(int64_t n) {
    static const uint8_t iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    return vcltq_u8(vld1q_u8(iota), vdupq_n_u8((uint8_t)(n < 0 ? 0 : n > 16 ? 16 : n)));
}
#define ACCPY_NEON_LANES(T, VT, N, SFX, MT, MSFX, MCT)                                                   \
    ACCPY_NEON VT accpy_neon_mload_##SFX(const T* p, MT m) {                                      \
        MCT b[N]; T t[N] = {0};                                                             \
        vst1q_##MSFX(b, m);                                                                        \
        for (int l = 0; l < N; ++l) if (b[l]) t[l] = p[l];                                        \
        return vld1q_##SFX(t);                                                                    \
    }                                                                                             \
    ACCPY_NEON void accpy_neon_mstore_##SFX(T* p, MT m, VT a) {                                   \
        MCT b[N]; T t[N];                                                                    \
        vst1q_##MSFX(b, m); vst1q_##SFX(t, a);                                                    \
        for (int l = 0; l < N; ++l) if (b[l]) p[l] = t[l];                                        \
    }                                                                                             \
    ACCPY_NEON VT accpy_neon_mgather_##SFX(const T* p, int64_t s, MT m) {                         \
        MCT b[N]; T t[N] = {0};                                                             \
        vst1q_##MSFX(b, m);                                                                        \
        for (int l = 0; l < N; ++l) if (b[l]) t[l] = p[(int64_t)l * s];                           \
        return vld1q_##SFX(t);                                                                    \
    }                                                                                             \
    ACCPY_NEON void accpy_neon_mscatter_##SFX(T* p, int64_t s, MT m, VT a) {                      \
        MCT b[N]; T t[N];                                                                    \
        vst1q_##MSFX(b, m); vst1q_##SFX(t, a);                                                    \
        for (int l = 0; l < N; ++l) if (b[l]) p[(int64_t)l * s] = t[l];                           \
    }
ACCPY_NEON_LANES(float, float32x4_t, 4, f32, uint32x4_t, u32, uint32_t)
ACCPY_NEON_LANES(int32_t, int32x4_t, 4, s32, uint32x4_t, u32, uint32_t)
ACCPY_NEON_LANES(int8_t, int8x16_t, 16, s8, uint8x16_t, u8, uint8_t)
ACCPY_NEON_LANES(uint8_t, uint8x16_t, 16, u8, uint8x16_t, u8, uint8_t)
/* a dot product's operand of which each group of g holds only its first k elements (of the first n) */
#define ACCPY_NEON_GROUPS(T, VT, SFX)                                                               \
    ACCPY_NEON VT accpy_neon_mload_groups_##SFX(const T* p, int g, int k, int64_t n) {            \
        T t[16] = {0};                                                                            \
        for (int l = 0; l < 16; ++l) if (l % g < k && (n < 0 || l < n)) t[l] = p[l];              \
        return vld1q_##SFX(t);                                                                    \
    }
ACCPY_NEON_GROUPS(int8_t, int8x16_t, s8)
ACCPY_NEON_GROUPS(uint8_t, uint8x16_t, u8)
#define ACCPY_NEON_HREDUCE(NAME, VT, T, N, SFX, OP)                                                \
    ACCPY_NEON T NAME(VT v) {                                                                     \
        T lanes[N];                                                                               \
        vst1q_##SFX(lanes, v);                                                                    \
        T r = lanes[0];                                                                           \
        for (int k = 1; k < N; ++k) r = OP(r, lanes[k]);                                          \
        return r;                                                                                 \
    }
#define ACCPY_NEON_MUL(a, b) ((a) * (b))
#define ACCPY_NEON_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ACCPY_NEON_MAX(a, b) ((a) > (b) ? (a) : (b))
#define ACCPY_NEON_IMUL(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
ACCPY_NEON_HREDUCE(accpy_neon_hmul_f32, float32x4_t, float, 4, f32, ACCPY_NEON_MUL)
ACCPY_NEON_HREDUCE(accpy_neon_hmin_f32, float32x4_t, float, 4, f32, ACCPY_NEON_MIN)
ACCPY_NEON_HREDUCE(accpy_neon_hmax_f32, float32x4_t, float, 4, f32, ACCPY_NEON_MAX)
ACCPY_NEON_HREDUCE(accpy_neon_hmul_s32, int32x4_t, int32_t, 4, s32, ACCPY_NEON_IMUL)
"""

_CMP = {"lt": "vcltq", "le": "vcleq", "gt": "vcgtq", "ge": "vcgeq", "eq": "vceqq"}


def _common(sfx: str, mask: str) -> dict:
    """The templates every 4-lane shape has: memory (masked lane by lane), compares, select."""
    ops = {
        "mask": mask,
        "load": f"vld1q_{sfx}({{p}})",
        "mload": f"accpy_neon_mload_{sfx}({{p}}, {{m}})",
        "store": f"vst1q_{sfx}({{p}}, {{a}})",
        "mstore": f"accpy_neon_mstore_{sfx}({{p}}, {{m}}, {{a}})",
        "set1": f"vdupq_n_{sfx}({{a}})",
        "zero": f"vdupq_n_{sfx}(0)",
        "select": f"vbslq_{sfx}({{m}}, {{a}}, {{b}})",
        # C's != is true when either operand is NaN: the complement of ==
        "cmp_ne": f"vmvnq_u32(vceqq_{sfx}({{a}}, {{b}}))",
    }
    for k, v in _CMP.items():
        ops["cmp_" + k] = f"{v}_{sfx}({{a}}, {{b}})"
    return ops


def _strided(sfx: str) -> dict:
    every = "accpy_neon_mask32(4)"
    return {"gather": f"accpy_neon_mgather_{sfx}({{p}}, {{s}}, {every})",
            "mgather": f"accpy_neon_mgather_{sfx}({{p}}, {{s}}, {{m}})",
            "scatter": f"accpy_neon_mscatter_{sfx}({{p}}, {{s}}, {every}, {{a}})",
            "mscatter": f"accpy_neon_mscatter_{sfx}({{p}}, {{s}}, {{m}}, {{a}})"}


def _float32() -> VectorISA:
    ops = {
        **_common("f32", "accpy_neon_mask32({n})"),
        "add": "vaddq_f32({a}, {b})",
        "sub": "vsubq_f32({a}, {b})",
        "mul": "vmulq_f32({a}, {b})",
        "div": "vdivq_f32({a}, {b})",
        "min": "vbslq_f32(vcltq_f32({a}, {b}), {a}, {b})",
        "max": "vbslq_f32(vcgtq_f32({a}, {b}), {a}, {b})",
        # FMLA: {c} + {a} * {b}, one rounding
        "fma": "vfmaq_f32({c}, {a}, {b})",
        "sqrt": "vsqrtq_f32({a})",
        "abs": "vabsq_f32({a})",
        "neg": "vnegq_f32({a})",
        "hadd": "vaddvq_f32({a})",
        "hmul": "accpy_neon_hmul_f32({a})",
        "hmin": "accpy_neon_hmin_f32({a})",
        "hmax": "accpy_neon_hmax_f32({a})",
        "from_int32": "vcvtq_f32_s32({a})",
    }
    # round half to even (FRINTN), as the scalar code's nearbyint
    return VectorISA("neon", F32, 4, "float32x4_t", ops, ("asimd",), {**_strided("f32"), "round": "vrndnq_f32({a})"})


def _int32() -> VectorISA:
    ops = {
        **_common("s32", "accpy_neon_mask32({n})"),
        "add": "vaddq_s32({a}, {b})",
        "sub": "vsubq_s32({a}, {b})",
        "mul": "vmulq_s32({a}, {b})",
        "min": "vminq_s32({a}, {b})",
        "max": "vmaxq_s32({a}, {b})",
        "and": "vandq_s32({a}, {b})",
        "or": "vorrq_s32({a}, {b})",
        "xor": "veorq_s32({a}, {b})",
        "abs": "vabsq_s32({a})",
        "neg": "vnegq_s32({a})",
        "hadd": "vaddvq_s32({a})",
        "hmul": "accpy_neon_hmul_s32({a})",
        "hmin": "vminvq_s32({a})",
        "hmax": "vmaxvq_s32({a})",
        # FCVTZS: toward zero, saturating, NaN -> 0 (the scalar cast's meaning in accpy)
        "from_float32": "vcvtq_s32_f32({a})",
    }
    extra = {**_strided("s32"),
             # SDOT / UDOT: {c} plus, per int32 lane, the four products of a quad of bytes
             "sdot4": "vdotq_s32({c}, {a}, {b})",
             "udot4": "vreinterpretq_s32_u32(vdotq_u32(vreinterpretq_u32_s32({c}), {a}, {b}))"}
    return VectorISA("neon", I32, 4, "int32x4_t", ops, ("asimd",), extra)


def _bytes(dtype: ScalarType) -> VectorISA:
    """16 bytes read as a dot product's operand: a load, a masked one, a quad of 4 bytes repeated in
    every 32-bit slot (`bcast`; `bcast_part`: only its first {n} bytes read), partial groups."""
    sfx, ctype = ("s8", "int8x16_t") if dtype is I8 else ("u8", "uint8x16_t")
    return VectorISA("neon", dtype, 16, ctype, {
        "mask": "accpy_neon_mask8({n})",
        "load": f"vld1q_{sfx}({{p}})",
        "mload": f"accpy_neon_mload_{sfx}({{p}}, {{m}})",
        "bcast": f"vreinterpretq_{sfx}_s32(vdupq_n_s32(accpy_load_i32((const void*)({{p}}))))",
        "bcast_part": f"vreinterpretq_{sfx}_s32(vdupq_n_s32(accpy_load_i32_part((const void*)({{p}}), {{n}})))",
        "mload_groups": f"accpy_neon_mload_groups_{sfx}({{p}}, {{g}}, {{k}}, {{n}})",
    }, ("asimd",))


SHAPES = {F32: _float32(), I32: _int32()}
OPERAND_SHAPES = {I8: _bytes(I8), U8: _bytes(U8)}

# AArch64's dot products (Armv8.2-A's dot product extension, "asimddp"): SDOT (int8 x int8) and UDOT
# (uint8 x uint8) quads into int32 lanes, adding into the accumulator; an operand may be one quad
# repeated in every lane (A's row in C[i, j] += A[i, k] * B[k, j] with B grouped by 4 k)
DOT_PRODUCTS = (
    DotProduct("sdot4", 4, I32, (I8, I8), True, (0, 4)),
    DotProduct("udot4", 4, I32, (U8, U8), True, (0, 4)),
)
DOT_FEATURES = ("asimddp",)
