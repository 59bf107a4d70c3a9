"""Narrow integers (int8, uint8, int16, uint16) in vector lanes of their own width: AVX-512BW
(64 / 32 lanes), AVX2 (32 / 16) and SSE4.1 (16 / 8).

Every operation (+, -, * wrapping around; min, max and the six comparisons by signedness; &, |,
^; negation, abs; select; reductions across the lanes) on every type is run on this machine
(acc.Target.HOST, and its 16-byte form) and compared with numpy and with the reference evaluator,
edge values (-128, 127, 255, ...) and tails (extents that are not a multiple of the lanes)
included. The AVX-512BW code is read and compiled (not run: it needs the CPU) for a named model.
An operation the target has no instruction for is refused at `plan.vectorize`, not at build; a
loop mixing narrow and 32-bit values keeps the widened lanes.
"""
from __future__ import annotations

import os
import subprocess
import warnings

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.package.sources import runtime_text
from accpy.testing import run
from support.cpu import cpu_flags

S = acc.ScalarType
NARROW = [S.int8, S.uint8, S.int16, S.uint16]
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)  # AVX-512BW
I7 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)  # AVX2
SSE = acc.Target("HOST", vector_bytes=16)
needs_sse41 = pytest.mark.skipif("sse4_1" not in cpu_flags(), reason="executes SSE4.1 code: this CPU lacks sse4_1")

# C intrinsic prefixes of the shapes
PREFIX = {"avx512": "_mm512_", "avx2": "_mm256_", "sse": "_mm_"}

# name -> (logic over A[i], B[i], numpy of a, b); comparisons pick a or b by the result
OPS = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "min": (lambda a, b: acc.min(a, b), np.minimum),
    "max": (lambda a, b: acc.max(a, b), np.maximum),
    "and": (lambda a, b: a & b, lambda a, b: a & b),
    "or": (lambda a, b: a | b, lambda a, b: a | b),
    "xor": (lambda a, b: a ^ b, lambda a, b: a ^ b),
    "neg": (lambda a, b: -a, lambda a, b: -a),
    "abs": (lambda a, b: acc.abs(a), lambda a, b: np.abs(a) if a.dtype.kind == "i" else a),
    "lt": (lambda a, b: acc.select(a < b, a, b), lambda a, b: np.where(a < b, a, b)),
    "le": (lambda a, b: acc.select(a <= b, b, a), lambda a, b: np.where(a <= b, b, a)),
    "gt": (lambda a, b: acc.select(a > b, a, b - a), lambda a, b: np.where(a > b, a, b - a)),
    "ge": (lambda a, b: acc.select(a >= b, a - b, b), lambda a, b: np.where(a >= b, a - b, b)),
    "eq": (lambda a, b: acc.select(a == b, a + b, a), lambda a, b: np.where(a == b, a + b, a)),
    "ne": (lambda a, b: acc.select(a != b, b, a * b), lambda a, b: np.where(a != b, b, a * b)),
}


def edge_values(dtype: S) -> list:
    """The values where narrow arithmetic wraps or signedness matters, as `dtype` holds them."""
    lo, hi = int(np.iinfo(dtype.dtype).min), int(np.iinfo(dtype.dtype).max)
    vals = [0, 1, -1, 2, lo, hi, lo + 1, hi - 1, 127, -128, 128, 255, 256, -129, 32767, -32768, 65535, 100, -100]
    return sorted({(v - lo) % (hi - lo + 1) + lo for v in vals})  # (wrapped into the type's range)


def operands(dtype: S, n: int, seed: int = 0):
    """a, b of n values: every pair of edge values first (as far as n reaches), then random ones;
    b equals a in every fifth element (so == and != both happen)."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype.dtype)
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype.dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype.dtype)
    e = edge_values(dtype)
    pairs = [(x, y) for x in e for y in e]
    rng.shuffle(pairs)
    for k, (x, y) in enumerate(pairs[:n]):
        a[k], b[k] = x, y
    b[::5] = a[::5]
    return a, b


def elementwise_plan(dtype: S, n: int, target, ops=tuple(OPS)):
    """One vectorized loop: Out_op[i] = op(A[i], B[i]) for every op. Returns (plan, args)."""
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,), name="B")
    outs = {op: acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(n,), name=f"Out_{op}")
            for op in ops}
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        for op, out in outs.items():
            out[i] = OPS[op][0](A[i], B[i])

    plan = nest.create_schedule().create_plan(target)
    plan.vectorize(i)
    return plan, (A, B, *outs.values())


def vector_code(plan) -> str:
    """The plan's C, with no loop left to the C compiler's vectorizer (that would warn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return plan.emit_c()


def compiles(code: str, target, tmp_path) -> None:
    """gcc compiles `code` (a kernel's C) for `target`'s instruction set extensions."""
    src = tmp_path / "kernel.c"
    src.write_text("#include <immintrin.h>\n" + runtime_text() + code)
    r = subprocess.run(["gcc", "-O2", "-c", "-Wall", "-Werror=implicit-function-declaration",
                        *target.compiler_flags(), str(src), "-o", os.devnull], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def check_against_numpy_and_reference(plan, args, data, want: dict):
    got = run(plan, args, data)
    ref = [x.copy() for x in data]
    evaluate(plan.schedule.nests, dict(zip(args, ref)))
    for k, a in enumerate(args):
        if a.name in want:
            np.testing.assert_array_equal(got[k], want[a.name], err_msg=f"{a.name} against numpy")
            np.testing.assert_array_equal(got[k], ref[k], err_msg=f"{a.name} against the reference")


@pytest.mark.parametrize("dtype", NARROW, ids=lambda t: t.name)
@pytest.mark.parametrize("target", [acc.Target.HOST, pytest.param(SSE, marks=needs_sse41)], ids=["host", "sse"])
def test_every_operation_matches_numpy_and_the_reference(dtype, target):
    shape = target.vector_isa.shape(dtype)
    assert shape is not None
    # two whole vectors and a tail of 5 lanes (masked; moved one by one where the ISA has no masks)
    n = 2 * shape.lanes + 5
    plan, args = elementwise_plan(dtype, n, target)
    code = vector_code(plan)
    assert PREFIX[shape.name] + f"add_epi{dtype.bits}" in code
    a, b = operands(dtype, n)
    with np.errstate(over="ignore"):
        want = {f"Out_{op}": f(a, b).astype(dtype.dtype) for op, (_, f) in OPS.items()}
    data = [a, b] + [np.zeros(n, dtype.dtype) for _ in OPS]
    check_against_numpy_and_reference(plan, args, data, want)


@pytest.mark.parametrize("dtype", NARROW, ids=lambda t: t.name)
def test_signedness_picks_the_instruction(dtype):
    """min, max and the comparisons of unsigned lanes are the unsigned instructions (VPMINUB, ...);
    on AVX2 and SSE an unsigned comparison flips the sign bits first; int16 products are VPMULLW."""
    u = "u" if not dtype.is_signed else "i"
    bits = dtype.bits
    code512 = vector_code(elementwise_plan(dtype, 100, AVX512)[0])
    assert f"_mm512_min_ep{u}{bits}" in code512 and f"_mm512_max_ep{u}{bits}" in code512
    assert f"_mm512_cmp_ep{u}{bits}_mask" in code512
    code2 = vector_code(elementwise_plan(dtype, 100, I7)[0])
    assert f"_mm256_min_ep{u}{bits}" in code2 and f"_mm256_max_ep{u}{bits}" in code2
    assert ("_mm256_set1_epi%d((%s)0x%x)" % (bits, "char" if bits == 8 else "short", 1 << (bits - 1)) in code2) \
        == (not dtype.is_signed)
    if bits == 16:
        assert "_mm512_mullo_epi16" in code512 and "_mm256_mullo_epi16" in code2


@pytest.mark.parametrize("dtype", NARROW, ids=lambda t: t.name)
@pytest.mark.parametrize("n", [64, 100])
def test_avx512bw_code_compiles(dtype, n, tmp_path):
    """The AVX-512BW forms for a named model (64 x int8, 32 x int16; masked tails as mask
    registers), compiled with its flags (-mavx512bw ...); this CPU cannot run them."""
    plan, _ = elementwise_plan(dtype, n, AVX512)
    code = vector_code(plan)
    assert f"_mm512_add_epi{dtype.bits}" in code and f"_mm512_sub_epi{dtype.bits}" in code
    assert ("_mm512_mask_storeu_epi" in code) == (n % (512 // dtype.bits) != 0)
    compiles(code, AVX512, tmp_path)


def reduction_plan(dtype: S, n: int, target):
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,), name="A")
    outs = {k: acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(1,), name=k)
            for k in ("Sum", "Prod", "Max", "Min")}
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        outs["Sum"][0] += A[i]
        outs["Prod"][0] *= A[i]
        outs["Max"][0] = acc.max(outs["Max"][0], A[i])
        outs["Min"][0] = acc.min(outs["Min"][0], A[i])

    plan = nest.create_schedule().create_plan(target)
    plan.vectorize(i)
    return plan, (A, *outs.values())


@pytest.mark.parametrize("dtype", NARROW, ids=lambda t: t.name)
@pytest.mark.parametrize("target", [acc.Target.HOST, pytest.param(SSE, marks=needs_sse41)], ids=["host", "sse"])
def test_reductions_across_the_lanes_wrap(dtype, target, tmp_path):
    """Sums and products wrap around (in any order: modular arithmetic), min / max are exact."""
    n = 3 * target.vector_isa.shape(dtype).lanes + 7
    plan, args = reduction_plan(dtype, n, target)
    vector_code(plan)
    a, _ = operands(dtype, n, seed=1)
    a[: n // 2] |= 1  # odd factors: the product is not simply 0
    start = [np.array([v], dtype.dtype) for v in (3, 1, 0, 0)]
    with np.errstate(over="ignore"):
        want = {"Sum": np.array([start[0][0] + a.sum(dtype=dtype.dtype)], dtype.dtype),
                "Prod": np.array([a.prod(dtype=dtype.dtype)], dtype.dtype),
                "Max": np.array([max(0, a.max())], dtype.dtype), "Min": np.array([min(0, a.min())], dtype.dtype)}
    check_against_numpy_and_reference(plan, args, [a] + start, want)
    compiles(vector_code(reduction_plan(dtype, n, AVX512)[0]), AVX512, tmp_path)


@pytest.mark.parametrize("dtype", NARROW, ids=lambda t: t.name)
def test_strided_lanes_and_conditions(dtype):
    """A column of a row-major array (lanes one row apart: moved one by one) and a condition on
    values (every lane computes, then blends)."""
    n, m = 37, 3
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n, m), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(n,), name="O")
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[i] = acc.select(A[i, 1] > A[i, 2], A[i, 1] - A[i, 2], A[i, 0] * A[i, 2])

    plan = nest.create_schedule().create_plan(acc.Target.HOST)
    plan.vectorize(i)
    vector_code(plan)
    a = np.stack([operands(dtype, n, seed=s)[0] for s in range(m)], axis=1)
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    with np.errstate(over="ignore"):
        want = np.where(a1 > a2, a1 - a2, a0 * a2).astype(dtype.dtype)
    check_against_numpy_and_reference(plan, (A, O), [a, np.zeros(n, dtype.dtype)], {"O": want})


@pytest.mark.parametrize("dtype", [S.int8, S.uint8, S.int16], ids=lambda t: t.name)
def test_runtime_sizes_and_split_tails(dtype):
    """Rows of a runtime length N (whole vectors in a loop, then one masked tail, for any N) and a
    split whose last block is partial, on the host."""
    N = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(3, N), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(3, N), name="O")
    nest = acc.Nest(shape=(3, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[i, j] = acc.max(O[i, j] * A[i, j], A[i, j] - O[i, j])

    plan = nest.create_schedule().create_plan(acc.Target.HOST)
    plan.vectorize(j)
    vector_code(plan)
    for n in (0, 1, acc.Target.HOST.vector_isa.shape(dtype).lanes, 77):
        a = np.stack([operands(dtype, n, seed=k)[0] for k in range(3)]) if n else np.zeros((3, 0), dtype.dtype)
        o = np.stack([operands(dtype, n, seed=k)[1] for k in range(3)]) if n else np.zeros((3, 0), dtype.dtype)
        with np.errstate(over="ignore"):
            want = np.maximum(o * a, a - o).astype(dtype.dtype)
        check_against_numpy_and_reference(plan, (A, O, N), [a, o, np.int64(n)], {"O": want})

    M = 45
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(M,), name="B")
    nest2 = acc.Nest(shape=(M,))
    k = nest2.get_indices()

    @nest2.iteration_logic
    def _():
        B[k] = -B[k] + acc.abs(B[k])

    sched = nest2.create_schedule()
    kk = sched.split(k, 16)  # 45 = 2 x 16 + 13
    plan2 = sched.create_plan(acc.Target.HOST)
    plan2.vectorize(kk)
    vector_code(plan2)
    b = operands(dtype, M, seed=9)[0]
    with np.errstate(over="ignore"):
        want = (-b + (np.abs(b) if dtype.is_signed else b)).astype(dtype.dtype)
    check_against_numpy_and_reference(plan2, (B,), [b], {"B": want})


@pytest.mark.parametrize("target", [AVX512, I7, SSE], ids=["avx512", "avx2", "sse"])
@pytest.mark.parametrize("dtype", [S.int8, S.uint16], ids=lambda t: t.name)
def test_a_missing_operation_is_refused_at_vectorize(target, dtype):
    """x86 has no vector integer division, nor byte shifts: the refusal names the index, the
    operation, the element type and the target, when vectorize is called."""
    n = 40
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,), name="B")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(n,), name="O")
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[i] = A[i] + A[i] // B[i]

    plan = nest.create_schedule().create_plan(target)
    with pytest.raises(acc.ScheduleError, match=rf"^vectorize\(i\): target {target.name} has no vector instruction "
                                                rf"for `//` on {dtype.name} \(\w+ lanes\), which statement 1 "):
        plan.vectorize(i)
    # refused calls leave the plan as it was: it builds, scalar
    assert "_mm" not in plan.emit_c()


def test_loops_inside_the_vectorized_one_are_checked_too():
    """A loop inside the vectorized one is unrolled into its lanes: its statements are checked
    as well (a reduction's `*=` into the lanes here: int8 has it, an int8 division not)."""
    A = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(16, 4), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(16,), name="O")
    nest = acc.Nest(shape=(16, 4))
    i, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[i] *= A[i, k]

    plan = nest.create_schedule().create_plan(I7)
    plan.vectorize(i)
    assert "accpy_ma_" in vector_code(plan)  # the byte product

    nest2 = acc.Nest(shape=(16, 4))
    i2, k2 = nest2.get_indices()

    @nest2.iteration_logic
    def _():
        O[i2] = O[i2] % (A[i2, k2] | 1)

    with pytest.raises(acc.ScheduleError, match=r"vectorize\(i2\): .* `%` on int8"):
        nest2.create_schedule().create_plan(I7).vectorize(i2)


@pytest.mark.parametrize("dtype", NARROW, ids=lambda t: t.name)
def test_narrow_values_next_to_int32_keep_the_widened_lanes(dtype, tmp_path):
    """O[i] += int8(A32[i]) mixes widths: on AVX-512 the int8 values travel sign-extended in 32-bit
    lanes (their sum wraps back to 8 bits), as before; the C compiler's loop where there are no
    widened lanes (AVX2). Results against the reference here."""
    n = 37
    A = acc.Array(role=acc.Role.INPUT, element_type=S.int32, shape=(n,), name="A")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(n,), name="O")

    def plan_for(target):
        nest = acc.Nest(shape=(n,))
        (i,) = nest.get_indices()

        @nest.iteration_logic
        def _():
            O[i] += acc.cast(A[i], dtype) * O[i]

        p = nest.create_schedule().create_plan(target)
        p.vectorize(i)
        return p

    code = vector_code(plan_for(AVX512))
    assert "_mm512_add_epi32" in code and "_mm512_mullo_epi32" in code and f"_mm512_cvtepi32_epi{dtype.bits}" in code
    compiles(code, AVX512, tmp_path)
    rng = np.random.default_rng(2)
    a = rng.integers(-2 ** 31, 2 ** 31 - 1, n).astype(np.int32)
    o = operands(dtype, n)[0]
    with np.errstate(over="ignore"):
        want = (o + a.astype(dtype.dtype) * o).astype(dtype.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (AVX2: left to the C compiler, saying so)
        check_against_numpy_and_reference(plan_for(acc.Target.HOST), (A, O), [a, o], {"O": want})


# -- random expressions: refused at vectorize, or built as vector code that matches the reference --

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BUILT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "min": lambda a, b: acc.min(a, b), "max": lambda a, b: acc.max(a, b),
         "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}
# no x86 vector instruction: the loop is refused when vectorize is called
MISSING = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "shl": lambda a, b: a << b}
COMPARE = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
           "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def _trees(missing: bool):
    leaf = st.sampled_from([("load", "A"), ("load", "B"), ("load", "C")])
    binary = sorted(BUILT) + (sorted(MISSING) if missing else [])

    def grow(sub):
        operand = st.one_of(sub, st.integers(0, 100).map(lambda c: ("const", c)))
        return st.one_of(
            st.tuples(st.sampled_from(binary), sub, operand),
            st.tuples(st.sampled_from(["neg", "abs"] + (["invert"] if missing else [])), sub),
            st.tuples(st.just("select"), st.sampled_from(sorted(COMPARE)), sub, operand, sub, sub))

    return st.recursive(leaf, grow, max_leaves=6)


def _value(tree, loads):
    kind = tree[0]
    if kind == "load":
        return loads[tree[1]]
    if kind == "const":
        return tree[1]
    if kind in ("neg", "abs", "invert"):
        a = _value(tree[1], loads)
        return -a if kind == "neg" else acc.abs(a) if kind == "abs" else ~a
    if kind == "select":
        _, cmp, x, y, a, b = tree
        return acc.select(COMPARE[cmp](_value(x, loads), _value(y, loads)), _value(a, loads), _value(b, loads))
    return {**BUILT, **MISSING}[kind](_value(tree[1], loads), _value(tree[2], loads))


def _uses_missing(tree) -> bool:
    if tree[0] in MISSING or tree[0] == "invert":
        return True
    return any(isinstance(t, tuple) and _uses_missing(t) for t in tree[1:])


@pytest.mark.slow
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=_trees(missing=True), dtype=st.sampled_from(NARROW), n=st.integers(1, 80),
       where=st.sampled_from(["host", "sse", "avx512"]), seed=st.integers(0, 2 ** 16))
def test_random_expressions_are_refused_at_vectorize_or_built_right(tree, dtype, n, where, seed, tmp_path):
    target = {"host": acc.Target.HOST, "sse": SSE, "avx512": AVX512}[where]
    arrays = {k: acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,), name=k) for k in "ABC"}
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(n,), name="O")
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[i] = _value(tree, {k: a[i] for k, a in arrays.items()})

    plan = nest.create_schedule().create_plan(target)
    if _uses_missing(tree):
        with pytest.raises(acc.ScheduleError, match=r"vectorize\(i\): target .* has no vector instruction for"):
            plan.vectorize(i)
        return
    plan.vectorize(i)
    code = vector_code(plan)
    if where == "avx512":
        compiles(code, AVX512, tmp_path)
        return
    args = (*arrays.values(), O)
    data = [operands(dtype, n, seed + k)[0] for k in range(3)] + [np.zeros(n, dtype.dtype)]
    got = run(plan, args, data)
    ref = [x.copy() for x in data]
    evaluate(plan.schedule.nests, dict(zip(args, ref)))
    np.testing.assert_array_equal(got[-1], ref[-1])


def _sanitizer_driver(kernels) -> str:
    """C calling each (name, C text, args) kernel once on heap buffers of exactly its arrays' sizes."""
    import re

    parts, calls = ["#include <immintrin.h>", "#include <stdlib.h>", runtime_text()], []
    for name, code, args in kernels:
        parts.append(code.replace(f"void {name}(", f'__attribute__((target("avx2,fma,sse4.1"))) void {name}(', 1))
        sizes_of = {a.name: int(np.prod(a.shape)) for a in args}
        sig = re.search(rf"void {name}\((.*?)\)", code).group(1)
        params = re.findall(r"(\w+_t)\* ACCPY_RESTRICT (\w+)", sig)
        body = [f"{c}* b{j} = malloc({sizes_of[p]} * sizeof({c})); "
                f"for (int q = 0; q < {sizes_of[p]}; ++q) b{j}[q] = ({c})(q * 37 + {j} * 101 + (q % 3 ? 0 : 127));"
                for j, (c, p) in enumerate(params)]
        calls.append("{ " + " ".join(body) + f" {name}(" + ", ".join(f"b{j}" for j in range(len(params))) + "); "
                     + " ".join(f"free(b{j});" for j in range(len(params))) + " }")
    return "\n".join(parts + ["int main(void) {", *calls, "return 0; }"])


@pytest.mark.slow
@pytest.mark.skipif(not {"avx2", "sse4_1"} <= cpu_flags(), reason="executes AVX2 and SSE4.1 code")
def test_tails_touch_no_memory_past_the_arrays_under_sanitizers(tmp_path):
    """Masked tails move lanes one by one on AVX2 and SSE: under AddressSanitizer (buffers of exactly
    the arrays' sizes) and UndefinedBehaviorSanitizer (no -fwrapv: no int overflow in the
    templates either), every operation and reduction of every type, for lengths 1, 37 and 70."""
    kernels = []
    for dtype in NARROW:
        for target in (I7, SSE):
            for n in (1, 37, 70):
                k = len(kernels)
                plan, args = elementwise_plan(dtype, n, target)
                kernels.append((f"k{k}", plan.emit_c(f"k{k}"), args))
                plan, args = reduction_plan(dtype, n + 16, target)
                kernels.append((f"r{k}", plan.emit_c(f"r{k}"), args))
    src = tmp_path / "san.c"
    src.write_text(_sanitizer_driver(kernels))
    exe = tmp_path / "san"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-O1", "-std=gnu11", "-w"]
    r = subprocess.run(["gcc", *flags, str(src), "-o", str(exe)], capture_output=True, text=True)
    if r.returncode != 0 and "sanitize" in r.stderr:
        pytest.skip(f"gcc cannot build with sanitizers here: {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr[-3000:]
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "runtime error" not in p.stderr, p.stderr[-3000:]
