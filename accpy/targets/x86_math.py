"""Vector math for the x86 library: exp, fast_exp, fast_exp_mlas, log, tanh (and floor, ceil) on
float32 lanes of AVX2 and AVX-512, as C templates (GNU statement expressions of intrinsics).

Each function is written once over a small table of the ISA's operations (`_Ops`) and accpy's own
polynomials; the accuracy each reaches (measured against numpy by tests/codegen/test_vector_math.py):

- exp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, a degree-7 Taylor polynomial and 2^n applied
  in two steps (results in the subnormal range are right too): within 2 ulp; inf for x > 88.73,
  0 below -103.98, NaN stays NaN.
- fast_exp, fast_exp_mlas (Accera's faster exponentials): the same with a degree-5 polynomial, within
  a relative error of 4e-6 (about 32 ulp), special values as exp.
- log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m from s = (m-1)/(m+1) by an odd series in s:
  within 2 ulp; log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, subnormal x handled.
- tanh: (e^{2|x|} - 1) / (e^{2|x|} + 1) with e^y - 1 computed without cancellation (its reduced
  polynomial has no constant term), the sign of x restored: within 4 ulp.
"""
from __future__ import annotations

from ..ir.types import ScalarType


class _Ops:
    """The intrinsics of one float32 register shape, as C text builders."""

    def __init__(self, w: int):
        self.w = w
        self.p = "_mm512" if w == 512 else "_mm256"
        self.vt = "__m512" if w == 512 else "__m256"
        self.vi = "__m512i" if w == 512 else "__m256i"
        self.mt = "__mmask16" if w == 512 else "__m256"

    def c(self, v: float) -> str:
        return f"{self.p}_set1_ps({v!r}f)"

    def ci(self, v: int) -> str:
        return f"{self.p}_set1_epi32({v})"

    def op(self, name: str, *args) -> str:
        return f"{self.p}_{name}_ps({', '.join(args)})"

    def fma(self, a, b, c) -> str:
        return self.op("fmadd", a, b, c)

    def cmp(self, a, b, pred: str) -> str:
        if self.w == 512:
            return f"_mm512_cmp_ps_mask({a}, {b}, {pred})"
        return f"_mm256_cmp_ps({a}, {b}, {pred})"

    def select(self, mask, a, b) -> str:
        """`mask ? a : b` lane by lane."""
        if self.w == 512:
            return f"_mm512_mask_blend_ps({mask}, {b}, {a})"
        return f"_mm256_blendv_ps({b}, {a}, {mask})"

    def as_int(self, a) -> str:
        return f"{self.p}_castps_si{self.w}({a})"

    def as_float(self, a) -> str:
        return f"{self.p}_castsi{self.w}_ps({a})"

    def iop(self, name: str, *args) -> str:
        if name in ("and", "or", "xor"):
            return f"{self.p}_{name}_si{self.w}({', '.join(args)})"
        return f"{self.p}_{name}_epi32({', '.join(args)})"

    def round(self, a, mode: str) -> str:
        """Lanes rounded to integral values; mode "NEAREST_INT" (half to even), "NEG_INF" or "POS_INF"."""
        how = f"_MM_FROUND_TO_{mode} | _MM_FROUND_NO_EXC"
        return f"_mm512_roundscale_ps({a}, {how})" if self.w == 512 else f"_mm256_round_ps({a}, {how})"

    def pow2(self, n) -> str:
        """2^n for integral float lanes n in [-126, 127]."""
        return self.as_float(self.iop("slli", self.iop("add", f"{self.p}_cvtps_epi32({n})", self.ci(127)), "23"))

    def scale(self, p, n) -> str:
        """p * 2^n (n integral, in [-150, 128]): in two steps, so that subnormal results round once."""
        if self.w == 512:
            return f"_mm512_scalef_ps({p}, {n})"
        return (f"({{ {self.vt} h_ = _mm256_floor_ps(_mm256_mul_ps({n}, {self.c(0.5)})); "
                f"_mm256_mul_ps(_mm256_mul_ps({p}, {self.pow2('h_')}), {self.pow2(self.op('sub', n, 'h_'))}); }})")


_LOG2E = 1.4426950408889634
_LN2_HI, _LN2_LO = 0.693145751953125, 1.4286068203094173e-06  # ln2_hi has 16 bits: n * ln2_hi is exact


def _horner(o: _Ops, x: str, coefs) -> str:
    """c0 + x (c1 + x (c2 + ...)) with FMAs (coefs from c0)."""
    acc = o.c(coefs[-1])
    for c in reversed(coefs[:-1]):
        acc = o.fma(acc, x, o.c(c))
    return acc


def _exp(o: _Ops, degree: int) -> str:
    coefs = [1.0]
    f = 1.0
    for k in range(1, degree + 1):
        f *= k
        coefs.append(1.0 / f)
    vt = o.vt
    return (f"({{ {vt} x_ = ({{a}}); "
            f"{vt} xc_ = {o.op('min', o.op('max', 'x_', o.c(-104.0)), o.c(89.0))}; "
            f"{vt} n_ = {o.round(o.op('mul', 'xc_', o.c(_LOG2E)), 'NEAREST_INT')}; "
            f"{vt} r_ = {o.fma('n_', o.c(-_LN2_HI), 'xc_')}; "
            f"r_ = {o.fma('n_', o.c(-_LN2_LO), 'r_')}; "
            f"{vt} p_ = {_horner(o, 'r_', coefs)}; "
            f"{vt} e_ = {o.scale('p_', 'n_')}; "
            f"{o.select(o.cmp('x_', 'x_', '_CMP_UNORD_Q'), 'x_', 'e_')}; }})")


_LOG_HI, _LOG_LO = 0.693359375, -2.1219444005469057e-04  # ln2 = hi + lo; hi has 9 bits


def _log(o: _Ops) -> str:
    vt, vi = o.vt, o.vi
    # log m = 2 (s + s^3/3 + s^5/5 + ...), s = (m - 1) / (m + 1), |s| <= 0.1716
    series = [2.0, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9]
    tiny = o.cmp("x_", o.c(1.1754943508222875e-38), "_CMP_LT_OQ")
    expo = f"{o.p}_cvtepi32_ps({o.iop('sub', o.iop('srli', 'b_', '23'), o.ci(127))})"
    e_first = o.op("sub", expo, o.select(tiny, o.c(23.0), o.c(0.0)))
    return (f"({{ {vt} x_ = ({{a}}); "
            f"{vt} xs_ = {o.select(tiny, o.op('mul', 'x_', o.c(8388608.0)), 'x_')}; "
            f"{vi} b_ = {o.as_int('xs_')}; "
            f"{vt} e_ = {e_first}; "
            f"{vt} m_ = {o.as_float(o.iop('or', o.iop('and', 'b_', o.ci(0x007FFFFF)), o.ci(0x3F800000)))}; "
            f"{'__mmask16' if o.w == 512 else vt} big_ = {o.cmp('m_', o.c(1.4142135623730951), '_CMP_GT_OQ')}; "
            f"m_ = {o.select('big_', o.op('mul', 'm_', o.c(0.5)), 'm_')}; "
            f"e_ = {o.op('add', 'e_', o.select('big_', o.c(1.0), o.c(0.0)))}; "
            f"{vt} s_ = {o.op('div', o.op('sub', 'm_', o.c(1.0)), o.op('add', 'm_', o.c(1.0)))}; "
            f"{vt} s2_ = {o.op('mul', 's_', 's_')}; "
            f"{vt} lm_ = {o.op('mul', 's_', _horner(o, 's2_', series))}; "
            f"{vt} r_ = {o.fma('e_', o.c(_LOG_HI), o.fma('e_', o.c(_LOG_LO), 'lm_'))}; "
            f"r_ = {o.select(o.cmp('x_', o.c(0.0), '_CMP_EQ_OQ'), o.c(float('-inf')).replace('-inff', '-INFINITY'), 'r_')}; "
            f"r_ = {o.select(o.cmp('x_', o.c(float('inf')).replace('inff', 'INFINITY'), '_CMP_EQ_OQ'), 'x_', 'r_')}; "
            f"{o.select(o.cmp('x_', o.c(0.0), '_CMP_NGE_UQ'), o.c(0.0).replace('0.0f', 'NAN'), 'r_')}; }})")


def _tanh(o: _Ops) -> str:
    vt = o.vt
    # e^y - 1 = 2^n (e^r - 1) + (2^n - 1), e^r - 1 = r (1 + r/2 + r^2/6 + ...): no cancellation near 0
    coefs = []
    f = 1.0
    for k in range(1, 9):
        f *= k
        coefs.append(1.0 / f)
    sign = o.as_float(o.ci(-2147483648))
    return (f"({{ {vt} x_ = ({{a}}); "
            f"{vt} t_ = {o.op('andnot', sign, 'x_')}; "
            f"{vt} y_ = {o.op('min', o.op('add', 't_', 't_'), o.c(20.0))}; "
            f"{vt} n_ = {o.round(o.op('mul', 'y_', o.c(_LOG2E)), 'NEAREST_INT')}; "
            f"{vt} r_ = {o.fma('n_', o.c(-_LN2_HI), 'y_')}; "
            f"r_ = {o.fma('n_', o.c(-_LN2_LO), 'r_')}; "
            f"{vt} q_ = {o.op('mul', 'r_', _horner(o, 'r_', coefs))}; "
            f"{vt} p2_ = {o.pow2('n_')}; "
            f"{vt} em1_ = {o.fma('p2_', 'q_', o.op('sub', 'p2_', o.c(1.0)))}; "
            f"{vt} th_ = {o.op('div', 'em1_', o.op('add', 'em1_', o.c(2.0)))}; "
            f"th_ = {o.op('or', 'th_', o.op('and', sign, 'x_'))}; "
            f"{o.select(o.cmp('x_', 'x_', '_CMP_UNORD_Q'), 'x_', 'th_')}; }})")


def math_templates(width: int) -> dict:
    """Templates (`{a}`: the operand) of the float32 vector math functions for 256- or 512-bit lanes."""
    o = _Ops(width)
    exp = _exp(o, 7)
    fast = _exp(o, 5)

    def escape(t: str) -> str:  # str.format keeps only {a}
        return t.replace("{", "{{").replace("}", "}}").replace("{{a}}", "{a}")

    out = {"exp": escape(exp), "fast_exp": escape(fast), "fast_exp_mlas": escape(fast), "log": escape(_log(o)),
           "tanh": escape(_tanh(o)), "floor": o.round("{a}", "NEG_INF"), "ceil": o.round("{a}", "POS_INF")}
    return out


#: functions the vectorizer may emit as VCall when the shape has a template for them
VECTOR_MATH = ("sqrt", "abs", "round", "floor", "ceil", "exp", "fast_exp", "fast_exp_mlas", "log", "tanh")


def add_math(library: dict) -> None:
    """Add the math templates to the float32 shapes of the x86 library (`LIBRARY` of x86.py)."""
    for (isa, dtype), shape in library.items():
        if dtype is ScalarType.float32 and isa in ("avx2", "avx512"):
            shape.extra.update(math_templates(512 if isa == "avx512" else 256))
