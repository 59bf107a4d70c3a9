"""Copies into caches in grouped order (`Array.Layout.grouped()`) or in panels of columns (`panel_width`):
the loops that fill them in their memory order, so that the C compiler vectorizes the interleaving
of rows and each row of the source is read in order."""
from __future__ import annotations

from ..ir.expr import BinOp, Const, Var, as_int, idx_op
from ..ir.kinds import LoopKind
from ..ir.stmt import For, If, Store, block
from ..ir.types import ScalarType


def grouped_copy(info, exts, body, copy_nest, starts=None):
    """A copy into a grouped or paneled cache (`info`: lower/cache.py's _CacheInfo; a group of
    one row where not grouped): per group of rows, per column, the group's rows
    (consecutive elements, one statement each); in a cache of column panels, per group of rows,
    per panel, its columns (each row of the source read in order, each panel row written whole).
    Rows past the block, up to a whole block of `block_rows`, are zeros (a last partial group
    included): an instruction reading a whole block past the data meets only zeros along the
    rows (the reduction). `body(indices)` is the Store of one element,
    `copy_nest(exts, make_body, small, starts, simd)` lower/cache.py's loops over a block."""
    g, R = info.group, info.block_rows
    rows = exts[-2]
    n_rows = as_int(rows)

    def up(m):
        if n_rows is not None:
            return Const(-(-n_rows // m) * m // g)
        return idx_op("mul", idx_op("floordiv", idx_op("add", rows, Const(m - 1)), Const(m)), Const(m // g))

    def grouped(vs, zeros=False):
        *lead, kq, c = vs
        out = []
        for q in range(g):
            r = idx_op("add", idx_op("mul", kq, Const(g)), Const(q))
            s = body(lead + [r, c])
            zero = Store(s.buffer, s.indices, Const(0, s.buffer.dtype))  # (a multicache's panel too)
            if zeros:
                out.append(zero)
                continue
            out.append(s if g == 1 or (n_rows is not None and n_rows % g == 0) else
                       If(BinOp("lt", r, rows, ScalarType.bool), s, zero))
        return block(*out)

    # (in grouped order the rows start at a group boundary; a group of one row may start anywhere)
    starts = list(starts[:-2]) + [starts[-2] if g == 1 else Const(0), starts[-1]] if starts else None
    # the columns are independent (the cache is not the source): the C compiler vectorizes the
    # interleaving, which it does not dare on its own (byte pointers may alias)
    panels = info.panel > 1 and (starts is None or as_int(starts[-1]) == 0)

    def nest(exts_, make, starts_):
        if panels:
            return _panel_copy(info, exts_, starts_, make)
        return copy_nest(exts_, make, False, starts_, simd=True)

    copy = nest(list(exts[:-2]) + [up(g), exts[-1]], grouped, starts)
    if R == g:
        return copy
    pad_starts = list(starts[:-2]) + [up(g), starts[-1]] if starts else \
        [Const(0)] * (len(exts) - 2) + [up(g), Const(0)]
    pad = nest(list(exts[:-2]) + [up(R), exts[-1]], lambda vs: grouped(vs, zeros=True), pad_starts)
    return block(copy, pad)


def _panel_copy(info, exts, starts, grouped):
    """Loops (lead dims, group rows, panels, a panel's columns) over columns 0 .. exts[-1]: the
    whole panels, then the last one's columns; a column is P * panel + c (P: the panel width),
    which codegen folds into the panel's offset (the loops bound c to [0, P))."""
    P = info.panel
    name = info.source.name
    vs = [Var(f"{name}_c{k}") for k in range(len(exts) - 1)]
    p, c = Var(f"{name}_p"), Var(f"{name}_c{len(exts) - 1}")
    cols = exts[-1]
    n_cols = as_int(cols)
    whole = Const(n_cols // P) if n_cols is not None else idx_op("floordiv", cols, Const(P))
    rest = Const(n_cols % P) if n_cols is not None else idx_op("mod", cols, Const(P))
    at = lambda first, v: grouped(vs + [idx_op("add", first, v)])  # noqa: E731
    inner = [For(p, Const(0), whole, For(c, Const(0), Const(P), at(idx_op("mul", p, Const(P)), c), LoopKind.SIMD))]
    last = Var(f"{name}_c{len(exts) - 1}")
    if n_cols is not None and n_cols % P:
        inner.append(For(last, Const(0), rest, at(Const(n_cols // P * P), last), LoopKind.SIMD))
    elif n_cols is None:
        # the last panel's columns: a loop over the panel (constant bounds, so that its offsets
        # fold), those past the block guarded
        q = Var(f"{name}_q")
        keep = If(BinOp("lt", last, rest, ScalarType.bool), at(idx_op("mul", q, Const(P)), last))
        inner.append(For(q, whole, idx_op("add", whole, Const(1)), For(last, Const(0), Const(P), keep)))
    nest = block(*inner)
    for k in reversed(range(len(vs))):
        nest = For(vs[k], starts[k] if starts else Const(0), exts[k], nest)
    return nest
