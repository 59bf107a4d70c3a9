"""x86 vector shapes of narrow integers (int8, uint8, int16, uint16) in their own lanes: 64 / 32
lanes in a zmm register (AVX-512BW), 32 / 16 in a ymm one (AVX2), 16 / 8 in an xmm one (SSE4.1).

They join accpy/targets/x86.py's shapes in `NARROW` (registry.py joins them, `x86.add_shapes`; kept apart from `LIBRARY`, whose shapes are
wider types), with the same placeholders and meanings (accpy/ir/vector.py): `+`, `-` and `*` wrap
around as the scalar code does (two's complement, the low bits of the exact result), `min`, `max`
and the comparisons follow the signedness of the type (VPMINUB for uint8, VPMINSB for int8, ...),
`abs` of the most negative value is itself (as the scalar cast of its absolute value). x86 has no
byte multiply: the int8 product is two 16-bit products (the even bytes, the odd bytes shifted
down), each keeping its low byte. The ISA has no saturating `+` in the nest language to map onto,
so none is offered. AVX2 and SSE compare signed integers only: an unsigned compare flips the sign
bits of both operands first. Masked loads and stores, strided accesses and horizontal reductions
go lane by lane (x86lanes.py) where the ISA has no instruction. Every template is run against
numpy (AVX2, SSE4.1) or compiled for a named AVX-512 model by tests/targets/test_narrow_int_vectors.py.
"""
from __future__ import annotations

from ..ir.types import ScalarType
from .x86 import _CMP_INT, X86Shape
from .x86lanes import Lanes

I8, U8, I16, U16 = ScalarType.int8, ScalarType.uint8, ScalarType.int16, ScalarType.uint16
# element type -> (C type, bits, signed, the same-width type of the other signedness)
_TYPES = {I8: ("int8_t", 8, True, U8), U8: ("uint8_t", 8, False, I8),
          I16: ("int16_t", 16, True, U16), U16: ("uint16_t", 16, False, I16)}
# the C type set1 converts a scalar to (a value of the type, taken modulo 2^bits)
_SCALAR = {8: "char", 16: "short"}


def _common(dtype: ScalarType, pre: str, si: str) -> dict:
    """The operations every width writes alike: `pre` the intrinsics' prefix (_mm512, _mm256, _mm),
    `si` the suffix of whole-register operations (si512, si256, si128)."""
    ctype, bits, signed, other = _TYPES[dtype]
    e = f"epi{bits}"
    u = e if signed else f"epu{bits}"
    ops = {
        "set1": f"{pre}_set1_{e}(({_SCALAR[bits]})({{a}}))",
        "zero": f"{pre}_setzero_{si}()",
        "add": f"{pre}_add_{e}({{a}}, {{b}})",
        "sub": f"{pre}_sub_{e}({{a}}, {{b}})",
        "min": f"{pre}_min_{u}({{a}}, {{b}})",
        "max": f"{pre}_max_{u}({{a}}, {{b}})",
        "and": f"{pre}_and_{si}({{a}}, {{b}})",
        "or": f"{pre}_or_{si}({{a}}, {{b}})",
        "xor": f"{pre}_xor_{si}({{a}}, {{b}})",
        # an unsigned value is its own absolute value
        "abs": f"{pre}_abs_{e}({{a}})" if signed else "({a})",
        "neg": f"{pre}_sub_{e}({pre}_setzero_{si}(), {{a}})",
        # the other signedness of the same width: the same bits (the scalar cast wraps)
        "from_" + other.name: "({a})",
    }
    if bits == 16:
        ops["mul"] = f"{pre}_mullo_epi16({{a}}, {{b}})"
    return ops


def _byte_product(pre: str, vtype: str, combine: str) -> str:
    """int8 lanes multiplied (low byte of each product): the even bytes' 16-bit products keep their
    low byte in place, the odd bytes' (each shifted down) are shifted back up; `combine` joins
    the two ({e} even, {o} odd products shifted up). Operands are evaluated once."""
    return ("__extension__({{ " + f"{vtype} accpy_ma_ = ({{a}}); {vtype} accpy_mb_ = ({{b}}); "
            f"{vtype} accpy_e_ = {pre}_mullo_epi16(accpy_ma_, accpy_mb_); "
            f"{vtype} accpy_o_ = {pre}_slli_epi16({pre}_mullo_epi16({pre}_srli_epi16(accpy_ma_, 8), "
            f"{pre}_srli_epi16(accpy_mb_, 8)), 8); "
            + combine.format(e="accpy_e_", o="accpy_o_") + "; }})")


def _avx512(dtype: ScalarType) -> X86Shape:
    """64 x 8-bit or 32 x 16-bit lanes in a zmm register; masks are mask registers."""
    ctype, bits, signed, _ = _TYPES[dtype]
    lanes = 512 // bits
    e, u = f"epi{bits}", (f"epi{bits}" if signed else f"epu{bits}")
    mtype = f"__mmask{lanes}"
    # the mask of the first {n} lanes (n = 64 too: a 64-bit shift by 64 is undefined)
    mask = (f"(({mtype})(({{n}}) >= 64 ? ~0ull : (1ull << ({{n}})) - 1ull))" if lanes == 64 else
            f"(({mtype})((1ull << ({{n}})) - 1ull))")
    by_lane = Lanes(ctype, lanes, "__m512i", "_mm512_loadu_si512((const void*)accpy_t_)",
                    "_mm512_storeu_si512((void*)accpy_t_, accpy_v_)", "(unsigned long long)({m})")
    ops = {
        "mask": mask,
        "load": "_mm512_loadu_si512((const void*)({p}))",
        "mload": f"_mm512_maskz_loadu_{e}({{m}}, (const void*)({{p}}))",
        "store": "_mm512_storeu_si512((void*)({p}), {a})",
        "mstore": f"_mm512_mask_storeu_{e}((void*)({{p}}), {{m}}, {{a}})",
        **_common(dtype, "_mm512", "si512"),
        "select": f"_mm512_mask_blend_{e}({{m}}, {{b}}, {{a}})",
        **by_lane.reductions(wrap=True),
    }
    if bits == 8:  # odd bytes from the shifted products: bits 1, 3, 5, ... of the blend mask
        ops["mul"] = _byte_product("_mm512", "__m512i", "_mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaull, {e}, {o})")
    for k, v in _CMP_INT.items():
        ops["cmp_" + k] = f"_mm512_cmp_{u}_mask({{a}}, {{b}}, {v})"
    # a dot product's operands (VPMADDWD's int16 pairs, VPDPBUSD's byte quads): `bcast`, the 32
    # bits at {p} in every 32-bit slot (one pair or quad for all lanes); `bcast_part`, only its
    # first {n} bytes read (the rest 0)
    extra = {"bcast": "_mm512_set1_epi32(accpy_load_i32((const void*)({p})))",
             "bcast_part": "_mm512_set1_epi32(accpy_load_i32_part((const void*)({p}), {n}))",
             **by_lane.strided_reads(), **by_lane.strided_writes()}
    return X86Shape("avx512", dtype, lanes, "__m512i", ops, ("avx512f", "avx512bw"), extra)


def _vector_masked(dtype: ScalarType, name: str, pre: str, si: str, features: tuple) -> X86Shape:
    """AVX2 (ymm) or SSE4.1 (xmm) lanes: a mask is a vector with every bit set in its active lanes."""
    ctype, bits, signed, _ = _TYPES[dtype]
    width = 256 if pre == "_mm256" else 128
    lanes = width // bits
    vtype = "__m256i" if width == 256 else "__m128i"
    e = f"epi{bits}"
    iota = ", ".join(str(x) for x in range(lanes))
    ones = f"{pre}_set1_epi32(-1)"
    if bits == 8:
        movemask = f"{pre}_movemask_epi8({{m}})"
    elif width == 128:  # 16-bit lanes: the mask's bytes packed to one per lane first
        movemask = "_mm_movemask_epi8(_mm_packs_epi16({m}, _mm_setzero_si128()))"
    else:
        movemask = "_mm_movemask_epi8(_mm_packs_epi16(_mm256_castsi256_si128({m}), _mm256_extracti128_si256({m}, 1)))"
    by_lane = Lanes(ctype, lanes, vtype, f"{pre}_loadu_{si}((const {vtype}*)accpy_t_)",
                    f"{pre}_storeu_{si}(({vtype}*)accpy_t_, accpy_v_)", movemask)
    ops = {
        "mask": f"{pre}_cmpgt_{e}({pre}_set1_{e}(({_SCALAR[bits]})({{n}})), {pre}_setr_{e}({iota}))",
        "load": f"{pre}_loadu_{si}((const {vtype}*)({{p}}))",
        "store": f"{pre}_storeu_{si}(({vtype}*)({{p}}), {{a}})",
        **by_lane.masked(),
        **_common(dtype, pre, si),
        "select": f"{pre}_blendv_epi8({{b}}, {{a}}, {{m}})",
        **by_lane.reductions(wrap=True),
    }
    if bits == 8:  # the odd bytes from the shifted products, the even ones from the others
        ops["mul"] = _byte_product(pre, vtype, f"{pre}_or_{si}({pre}_and_{si}({{e}}, {pre}_set1_epi16(0xff)), {{o}})")
    if signed:
        a, b = "{a}", "{b}"
    else:  # unsigned order is the signed order of the values with their sign bits flipped
        flip = f"{pre}_set1_{e}(({_SCALAR[bits]})0x{1 << (bits - 1):x})"
        a, b = f"{pre}_xor_{si}({{a}}, {flip})", f"{pre}_xor_{si}({{b}}, {flip})"
    gt, lt = f"{pre}_cmpgt_{e}({a}, {b})", f"{pre}_cmpgt_{e}({b}, {a})"
    eq = f"{pre}_cmpeq_{e}({{a}}, {{b}})"
    # the ISA compares for > and == only: the others are those, swapped or complemented
    ops.update({"cmp_gt": gt, "cmp_lt": lt, "cmp_eq": eq, "cmp_ge": f"{pre}_xor_{si}({lt}, {ones})",
                "cmp_le": f"{pre}_xor_{si}({gt}, {ones})", "cmp_ne": f"{pre}_xor_{si}({eq}, {ones})"})
    extra = {**by_lane.strided_reads(), **by_lane.strided_writes()}
    return X86Shape(name, dtype, lanes, vtype, ops, features, extra)


SHAPES = {}
for _t in _TYPES:
    SHAPES[("avx512", _t)] = _avx512(_t)
    SHAPES[("avx2", _t)] = _vector_masked(_t, "avx2", "_mm256", "si256", ("avx2",))
    SHAPES[("sse", _t)] = _vector_masked(_t, "sse", "_mm", "si128", ("sse4_1",))
