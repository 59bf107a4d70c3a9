"""Tensorizing onto the tile unit: a tensorized matmul sub-nest C[i, j] += A[i, k] * B[k, j] becomes
tile loads, one tile dot product and a tile store, with A, B and C cached in tile registers
(`plan.cache(X, index=..., location=acc.MemorySpace.AMX_TILE)`).

Every tile is configured as 16 rows x 64 bytes (the call bracket: once per kernel, or once per
iteration of the parallel loops in each thread). A cache whose block is larger than one tile takes
a grid of tiles (register blocking: e.g. C 32 x 32 in four tiles, A 32 x 64 and B 64 x 32 in two
each); the loops that pick a tile of the grid around the tensorized loops must be unrolled (tile
numbers are immediates). A tile is loaded straight from the array when its block is a full tile
of rows 64 bytes apart or more (A, C), or for B, from a cache in VNNI order
(`plan.cache(B, ..., layout=acc.Array.Layout.VNNI)`, the target's `grouped()` layout, also in
panels, whose rows hold groups of 4 (int8) or 2 (bf16) consecutive k for each column, as the tile
unit reads B); otherwise through a 1 KiB scratch
block: a partial tile (zeroed: the zeros add nothing), or B packed there tile by tile. A partial C
tile is stored through the scratch block and copied out element by element.

Kinds: int8 (uint8 / int8 operands, int32 accumulators: TDPBUUD / TDPBUSD / TDPBSUD / TDPBSSD by
the operands' signedness, tile 16 x 16 x 64) and bf16 (bfloat16 operands, float32 accumulators:
TDPBF16PS, tile 16 x 16 x 32).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

from ...ir.affine import Affine, to_affine
from ...ir.expr import BinOp, Buffer, Call, Cast, Const, Load, Var, as_int, idx_op
from ...ir.kinds import BufferRole, HostMemory, LoopKind
from ...ir.stmt import Alloc, Evaluate, For, If, Store, block
from ...ir.visitor import Mutator, free_vars, nodes_of
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
    """A cache in tile registers: `operand` "A" (i, k), "B" (k, j) or "C" (i, j); its block is a
    `grid` (rows, columns) of tiles, numbered row by row from `tile`."""

    buffer: Buffer
    tile: int
    operand: str
    grid: tuple = (1, 1)

    @property
    def elem_bytes(self) -> int:
        return self.buffer.dtype.bits // 8

    @property
    def tile_block(self) -> tuple:
        """The (rows, columns) of the block one tile holds, in elements of the buffer."""
        return tile_block(self.operand, self.elem_bytes)

    def tiles(self):
        """(tile number, row offset, column offset) of each tile of the grid."""
        tr, tc = self.tile_block
        return [(self.tile + p * self.grid[1] + q, p * tr, q * tc)
                for p in range(self.grid[0]) for q in range(self.grid[1])]


def tile_block(operand: str, eb: int) -> tuple:
    """Elements of one tile's block: A and C 16 rows x 64 bytes; B 16 rows of 64 bytes, each
    holding 32 bits' worth of consecutive k (4 int8 / 2 bf16) for 16 columns."""
    if operand == "B":
        return (mc.ROWS * (4 // eb), mc.COLSB // 4)
    return (mc.ROWS, mc.COLSB // eb)


_OPERANDS = {(0, 2): "A", (2, 1): "B", (0, 1): "C"}


def place(buffers, describe, roles) -> dict:
    """Tile registers for each cache: a grid of tiles covering its block, 8 tiles in all."""
    layouts, used = {}, 0
    for b in sorted(buffers, key=lambda b: "CAB".index(_OPERANDS.get(tuple(((roles or {}).get(b) or ())[-2:]), "C"))):
        r = (roles or {}).get(b)
        # (leading dimensions of extent 1: a block of a cache of panels)
        lead_ok = b.rank >= 2 and all(as_int(x) == 1 for x in b.shape[:-2])
        op = _OPERANDS.get(tuple(r[-2:])) if r is not None and lead_ok else None
        if op is None:
            raise ValueError(f"{describe(b)} in AMX_TILE: a tile holds A[i, k], B[k, j] or C[i, j] of the "
                             f"tensorized loops (i, j, k); this cache is indexed by {r}")
        rows, cols = (as_int(s) for s in b.shape[-2:])
        tr, tc = tile_block(op, b.dtype.bits // 8)
        if rows is None or cols is None:
            raise ValueError(f"{describe(b)} in AMX_TILE: its block has a size known only at run time")
        grid = (-(-rows // tr), -(-cols // tc))
        n = grid[0] * grid[1]
        if used + n > mc.TILES:
            raise ValueError(f"{describe(b)} in AMX_TILE: its block is {rows} x {cols} {b.dtype.name}, {grid[0]} x "
                             f"{grid[1]} tiles of {tr} x {tc}, but only {mc.TILES - used} of the {mc.TILES} tile "
                             f"registers are left; split the loops so the caches' blocks take at most {mc.TILES} "
                             f"tiles together")
        layouts[b] = Layout(b, used, op, grid)
        used += n
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
    dimension is contiguous (not cut into panels); else None."""
    last = to_affine(buf.strides[-1])
    if last is None or not last.is_const or last.const != 1 or buf.panel > 1:
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


def _part(ext, off: int, size: int):
    """The extent of a grid tile at offset `off` (of at most `size`) within a block of `ext`."""
    n = as_int(ext)
    if n is not None:
        return Const(max(0, min(size, n - off)))
    return BinOp("min", Const(size), BinOp("max", Const(0), idx_op("sub", ext, Const(off)), IDX), IDX)


def _shifted(origin, dr: int, dc: int):
    return list(origin[:-2]) + [idx_op("add", origin[-2], Const(dr)), idx_op("add", origin[-1], Const(dc))]


def _per_tile(lay: Layout, origin, exts, one, empty=None):
    """`one(tile, origin, extents)` for each tile of the layout's grid; a tile past a constant
    extent gets `empty(tile)` (None: nothing)."""
    tr, tc = lay.tile_block
    out = []
    for t, dr, dc in lay.tiles():
        sub = (_part(exts[-2], dr, tr), _part(exts[-1], dc, tc))
        if as_int(sub[0]) == 0 or as_int(sub[1]) == 0:
            out.append(empty(t) if empty is not None else None)
        else:
            out.append(one(t, _shifted(origin, dr, dc), sub))
    return block(*out)


def copy_in(ops, lay: Layout, src: Optional[Buffer], origin, exts, what: str, locality=None):
    """Load the block src[origin + c] (c < exts) into the layout's tiles; src None: zeros.
    `locality` below 3 (the cache's hint): the tiles loaded straight from `src` with TILELOADDT1."""
    if src is None:
        return block(*[_call(ops["zero"], t) for t, _, _ in lay.tiles()])
    direct = ops["loaddt1"] if locality is not None and locality < 3 else ops["loadd"]
    return _per_tile(lay, origin, exts, lambda t, o, e: _copy_in_tile(ops, lay, t, src, o, e, direct),
                     empty=lambda t: _call(ops["zero"], t))


def _multiple_of(e, g: int) -> bool:
    a = to_affine(e)
    return a is not None and a.const % g == 0 and all(c % g == 0 for _, c in a.terms)


# a B tile row holds 32-bit slots, each a group of consecutive k (4 int8 / 2 bfloat16: VNNI order)
GROUP_BYTES = 4


def b_group_bytes(dtype) -> Optional[int]:
    """Bytes per group of k in which the tile unit reads B of `dtype` (None: no tile of that type)."""
    return GROUP_BYTES if dtype in (I8, U8, BF16) else None


def b_tile_block(dtype):
    """(rows, columns) of the block one B tile reads from a VNNI-ordered array of `dtype`."""
    if b_group_bytes(dtype) is None:
        return None
    g = GROUP_BYTES // (dtype.bits // 8)
    return mc.ROWS * g, mc.COLSB // GROUP_BYTES


def _whole_b_tile(src: Buffer, origin) -> bool:
    """Whether a whole B tile at `origin` lies inside the VNNI-ordered cache `src` (allocated in
    whole tiles, its rows past the data zeros: lower/cache.py), so a partial block loads directly."""
    rows, cols = b_tile_block(src.dtype)
    shape = [as_int(x) for x in src.shape[-2:]]
    return (None not in shape and shape[0] % rows == 0 and shape[1] % cols == 0
            and _multiple_of(origin[-2], rows) and _multiple_of(origin[-1], cols))


def _copy_in_tile(ops, lay: Layout, t: int, src: Buffer, origin, exts, direct):
    """One tile's load: straight from `src` with `direct` (a load intrinsic) where its rows lie
    there as the tile takes them, else through a scratch block filled element by element."""
    eb = src.dtype.bits // 8
    at = _origin2(src, origin)
    if lay.operand != "B":
        stride = _row_stride_bytes(src)
        if stride is not None and _full(exts, (mc.ROWS, mc.COLSB // eb)):
            return _call(direct, t, Load(src, at(Const(0), Const(0))), stride)
        s = _scratch(src.dtype, (mc.ROWS, mc.COLSB // eb))
        fill = _loops(exts, lambda r, c: Store(s, (r, c), Load(src, at(r, c))))
        # rows past the block need no zeros: they only reach rows of C past the block, which are
        # never stored; columns past it (A's k) must be zeros, as they meet B's rows
        rows_only = as_int(exts[-1]) == mc.COLSB // eb
        return Alloc(s, block(fill, _call(ops["loadd"], t, Load(s, (Const(0), Const(0))), mc.COLSB)),
                     zero=not rows_only)
    g = 4 // eb  # consecutive k per 32-bit slot of a B tile row
    cols = mc.COLSB // 4  # a B tile's columns: inside one panel of the cache
    in_panel = src.panel <= 1 or (src.panel % cols == 0 and _multiple_of(origin[-1], cols))
    if src.group == g and _multiple_of(origin[-2], g) and in_panel and (
            _full(exts, (mc.ROWS * g, mc.COLSB // 4)) or _whole_b_tile(src, origin)):
        # B already in VNNI order (a cache with that layout): a tile row is one group row (in
        # column panels, the tile is one contiguous run); a partial block too when the whole tile is
        # inside the cache: past the data, rows are zeros (they meet A's zero columns) and columns
        # reach only columns of C that are never stored
        last = to_affine(src.strides[-1])
        if last is not None and last.is_const and last.const == g:
            return _call(direct, t, Load(src, at(Const(0), Const(0))),
                         idx_op("mul", src.strides[-2], Const(eb)))
    s = _scratch(src.dtype, (mc.ROWS, mc.COLSB // 4, g))
    load = _call(ops["loadd"], t, Load(s, (Const(0), Const(0), Const(0))), mc.COLSB)
    if src.group == g and _multiple_of(origin[-2], g):
        # a partial tile of a VNNI-ordered cache: its group rows copied slot by slot (each group's
        # g elements are adjacent in both), the rest of the scratch block zeros
        groups = idx_op("floordiv", idx_op("add", exts[-2], Const(g - 1)), Const(g))
        whole = as_int(exts[-2]) is not None and as_int(exts[-2]) % g == 0

        def slot(kq, c):
            out = []
            for q in range(g):
                r = idx_op("add", idx_op("mul", kq, Const(g)), Const(q))
                st = Store(s, (kq, c, Const(q)), Load(src, at(r, c)))
                out.append(st if whole else If(BinOp("lt", r, exts[-2], ScalarType.bool), st))
            return block(*out)

        return Alloc(s, block(_loops((groups, exts[-1]), slot), load), zero=True)
    if _full(exts, (mc.ROWS * g, mc.COLSB // 4)):
        # a full tile: every slot written, in the scratch block's order (no zeroing, no division)
        fill = _loops((Const(mc.ROWS), Const(mc.COLSB // 4), Const(g)), lambda kq, c, q: Store(
            s, (kq, c, q), Load(src, at(idx_op("add", idx_op("mul", kq, Const(g)), q), c))))
        return Alloc(s, block(fill, load), zero=False)
    fill = _loops(exts, lambda r, c: Store(s, (idx_op("floordiv", r, Const(g)), c, idx_op("mod", r, Const(g))),
                                           Load(src, at(r, c))))
    return Alloc(s, block(fill, load), zero=True)


def copy_out(ops, lay: Layout, dst: Buffer, origin, exts, what: str):
    """Store the layout's tiles (C) to dst[origin + c] for c < exts."""
    if lay.operand != "C":
        raise ValueError(f"{what}: only the accumulator tile (C) is written back")
    return _per_tile(lay, origin, exts, lambda t, o, e: _copy_out_tile(ops, t, dst, o, e))


def _copy_out_tile(ops, t: int, dst: Buffer, origin, exts):
    eb = dst.dtype.bits // 8
    at = _origin2(dst, origin)
    stride = _row_stride_bytes(dst)
    if stride is not None and _full(exts, (mc.ROWS, mc.COLSB // eb)):
        return _call(ops["stored"], t, Load(dst, at(Const(0), Const(0))), stride)
    s = _scratch(dst.dtype, (mc.ROWS, mc.COLSB // eb))
    back = _loops(exts, lambda r, c: Store(dst, at(r, c), Load(s, (r, c))))
    return Alloc(s, block(_call(ops["stored"], t, Load(s, (Const(0), Const(0))), mc.COLSB), back), zero=False)


# ---- the tile operation -------------------------------------------------------------------------
@dataclass(frozen=True)
class Tile:
    """A matched tile operation: `op` (the intrinsic's short name) on tiles c += a . b (tile
    numbers: constants, or index expressions of loops that must be unrolled)."""

    op: str
    c: object
    a: object
    b: object


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
        tiles[want] = _tile_number(lay, x, roles, what)
    if kind is INT8:
        sa = "s" if a.buffer.dtype is I8 else "u"
        sb = "s" if b.buffer.dtype is I8 else "u"
        op = f"dpb{sa}{sb}d"
    else:
        op = "dpbf16ps"
    return Tile(op, tiles["C"], tiles["A"], tiles["B"])


def match_epilogue(ops, loops, store, roles, layouts, what: str):
    """A statement reading accumulator tiles (`Out[i, j] = f(C_cache[i, j], ...)`, inside the
    tensorized row and column loops): each tile it reads is stored to a 16 x 16 scratch block in
    the core's L1, and the statement runs on the block, its innermost loop vectorized (the
    vectorize pass makes it vector code where the target has vectors for it). None when the
    statement reads no tile."""
    reads = [x for x in nodes_of(store.value, Load) if x.buffer in layouts]
    if not reads:
        return None
    lay = layouts[reads[0].buffer]
    if lay.operand != "C" or any(x.buffer is not lay.buffer for x in reads):
        return None
    if store.buffer in layouts:
        raise ValueError(f"{what}: the statement reads {lay.buffer.name} and writes {store.buffer.name}, "
                         f"both in tile registers; an epilogue writes memory")
    i, j = roles[0], roles[1]
    if any(f.var not in (i, j) for f in loops) or any(as_int(f.lo) != 0 for f in loops):
        raise ValueError(f"{what}: the loops around the statement reading {lay.buffer.name} must be the "
                         f"tensorized row and column loops ({i.name}, {j.name}), from 0")
    blocks, at = {}, {}  # tile number -> its scratch block; each read -> the element it reads there
    for x in reads:
        t = _tile_number(lay, x, roles, what)  # (an expression of grid loops unrolled later)
        if t not in blocks:
            blocks[t] = _scratch(lay.buffer.dtype, (mc.ROWS, mc.COLSB // lay.elem_bytes))
        # within the tile: the subscripts' terms in the tensorized row and column loops
        local = tuple(Affine([(v, c) for v, c in to_affine(ix).terms if v in (i, j)]).to_expr()
                      for ix in x.indices[-2:])
        at[x] = Load(blocks[t], local)
    value = _Replace(at).visit(store.value)
    body = Store(store.buffer, store.indices, value, store.reduce)
    for n, f in enumerate(reversed(loops)):
        kind = LoopKind.VECTORIZED if n == 0 and f.var is j else f.kind
        body = For(f.var, f.lo, f.hi, body, kind, f.attrs)
    out = block(*[_call(ops["stored"], t, Load(s, (Const(0), Const(0))), mc.COLSB) for t, s in blocks.items()],
                body)
    for s in reversed(list(blocks.values())):
        out = Alloc(s, out, zero=False)
    return out


class _Replace(Mutator):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Load(self, n):
        return self.mapping.get(n, n)


def _tile_number(lay: Layout, x: Load, roles, what: str):
    """Which tile of the layout's grid the access `x` (inside the tensorized loops) reads: its
    subscripts with the tensorized indices at 0 must be whole tiles."""
    zero = {v: Affine.constant(0) for v in roles}
    number = to_affine(Const(lay.tile))
    for ix, size, per in zip(x.indices[-2:], lay.tile_block, (lay.grid[1], 1)):
        a = to_affine(ix)
        if a is None:
            raise ValueError(f"{what}: the subscript {ix} of {x.buffer.name} is not affine")
        a = a.subs(zero)
        if a.const % size or any(c % size for _, c in a.terms):
            raise ValueError(f"{what}: {x.buffer.name} is read at {a.to_expr()} (plus the tensorized indices), not "
                             f"at a whole tile of {size}: the loops around the tensorized ones must step by tiles")
        number = number + Affine([(v, c // size * per) for v, c in a.terms], a.const // size * per)
    return number.const if number.is_const else number.to_expr()


def check_tile_numbers(ops, stmt, request=None):
    """After unrolling: every tile number is a constant (the instructions take immediates)."""
    names = {ops[k].name: n for k, n in (("loadd", 1), ("loaddt1", 1), ("stored", 1), ("zero", 1), ("dpbssd", 3),
                                            ("dpbsud", 3), ("dpbusd", 3), ("dpbuud", 3), ("dpbf16ps", 3))}
    for call in nodes_of(stmt, Call):
        n = names.get(call.fn)
        if n is None:
            continue
        for arg in call.args[:n]:
            if as_int(arg) is None:
                loops = sorted({v.name for v in free_vars(arg)})
                raise ValueError(f"the x86 tile unit: a tile register is chosen by the loop(s) {', '.join(loops)} "
                                 f"around the tensorized loops; tile numbers are immediates: unroll "
                                 f"{'them' if len(loops) > 1 else 'it'} (plan.unroll)")
    return stmt


def tile_calls(ops, t: Tile):
    return _call(ops[t.op], t.c, t.a, t.b)


def bracket(ops, body, request=None):
    """The kernel's tile work: begin (the OS's permission, or the model's state), one
    configuration (every tile 16 rows x 64 bytes), the work, end. Tiles and their configuration
    belong to a thread: in a parallel plan each iteration of the (outermost, collapsed) parallel
    loops opens its own bracket, and no tile work may be left outside them."""
    parallel = {v for v, k in (request.kinds.items() if request is not None else ()) if k == "parallel"}
    if not any(f.var in parallel for f in nodes_of(body, For)):
        return _bracket(ops, body)  # (no parallel loop left: e.g. one of a single iteration)
    out = _PerThread(ops, parallel).visit(body)
    if _uses_tiles(ops, _PerThread(ops, parallel, strip=True).visit(body)):
        raise ValueError("the x86 tile unit: a parallelized plan uses tiles outside its parallel loops; each "
                         "thread configures its own tiles, so all tile work must be inside the parallel loops")
    return out


def _bracket(ops, body):
    shapes = [x for _ in range(mc.TILES) for x in (mc.ROWS, mc.COLSB)]
    begin = Call(ops["begin"].name, (), ScalarType.bool)
    return If(begin, block(_call(ops["config"], *shapes), body, _call(ops["end"])))


def _uses_tiles(ops, stmt) -> bool:
    names = {i.name for i in ops.values()}
    return any(c.fn in names for c in nodes_of(stmt, Call))


class _PerThread(Mutator):
    """The bodies of the outermost parallel loops (the innermost of a perfect chain of them, which
    OpenMP collapses) bracketed; `strip`: emptied instead (to look at what is left outside)."""

    def __init__(self, ops, parallel, strip=False):
        self.ops, self.parallel, self.strip = ops, parallel, strip

    def visit_For(self, f: For):
        if f.var not in self.parallel:
            return self.generic_visit(f)
        chain = [f]
        while isinstance(chain[-1].body, For) and chain[-1].body.var in self.parallel:
            chain.append(chain[-1].body)
        inner = block() if self.strip else (_bracket(self.ops, chain[-1].body)
                                             if _uses_tiles(self.ops, chain[-1].body) else chain[-1].body)
        for g in reversed(chain):
            inner = For(g.var, g.lo, g.hi, inner, g.kind, g.attrs)
        return inner


def _call(intr, *args) -> Evaluate:
    return Evaluate(Call(intr.name, tuple(Const(a) if isinstance(a, int) else a for a in args), IDX))
