"""Vectorize: turn loops marked `vectorized` into vector statements.

A marked loop's body may hold loops: the whole subtree is vectorized (as Accera does).
Its inner loops are unrolled (their trip counts must be compile-time constants), and each
statement instance of the unrolled body, in order, runs on all lanes of the marked loop.
The range is cut into chunks of the vector width; a remainder becomes one masked chunk,
so tails stay on the vector path. Within a chunk, an access whose address moves by one
element per iteration becomes a vector load/store, one that does not move becomes a
broadcast, and one that moves by another constant stride becomes a gather or scatter
(where the target's vector shape has them; elsewhere it is refused). A store whose target does not move is a
reduction across the loop (`+=`, `-=`, `*=`, or an assignment such as
`S[i] = max(S[i], A[i, j])`): it accumulates in a vector register and ends with a
horizontal reduction. Accumulations of products over adjacent narrow elements become one
dot-product instruction of the target's vector ISA (its `dot_products`, found by
vector_products.py): e.g. the int32 sums of int16 pairs (`C[i] += int32(A[i, k]) * int32(B[i, k])`,
k = 0, 1 unrolled), of uint8 x int8 quads, or the float32 sums of bfloat16 pairs (with B in grouped
order, `C[i, j] += A[i, k] * B[k, j]` over 4 unrolled k: A's quad is repeated in every lane, B's
quads are contiguous).

Guarantees afterwards: no loop of kind `vectorized` remains for element types the
target's vector library covers; the lanes compute exactly the scalar iterations (float
reductions are reassociated, as in BLAS).
"""
from __future__ import annotations

import warnings

from ..errors import ScheduleError
from ..ir.kinds import LoopKind
from ..ir.affine import cond_constraints, to_affine
from ..ir.expr import BinOp, Call, Cast, Const, Load, Select, UnOp, Var, idx_op
from ..ir.stmt import Block, For, If, Store, block
from ..ir.types import ScalarType, int_range
from ..ir.vector import (Broadcast, HReduce, VAssign, VBinOp, VCall, VCast, VDecl, VFma, VLoad, VMask, VSelect,
                         VStore, VVar)
from ..ir.visitor import Mutator, substitute
from ..ir.visitor import accesses as ir_accesses
from .lanes import MissingVectorOp, NotVectorizable, access_offset, lane_coef, subscripts_apart
from .simplify import simplify
from .unroll import unroll_subtree
from .vector_products import PRODUCT_OPS, group_products, product_kind
from .vector_shapes import shape_of_loop, vector_dtype

MAX_UNROLLED_CHUNKS = 8


def vectorize(stmt, target):
    return _Vectorize(target).visit(stmt)


class _Vectorize(Mutator):
    def __init__(self, target):
        self.target = target
        self.loop_vars: list = []  # of the loops around

    def visit_For(self, f: For):
        if f.kind != LoopKind.VECTORIZED:
            self.loop_vars.append(f.var)
            try:
                return self.generic_visit(f)
            finally:
                self.loop_vars.pop()
        # the subtree: inner loops (unrolled, vectorized or not) become statement copies
        f = For(f.var, f.lo, f.hi, simplify(unroll_subtree(f.body, f"vectorize({f.var.name})")), f.kind, f.attrs)
        stores = _straight_line_stores(f)
        stores = group_products(stores, f.var, self.target)
        dtype, isa = shape_of_loop(stores, self.target)
        if isa is None:
            what = dtype.name if dtype else "mixed element types"
            if dtype is not None and self.target.vector_isa.shape(dtype) is not None:
                what += " next to types of other widths"  # (it has lanes of its own width only)
            warnings.warn(f"vectorize({f.var.name}): no vector instructions for {what} on target "
                          f"{self.target.name}; leaving the loop to the C compiler's vectorizer", stacklevel=2)
            return For(f.var, f.lo, f.hi, f.body, LoopKind.SIMD, f.attrs)
        try:
            return _vectorize_loop(f, stores, isa, self.target, frozenset(self.loop_vars) | {f.var})
        except NotVectorizable as e:
            if not refused(stores, self.target):
                # element types of several widths, beyond what the lanes hold (e.g. int8 sums):
                # the C compiler's vectorizer, as for types without vector instructions
                warnings.warn(f"vectorize({f.var.name}): {e}; leaving the loop to the C compiler's "
                              f"vectorizer", stacklevel=2)
                return For(f.var, f.lo, f.hi, f.body, LoopKind.SIMD, f.attrs)
            raise ScheduleError(f"vectorize({f.var.name}): {e}") from None


def refused(stores, target) -> bool:
    """Whether a loop that cannot become vector code is an error (ScheduleError) rather than left to
    the C compiler's vectorizer: every type it touches is as wide, and `target` has vectors of it."""
    dtype = vector_dtype(stores)
    return dtype is not None and target.vector_isa.shape(dtype) is not None


def _straight_line_stores(f: For) -> list:
    out = []

    def walk(s, cond=None):
        if isinstance(s, Block):
            for x in s.stmts:
                walk(x, cond)
        elif isinstance(s, Store):
            out.append(s if cond is None else _masked_store(s, cond, f.var))
        elif isinstance(s, For):
            raise ScheduleError(f"vectorize({f.var.name}): the loop over {s.var.name} is inside it; "
                                f"it remains after unrolling the vectorized subtree (a compiler bug)")
        elif isinstance(s, If):
            if s.orelse is not None or cond_constraints(s.cond) is not None:
                # a guard on indices and sizes that unswitching left in place: the accesses under it
                # may lie outside their arrays elsewhere, so lanes may not compute them speculatively
                raise ScheduleError(f"vectorize({f.var.name}): its body has a condition on indices or runtime "
                                    f"sizes that could not be turned into loop bounds; it cannot be vectorized")
            # an _If on values: every lane computes the statement, and keeps the old value where the
            # condition does not hold (its accesses are in bounds for every iteration: logic_check)
            walk(s.then, s.cond if cond is None else BinOp("land", cond, s.cond, ScalarType.bool))
        else:
            raise ScheduleError(f"vectorize({f.var.name}): cannot vectorize a {type(s).__name__}")

    walk(f.body)
    return out


def _identity(op: str, t: ScalarType):
    """The value `x op identity == x` (None when there is none)."""
    import math

    if op in ("add", "sub", "or", "xor"):
        return Const(0, t)
    if op == "mul":
        return Const(1, t)
    if op in ("max", "min"):
        if t.is_float:
            return Const(-math.inf if op == "max" else math.inf, t)
        lo, hi = int_range(t)
        return Const(lo if op == "max" else hi, t)
    if op == "and" and t.is_int:
        return Const(-1 if t.is_signed else int_range(t)[1], t)
    return None


def _masked_store(s: Store, cond, lane) -> Store:
    """`if (cond) s` as one unconditional store: a reduction into an element that does not move
    with the loop adds the identity where `cond` fails; any other store writes back the element's
    own value there (a blend)."""
    t = s.buffer.dtype
    if s.reduce is not None and lane_coef(s.buffer, s.indices, lane) == 0:
        ident = _identity(s.reduce, t)
        if ident is None:
            raise ScheduleError(f"vectorize({lane.name}): a conditional `{s.reduce}=` into {s.buffer.name} "
                                f"cannot be vectorized")
        return Store(s.buffer, s.indices, Select(cond, s.value, ident), s.reduce)
    old = Load(s.buffer, s.indices)
    new = s.value if s.reduce is None else BinOp(s.reduce, old, s.value, t)
    return Store(s.buffer, s.indices, Select(cond, new, old))


_REDUCE_H = {"add": "hadd", "sub": "hadd", "mul": "hmul", "min": "hmin", "max": "hmax"}


class _Chunk:
    """Vector code for the iterations `lane = base + l` (l < lanes, or < count when masked).

    Expressions are analysed in terms of the loop variable `lane` (affine subscripts), and
    only vector addresses take `base` (which may be any index expression, e.g. the floor
    division that starts the tail of a runtime trip count).
    """

    def __init__(self, isa, lane: Var, base, count, target=None):
        self.isa = isa
        self.lane = lane
        self.base = base
        self.W = isa.lanes
        self.count = count
        self.target = target

    def shape(self, dtype):
        """The shape of W lanes of `dtype` in this loop (the loop's own, or one of as many lanes)."""
        if dtype is self.isa.dtype or self.target is None:
            return self.isa
        s = self.target.vector_isa.lane_shape(dtype, self.W)
        if s is None:
            raise NotVectorizable(f"no {self.W}-lane vectors of {dtype.name} next to the {self.isa.dtype.name} ones")
        return s

    def _need(self, op, dtype=None):
        shape = self.shape(dtype) if dtype is not None else self.isa
        if shape.template(op) is None:
            raise MissingVectorOp(op, shape.dtype, shape)

    def bcast(self, e):
        return e if getattr(e, "lanes", None) else Broadcast(e, self.W)

    def _load(self, e, dtype):
        """A load: a vector load when its address moves by one element per lane (elements
        of `dtype`), the scalar load when it does not move."""
        c = lane_coef(e.buffer, e.indices, self.lane, (self.base, self.W))
        if c == 0:
            # the address does not move, though its expression may name the loop index (terms
            # that cancel, as after a skew): the vector loop declares no such variable
            return Load(e.buffer, tuple(substitute(ix, {self.lane: self.base}) for ix in e.indices)), False
        shape = self.shape(e.buffer.dtype)
        if c != 1 and not _strided_ok(shape, "gather", c):
            raise NotVectorizable(f"{e.buffer.name} is accessed with a stride of {c} elements along the "
                                  f"loop (not contiguous; {shape.name} {shape.dtype.name} has no gathers)")
        first = tuple(substitute(ix, {self.lane: self.base}) for ix in e.indices)
        return VLoad(e.buffer, first, self.W, self.count, c), True

    def product(self, e: Call):
        """A `_Product` instruction's operands: lane l reads the group of elements g*l .. g*l + g - 1
        from the first (a moving operand) or the group at the first (a staying one, repeated)."""
        p, n = product_kind(e.fn)
        part = 0 if n == p.group else n  # a partial group: the elements past n are read as 0
        loads = []
        for x in e.args:
            first = tuple(substitute(ix, {self.lane: self.base}) for ix in x.indices)
            if lane_coef(x.buffer, x.indices, self.lane) == 0:
                loads.append(VLoad(x.buffer, first, p.group * self.W, None, 0, p.group, part))
                continue
            count = None if self.count is None else idx_op("mul", Const(p.group), self.count)
            loads.append(VLoad(x.buffer, first, p.group * self.W, count, 1, p.group, part))
        return VBinOp(p.op, loads[0], loads[1], p.acc, self.W)

    def vec(self, e):
        """(expression, varies_per_lane)."""
        if isinstance(e, Const):
            return e, False
        if isinstance(e, Var):
            if e is self.lane:
                raise NotVectorizable("the loop index is used as a value")
            return e, False
        if isinstance(e, Load):
            return self._load(e, e.buffer.dtype)
        if isinstance(e, BinOp):
            a, va = self.vec(e.a)
            b, vb = self.vec(e.b)
            if not (va or vb):
                return BinOp(e.op, a, b, e.dtype), False
            if e.op in ("lt", "le", "gt", "ge", "eq", "ne"):
                self._need("cmp_" + e.op, e.a.dtype)
                return VBinOp("cmp_" + e.op, self.bcast(a), self.bcast(b), ScalarType.bool, self.W), True
            if e.op == "add" and self.shape(e.dtype).template("fma"):
                for x, y in ((a, b), (b, a)):
                    if isinstance(x, VBinOp) and x.op == "mul":
                        return VFma(x.a, x.b, self.bcast(y), e.dtype, self.W), True
            self._need(e.op, e.dtype)
            return VBinOp(e.op, self.bcast(a), self.bcast(b), e.dtype, self.W), True
        if isinstance(e, UnOp):
            a, va = self.vec(e.a)
            if not va:
                return UnOp(e.op, a, e.dtype), False
            if e.op != "neg":
                raise MissingVectorOp(e.op, e.dtype, self.isa, f"`{e.op}` is not vectorized")
            self._need("neg", e.dtype)
            return VCall("neg", (a,), e.dtype, self.W), True
        if isinstance(e, Call) and product_kind(e.fn)[0] is not None:
            return self.product(e), True
        if isinstance(e, Call):
            args = [self.vec(x) for x in e.args]
            if not any(v for _, v in args):
                return Call(e.fn, tuple(a for a, _ in args), e.dtype), False
            if len(e.args) != 1 or self.shape(e.dtype).template(e.fn) is None:
                raise MissingVectorOp(e.fn, e.dtype, self.isa, f"`{e.fn}` has no {self.isa.name} instruction here")
            return VCall(e.fn, tuple(self.bcast(a) for a, _ in args), e.dtype, self.W), True
        if isinstance(e, Cast):
            a, va = self.vec(e.value)
            if not va:
                return Cast(a, e.dtype), False
            if e.dtype is e.value.dtype:
                return a, True
            op = "from_" + e.value.dtype.name
            if self.shape(e.dtype).template(op) is None:
                raise MissingVectorOp(op, e.dtype, self.isa,
                                      f"the conversion {e.value.dtype.name} -> {e.dtype.name} is not vectorized")
            return VCast(a, e.dtype, self.W), True
        if isinstance(e, Select):
            c, vc = self.vec(e.cond)
            a, va = self.vec(e.a)
            b, vb = self.vec(e.b)
            if not (vc or va or vb):
                return Select(c, a, b), False
            if not vc:
                c = VBinOp("cmp_ne", Broadcast(Select(c, Const(1, self.isa.dtype), Const(0, self.isa.dtype)), self.W),
                           Broadcast(Const(0, self.isa.dtype), self.W), ScalarType.bool, self.W)
            self._need("select", e.dtype)
            return VSelect(c, self.bcast(a), self.bcast(b), self.W), True
        raise NotVectorizable(f"cannot vectorize {type(e).__name__}")


def _check_lane_independence(stores, lane, span):
    """The lanes of a chunk run statement by statement, so two accesses to one buffer (one of
    them a write) may not meet in different lanes. Iterations in one chunk are fewer than
    `span` apart (the vector width, or the trip count if smaller). Accesses that move with
    the loop: the same element in the same lane, elements at least `span` apart, or two
    reductions with one operator (they commute); with a stride c (gathers / scatters), elements
    whose distance is not a multiple of c, or at least c * span. Accesses
    that do not move (reductions, after `_as_accumulation`): different elements, or the same
    element reduced by statements with the same operator; nothing else may read it.
    """
    accesses = []  # (buffer, indices, is_write, statement number, reduce)
    for k, s in enumerate(stores):
        accesses.append((s.buffer, s.indices, True, k, s.reduce))
        accesses.extend((a.buffer, a.indices, False, k, None) for a in ir_accesses(s.value))
    for x in range(len(accesses)):
        for y in range(x + 1, len(accesses)):
            bx, ix, wx, kx, rx = accesses[x]
            by, iy, wy, ky, ry = accesses[y]
            if bx is not by or not (wx or wy) or subscripts_apart(ix, iy, lane):
                continue
            cx, cy = lane_coef(bx, ix, lane), lane_coef(by, iy, lane)
            ox, oy = access_offset(bx, ix), access_offset(by, iy)
            d = (ox - oy) if ox is not None and oy is not None else None
            same = ix == iy or (d is not None and d.is_const and d.const == 0)
            apart = d is not None and d.is_const and d.const != 0
            if cx == cy and cx != 0:
                # lane l touches offset o + c*l: two accesses meet in different lanes of a chunk
                # when d = c * (lane difference) with |d| < c * span. Reductions with one operator
                # commute: each statement's vector update reads what the earlier ones wrote
                # (e.g. U[j] += a; U[j - 1] += b, unrolled copies)
                commute = wx and wy and rx is not None and (rx == ry or {rx, ry} == {"add", "sub"}) \
                    and rx != "div"
                ok = same or (apart and (d.const % cx != 0 or abs(d.const) >= abs(cx) * span)) or commute
            elif cx == cy == 0:
                ok = apart or (same and wx and wy and rx == ry and rx is not None)
            else:
                ok = False
            if not ok:
                if wx and wy and cx == cy == 0 and same and rx is None and ry is None:
                    raise NotVectorizable(f"every iteration assigns the same element of {bx.name} in two "
                                          f"statements; only reductions can be vectorized that way")
                if wx and wy and cx == cy == 0 and same:
                    raise NotVectorizable(f"two statements reduce into the same element of {bx.name} with "
                                          f"different operators ({rx or '='} and {ry or '='})")
                if wx and wy:
                    raise NotVectorizable(f"{bx.name} is written at different elements in one iteration "
                                          f"that other iterations of the loop touch")
                raise NotVectorizable(f"{bx.name} is written and read at different elements in the "
                                      f"loop, so its iterations depend on each other")


def _as_accumulation(s: Store, lane: Var):
    """`T[x] = max(T[x], e)` (or min, +, *; `T[x] - e`) as a reduction store, when the target
    does not move with the loop and `e` does not read T. Returns (store, swapped): `swapped`
    when T[x] is the right operand (`min(e, T[x])`), whose order the vector code keeps (min
    and max differ from their swapped form on NaN and signed zeros)."""
    v = s.value
    if s.reduce is not None or not isinstance(v, BinOp) or lane_coef(s.buffer, s.indices, lane) != 0:
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
    return any(not a.is_write for a in ir_accesses(e, buffer))


def _nonnegative(e, loop_vars) -> bool:
    """`e` >= 0 wherever it is evaluated, knowing only that runtime sizes are >= 0 (the vars
    not in `loop_vars`): a constant, or sums of them with positive coefficients; a min of such."""
    if isinstance(e, BinOp) and e.op in ("min", "max"):
        a, b = _nonnegative(e.a, loop_vars), _nonnegative(e.b, loop_vars)
        return (a and b) if e.op == "min" else (a or b)
    a = to_affine(e)
    return a is not None and a.const >= 0 and all(c > 0 and v not in loop_vars for v, c in a.terms)


def _vectorize_loop(f: For, stores, isa, target=None, loop_vars=frozenset()):
    lane = f.var
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
    span = min(W, trip.const) if trip is not None and trip.is_const else W
    _check_lane_independence(stores, lane, max(span, 1))
    # reductions into targets that do not move with the loop
    accs = {}
    for s in stores:
        if s.buffer.dtype is not isa.dtype and (s.reduce is not None or lane_coef(s.buffer, s.indices, lane) != 1):
            raise NotVectorizable(f"{s.buffer.name} ({s.buffer.dtype.name}) is stored from {isa.dtype.name}-wide "
                                  f"lanes: only plain contiguous stores narrow")
        if lane_coef(s.buffer, s.indices, lane) == 0:
            if s.reduce not in _REDUCE_H:
                raise NotVectorizable(f"every iteration assigns the same element of {s.buffer.name}; "
                                      f"only reductions (+=, -=, *=, max, min) can be vectorized that way")
            if isa.template(_REDUCE_H[s.reduce]) is None:
                raise MissingVectorOp(_REDUCE_H[s.reduce], isa.dtype, isa)
            accs[id(s)] = VVar(f"acc_{s.buffer.name}", isa.dtype, W)
        elif lane_coef(s.buffer, s.indices, lane) != 1 and not _strided_ok(
                isa, "scatter", lane_coef(s.buffer, s.indices, lane)):
            raise NotVectorizable(f"{s.buffer.name} is written with a stride ({isa.name} {isa.dtype.name} "
                                  f"has no scatters)")

    def chunk(base, count):
        ch = _Chunk(isa, lane, base, count, target)
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
            stride = lane_coef(s2.buffer, s2.indices, lane)
            if s2.reduce is not None:
                current = VLoad(s2.buffer, idx0, W, count, stride)
                value = _combine(s2.reduce, current, value, isa)
            out.append(VStore(s2.buffer, idx0, value, W, count, stride))
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
        if not _nonnegative(e, loop_vars):
            # a range bounded by runtime sizes may be empty with hi < lo (`for i in [N, 8)`
            # with N > 8): floor division would make a negative count and a wrong tail
            e = idx_op("max", e, Const(0))
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
        # outside the loop: its index is not declared there (the element is one for every iteration)
        fixed = tuple(substitute(ix, {lane: f.lo}) for ix in s.indices)
        target = Load(s.buffer, fixed)
        if s.reduce in ("add", "sub"):
            init.append(VAssign(acc, _splat(isa, 0)))
        elif s.reduce == "mul":
            init.append(VAssign(acc, _splat(isa, 1)))
        else:
            init.append(VAssign(acc, Broadcast(target, W)))
        h = HReduce(_REDUCE_H[s.reduce], acc)
        # min / max too combine with the element (another statement may reduce into it as well)
        final.append(Store(s.buffer, fixed, h, s.reduce))
    return VDecl(tuple(accs.values()), block(*init, *body, *final))


def _strided_ok(isa, op: str, stride: int) -> bool:
    """A gather / scatter of lanes `stride` elements apart: offsets must fit in int32."""
    return (stride != 0 and isa.template(op) is not None
            and abs(stride) * (isa.lanes - 1) < 2 ** 31)


def _splat(isa, v):
    return Broadcast(Const(v, isa.dtype), isa.lanes)


def _mask(isa, count):
    return VMask(count, isa.lanes, isa.dtype)


def _combine(op, a, b, isa):
    if isa.template(op) is None:
        raise MissingVectorOp(op, isa.dtype, isa, f"no {isa.name} instruction for `{op}=` on {isa.dtype.name}")
    if op == "add" and isinstance(b, VBinOp) and b.op == "mul" and isa.template("fma"):
        return VFma(b.a, b.b, a, isa.dtype, isa.lanes)
    if op == "add" and isinstance(b, VBinOp) and b.op in PRODUCT_OPS and PRODUCT_OPS[b.op].accumulates:
        return VFma(b.a, b.b, a, isa.dtype, isa.lanes, b.op)
    return VBinOp(op, a, b, isa.dtype, isa.lanes)


__all__ = ["vectorize", "NotVectorizable"]
