"""The target interface's own test: a toy fifth library, defined here, that builds and runs without
any change to lower/, codegen/, plan/ or package/. It applies to a target of its own ("Toy4",
whose code its toolchain compiles for this machine, so it runs here) and gives a vector ISA
(`VectorISA`: 4-lane vectors in GNU C's vector types, its own C prelude, and a signed x signed dot product of groups of 8 bytes
(8 int8 per int32 lane), which makes a grouped cache of int8 hold groups of 8 (operand_group)), and a
toolchain of its own (a function attribute, a unit flag and a run-time guard)."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.ir.types import ScalarType
from accpy.nest.reference import evaluate
from accpy.targets import library
from accpy.targets.library import TargetLibrary, register_library
from accpy.targets.vector_isa import DotProduct, VectorISA, VectorShape
from accpy.targets.toolchain import Toolchain
from abi.kernels import mixed_matmul_nest

S = ScalarType

PRELUDE = r"""typedef float toy_f32x4 __attribute__((vector_size(16)));
typedef int32_t toy_i32x4 __attribute__((vector_size(16)));
typedef int8_t toy_i8x32 __attribute__((vector_size(32)));
#define TOY_MEMORY(V, T, N, SFX)                                                                   \
    static inline V toy_load_##SFX(const void* p) { V v; memcpy(&v, p, sizeof v); return v; }     \
    static inline void toy_store_##SFX(void* p, V v) { memcpy(p, &v, sizeof v); }                 \
    static inline V toy_mload_##SFX(const void* p, int64_t n) {                                   \
        T t[N] = {0}; for (int64_t l = 0; l < n && l < N; ++l) t[l] = ((const T*)p)[l];           \
        return toy_load_##SFX(t);                                                                 \
    }                                                                                             \
    static inline void toy_mstore_##SFX(void* p, int64_t n, V v) {                                \
        T t[N]; memcpy(t, &v, sizeof t); for (int64_t l = 0; l < n && l < N; ++l) ((T*)p)[l] = t[l]; \
    }                                                                                             \
    static inline T toy_hadd_##SFX(V v) { T t[N]; memcpy(t, &v, sizeof t); T r = 0;              \
        for (int l = 0; l < N; ++l) r += t[l]; return r; }                                        \
    /* masks are lane counts: the first n lanes of a, the others of b */                          \
    static inline V toy_select_##SFX(int64_t n, V a, V b) {                                      \
        T x[N], y[N]; memcpy(x, &a, sizeof x); memcpy(y, &b, sizeof y);                           \
        for (int64_t l = 0; l < n && l < N; ++l) y[l] = x[l];                                     \
        return toy_load_##SFX(y);                                                                 \
    }
TOY_MEMORY(toy_f32x4, float, 4, f32)
TOY_MEMORY(toy_i32x4, int32_t, 4, i32)
TOY_MEMORY(toy_i8x32, int8_t, 32, i8)
/* the group of 8 bytes at p in every slot (only its first n bytes: the rest 0) */
static inline toy_i8x32 toy_bcast8(const void* p, int n) {
    int8_t t[32] = {0}; for (int l = 0; l < 32; ++l) if (l % 8 < n) t[l] = ((const int8_t*)p)[l % 8];
    return toy_load_i8(t);
}
static inline toy_i8x32 toy_mload_groups(const void* p, int g, int k, int64_t n) {
    int8_t t[32] = {0}; for (int l = 0; l < 32; ++l) if (l % g < k && (n < 0 || l < n)) t[l] = ((const int8_t*)p)[l];
    return toy_load_i8(t);
}
/* c + per lane the sum of 8 products of signed bytes */
static inline toy_i32x4 toy_dot8(toy_i32x4 c, toy_i8x32 a, toy_i8x32 b) {
    int32_t r[4]; int8_t x[32], y[32]; memcpy(r, &c, 16); memcpy(x, &a, 32); memcpy(y, &b, 32);
    for (int l = 0; l < 4; ++l) for (int q = 0; q < 8; ++q) r[l] += (int32_t)x[8 * l + q] * (int32_t)y[8 * l + q];
    return toy_load_i32(r);
}
"""


def _shape(dtype, sfx, ctype, lanes, extra=None):
    ops = {"mask": "({n})", "load": f"toy_load_{sfx}({{p}})", "mload": f"toy_mload_{sfx}({{p}}, {{m}})",
           "store": f"toy_store_{sfx}({{p}}, {{a}})", "mstore": f"toy_mstore_{sfx}({{p}}, {{m}}, {{a}})",
           "set1": f"(({ctype}){{{{0}}}} + ({{a}}))", "zero": f"(({ctype}){{{{0}}}})",
           "add": "(({a}) + ({b}))", "sub": "(({a}) - ({b}))", "mul": "(({a}) * ({b}))",
           "fma": "(({a}) * ({b}) + ({c}))", "hadd": f"toy_hadd_{sfx}({{a}})",
           "select": f"toy_select_{sfx}({{m}}, {{a}}, {{b}})"}
    return VectorShape("toy", dtype, lanes, ctype, ops, (), extra or {})


SHAPES = {S.float32: _shape(S.float32, "f32", "toy_f32x4", 4),
          S.int32: _shape(S.int32, "i32", "toy_i32x4", 4, {"toy_dot8": "toy_dot8({c}, {a}, {b})"})}
BYTES = VectorShape("toy", S.int8, 32, "toy_i8x32", {
    "mask": "({n})", "load": "toy_load_i8({p})", "mload": "toy_mload_i8({p}, {m})",
    "bcast": "toy_bcast8({p}, 8)", "bcast_part": "toy_bcast8({p}, {n})",
    "mload_groups": "toy_mload_groups({p}, {g}, {k}, {n})"})
DOT = DotProduct("toy_dot8", 8, S.int32, (S.int8, S.int8), True, (0, 8))


class ToyToolchain(Toolchain):
    """The host's compiler, with the toy's own function attribute, unit flag and run-time guard (it
    refuses to run when the environment variable TOY_UNIT_OFF is set: the toy's "missing feature")."""

    name = "toy toolchain"

    def unit_flags(self, targets) -> list:
        return ["-DTOY_UNIT=1"]

    def function_attribute(self, target) -> str:
        return "__attribute__((noinline)) "

    def feature_guard(self, target, function: str, c_string) -> list:
        fmt = c_string("%s: the toy unit is off on this machine")
        return ["    if (getenv(\"TOY_UNIT_OFF\") != NULL || !TOY_UNIT) {",
                f"        accpy_set_error({fmt}, {c_string(function)});",
                "        return;", "    }"]


TOY_TOOLCHAIN = ToyToolchain()


class ToyISA(VectorISA):
    """The toy's vector ISA: float32 and int32 in 4 lanes, int8 as the dot product's operands."""

    name = "toy vectors"

    def shape(self, dtype):
        return SHAPES.get(dtype)

    def shape_of(self, dtype, lanes):
        for isa in (SHAPES.get(dtype), BYTES if dtype is S.int8 else None):
            if isa is not None and isa.lanes == lanes:
                return isa
        return None

    def supports(self, dtype, op):
        return dtype is S.int32 if op == DOT.op else super().supports(dtype, op)

    def dot_products(self):
        return (DOT,)

    def prelude(self) -> str:
        return PRELUDE


class ToyLibrary(TargetLibrary):
    name = "toy vectors"

    def toolchain(self, target):
        return TOY_TOOLCHAIN if self.applies_to(target) else None

    def applies_to(self, target) -> bool:
        return target.name == "Toy4"

    def vector_isa(self, target):
        return ToyISA(target)

    def dot_products(self, target=None):
        return (DOT,)


@pytest.fixture
def toy():
    """The library registered for the test, and the registry as it was afterwards."""
    lib = ToyLibrary()
    before = list(library._LIBRARIES)
    register_library(lib)
    try:
        # (an architecture no other library claims; the toy's toolchain compiles it for this machine)
        yield acc.Target(None, name="Toy4", architecture="RISCV64", vector_bytes=16)
    finally:
        library._LIBRARIES[:] = before


def _int8_matmul(target, M=6, N=11, K=21):
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(M, N, K, S.int8, S.int8, S.int32)
    s = nest.create_schedule()
    j2, k2 = s.split(j, 4), s.split(k, 8)
    s.reorder(i, j, k, j2, k2)
    plan = s.create_plan(target)
    plan.cache(B, index=i, layout=acc.Array.Layout.grouped())  # the target's group: 8 int8
    plan.vectorize(j2)
    return nest, plan, (A, B, C)


def _saxpy(target, N=23):
    X = acc.Array(role=acc.Role.INPUT, shape=(N,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N,), name="Y")
    R = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(1,), name="R")
    nest = acc.Nest(shape=(N,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i] * 3.0
        R[0] += X[i]

    plan = nest.create_schedule().create_plan(target)
    plan.vectorize(i)
    return nest, plan, (X, Y, R)


def test_a_toy_library_builds_and_runs(toy, tmp_path, monkeypatch):
    kernels = {"mm": _int8_matmul(toy), "saxpy": _saxpy(toy)}
    c = kernels["mm"][1].emit_c("mm", kernels["mm"][2])
    assert "toy_dot8(" in c and "toy_bcast8(" in c  # A's group of 8 repeated, B's groups of 8 contiguous
    assert "toy_mload_groups(" in c  # K = 21 = 2 * 8 + 5: the last group partial
    pkg = acc.Package()
    for name, (_, plan, args) in kernels.items():
        pkg.add(plan, args=args, base_name=name)
    lib = pkg.build("toy", output_dir=tmp_path, python_module=False)
    assert "toy_f32x4" in (tmp_path / "toy.c").read_text()
    rng = np.random.default_rng(4)
    for name, (nest, _, args) in kernels.items():
        values = [rng.integers(-128, 128, a.shape).astype(a.element_type.name) if a.element_type.is_int
                  else rng.standard_normal(a.shape).astype(np.float32) for a in args]
        want = [v.copy() for v in values]
        evaluate(nest, dict(zip(args, want)))
        getattr(lib, name)(*values)
        for got, w in zip(values, want):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5, err_msg=name)
    # the toy's toolchain: its attribute and guard in the C, its flag in the build
    assert toy.toolchain is TOY_TOOLCHAIN
    text = (tmp_path / "toy.c").read_text()
    assert "static __attribute__((noinline)) void mm_" in text and 'getenv("TOY_UNIT_OFF")' in text
    monkeypatch.setenv("TOY_UNIT_OFF", "1")
    with pytest.raises(acc.KernelError, match="saxpy: the toy unit is off on this machine"):
        lib.saxpy(*values)
