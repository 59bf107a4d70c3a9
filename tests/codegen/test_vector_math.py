"""Math intrinsics (acc.exp, fast_exp, fast_exp_mlas, log, tanh, sqrt, floor, ceil, ...): the
reference evaluator, scalar C (libm) and the x86 vector forms (accpy/targets/x86_math.py) against
numpy, within the accuracy x86_math.py states, on random data and edge inputs."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.testing.asserts import run

F32, F64 = acc.ScalarType.float32, acc.ScalarType.float64

EDGES = [0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 1e-40, 88.0, 88.72, 88.73, 89.0, 100.0, -87.0, -87.4, -100.0,
         -103.9, -104.0, -200.0, 1e30, -1e30, np.inf, -np.inf, np.nan, 0.5, 2.0, 0.6931472, 3.4e38, 1.17e-38]


def _data(n=4096, lo=-30.0, hi=30.0):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(lo, hi, n), rng.standard_normal(n) * 1e-3,
                        np.exp(rng.uniform(-80, 80, n)), -np.exp(rng.uniform(-80, 80, 64)), EDGES * 8])
    x = x.astype(np.float32)
    return x[: len(x) - len(x) % 8]


def _ulps(got, want):
    """Distance in float32 units in the last place (inf/NaN agreeing count 0)."""
    with np.errstate(all="ignore"):
        g, w = got.astype(np.float32), want.astype(np.float32)
    same = (g == w) | (np.isnan(g) & np.isnan(w))

    def ordered(a):
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    d = np.abs(ordered(g) - ordered(w))
    return np.where(same, 0, np.where(np.isnan(g) | np.isnan(w), 1 << 40, d))


NUMPY = {"exp": np.exp, "fast_exp": np.exp, "fast_exp_mlas": np.exp, "log": np.log, "tanh": np.tanh,
         "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil}
# the bounds x86_math.py states (ulps; fast_exp: a relative error of 4e-6, checked separately)
VECTOR_ULPS = {"exp": 2, "log": 2, "tanh": 4, "sqrt": 0, "floor": 0, "ceil": 0, "fast_exp": None, "fast_exp_mlas": None}


def _build(fn_name, n, vector, dtype=F32):
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(n,))
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(n,))
    nest = acc.Nest((n,))
    i = nest.get_indices()
    fn = getattr(acc, fn_name)

    @nest.iteration_logic
    def _():
        B[i] = fn(A[i])

    if not vector:
        return nest, A, B, nest
    sched = nest.create_schedule()
    ii = sched.split(i, 8)
    plan = sched.create_plan()
    plan.vectorize(ii)
    return nest, A, B, plan


def _input(fn_name):
    x = _data()
    if fn_name in ("log", "sqrt"):
        x = np.concatenate([np.abs(x), x[:64]])  # negatives -> NaN too
        x = x[: len(x) - len(x) % 8]
    return x


@pytest.mark.parametrize("fn_name", list(NUMPY))
def test_vector_math_float32_against_numpy(fn_name):
    x = _input(fn_name)
    nest, A, B, plan = _build(fn_name, len(x), vector=True)
    c = plan.emit_c() if hasattr(plan, "emit_c") else ""
    if fn_name not in ("sqrt",):
        assert "expf" not in c and "logf" not in c and "tanhf" not in c, "the vector form was not used"
    got = run(plan, (A, B), [x, np.zeros_like(x)])[1]
    with np.errstate(all="ignore"):
        want = NUMPY[fn_name](x.astype(np.float64))
    bound = VECTOR_ULPS[fn_name]
    if bound is not None:
        u = _ulps(got, want)
        assert u.max() <= bound, (fn_name, x[u.argmax()], got[u.argmax()], want[u.argmax()], u.max())
    else:
        with np.errstate(all="ignore"):
            w32 = want.astype(np.float32)
        finite = np.isfinite(w32) & (np.abs(w32) > 1.2e-38)
        rel = np.abs(got[finite].astype(np.float64) - want[finite]) / np.abs(want[finite])
        assert rel.max() <= 4e-6, (fn_name, rel.max())
        np.testing.assert_array_equal(np.isnan(got), np.isnan(w32))
        np.testing.assert_array_equal(got[np.isinf(w32)], w32[np.isinf(w32)])
        assert (np.abs(got[~finite & ~np.isnan(w32) & ~np.isinf(w32)]) <= 1.2e-38).all()


@pytest.mark.parametrize("fn_name", ["exp", "fast_exp_mlas", "log", "tanh", "sin", "cosh", "log10", "floor"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_scalar_math_in_c_and_the_reference(fn_name, dtype):
    x = _input(fn_name).astype(dtype.dtype)
    nest, A, B, _ = _build(fn_name, len(x), vector=False, dtype=dtype)
    got = run(nest, (A, B), [x, np.zeros_like(x)])[1]
    ref = np.zeros_like(x)
    evaluate(nest, {A: x, B: ref})
    npfn = {"sin": np.sin, "cosh": np.cosh, "log10": np.log10}.get(fn_name) or NUMPY[fn_name]
    with np.errstate(all="ignore"):
        want = npfn(x).astype(dtype.dtype)
    np.testing.assert_allclose(got, want, rtol=4e-7 if dtype is F32 else 1e-15, atol=0, equal_nan=True)
    np.testing.assert_array_equal(ref, want)


def test_remainderf_and_type_size_bytes():
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(8,))
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(8,))
    nest = acc.Nest((8,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i] = acc.remainderf(A[i], 2.0)

    x = np.array([5.0, 3.0, -3.0, 1.0, 7.5, -0.5, np.inf, 4.0], np.float32)
    want = np.array([1.0, -1.0, 1.0, 1.0, -0.5, -0.5, np.nan, 0.0], np.float32)
    np.testing.assert_array_equal(run(nest, (A, B), [x, np.zeros(8, np.float32)])[1], want)
    ref = np.zeros(8, np.float32)
    evaluate(nest, {A: x, B: ref})
    np.testing.assert_array_equal(ref, want)
    assert [acc.type_size_bytes(t) for t in (acc.ScalarType.int8, F32, F64, acc.ScalarType.float16)] == [1, 4, 8, 2]


def test_math_needs_float_operands():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.int32, shape=(8,))
    nest = acc.Nest((8,))
    i = nest.get_indices()
    with pytest.raises(acc.LogicError, match="acc.fast_exp_mlas needs a floating-point operand, got int32"):
        @nest.iteration_logic
        def _():
            A[i] = acc.cast(acc.fast_exp_mlas(A[i]), acc.ScalarType.int32)


@pytest.mark.parametrize("fn_name", ["exp", "fast_exp", "log", "tanh", "floor", "ceil"])
def test_avx512_forms_compile(fn_name, tmp_path):
    """The AVX-512 templates are emitted and compiled for an AVX-512 model on any host (they run, and
    are compared with numpy, where the host has AVX-512: test_avx512_forms_match_numpy)."""
    target = acc.Target("Intel Xeon Platinum 8380")
    nest, A, B, _ = _build(fn_name, 64, vector=False)
    sched = nest.create_schedule()
    ii = sched.split(sched.get_indices()[0], 16)
    plan = sched.create_plan(target)
    plan.vectorize(ii)
    c = plan.emit_c()
    assert "_mm512_" in c and f"{fn_name}f(" not in c
    pkg = acc.Package()
    pkg.add(plan, args=(A, B), base_name="m512")
    pkg.build("m512", output_dir=tmp_path, python_module=False)


@pytest.mark.avx512
@pytest.mark.parametrize("fn_name", ["exp", "fast_exp", "log", "tanh"])
def test_avx512_forms_match_numpy(fn_name):
    x = _input(fn_name)
    x = x[: len(x) - len(x) % 16]
    nest, A, B, _ = _build(fn_name, len(x), vector=False)
    sched = nest.create_schedule()
    ii = sched.split(sched.get_indices()[0], 16)
    plan = sched.create_plan(acc.Target.HOST)
    plan.vectorize(ii)
    got = run(plan, (A, B), [x, np.zeros_like(x)])[1]
    with np.errstate(all="ignore"):
        want = NUMPY[fn_name](x.astype(np.float64))
    if VECTOR_ULPS[fn_name] is not None:
        assert _ulps(got, want).max() <= VECTOR_ULPS[fn_name]
    else:
        finite = np.isfinite(want.astype(np.float32)) & (np.abs(want) > 1.2e-38)
        assert (np.abs(got[finite] - want[finite]) / np.abs(want[finite])).max() <= 4e-6
