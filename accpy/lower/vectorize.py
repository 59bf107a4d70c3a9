"""Vectorize: turn loops marked `vectorized` into vector statements.

A marked loop's body must be straight-line stores (inner loops unrolled). Its range is
cut into chunks of the vector width; a remainder becomes one masked chunk, so tails stay
on the vector path. Within a chunk, an access whose address moves by one element per
iteration becomes a vector load/store, one that does not move becomes a broadcast, and
anything else is rejected (no gathers). A store whose target does not move is a
reduction across the loop (`+=`, `-=`, `*=`, or an assignment such as
`S[i] = max(S[i], A[i, j])`): it accumulates in a vector register and ends with a
horizontal reduction.

Guarantees afterwards: no loop of kind `vectorized` remains for element types the
target's vector library covers; the lanes compute exactly the scalar iterations (float
reductions are reassociated, as in BLAS).
"""
from __future__ import annotations

import warnings

from ..errors import ScheduleError
from ..ir.affine import Affine, to_affine
from ..ir.expr import BinOp, Call, Cast, Const, Load, Select, UnOp, Var, idx_op
from ..ir.stmt import Block, For, If, Store, block
from ..ir.types import ScalarType
from ..ir.vector import Broadcast, HReduce, VAssign, VBinOp, VCall, VCast, VDecl, VFma, VLoad, VSelect, VStore, VVar
from ..ir.visitor import Mutator, Visitor, substitute
from ..targets.x86 import vector_isa_for

MAX_UNROLLED_CHUNKS = 8


class NotVectorizable(Exception):
    pass


def vectorize(stmt, target):
    return _Vectorize(target).visit(stmt)


class _Vectorize(Mutator):
    def __init__(self, target):
        self.target = target

    def visit_For(self, f: For):
        if f.kind != "vectorized":
            return self.generic_visit(f)
        stores = _straight_line_stores(f)
        dtype = _vector_dtype(stores)
        isa = vector_isa_for(self.target, dtype) if dtype is not None else None
        if isa is None:
            warnings.warn(f"vectorize({f.var.name}): no vector instructions for "
                          f"{dtype.name if dtype else 'mixed element types'} on target {self.target.name}; "
                          f"leaving the loop to the C compiler's vectorizer", stacklevel=2)
            return For(f.var, f.lo, f.hi, f.body, "simd", f.attrs)
        try:
            return _vectorize_loop(f, stores, isa)
        except NotVectorizable as e:
            raise ScheduleError(f"vectorize({f.var.name}): {e}") from None


def _straight_line_stores(f: For) -> list:
    out = []

    def walk(s):
        if isinstance(s, Block):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, Store):
            out.append(s)
        elif isinstance(s, For):
            raise ScheduleError(f"vectorize({f.var.name}): the loop over {s.var.name} is inside it; "
                                f"only the innermost loop can be vectorized (unroll the inner loops)")
        elif isinstance(s, If):
            raise ScheduleError(f"vectorize({f.var.name}): its body has a condition that depends on runtime "
                                f"values; it cannot be vectorized")
        else:
            raise ScheduleError(f"vectorize({f.var.name}): cannot vectorize a {type(s).__name__}")

    walk(f.body)
    return out


def _vector_dtype(stores):
    types = set()

    class V(Visitor):
        def visit_Load(self, n):
            types.add(n.buffer.dtype)
            self.generic_visit(n)

    for s in stores:
        types.add(s.buffer.dtype)
        V().visit(s.value)
    types.discard(ScalarType.bool)
    # int32 indices converted to float32 are fine: the vector type is the stores' type
    st = {s.buffer.dtype for s in stores}
    if len(st) != 1:
        return None
    t = next(iter(st))
    if any(x.bits != t.bits for x in types if x is not t and x is not ScalarType.index):
        return None
    return t


def _lane_coef(buffer, indices, lane: Var) -> int:
    """How many elements the address moves when the loop counter moves by one."""
    total = Affine.constant(0)
    for ix, st in zip(indices, buffer.strides):
        a = to_affine(ix)
        s = to_affine(st)
        if a is None:
            raise NotVectorizable(f"the subscript of {buffer.name} is not affine")
        c = a.coef(lane)
        if c == 0:
            continue
        if s is None or not s.is_const:
            raise NotVectorizable(f"{buffer.name} has a runtime stride along the vectorized loop")
        total = total + c * s.const
    return total.const


_REDUCE_H = {"add": "hadd", "sub": "hadd", "mul": "hmul", "min": "hmin", "max": "hmax"}


class _Chunk:
    """Vector code for the iterations `lane = base + l` (l < lanes, or < count when masked).

    Expressions are analysed in terms of the loop variable `lane` (affine subscripts), and
    only vector addresses take `base` (which may be any index expression, e.g. the floor
    division that starts the tail of a runtime trip count).
    """

    def __init__(self, isa, lane: Var, base, count):
        self.isa = isa
        self.lane = lane
        self.base = base
        self.W = isa.lanes
        self.count = count

    def _need(self, op):
        if self.isa.template(op) is None:
            raise NotVectorizable(f"no {self.isa.name} instruction for `{op}` on {self.isa.dtype.name}")

    def bcast(self, e):
        return e if getattr(e, "lanes", None) else Broadcast(e, self.W)

    def _load(self, e, dtype):
        """A load: a vector load when its address moves by one element per lane (elements
        of `dtype`), the scalar load when it does not move."""
        for ix in e.indices:
            a = to_affine(ix)
            if a is None:
                raise NotVectorizable(f"the subscript of {e.buffer.name} is not affine")
        c = _lane_coef(e.buffer, e.indices, self.lane)
        if c == 0:
            return e, False
        if c != 1:
            raise NotVectorizable(f"{e.buffer.name} is accessed with a stride of {c} elements along the "
                                  f"loop (not contiguous; gathers are not generated)")
        if e.buffer.dtype is not dtype:
            raise NotVectorizable(f"{e.buffer.name} ({e.buffer.dtype.name}) is loaded in a "
                                  f"{self.isa.dtype.name} vector loop")
        first = tuple(substitute(ix, {self.lane: self.base}) for ix in e.indices)
        return VLoad(e.buffer, first, self.W, self.count), True

    def vec(self, e):
        """(expression, varies_per_lane)."""
        if isinstance(e, Const):
            return e, False
        if isinstance(e, Var):
            if e is self.lane:
                raise NotVectorizable("the loop index is used as a value")
            return e, False
        if isinstance(e, Load):
            return self._load(e, self.isa.dtype)
        if isinstance(e, BinOp):
            a, va = self.vec(e.a)
            b, vb = self.vec(e.b)
            if not (va or vb):
                return BinOp(e.op, a, b, e.dtype), False
            if e.op in ("lt", "le", "gt", "ge", "eq", "ne"):
                self._need("cmp_" + e.op)
                return VBinOp("cmp_" + e.op, self.bcast(a), self.bcast(b), ScalarType.bool, self.W), True
            if e.dtype is not self.isa.dtype:
                raise NotVectorizable(f"`{e.op}` on {e.dtype.name} inside a {self.isa.dtype.name} vector loop")
            if e.op == "add" and self.isa.template("fma"):
                for x, y in ((a, b), (b, a)):
                    if isinstance(x, VBinOp) and x.op == "mul":
                        return VFma(x.a, x.b, self.bcast(y), e.dtype, self.W), True
            self._need(e.op)
            return VBinOp(e.op, self.bcast(a), self.bcast(b), e.dtype, self.W), True
        if isinstance(e, UnOp):
            a, va = self.vec(e.a)
            if not va:
                return UnOp(e.op, a, e.dtype), False
            if e.op != "neg":
                raise NotVectorizable(f"`{e.op}` is not vectorized")
            self._need("neg")
            return VCall("neg", (a,), e.dtype, self.W), True
        if isinstance(e, Call):
            args = [self.vec(x) for x in e.args]
            if not any(v for _, v in args):
                return Call(e.fn, tuple(a for a, _ in args), e.dtype), False
            if e.fn not in ("sqrt", "abs") or self.isa.template(e.fn) is None:
                raise NotVectorizable(f"`{e.fn}` has no {self.isa.name} instruction here")
            return VCall(e.fn, tuple(self.bcast(a) for a, _ in args), e.dtype, self.W), True
        if isinstance(e, Cast):
            if (isinstance(e.value, Load) and e.value.buffer.dtype is ScalarType.int32 and e.dtype is self.isa.dtype
                    and self.isa.dtype.bits == 32 and self.isa.template("from_int32")):
                # int32 elements converted lane for lane (same lane count as the float vectors)
                a, va = self._load(e.value, ScalarType.int32)
                return (VCast(a, e.dtype, self.W), True) if va else (Cast(a, e.dtype), False)
            a, va = self.vec(e.value)
            if not va:
                return Cast(a, e.dtype), False
            if e.dtype is self.isa.dtype and e.value.dtype is ScalarType.int32 and self.isa.template("from_int32"):
                return VCast(a, e.dtype, self.W), True
            raise NotVectorizable(f"the conversion {e.value.dtype.name} -> {e.dtype.name} is not vectorized")
        if isinstance(e, Select):
            c, vc = self.vec(e.cond)
            a, va = self.vec(e.a)
            b, vb = self.vec(e.b)
            if not (vc or va or vb):
                return Select(c, a, b), False
            if not vc:
                c = VBinOp("cmp_ne", Broadcast(Select(c, Const(1, self.isa.dtype), Const(0, self.isa.dtype)), self.W),
                           Broadcast(Const(0, self.isa.dtype), self.W), ScalarType.bool, self.W)
            self._need("select")
            return VSelect(c, self.bcast(a), self.bcast(b), self.W), True
        raise NotVectorizable(f"cannot vectorize {type(e).__name__}")


def _check_lane_independence(stores, lane):
    """Lanes run at once: a written element may only be touched again at the same subscript."""
    writes = {}
    for s in stores:
        writes.setdefault(s.buffer, set()).add(s.indices)

    class V(Visitor):
        def visit_Load(self, n):
            if n.buffer in writes and any(n.indices != w for w in writes[n.buffer]):
                raise NotVectorizable(f"{n.buffer.name} is written and read at different elements in the "
                                      f"loop, so its iterations depend on each other")
            self.generic_visit(n)

    for s in stores:
        V().visit(s.value)
    for b, idxs in writes.items():
        if len(idxs) > 1:
            raise NotVectorizable(f"{b.name} is written at different elements in one iteration")


def _as_accumulation(s: Store, lane: Var):
    """`T[x] = max(T[x], e)` (or min, +, *; `T[x] - e`) as a reduction store, when the target
    does not move with the loop and `e` does not read T. Returns (store, swapped): `swapped`
    when T[x] is the right operand (`min(e, T[x])`), whose order the vector code keeps (min
    and max differ from their swapped form on NaN and signed zeros)."""
    v = s.value
    if s.reduce is not None or not isinstance(v, BinOp) or _lane_coef(s.buffer, s.indices, lane) != 0:
        return s, False
    target = Load(s.buffer, s.indices)
    ops = ("add", "mul", "min", "max", "sub") if v.a == target else ("add", "mul", "min", "max")
    if v.op not in ops or v.dtype is not s.buffer.dtype:
        return s, False
    if v.a == target:
        other, swapped = v.b, False
    elif v.b == target:
        other, swapped = v.a, v.op in ("min", "max")
    else:
        return s, False
    if _reads(other, s.buffer):
        return s, False
    return Store(s.buffer, s.indices, other, v.op), swapped


def _reads(e, buffer) -> bool:
    found = []

    class V(Visitor):
        def visit_Load(self, n):
            if n.buffer is buffer:
                found.append(n)
            self.generic_visit(n)

    V().visit(e)
    return bool(found)


def _vectorize_loop(f: For, stores, isa):
    lane = f.var
    _check_lane_independence(stores, lane)
    W = isa.lanes
    trip = to_affine(BinOp("sub", f.hi, f.lo, ScalarType.index))
    # accumulations written as assignments (`S[i] = max(S[i], A[i, j])`) are reductions too
    swapped = set()
    normalized = []
    for s in stores:
        s2, sw = _as_accumulation(s, lane)
        normalized.append(s2)
        if sw:
            swapped.add(id(s2))
    stores = normalized
    # reductions into targets that do not move with the loop
    accs = {}
    for s in stores:
        if _lane_coef(s.buffer, s.indices, lane) == 0:
            if s.reduce not in _REDUCE_H:
                raise NotVectorizable(f"every iteration assigns the same element of {s.buffer.name}; "
                                      f"only reductions (+=, -=, *=, max, min) can be vectorized that way")
            accs[id(s)] = VVar(f"acc_{s.buffer.name}", isa.dtype, W)
        elif _lane_coef(s.buffer, s.indices, lane) != 1:
            raise NotVectorizable(f"{s.buffer.name} is written with a stride (scatters are not generated)")

    def chunk(base, count):
        ch = _Chunk(isa, lane, base, count)
        out = []
        for s in stores:
            s2 = s
            value, varies = ch.vec(s2.value)
            value = ch.bcast(value)
            if id(s) in accs:
                acc = accs[id(s)]
                op = "add" if s.reduce == "sub" else s.reduce
                new = _combine(op, value, acc, isa) if id(s) in swapped else _combine(op, acc, value, isa)
                if count is not None:
                    new = VSelect(_mask(isa, count), new, acc, W)
                out.append(VAssign(acc, new))
                continue
            idx0 = tuple(substitute(ix, {lane: base}) for ix in s2.indices)
            if s2.reduce is not None:
                current = VLoad(s2.buffer, idx0, W, count)
                value = _combine(s2.reduce, current, value, isa)
            out.append(VStore(s2.buffer, idx0, value, W, count))
        return out

    body = []
    if trip is not None and trip.is_const:
        n = max(trip.const, 0)
        nfull, rem = divmod(n, W)
        if nfull <= MAX_UNROLLED_CHUNKS:
            for c in range(nfull):
                body += chunk(idx_op("add", f.lo, Const(c * W)), None)
        else:
            cv = Var(f.var.name + "_v")
            body.append(For(cv, Const(0), Const(nfull), block(*chunk(idx_op("add", f.lo, idx_op("mul", Const(W), cv)), None))))
        if rem:
            body += chunk(idx_op("add", f.lo, Const(nfull * W)), Const(rem))
    else:
        e = idx_op("sub", f.hi, f.lo)
        nfull = idx_op("floordiv", e, Const(W))
        cv = Var(f.var.name + "_v")
        body.append(For(cv, Const(0), nfull, block(*chunk(idx_op("add", f.lo, idx_op("mul", Const(W), cv)), None))))
        rem = idx_op("sub", e, idx_op("mul", Const(W), nfull))
        tail_base = idx_op("add", f.lo, idx_op("mul", Const(W), nfull))
        body.append(If(BinOp("gt", rem, Const(0), ScalarType.bool), block(*chunk(tail_base, rem))))
    if not accs:
        return block(*body)
    init, final = [], []
    for s in stores:
        if id(s) not in accs:
            continue
        acc = accs[id(s)]
        target = Load(s.buffer, s.indices)
        if s.reduce in ("add", "sub"):
            init.append(VAssign(acc, _splat(isa, 0)))
        elif s.reduce == "mul":
            init.append(VAssign(acc, _splat(isa, 1)))
        else:
            init.append(VAssign(acc, Broadcast(target, W)))
        h = HReduce(_REDUCE_H[s.reduce], acc)
        if s.reduce in ("min", "max"):
            final.append(Store(s.buffer, s.indices, h))
        else:
            final.append(Store(s.buffer, s.indices, h, "sub" if s.reduce == "sub" else s.reduce))
    return VDecl(tuple(accs.values()), block(*init, *body, *final))


def _splat(isa, v):
    return Broadcast(Const(v, isa.dtype), isa.lanes)


def _mask(isa, count):
    from ..ir.vector import VMask

    return VMask(count, isa.lanes, isa.dtype)


def _combine(op, a, b, isa):
    if op in ("and", "or", "xor", "div") and isa.template(op) is None:
        raise NotVectorizable(f"no {isa.name} instruction for `{op}=` on {isa.dtype.name}")
    if op == "add" and isinstance(b, VBinOp) and b.op == "mul" and isa.template("fma"):
        return VFma(b.a, b.b, a, isa.dtype, isa.lanes)
    return VBinOp(op, a, b, isa.dtype, isa.lanes)


__all__ = ["vectorize", "NotVectorizable"]
