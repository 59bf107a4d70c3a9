"""The tensor-unit interface's own test: toy libraries, defined here, with a target memory (an
accumulator of 16 rows of 4 int32, "TOY_ACC") and a tensor instruction on it (a 4x4x8 signed int8
dot tile accumulating into it), whose C is plain loops in this file's own header text. An int8
matmul cached and tensorized onto them builds and runs against the reference evaluator without any
change to lower/, codegen/, plan/ or package/: once with one library giving both (its memory and
its tiles), once with the memory from one library and the tile instruction from another."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import accpy as acc
from accpy.ir.affine import to_affine
from accpy.ir.expr import BinOp, Call, Cast, Const, Load, as_int, idx_op
from accpy.ir.stmt import Evaluate
from accpy.ir.types import ScalarType
from accpy.ir.visitor import substitute
from accpy.nest.reference import evaluate
from accpy.targets import library
from accpy.targets.library import Intrinsic, Memory, TargetLibrary, register_library
from accpy.targets.tensor_unit import TensorUnit, memory_unit, resolve_tensorize, tensor_units
from abi.kernels import mixed_matmul_nest

S = ScalarType
ROWS, COLS, K = 16, 4, 8  # the accumulator: 16 rows of 4 int32; a tile: 4 x 4, 8 deep

HEADER = r"""#ifndef TOY_TENSOR_H
#define TOY_TENSOR_H
static int32_t toy_acc[16][4];
static inline void toy_acc_zero(int64_t row, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) for (int64_t c = 0; c < cols; ++c) toy_acc[row + r][c] = 0;
}
static inline void toy_acc_load(int64_t row, const int32_t* src, int64_t stride, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) for (int64_t c = 0; c < cols; ++c) toy_acc[row + r][c] = src[r * stride + c];
}
static inline void toy_acc_store(int32_t* dst, int64_t stride, int64_t row, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) for (int64_t c = 0; c < cols; ++c) dst[r * stride + c] = toy_acc[row + r][c];
}
/* acc[row + r][c] += sum over q < k of a[r][q] * b[q][c], signed bytes (r < m, c < n) */
static inline void toy_dot(int64_t row, const int8_t* a, int64_t as, const int8_t* b, int64_t bs,
                           int64_t m, int64_t n, int64_t k) {
    for (int64_t r = 0; r < m; ++r) for (int64_t c = 0; c < n; ++c) {
        int32_t s = 0;
        for (int64_t q = 0; q < k; ++q) s += (int32_t)a[r * as + q] * (int32_t)b[q * bs + c];
        toy_acc[row + r][c] += s;
    }
}
#endif"""


def _intr(name, params, pointers=(), read_only=()):
    template = f"toy_{name}({', '.join('{' + p + '}' for p in params)})"
    return Intrinsic(f"toy.{name}", params, template, pointer_params=pointers, read_only=read_only, header=HEADER)


ZERO = _intr("acc_zero", ("row", "rows", "cols"))
LOAD = _intr("acc_load", ("row", "src", "stride", "rows", "cols"), ("src",), ("src",))
STORE = _intr("acc_store", ("dst", "stride", "row", "rows", "cols"), ("dst",))
DOT = _intr("dot", ("row", "a", "a_stride", "b", "b_stride", "m", "n", "k"), ("a", "b"), ("a", "b"))
TOY_ACC = Memory("toy_acc", ROWS, COLS, S.int32, description="16 rows of 4 int32", owner="Toy")
SPACE = acc.MemorySpace.define("TOY_ACC", "toy_acc")


def _call(intr, *args) -> Evaluate:
    return Evaluate(Call(intr.name, tuple(Const(a) if isinstance(a, int) else a for a in args), S.index))


@dataclass(frozen=True)
class ToyLayout:
    """A cache in TOY_ACC: rows `base`.. of the accumulator, one per row of its block."""

    buffer: object
    base: int
    rows: int


@dataclass(frozen=True)
class ToyIntrinsic:
    name: str
    shape: tuple


DOT_TILE = ToyIntrinsic("toy.dot", (4, COLS, K))


@dataclass(frozen=True)
class ToyTile:
    """One matched tile: the accumulator row, A's and B's first elements and row strides, m x n x k."""

    row: object
    a: Load
    a_stride: object
    b: Load
    b_stride: object
    m: object
    n: object
    k: object


class ToyMemoryUnit(TensorUnit):
    """TOY_ACC: caches placed row by row; copies are toy_acc_zero / _load / _store."""

    name = "the toy accumulator"
    memories = (TOY_ACC,)

    def place(self, buffers, describe, roles=None) -> dict:
        out, used = {}, 0
        for b in buffers:
            shape = [as_int(s) for s in b.shape]
            if len(shape) != 2 or None in shape or shape[1] > COLS:
                raise ValueError(f"{describe(b)} in TOY_ACC: a block of rows of at most {COLS} int32; got {shape}")
            if used + shape[0] > ROWS:
                raise ValueError(f"{describe(b)} in TOY_ACC: {shape[0]} rows, {ROWS - used} left")
            out[b] = ToyLayout(b, used, shape[0])
            used += shape[0]
        return out

    def copy_in(self, layout, source, origin, extents, what, locality=None):
        if source is None:
            return _call(ZERO, layout.base, extents[0], extents[1])
        return _call(LOAD, layout.base, Load(source, tuple(origin)), source.strides[0], extents[0], extents[1])

    def copy_out(self, layout, dest, origin, extents, what):
        return _call(STORE, Load(dest, tuple(origin)), dest.strides[0], layout.base, extents[0], extents[1])


def _operand(e):
    return e.value if isinstance(e, Cast) and e.dtype is S.int32 and isinstance(e.value, Load) \
        and e.value.dtype is S.int8 else None


def _flat_coef(load, var) -> int:
    """How many elements `load`'s address moves per step of `var`."""
    return sum(to_affine(ix).coef(var) * as_int(st) for ix, st in zip(load.indices, load.buffer.strides))


def _check(store, what):
    v = store.value
    if store.reduce != "add" or store.buffer.dtype is not S.int32 or not isinstance(v, BinOp) or v.op != "mul" \
            or _operand(v.a) is None or _operand(v.b) is None:
        raise ValueError(f"{what}: the toy dot unit computes C[i, j] += int32(A[i, k]) * int32(B[k, j]), "
                         f"A and B int8, C int32")


class ToyDotUnit(TensorUnit):
    """The 4x4x8 dot tile into TOY_ACC, reading A and B from host memory."""

    name = "the toy dot unit"

    def tensor_intrinsic(self, spec):
        if spec is None or spec == DOT_TILE or spec == DOT_TILE.name:
            return DOT_TILE
        raise ValueError(f"tensorize: the toy dot unit has no intrinsic {spec!r}; it has {DOT_TILE.name!r}")

    def check_tensorize(self, store, what):
        _check(store, what)

    def match_tile(self, loops, store, roles, layouts, what):
        _check(store, what)
        lay = layouts.get(store.buffer)
        if not isinstance(lay, ToyLayout):
            raise ValueError(f"{what}: the accumulator {store.buffer.name} must be cached in TOY_ACC")
        present = {f.var for f in loops}
        i, j, k = (v if v in present else None for v in roles)
        ext = {f.var: idx_op("sub", f.hi, f.lo) for f in loops}
        a, b = _operand(store.value.a), _operand(store.value.b)
        if i is not None and _flat_coef(b, i) or j is not None and _flat_coef(a, j):
            a, b = b, a
        zero = {v: Const(0) for v in (i, j, k) if v is not None}
        first = [substitute(ix, zero) for ix in store.indices]
        if as_int(first[1]) != 0:
            raise ValueError(f"{what}: a tile starts at column 0 of the accumulator")
        return ToyTile(idx_op("add", Const(lay.base), first[0]),
                       Load(a.buffer, tuple(substitute(ix, zero) for ix in a.indices)),
                       Const(_flat_coef(a, i) if i is not None else 0),
                       Load(b.buffer, tuple(substitute(ix, zero) for ix in b.indices)),
                       Const(_flat_coef(b, k) if k is not None else 0),
                       *(ext.get(v, Const(1)) if v is not None else Const(1) for v in (i, j, k)))

    def tile_calls(self, tile):
        return _call(DOT, tile.row, tile.a, tile.a_stride, tile.b, tile.b_stride, tile.m, tile.n, tile.k)


class ToyUnit(ToyMemoryUnit, ToyDotUnit):
    name = "the toy tensor unit"


class _ToyLibrary(TargetLibrary):
    def __init__(self, name, target_name, unit, memories, intrinsics):
        self.name, self.target_name, self.unit = name, target_name, unit
        self.memories, self.intrinsics = memories, intrinsics

    def applies_to(self, target) -> bool:
        return target.name == self.target_name

    def tensor_unit(self, target):
        return self.unit


@pytest.fixture
def registry():
    """Registers the libraries a test makes (`registry(lib, ...)`), and forgets them afterwards."""
    saved = (list(library._LIBRARIES), dict(library._INTRINSICS), dict(library._MEMORIES), dict(library._OWNER))

    def register(*libs):
        for lib in libs:
            register_library(lib)

    try:
        yield register
    finally:
        library._LIBRARIES[:] = saved[0]
        for d, old in zip((library._INTRINSICS, library._MEMORIES, library._OWNER), saved[1:]):
            d.clear()
            d.update(old)


def _target(name):
    # (an architecture no built-in library claims; the host's compiler builds it)
    return acc.Target(None, name=name, architecture="RISCV64")


def _matmul(target, M=10, N=6, K_=20):
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(M, N, K_, S.int8, S.int8, S.int32)
    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 4), s.split(j, COLS), s.split(k, K)
    s.reorder(i, j, k, ii, jj, kk)
    plan = s.create_plan(target)
    plan.cache(C, index=k, location=SPACE)  # the 4 x 4 block of C in the accumulator (tails: 2 rows, 2 columns)
    plan.tensorize(indices=(ii, jj, kk))
    return nest, plan, (A, B, C)


def _build_and_check(nest, plan, args, tmp_path, name):
    code = plan.emit_c(name, args)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name=name)
    lib = pkg.build(name, output_dir=tmp_path, python_module=False)
    rng = np.random.default_rng(7)
    values = [rng.integers(-128, 128, a.shape).astype(a.element_type.name) for a in args]
    want = [v.copy() for v in values]
    evaluate(nest, dict(zip(args, want)))
    getattr(lib, name)(*values)
    np.testing.assert_array_equal(values[2], want[2])
    return code


def test_one_library_gives_the_memory_and_the_tiles(registry, tmp_path):
    lib = _ToyLibrary("toy tensor", "ToyT", ToyUnit(), (TOY_ACC,), (ZERO, LOAD, STORE, DOT))
    registry(lib)
    target = _target("ToyT")
    assert tensor_units(target) == target.tensor_units == ((lib, lib.unit),)
    assert memory_unit(target, "toy_acc") == (lib, lib.unit)
    nest, plan, args = _matmul(target)
    code = _build_and_check(nest, plan, args, tmp_path, "mm")
    # every tile a call of the toy's instruction (full 4 x 4 x 8 tiles, and the tails' 2 rows,
    # 2 columns and 4 deep), the block of C loaded into and stored from the accumulator
    assert "toy_dot(" in code and "toy_acc_load(" in code and "toy_acc_store(" in code
    assert "toy_dot(0, &A" in code.replace("(int64_t)", "")
    assert "C_cache" not in code.split("toy_acc_load(")[1]  # (the accumulator is no C array)


def test_memories_from_one_library_tiles_from_another(registry, tmp_path):
    memories = _ToyLibrary("toy memory", "ToySplit", ToyMemoryUnit(), (TOY_ACC,), (ZERO, LOAD, STORE))
    dots = _ToyLibrary("toy dots", "ToySplit", ToyDotUnit(), (), (DOT,))
    registry(memories, dots)
    target = _target("ToySplit")
    assert memory_unit(target, "toy_acc") == (memories, memories.unit)
    assert resolve_tensorize(target, None) == (dots, dots.unit, DOT_TILE)
    nest, plan, args = _matmul(target)
    code = _build_and_check(nest, plan, args, tmp_path, "mm2")
    assert "toy_dot(" in code and "toy_acc_load(" in code and "toy_acc_store(" in code


def test_errors_name_the_library_that_matched_and_the_one_that_placed(registry):
    """The tile library meets a statement it cannot make a tile of, in another library's memory."""
    memories = _ToyLibrary("toy memory", "ToySplit", ToyMemoryUnit(), (TOY_ACC,), (ZERO, LOAD, STORE))
    dots = _ToyLibrary("toy dots", "ToySplit", ToyDotUnit(), (), (DOT,))
    registry(memories, dots)
    nest, plan, args = _matmul(_target("ToySplit"), M=4, N=4, K_=8)
    dots.unit.check_tensorize = lambda store, what: None  # (let a bad statement reach lowering)
    nest2 = acc.Nest(shape=(4, 4, 8))
    A, B, C = args
    i, j, k = nest2.get_indices()

    @nest2.iteration_logic
    def _():
        C[i, j] += acc.cast(A[i, k], S.int32) + acc.cast(B[k, j], S.int32)  # (a sum, not a product)

    s = nest2.create_schedule()
    plan = s.create_plan(_target("ToySplit"))
    plan.cache(C, index=i, location=SPACE)
    plan.tensorize(indices=(i, j, k))
    with pytest.raises(ValueError, match=r"the toy dot unit computes .*\(the toy dot unit's tiles, matched by "
                                         r"library 'toy dots'; C_cache\w* placed by library 'toy memory'\)"):
        plan.emit_c("bad", args)


def test_a_memory_no_library_of_the_target_places(registry):
    """The memory is registered (one library has it) but the target's libraries do not place it."""
    memories = _ToyLibrary("toy memory", "ToyOther", ToyMemoryUnit(), (TOY_ACC,), (ZERO, LOAD, STORE))
    dots = _ToyLibrary("toy dots", "ToyDotsOnly", ToyDotUnit(), (), (DOT,))
    registry(memories, dots)
    nest, plan, args = _matmul(_target("ToyDotsOnly"))
    with pytest.raises(ValueError, match=r"in Toy's toy_acc: none of the target's libraries places caches in "
                                         r"that memory \(the libraries with memories: none\)"):
        plan.emit_c("mm", args)


def test_the_intrinsic_picks_the_unit(registry):
    """With two units with tensor instructions, `intrinsic=` picks one; an unknown one lists both."""
    first = _ToyLibrary("toy tensor", "ToyTwo", ToyUnit(), (TOY_ACC,), (ZERO, LOAD, STORE, DOT))

    class Other(ToyDotUnit):
        name = "another dot unit"

        def tensor_intrinsic(self, spec):
            if spec in (None, "other.dot"):
                return ToyIntrinsic("other.dot", (4, 4, 4))
            raise ValueError(f"tensorize: the other unit has no intrinsic {spec!r}")

    second = _ToyLibrary("other dots", "ToyTwo", Other(), (), ())
    registry(first, second)
    target = _target("ToyTwo")
    assert resolve_tensorize(target, None)[0] is first  # (the first unit with tensor instructions)
    assert resolve_tensorize(target, "other.dot")[:2] == (second, second.unit)
    assert resolve_tensorize(target, "toy.dot")[0] is first
    with pytest.raises(ValueError, match=r"no tensor unit of target ToyTwo has the intrinsic 'x': library 'toy "
                                         r"tensor': .*; library 'other dots': tensorize: the other unit has no"):
        resolve_tensorize(target, "x")
