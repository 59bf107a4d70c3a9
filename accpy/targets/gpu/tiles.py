"""Tensor tiles as fragment calls: one tensorized sub-nest (`C[i, j] += A[i, k] * B[k, j]` over the
extents of an MMA shape) as the calls of one warp (NVIDIA: m16n8k16 fragments of 32 lanes,
accpy/targets/gpu/mma.py) or one wavefront (AMD: MFMA fragments of 64 lanes, mfma.py), for the
tensor-core pass of accpy/targets/gpu/tensor.py.

* The statement (`matmul_operands`): C, A, B and the input type of a tensorizable update.
* `Tile` (m16n8k16 steps per 16x8 tile of C) and `MfmaTile` (one MFMA per output block q, with
  the A broadcast): load C (or SET it), the prologue op, per pass the A and B fragments and the
  steps, the epilogue op, store C; in PASS_ORDER or BLOCK_ORDER (Accera's MMASchedulingPolicy).
  Operands are read where the sub-nest reads them (global memory or SHARED caches, any strides).
* `FragmentCache`: an MMA_FRAGMENT cache open around tiles: its fragments, made with their fill
  (C: load and prologue; A, B: loads of every pass) and flush (C: epilogue and store) by the first
  tile inside that reads the cache's array, are used by every such tile instead of its own.

Guarantees: each lane touches only the elements its fragments own; a tile whose loops do not
cover the shape exactly, whose operands are not plain strided arrays, or whose cached operand
block moves inside the cache's index is refused with a ValueError naming the loop or array.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...ir.affine import to_affine
from ...ir.expr import BinOp, Buffer, Call, Cast, Const, Load, Var, as_int, idx_op
from ...ir.kinds import BufferRole, HostMemory, LoopKind
from ...ir.stmt import Alloc, Evaluate, If, block
from ...ir.types import ScalarType
from ...ir.visitor import nodes_of, substitute
from . import mfma, mma
from .enums import MMAFragmentOp, MMASchedulingPolicy

LANES = mma.WARP_SIZE
WAVE = mfma.WAVE  # lanes of an AMD wavefront
WORDS = {"a": 8, "b": 4, "c": 4}  # ACCPY_MMA_WORDS_A/B/C: 32-bit words of a fragment
SCRATCH_BYTES = {"f16": 1536, "bf16": 1536, "s8": 384, "u8": 384}  # ACCPY_MMA_SCRATCH_BYTES_<T>
_OP_CALL = {MMAFragmentOp.SET: "set", MMAFragmentOp.SCALE: "scale", MMAFragmentOp.ReLU: "relu",
            MMAFragmentOp.ReLU_NoConditional: "relu_nc"}
TAGS = {ScalarType.float16: "f16", ScalarType.bfloat16: "bf16", ScalarType.int8: "s8", ScalarType.uint8: "u8",
        ScalarType.float32: "f32"}
ACC = {"f16": ScalarType.float32, "bf16": ScalarType.float32, "s8": ScalarType.int32, "u8": ScalarType.int32,
       "f32": ScalarType.float32}


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
    """(C, A, B loads, input tag "f16" | "bf16" | "s8" | "u8" | "f32") of `C[..] += cast(A[..]) * cast(B[..])`;
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
    if a.buffer.dtype is not b.buffer.dtype or a.buffer.dtype not in TAGS:
        raise ValueError(f"{what}: {a.buffer.name} is {a.buffer.dtype.name} and {b.buffer.name} "
                         f"{b.buffer.dtype.name}; tensor cores take two float16, bfloat16, int8, uint8 or float32 "
                         f"operands")
    tag = TAGS[a.buffer.dtype]
    if acc_t is not ACC[tag]:
        raise ValueError(f"{what}: {store.buffer.name} is {acc_t.name}; {a.buffer.dtype.name} operands accumulate "
                         f"in {ACC[tag].name} in accpy's tensor cores")
    return Load(store.buffer, store.indices), a, b, tag



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


SCRATCH_NAMES = ("mfma_scratch", "mma_scratch_")  # the prefixes of TileContext.scratch_of's buffers


def is_emulation_scratch(b: Buffer) -> bool:
    """Whether `b` is the emulation's fragment scratch (no such memory on a device with tensor
    cores: not counted against its shared memory)."""
    return b.role == BufferRole.CACHE and b.name.startswith(SCRATCH_NAMES)


@dataclass
class TileContext:
    """What building a function's tiles shares: the scratch (per input type; one for MFMA), fragment
    numbering, and the MMA_FRAGMENT caches open around the tiles being built (innermost last)."""

    warps: int
    lanes: int = LANES
    mfma_words: int = mfma.SCRATCH_WORDS  # a wavefront's MFMA scratch: 2 * M * K of the largest shape
    scratch: dict = field(default_factory=dict)
    count: int = 0
    open_caches: list = field(default_factory=list)

    def scratch_bytes(self, key: str) -> int:
        """Bytes of one warp's scratch `key` (an input tag, or "mfma")."""
        return self.mfma_words * 4 if key == "mfma" else SCRATCH_BYTES[key]

    def scratch_of(self, tag: str) -> Buffer:
        """The shared scratch the emulated warps of a block exchange their fragments through (named
        so that `is_emulation_scratch` knows it: a device's tensor cores need none)."""
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
class FragmentCache:
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


class Tile:
    """One tensorized sub-nest as a warp's calls."""

    def __init__(self, loops, store, roles, unit, ctx: TileContext, what: str):
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
        self.first = self.last = None  # (reduction_steps)

    def attach_caches(self, stack: list, warp_vars, loops=()) -> None:
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
                own = self.first, self.last
                self.first, self.last = self.reduction_steps(loops[:cache.depth])
                cache.frags, cache.fill, cache.flush = self.cache_fragments(role)
                self.first, self.last = own
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
            return _evaluate(name, _ptr(frag), Const(arg, ACC[self.tag]))
        return _evaluate(name, _ptr(frag))

    def _c_load(self, frag, m0, n0):
        return self._load("c", frag, self.c, i=m0, j=n0)

    def _c_store(self, frag, m0, n0):
        rs, cs = self.layout["c"]
        return _evaluate(f"gpu.mma.store_c_{self.tag}_{self._space(self.c)}", _ptr(frag),
                         self._base(self.c, i=m0, j=n0), rs, cs, self.lane)

    def _c_in(self, frag, *at):
        """C's fragment loaded, with the prologue op on the reduction's first step (SET: instead of
        the load); every step when no reduction loop is around (`first` None)."""
        load, op = self._c_load(frag, *at), self._op(self.intr.prologue, self.intr.prologue_arg, frag)
        is_set = self.intr.prologue is MMAFragmentOp.SET
        if op is None:
            return load
        if self.first is None:
            return op if is_set else block(load, op)
        return If(self.first, op if is_set else block(load, op), load if is_set else None)

    def _c_out(self, frag, *at):
        """The epilogue op (on the reduction's last step), then C's fragment stored."""
        op = self._op(self.intr.epilogue, self.intr.epilogue_arg, frag)
        if op is not None and self.last is not None:
            op = If(self.last, op)
        return block(op, self._c_store(frag, *at))

    def reduction_steps(self, loops) -> tuple:
        """(first, last): the conditions that the serial loops among `loops` (For nodes) that move
        A or B but not C (the reduction around the tile) are at their first / last iteration; (None,
        None) without such loops. Accera's prologue and epilogue ops apply to C once per reduction."""
        fixed = set(nodes_of(self._base(self.c), Var))
        moving = set(nodes_of(self._base(self.a), Var)) | set(nodes_of(self._base(self.b), Var))
        red = [g for g in loops if g.kind != LoopKind.BOUND and g.var in moving and g.var not in fixed]
        if not red:
            return None, None
        first = last = None
        for g in red:
            f = BinOp("eq", g.var, g.lo, ScalarType.bool)
            l_ = BinOp("eq", g.var, idx_op("sub", g.hi, Const(1)), ScalarType.bool)
            first = f if first is None else BinOp("and", first, f, ScalarType.bool)
            last = l_ if last is None else BinOp("and", last, l_, ScalarType.bool)
        return first, last

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


class MfmaTile(Tile):
    """One tensorized sub-nest as an AMD wavefront's calls: per pass the A (M x K) and B (K x N)
    fragments, and per output block q (rows R*q.. of C, all columns) one MFMA with the A broadcast
    (abid = q). PASS_ORDER keeps the B blocks' accumulators live across a pass group; BLOCK_ORDER
    computes the blocks one after another with one accumulator (the results are the same)."""

    def __init__(self, loops, store, roles, unit, ctx: TileContext, what: str):
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
            return _evaluate(name, _ptr(frag), Const(arg, ACC[self.tag]), n)
        return _evaluate(name, _ptr(frag), n)

    def _c_load(self, frag, q):
        return self._load("c", frag, self.c, i=self.ins.rows * q, j=0)

    def _c_store(self, frag, q):
        rs, cs = self.layout["c"]
        return _evaluate(f"gpu.mfma.store_c_{self.tag}_{self._space(self.c)}", _ptr(frag),
                         self._base(self.c, i=self.ins.rows * q, j=0), rs, cs, self.lane, *self.geo[:2])

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
