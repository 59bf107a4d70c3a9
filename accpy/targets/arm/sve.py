"""AArch64 SVE register shapes at a vector length fixed when compiling (`-msve-vector-bits`, the
target's `vector_bytes`: 32 for 256-bit SVE, e.g. acc.Target("Neoverse V1")): float64, float32,
int32 and the int8 / uint8 operands of SVE's SDOT / UDOT.

The shapes are scalable (`VectorShape.scalable`: `svcntw()` lanes of 32 bits, ...); their `lanes`
count those of the length compiled for. Tails are predicated: a mask is an `svbool_t` (`svwhilelt`: the first {n} lanes), and masked loads
and stores, gathers and scatters touch only the active lanes. Operations on whole registers run
under an all-true predicate. Code for one vector length runs only on CPUs of that length (the
toolchain's guard checks it at every call, with RDVL).
"""
from __future__ import annotations

from ...ir.types import ScalarType
from ..vector_isa import VectorShape

F64, F32, I32, I8, U8 = ScalarType.float64, ScalarType.float32, ScalarType.int32, ScalarType.int8, ScalarType.uint8
# element type -> (suffix, C element type, vector type, predicate width, index type for gathers)
_TYPES = {F64: ("f64", "double", "svfloat64_t", "b64", "s64"), F32: ("f32", "float", "svfloat32_t", "b32", "s32"),
          I32: ("s32", "int32_t", "svint32_t", "b32", "s32"), I8: ("s8", "int8_t", "svint8_t", "b8", "s8"),
          U8: ("u8", "uint8_t", "svuint8_t", "b8", "u8")}
# the lane count of a predicate width at run time (the register length is the CPU's: SVE is scalable)
_COUNT = {"b64": "svcntd()", "b32": "svcntw()", "b16": "svcnth()", "b8": "svcntb()"}
_CMP = {"lt": "svcmplt", "le": "svcmple", "gt": "svcmpgt", "ge": "svcmpge", "eq": "svcmpeq",
        "ne": "svcmpne"}  # (FCMNE is true on NaN, as C's !=)


def prelude(vector_bytes: int) -> str:
    """<arm_sve.h> and the reductions that combine lanes in order, for `vector_bytes`-byte vectors."""
    out = ["#ifndef ACCPY_SVE_PRELUDE", "#define ACCPY_SVE_PRELUDE", "#include <arm_sve.h>",
           "#define ACCPY_SVE static inline __attribute__((always_inline, unused))"]
    for t in (F64, F32, I32):
        sfx, ct, vt, b, _ = _TYPES[t]
        n = vector_bytes * 8 // t.bits
        for op, comb in (("hmul", "r * x"), ("hmin", "r < x ? r : x"), ("hmax", "r > x ? r : x")):
            if t is I32 and op != "hmul":
                continue
            if t is I32:
                comb = "(int32_t)((uint32_t)r * (uint32_t)x)"
            out.append(f"ACCPY_SVE {ct} accpy_sve_{op}_{sfx}({vt} v) {{ {ct} t[{n}]; svst1_{sfx}(svptrue_{b}(), t, v); "
                       f"{ct} r = t[0]; for (int l = 1; l < {n}; ++l) {{ {ct} x = t[l]; r = {comb}; }} return r; }}")
    return "\n".join(out + ["#endif"]) + "\n"


def _shape(dtype: ScalarType, vector_bytes: int) -> VectorShape:
    sfx, ct, vt, b, ix = _TYPES[dtype]
    lanes = vector_bytes * 8 // dtype.bits
    pg = f"svptrue_{b}()"
    ops = {
        "mask": f"svwhilelt_{b}((int64_t)0, (int64_t)({{n}}))",
        "load": f"svld1_{sfx}({pg}, (const {ct}*)({{p}}))",
        "mload": f"svld1_{sfx}({{m}}, (const {ct}*)({{p}}))",
        "store": f"svst1_{sfx}({pg}, ({ct}*)({{p}}), {{a}})",
        "mstore": f"svst1_{sfx}({{m}}, ({ct}*)({{p}}), {{a}})",
        "set1": f"svdup_n_{sfx}(({ct})({{a}}))",
        "zero": f"svdup_n_{sfx}(0)",
        "select": f"svsel_{sfx}({{m}}, {{a}}, {{b}})",
    }
    if dtype in (I8, U8):  # the dot products' operands
        ops.update({
            "bcast": f"svreinterpret_{sfx}_s32(svdup_n_s32(accpy_load_i32((const void*)({{p}}))))",
            "bcast_part": f"svreinterpret_{sfx}_s32(svdup_n_s32(accpy_load_i32_part((const void*)({{p}}), {{n}})))",
            # the lanes l with l % g < k (and l < n when n >= 0)
            "mload_groups": (f"svld1_{sfx}(svand_b_z({pg}, svcmplt_n_u8({pg}, svand_n_u8_x({pg}, svindex_u8(0, 1), "
                             f"(uint8_t)({{g}} - 1)), (uint8_t)({{k}})), ({{n}}) < 0 ? {pg} : "
                             f"svwhilelt_b8((int64_t)0, (int64_t)({{n}}))), (const {ct}*)({{p}}))"),
        })
        return VectorShape("sve", dtype, lanes, vt, ops, ("sve",), scalable=_COUNT[b])
    for k, v in _CMP.items():
        ops["cmp_" + k] = f"{v}_{sfx}({pg}, {{a}}, {{b}})"
    for op in ("add", "sub", "mul"):
        ops[op] = f"sv{op}_{sfx}_x({pg}, {{a}}, {{b}})"
    ops.update({
        "fma": f"svmla_{sfx}_x({pg}, {{c}}, {{a}}, {{b}})",  # {c} + {a} * {b}: FMLA, one rounding
        "abs": f"svabs_{sfx}_x({pg}, {{a}})",
        "neg": f"svneg_{sfx}_x({pg}, {{a}})",
        "hmul": f"accpy_sve_hmul_{sfx}({{a}})",
    })
    idx = f"svindex_{ix}(0, ({'int64_t' if ix == 's64' else 'int32_t'})({{s}}))"
    extra = {"gather": f"svld1_gather_{ix}index_{sfx}({pg}, (const {ct}*)({{p}}), {idx})",
             "mgather": f"svld1_gather_{ix}index_{sfx}({{m}}, (const {ct}*)({{p}}), {idx})",
             "scatter": f"svst1_scatter_{ix}index_{sfx}({pg}, ({ct}*)({{p}}), {idx}, {{a}})",
             "mscatter": f"svst1_scatter_{ix}index_{sfx}({{m}}, ({ct}*)({{p}}), {idx}, {{a}})"}
    if dtype.is_float:
        ops.update({
            "div": f"svdiv_{sfx}_x({pg}, {{a}}, {{b}})",
            # C's a < b ? a : b (FMIN's NaN rule differs)
            "min": f"svsel_{sfx}(svcmplt_{sfx}({pg}, {{a}}, {{b}}), {{a}}, {{b}})",
            "max": f"svsel_{sfx}(svcmpgt_{sfx}({pg}, {{a}}, {{b}}), {{a}}, {{b}})",
            "sqrt": f"svsqrt_{sfx}_x({pg}, {{a}})",
            "hadd": f"svaddv_{sfx}({pg}, {{a}})",
            "hmin": f"accpy_sve_hmin_{sfx}({{a}})",
            "hmax": f"accpy_sve_hmax_{sfx}({{a}})",
        })
        extra["round"] = f"svrintn_{sfx}_x({pg}, {{a}})"  # half to even
        if dtype is F32:
            ops["from_int32"] = f"svcvt_f32_s32_x({pg}, {{a}})"
            extra["bfdot2"] = "svbfdot_f32({c}, {a}, {b})"  # BFDOT: bfloat16 pairs into float32
    else:
        ops.update({
            "min": f"svmin_{sfx}_x({pg}, {{a}}, {{b}})",
            "max": f"svmax_{sfx}_x({pg}, {{a}}, {{b}})",
            "and": f"svand_{sfx}_x({pg}, {{a}}, {{b}})",
            "or": f"svorr_{sfx}_x({pg}, {{a}}, {{b}})",
            "xor": f"sveor_{sfx}_x({pg}, {{a}}, {{b}})",
            "hadd": f"(int32_t)svaddv_{sfx}({pg}, {{a}})",  # (a 64-bit sum: its low 32 bits wrap as int32 does)
            "hmin": f"svminv_{sfx}({pg}, {{a}})",
            "hmax": f"svmaxv_{sfx}({pg}, {{a}})",
            # FCVTZS: toward zero, saturating, NaN -> 0
            "from_float32": f"svcvt_s32_f32_x({pg}, {{a}})",
        })
        extra["sdot4"] = "svdot_s32({c}, {a}, {b})"
        extra["udot4"] = "svreinterpret_s32_u32(svdot_u32(svreinterpret_u32_s32({c}), {a}, {b}))"
        extra["usdot4"] = "svusdot_s32({c}, {a}, {b})"
    return VectorShape("sve", dtype, lanes, vt, ops, ("sve",), extra, scalable=_COUNT[b])


def _bf16_operands(vector_bytes: int) -> VectorShape:
    """bfloat16 lanes as BFDOT's operands (kept as 16-bit patterns): loads, a repeated pair, partial pairs."""
    pg = "svptrue_b16()"
    bf = "svreinterpret_bf16_u16({x})"
    return VectorShape("sve", ScalarType.bfloat16, vector_bytes // 2, "svbfloat16_t", {
        "mask": "svwhilelt_b16((int64_t)0, (int64_t)({n}))",
        "load": bf.format(x=f"svld1_u16({pg}, (const uint16_t*)({{p}}))"),
        "mload": bf.format(x="svld1_u16({m}, (const uint16_t*)({p}))"),
        "bcast": "svreinterpret_bf16_s32(svdup_n_s32(accpy_load_i32((const void*)({p}))))",
        "bcast_part": "svreinterpret_bf16_s32(svdup_n_s32(accpy_load_i32_part((const void*)({p}), {n})))",
        "mload_groups": bf.format(x=(f"svld1_u16(svand_b_z({pg}, svcmplt_n_u16({pg}, svand_n_u16_x({pg}, "
                                     f"svindex_u16(0, 1), (uint16_t)({{g}} - 1)), (uint16_t)({{k}})), ({{n}}) < 0 ? "
                                     f"{pg} : svwhilelt_b16((int64_t)0, (int64_t)({{n}}))), (const uint16_t*)({{p}}))")),
    }, ("sve", "bf16"), scalable=_COUNT["b16"])


_SHAPES: dict = {}


def sve_shape(dtype: ScalarType, vector_bytes: int):
    """The SVE shape of `dtype` at `vector_bytes`-byte vectors, or None (a type SVE shapes lack here)."""
    if dtype not in _TYPES and dtype is not ScalarType.bfloat16:
        return None
    key = (dtype, vector_bytes)
    if key not in _SHAPES:
        _SHAPES[key] = _bf16_operands(vector_bytes) if dtype is ScalarType.bfloat16 else _shape(dtype, vector_bytes)
    return _SHAPES[key]


def uses_sve(target) -> bool:
    """Whether code for `target` uses SVE registers: SVE and vectors wider than Neon's 16 bytes."""
    return target.has("sve") and target.vector_bytes > 16 and target.vector_bytes % 16 == 0 \
        and target.vector_bytes <= 256
