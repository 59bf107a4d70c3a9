"""The lowered IR of a plan, vector statements included, run in Python with bounds checks."""
from __future__ import annotations

import numpy as np
from .run import OutOfBounds, OverBudget, PYTHON_LOOP_BUDGET


# -- the lowered IR (vector statements included) run in Python --------------------------------


class _Mem:
    """A buffer as bounds-checked linear memory: element (i, j, ...) is at sum(index * stride)."""

    __slots__ = ("flat", "shape", "strides", "name", "group", "panel", "panel_stride")

    def __init__(self, array, shape, strides, name, group=1, panel=1, panel_stride=0):
        self.flat = array.ravel(order="K") if array.ndim else array.reshape(1)
        if array.size and not np.shares_memory(self.flat, array):
            raise AssertionError(f"{name}: not a contiguous array")
        self.shape, self.strides, self.name = tuple(shape), tuple(strides), name
        # rows in VNNI groups / columns in panels (a cache's layout: accpy.ir.affine.element_offset)
        self.group, self.panel, self.panel_stride = group, panel, panel_stride

    @staticmethod
    def alloc(shape, strides, dtype, name, group=1, panel=1, panel_stride=0):
        size = 1
        for s in shape:
            size *= max(int(s), 0)
        return _Mem(np.zeros(size, dtype=dtype), shape, strides, name, group, panel, panel_stride)

    def _offset(self, idx):
        if isinstance(idx, _Loose):
            return self._loose_offset(idx)
        off = 0
        last = len(idx) - 1
        for k, (i, n, st) in enumerate(zip(idx, self.shape, self.strides)):
            if not 0 <= i < n:
                raise OutOfBounds(f"{self.name}{[int(x) for x in idx]} is out of bounds (shape {list(self.shape)})")
            if self.group > 1 and k == last - 1:  # row r of a group: (r // g) * stride + r % g
                off += (i // self.group) * st + i % self.group
            elif self.panel > 1 and k == last:  # column c: (c // P) * panel_stride + (c % P) * stride
                off += (i // self.panel) * self.panel_stride + (i % self.panel) * st
            else:
                off += i * st
        return off

    def _loose_offset(self, idx):
        """The linear offset of a subscript that names a counter no longer bound (see `_Loose`):
        the same for both values of the counter, and inside the buffer (a per-subscript check
        would be wrong: the subscripts only make sense summed, as the C code sums them)."""
        if self.group > 1 or self.panel > 1:
            raise NotImplementedError(f"{self.name}: subscripts naming removed loop counters in a grouped layout")
        offs = [sum(int(i) * st for i, st in zip(ix, self.strides)) for ix in (idx.at0, idx.at1)]
        if offs[0] != offs[1]:
            raise AssertionError(f"the address of {self.name}{list(idx.at0)} moves with {idx.names}, counters "
                                 f"of loops that are no longer in the lowered code")
        if not 0 <= offs[0] < self.flat.size:
            raise OutOfBounds(f"{self.name} at element offset {offs[0]} is out of bounds (size {self.flat.size})")
        return offs[0]

    def ld(self, idx):
        return self.flat[self._offset(idx)]

    def st(self, idx, v):
        self.flat[self._offset(idx)] = v

    def _lane(self, base, lane, stride=1):
        off = base + lane * stride
        if not 0 <= off < self.flat.size:
            raise OutOfBounds(f"vector lane {lane} of {self.name} at element offset {off} is out of bounds "
                              f"(size {self.flat.size})")
        return off

    def vld(self, idx, lanes, count, stride=1):
        base = self._offset(idx)
        n = lanes if count is None else count
        z = self.flat.dtype.type(0)
        return [self.flat[self._lane(base, l, stride)] if l < n else z for l in range(lanes)]

    def vst(self, idx, values, lanes, count, stride=1):
        base = self._offset(idx)
        n = lanes if count is None else count
        for l in range(n):
            self.flat[self._lane(base, l, stride)] = values[l]


class _Loose:
    """A subscript naming counters of loops that lowering removed (a vectorized loop of one
    iteration, whose counter survives in subscripts where it cancels: Y[j - k, k - i] of a Y
    of shape (8, 1) is element j - i for every k). Evaluated with the counters at 0 and at 1:
    the C code sums subscripts times strides, so only the sum has to be the same."""

    __slots__ = ("at0", "at1", "names")

    def __init__(self, at0, at1, names):
        self.at0, self.at1, self.names = at0, at1, names


def plan_ir_to_python(fn, budget: int = PYTHON_LOOP_BUDGET):
    """Like `lowered_to_python`, for lowered functions with caches and vector statements.

    Every buffer is linear memory addressed through its strides (caches have their own
    layouts), bounds-checked per subscript and per vector lane; vector operations apply
    the reference's scalar semantics lane by lane (float reductions and fma in the order
    written, so within a tolerance of the native code).
    """
    from accpy.ir import vector as V
    from accpy.ir.expr import BinOp, Buffer, Call, Cast, Const, Load, UnOp, Var
    from accpy.ir.stmt import Alloc, Block, Comment, Evaluate, For, If, Prefetch, Store
    from accpy.ir.types import ScalarType
    from accpy.ir.visitor import free_vars, substitute
    from accpy.nest import reference as R

    bound = set()
    for a in fn.args:
        if isinstance(a, Buffer):
            for x in tuple(a.shape) + tuple(a.strides):
                bound |= free_vars(x) if not isinstance(x, int) else set()
        else:
            bound.add(a)
    loose = free_vars(fn.body) - bound  # counters of loops lowering removed (see _Loose)

    class Gen(R._PyGen):
        def __init__(self):
            super().__init__()
            self.vnames: dict = {}

        def vvar(self, v):
            if v.uid not in self.vnames:
                self.vnames[v.uid] = f"vv{len(self.vnames)}_{v.name}"
            return self.vnames[v.uid]

        def lanewise(self, make, operands, dtypes):
            """`[scalar(x, y, ...) for x, y, ... in zip(vectors)]` with the reference's scalar code.
            (Lanes hold what memory holds: bfloat16 lanes its bit patterns, as the reference's Vars.)"""
            xs = [Var(f"x{k}", t) for k, t in enumerate(dtypes)]
            made = make(*xs)
            body = self.bits(made.dtype, self.expr(made))
            params = ", ".join(self.name(x) for x in xs)
            vecs = ", ".join(self.expr(o) for o in operands)
            return f"[(lambda {params}: {body})(*_z) for _z in zip({vecs})]"

        @staticmethod
        def bits(dtype, value: str) -> str:
            """A scalar value as memory holds it (bfloat16: its pattern)."""
            return f"_bf16_bits({value})" if dtype is ScalarType.bfloat16 else value

        @staticmethod
        def value(dtype, held: str) -> str:
            return f"_bf16_value({held})" if dtype is ScalarType.bfloat16 else held

        def sub(self, idx):
            named = set().union(*(free_vars(i) for i in idx)) & loose if loose and idx else set()
            if named:
                at = [self.sub(tuple(substitute(i, {v: Const(c) for v in named}) for i in idx)) for c in (0, 1)]
                return f"_Loose({at[0]}, {at[1]}, {sorted(v.name for v in named)!r})"
            return "(" + "".join(self.index(i) + ", " for i in idx) + ")"

        def expr(self, e):
            if isinstance(e, Load):
                return self.value(e.buffer.dtype, f"{self.buf(e.buffer)}.ld({self.sub(e.indices)})")
            if isinstance(e, V.VLoad):
                cnt = "None" if e.count is None else self.index(e.count)
                return f"{self.buf(e.buffer)}.vld({self.sub(e.indices)}, {e.lanes}, {cnt}, {e.stride})"
            if isinstance(e, V.Broadcast):
                return f"[{self.bits(e.value.dtype, self.expr(e.value))}] * {e.lanes}"
            if isinstance(e, V.VVar):
                return self.vvar(e)
            if isinstance(e, V.VMask):
                return f"[_l < {self.index(e.count)} for _l in range({e.lanes})]"
            if isinstance(e, V.VBinOp):
                if e.op.startswith("cmp_"):
                    return self.lanewise(lambda x, y: BinOp(e.op[4:], x, y, ScalarType.bool), (e.a, e.b),
                                         (e.a.dtype, e.b.dtype))
                return self.lanewise(lambda x, y: BinOp(e.op, x, y, e.dtype), (e.a, e.b), (e.dtype, e.dtype))
            if isinstance(e, V.VFma):
                return self.lanewise(lambda x, y, z: BinOp("add", BinOp("mul", x, y, e.dtype), z, e.dtype),
                                     (e.a, e.b, e.c), (e.dtype,) * 3)
            if isinstance(e, V.VCall):
                if e.fn == "neg":
                    return self.lanewise(lambda x: UnOp("neg", x, e.dtype), e.args, (e.dtype,))
                return self.lanewise(lambda x: Call(e.fn, (x,), e.dtype), e.args, (e.dtype,))
            if isinstance(e, V.VCast):
                return self.lanewise(lambda x: Cast(x, e.dtype), (e.value,), (e.value.dtype,))
            if isinstance(e, V.VSelect):
                return f"[(_a if _c else _b) for _c, _a, _b in zip({self.expr(e.cond)}, {self.expr(e.a)}, " \
                       f"{self.expr(e.b)})]"
            if isinstance(e, V.HReduce):
                op = {"hadd": "add", "hmul": "mul", "hmin": "min", "hmax": "max"}[e.op]
                x, y = Var("hx", e.dtype), Var("hy", e.dtype)
                body = self.bits(e.dtype, self.expr(BinOp(op, x, y, e.dtype)))
                folded = f"_fold(lambda {self.name(x)}, {self.name(y)}: {body}, {self.expr(e.value)})"
                return self.value(e.dtype, folded)
            return super().expr(e)

    g = Gen()
    lines: list = []

    def emit(s, depth):
        pad = "    " * depth
        if isinstance(s, Block):
            for x in s.stmts:
                emit(x, depth)
            if not s.stmts:
                lines.append(pad + "pass")
        elif isinstance(s, For):
            lines.append(f"{pad}for {g.name(s.var)} in _range({g.index(s.lo)}, {g.index(s.hi)}):")
            emit(s.body, depth + 1)
        elif isinstance(s, If):
            lines.append(f"{pad}if {g.expr(s.cond)}:")
            emit(s.then, depth + 1)
            if s.orelse is not None:
                lines.append(f"{pad}else:")
                emit(s.orelse, depth + 1)
        elif isinstance(s, Store):
            value = s.value if s.reduce is None else BinOp(s.reduce, Load(s.buffer, s.indices), s.value,
                                                              s.buffer.dtype)
            lines.append(f"{pad}{g.buf(s.buffer)}.st({g.sub(s.indices)}, {g.bits(s.buffer.dtype, g.expr(value))})")
        elif isinstance(s, Alloc):
            shape = ", ".join(g.index(x) for x in s.buffer.shape)
            strides = ", ".join(g.index(x) for x in s.buffer.strides)
            b = s.buffer
            lines.append(f"{pad}{g.buf(b)} = _Mem.alloc(({shape},), ({strides},), "
                         f"np.{b.dtype.dtype.name}, {b.name!r}, {b.group}, {b.panel}, {b.panel_stride})")
            emit(s.body, depth)
        elif isinstance(s, V.VDecl):
            for v in s.vars:
                lines.append(f"{pad}{g.vvar(v)} = None")
            emit(s.body, depth)
        elif isinstance(s, V.VAssign):
            lines.append(f"{pad}{g.vvar(s.var)} = {g.expr(s.value)}")
        elif isinstance(s, V.VStore):
            cnt = "None" if s.count is None else g.index(s.count)
            lines.append(f"{pad}{g.buf(s.buffer)}.vst({g.sub(s.indices)}, {g.expr(s.value)}, {s.lanes}, {cnt}, "
                         f"{s.stride})")
        elif isinstance(s, Comment):
            lines.append(f"{pad}pass  # {s.text}")
        elif isinstance(s, Prefetch):  # (changes no value)
            lines.append(f"{pad}pass")
        elif isinstance(s, Evaluate):
            lines.append(f"{pad}{g.expr(s.value)}")
        else:
            raise NotImplementedError(f"plan_ir_to_python: {type(s).__name__}")

    emit(fn.body, 1)
    head = ["def _run(args):"]
    arrays = []
    for n, a in enumerate(fn.args):
        if isinstance(a, Buffer):
            arrays.append((n, a))
        else:
            head.append(f"    {g.name(a)} = args[{n}]")
    for n, a in arrays:  # shapes and strides may use the runtime sizes
        shape = ", ".join(g.index(x) for x in a.shape)
        strides = ", ".join(g.index(x) for x in a.strides)
        head.append(f"    {g.buf(a)} = _Mem(args[{n}], ({shape}{',' if a.shape else ''}), "
                    f"({strides}{',' if a.strides else ''}), {a.name!r})")
    src = "\n".join(head + lines + ["    return None"])
    ns = dict(R._HELPERS)
    ns["_Mem"] = _Mem
    ns["_Loose"] = _Loose
    spent = [0]

    def _range(lo, hi):
        spent[0] += max(hi - lo, 0)
        if spent[0] > budget:
            raise OverBudget(f"the lowered loops run more than {budget} iterations in Python")
        return range(lo, hi)

    def _fold(f, xs):
        acc_ = xs[0]
        for x in xs[1:]:
            acc_ = f(acc_, x)
        return acc_

    ns["_range"] = _range
    ns["_fold"] = _fold
    ns["np"] = np
    ns.update(g.consts)
    ns.update(g.types)
    exec(compile(src, "<lowered plan ir>", "exec"), ns)
    run = ns["_run"]
    run.source = src
    return run
