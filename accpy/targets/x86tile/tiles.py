"""Tensorizing onto the tile unit: a tensorized matmul sub-nest C[i, j] += A[i, k] * B[k, j] becomes
tile loads, one tile dot product and a tile store, with A, B and C cached in tile registers
(`plan.cache(X, index=..., location=acc.MemorySpace.AMX_TILE)`).

Every tile is configured once per kernel as 16 rows x 64 bytes (the call bracket). A tile is loaded
straight from the array when its block is a full tile of rows 64 bytes apart or more (A, C);
otherwise through a zeroed 1 KiB scratch block: a partial tile (the zeros add nothing), and B,
whose tile rows hold groups of 4 (int8) or 2 (bf16) consecutive k for each column (VNNI order).
A partial C tile is stored through the scratch block and copied out element by element.

Kinds: int8 (uint8 / int8 operands, int32 accumulators: TDPBUUD / TDPBUSD / TDPBSUD / TDPBSSD by
the operands' signedness, tile 16 x 16 x 64) and bf16 (bfloat16 operands, float32 accumulators:
TDPBF16PS, tile 16 x 16 x 32).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

from ...ir.affine import to_affine
from ...ir.expr import BinOp, Buffer, Call, Cast, Const, Load, Var, as_int, idx_op
from ...ir.kinds import BufferRole, HostMemory
from ...ir.stmt import Alloc, Evaluate, For, If, Store, block
from ...ir.types import ScalarType
from . import machine as mc

I8, U8, I32, BF16, F32, IDX = (ScalarType.int8, ScalarType.uint8, ScalarType.int32, ScalarType.bfloat16,
                               ScalarType.float32, ScalarType.index)
_names = itertools.count()


@dataclass(frozen=True)
class TensorIntrinsic:
    """What `plan.tensorize` maps a sub-nest onto: C[i, j] += A[i, k] * B[k, j] over tiles of at
    most `shape` (i, j, k); `group`: consecutive k in one 32-bit slot of a B tile row."""

    name: str
    shape: tuple
    inputs: tuple  # the operand element types it takes
    accumulator: ScalarType
    group: int


INT8 = TensorIntrinsic("amx.int8", (mc.ROWS, mc.COLSB // 4, mc.COLSB), (U8, I8), I32, 4)
BF16_TILE = TensorIntrinsic("amx.bf16", (mc.ROWS, mc.COLSB // 4, mc.COLSB // 2), (BF16,), F32, 2)
_BY_NAME = {"int8": INT8, "amx.int8": INT8, "bf16": BF16_TILE, "amx.bf16": BF16_TILE}
for _n in ("dpbssd", "dpbsud", "dpbusd", "dpbuud"):
    _BY_NAME[_n] = _BY_NAME["amx." + _n] = INT8
_BY_NAME["dpbf16ps"] = _BY_NAME["amx.dpbf16ps"] = BF16_TILE


def tensor_intrinsic(spec):
    """`Plan.tensorize`'s intrinsic: None (the int8 tile), "amx.int8", "amx.bf16" or a mnemonic."""
    if spec is None or isinstance(spec, TensorIntrinsic):
        return spec or INT8
    if isinstance(spec, str) and spec.lower() in _BY_NAME:
        return _BY_NAME[spec.lower()]
    raise ValueError(f"tensorize: the x86 tile unit has no intrinsic {spec!r}; it has 'amx.int8' (uint8/int8 "
                     f"operands, int32 accumulation, {INT8.shape[0]}x{INT8.shape[1]}x{INT8.shape[2]}) and 'amx.bf16' "
                     f"(bfloat16 operands, float32 accumulation, {'x'.join(map(str, BF16_TILE.shape))})")


# ---- the statement ------------------------------------------------------------------------------
def _operand(e, want):
    """The Load inside `cast(load, want)` (or `load` of type `want`), else None."""
    if isinstance(e, Cast) and e.dtype is want and isinstance(e.value, Load):
        return e.value
    if isinstance(e, Load) and e.dtype is want:
        return e
    return None


def matmul_operands(store, what: str):
    """(C, A, B loads, kind) of `C[..] += cast(A[..]) * cast(B[..])`, else ValueError saying why."""
    expected = ("C[i, j] += acc.cast(A[i, k], acc.int32) * acc.cast(B[k, j], acc.int32) with A, B uint8 or "
                "int8 and C int32, or the same with bfloat16 A, B cast to float32 and C float32")
    v = store.value
    if store.reduce != "add" or not isinstance(v, BinOp) or v.op != "mul":
        raise ValueError(f"{what}: the statement into {store.buffer.name} is not a sum of products; the tile unit "
                         f"computes {expected}")
    acc_t = store.buffer.dtype
    kind = INT8 if acc_t is I32 else BF16_TILE if acc_t is F32 else None
    if kind is None:
        raise ValueError(f"{what}: {store.buffer.name} is {acc_t.name}; the tile unit accumulates int32 (int8 "
                         f"operands) or float32 (bfloat16 operands): {expected}")
    a, b = _operand(v.a, acc_t), _operand(v.b, acc_t)
    if a is None or b is None:
        raise ValueError(f"{what}: the operands must be array elements converted to {acc_t.name}: {expected}")
    for x in (a, b):
        if x.buffer.dtype not in kind.inputs:
            raise ValueError(f"{what}: {x.buffer.name} is {x.buffer.dtype.name}; with {acc_t.name} accumulators "
                             f"the tile unit takes {' or '.join(t.name for t in kind.inputs)} operands")
    return Load(store.buffer, store.indices), a, b, kind


# ---- tiles in registers -------------------------------------------------------------------------
@dataclass
class Layout:
    """A cache in a tile register: `tile` (0..7), `operand` "A" (i, k), "B" (k, j) or "C" (i, j)."""

    buffer: Buffer
    tile: int
    operand: str

    @property
    def elem_bytes(self) -> int:
        return self.buffer.dtype.bits // 8


_OPERANDS = {(0, 2): "A", (2, 1): "B", (0, 1): "C"}


def place(buffers, describe, roles) -> dict:
    """A tile register per cache; each block must fit one tile."""
    layouts, used = {}, 0
    for b in sorted(buffers, key=lambda b: "CAB".index(_OPERANDS.get((roles or {}).get(b), "C"))):
        r = (roles or {}).get(b)
        op = _OPERANDS.get(r)
        if op is None or b.rank != 2:
            raise ValueError(f"{describe(b)} in AMX_TILE: a tile holds A[i, k], B[k, j] or C[i, j] of the "
                             f"tensorized loops (i, j, k); this cache is indexed by {r}")
        shape = [as_int(s) for s in b.shape]
        limit = {"A": (mc.ROWS, mc.COLSB), "C": (mc.ROWS, mc.COLSB), "B": (mc.ROWS * 4, mc.COLSB)}[op]
        eb = b.dtype.bits // 8
        rows, cols = shape
        if op == "B":
            ok = rows is not None and cols is not None and rows * eb <= limit[0] and cols * 4 <= limit[1]
        else:
            ok = rows is not None and cols is not None and rows <= limit[0] and cols * eb <= limit[1]
        if not ok:
            raise ValueError(f"{describe(b)} in AMX_TILE: its block is {shape[0]} x {shape[1]} {b.dtype.name}, more "
                             f"than one tile (16 rows of 64 bytes); split the tensorized loops to the tile's shape")
        if used >= mc.TILES:
            raise ValueError(f"{describe(b)} in AMX_TILE: the tile unit has {mc.TILES} tile registers, all taken")
        layouts[b] = Layout(b, used, op)
        used += 1
    return layouts


def _scratch(dtype, shape):
    return Buffer(f"amx_scratch{next(_names)}", dtype, tuple(Const(s) for s in shape),
                  tuple(Const(s) for s in _dense(shape)), role=BufferRole.CACHE, memory=HostMemory.LOCAL)


def _dense(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def _row_stride_bytes(buf: Buffer):
    """Bytes between consecutive rows of a 2-D (or higher, last two dims) array, when its last
    dimension is contiguous; else None."""
    last = to_affine(buf.strides[-1])
    if last is None or not last.is_const or last.const != 1:
        return None
    return idx_op("mul", buf.strides[-2], Const(buf.dtype.bits // 8))


def _full(exts, want) -> bool:
    return all(as_int(e) == w for e, w in zip(exts, want))


def _loops(exts, body_of):
    vs = [Var(f"t{next(_names)}", IDX) for _ in exts]
    body = body_of(*vs)
    for v, e in reversed(list(zip(vs, exts))):
        body = For(v, Const(0), e, body)
    return body


def _origin2(src, origin):
    """The source indices of block element (r, c): origin with its last two entries moved."""
    lead = list(origin[:-2])
    return lambda r, c: tuple(lead + [idx_op("add", origin[-2], r), idx_op("add", origin[-1], c)])


def copy_in(ops, lay: Layout, src: Optional[Buffer], origin, exts, what: str):
    """Load the block src[origin + c] (c < exts) into the layout's tile; src None: zeros."""
    t = lay.tile
    if src is None:
        return _call(ops["zero"], t)
    eb = src.dtype.bits // 8
    at = _origin2(src, origin)
    if lay.operand != "B":
        stride = _row_stride_bytes(src)
        if stride is not None and _full(exts, (mc.ROWS, mc.COLSB // eb)):
            return _call(ops["loadd"], t, Load(src, at(Const(0), Const(0))), stride)
        s = _scratch(src.dtype, (mc.ROWS, mc.COLSB // eb))
        fill = _loops(exts, lambda r, c: Store(s, (r, c), Load(src, at(r, c))))
        return Alloc(s, block(fill, _call(ops["loadd"], t, Load(s, (Const(0), Const(0))), mc.COLSB)), zero=True)
    g = 4 // eb  # consecutive k per 32-bit slot of a B tile row
    s = _scratch(src.dtype, (mc.ROWS, mc.COLSB // 4, g))
    load = _call(ops["loadd"], t, Load(s, (Const(0), Const(0), Const(0))), mc.COLSB)
    if _full(exts, (mc.ROWS * g, mc.COLSB // 4)):
        # a full tile: every slot written, in the scratch block's order (no zeroing, no division)
        fill = _loops((Const(mc.ROWS), Const(mc.COLSB // 4), Const(g)), lambda kq, c, q: Store(
            s, (kq, c, q), Load(src, at(idx_op("add", idx_op("mul", kq, Const(g)), q), c))))
        return Alloc(s, block(fill, load), zero=False)
    fill = _loops(exts, lambda r, c: Store(s, (idx_op("floordiv", r, Const(g)), c, idx_op("mod", r, Const(g))),
                                           Load(src, at(r, c))))
    return Alloc(s, block(fill, load), zero=True)


def copy_out(ops, lay: Layout, dst: Buffer, origin, exts, what: str):
    """Store the layout's tile (C) to dst[origin + c] for c < exts."""
    if lay.operand != "C":
        raise ValueError(f"{what}: only the accumulator tile (C) is written back")
    eb = dst.dtype.bits // 8
    at = _origin2(dst, origin)
    stride = _row_stride_bytes(dst)
    if stride is not None and _full(exts, (mc.ROWS, mc.COLSB // eb)):
        return _call(ops["stored"], lay.tile, Load(dst, at(Const(0), Const(0))), stride)
    s = _scratch(dst.dtype, (mc.ROWS, mc.COLSB // eb))
    back = _loops(exts, lambda r, c: Store(dst, at(r, c), Load(s, (r, c))))
    return Alloc(s, block(_call(ops["stored"], lay.tile, Load(s, (Const(0), Const(0))), mc.COLSB), back), zero=False)


# ---- the tile operation -------------------------------------------------------------------------
@dataclass(frozen=True)
class Tile:
    """A matched tile operation: `op` (the intrinsic's short name) on tiles c += a . b."""

    op: str
    c: int
    a: int
    b: int

    @property
    def b_vars(self) -> frozenset:
        return frozenset()  # no state carried between tiles (the generic pass may regroup loops)

    @property
    def weights(self):
        return (self, None, None)  # never shared between tiles


def match_tile(loops, store, roles, layouts, what: str) -> Tile:
    """The tile operation of `C_cache[...] += cast(A_cache[...]) * cast(B_cache[...])`."""
    c, a, b, kind = matmul_operands(store, what)
    tiles = {}
    for x, want in ((c, "C"), (a, "A"), (b, "B")):
        lay = layouts.get(x.buffer)
        if lay is None or lay.operand != want:
            raise ValueError(f"{what}: {x.buffer.name} must be cached in AMX_TILE as the {want} operand "
                             f"(plan.cache({x.buffer.name.removesuffix('_cache')}, index=<the tensorized "
                             f"loops' outer index>, location=acc.MemorySpace.AMX_TILE))")
        tiles[want] = lay.tile
    if kind is INT8:
        sa = "s" if a.buffer.dtype is I8 else "u"
        sb = "s" if b.buffer.dtype is I8 else "u"
        op = f"dpb{sa}{sb}d"
    else:
        op = "dpbf16ps"
    return Tile(op, tiles["C"], tiles["A"], tiles["B"])


def tile_calls(ops, t: Tile):
    return _call(ops[t.op], t.c, t.a, t.b)


def bracket(ops, body, request=None):
    """The kernel's tile work: begin (the OS's permission, or the model's state), one
    configuration (every tile 16 rows x 64 bytes), the work, end. Tiles and their configuration
    belong to one thread: a parallel plan is refused (for now) rather than run unconfigured."""
    if request is not None and request.parallel is not None:
        raise ValueError("the x86 tile unit: a plan with tile caches cannot be parallelized yet (each thread "
                         "needs its own tile configuration); drop plan.parallelize or the AMX_TILE caches")
    shapes = [x for _ in range(mc.TILES) for x in (mc.ROWS, mc.COLSB)]
    begin = Call(ops["begin"].name, (), ScalarType.bool)
    return If(begin, block(_call(ops["config"], *shapes), body, _call(ops["end"])))


def _call(intr, *args) -> Evaluate:
    return Evaluate(Call(intr.name, tuple(Const(a) if isinstance(a, int) else a for a in args), IDX))
