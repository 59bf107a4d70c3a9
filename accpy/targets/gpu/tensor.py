"""Tensor cores of GPU targets: `plan.tensorize(indices, mma_shape=..., ...)` (Accera's API) as the
m16n8k16 fragments of accpy/targets/gpu/mma.py, run by the 32 lanes of a warp (NVIDIA), or as the
MFMA fragments of accpy/targets/gpu/mfma.py, run by the 64 lanes of a wavefront (AMD: targets whose
warp_size is 64).

* The request (`tensor_intrinsic`): Accera's options (mma_shape, num_total_passes,
  num_fused_passes, scheduling_policy, prologue_op / epilogue_op with their scalars,
  use_static_offsets) checked against the target's tensor-core table and against what accpy emits
  (32-lane warps: shapes composed of m16n8k16 steps; 64-lane wavefronts: Accera's AMD shapes, one
  MFMA instruction per block); an `MmaIntrinsic` whose `shape` is the extents (m, n, k * passes)
  the tensorized loops must have exactly.
* The statement (`check_tensorize`, `matmul_operands`): `C[i, j] += cast(A[i, k]) * cast(B[k, j])`
  with the products exact in C's type (float16 / bfloat16 -> float32, int8 / uint8 -> int32), or
  `C[i, j] += A[i, k] * B[k, j]` all float32 (AMD's f32 instructions), as the table has it.
* The lowering pass (`tensor_cores`, run for every GPU function right after the caches are
  placed): each tensorized sub-nest becomes one warp's fragment calls: load C (or SET it), the
  prologue op, per pass the A and B fragments and an mma step per 16x8 tile of C, the epilogue
  op, store C. Each lane touches only the elements it owns (native/gpu/accpy_mma.cl.h emulates
  the warp on OpenCL with barriers; native/gpu/accpy_mma.cuh issues mma.sync). Operands are read
  where the sub-nest reads them: arrays in global memory or SHARED caches, any strides.
* MMA_FRAGMENT caches (`plan.cache(X, index=x, location=MemorySpace.MMA_FRAGMENT)`; the generic
  cache pass leaves them to this pass, since the tensor unit lists the space among its
  `memories`): the fragments of X's operand block of each warp are loaded once before the loop of
  x (C: with the prologue op), the tiles inside use them, C's are stored once after it (with the
  epilogue op). The warp-bound loops inside x move above it (a warp's index is fixed for the
  whole kernel), so the cache is per warp: each warp's block with its warp indices fixed. The
  block must not move with x or a serial loop between x and the tiles.
* 64-lane wavefronts: the GPU grid counts WARP_X in units of 32 threads, so each wavefront takes
  two of them (the warp-bound loops' `units` and `stride` doubled), and a block's threads are
  checked against the target's limit here.

Guarantees: the tiles sit inside every warp-bound loop (one tile per warp); a warp-bound loop has
no tail (each of its units runs, so every lane of a block reaches the emulation's barriers); no
other reduction runs inside a warp-bound loop (the 32 lanes would each apply it); the per-warp
scratch of the emulation is a SHARED array counted against the block's shared memory. Refused with
a ValueError naming the loop, statement or option: anything else, an MMA_FRAGMENT cache without
a tensorized sub-nest using it, or with double_buffer=True (as Accera).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...ir.affine import to_affine
from ...ir.expr import BinOp, Buffer, Call, Cast, Const, Load, Var, as_int, idx_op
from ...ir.kinds import BufferRole, HostMemory, LoopKind
from ...ir.stmt import Alloc, Evaluate, For, Store, block
from ...ir.types import ScalarType
from ...ir.visitor import Mutator, nodes_of, substitute
from ..grid import check_limit
from ..library import Intrinsic, Memory
from ..tensor_unit import TensorUnit
from . import mfma, mma
from .enums import MMAFragmentOp, MMASchedulingPolicy, MMAShape

HEADER = '#include "gpu/accpy_mma.h"'  # each dialect names its file (accpy_mma.cl.h, accpy_mma.cuh)
WARP_UNITS = ("WARP_X", "WARP_Y")
LANES = mma.WARP_SIZE
WAVE = mfma.WAVE  # lanes of an AMD wavefront
GRID_WARP = 32  # threads of one WARP_X unit of the GPU grid (accpy/targets/gpu/grid.py)
WORDS = {"a": 8, "b": 4, "c": 4}  # ACCPY_MMA_WORDS_A/B/C: 32-bit words of a fragment
SCRATCH_BYTES = {"f16": 1536, "bf16": 1536, "s8": 384, "u8": 384}  # ACCPY_MMA_SCRATCH_BYTES_<T>
_TAGS = {ScalarType.float16: "f16", ScalarType.bfloat16: "bf16", ScalarType.int8: "s8", ScalarType.uint8: "u8",
         ScalarType.float32: "f32"}
_ACC = {"f16": ScalarType.float32, "bf16": ScalarType.float32, "s8": ScalarType.int32, "u8": ScalarType.int32,
        "f32": ScalarType.float32}
# the registers of a warp's fragments (MemorySpace.MMA_FRAGMENT): caches there are placed by this
# module's pass, not by the generic cache pass (its sizes are the largest fragment's words)
FRAGMENT_MEMORY = Memory("mma_fragment", rows=1, row_elems=mfma.WORDS["c"], dtype=ScalarType.uint32,
                         description="the registers holding a warp's tensor-core fragments",
                         owner="GPU tensor cores")
_OPTIONS = ("intrinsic", "mma_shape", "num_total_passes", "use_static_offsets", "num_fused_passes",
            "scheduling_policy", "prologue_op", "epilogue_op", "prologue_arg", "epilogue_arg")
_OP_CALL = {MMAFragmentOp.SET: "set", MMAFragmentOp.SCALE: "scale", MMAFragmentOp.ReLU: "relu",
            MMAFragmentOp.ReLU_NoConditional: "relu_nc"}


# -- the intrinsics the tiles call (both dialects: the same names in accpy_mma.cl.h / .cuh) --------
def _intrinsics() -> tuple:
    out = [Intrinsic("gpu.mma.lane", (), "accpy_mma_lane()", header=HEADER, doc="this lane of the warp"),
           Intrinsic("gpu.mma.warp", (), "accpy_mma_warp()", header=HEADER, doc="this warp of the block")]
    for t in _TAGS.values():
        for space in ("global", "local"):
            for role in "abc":
                out.append(Intrinsic(f"gpu.mma.load_{role}_{t}_{space}", ("frag", "base", "rs", "cs", "lane"),
                                     f"accpy_mma_tile_load_{role}_{t}_{space}({{frag}}, {{base}}, {{rs}}, {{cs}}, "
                                     f"{{lane}})", pointer_params=("frag", "base"), read_only=("base",),
                                     header=HEADER, doc=f"the {role.upper()} fragment of a tile"))
            out.append(Intrinsic(f"gpu.mma.store_c_{t}_{space}", ("frag", "base", "rs", "cs", "lane"),
                                 f"accpy_mma_tile_store_c_{t}_{space}({{frag}}, {{base}}, {{rs}}, {{cs}}, {{lane}})",
                                 pointer_params=("frag", "base"), read_only=("frag",), header=HEADER,
                                 doc="the C fragment stored to its tile"))
        out.append(Intrinsic(f"gpu.mma.sync_{t}", ("d", "a", "b", "scratch", "warp", "lane"),
                             f"accpy_mma_tile_sync_{t}({{d}}, {{a}}, {{b}}, {{scratch}}, {{warp}}, {{lane}})",
                             pointer_params=("d", "a", "b", "scratch"), read_only=("a", "b"), header=HEADER,
                             doc="D = A @ B + D, one m16n8k16 step of the warp"))
        for op in ("set", "scale"):
            out.append(Intrinsic(f"gpu.mma.{op}_c_{t}", ("frag", "value"), f"accpy_mma_tile_{op}_c_{t}({{frag}}, "
                                 f"{{value}})", pointer_params=("frag",), header=HEADER))
        for op in ("relu", "relu_nc"):
            out.append(Intrinsic(f"gpu.mma.{op}_c_{t}", ("frag",), f"accpy_mma_tile_{op}_c_{t}({{frag}})",
                                 pointer_params=("frag",), header=HEADER))
    return tuple(out)


def _mfma_intrinsics() -> tuple:
    """The AMD wavefront's calls (accpy_mma.cl.h's MFMA section): geometry as int arguments R
    (instruction rows), B (blocks), K."""
    out = [Intrinsic("gpu.mfma.lane", (), "accpy_mfma_lane()", header=HEADER, doc="this lane of the wavefront"),
           Intrinsic("gpu.mfma.wave", (), "accpy_mfma_wave()", header=HEADER, doc="this wavefront of the block")]
    geo = {"a": ("R", "B", "K"), "b": ("R", "B", "K"), "c": ("R", "B")}
    for t in mfma.TYPES:
        for space in ("global", "local"):
            for role in "abc":
                extra = geo[role]
                out.append(Intrinsic(f"gpu.mfma.load_{role}_{t}_{space}", ("frag", "base", "rs", "cs", "lane") + extra,
                                     f"accpy_mfma_tile_load_{role}_{t}_{space}({{frag}}, {{base}}, {{rs}}, {{cs}}, "
                                     f"{{lane}}, " + ", ".join(f"{{{x}}}" for x in extra) + ")",
                                     pointer_params=("frag", "base"), read_only=("base",), header=HEADER,
                                     doc=f"the {role.upper()} fragment of a wavefront's tile"))
            out.append(Intrinsic(f"gpu.mfma.store_c_{t}_{space}", ("frag", "base", "rs", "cs", "lane", "R", "B"),
                                 f"accpy_mfma_tile_store_c_{t}_{space}({{frag}}, {{base}}, {{rs}}, {{cs}}, {{lane}}, "
                                 f"{{R}}, {{B}})", pointer_params=("frag", "base"), read_only=("frag",),
                                 header=HEADER, doc="one instruction's C fragment stored to its tile"))
        out.append(Intrinsic(f"gpu.mfma.sync_{t}", ("d", "a", "b", "scratch", "wave", "lane", "R", "B", "K", "q"),
                             f"accpy_mfma_tile_sync_{t}({{d}}, {{a}}, {{b}}, {{scratch}}, {{wave}}, {{lane}}, {{R}}, "
                             f"{{B}}, {{K}}, {{q}})", pointer_params=("d", "a", "b", "scratch"), read_only=("a", "b"),
                             header=HEADER, doc="D = A[R*q.., :] @ B + D, one MFMA of the wavefront (abid = q)"))
        for op in ("set", "scale"):
            out.append(Intrinsic(f"gpu.mfma.{op}_c_{t}", ("frag", "value", "n"),
                                 f"accpy_mfma_tile_{op}_c_{t}({{frag}}, {{value}}, {{n}})", pointer_params=("frag",),
                                 header=HEADER))
        for op in ("relu", "relu_nc"):
            out.append(Intrinsic(f"gpu.mfma.{op}_c_{t}", ("frag", "n"), f"accpy_mfma_tile_{op}_c_{t}({{frag}}, {{n}})",
                                 pointer_params=("frag",), header=HEADER))
    return tuple(out)


INTRINSICS = _intrinsics() + _mfma_intrinsics()


# -- the request ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class MmaIntrinsic:
    """One `plan.tensorize` call on a GPU: Accera's options, checked. `shape` is (m, n, k * passes),
    the extents the tensorized loops must have (`exact`)."""

    mma_shape: MMAShape
    passes: int = 1
    fused: Optional[int] = None
    policy: MMASchedulingPolicy = MMASchedulingPolicy.PASS_ORDER
    prologue: MMAFragmentOp = MMAFragmentOp.NONE
    prologue_arg: Optional[float] = None
    epilogue: MMAFragmentOp = MMAFragmentOp.NONE
    epilogue_arg: Optional[float] = None
    static_offsets: bool = False  # Accera's offset maps in constant memory; accpy computes offsets inline
    exact: bool = field(default=True, init=False)

    @property
    def name(self) -> str:
        return f"MMAShape.{self.mma_shape.name} x {self.passes} pass(es)"

    @property
    def shape(self) -> tuple:
        return self.mma_shape.m, self.mma_shape.n, self.mma_shape.k * self.passes

    @property
    def group(self) -> int:
        """Passes whose fragments are loaded together (num_fused_passes; None: all)."""
        return self.fused or self.passes


def _enum(value, enum, what: str):
    if isinstance(value, enum):
        return value
    if isinstance(value, str) and value in enum.__members__:
        return enum[value]
    raise ValueError(f"tensorize: {what}: expected an acc.{enum.__name__} (one of {', '.join(enum.__members__)}), "
                     f"got {value!r}")


def _scalar(op: MMAFragmentOp, arg, what: str):
    if op.needs_scalar:
        if isinstance(arg, bool) or not isinstance(arg, (int, float)):
            raise ValueError(f"tensorize: {what}_op=MMAFragmentOp.{op.name} needs its scalar: {what}_arg=<a number>, "
                             f"got {arg!r}")
        return arg
    if arg is not None:
        raise ValueError(f"tensorize: {what}_arg={arg!r} is given, but {what}_op=MMAFragmentOp.{op.name} takes no "
                         f"scalar (SET and SCALE do)")
    return None


def parse_options(spec) -> MmaIntrinsic:
    """An `MmaIntrinsic` from `plan.tensorize`'s arguments: None (M16xN16xK16_B1), an MMAShape, or a
    dict of Accera's keyword arguments. ValueError naming an unknown or bad option."""
    if isinstance(spec, MmaIntrinsic):
        return spec
    opts = dict(spec) if isinstance(spec, dict) else {"intrinsic": spec}
    unknown = sorted(set(opts) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"tensorize: unknown option(s) {', '.join(unknown)} for GPU tensor cores; expected "
                         f"{', '.join(_OPTIONS[1:])}")
    shape, positional = opts.get("mma_shape"), opts.get("intrinsic")
    if shape is not None and positional is not None:
        raise ValueError(f"tensorize: the MMA shape is given twice ({positional!r} and mma_shape={shape!r})")
    shape = _enum(shape if shape is not None else positional if positional is not None else
                  MMAShape.M16xN16xK16_B1, MMAShape, "mma_shape")
    passes = opts.get("num_total_passes", 1)
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
        raise ValueError(f"tensorize: num_total_passes: expected an int >= 1, got {passes!r}")
    fused = opts.get("num_fused_passes")
    if fused == -1:
        fused = None
    if fused is not None and (isinstance(fused, bool) or not isinstance(fused, int) or fused < 1 or passes % fused):
        raise ValueError(f"tensorize: num_fused_passes: expected None or an int >= 1 dividing num_total_passes "
                         f"({passes}), got {fused!r}")
    pro = _enum(opts.get("prologue_op") or MMAFragmentOp.NONE, MMAFragmentOp, "prologue_op")
    epi = _enum(opts.get("epilogue_op") or MMAFragmentOp.NONE, MMAFragmentOp, "epilogue_op")
    return MmaIntrinsic(shape, passes, fused,
                        _enum(opts.get("scheduling_policy") or MMASchedulingPolicy.PASS_ORDER, MMASchedulingPolicy,
                              "scheduling_policy"),
                        pro, _scalar(pro, opts.get("prologue_arg"), "prologue"),
                        epi, _scalar(epi, opts.get("epilogue_arg"), "epilogue"),
                        bool(opts.get("use_static_offsets", False)))


# -- the statement -------------------------------------------------------------------------------
def _operand(e, acc_t):
    """The Load inside `cast(load, acc_t)`, a float32 Load itself when `acc_t` is float32 (AMD's
    f32 instructions), else None."""
    if isinstance(e, Cast) and e.dtype is acc_t and isinstance(e.value, Load):
        return e.value
    if isinstance(e, Load) and e.buffer.dtype is acc_t is ScalarType.float32:
        return e
    return None


def matmul_operands(store, what: str) -> tuple:
    """(C, A, B loads, input tag "f16" | "bf16" | "s8" | "u8") of `C[..] += cast(A[..]) * cast(B[..])`;
    ValueError saying what does not match."""
    expected = ("C[i, j] += acc.cast(A[i, k], T) * acc.cast(B[k, j], T) with A, B float16 or bfloat16 and C, T "
                "float32, or A, B int8 or uint8 and C, T int32, or C[i, j] += A[i, k] * B[k, j] all float32 (AMD)")
    v = store.value
    if isinstance(v, Cast) and isinstance(v.value, BinOp) and v.value.op == "mul":
        raise ValueError(f"{what}: the product is computed in {v.value.dtype.name} and then converted to "
                         f"{v.dtype.name}; tensor cores multiply exactly in {store.buffer.dtype.name}: write {expected}")
    if store.reduce != "add" or not isinstance(v, BinOp) or v.op != "mul":
        raise ValueError(f"{what}: the statement into {store.buffer.name} is not a sum of products; tensor cores "
                         f"compute {expected}")
    acc_t = store.buffer.dtype
    a, b = _operand(v.a, acc_t), _operand(v.b, acc_t)
    if a is None or b is None:
        raise ValueError(f"{what}: the operands must be array elements converted to {acc_t.name}: {expected}")
    if a.buffer.dtype is not b.buffer.dtype or a.buffer.dtype not in _TAGS:
        raise ValueError(f"{what}: {a.buffer.name} is {a.buffer.dtype.name} and {b.buffer.name} "
                         f"{b.buffer.dtype.name}; tensor cores take two float16, bfloat16, int8, uint8 or float32 "
                         f"operands")
    tag = _TAGS[a.buffer.dtype]
    if acc_t is not _ACC[tag]:
        raise ValueError(f"{what}: {store.buffer.name} is {acc_t.name}; {a.buffer.dtype.name} operands accumulate "
                         f"in {_ACC[tag].name} in accpy's tensor cores")
    return Load(store.buffer, store.indices), a, b, tag



class GpuTensorUnit(TensorUnit):
    """The tensor cores of a GPU target (`target` None: of any GPU), bound to one request's options
    (`intrinsic`) once `for_intrinsic` made it so."""

    name = "GPU tensor cores"
    memories = (FRAGMENT_MEMORY,)  # placed by `tensor_cores`, never by the generic cache pass

    def __init__(self, target=None, intrinsic: Optional[MmaIntrinsic] = None):
        self.target, self.intrinsic = target, intrinsic

    def __eq__(self, other):
        return isinstance(other, GpuTensorUnit) and (self.target, self.intrinsic) == (other.target, other.intrinsic)

    def __hash__(self):
        return hash((GpuTensorUnit, self.intrinsic))

    def _table(self):
        return getattr(self.target, "tensor_core_info", None) if self.target is not None else None

    def tensor_intrinsic(self, spec):
        table = self._table()
        if self.target is not None and not table:
            if spec is None:
                return None
            raise ValueError(f"tensorize: target {self.target.name} has no tensor cores (its tensor_core_info is "
                             f"empty)")
        intr = parse_options(spec)
        warp = lanes_of(self.target)
        if warp == WAVE:
            amd = sorted({name for shapes in mfma.SHAPES.values() for name in shapes})
            if intr.mma_shape.name not in amd:
                raise ValueError(f"tensorize: mma_shape=MMAShape.{intr.mma_shape.name}: AMD matrix cores (64-lane "
                                 f"wavefronts) take {', '.join(amd)}")
        elif warp != LANES:
            raise ValueError(f"tensorize: target {self.target.name} runs warps of {warp} lanes; accpy's tensor tiles "
                             f"are NVIDIA's m16n8k16 fragments of {LANES}-lane warps or AMD's MFMA fragments of "
                             f"{WAVE}-lane wavefronts")
        elif intr.mma_shape.name not in mma.SHAPES or intr.mma_shape is MMAShape.M8xN32xK16_B1:
            raise ValueError(f"tensorize: mma_shape=MMAShape.{intr.mma_shape.name}: accpy emits M16xN16xK16_B1 and "
                             f"M32xN8xK16_B1 (as m16n8k16 steps)")
        if table is not None and intr.mma_shape not in {e.shape for e in table.entries}:
            have = ", ".join(dict.fromkeys(e.shape.name for e in table.entries))
            raise ValueError(f"tensorize: target {self.target.name} has no tensor-core shape "
                             f"{intr.mma_shape.name}; it has {have}")
        return intr

    def for_intrinsic(self, intrinsic):
        return GpuTensorUnit(self.target, intrinsic)

    def check_tensorize(self, store, what: str) -> None:
        _, a, _, tag = matmul_operands(store, what)
        table, intr = self._table(), self.intrinsic
        if table is None or intr is None:
            return
        in_t, out_t = a.buffer.dtype, store.buffer.dtype
        if not table.supports(in_t, out_t, intr.mma_shape, intr.passes, intr.fused):
            have = ", ".join(f"{i.name}->{o.name}" for i, o in table.types(intr.mma_shape))
            raise ValueError(f"{what}: target {self.target.name}'s tensor cores have no {in_t.name} -> "
                             f"{out_t.name} in MMAShape.{intr.mma_shape.name}; they take {have}")
        if lanes_of(self.target) == WAVE and tag == "u8":
            raise ValueError(f"{what}: AMD matrix cores multiply int8, not uint8, operands")


def lanes_of(target) -> int:
    """The lanes of `target`'s warps (32 when it does not say)."""
    return (getattr(target, "warp_size", None) or LANES) if target is not None else LANES


def is_bound_unit(unit) -> bool:
    """Whether `unit` (a tensorize request's) is a GPU tensor-core unit bound to its options."""
    return isinstance(unit, GpuTensorUnit) and unit.intrinsic is not None


# -- lowering: sub-nests -> fragment calls ---------------------------------------------------------
def _evaluate(fn: str, *args):
    return Evaluate(Call(fn, tuple(args), ScalarType.int32))


def _ptr(buf) -> Load:
    return Load(buf, tuple(Const(0) for _ in buf.shape))


def _stride(load: Load, var) -> object:
    """The element distance of one step of `var` in `load` (an index expression), None if it is not
    affine in `var`."""
    total = Const(0)
    for ix, st in zip(load.indices, load.buffer.strides):
        a = to_affine(ix)
        if a is None:
            return None
        c = a.coef(var)
        if c:
            total = idx_op("add", total, idx_op("mul", Const(c), st))
    return total


@dataclass
class _Context:
    """What building a function's tiles shares: the scratch (per input type; one for MFMA), fragment
    numbering, and the MMA_FRAGMENT caches open around the tiles being built (innermost last)."""

    warps: int
    lanes: int = LANES
    scratch: dict = field(default_factory=dict)
    count: int = 0
    open_caches: list = field(default_factory=list)

    @staticmethod
    def scratch_bytes(key: str) -> int:
        """Bytes of one warp's scratch `key` (an input tag, or "mfma")."""
        return mfma.SCRATCH_WORDS * 4 if key == "mfma" else SCRATCH_BYTES[key]

    def scratch_of(self, tag: str) -> Buffer:
        key = "mfma" if self.lanes == WAVE else tag
        if key not in self.scratch:
            words = self.warps * self.scratch_bytes(key) // 4
            name = "mfma_scratch" if key == "mfma" else f"mma_scratch_{tag}"
            self.scratch[key] = Buffer(name, ScalarType.uint32, (Const(words),), (Const(1),),
                                       role=BufferRole.CACHE, memory=HostMemory.SHARED)
        return self.scratch[key]

    def fragment(self, role: str, words: Optional[int] = None) -> Buffer:
        self.count += 1
        return Buffer(f"frag_{role}{self.count}", ScalarType.uint32, (Const(words or WORDS[role]),), (Const(1),),
                      role=BufferRole.CACHE, memory=HostMemory.LOCAL)


@dataclass
class _FragmentCache:
    """An MMA_FRAGMENT cache being placed: its request, the depth of its index's loop among the loops
    around the tiles, and, once the first tile inside that reads it made them, the operand `role`,
    its `base` (the operand at the tile's origin), the fragments by key and their fill and flush."""

    request: object
    depth: int
    role: Optional[str] = None
    base: object = None
    frags: dict = field(default_factory=dict)
    fill: list = field(default_factory=list)
    flush: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.request.array_name


class _Tile:
    """One tensorized sub-nest as a warp's calls."""

    def __init__(self, loops, store, roles, unit, ctx: _Context, what: str):
        self.intr, self.ctx, self.what, self.roles = unit.intrinsic, ctx, what, roles
        self._check_loops(loops)
        unit.check_tensorize(store, what)
        self.c, self.a, self.b, self.tag = matmul_operands(store, what)
        i, j, k = roles
        self.layout = {"a": self._layout(self.a, i, k, j), "b": self._layout(self.b, k, j, i),
                       "c": self._layout(self.c, i, j, k)}
        self.lane = Call("gpu.mma.lane", (), ScalarType.uint32)
        self.warp = Call("gpu.mma.warp", (), ScalarType.uint32)
        self.frags: list = []

    def attach_caches(self, stack: list, warp_vars) -> None:
        """Take the fragments of the open MMA_FRAGMENT caches of this tile's operands (making them,
        with their fill and flush, for the first tile inside a cache's index). `stack`: the vars of
        the loops around the tile, outermost first. ValueError when an operand's block moves inside
        the cache's index, or differs from the block of the cache's first tile."""
        self.cached = {}
        for cache in self.ctx.open_caches:
            role = next((r for r in "cab" if getattr(self, r).buffer is cache.request.source), None)
            if role is None:
                continue
            base = self._base(getattr(self, role))
            inner = {v for v in stack[cache.depth:] if v not in warp_vars}
            moving = sorted(v.name for v in nodes_of(base, Var) if v in inner)
            if moving:
                raise ValueError(f"cache of {cache.name} in MMA_FRAGMENT at index {stack[cache.depth].name}: the "
                                 f"{role.upper()} block of {self.what} moves with the loop(s) {', '.join(moving)} "
                                 f"inside that index; a fragment cache holds one block per warp (cache it at an "
                                 f"index those loops are outside of)")
            if cache.role is None:
                cache.role, cache.base = role, base
                cache.frags, cache.fill, cache.flush = self.cache_fragments(role)
            elif (cache.role, cache.base) != (role, base):
                raise ValueError(f"cache of {cache.name} in MMA_FRAGMENT: {self.what} reads another block of "
                                 f"{cache.name} than the tiles before it inside the cache's index")
            self.cached[role] = cache.frags

    def _cached(self, role: str):
        return getattr(self, "cached", {}).get(role)

    def _passes(self):
        """(tiles of C as (m0, n0), rows m0, columns n0, k per pass) of the shape."""
        tiles = list(dict.fromkeys((s.m0, s.n0) for s in mma.steps(self.intr.mma_shape, self.intr.passes)))
        return tiles, sorted({m for m, _ in tiles}), sorted({n for _, n in tiles}), self.intr.mma_shape.k

    def cache_fragments(self, role: str) -> tuple:
        """({key: fragment}, fill, flush) of operand `role` held across a cache's index: C by its
        16x8 tiles (loaded with the prologue, stored with the epilogue), A and B by (k0, m0) and
        (k0, n0) of every pass."""
        tiles, rows, cols, kstep = self._passes()
        ks = [p * kstep for p in range(self.intr.passes)]
        if role == "c":
            frags = {t: self.ctx.fragment("c") for t in tiles}
            return frags, [self._c_in(f, *t) for t, f in frags.items()], [self._c_out(f, *t) for t, f in frags.items()]
        lines = rows if role == "a" else cols
        frags = {(k0, x): self.ctx.fragment(role) for k0 in ks for x in lines}
        at = (lambda k0, x: {"i": x, "k": k0}) if role == "a" else (lambda k0, x: {"k": k0, "j": x})  # noqa: E731
        return frags, [self._load(role, f, getattr(self, role), **at(*key)) for key, f in frags.items()], []

    def _check_loops(self, loops) -> None:
        got = {f.var for f in loops}
        # (a loop of one iteration, e.g. k of M64xN64xK1 in one pass, was replaced by its value)
        absent = [v for v, size in zip(self.roles, self.intr.shape) if v not in got and size != 1]
        if absent or not got <= set(self.roles):
            missing = ", ".join(v.name for v in absent)
            raise ValueError(f"{self.what}: the loops of {missing} are not around the statement; the tensorized "
                             f"loops must be the innermost three, around one statement")
        for f in loops:
            size = self.intr.shape[self.roles.index(f.var)]
            lo, hi = as_int(f.lo), as_int(f.hi)
            if lo != 0 or hi != size:
                shown = f"[{lo}, {hi})" if lo is not None and hi is not None else "a range known at run time"
                raise ValueError(f"{self.what}: the loop of {f.var.name} runs {shown}; {self.intr.name} needs "
                                 f"exactly [0, {size}) in every tile (choose splits that divide the sizes)")

    def _layout(self, load: Load, row, col, other) -> tuple:
        """(row stride, column stride) of an operand in the tile; ValueError if it moves with `other`."""
        name = load.buffer.name
        if load.buffer.group > 1 or load.buffer.panel > 1:
            raise ValueError(f"{self.what}: {name} is kept in a grouped or panel layout; tensor tiles read "
                             f"plain strided arrays")
        rs, cs, bad = _stride(load, row), _stride(load, col), _stride(load, other)
        if rs is None or cs is None or bad is None or as_int(bad) != 0:
            raise ValueError(f"{self.what}: {name}[{', '.join(map(str, load.indices))}] is not an operand of "
                             f"C[i, j] += A[i, k] * B[k, j] over ({', '.join(v.name for v in self.roles)})")
        return rs, cs

    def _base(self, load: Load, **at) -> Load:
        i, j, k = self.roles
        return substitute(load, {i: Const(at.get("i", 0)), j: Const(at.get("j", 0)), k: Const(at.get("k", 0))})

    def _new(self, role: str) -> Buffer:
        buf = self.ctx.fragment(role)
        self.frags.append(buf)
        return buf

    def _space(self, load: Load) -> str:
        return "local" if load.buffer.memory == HostMemory.SHARED else "global"

    def _load(self, role: str, frag, load: Load, **at):
        rs, cs = self.layout[role]
        return _evaluate(f"gpu.mma.load_{role}_{self.tag}_{self._space(load)}", _ptr(frag), self._base(load, **at),
                         rs, cs, self.lane)

    def _op(self, op: MMAFragmentOp, arg, frag):
        if op is MMAFragmentOp.NONE:
            return None
        name = f"gpu.mma.{_OP_CALL[op]}_c_{self.tag}"
        if op.needs_scalar:
            return _evaluate(name, _ptr(frag), Const(arg, _ACC[self.tag]))
        return _evaluate(name, _ptr(frag))

    def _c_in(self, frag, m0, n0):
        intr = self.intr
        first = (self._op(intr.prologue, intr.prologue_arg, frag) if intr.prologue is MMAFragmentOp.SET else
                 block(self._load("c", frag, self.c, i=m0, j=n0), self._op(intr.prologue, intr.prologue_arg, frag)))
        return first

    def _c_out(self, frag, m0, n0):
        rs, cs = self.layout["c"]
        store = _evaluate(f"gpu.mma.store_c_{self.tag}_{self._space(self.c)}", _ptr(frag),
                          self._base(self.c, i=m0, j=n0), rs, cs, self.lane)
        return block(self._op(self.intr.epilogue, self.intr.epilogue_arg, frag), store)

    def _sync(self, d, a, b):
        return _evaluate(f"gpu.mma.sync_{self.tag}", _ptr(d), _ptr(a), _ptr(b), _ptr(self.ctx.scratch_of(self.tag)),
                         self.warp, self.lane)

    def stmt(self):
        """The tile's statements, its fragments allocated around them."""
        tiles, _, _, kstep = self._passes()
        body = (self._block_order(tiles, kstep) if self.intr.policy is MMASchedulingPolicy.BLOCK_ORDER
                else self._pass_order(tiles, kstep))
        for frag in reversed(self.frags):
            body = Alloc(frag, body, zero=False)
        return body

    def _pass_order(self, tiles, kstep):
        intr = self.intr
        cc, ca, cb = self._cached("c"), self._cached("a"), self._cached("b")
        c = cc if cc is not None else {t: self._new("c") for t in tiles}
        out = [] if cc is not None else [self._c_in(c[t], *t) for t in tiles]
        rows, cols = sorted({m for m, _ in tiles}), sorted({n for _, n in tiles})
        a = {(q, m): self._new("a") for q in range(intr.group) for m in rows} if ca is None else {}
        b = {(q, n): self._new("b") for q in range(intr.group) for n in cols} if cb is None else {}
        for g in range(0, intr.passes, intr.group):
            for q in range(intr.group):
                k0 = (g + q) * kstep
                out += [self._load("a", a[q, m], self.a, i=m, k=k0) for m in rows] if ca is None else []
                out += [self._load("b", b[q, n], self.b, k=k0, j=n) for n in cols] if cb is None else []
            for q in range(intr.group):
                k0 = (g + q) * kstep
                out += [self._sync(c[m, n], a[q, m] if ca is None else ca[k0, m], b[q, n] if cb is None else cb[k0, n])
                        for m, n in tiles]
        out += [self._c_out(c[t], *t) for t in tiles] if cc is None else []
        return block(*out)

    def _block_order(self, tiles, kstep):
        cc, ca, cb = self._cached("c"), self._cached("a"), self._cached("b")
        c = self._new("c") if cc is None else None
        a = self._new("a") if ca is None else None
        b = self._new("b") if cb is None else None
        out = []
        for m, n in tiles:
            out.append(self._c_in(c, m, n) if cc is None else None)
            for p in range(self.intr.passes):
                k0 = p * kstep
                out += [self._load("a", a, self.a, i=m, k=k0) if ca is None else None,
                        self._load("b", b, self.b, k=k0, j=n) if cb is None else None,
                        self._sync(c if cc is None else cc[m, n], a if ca is None else ca[k0, m],
                                   b if cb is None else cb[k0, n])]
            out.append(self._c_out(c, m, n) if cc is None else None)
        return block(*out)


class _MfmaTile(_Tile):
    """One tensorized sub-nest as an AMD wavefront's calls: per pass the A (M x K) and B (K x N)
    fragments, and per output block q (rows R*q.. of C, all columns) one MFMA with the A broadcast
    (abid = q). PASS_ORDER keeps the B blocks' accumulators live across a pass group; BLOCK_ORDER
    computes the blocks one after another with one accumulator (the results are the same)."""

    def __init__(self, loops, store, roles, unit, ctx: _Context, what: str):
        super().__init__(loops, store, roles, unit, ctx, what)
        self.ins = mfma.instruction(self.intr.mma_shape, self.tag)
        self.lane = Call("gpu.mfma.lane", (), ScalarType.uint32)
        self.warp = Call("gpu.mfma.wave", (), ScalarType.uint32)
        self.geo = (Const(self.ins.rows), Const(self.ins.blocks), Const(self.ins.k))

    def _new(self, role: str) -> Buffer:
        buf = self.ctx.fragment(role, self.ins.slots(role.upper()))
        self.frags.append(buf)
        return buf

    def _load(self, role: str, frag, load: Load, **at):
        rs, cs = self.layout[role]
        geo = self.geo[:2] if role == "c" else self.geo
        return _evaluate(f"gpu.mfma.load_{role}_{self.tag}_{self._space(load)}", _ptr(frag), self._base(load, **at),
                         rs, cs, self.lane, *geo)

    def _op(self, op: MMAFragmentOp, arg, frag):
        if op is MMAFragmentOp.NONE:
            return None
        name, n = f"gpu.mfma.{_OP_CALL[op]}_c_{self.tag}", Const(self.ins.slots("C"))
        if op.needs_scalar:
            return _evaluate(name, _ptr(frag), Const(arg, _ACC[self.tag]), n)
        return _evaluate(name, _ptr(frag), n)

    def _c_in(self, frag, q):
        intr = self.intr
        if intr.prologue is MMAFragmentOp.SET:
            return self._op(intr.prologue, intr.prologue_arg, frag)
        return block(self._load("c", frag, self.c, i=self.ins.rows * q, j=0),
                     self._op(intr.prologue, intr.prologue_arg, frag))

    def _c_out(self, frag, q):
        rs, cs = self.layout["c"]
        store = _evaluate(f"gpu.mfma.store_c_{self.tag}_{self._space(self.c)}", _ptr(frag),
                          self._base(self.c, i=self.ins.rows * q, j=0), rs, cs, self.lane, *self.geo[:2])
        return block(self._op(self.intr.epilogue, self.intr.epilogue_arg, frag), store)

    def _mfma(self, d, a, b, q):
        return _evaluate(f"gpu.mfma.sync_{self.tag}", _ptr(d), _ptr(a), _ptr(b), _ptr(self.ctx.scratch_of(self.tag)),
                         self.warp, self.lane, *self.geo, Const(q))

    def cache_fragments(self, role: str) -> tuple:
        """({key: fragment}, fill, flush) of operand `role` held across a cache's index: C by output
        block q (with the prologue / epilogue), A and B by pass."""
        if role == "c":
            frags = {q: self.ctx.fragment("c", self.ins.slots("C")) for q in range(self.ins.blocks)}
            return frags, [self._c_in(f, q) for q, f in frags.items()], [self._c_out(f, q) for q, f in frags.items()]
        frags = {p: self.ctx.fragment(role, self.ins.slots(role.upper())) for p in range(self.intr.passes)}
        at = (lambda p: {"k": p * self.ins.k})  # noqa: E731
        return frags, [self._load(role, f, getattr(self, role), **at(p)) for p, f in frags.items()], []

    def _inputs(self, passes, a, b) -> list:
        """Loads of the A and B fragments of `passes` (into a[p], b[p]) not held by a cache."""
        out = []
        for p in passes:
            out.append(self._load("a", a[p], self.a, k=p * self.ins.k) if self._cached("a") is None else None)
            out.append(self._load("b", b[p], self.b, k=p * self.ins.k) if self._cached("b") is None else None)
        return out

    def stmt(self):
        intr, blocks = self.intr, range(self.ins.blocks)
        cc, ca, cb = self._cached("c"), self._cached("a"), self._cached("b")
        groups = [range(g, g + intr.group) for g in range(0, intr.passes, intr.group)]
        a = ca if ca is not None else {p: self._new("a") for p in range(intr.group)}
        b = cb if cb is not None else {p: self._new("b") for p in range(intr.group)}

        def slot(frags, cached, p):  # (uncached fragments are reused by each pass group)
            return frags[p] if cached is not None else frags[p % intr.group]

        def fetch(group):
            return self._inputs(group, {p: slot(a, ca, p) for p in group}, {p: slot(b, cb, p) for p in group})

        out = []
        if intr.policy is MMASchedulingPolicy.BLOCK_ORDER:
            c = None if cc is not None else self._new("c")
            once = len(groups) == 1  # every pass's inputs loaded once, for all blocks
            out += fetch(groups[0]) if once else []
            for q in blocks:
                d = cc[q] if cc is not None else c
                out.append(self._c_in(d, q) if cc is None else None)
                for g in groups:
                    out += [] if once else fetch(g)
                    out += [self._mfma(d, slot(a, ca, p), slot(b, cb, p), q) for p in g]
                out.append(self._c_out(d, q) if cc is None else None)
        else:
            c = cc if cc is not None else {q: self._new("c") for q in blocks}
            out += [self._c_in(c[q], q) for q in blocks] if cc is None else []
            for g in groups:
                out += fetch(g)
                out += [self._mfma(c[q], slot(a, ca, p), slot(b, cb, p), q) for p in g for q in blocks]
            out += [self._c_out(c[q], q) for q in blocks] if cc is None else []
        body = block(*out)
        for frag in reversed(self.frags):
            body = Alloc(frag, body, zero=False)
        return body


class _Tensorize(Mutator):
    """Tensorized sub-nests -> tiles; checks where they and other reductions sit among warp loops;
    places the MMA_FRAGMENT caches (`sites`: loop var -> the cache requests at its index)."""

    def __init__(self, requests, ctx: _Context, warp_vars: frozenset, sites: dict):
        self.requests, self.ctx, self.warp_vars, self.sites = requests, ctx, warp_vars, sites
        self.inside: list = []  # warp-bound loop vars around the current statement
        self.stack: list = []  # the vars of every loop around it
        self.placed: set = set()  # keys of the caches placed

    def visit_For(self, f: For):
        for roles, what, unit in self.requests:
            if f.var in roles:
                return self._tile(f, roles, what, unit)
        if f.var in self.sites:
            return self._site(f, self.sites[f.var])
        return self._enter(f)

    def _enter(self, f: For):
        is_warp = f.kind == LoopKind.BOUND and f.var in self.warp_vars
        self.inside.append(f.var) if is_warp else None
        self.stack.append(f.var)
        try:
            return self.generic_visit(f)
        finally:
            self.stack.pop()
            self.inside.pop() if is_warp else None

    def _site(self, f: For, requests):
        """The loop of MMA_FRAGMENT caches' index: its tiles use the caches' fragments, filled before
        and flushed after it, inside the warp-bound loops moved above it."""
        opened = [_FragmentCache(r, len(self.stack)) for r in requests]
        self.ctx.open_caches.extend(opened)
        try:
            body = self._enter(f)
        finally:
            del self.ctx.open_caches[-len(opened):]
        for c in opened:
            if c.role is None:
                raise ValueError(f"cache of {c.name} in MMA_FRAGMENT at index {f.var.name}: no tensorized tile "
                                 f"inside reads {c.name} as an operand; fragment caches hold the operands of "
                                 f"plan.tensorize's tiles")
            self.placed.add(c.request.key)
        warps = list({g.var: g for g in nodes_of(body, For)
                      if g.kind == LoopKind.BOUND and g.var in self.warp_vars}.values())
        out = block(*[s for c in opened for s in c.fill], _Unwrap({g.var for g in warps}).visit(body),
                    *[s for c in reversed(opened) for s in c.flush])
        for c in opened:
            for frag in c.frags.values():
                out = Alloc(frag, out, zero=False)
        for g in reversed(warps):
            out = For(g.var, g.lo, g.hi, out, g.kind, g.attrs)
        return out

    def _tile(self, f: For, roles, what, unit):
        loops, s = [], f
        while isinstance(s, For) and s.var in roles:
            loops.append(s)
            s = s.body
        if not isinstance(s, Store):
            raise ValueError(f"{what}: the tensorized loops must be the innermost three, around one statement; "
                             f"found {type(s).__name__} inside the loop of {loops[-1].var.name}")
        missing = self.warp_vars - set(self.inside)
        if missing:
            raise ValueError(f"{what}: the tile is not inside the warp-bound loop(s) "
                             f"{', '.join(sorted(v.name for v in missing))}: every warp would compute it; "
                             f"order the warp loops above the tensorized ones")
        tile = (_MfmaTile if self.ctx.lanes == WAVE else _Tile)(loops, s, roles, unit, self.ctx, what)
        tile.attach_caches(self.stack, self.warp_vars)
        return tile.stmt()

    def visit_Store(self, s: Store):
        if self.inside and s.reduce is not None:
            raise ValueError(f"the update of {s.buffer.name} inside the warp-bound loop {self.inside[-1].name} is "
                             f"not tensorized: the {self.ctx.lanes} lanes of the warp would each apply it; "
                             f"tensorize it or move it out of the warp loops")
        return s


class _Unwrap(Mutator):
    """The loops over `names` (warp-bound, whole: moved elsewhere) replaced by their bodies."""

    def __init__(self, names):
        self.names = names

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        return f.body if f.var in self.names else f


class _WholeWarps(Mutator):
    """Warp-bound loops without their guard (`v < hi` holds for every warp); ValueError for one with a
    tail (some warps of a block would skip the tiles, whose lanes meet at barriers). A warp of
    `per_unit` grid units (64-lane wavefronts: 2 of the grid's 32-thread WARP_X units) takes that
    many along x: its loop's `units` and `stride` scaled."""

    def __init__(self, warp_vars, per_unit: int = 1):
        self.warp_vars, self.per_unit = warp_vars, per_unit

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        if f.kind != LoopKind.BOUND or f.var not in self.warp_vars:
            return f
        n, count = as_int(idx_op("sub", f.hi, f.lo)), as_int(f.attr("count"))
        if n is None or count is None or n != count:
            raise ValueError(f"the warp-bound loop {f.var.name} runs {n if n is not None else 'a runtime number of'}"
                             f" iterations where its warps number {count}: every warp of a block must run "
                             f"(the lanes meet at barriers); choose splits that divide the sizes")
        attrs = (("guard", False),)
        if self.per_unit > 1 and f.attr("unit") == "WARP_X":
            k = Const(self.per_unit)
            attrs += (("units", idx_op("mul", f.attr("units"), k)), ("stride", idx_op("mul", f.attr("stride"), k)))
        return For(f.var, f.lo, f.hi, f.body, f.kind, attrs + f.attrs)


def fragment_sites(request) -> dict:
    """Loop var -> the MMA_FRAGMENT cache requests at its index; ValueError for one double-buffered
    (Accera refuses it) or placed by an element budget."""
    n, out = len(request.space.dims), {}
    for c in request.caches:
        if c.memory != FRAGMENT_MEMORY.name:
            continue
        if c.double_buffer:
            raise ValueError(f"cache of {c.array_name}: double_buffer=True on an MMA_FRAGMENT cache; fragments are "
                             f"a warp's registers, loaded at the cache's index (Accera refuses it too)")
        level = c.placed_level
        if level is None or not 0 < level <= n:
            raise ValueError(f"cache of {c.array_name} in MMA_FRAGMENT: give its index (or level); fragment "
                             f"caches are not placed by an element budget")
        out.setdefault(request.space.dims[n - level].var, []).append(c)
    return out


def _check_sites(sites: dict, requests) -> None:
    roles = {v for r in requests for v in r[0]}
    for var, caches in sites.items():
        if var in roles:
            raise ValueError(f"cache of {caches[0].array_name} in MMA_FRAGMENT at index {var.name}: that is a "
                             f"tensorized loop; cache at an index outside the tensorized ones")


def tensor_cores(stmt, request, grid):
    """The GPU library's pass: `stmt` with its tensorized sub-nests as warps' fragment calls (see the
    module docstring); unchanged for a function without GPU tensorize requests, warp bindings and
    MMA_FRAGMENT caches."""
    requests = [r for r in request.tensorize if is_bound_unit(r[2])]
    warp_binds = [b for b in request.bindings if b.unit in WARP_UNITS]
    sites = fragment_sites(request)
    if not requests:
        if sites:
            name = next(iter(sites.values()))[0].array_name
            raise ValueError(f"cache of {name} in MMA_FRAGMENT: this function tensorizes nothing; fragment caches "
                             f"hold the operands of plan.tensorize(indices, mma_shape=...)'s tiles")
        if warp_binds:
            raise ValueError(f"bind: {', '.join(b.unit for b in warp_binds)}: warps run tensor-core tiles; this "
                             f"function tensorizes nothing (plan.tensorize(indices, mma_shape=...)), bind threads "
                             f"(THREAD_X, ...) instead")
        return stmt
    lanes = lanes_of(request.target)
    threads = [b.unit for b in request.bindings if b.unit.startswith("THREAD_")]
    if threads or not warp_binds:
        raise ValueError(f"{requests[0][1]}: a tensorized GPU plan binds the loops above the tensorized ones to "
                         f"warps (WARP_X, WARP_Y), whose {lanes} lanes run each tile together"
                         + (f"; it binds {', '.join(threads)}" if threads else "; none is bound"))
    _check_sites(sites, requests)
    warps = 1
    for b in warp_binds:
        n = as_int(b.extent)
        if n is None:
            raise ValueError(f"bind: {b.unit} takes a number of warps known only at run time; tensor tiles need "
                             f"a fixed number of warps per block")
        warps *= n
    if lanes != GRID_WARP:
        check_limit(f"bind: {warps} warps of {lanes} lanes: one block would have threads:", warps * lanes,
                    getattr(request.target, "max_threads_per_block", None), request.target, "max_threads_per_block")
    warp_vars = frozenset(v for b in warp_binds for v in b.vars)
    stmt = _WholeWarps(warp_vars, max(1, lanes // GRID_WARP)).visit(stmt)
    ctx = _Context(warps, lanes)
    tensorize = _Tensorize(requests, ctx, warp_vars, sites)
    stmt = tensorize.visit(stmt)
    for caches in sites.values():
        for c in caches:
            if c.key not in tensorize.placed:
                c.notes.append(f"MMA_FRAGMENT: the loop of its index runs once (removed): each tile loads and "
                               f"stores its own fragments")
    grid.check_shared_memory(request.target, {b.name: warps * ctx.scratch_bytes(t) for t, b in ctx.scratch.items()})
    for buf in ctx.scratch.values():
        stmt = Alloc(buf, stmt, zero=False)
    return stmt
