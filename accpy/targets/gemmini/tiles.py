"""The matmul tile: a tensorized sub-nest matched (operands, prologue, epilogue) and emitted as
config + preload + compute (weight reuse across tiles: reuse.py, a pass of the library); and the
call bracket around a kernel's Gemmini work."""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.affine import Affine, combination_affine, to_affine
from ...ir.expr import BinOp, Call, Cast, Const, Load, Var, as_int, idx_op
from ...ir.stmt import block
from ...ir.visitor import substitute
from . import machine as gm
from .intrinsics import (ACCUMULATOR, BEGIN_CALL, COMPUTE_PRELOADED, CONFIG_EX, CONFIG_LD,
                         CONFIG_ST, DIM, END_CALL, F32, FENCE, I8, I32, MVIN, MVOUT, PRELOAD, SCRATCHPAD, call)
from .layout import Layout, byte_stride, check_dram


# ---- the matmul tile ------------------------------------------------------------------------------------
def _strip_cast(e, dtype):
    return e.value if isinstance(e, Cast) and e.dtype is dtype else None


def _role_coef(a: Affine, v) -> int:
    return a.coef(v) if v is not None else 0


def _tile_access(lay: Layout, indices, row_var, col_var, other, what: str, name: str):
    """(origin row, row stride) of a tile of `lay` whose rows move with `row_var` and columns with
    `col_var` (both may be None: extent 1); `other` (the third role) must not appear. The rows
    are those of the leading subscripts' flat offset, so a flattened index read as
    `[x // m, x % m]` from a block m wide moves them by one (ir.affine.combination_affine)."""
    indices = list(indices)
    if len(lay.shape) == 1:
        indices = [Const(0)] + indices
    last = to_affine(indices[-1])
    lead = combination_affine(zip(indices[:-1], lay.row_strides()))
    if last is None or lead is None:
        raise ValueError(f"{what}: the subscripts of {name} are not affine (nor a flattened index [x // m, x % m] "
                         f"read from a block whose rows are m wide and start where the loops reach without a "
                         f"division, e.g. bands of whole image rows)")
    if other is not None and (last.coef(other) or lead.coef(other)):
        raise ValueError(f"{what}: {name} depends on {other.name}, which it must not in a matmul tile")
    if col_var is not None and last.coef(col_var) != 1:
        raise ValueError(f"{what}: the columns of {name} must be its last subscript with step 1 in "
                         f"{col_var.name}; got {last.to_expr()}")
    if row_var is not None and last.coef(row_var):
        raise ValueError(f"{what}: {name}'s last subscript (its columns) moves with {row_var.name}, its row index")
    if col_var is not None and lead.coef(col_var):
        raise ValueError(f"{what}: {name}'s row subscripts move with {col_var.name}, its column index")
    stride = _role_coef(lead, row_var)
    if row_var is not None and stride <= 0:
        raise ValueError(f"{what}: the rows of {name} do not move with {row_var.name}")
    zero = {v: Affine.constant(0) for v in (row_var, col_var) if v is not None}
    return lay.row_of(lead.subs(zero), last.subs(zero), what), stride


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
    return Tile(la.address(a_row), lb.address(b_row), lc.address(c_row, accumulate=True), a_stride or 1,
                c_stride or 1, ext[i] if i is not None else one, tj, tk)


def tile_calls(t: Tile):
    """config_ex + preload (the weights B, the accumulator rows C) + compute_preloaded of one tile
    (the weight-reuse pass, reuse.py, preloads once where tiles can share the weights)."""
    g = Const(gm.GARBAGE_ADDR)
    return block(call(CONFIG_EX, t.c_stride, t.a_stride), call(PRELOAD, t.b, t.c, t.tj, t.tk, t.tj, t.ti),
                 call(COMPUTE_PRELOADED, t.a, g, t.tk, t.ti, DIM, DIM))


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
    check_dram(dst, what)
    want = I32 if scale is None else I8
    if dst.dtype is not want:
        raise ValueError(f"{what}: the mvout writes {want.name}; {dst.name} is {dst.dtype.name}")
    didx = [to_affine(x) for x in store.indices]
    last = didx[-1]
    if last is None or (j is not None and last.coef(j) != 1) or (i is not None and last.coef(i)):
        raise ValueError(f"{what}: the columns of {dst.name} must be its last subscript with step 1")
    zero = {v: Affine.constant(0) for v in (i, j) if v is not None}
    if all(a is not None for a in didx):
        origin = tuple(a.subs(zero).to_expr() for a in didx)
        dst_rows = [d for d, a in enumerate(didx[:-1]) if i is not None and a.coef(i)]
        if i is not None and (len(dst_rows) != 1 or didx[dst_rows[0]].coef(i) != 1):
            raise ValueError(f"{what}: the rows of {dst.name} must move one subscript with step 1")
        stride_b = byte_stride(dst, dst_rows[0]) if dst_rows else Const(0)
    else:
        # rows of a flattened index written as [x // m, x % m]: their flat offset in the array
        # must move by a constant number of elements per row
        strides = [as_int(st) for st in dst.strides]
        flat = None if None in strides else combination_affine(zip(store.indices, strides))
        if flat is None or (j is not None and flat.coef(j) != 1) or (i is not None and flat.coef(i) <= 0):
            raise ValueError(f"{what}: the rows of {dst.name} are not at a constant distance in memory")
        origin = tuple(substitute(x, {v: Const(0) for v in zero}) for x in store.indices)
        stride_b = Const(flat.coef(i) * (dst.dtype.bits // 8)) if i is not None else Const(0)
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
    check_dram(src, what)
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
    stride_b = byte_stride(src, rows_dims[0]) if rows_dims else Const(0)
    zero = {x: Affine.constant(0) for x in (i, j) if x is not None}
    origin = tuple(a.subs(zero).to_expr() for a in sidx)
    ti = ext[i] if i is not None else Const(1)
    tj = ext[j] if j is not None else Const(1)
    cfg = call(CONFIG_LD, stride_b, Const(1.0, F32), 0, DIM, lay.queue)
    return block(cfg, call(MVIN[lay.queue], Load(src, origin), lay.address(row), tj, ti))


def wrap_function(body):
    """A kernel's Gemmini work, bracketed as one call of the model (and fenced)."""
    return block(call(BEGIN_CALL), body, call(FENCE), call(END_CALL))
