"""Plan operations against the reference evaluator, and what they leave in the emitted C.

Every case is a small nest (extents that divide, that do not, smaller than a vector; FIRST_MAJOR
and LAST_MAJOR arrays) with a plan: unroll, vectorize (float32 / float64 / int32 on AVX-512 and
AVX2; element-wise code, broadcasts of loop-invariant loads, reductions along the vectorized
dimension with += -= *= max min, compare + select, sqrt / abs, int32 -> float32 conversion,
masked tails, runtime trip counts), kernelize, parallelize (one and several indices, static /
dynamic, max_threads, two threads) and cache (by index, level and budget, multicaches, layouts,
element types, caches of caches, thrifty, double buffering, write-only outputs). Each family of
cases is built as one package (gcc runs once per family) and each case is called on seeded
random data and compared with `accpy.nest.reference.evaluate`: int32 exactly, floats within a
tolerance.

Regressions (bugs these tests found, fixed in accpy/lower and accpy/targets/x86.py):
  vectorize[*_reduce_max|min]            `S[i] = max(S[i], A[i, j])` was not vectorizable
  vectorize[*_runtime_trip_count]        the tail of a runtime trip count: "not affine"
  vectorize[*_int32_to_float32]          int32 loads in a float32 vector loop were refused
  vectorize[avx2_i32_*_select]           AVX2 int32 had no >=, <=, != compares
  vectorize[*_two_reductions_max]        two max accumulations into one element lost one
  vectorize[*_unrolled_rows_inside]      unrolled copies a row apart were refused
  cache[*_index_X_trigger_X]             a trigger at the cache's own index copied nothing
  cache[B_index_j_trigger_i]             a multicache whose site loop unswitching cut: error
  cache[B_budget_then_budget]            budget caches of budget caches: unsupported
  parallelize[cache_C_at_k_per_thread]   a per-thread cache used by the tail of the parallel
  parallelize[cache_C_at_ii_vectorized]  loop (outside it): ScheduleError / C compile error
  test_no_copy_in_for_a_fully_written_output   write-only blocks written by several loop
                                         pieces (or `8*j + jj` subscripts) were copied in

Cases that run AVX-512 code are marked `avx512` (skipped, with the reason, on CPUs without it);
AVX-512 code is emitted for `AVX512` (a known AVX-512 Xeon, whatever this machine is: the same
code everywhere), AVX2 code for `AVX2` (the host without its AVX-512 extensions, 32-byte vectors).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pytest

import accpy as acc
from accpy.ir.visitor import Visitor

from accpy.nest.reference import evaluate

F16, F32, F64 = acc.ScalarType.float16, acc.ScalarType.float32, acc.ScalarType.float64
I32, I64 = acc.ScalarType.int32, acc.ScalarType.int64
FM, LM = acc.Array.Layout.FIRST_MAJOR, acc.Array.Layout.LAST_MAJOR
IN, INOUT, OUT = acc.Role.INPUT, acc.Role.INPUT_OUTPUT, acc.Role.OUTPUT

HOST = acc.Target.HOST
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_GOLD_6148)
AVX2 = HOST(extensions=tuple(e for e in HOST.extensions if not e.startswith("avx512")), vector_bytes=32)
TWO_THREADS = HOST(num_threads=2)
TARGETS = {"avx512": AVX512, "avx2": AVX2}
LANES32 = {"avx512": 16, "avx2": 8}  # 32-bit lanes per vector

needs_avx2 = pytest.mark.skipif("avx2" not in HOST.extensions,
                                reason="executes AVX2 code: this CPU lacks avx2")


# ------------------------------------------------------------------------------------------
# cases: a nest, its arguments, a plan; built per family, compared with the reference
# ------------------------------------------------------------------------------------------


@dataclass
class Case:
    nests: list
    args: tuple
    plan: object
    values: dict = field(default_factory=dict)  # acc.Dimension -> size
    data: Optional[Callable] = None  # (array, rng, shape) -> ndarray, instead of the default
    tol: Optional[float] = None  # None: exact for integers, else by element type
    after: Optional[Callable] = None  # called after the build (e.g. check resolved levels)


FAMILIES: dict = {}  # family -> {case name: (builder, uses AVX-512)}


def case(family: str, name: str, avx512: bool = False):
    def deco(fn):
        FAMILIES.setdefault(family, {})[name] = (fn, avx512)
        return fn

    return deco


def case_params(family: str) -> list:
    out = []
    for name, (_, avx512) in FAMILIES[family].items():
        marks = [pytest.mark.avx512] if avx512 else []
        if name.startswith("avx2") or "_avx2" in name:
            marks.append(needs_avx2)
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@dataclass
class BuiltFamily:
    cases: dict  # name -> Case
    kernels: dict  # name -> callable
    errors: dict  # name -> text


@functools.lru_cache(maxsize=None)
def _build_family(family: str, out_dir: str) -> BuiltFamily:
    """One package of all the family's cases; a case that fails to build is built alone."""
    import traceback

    cases, errors = {}, {}
    for name, (fn, _) in FAMILIES[family].items():
        try:
            cases[name] = fn()
        except Exception:
            errors[name] = "making the case raised:\n" + traceback.format_exc()
    pkg = acc.Package()
    fns = {}
    for name, c in list(cases.items()):
        try:
            fns[name] = pkg.add(c.plan, args=c.args, base_name=name)
        except Exception:
            errors[name] = "adding it to a package raised:\n" + traceback.format_exc()
            del cases[name]
    kernels = {}
    try:
        lib = pkg.build(f"plan_{family}", output_dir=out_dir, python_module=False)
        kernels = {name: lib[f.name] for name, f in fns.items()}
    except Exception:
        for name, c in cases.items():
            one = acc.Package()
            one.add(c.plan, args=c.args, base_name="f")
            try:
                kernels[name] = one.build(f"plan_{family}_{name}", output_dir=out_dir, python_module=False).f
            except Exception:
                errors[name] = "building raised:\n" + traceback.format_exc()
    for name, c in cases.items():
        if c.after is not None and name not in errors:
            try:
                c.after()
            except Exception:
                errors[name] = "the post-build check failed:\n" + traceback.format_exc()
    return BuiltFamily(cases, kernels, errors)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("plans"))


def default_data(array, rng, shape):
    dt = array.element_type.dtype
    if np.issubdtype(dt, np.integer):
        return rng.integers(-9, 10, size=shape).astype(dt)
    return rng.uniform(-1, 1, size=shape).astype(dt)


def call_args(c: Case, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for a in c.args:
        if isinstance(a, acc.Dimension):
            out.append(c.values[a])
            continue
        shape = tuple(c.values[d] if isinstance(d, acc.Dimension) else int(d) for d in a.shape)
        x = (c.data or default_data)(a, rng, shape)
        if a.layout is LM:
            x = np.asfortranarray(x)
        out.append(x)
    return out


def tolerance(c: Case, array) -> Optional[float]:
    if c.tol is not None:
        return c.tol
    t = array.element_type
    return None if t.is_int else 1e-12 if t is F64 else 1e-4


def check_against_reference(c: Case, kernel, seed: int = 0):
    got = call_args(c, seed)
    want = [x.copy(order="K") if isinstance(x, np.ndarray) else x for x in got]
    evaluate(c.nests, dict(zip(c.args, want)))
    kernel(*got)
    for a, g, w in zip(c.args, got, want):
        if not isinstance(g, np.ndarray):
            continue
        tol = tolerance(c, a)
        if tol is None:
            bad = g != w
        else:
            bad = ~np.isclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        if bad.any():
            where = tuple(int(x) for x in np.argwhere(bad)[0])
            raise AssertionError(f"{a.name}{list(where)}: got {g[where]!r}, expected {w[where]!r} "
                                 f"({int(bad.sum())} of {bad.size} differ)\nC:\n{emitted(c)}")


def emitted(c: Case) -> str:
    try:
        return c.plan.emit_c("f", c.args)
    except Exception as e:  # pragma: no cover - diagnostics only
        return f"<{type(e).__name__}: {e}>"


def run_family_case(family, name, build_dir):
    built = _build_family(family, build_dir)
    if name in built.errors:
        pytest.fail(built.errors[name], pytrace=False)
    check_against_reference(built.cases[name], built.kernels[name])


# ------------------------------------------------------------------------------------------
# nests
# ------------------------------------------------------------------------------------------


def matmul(M, N, K, dt=I32, layouts=(FM, FM, FM), c_role=INOUT):
    A = acc.Array(role=IN, element_type=dt, shape=(M, K), layout=layouts[0], name="A")
    B = acc.Array(role=IN, element_type=dt, shape=(K, N), layout=layouts[1], name="B")
    C = acc.Array(role=c_role, element_type=dt, shape=(M, N), layout=layouts[2], name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C), (i, j, k)


def tiled_matmul(M=7, N=9, K=5, dt=I32, layouts=(FM, FM, FM), target=None, ti=2, tj=4):
    """Order (i, j, k, ii, jj); levels 5..1. Returns (nest, args, plan, indices dict)."""
    nest, args, (i, j, k) = matmul(M, N, K, dt, layouts)
    s = nest.create_schedule()
    ii = s.split(i, ti)
    jj = s.split(j, tj)
    s.reorder(i, j, k, ii, jj)
    plan = s.create_plan(target)
    return nest, args, plan, dict(i=i, j=j, k=k, ii=ii, jj=jj)


class _Used(dict):
    """The arrays a logic body touches, in the order it first touches them."""

    def __init__(self, arrays):
        super().__init__(arrays)
        self.used: list = []

    def __getitem__(self, key):
        if key not in self.used:
            self.used.append(key)
        return super().__getitem__(key)


def rows(M, N, dt, body, layouts=None):
    """A 2-D nest over (M, N) with arrays A, B (M x N inputs), v (M), w (N), C (M x N in/out),
    S (M in/out); `body(i, j, arrays)` writes the logic. The arguments: the arrays it uses."""
    lay = layouts or {}
    arrays = _Used(dict(
        A=acc.Array(role=IN, element_type=dt, shape=(M, N), layout=lay.get("A", FM), name="A"),
        B=acc.Array(role=IN, element_type=dt, shape=(M, N), layout=lay.get("B", FM), name="B"),
        v=acc.Array(role=IN, element_type=dt, shape=(M,), name="v"),
        w=acc.Array(role=IN, element_type=dt, shape=(N,), name="w"),
        C=acc.Array(role=INOUT, element_type=dt, shape=(M, N), layout=lay.get("C", FM), name="C"),
        S=acc.Array(role=INOUT, element_type=dt, shape=(M,), name="S"),
    ))
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        body(i, j, arrays)

    return nest, tuple(dict.__getitem__(arrays, n) for n in "A B v w C S".split() if n in arrays.used), (i, j)


# -- logic bodies used by the vectorize families --------------------------------------------------


def ew_body(dt):
    if dt.is_float:
        def body(i, j, x):
            x["C"][i, j] = x["A"][i, j] * x["B"][i, j] - x["A"][i, j] / (x["v"][i] * x["v"][i] + 1) + x["w"][j]
            x["C"][i, j] += -x["B"][i, j] * 2
    else:
        def body(i, j, x):
            x["C"][i, j] = x["A"][i, j] * x["B"][i, j] - x["A"][i, j] + x["v"][i] * 3 + x["w"][j]
            x["C"][i, j] += -(x["B"][i, j] & x["v"][i]) ^ (x["A"][i, j] | 5)
    return body


def reduction_body(op):
    if op == "add":
        def body(i, j, x):
            x["S"][i] += x["A"][i, j] * x["B"][i, j]
    elif op == "sub":
        def body(i, j, x):
            x["S"][i] -= x["A"][i, j]
    elif op == "mul":
        def body(i, j, x):
            x["S"][i] *= x["A"][i, j]
    elif op == "max":
        def body(i, j, x):
            x["S"][i] = acc.max(x["S"][i], x["A"][i, j])
    else:
        def body(i, j, x):
            x["S"][i] = acc.min(x["A"][i, j] - x["B"][i, j], x["S"][i])
    return body


def select_body(dt):
    def body(i, j, x):
        x["C"][i, j] = acc.select(x["A"][i, j] < x["B"][i, j], x["A"][i, j], x["B"][i, j] - x["v"][i])
        x["C"][i, j] += acc.select(x["A"][i, j] >= x["v"][i], x["w"][j], x["A"][i, j] * 2)
        x["C"][i, j] -= acc.select(x["B"][i, j] != x["A"][i, j], x["A"][i, j], x["v"][i])

    return body


def math_body(dt):
    if dt.is_float:
        def body(i, j, x):
            x["C"][i, j] = acc.sqrt(acc.abs(x["A"][i, j])) + acc.abs(x["B"][i, j] - x["v"][i])
    else:
        def body(i, j, x):
            x["C"][i, j] = acc.abs(x["A"][i, j] - x["B"][i, j]) + acc.abs(x["v"][i])
    return body


def near_one(array, rng, shape):
    """Data for products: values around 1 (no overflow or underflow over ~150 factors)."""
    dt = array.element_type.dtype
    if np.issubdtype(dt, np.integer):
        return rng.choice(np.array([-1, 1, 1, 2, -2, 1, 3], dtype=dt), size=shape)
    return rng.uniform(0.8, 1.25, size=shape).astype(dt) * rng.choice([-1, 1], size=shape).astype(dt)


# ------------------------------------------------------------------------------------------
# unroll
# ------------------------------------------------------------------------------------------


@case("unroll", "split_inner_nondividing")
def _u1():
    nest, args, (i, j, k) = matmul(5, 7, 3)
    s = nest.create_schedule()
    jj = s.split(j, 3)
    p = s.create_plan()
    p.unroll(jj)
    return Case([nest], args, p)


@case("unroll", "whole_index_last_major")
def _u2():
    nest, args, (i, j, k) = matmul(4, 6, 3, F32, (LM, LM, FM))
    p = nest.create_schedule().create_plan()
    p.unroll(k)
    return Case([nest], args, p)


@case("unroll", "two_tile_indices")
def _u3():
    nest, args, p, x = tiled_matmul(7, 9, 4)
    p.unroll(x["ii"])
    p.unroll(x["jj"])
    return Case([nest], args, p)


@case("unroll", "outermost_index")
def _u4():
    nest, args, (i, j, k) = matmul(3, 5, 2, I32, (FM, LM, LM))
    p = nest.create_schedule().create_plan()
    p.unroll(i)
    return Case([nest], args, p)


@case("unroll", "runtime_trip_count")
def _u5():
    M, N, K = acc.create_dimensions()
    A = acc.Array(role=IN, element_type=I32, shape=(M, K), name="A")
    B = acc.Array(role=IN, element_type=I32, shape=(K, N), name="B")
    C = acc.Array(role=INOUT, element_type=I32, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    kk = s.split(k, 3)
    p = s.create_plan()
    p.unroll(kk)  # a constant trip count inside, a runtime one for the tail
    p.unroll(k)  # a runtime trip count: stays a loop (with an unroll hint)
    return Case([nest], (A, B, C, M, N, K), p, values={M: 4, N: 5, K: 8})


@case("unroll", "conv1d_taps")
def _u6():
    A = acc.Array(role=IN, element_type=I32, shape=(12,), name="A")
    W = acc.Array(role=IN, element_type=I32, shape=(4,), name="W")
    C = acc.Array(role=INOUT, element_type=I32, shape=(9,), name="C")
    nest = acc.Nest(shape=(9, 4))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[i + j] * W[j]

    s = nest.create_schedule()
    ii = s.split(i, 4)
    s.reorder(i, j, ii)
    p = s.create_plan()
    p.unroll(j)
    p.unroll(ii)
    return Case([nest], (A, W, C), p)


@pytest.mark.parametrize("name", case_params("unroll"))
def test_unroll(name, build_dir):
    run_family_case("unroll", name, build_dir)


def test_unroll_removes_the_loops():
    nest, args, p, x = tiled_matmul(8, 8, 4)
    before = p.emit_c("f", args).count("for (")
    p.unroll(x["ii"])
    p.unroll(x["jj"])
    c = p.emit_c("f", args)
    assert c.count("for (") == before - 2
    assert not re.search(r"for \(int64_t (ii|jj) ", c)


# ------------------------------------------------------------------------------------------
# vectorize
# ------------------------------------------------------------------------------------------

VEC_DTYPES = {"f32": F32, "f64": F64, "i32": I32}


def _extents(isa, dt):
    W = LANES32[isa] // (2 if dt is F64 else 1)
    return {"exact": W, "small": W // 2 + 1, "tail": 2 * W + 3}


def _vector_case(isa, dt, N, body, vec_index="j", data=None, layouts=None, M=3):
    nest, args, (i, j) = rows(M, N, dt, body, layouts)
    s = nest.create_schedule()
    if vec_index == "i":
        s.reorder(j, i)
    p = s.create_plan(TARGETS[isa])
    p.vectorize(i if vec_index == "i" else j)
    return Case([nest], args, p, data=data)


def _register_vector_cases():
    for isa in TARGETS:
        for dname, dt in VEC_DTYPES.items():
            for ename, N in _extents(isa, dt).items():
                pre = f"{isa}_{dname}_{ename}"
                case("vectorize", f"{pre}_elementwise", isa == "avx512")(
                    lambda isa=isa, dt=dt, N=N: _vector_case(isa, dt, N, ew_body(dt)))
                for op in ("add", "sub", "mul", "max", "min"):
                    case("vectorize", f"{pre}_reduce_{op}", isa == "avx512")(
                        lambda isa=isa, dt=dt, N=N, op=op: _vector_case(
                            isa, dt, N, reduction_body(op), data=near_one if op == "mul" else None))
                case("vectorize", f"{pre}_select", isa == "avx512")(
                    lambda isa=isa, dt=dt, N=N: _vector_case(isa, dt, N, select_body(dt)))
                case("vectorize", f"{pre}_sqrt_abs", isa == "avx512")(
                    lambda isa=isa, dt=dt, N=N: _vector_case(isa, dt, N, math_body(dt)))
            # more full vectors than are unrolled: a loop over chunks, then the masked tail
            W = LANES32[isa] // (2 if dt is F64 else 1)
            case("vectorize", f"{isa}_{dname}_many_chunks_elementwise", isa == "avx512")(
                lambda isa=isa, dt=dt, W=W: _vector_case(isa, dt, 9 * W + 5, ew_body(dt), M=2))
            case("vectorize", f"{isa}_{dname}_many_chunks_reduce_add", isa == "avx512")(
                lambda isa=isa, dt=dt, W=W: _vector_case(isa, dt, 9 * W + 5, reduction_body("add"), M=2))
            case("vectorize", f"{isa}_{dname}_many_chunks_reduce_max", isa == "avx512")(
                lambda isa=isa, dt=dt, W=W: _vector_case(isa, dt, 9 * W + 5, reduction_body("max"), M=2))


_register_vector_cases()


def _last_major_vector_case(isa):
    """Vectorizing the first dimension: contiguous in LAST_MAJOR arrays."""
    def body(i, j, x):
        x["C"][i, j] = x["A"][i, j] * 2 + x["B"][i, j] * x["w"][j]

    return _vector_case(isa, F32, 4, body, vec_index="i", layouts={"A": LM, "B": LM, "C": LM}, M=21)


for _isa in TARGETS:
    case("vectorize", f"{_isa}_last_major_first_dim", _isa == "avx512")(
        lambda isa=_isa: _last_major_vector_case(isa))


def _matmul_vector_case(isa, dt, N):
    nest, args, p, x = tiled_matmul(5, N, 4, dt, target=TARGETS[isa], tj=LANES32[isa] // (2 if dt is F64 else 1))
    p.vectorize(x["jj"])
    return Case([nest], args, p)


for _isa in TARGETS:
    for _d, _t in VEC_DTYPES.items():
        case("vectorize", f"{_isa}_{_d}_matmul_fma", _isa == "avx512")(
            lambda isa=_isa, dt=_t: _matmul_vector_case(isa, dt, 37))


def _cast_case(isa):
    Ai = acc.Array(role=IN, element_type=I32, shape=(3, 21), name="Ai")
    C = acc.Array(role=INOUT, element_type=F32, shape=(3, 21), name="C")
    nest = acc.Nest(shape=(3, 21))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(Ai[i, j], F32) * 0.5

    p = nest.create_schedule().create_plan(TARGETS[isa])
    p.vectorize(j)
    return Case([nest], (Ai, C), p)


def _runtime_vector_case(isa, dt):
    M, N = acc.create_dimensions()
    A = acc.Array(role=IN, element_type=dt, shape=(M, N), name="A")
    S = acc.Array(role=INOUT, element_type=dt, shape=(M,), name="S")
    C = acc.Array(role=INOUT, element_type=dt, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i] = acc.max(S[i], A[i, j] * 3 - 1)
        C[i, j] += A[i, j]

    p = nest.create_schedule().create_plan(TARGETS[isa])
    p.vectorize(j)
    return Case([nest], (A, S, C, M, N), p, values={M: 3, N: 2 * LANES32[isa] + 5})


for _isa in TARGETS:
    case("vectorize", f"{_isa}_int32_to_float32", _isa == "avx512")(lambda isa=_isa: _cast_case(isa))
    for _d in ("f32", "i32"):
        case("vectorize", f"{_isa}_{_d}_runtime_trip_count", _isa == "avx512")(
            lambda isa=_isa, dt=VEC_DTYPES[_d]: _runtime_vector_case(isa, dt))


def _two_reductions_case(isa, dt, op):
    """Two statements reduce into one element (each with its own vector accumulator)."""
    def body(i, j, x):
        if op == "max":
            x["S"][i] = acc.max(x["S"][i], x["A"][i, j])
            x["S"][i] = acc.max(x["B"][i, j] - 1, x["S"][i])
        else:
            x["S"][i] += x["A"][i, j]
            x["S"][i] += x["B"][i, j] * 2

    return _vector_case(isa, dt, 2 * LANES32[isa] + 5, body)


def _unrolled_rows_case(isa, dt, M):
    """Rows unrolled inside the vectorized loop: the copies' elements are a row apart."""
    def body(i, j, x):
        x["C"][i, j] = acc.min(x["C"][i, j], x["A"][i, j] * 2) + x["v"][i]

    nest, args, (i, j) = rows(M, 5, dt, body)
    s = nest.create_schedule()
    s.reorder(j, i)
    p = s.create_plan(TARGETS[isa])
    p.unroll(i)
    p.vectorize(j)
    return Case([nest], args, p)


for _isa in TARGETS:
    for _d in ("f32", "i32"):
        for _op in ("max", "add"):
            case("vectorize", f"{_isa}_{_d}_two_reductions_{_op}", _isa == "avx512")(
                lambda isa=_isa, dt=VEC_DTYPES[_d], op=_op: _two_reductions_case(isa, dt, op))
        case("vectorize", f"{_isa}_{_d}_unrolled_rows_inside", _isa == "avx512")(
            lambda isa=_isa, dt=VEC_DTYPES[_d]: _unrolled_rows_case(isa, dt, 4))


@pytest.mark.slow
@pytest.mark.parametrize("name", case_params("vectorize"))
def test_vectorize(name, build_dir):
    run_family_case("vectorize", name, build_dir)


def test_vectorized_code_uses_the_targets_registers():
    c512 = _vector_case("avx512", F32, 37, ew_body(F32)).plan.emit_c("f")
    c2 = _vector_case("avx2", F32, 37, ew_body(F32)).plan.emit_c("f")
    assert "_mm512_" in c512 and "_mm256_" not in c512
    assert "_mm256_" in c2 and "_mm512_" not in c2
    # 37 = 2 full vectors + a masked tail of 5 lanes on AVX-512
    assert "_mm512_mask_storeu_ps" in c512 and "(1u << (5))" in c512


def test_vectorized_reduction_uses_a_vector_accumulator():
    for op, h in (("add", "reduce_add"), ("max", "reduce_max"), ("min", "reduce_min"), ("mul", "reduce_mul")):
        c = _vector_case("avx512", F32, 40, reduction_body(op)).plan.emit_c("f")
        assert f"_mm512_{h}_ps" in c, (op, c)
        assert re.search(r"__m512 acc_S", c), c


# ------------------------------------------------------------------------------------------
# kernelize
# ------------------------------------------------------------------------------------------


def _kernelize_case(isa, dt, default_vec=False, cache_c=None, N=37):
    nest, args, p, x = tiled_matmul(6, N, 5, dt, target=TARGETS[isa], ti=3, tj=LANES32[isa])
    if cache_c:
        p.cache(args[2], index=x[cache_c])
    if default_vec:
        p.kernelize(unroll_indices=(x["ii"],))
    else:
        p.kernelize(unroll_indices=[x["ii"]], vectorize_indices=x["jj"])
    return Case([nest], args, p)


for _isa in TARGETS:
    for _d in ("f32", "i32"):
        _t = VEC_DTYPES[_d]
        case("kernelize", f"{_isa}_{_d}", _isa == "avx512")(lambda isa=_isa, dt=_t: _kernelize_case(isa, dt))
        case("kernelize", f"{_isa}_{_d}_default_vectorize", _isa == "avx512")(
            lambda isa=_isa, dt=_t: _kernelize_case(isa, dt, default_vec=True))
        case("kernelize", f"{_isa}_{_d}_cache_C_at_k", _isa == "avx512")(
            lambda isa=_isa, dt=_t: _kernelize_case(isa, dt, cache_c="k"))
        case("kernelize", f"{_isa}_{_d}_cache_C_at_ii", _isa == "avx512")(
            lambda isa=_isa, dt=_t: _kernelize_case(isa, dt, cache_c="ii"))


@pytest.mark.parametrize("name", case_params("kernelize"))
def test_kernelize(name, build_dir):
    run_family_case("kernelize", name, build_dir)


def test_kernelize_is_unroll_then_vectorize():
    a = _kernelize_case("avx512", F32).plan.emit_c("f")
    nest, args, p, x = tiled_matmul(6, 37, 5, F32, target=AVX512, ti=3, tj=16)
    p.unroll(x["ii"])
    p.vectorize(x["jj"])
    assert a == p.emit_c("f")


# ------------------------------------------------------------------------------------------
# parallelize
# ------------------------------------------------------------------------------------------


def _parallel_case(indices, dt=I32, policy="static", max_threads=None, cache=None, vectorize=False,
                   M=7, N=19, K=5, target=TWO_THREADS, layouts=(FM, FM, FM)):
    nest, args, p, x = tiled_matmul(M, N, K, dt, layouts, target=target, ti=2, tj=8)
    if cache:
        for which, kw in cache:
            p.cache(args["ABC".index(which)], **{k: x[v] if isinstance(v, str) else v for k, v in kw.items()})
    if vectorize:
        p.vectorize(x["jj"])
    p.parallelize(tuple(x[n] for n in indices), policy=policy, max_threads=max_threads)
    return Case([nest], args, p)


PARALLEL = {
    "i": dict(indices=("i",)),
    "i_j_collapsed": dict(indices=("i", "j")),
    "j_dynamic": dict(indices=("j",), policy="dynamic"),
    "inner_index_ii": dict(indices=("ii",), M=9),
    "max_threads_1": dict(indices=("i",), max_threads=1),
    "max_threads_2_last_major": dict(indices=("i", "j"), max_threads=2, layouts=(LM, LM, LM)),
    "more_threads_than_iterations": dict(indices=("i",), M=2, max_threads=8),
    "f32_vectorized": dict(indices=("i",), dt=F32, vectorize=True),
    "cache_C_at_k_per_thread": dict(indices=("i",), cache=[("C", dict(index="k"))]),
    "cache_C_at_ii_vectorized": dict(indices=("i", "j"), dt=F32, vectorize=True,
                                     cache=[("C", dict(index="ii"))]),
    "cache_C_at_parallel_index_shared": dict(indices=("i",), cache=[("C", dict(index="i"))]),
    "cache_C_outside_parallel_index": dict(indices=("j",), cache=[("C", dict(index="i"))]),
    "multicache_B_filled_outside": dict(indices=("j",), cache=[("B", dict(index="k", trigger_index="i"))]),
    "multicache_B_filled_inside": dict(indices=("i",), cache=[("B", dict(index="ii", trigger_index="j"))]),
    "caches_A_B_C": dict(indices=("i",), dt=F32, vectorize=True,
                         cache=[("A", dict(index="k")), ("B", dict(index="ii", trigger_index="j")),
                                ("C", dict(index="ii"))]),
}

for _name, _kw in PARALLEL.items():
    case("parallelize", _name)(lambda kw=_kw: _parallel_case(**kw))


@pytest.mark.slow
@pytest.mark.parametrize("name", case_params("parallelize"))
def test_parallelize(name, build_dir):
    run_family_case("parallelize", name, build_dir)


def _pragmas(c_text):
    return re.findall(r"#pragma omp parallel for (.*)", c_text)


def _threads(clause):
    return re.search(r"num_threads\((?:accpy_threads\()?(\d+)\)", clause).group(1)


def test_parallel_pragmas():
    # dividing extents: (i, j) is a perfect nest, collapsed
    (p,) = _pragmas(_parallel_case(("i", "j"), M=8, N=16).plan.emit_c("f"))
    assert p.startswith("schedule(static)") and p.endswith("collapse(2)") and _threads(p) == "2"
    # non-dividing extents: one parallel region over all of i (its full and tail tiles are
    # branches inside it, so the threads share them); the loops inside are not collapsed
    (p,) = _pragmas(_parallel_case(("i", "j"), M=7, N=19).plan.emit_c("f"))
    assert "schedule(static)" in p and _threads(p) == "2" and "collapse" not in p
    (p,) = _pragmas(_parallel_case(("j",), policy="dynamic", M=8).plan.emit_c("f"))
    assert "schedule(dynamic)" in p and "collapse" not in p
    (p,) = _pragmas(_parallel_case(("i",), max_threads=1, M=8).plan.emit_c("f"))
    assert _threads(p) == "1"
    # max_threads never exceeds the target's threads
    c = _parallel_case(("i",), max_threads=8, M=8)
    (p,) = _pragmas(c.plan.emit_c("f"))
    assert _threads(p) == "2" and c.plan.parallel[2] == 2


def test_private_caches_are_declared_inside_the_parallel_loop():
    c = _parallel_case(("i",), cache=[("C", dict(index="k"))]).plan.emit_c("f")
    body = c[c.index("#pragma omp parallel for"):]
    loop = body[body.index("for ("):]
    # the cache is declared inside the parallel loop's body (one per thread)
    assert re.search(r"\{\s*int32_t C_cache\[\d+\]", loop), c


def test_two_threads_on_larger_data(tmp_path):
    """Two OpenMP threads share 32 row tiles of a vectorized float32 matmul."""
    c = _parallel_case(("i",), M=64, N=40, K=9, dt=F32, vectorize=True)
    pkg = acc.Package()
    pkg.add(c.plan, args=c.args, base_name="par2")
    lib = pkg.build("par2", output_dir=str(tmp_path), python_module=False)
    assert all(_threads(p) == "2" for p in _pragmas((tmp_path / "par2.c").read_text()))
    for seed in range(3):
        check_against_reference(c, lib.par2, seed)


# ------------------------------------------------------------------------------------------
# cache
# ------------------------------------------------------------------------------------------


def _cache_case(caches, dt=I32, layouts=(FM, FM, FM), target=None, M=7, N=9, K=5, extra=None, data=None,
                tol=None):
    nest, args, p, x = tiled_matmul(M, N, K, dt, layouts, target=target)
    made = []
    for which, kw in caches:
        src = made[which] if isinstance(which, int) else args["ABC".index(which)]
        made.append(p.cache(src, **{k: x[v] if isinstance(v, str) and k.endswith("index") else v
                                    for k, v in kw.items()}))
    if extra:
        extra(p, x)
    return Case([nest], args, p, data=data, tol=tol), made, x


def _register_cache_cases():
    for arr in "ABC":
        for ix in ("i", "j", "k", "ii", "jj"):
            case("cache", f"{arr}_index_{ix}")(lambda arr=arr, ix=ix: _cache_case([(arr, dict(index=ix))])[0])
            case("cache", f"{arr}_index_{ix}_last_major_arrays")(
                lambda arr=arr, ix=ix: _cache_case([(arr, dict(index=ix))], layouts=(LM, LM, LM))[0])
        for lv in range(1, 6):
            case("cache", f"{arr}_level_{lv}_f32")(
                lambda arr=arr, lv=lv: _cache_case([(arr, dict(level=lv))], dt=F32, layouts=(FM, LM, FM))[0])
            case("cache", f"{arr}_level_{lv}_cache_last_major")(
                lambda arr=arr, lv=lv: _cache_case([(arr, dict(level=lv, layout=LM))])[0])
            case("cache", f"{arr}_level_{lv}_cache_first_major_of_last_major")(
                lambda arr=arr, lv=lv: _cache_case([(arr, dict(level=lv, layout=FM))], layouts=(LM, LM, LM))[0])
        for budget in (1, 2, 4, 8, 10, 15, 16, 20, 29, 30, 39, 40, 44, 45, 53, 54, 10_000):
            if budget >= BUDGET_BLOCKS[arr][0]:  # (smaller budgets: errors, see test_plan_errors.py)
                case("cache", f"{arr}_max_elements_{budget}")(
                    lambda arr=arr, budget=budget: _budget_case(arr, budget))
        case("cache", f"{arr}_thrifty_at_i")(lambda arr=arr: _cache_case([(arr, dict(index="i", thrifty=True))])[0])
        case("cache", f"{arr}_thrifty_at_k")(lambda arr=arr: _cache_case([(arr, dict(index="k", thrifty=True))])[0])
    # multicaches: every (cache index, trigger index) pair with trigger at or above the cache
    order = ("i", "j", "k", "ii", "jj")
    for arr in "AB":
        for a in range(5):
            for t in range(a + 1):
                ix, tx = order[a], order[t]
                case("cache", f"{arr}_index_{ix}_trigger_{tx}")(
                    lambda arr=arr, ix=ix, tx=tx: _cache_case([(arr, dict(index=ix, trigger_index=tx))])[0])
            for t in range(5 - a, 6):
                case("cache", f"{arr}_level_{5 - a}_trigger_level_{t}_last_major")(
                    lambda arr=arr, lv=5 - a, t=t: _cache_case(
                        [(arr, dict(level=lv, trigger_level=t, layout=LM))], dt=F32, layouts=(LM, FM, LM))[0])
        case("cache", f"{arr}_double_buffer")(
            lambda arr=arr: _cache_case([(arr, dict(index="ii", trigger_index="k", double_buffer=True))])[0])
        case("cache", f"{arr}_double_buffer_no_trigger")(
            lambda arr=arr: _cache_case([(arr, dict(index="k", double_buffer=True))])[0])


# The largest active block at levels 1..5 of the tiled 7x9x5 matmul (order i j k ii jj, tiles
# 2 x 4). accpy's key-slices are per loop piece: unswitching cuts i into 3 full tiles and a
# 1-row tail and j into 2 full tiles and a 1-column tail, and each piece is a site of its own
# (so the level-4 block of B is 5 x 8, not Accera's whole 5 x 9 slice).
BUDGET_BLOCKS = {"A": (1, 2, 10, 10, 30), "B": (4, 4, 20, 40, 45), "C": (4, 8, 8, 16, 54)}


def _budget_case(arr, budget):
    """max_elements picks the highest level whose active block fits."""
    expected = max(lv for lv in range(1, 6) if BUDGET_BLOCKS[arr][lv - 1] <= budget)
    c, made, x = _cache_case([(arr, dict(max_elements=budget))])
    order = ("i", "j", "k", "ii", "jj")

    def after():
        assert made[0].level == expected, (arr, budget, made[0].level, expected)
        assert made[0].index is x[order[5 - expected]]

    c.after = after
    return c


_register_cache_cases()


def _more_cache_cases():
    # element types
    case("cache", "C_int32_as_int64")(lambda: _cache_case([("C", dict(index="k", element_type=I64))])[0])
    case("cache", "A_int32_as_int64_multicache")(
        lambda: _cache_case([("A", dict(index="ii", trigger_index="k", element_type=I64))])[0])
    case("cache", "C_f32_as_f64")(lambda: _cache_case([("C", dict(level=4, element_type=F64))], dt=F32)[0])

    def f16_exact(array, rng, shape):  # values a float16 holds exactly: the cache changes nothing
        return (rng.integers(-8, 9, size=shape) / 8).astype(array.element_type.dtype)

    case("cache", "A_f32_as_f16")(
        lambda: _cache_case([("A", dict(index="k", element_type=F16))], dt=F32, data=f16_exact)[0])
    # caches of caches
    case("cache", "C_level_4_then_2")(lambda: _cache_case([("C", dict(level=4)), (0, dict(level=2))])[0])
    case("cache", "C_level_5_then_3_then_1")(
        lambda: _cache_case([("C", dict(level=5)), (0, dict(level=3)), (1, dict(level=1))])[0])
    case("cache", "A_index_i_then_multicache")(
        lambda: _cache_case([("A", dict(index="i")), (0, dict(index="ii", trigger_index="k"))])[0])
    case("cache", "A_trigger_at_own_index_then_multicache")(
        lambda: _cache_case([("A", dict(level=5, trigger_level=5)), (0, dict(index="ii", trigger_index="k"))])[0])
    case("cache", "B_multicache_then_cache")(
        lambda: _cache_case([("B", dict(index="k", trigger_index="i")), (0, dict(index="jj"))])[0])
    case("cache", "B_budget_then_budget")(lambda: _hier_budget_case())
    case("cache", "all_three_f32_layouts")(lambda: _cache_case(
        [("A", dict(index="k", layout=LM)), ("B", dict(index="ii", trigger_index="k")),
         ("C", dict(index="k", layout=LM))], dt=F32, layouts=(LM, FM, LM))[0])
    # write-only outputs and in/out arrays assigned with `=`
    for role in ("OUTPUT", "INPUT_OUTPUT"):
        for ix in ("i", "j", "jj"):
            case("cache", f"assigned_{role}_at_{ix}")(lambda role=role, ix=ix: _assigned_case(role, ix)[0])
    # a cache of the reduction target of a max accumulation
    case("cache", "max_accumulation_target")(_max_acc_case)


def _hier_budget_case():
    c, made, x = _cache_case([("B", dict(max_elements=45)), (0, dict(max_elements=20))])

    def after():
        assert (made[0].level, made[1].level) == (5, 3)  # 45 >= B's level-5 block, 20 >= level 3's

    c.after = after
    return c


def _assigned_case(role, ix, target=None, N=20):
    A = acc.Array(role=IN, element_type=F32, shape=(5, N), name="A")
    C = acc.Array(role=getattr(acc.Role, role), element_type=F32, shape=(5, N), name="C")
    nest = acc.Nest(shape=(5, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] = A[i, j] * 2 - 1

    s = nest.create_schedule()
    jj = s.split(j, 8)
    p = s.create_plan(target)
    names = dict(i=i, j=j, jj=jj)
    p.cache(C, index=names[ix])
    p.cache(A, index=names[ix])
    return Case([nest], (A, C), p), (A, C)


def _max_acc_case():
    A = acc.Array(role=IN, element_type=I32, shape=(6, 11), name="A")
    S = acc.Array(role=INOUT, element_type=I32, shape=(6,), name="S")
    nest = acc.Nest(shape=(6, 11))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i] = acc.max(S[i], A[i, j])

    s = nest.create_schedule()
    ii = s.split(i, 4)
    s.reorder(i, j, ii)
    p = s.create_plan()
    p.cache(S, index=j)
    p.cache(A, index=j)
    return Case([nest], (A, S), p)


_more_cache_cases()


@pytest.mark.slow
@pytest.mark.parametrize("name", case_params("cache"))
def test_cache(name, build_dir):
    run_family_case("cache", name, build_dir)


def test_cache_cases_cover_every_option():
    names = " ".join(FAMILIES["cache"])
    for word in ("index", "level", "max_elements", "trigger", "trigger_level", "last_major", "first_major",
                 "as_int64", "as_f64", "as_f16", "then", "thrifty", "double_buffer", "OUTPUT"):
        assert word in names, word


# ------------------------------------------------------------------------------------------
# caches and vectors together (run), and what the emitted code looks like
# ------------------------------------------------------------------------------------------


def _register_tile(isa, dt=F32, N=37, cache_at="k"):
    """The micro-kernel shape: C cached at k, ii unrolled, jj vectorized."""
    W = LANES32[isa] // (2 if dt is F64 else 1)
    nest, args, p, x = tiled_matmul(6, N, 5, dt, target=TARGETS[isa], ti=3, tj=W)
    cache = p.cache(args[2], index=x[cache_at])
    p.unroll(x["ii"])
    p.vectorize(x["jj"])
    return Case([nest], args, p), cache


for _isa in TARGETS:
    for _d in ("f32", "f64", "i32"):
        case("registers", f"{_isa}_{_d}", _isa == "avx512")(
            lambda isa=_isa, d=_d: _register_tile(isa, VEC_DTYPES[d])[0])
        case("registers", f"{_isa}_{_d}_masked_tile", _isa == "avx512")(
            lambda isa=_isa, d=_d: _register_tile(isa, VEC_DTYPES[d], N=LANES32[isa] // 2 + 3)[0])


@pytest.mark.parametrize("name", case_params("registers"))
def test_register_tiles(name, build_dir):
    run_family_case("registers", name, build_dir)


def function_body(c_text: str) -> str:
    return c_text[c_text.index("{"):]


@pytest.mark.parametrize("isa,vtype", [("avx512", "__m512"), ("avx2", "__m256")])
@pytest.mark.parametrize("N", [37, 16, 5])
def test_small_cache_of_C_lives_in_registers(isa, vtype, N):
    c, _ = _register_tile(isa, F32, N=N)
    body = function_body(c.plan.emit_c("f", c.args))
    assert "C_cache[" not in body, body
    assert re.search(rf"\b{vtype} C_cache_\d+;", body), body
    # the micro-kernel's k loop is FMAs on registers: loads of B, broadcasts of A
    assert "fmadd" in body


def test_register_cache_count_matches_the_tile():
    c, _ = _register_tile("avx512", F32, N=64)  # ii: 3 rows, jj: one 16-lane vector per tile
    body = function_body(c.plan.emit_c("f", c.args))
    regs = set(re.findall(r"__m512 (C_cache_\w+);", body))
    assert len(regs) == 3, body


class _Accesses(Visitor):
    def __init__(self):
        self.loads, self.stores = [], []

    def visit_Load(self, n):
        self.loads.append(n.buffer.name)
        self.generic_visit(n)

    def visit_VLoad(self, n):
        self.loads.append(n.buffer.name)
        self.generic_visit(n)

    def visit_Store(self, n):
        self.stores.append(n.buffer.name)
        self.generic_visit(n)

    def visit_VStore(self, n):
        self.stores.append(n.buffer.name)
        self.generic_visit(n)


def accesses(c: Case) -> _Accesses:
    v = _Accesses()
    v.visit(c.plan.lower("f", c.args).body)
    return v


@pytest.mark.parametrize("target", [AVX512, AVX2, HOST(extensions=(), vector_bytes=16)],
                         ids=["avx512", "avx2", "scalar"])
@pytest.mark.parametrize("ix", ["i", "j", "jj"])
def test_no_copy_in_for_a_fully_written_output(ix, target):
    """C = A * 2 - 1 (OUTPUT): the cache's block is fully written, so C is never read --
    only written back; A is read through its cache and never written."""
    c, (A, C) = _assigned_case("OUTPUT", ix, target=target)
    acc_ = accesses(c)
    assert "C" not in acc_.loads, acc_.loads
    assert "C" in acc_.stores
    assert "A" not in acc_.stores  # an INPUT is never written back
    assert "A" in acc_.loads and "A_cache" in acc_.loads and "C_cache" in acc_.stores
    text = c.plan.emit_c("f", c.args)
    # no expression reads C: every `C[` is a store target or the address of a vector store
    for line in text.splitlines():
        for m in re.finditer(r"&?C\[", line):
            before = line[:m.start()].strip()
            assert before.endswith("(") and "store" in before or before == "", line


def test_copy_in_and_write_back_for_an_accumulated_output():
    c, _, _ = _cache_case([("C", dict(index="k"))])
    acc_ = accesses(c)
    assert "C" in acc_.loads and "C" in acc_.stores  # copied in (C is read by +=) and written back


@pytest.mark.parametrize("arr", ["A", "B"])
@pytest.mark.parametrize("kw", [dict(index="k"), dict(index="ii", trigger_index="k"), dict(level=5)])
def test_inputs_are_never_written_back(arr, kw):
    c, _, _ = _cache_case([(arr, dict(kw))])
    acc_ = accesses(c)
    assert arr not in acc_.stores
    assert f"{arr}_cache" in acc_.stores and f"{arr}_cache" in acc_.loads


def test_partially_written_block_is_copied_in():
    """C[i, 2*j] = ... writes every other element of its block: the rest must survive the
    write-back, so the block is copied in first."""
    A = acc.Array(role=IN, element_type=I32, shape=(4, 6), name="A")
    C = acc.Array(role=INOUT, element_type=I32, shape=(4, 12), name="C")
    nest = acc.Nest(shape=(4, 6))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, 2 * j] = A[i, j]

    p = nest.create_schedule().create_plan()
    p.cache(C, index=j)
    c = Case([nest], (A, C), p)
    assert "C" in accesses(c).loads


def test_multicache_is_filled_at_its_trigger():
    """B cached at ii, triggered at k: B's panels are copied once per k block, outside ii."""
    c, _, _ = _cache_case([("B", dict(index="ii", trigger_index="k"))])
    text = c.plan.emit_c("f", c.args)
    k_loop = text.index("for (int64_t k ")
    first_b_read = text.index("B[")
    ii_loop = text.index("for (int64_t ii ")
    assert k_loop < first_b_read < ii_loop


@pytest.mark.parametrize("arr,ix,copied", [
    ("A", "i", False),   # two whole rows of A (FIRST_MAJOR): one contiguous run
    ("A", "jj", False),  # one element of A per key-slice of jj
    ("A", "ii", True),   # a column of two elements
    ("C", "k", True),    # two rows x 4 columns of C: not contiguous
    ("C", "j", False),   # the pieces of j (full tiles and the tail) together: two whole rows of C
    ("B", "k", True),    # 5 rows x 4 columns of B
])
def test_thrifty_cache_of_a_contiguous_block_is_not_made(arr, ix, copied):
    c, made, x = _cache_case([(arr, dict(index=ix, thrifty=True))])
    text = c.plan.emit_c("f", c.args)
    assert (f"{arr}_cache" in text) == copied, text
    c2, _, _ = _cache_case([(arr, dict(index=ix, thrifty=True, layout=LM))])
    assert f"{arr}_cache" in c2.plan.emit_c("f", c2.args)  # another layout: copied
