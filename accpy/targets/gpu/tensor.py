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
* The statement (`check_tensorize`, `matmul_operands` of tiles.py): `C[i, j] += cast(A[i, k]) *
  cast(B[k, j])` with the products exact in C's type (float16 / bfloat16 -> float32, int8 / uint8
  -> int32), or `C[i, j] += A[i, k] * B[k, j]` all float32 (AMD's f32 instructions), as the
  table has it.
* The lowering pass (`tensor_cores`, run for every GPU function right after the caches are
  placed): each tensorized sub-nest becomes one warp's fragment calls (accpy/targets/gpu/tiles.py;
  native/gpu/accpy_mma.cl.h emulates the warp on OpenCL with barriers, native/gpu/accpy_mma.cuh
  issues mma.sync). The prologue and epilogue ops apply to C once per reduction: on the first
  (last) iteration of the serial loops around the tile that move A or B but not C (Accera's code
  applies them at every step of such a loop, which its GEMM table's C = alpha * (A @ B) with SET
  0 / SCALE alpha contradicts; accpy follows the table).
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

from ...ir.expr import BinOp, Const, as_int, idx_op
from ...ir.kinds import LoopKind
from ...ir.stmt import Alloc, For, Store, block
from ...ir.types import ScalarType
from ...ir.visitor import Mutator, nodes_of
from ..grid import check_limit
from ..library import Intrinsic, Memory
from ..tensor_unit import TensorUnit
from . import mfma, mma
from .enums import MMAFragmentOp, MMASchedulingPolicy, MMAShape
from .tiles import LANES, SCRATCH_BYTES, WAVE, FragmentCache, MfmaTile, Tile, TileContext, matmul_operands

HEADER = '#include "gpu/accpy_mma.h"'  # each dialect names its file (accpy_mma.cl.h, accpy_mma.cuh)
WARP_UNITS = ("WARP_X", "WARP_Y")
GRID_WARP = 32  # threads of one WARP_X unit of the GPU grid (accpy/targets/gpu/grid.py)
# the registers of a warp's fragments (MemorySpace.MMA_FRAGMENT): caches there are placed by this
# module's pass, not by the generic cache pass (its sizes are the largest fragment's words)
FRAGMENT_MEMORY = Memory("mma_fragment", rows=1, row_elems=mfma.WORDS["c"], dtype=ScalarType.uint32,
                         description="the registers holding a warp's tensor-core fragments",
                         owner="GPU tensor cores")
_OPTIONS = ("intrinsic", "mma_shape", "num_total_passes", "use_static_offsets", "num_fused_passes",
            "scheduling_policy", "prologue_op", "epilogue_op", "prologue_arg", "epilogue_arg")


# -- the intrinsics the tiles call (both dialects: the same names in accpy_mma.cl.h / .cuh) --------
def _intrinsics() -> tuple:
    out = [Intrinsic("gpu.mma.lane", (), "accpy_mma_lane()", header=HEADER, doc="this lane of the warp"),
           Intrinsic("gpu.mma.warp", (), "accpy_mma_warp()", header=HEADER, doc="this warp of the block")]
    for t in SCRATCH_BYTES:  # (the m16n8k16 input types)
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
    # (0, Accera's default for the scalar, may be spelled out with any op)
    if arg is not None and not (isinstance(arg, (int, float)) and not isinstance(arg, bool) and arg == 0):
        raise ValueError(f"tensorize: {what}_arg={arg!r} is given, but {what}_op=MMAFragmentOp.{op.name} takes no "
                         f"scalar (SET and SCALE do)")
    return None


def _fragment_op(op: MMAFragmentOp, arg, t):
    """`op` (with its scalar `arg`) on an element of type `t`, as a function of the element's IR
    value; None for NONE."""
    if op is MMAFragmentOp.NONE:
        return None
    c = Const(arg if arg is not None else 0, t)
    zero = Const(0, t)
    return {MMAFragmentOp.SET: lambda x: c,
            MMAFragmentOp.SCALE: lambda x: BinOp("mul", x, c, t),
            MMAFragmentOp.ReLU: lambda x: BinOp("max", x, zero, t),
            # x * (x > 0): the same values as max(x, 0) for every finite x
            MMAFragmentOp.ReLU_NoConditional: lambda x: BinOp("max", x, zero, t)}[op]


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

    def fused_ops(self, store) -> tuple:
        # the prologue and epilogue ops, once per reduction (as the tiles apply them)
        intr = self.intrinsic
        if intr is None:
            return None, None
        t = store.buffer.dtype
        return _fragment_op(intr.prologue, intr.prologue_arg, t), _fragment_op(intr.epilogue, intr.epilogue_arg, t)

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


# -- the pass ------------------------------------------------------------------------------------
class _Tensorize(Mutator):
    """Tensorized sub-nests -> tiles; checks where they and other reductions sit among warp loops;
    places the MMA_FRAGMENT caches (`sites`: loop var -> the cache requests at its index)."""

    def __init__(self, requests, ctx: TileContext, warp_vars: frozenset, sites: dict):
        self.requests, self.ctx, self.warp_vars, self.sites = requests, ctx, warp_vars, sites
        self.inside: list = []  # warp-bound loop vars around the current statement
        self.stack: list = []  # the vars of every loop around it
        self.loops: list = []  # and those loops
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
        self.loops.append(f)
        try:
            return self.generic_visit(f)
        finally:
            self.stack.pop()
            self.loops.pop()
            self.inside.pop() if is_warp else None

    def _site(self, f: For, requests):
        """The loop of MMA_FRAGMENT caches' index: its tiles use the caches' fragments, filled before
        and flushed after it, inside the warp-bound loops moved above it."""
        opened = [FragmentCache(r, len(self.stack)) for r in requests]
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
        tile = (MfmaTile if self.ctx.lanes == WAVE else Tile)(loops, s, roles, unit, self.ctx, what)
        tile.first, tile.last = tile.reduction_steps(self.loops)
        tile.attach_caches(self.stack, self.warp_vars, self.loops)
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
    ctx = TileContext(warps, lanes, mfma_words=max(2 * r[2].intrinsic.mma_shape.m * r[2].intrinsic.mma_shape.k
                                                   for r in requests))
    tensorize = _Tensorize(requests, ctx, warp_vars, sites)
    stmt = tensorize.visit(stmt)
    for caches in sites.values():
        for c in caches:
            if c.key not in tensorize.placed:
                c.notes.append("MMA_FRAGMENT: the loop of its index runs once (removed): each tile loads and "
                               "stores its own fragments")
    grid.check_shared_memory(request.target, {b.name: warps * ctx.scratch_bytes(t) for t, b in ctx.scratch.items()})
    for buf in ctx.scratch.values():
        stmt = Alloc(buf, stmt, zero=False)
    return stmt
