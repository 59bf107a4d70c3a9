"""The Gemmini target library: its memories, intrinsics (reference body + C template) and how
caches and tensorized tiles map onto them (layouts, transfers, the 16x16x16 matmul tile).

Layout of a cache in the scratchpad (int8) or accumulator (int32): its last dimension is the
column dimension (16 elements per row); every other dimension is flattened, row-major, into
rows. Element (x_0, ..., x_n-1) sits at row
    base + (x_n-1 // 16) * P + sum_d<n-1 x_d * S_d,   column x_n-1 % 16,
with S_n-2 = 1, S_d = S_d+1 * E_d+1 and P = E_0 * ... * E_n-2 (E: the block's extents). A
16x16 tile whose rows move with one index and whose columns start at a multiple of 16 is then
rows `row, row + stride, ...`: what mvin / preload / compute / mvout address. The C templates
call native/gemmini/gemmini.h (Gemmini's names and argument orders); the reference bodies are
the numpy functions of accpy/targets/gemmini_model.py, run on `RefMachine` (tests compare each
template, run on the functional model, against its body).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..ir.affine import Affine, to_affine
from ..ir.expr import BinOp, Buffer, Call, Cast, Const, Load, Var, as_int, ceildiv, idx_op
from ..ir.stmt import Evaluate, For, If, Store, block
from ..ir.types import ScalarType
from . import gemmini_model as gm
from .intrinsics import Intrinsic, Memory, register

DIM = gm.DIM
I8, I32, F32, IDX = ScalarType.int8, ScalarType.int32, ScalarType.float32, ScalarType.index
HEADER = '#include "gemmini.h"'

# ---- memories --------------------------------------------------------------------------------
SCRATCHPAD = Memory("scratchpad", gm.SPAD_ROWS, DIM, I8,
                    description="4 banks x 4096 rows x 16 int8 (256 KiB)")
ACCUMULATOR = Memory("accumulator", gm.ACC_ROWS, DIM, I32, description="1024 rows x 16 int32 (64 KiB)")
MEMORIES = (SCRATCHPAD, ACCUMULATOR)


# ---- the numpy machine the reference bodies run on ---------------------------------------------
class RefMachine:
    """Scratchpad, accumulator, configuration and weights as numpy state (the intrinsics' meaning)."""

    def __init__(self):
        self.spad = np.zeros((gm.SPAD_ROWS, DIM), np.int8)
        self.acc = np.zeros((gm.ACC_ROWS, DIM), np.int32)
        self.ld = {q: dict(stride=0, scale=1.0, shrunk=0, block_stride=DIM) for q in range(3)}
        self.st = dict(stride=0, act=gm.NO_ACTIVATION, scale=1.0)
        self.ex = dict(c_stride=1, a_stride=1)
        self.weights = np.zeros((DIM, DIM), np.int8)
        self.pre = None


def _dram_rows(dram: np.ndarray, rows: int, cols: int, stride: int) -> np.ndarray:
    """The rows x cols DRAM tile at dram's first element, rows `stride` bytes apart (a view)."""
    dram = np.asarray(dram)
    return np.lib.stride_tricks.as_strided(dram, shape=(rows, cols), strides=(stride, dram.itemsize))


def _ref_config_ex(m, c_stride, a_stride):
    m.ex = dict(c_stride=int(c_stride), a_stride=int(a_stride))


def _ref_config_ld(m, stride, scale, shrunk, block_stride, id):
    m.ld[int(id)] = dict(stride=int(stride), scale=float(scale), shrunk=int(shrunk), block_stride=int(block_stride))


def _ref_config_st(m, stride, act, scale):
    m.st = dict(stride=int(stride), act=int(act), scale=float(scale))


def _ref_mvin(queue):
    def body(m, dram, addr, cols, rows):
        q = m.ld[queue]
        to_acc = bool(addr & gm.ACC_BIT)
        if dram is None:
            vals = np.zeros((rows, cols), np.int32 if to_acc else np.int8)
        else:
            vals = gm.ref_mvin(_dram_rows(dram, rows, cols, q["stride"]), q["scale"], accumulator=to_acc,
                               shrunk=bool(q["shrunk"]))
        data, written = gm.ref_mvin_layout(vals, q["block_stride"])
        row = addr & 0x1FFFFFFF if to_acc else addr
        mem = m.acc if to_acc else m.spad
        region = mem[row:row + data.shape[0]]
        if to_acc and addr & gm.ACCUMULATE_BIT:
            data = gm.ref_write_acc(region, data, True)
        region[written] = data[written]
    return body


def _ref_mvout(m, dram, addr, cols, rows):
    to_acc = bool(addr & gm.ACC_BIT)
    row = addr & 0x1FFFFFFF if to_acc else addr
    src = (m.acc if to_acc else m.spad)[row:row + rows, :cols]
    out = _dram_rows(dram, rows, cols, m.st["stride"])
    out[...] = gm.ref_mvout(src, accumulator=to_acc, raw=bool(addr & gm.FULL_BIT), scale=m.st["scale"], act=m.st["act"])


def _ref_preload(m, b, c, b_cols, b_rows, c_cols, c_rows):
    m.pre = (b, c, b_cols, b_rows, c_cols, c_rows)


def _ref_compute(accumulated):
    def body(m, a, bd, a_cols, a_rows, bd_cols, bd_rows):
        b, c, b_cols, b_rows, c_cols, c_rows = m.pre
        m.pre = None
        if not accumulated:
            m.weights = np.zeros((DIM, DIM), np.int8)
            if b != gm.GARBAGE_ADDR:
                m.weights[:b_rows, :b_cols] = m.spad[b:b + b_rows, :b_cols]
        A = m.spad[a:a + m.ex["a_stride"] * a_rows:m.ex["a_stride"], :a_cols]
        r = gm.ref_compute(A, m.weights, c_rows=c_rows, c_cols=c_cols)
        if c != gm.GARBAGE_ADDR:
            row = c & 0x1FFFFFFF
            rows = slice(row, row + m.ex["c_stride"] * c_rows, m.ex["c_stride"])
            m.acc[rows, :c_cols] = gm.ref_write_acc(m.acc[rows, :c_cols], r, bool(c & gm.ACCUMULATE_BIT))
    return body


def _noop(m):
    return None


# ---- intrinsics ---------------------------------------------------------------------------------
def _intr(name, params, template, reference, **kw):
    return Intrinsic(f"gemmini.{name}", tuple(params), template, reference, header=HEADER, **kw)


CONFIG_EX = _intr("config_ex", ("c_stride", "a_stride"),
                  "gemmini_extended3_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, ACC_SCALE_IDENTITY, "
                  "{c_stride}, {a_stride}, 0, 0, 0)", _ref_config_ex, config="ex",
                  doc="weight-stationary dataflow; C rows step c_stride, A rows step a_stride")
CONFIG_LD = _intr("config_ld", ("stride", "scale", "shrunk", "block_stride", "id"),
                  "gemmini_extended4_config_ld({stride}, {scale}, {shrunk}, {block_stride}, {id})", _ref_config_ld,
                  config="ld{id}", doc="load queue id: DRAM row stride (bytes), scale, shrunk, block stride (rows)")
CONFIG_ST = _intr("config_st", ("stride", "act", "scale"), "gemmini_extended_config_st({stride}, {act}, {scale})",
                  _ref_config_st, config="st", doc="mvout: DRAM row stride (bytes), activation, output scale")
MVIN = tuple(_intr(n, ("dram", "addr", "cols", "rows"), f"gemmini_extended_{n}({{dram}}, {{addr}}, {{cols}}, {{rows}})",
                   _ref_mvin(q), pointer_params=("dram",), uses_config=(f"ld{q}",))
             for q, n in enumerate(("mvin", "mvin2", "mvin3")))
MVOUT = _intr("mvout", ("dram", "addr", "cols", "rows"), "gemmini_extended_mvout({dram}, {addr}, {cols}, {rows})",
              _ref_mvout, pointer_params=("dram",), uses_config=("st",))
PRELOAD = _intr("preload", ("b", "c", "b_cols", "b_rows", "c_cols", "c_rows"),
                "gemmini_extended_preload({b}, {c}, {b_cols}, {b_rows}, {c_cols}, {c_rows})", _ref_preload)
COMPUTE_PRELOADED = _intr("compute_preloaded", ("a", "bd", "a_cols", "a_rows", "bd_cols", "bd_rows"),
                          "gemmini_extended_compute_preloaded({a}, {bd}, {a_cols}, {a_rows}, {bd_cols}, {bd_rows})",
                          _ref_compute(False), uses_config=("ex",))
COMPUTE_ACCUMULATED = _intr("compute_accumulated", ("a", "bd", "a_cols", "a_rows", "bd_cols", "bd_rows"),
                            "gemmini_extended_compute_accumulated({a}, {bd}, {a_cols}, {a_rows}, {bd_cols}, "
                            "{bd_rows})", _ref_compute(True), uses_config=("ex",))
FENCE = _intr("fence", (), "gemmini_fence()", _noop)
BEGIN_CALL = _intr("begin_call", (), "accpy_gemmini_begin_call()", _noop,
                   doc="a kernel invocation starts: the model forgets configuration and weights")
END_CALL = _intr("end_call", (), "accpy_gemmini_end_call()", _noop)

INTRINSICS = (CONFIG_EX, CONFIG_LD, CONFIG_ST) + MVIN + (MVOUT, PRELOAD, COMPUTE_PRELOADED, COMPUTE_ACCUMULATED,
                                                        FENCE, BEGIN_CALL, END_CALL)


@dataclass(frozen=True)
class TensorIntrinsic:
    """What `Plan.tensorize` maps a sub-nest onto: C[i, j] += int32(A[i, k]) * int32(B[k, j]) over
    tiles of at most shape (i, j, k), A and B in `input_memory`, C in `output_memory`; emitted as
    preload + compute (`reference`: ref_matmul's int32 product)."""

    name: str
    shape: tuple
    input_type: ScalarType
    accumulator_type: ScalarType
    input_memory: Memory
    output_memory: Memory

    def reference(self, A, B, C):
        """The numpy result of the intrinsic on blocks A, B and accumulator block C."""
        return gm.ref_write_acc(C, gm.ref_compute(A, B, c_rows=A.shape[0], c_cols=B.shape[1]), True)


MATMUL = TensorIntrinsic("gemmini.matmul", (DIM, DIM, DIM), I8, I32, SCRATCHPAD, ACCUMULATOR)
TENSOR_INTRINSICS = {"matmul": MATMUL, MATMUL.name: MATMUL}

register(*MEMORIES, *INTRINSICS)


def call(intr: Intrinsic, *args) -> Evaluate:
    """A statement calling intrinsic `intr` (int arguments become constants)."""
    return Evaluate(Call(intr.name, tuple(a if not isinstance(a, int) else Const(a) for a in args), IDX))


def tensor_intrinsic(spec):
    """`Plan.tensorize`'s intrinsic argument: None (the matmul), its name, or MATMUL."""
    if spec is None or spec is MATMUL:
        return MATMUL
    if isinstance(spec, str) and spec.lower() in TENSOR_INTRINSICS:
        return TENSOR_INTRINSICS[spec.lower()]
    raise ValueError(f"tensorize: Gemmini has no intrinsic {spec!r}; it has {MATMUL.name!r} "
                     f"(the {DIM}x{DIM}x{DIM} int8 matmul with int32 accumulation)")


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
        """The row of the element at `indices` (cache coordinates; the last one a multiple of 16)."""
        idx = [to_affine(x) for x in indices]
        if any(a is None for a in idx):
            raise ValueError(f"{what}: the subscripts {list(indices)} of {self.buffer.name} are not affine")
        if len(self.shape) == 1:
            idx = [Affine.constant(0)] + idx
        last = idx[-1]
        if last.const % DIM or any(c % DIM for _, c in last.terms):
            raise ValueError(f"{what}: the tile starts at column {last.to_expr()} of {self.buffer.name}, which is "
                             f"not a multiple of {DIM}: Gemmini addresses whole rows of {DIM} elements")
        row = Affine({v: c // DIM for v, c in last.terms}, last.const // DIM) * self.P + self.base
        for a, s in zip(idx[:-1], self.row_strides()):
            row = row + a * s
        return row

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


def _byte_stride(buf: Buffer, dim: int):
    return idx_op("mul", buf.strides[dim], Const(buf.dtype.bits // 8))


def _check_dram(buf: Buffer, what: str) -> None:
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
        _check_dram(src, what)
        if src.dtype is not lay.memory.dtype:
            raise ValueError(f"{what}: Gemmini's {lay.memory.name} holds {lay.memory.dtype.name}; "
                             f"{src.name} is {src.dtype.name}")
    elif lay.memory is ACCUMULATOR:
        shrunk = 1  # zeros: count them as int8 (the cheap way to clear accumulator rows)
    elem_bytes = 1 if (lay.memory is SCRATCHPAD or shrunk) else 4
    # columns per mvin: several 16-column blocks (block stride P)
    t = _Tiles(lay, exts, gm.MAX_BYTES // elem_bytes, "l")
    row = lay.row_affine(t.index, what)
    stride = _byte_stride(src, n - 2) if (src is not None and n > 1) else Const(0)
    cfg = call(CONFIG_LD, stride, Const(1.0, F32), shrunk, lay.P, lay.queue)
    dram = t.dram(src, origin) if src is not None else Const(0)
    return t.loops(block(cfg, call(MVIN[lay.queue], dram, lay.address(row), t.cols, t.rows)))


def copy_out(lay: Layout, dst: Buffer, origin, exts, what: str, act=gm.NO_ACTIVATION, scale=None):
    """mvouts of the block to dst[origin + c]: raw int32 (scale None) or scaled int8 (accumulator)."""
    n = len(lay.shape)
    _check_dram(dst, what)
    raw = scale is None and lay.memory is ACCUMULATOR
    want = I32 if raw else I8
    if dst.dtype is not want:
        raise ValueError(f"{what}: a mvout from Gemmini's {lay.memory.name} writes {want.name}; {dst.name} is "
                         f"{dst.dtype.name}")
    t = _Tiles(lay, exts, DIM, "s")
    row = lay.row_affine(t.index, what)
    stride = _byte_stride(dst, n - 2) if n > 1 else Const(0)
    cfg = call(CONFIG_ST, stride, act, scale if scale is not None else Const(1.0, F32))
    return t.loops(block(cfg, call(MVOUT, t.dram(dst, origin), lay.address(row, raw=raw), t.cols, t.rows)))


# ---- the matmul tile ------------------------------------------------------------------------------------
def _strip_cast(e, dtype):
    return e.value if isinstance(e, Cast) and e.dtype is dtype else None


def _role_coef(a: Affine, v) -> int:
    return a.coef(v) if v is not None else 0


def _tile_access(lay: Layout, indices, row_var, col_var, other, what: str, name: str):
    """(origin row, row stride) of a tile of `lay` whose rows move with `row_var` and columns with
    `col_var` (both may be None: extent 1); `other` (the third role) must not appear."""
    idx = [to_affine(x) for x in indices]
    if any(a is None for a in idx):
        raise ValueError(f"{what}: the subscripts of {name} are not affine")
    if len(lay.shape) == 1:
        idx = [Affine.constant(0)] + idx
    if other is not None and any(a.coef(other) for a in idx):
        raise ValueError(f"{what}: {name} depends on {other.name}, which it must not in a matmul tile")
    last = idx[-1]
    if col_var is not None and last.coef(col_var) != 1:
        raise ValueError(f"{what}: the columns of {name} must be its last subscript with step 1 in "
                         f"{col_var.name}; got {last.to_expr()}")
    if row_var is not None and any(a.coef(row_var) for a in [last]):
        raise ValueError(f"{what}: {name}'s last subscript (its columns) moves with {row_var.name}, its row index")
    for a in idx[:-1]:
        if col_var is not None and a.coef(col_var):
            raise ValueError(f"{what}: {name}'s row subscripts move with {col_var.name}, its column index")
    stride = sum(_role_coef(a, row_var) * s for a, s in zip(idx[:-1], lay.row_strides()))
    if row_var is not None and stride <= 0:
        raise ValueError(f"{what}: the rows of {name} do not move with {row_var.name}")
    zero = {v: Affine.constant(0) for v in (row_var, col_var) if v is not None}
    origin = [a.subs(zero) for a in idx]
    row = lay.row_affine([o.to_expr() for o in (origin if len(lay.shape) > 1 else origin[1:])], what)
    return row, stride


@dataclass
class Tile:
    """One matched matmul tile: operand rows/addresses and extents (IR expressions)."""

    a: object
    b: object
    c: object
    a_stride: int
    c_stride: int
    ti: object
    tj: object
    tk: object
    b_vars: frozenset  # vars the weights (address and shape) depend on


def matmul_operands(store, what: str) -> list:
    """The two int8 loads of `C[..] += int32(A[..]) * int32(B[..])` (C int32); ValueError otherwise."""
    if store.reduce != "add":
        kind = "an assignment" if store.reduce is None else f"a `{store.reduce}` reduction"
        raise ValueError(f"{what}: the statement into {store.buffer.name} is {kind}; Gemmini's matmul accumulates "
                         f"(C[i, j] += A[i, k] * B[k, j])")
    if store.buffer.dtype is not I32:
        raise ValueError(f"{what}: the output {store.buffer.name} is {store.buffer.dtype.name}; Gemmini's matmul "
                         f"accumulates int32")
    v = store.value
    if not (isinstance(v, BinOp) and v.op == "mul" and v.dtype is I32):
        raise ValueError(f"{what}: the value added to {store.buffer.name} is not a product of two int32 values "
                         f"(int32(A[i, k]) * int32(B[k, j]))")
    ops = []
    for x in (v.a, v.b):
        inner = _strip_cast(x, I32)
        if inner is None or not isinstance(inner, Load):
            raise ValueError(f"{what}: each factor must be an int8 array element cast to int32; got a "
                             f"{type(x).__name__} of type {x.dtype.name}")
        if inner.buffer.dtype is not I8:
            raise ValueError(f"{what}: {inner.buffer.name} is {inner.buffer.dtype.name}; Gemmini's matmul reads int8 "
                             f"operands")
        ops.append(inner)
    return ops



def match_tile(loops, store, roles, layouts, what: str) -> Tile:
    """Check a sub-nest (`loops` around `store`) is C[i, j] += int32(A[i, k]) * int32(B[k, j]) with the
    operands in Gemmini's memories; returns its addresses. ValueError says what does not match."""
    i, j, k = roles
    loop_vars = {f.var for f in loops}
    for f in loops:
        if as_int(f.lo) != 0:
            raise ValueError(f"{what}: the loop of {f.var.name} starts at {f.lo}, expected 0")
    ext = {f.var: idx_op("sub", f.hi, f.lo) for f in loops}
    for v in (i, j, k):
        e = as_int(ext.get(v, Const(1)))
        if e is not None and e > DIM:
            raise ValueError(f"{what}: the loop of {v.name} runs {e} iterations; Gemmini's matmul tile is at most "
                             f"{DIM}x{DIM}x{DIM}")
    present = {v if v in loop_vars else None for v in (i, j, k)}
    i, j, k = (v if v in loop_vars else None for v in (i, j, k))
    del present
    ops = matmul_operands(store, what)

    def mentions(load, var):
        return var is not None and any(to_affine(x) is not None and to_affine(x).coef(var) for x in load.indices)

    # A: the factor that moves with i (or not with j); B the other
    if mentions(ops[1], i) or (i is None and mentions(ops[0], j)):
        ops.reverse()
    A, B = ops
    for name, load, mem in (("A", A, SCRATCHPAD), ("B", B, SCRATCHPAD), ("C", store, ACCUMULATOR)):
        buf = load.buffer
        if buf.memory != mem.name:
            where = "host memory" if buf.memory in ("global", "local") else buf.memory
            raise ValueError(f"{what}: operand {name} ({buf.name}) is in {where}; Gemmini's matmul needs it in the "
                             f"{mem.name.upper()}: cache it with location=acc.MemorySpace.{mem.name.upper()}")
    la, lb, lc = layouts[A.buffer], layouts[B.buffer], layouts[store.buffer]
    a_row, a_stride = _tile_access(la, A.indices, i, k, j, what, f"A ({A.buffer.name})")
    b_row, b_stride = _tile_access(lb, B.indices, k, j, i, what, f"B ({B.buffer.name})")
    c_row, c_stride = _tile_access(lc, store.indices, i, j, k, what, f"C ({store.buffer.name})")
    if k is not None and b_stride != 1:
        raise ValueError(f"{what}: the rows of B ({B.buffer.name}) step {b_stride} scratchpad rows per "
                         f"{k.name}; Gemmini's preload reads consecutive rows (make {k.name} move the "
                         f"second-to-last subscript of B)")
    for name, s in (("A", a_stride), ("C", c_stride)):
        if s > 0xFFFF:
            raise ValueError(f"{what}: the rows of {name} step {s} rows, more than Gemmini's 16-bit stride")
    one = Const(1)
    tk = ext[k] if k is not None else one
    tj = ext[j] if j is not None else one
    b_vars = frozenset(b_row.vars) | _free(tk) | _free(tj)
    return Tile(la.address(a_row), lb.address(b_row), lc.address(c_row, accumulate=True), a_stride or 1,
                c_stride or 1, ext[i] if i is not None else one, tj, tk, b_vars)


def _free(e) -> frozenset:
    from ..ir.visitor import free_vars

    return frozenset(free_vars(e))


def tile_calls(t: Tile, first_iteration=None):
    """preload + compute of one tile; with `first_iteration` (a condition), the weights are
    preloaded only when it holds; otherwise GARBAGE is preloaded and compute_accumulated reuses
    the weights already in the array."""
    g = Const(gm.GARBAGE_ADDR)
    cfg = call(CONFIG_EX, t.c_stride, t.a_stride)
    fresh = block(call(PRELOAD, t.b, t.c, t.tj, t.tk, t.tj, t.ti),
                  call(COMPUTE_PRELOADED, t.a, g, t.tk, t.ti, DIM, DIM))
    if first_iteration is None or (isinstance(first_iteration, Const) and first_iteration.value):
        return block(cfg, fresh)
    reuse = block(call(PRELOAD, g, t.c, t.tj, t.tk, t.tj, t.ti),
                  call(COMPUTE_ACCUMULATED, t.a, g, t.tk, t.ti, DIM, DIM))
    if isinstance(first_iteration, Const):
        return block(cfg, reuse)
    return block(cfg, If(first_iteration, fresh, reuse))


# ---- the epilogue: scaled int8 (or raw int32) mvout --------------------------------------------------
def match_output(value, layouts):
    """(load of the accumulator, scale expr or None, act) when `value` is one of
        Acc[..] (raw int32), int8(round(float32(Acc[..]) * s)), with ReLU as max(.., 0)
    around the cast or the rounded value; None if it reads no accumulator buffer."""
    act = gm.NO_ACTIVATION

    def relu_of(e):
        if isinstance(e, BinOp) and e.op == "max":
            for x, z in ((e.a, e.b), (e.b, e.a)):
                if isinstance(z, Const) and z.value == 0:
                    return x
        return None

    e = value
    x = relu_of(e)
    if x is not None:
        e, act = x, gm.RELU
    if isinstance(e, Load) and e.buffer in layouts and layouts[e.buffer].memory is ACCUMULATOR and act == gm.NO_ACTIVATION:
        return e, None, act
    if not (isinstance(e, Cast) and e.dtype is I8 and e.value.dtype is F32):
        return None
    e = e.value
    x = relu_of(e)
    if x is not None:
        e, act = x, gm.RELU
    if not (isinstance(e, Call) and e.fn == "round" and e.dtype is F32):
        return None
    e = e.args[0]
    x = relu_of(e)
    if x is not None:
        e, act = x, gm.RELU
    if not (isinstance(e, BinOp) and e.op == "mul" and e.dtype is F32):
        return None
    for a, s in ((e.a, e.b), (e.b, e.a)):
        if isinstance(a, Cast) and a.dtype is F32 and isinstance(a.value, Load) and a.value.dtype is I32:
            if isinstance(s, (Const, Var)) and s.dtype is F32:
                return a.value, s, act
    return None


def match_epilogue(loops, store, roles, layouts, what: str):
    """mvout for `loops` around `store` = f(Acc[...]) (see match_output), or None (not an epilogue)."""
    m = match_output(store.value, layouts)
    if m is None:
        return None
    load, scale, act = m
    lay = layouts[load.buffer]
    i, j = roles[0], roles[1]
    loop_vars = {f.var for f in loops}
    if any(f.var not in (i, j) for f in loops):
        raise ValueError(f"{what}: the output tile loops over {[f.var.name for f in loops]}; a mvout moves "
                         f"rows ({i.name}) x columns ({j.name})")
    i, j = (i if i in loop_vars else None), (j if j in loop_vars else None)
    ext = {f.var: idx_op("sub", f.hi, f.lo) for f in loops}
    for f in loops:
        if as_int(f.lo) != 0:
            raise ValueError(f"{what}: the loop of {f.var.name} starts at {f.lo}, expected 0")
    row, stride = _tile_access(lay, load.indices, i, j, None, what, f"{load.buffer.name}")
    if i is not None and stride != 1:
        raise ValueError(f"{what}: the rows of {load.buffer.name} step {stride} accumulator rows; a mvout reads "
                         f"consecutive rows")
    dst = store.buffer
    _check_dram(dst, what)
    want = I32 if scale is None else I8
    if dst.dtype is not want:
        raise ValueError(f"{what}: the mvout writes {want.name}; {dst.name} is {dst.dtype.name}")
    didx = [to_affine(x) for x in store.indices]
    if any(a is None for a in didx) or (j is not None and didx[-1].coef(j) != 1):
        raise ValueError(f"{what}: the columns of {dst.name} must be its last subscript with step 1")
    zero = {v: Affine.constant(0) for v in (i, j) if v is not None}
    origin = tuple(a.subs(zero).to_expr() for a in didx)
    dst_rows = [d for d, a in enumerate(didx[:-1]) if i is not None and a.coef(i)]
    if i is not None and (len(dst_rows) != 1 or didx[dst_rows[0]].coef(i) != 1):
        raise ValueError(f"{what}: the rows of {dst.name} must move one subscript with step 1")
    stride_b = _byte_stride(dst, dst_rows[0]) if dst_rows else Const(0)
    ti = ext[i] if i is not None else Const(1)
    tj = ext[j] if j is not None else Const(1)
    cfg = call(CONFIG_ST, stride_b, act, scale if scale is not None else Const(1.0, F32))
    return block(cfg, call(MVOUT, Load(dst, origin), lay.address(row, raw=scale is None), tj, ti))


def match_prologue(loops, store, roles, layouts, what: str):
    """mvin for `loops` around Acc[i, j] = X[...] (X int32 in DRAM, e.g. a bias row broadcast over i:
    DRAM stride 0), or None when `store` is not such a copy."""
    v = store.value
    lay = layouts.get(store.buffer)
    if lay is None or lay.memory is not ACCUMULATOR or store.reduce is not None or not isinstance(v, Load) \
            or v.buffer in layouts:
        return None
    src = v.buffer
    if src.dtype is not I32:
        raise ValueError(f"{what}: {src.name} is {src.dtype.name}; a mvin into the accumulator moves int32")
    _check_dram(src, what)
    loop_vars = {f.var for f in loops}
    i, j = (roles[0] if roles[0] in loop_vars else None), (roles[1] if roles[1] in loop_vars else None)
    if any(f.var not in (i, j) for f in loops) or any(as_int(f.lo) != 0 for f in loops):
        raise ValueError(f"{what}: the copy into {store.buffer.name} must loop over rows and columns only")
    ext = {f.var: idx_op("sub", f.hi, f.lo) for f in loops}
    row, stride = _tile_access(lay, store.indices, i, j, None, what, store.buffer.name)
    if i is not None and stride != 1:
        raise ValueError(f"{what}: the rows of {store.buffer.name} step {stride} accumulator rows; a mvin writes "
                         f"consecutive rows")
    sidx = [to_affine(x) for x in v.indices]
    if any(a is None for a in sidx) or (j is not None and sidx[-1].coef(j) != 1):
        raise ValueError(f"{what}: the columns of {src.name} must be its last subscript with step 1")
    rows_dims = [d for d, a in enumerate(sidx[:-1]) if i is not None and a.coef(i)]
    if len(rows_dims) > 1 or (rows_dims and sidx[rows_dims[0]].coef(i) != 1):
        raise ValueError(f"{what}: the rows of {src.name} must move one subscript with step 1 (or none: a "
                         f"broadcast row)")
    stride_b = _byte_stride(src, rows_dims[0]) if rows_dims else Const(0)
    zero = {x: Affine.constant(0) for x in (i, j) if x is not None}
    origin = tuple(a.subs(zero).to_expr() for a in sidx)
    ti = ext[i] if i is not None else Const(1)
    tj = ext[j] if j is not None else Const(1)
    cfg = call(CONFIG_LD, stride_b, Const(1.0, F32), 0, DIM, lay.queue)
    return block(cfg, call(MVIN[lay.queue], Load(src, origin), lay.address(row), tj, ti))


def wrap_function(body):
    """A kernel's Gemmini work, bracketed as one call of the model (and fenced)."""
    return block(call(BEGIN_CALL), body, call(FENCE), call(END_CALL))
