"""16-byte (SSE4.1) vectors: what `vectorize` emits for a target whose vector_bytes is 16.

Accera's SSE-width targets (`Target("HOST", vector_bytes=16)`, `Target(category=CPU,
vector_bytes=16, vector_registers=2)` in its test_vectorize / test_kernelize tests) get 4 x float32,
2 x float64 and 4 x int32 lanes: kernels are built, run here and compared with numpy or the
reference evaluator (exactly for integers), tails (masked lanes, moved one by one) and reductions
included. Strided lanes go one by one on SSE and through VGATHERDPS on AVX2. An AVX-512 model told
vector_bytes=32 or 16 gets the 32- or 16-byte forms (emitted and compiled; run where the CPU can).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from support.cpu import cpu_flags

ST = acc.ScalarType
F32, F64, I32 = ST.float32, ST.float64, ST.int32


FLAGS = cpu_flags()
needs_sse41 = pytest.mark.skipif("sse4_1" not in FLAGS, reason="executes SSE4.1 code: this CPU lacks sse4_1")
needs_avx2 = pytest.mark.skipif(not {"avx2", "fma"} <= FLAGS, reason="executes AVX2 code: this CPU lacks avx2/fma")

# the host's features, whatever its width (HOST may pose as a smaller machine: ACCPY_HOST_MODEL)
SSE = acc.Target("HOST", vector_bytes=16)
AVX2 = acc.Target("HOST", extensions=("avx2", "fma"), vector_bytes=32)
SKX = acc.Target(acc.Target.Model.INTEL_XEON_GOLD_6148)  # AVX-512


def build(plan, args, tmp_path, name="f"):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name=name)
    return getattr(pkg.build(name, output_dir=str(tmp_path), python_module=False), name)


def random_args(args, seed=0, low=-100, high=100):
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        dt = a.element_type.dtype
        if np.issubdtype(dt, np.integer):
            out.append(rng.integers(low, high + 1, size=a.shape).astype(dt))
        else:
            out.append(rng.uniform(low / 10, high / 10, size=a.shape).astype(dt))
    return out


def check(plan, args, nests, tmp_path, seed=0, rtol=1e-5):
    """Build and run `plan` on random data; compare every argument with the reference evaluator."""
    fn = build(plan, args, tmp_path)
    got = random_args(args, seed)
    want = [x.copy() for x in got]
    evaluate(nests, dict(zip(args, want)))
    fn(*got)
    for a, g, w in zip(args, got, want):
        if np.issubdtype(g.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=a.name)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=a.name)
    return plan.emit_c("f", args)


def register_width(c: str) -> set:
    """The register widths (bits) the emitted C's intrinsics use."""
    return {128 if m == "_mm_" else int(m[3:-1]) for m in re.findall(r"_mm(?:256|512)?_", c)}


# ------------------------------------------------------------------------------------------
# the shapes a 16-byte target gets
# ------------------------------------------------------------------------------------------


def test_a_16_byte_target_gets_sse_shapes():
    for t in (SSE, acc.Target(category=acc.Target.Category.CPU, vector_bytes=16, vector_registers=2),
              SKX(vector_bytes=16)):
        assert t.vector_bytes == 16
        for dtype, lanes, ctype in ((F32, 4, "__m128"), (F64, 2, "__m128d"), (I32, 4, "__m128i")):
            s = t.vector_isa.shape(dtype)
            assert (s.name, s.lanes, s.ctype) == ("sse", lanes, ctype)


def test_an_avx512_model_told_32_bytes_gets_avx2_shapes():
    t = SKX(vector_bytes=32)
    assert [(t.vector_isa.shape(d).name, t.vector_isa.shape(d).lanes) for d in (F32, F64, I32)] == \
        [("avx2", 8), ("avx2", 4), ("avx2", 8)]
    assert SKX.vector_isa.shape(F32).name == "avx512"


def test_sse41_without_avx2_gets_sse_shapes_and_sse2_alone_none():
    # Accera's Skylake Pentium: SSE4.1 / SSE4.2 only, 32 vector bytes in its row
    pentium = acc.Target("Intel G4520")
    assert not pentium.has("avx2") and pentium.vector_isa.shape(F32).name == "sse"
    plain = acc.Target("HOST", extensions=("sse", "sse2"), vector_bytes=16)
    assert plain.vector_isa.shape(F32) is None
    nest = acc.Nest(shape=(8,))
    i, = nest.get_indices()
    plan = nest.create_plan(plain)
    with pytest.raises(RuntimeError, match="no vector instructions"):
        plan.vectorize(i)


# ------------------------------------------------------------------------------------------
# Accera's own SSE-width tests (dsl_tests.py: test_vectorize, test_kernelize, test_kernelize_2)
# ------------------------------------------------------------------------------------------


def accera_target():
    return acc.Target(category=acc.Target.Category.CPU, vector_bytes=16, vector_registers=2)


@needs_sse41
def test_accera_vectorize(tmp_path):
    A, B = (acc.Array(role=acc.Role.INPUT, shape=(64,), name=n) for n in "AB")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(64,), name="C")
    nest = acc.Nest(shape=(64,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] = A[i] * B[i]

    plan = nest.create_plan(accera_target())
    plan.vectorize(index=i)
    c = check(plan, (A, B, C), [nest], tmp_path)
    assert "_mm_mul_ps" in c and register_width(c) == {128}


def _matmul(M, N, K):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C), (i, j, k)


@needs_sse41
def test_accera_kernelize_reduces_along_k_with_strided_b(tmp_path):
    """k (11 = 2 x 4 + a tail of 3) vectorized: C[i, j] a reduction, A[i, k] contiguous, B[k, j]
    ten elements apart per lane (read lane by lane: SSE has no gathers)."""
    nest, args, (i, j, k) = _matmul(16, 10, 11)
    plan = nest.create_plan(accera_target())
    plan.kernelize(unroll_indices=(i, j), vectorize_indices=k)
    c = check(plan, args, [nest], tmp_path)
    assert "accpy_q_[(long long)accpy_l_ * (10)]" in c and register_width(c) == {128}


@pytest.mark.slow
@needs_sse41
def test_accera_kernelize_2(tmp_path):
    nest, args, (i, j, k) = _matmul(16, 16, 16)
    plan = nest.create_plan(accera_target())
    plan.kernelize(unroll_indices=(i,), vectorize_indices=(j, k))
    c = check(plan, args, [nest], tmp_path)
    assert "_mm_loadu_ps" in c and register_width(c) == {128}


# ------------------------------------------------------------------------------------------
# element-wise kernels with tails, and reductions, per element type
# ------------------------------------------------------------------------------------------


def elementwise(dtype, n=23):
    """Arithmetic, min / max, abs, comparisons and a select on `n` lanes (tail: n % lanes)."""
    A, B = (acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,), name=x) for x in "AB")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(n,), name="C")
    D = acc.Array(role=acc.Role.OUTPUT, element_type=dtype, shape=(n,), name="D")
    nest = acc.Nest(shape=(n,))
    i, = nest.get_indices()
    two = acc.cast(2, dtype)

    @nest.iteration_logic
    def _():
        C[i] += acc.max(A[i], B[i]) * two - acc.min(A[i], B[i])
        D[i] = acc.select(A[i] > B[i], acc.abs(A[i]), B[i] - A[i])

    return nest, (A, B, C, D), i


@needs_sse41
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=lambda t: t.name)
def test_elementwise_with_a_masked_tail(dtype, tmp_path):
    nest, args, i = elementwise(dtype)
    plan = nest.create_plan(SSE)
    plan.vectorize(i)
    c = check(plan, args, [nest], tmp_path)
    assert register_width(c) == {128}
    assert "_mm_movemask" in c  # the tail's lanes are moved one by one


def reduction(dtype, op, n=4 * 5 + 3, m=3):
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(m, n), name="A")
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(m,), name="S")
    nest = acc.Nest(shape=(m, n))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        if op == "sum":
            S[i] += A[i, j]
        elif op == "max":
            S[i] = acc.max(S[i], A[i, j])
        elif op == "min":
            S[i] = acc.min(S[i], A[i, j])
        else:
            S[i] *= A[i, j]

    return nest, (A, S), j


@needs_sse41
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=lambda t: t.name)
def test_reductions_along_the_vectorized_index(dtype, op, tmp_path):
    nest, (A, S), j = reduction(dtype, op)
    plan = nest.create_plan(SSE)
    plan.vectorize(j)
    fn = build(plan, (A, S), tmp_path)
    rng = np.random.default_rng(3)
    dt = dtype.dtype
    if op == "prod":  # products of small values stay exact in every type
        a = rng.choice(np.array([-2, -1, 1, 2], dtype=dt), size=A.shape)
    elif dtype is I32:
        a = rng.integers(-10 ** 6, 10 ** 6, size=A.shape).astype(dt)
    else:
        a = rng.uniform(-10, 10, size=A.shape).astype(dt)
    s = rng.integers(-5, 5, size=S.shape).astype(dt)
    want = {"sum": s + a.sum(axis=1, dtype=dt), "max": np.maximum(s, a.max(axis=1)),
            "min": np.minimum(s, a.min(axis=1)), "prod": s * a.prod(axis=1, dtype=dt)}[op]
    fn(a, s)
    if dtype is not I32 and op == "sum":  # the lanes' partial sums: reassociated, as in BLAS
        np.testing.assert_allclose(s, want, rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(s, want)
    c = plan.emit_c("f", (A, S))
    assert register_width(c) == {128} and ("__m128i" if dtype is I32 else "__m128") in c


@needs_sse41
def test_int32_sums_wrap_around(tmp_path):
    nest, (A, S), j = reduction(I32, "sum", n=8, m=1)
    plan = nest.create_plan(SSE)
    plan.vectorize(j)
    fn = build(plan, (A, S), tmp_path)
    a = np.full((1, 8), 2 ** 30, dtype=np.int32)
    s = np.zeros(1, dtype=np.int32)
    fn(a, s)
    assert s[0] == np.int32(0)  # 8 * 2**30 = 2**33 wraps to 0, as the scalar int32 sum does


@needs_sse41
def test_float_and_int_lanes_together(tmp_path):
    """float32 and int32 lanes in one loop (both 4 wide): an int32 array converted to float32."""
    n = 18
    X = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(n,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(n,), name="Y")
    nest = acc.Nest(shape=(n,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += acc.cast(X[i], F32) * 0.5

    plan = nest.create_plan(SSE)
    plan.vectorize(i)
    c = check(plan, (X, Y), [nest], tmp_path)
    assert "_mm_cvtepi32_ps" in c


def transpose(M=10, N=12, dtype=F32):
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(M, N), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(N, M), name="B")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[j, i] = A[i, j]

    return nest, (A, B), (i, j)


@needs_sse41
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=lambda t: t.name)
@pytest.mark.parametrize("along", ["i", "j"])
def test_strided_lanes_one_by_one_on_sse(dtype, along, tmp_path):
    """Along i, A is read a row apart per lane (gathered); along j, B is written a row apart
    (scattered); 10 and 12 leave tails of 2 and 0 (float32) lanes."""
    nest, args, (i, j) = transpose(dtype=dtype)
    plan = nest.create_plan(SSE)
    plan.vectorize(i if along == "i" else j)
    c = check(plan, args, [nest], tmp_path)
    assert register_width(c) == {128}


@needs_avx2
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=lambda t: t.name)
@pytest.mark.parametrize("along", ["i", "j"])
def test_strided_lanes_on_avx2_gather_and_scatter_lane_by_lane(dtype, along, tmp_path):
    nest, args, (i, j) = transpose(M=13, N=12, dtype=dtype)
    plan = nest.create_plan(AVX2)
    plan.vectorize(i if along == "i" else j)
    c = check(plan, args, [nest], tmp_path)
    if along == "i":
        assert "_mm256_i32gather_" in c and "_mm256_mask_i32gather_" in c  # 13: a masked tail
    assert register_width(c) <= {128, 256} and 256 in register_width(c)


# ------------------------------------------------------------------------------------------
# the host, and an AVX-512 model at smaller widths
# ------------------------------------------------------------------------------------------


@needs_sse41
def test_the_host_keeps_its_own_width(tmp_path):
    """acc.Target.HOST on a machine without AVX-512 (or posing as one) vectorizes at its width."""
    nest, args, i = elementwise(F32, n=37)
    plan = nest.create_plan(acc.Target.HOST)
    plan.vectorize(i)
    c = check(plan, args, [nest], tmp_path)
    width = {64: 512, 32: 256, 16: 128}[acc.Target.HOST.vector_bytes]
    assert width in register_width(c)


@pytest.mark.parametrize("vector_bytes, width", [(32, 256), (16, 128)])
def test_an_avx512_model_at_a_smaller_width_emits_that_width(vector_bytes, width, tmp_path):
    nest, (A, S), j = reduction(F32, "sum")
    plan = nest.create_plan(SKX(vector_bytes=vector_bytes))
    plan.vectorize(j)
    c = plan.emit_c("f", (A, S))
    assert register_width(c) == {width}
    build(plan, (A, S), tmp_path)  # compiles (for AVX-512 flags; runs only on such a CPU)
