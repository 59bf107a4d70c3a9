"""Layouts of caches in the scratchpad / accumulator (see the package docstring) and the transfers
(mvin / mvout) that fill and write back such a cache."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...ir.affine import Affine, ceildiv, combination_affine, to_affine
from ...ir.expr import BinOp, Buffer, Const, Load, Var, as_int, idx_op
from ...ir.stmt import For, block
from ..library import Memory
from . import machine as gm
from .intrinsics import (ACCUMULATOR, CONFIG_LD, CONFIG_ST, DIM, F32, I8, I32, IDX, MEMORIES, MVIN, MVOUT,
                         SCRATCHPAD, call)


# ---- layouts of caches in the scratchpad / accumulator ----------------------------------------------
@dataclass
class Layout:
    buffer: Buffer
    memory: Memory
    base: int
    shape: tuple  # block extents (ints); rank 1 blocks are one row of columns
    queue: int  # the load queue its mvins use

    @property
    def lead(self) -> tuple:
        """The block's extents but the last (the rows of one column block), at least (1,)."""
        return self.shape[:-1] if len(self.shape) > 1 else (1,)

    @property
    def P(self) -> int:
        """Rows per column block: the product of the leading extents."""
        p = 1
        for e in self.lead:
            p *= e
        return p

    @property
    def col_blocks(self) -> int:
        """Number of DIM-wide column blocks the last extent needs."""
        return -(-self.shape[-1] // DIM)

    @property
    def rows(self) -> int:
        """Memory rows the whole block occupies."""
        return self.col_blocks * self.P

    def row_strides(self) -> list:
        """Row stride of each leading dimension (innermost first)."""
        out, s = [], 1
        for e in reversed(self.lead):
            out.append(s)
            s *= e
        return list(reversed(out))

    def row_affine(self, indices, what: str) -> Affine:
        """The row of the element at `indices` (cache coordinates; the last one a multiple of 16).
        The leading subscripts may be a flattened index's `[x // m, x % m]` over a dimension of
        extent m (see ir.affine.combination_affine)."""
        indices = list(indices)
        if len(self.shape) == 1:
            indices = [Const(0)] + indices
        last = to_affine(indices[-1])
        lead = combination_affine(zip(indices[:-1], self.row_strides()))
        if last is None or lead is None:
            raise ValueError(f"{what}: the subscripts {indices} of {self.buffer.name} are not affine")
        return self.row_of(lead, last, what)

    def row_of(self, lead: Affine, last: Affine, what: str) -> Affine:
        """The row of the element whose leading subscripts are `lead` rows in and whose last one
        (its column) is `last`, a multiple of 16."""
        if last.const % DIM or any(c % DIM for _, c in last.terms):
            raise ValueError(f"{what}: the tile starts at column {last.to_expr()} of {self.buffer.name}, which is "
                             f"not a multiple of {DIM}: Gemmini addresses whole rows of {DIM} elements")
        return Affine({v: c // DIM for v, c in last.terms}, last.const // DIM) * self.P + self.base + lead

    def address(self, row: Affine, accumulate: bool = False, raw: bool = False):
        """The address operand of `row`: accumulator rows carry the accumulate / full-width flag bits."""
        a = row
        if self.memory is ACCUMULATOR:
            a = a + (gm.ACC_BIT | (gm.ACCUMULATE_BIT if accumulate else 0) | (gm.FULL_BIT if raw else 0))
        return a.to_expr()


def place(buffers, describe) -> dict:
    """Row addresses for every scratchpad / accumulator buffer (a bump allocator per memory).
    Raises ValueError when a memory overflows, saying how big each block is and what fits."""
    layouts: dict = {}
    used = {m.name: 0 for m in MEMORIES}
    scratch_queue = 1
    for b in buffers:
        mem = SCRATCHPAD if b.memory == SCRATCHPAD.name else ACCUMULATOR
        shape = tuple(int(as_int(s)) for s in b.shape)
        if mem is ACCUMULATOR:
            queue = 0
        else:
            queue, scratch_queue = scratch_queue, (1 if scratch_queue == 2 else 2)
        lay = Layout(b, mem, used[mem.name], shape, queue)
        if used[mem.name] + lay.rows > mem.rows:
            dims = " x ".join(str(s) for s in shape)
            other = f" (other caches already take {used[mem.name]} rows)" if used[mem.name] else ""
            raise ValueError(f"{describe(b)} in {mem.name.upper()}: its active block is {dims} {mem.dtype.name} = "
                             f"{lay.rows} rows of {DIM}, but Gemmini's {mem.name} holds {mem.rows} rows "
                             f"({mem.description}){other}; cache at an inner index or use smaller tiles")
        used[mem.name] += lay.rows
        layouts[b] = lay
    return layouts


def byte_stride(buf: Buffer, dim: int):
    return idx_op("mul", buf.strides[dim], Const(buf.dtype.bits // 8))


def check_dram(buf: Buffer, what: str) -> None:
    last = as_int(buf.strides[-1]) if buf.strides else 1
    if last != 1 and not (buf.rank and as_int(buf.shape[-1]) == 1):
        raise ValueError(f"{what}: {buf.name}'s last dimension is not contiguous in memory (stride {last}); Gemmini "
                         f"moves rows of consecutive elements (use a FIRST_MAJOR array)")


# ---- transfers: cache copies become mvin / mvout ------------------------------------------------------
class _Tiles:
    """The loops moving a cache block in pieces of at most DIM rows x `width` columns: the
    leading dims (all but the last two) one by one, then row tiles r, then column tiles cb."""

    def __init__(self, lay: Layout, exts, width: int, tag: str):
        n = len(lay.shape)
        name = lay.buffer.name
        self.n, self.exts, self.width = n, exts, width
        self.lead = [Var(f"{name}_{tag}{d}") for d in range(max(n - 2, 0))]
        self.r, self.cb = Var(f"{name}_{tag}r"), Var(f"{name}_{tag}cb")
        self.r_ext = exts[n - 2] if n > 1 else Const(1)
        self.rows = BinOp("min", Const(DIM), idx_op("sub", self.r_ext, idx_op("mul", self.r, DIM)), IDX)
        self.cols = BinOp("min", Const(width), idx_op("sub", exts[-1], idx_op("mul", self.cb, width)), IDX)
        # the tile's first element, as cache indices
        self.index = list(self.lead) + ([idx_op("mul", self.r, DIM)] if n > 1 else []) + \
            [idx_op("mul", self.cb, width)]

    def dram(self, buf: Buffer, origin):
        return Load(buf, tuple(idx_op("add", o, c) for o, c in zip(origin, self.index)))

    def loops(self, body):
        body = For(self.cb, Const(0), ceildiv(self.exts[-1], self.width), body)
        if self.n > 1:
            body = For(self.r, Const(0), ceildiv(self.r_ext, DIM), body)
        for d in reversed(range(len(self.lead))):
            body = For(self.lead[d], Const(0), self.exts[d], body)
        return body


def copy_in(lay: Layout, src: Optional[Buffer], origin, exts, what: str):
    """mvins of the block (src[origin + c] for c < exts) into the cache; src None: zeros."""
    n = len(lay.shape)
    shrunk = 0
    if src is not None:
        check_dram(src, what)
        if src.dtype is not lay.memory.dtype:
            raise ValueError(f"{what}: Gemmini's {lay.memory.name} holds {lay.memory.dtype.name}; "
                             f"{src.name} is {src.dtype.name}")
    elif lay.memory is ACCUMULATOR:
        shrunk = 1  # zeros: count them as int8 (the cheap way to clear accumulator rows)
    elem_bytes = 1 if (lay.memory is SCRATCHPAD or shrunk) else 4
    # columns per mvin: several 16-column blocks (block stride P)
    t = _Tiles(lay, exts, gm.MAX_BYTES // elem_bytes, "l")
    row = lay.row_affine(t.index, what)
    stride = byte_stride(src, n - 2) if (src is not None and n > 1) else Const(0)
    cfg = call(CONFIG_LD, stride, Const(1.0, F32), shrunk, lay.P, lay.queue)
    dram = t.dram(src, origin) if src is not None else Const(0)
    return t.loops(block(cfg, call(MVIN[lay.queue], dram, lay.address(row), t.cols, t.rows)))


def copy_out(lay: Layout, dst: Buffer, origin, exts, what: str, act=gm.NO_ACTIVATION, scale=None):
    """mvouts of the block to dst[origin + c]: raw int32 (scale None) or scaled int8 (accumulator)."""
    n = len(lay.shape)
    check_dram(dst, what)
    raw = scale is None and lay.memory is ACCUMULATOR
    want = I32 if raw else I8
    if dst.dtype is not want:
        raise ValueError(f"{what}: a mvout from Gemmini's {lay.memory.name} writes {want.name}; {dst.name} is "
                         f"{dst.dtype.name}")
    t = _Tiles(lay, exts, DIM, "s")
    row = lay.row_affine(t.index, what)
    stride = byte_stride(dst, n - 2) if n > 1 else Const(0)
    cfg = call(CONFIG_ST, stride, act, scale if scale is not None else Const(1.0, F32))
    return t.loops(block(cfg, call(MVOUT, t.dram(dst, origin), lay.address(row, raw=raw), t.cols, t.rows)))
