"""What a schedule's nest computes, as a performance engineer reads it.

`Kernel.of(schedule, args)` reads the schedule's iteration space (its loops in order, each
access's subscripts over them) and the arrays' strides, and answers the questions the cost model
asks: how far apart in memory consecutive iterations of a loop put each access (`Ref.stride`),
how many operations one iteration does, and whether the nest is a *contraction*

    Out[..] += X[..] * Y[..]        (one statement; casts of the operands allowed)

with the roles a register-blocked kernel needs: `n`, the output loop that is unit-stride in the
output and in one input (`b`, the vector operand); `m`, the output loops the other input (`a`,
broadcast) also walks (the register tile's rows: the last of them); `k`, the loops the output does
not depend on (the reduction); `outer`, the other output loops. Matmul (C[i,j] += A[i,k]*B[k,j]:
n=j, m=i, k=k), batched and transposed matmuls, convolutions (O[h,w,co] += I[h+kh,w+kw,ci] *
W[kh,kw,ci,co]: n=co, m=w, outer=h, k=kh,kw,ci) and depthwise ones are contractions; a
matrix-vector product whose output is not unit-stride in any input is not (the model schedules it
as a reduction).

Nothing here changes the schedule; loops of unknown extent (runtime sizes) have `extent` None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..ir.affine import to_affine
from ..ir.expr import BinOp, Cast, Load, UnOp
from ..ir.types import ScalarType
from ..ir.visitor import accesses as ir_accesses, free_vars, substitute_indices


@dataclass(frozen=True)
class Loop:
    """One loop of the schedule, in loop order."""

    index: object  # the schedule's index handle
    name: str
    var: object  # the dim's Var
    extent: Optional[int]  # None: a runtime size


@dataclass(frozen=True)
class Ref:
    """One access of the logic: its array and, per loop, the distance in elements between the
    elements two consecutive iterations of that loop touch (None: not a constant)."""

    array: object  # the acc.Array among the function's args (None: a temporary of the logic)
    buffer: object
    kind: str  # "read" | "write" | "reduce"
    subscripts: tuple  # Affine over the loops' vars (None where not affine)
    strides: dict  # loop name -> element stride (0: the loop does not move it; None: unknown)
    itemsize: int
    indices: tuple = ()  # every subscript as an expression over the loops' vars

    @property
    def name(self) -> str:
        return self.buffer.name

    def stride(self, loop: str) -> Optional[int]:
        return self.strides.get(loop, 0)

    def uses(self, loop: str) -> bool:
        s = self.strides.get(loop, 0)
        return s is None or s != 0


@dataclass(frozen=True)
class Contraction:
    """The roles of a contraction's loops (see the module docstring); names of loops."""

    out: Ref
    a: Ref  # the broadcast operand (does not move with n; or, when both do, a second vector operand)
    b: Ref  # the vector operand (unit stride along n)
    n: str
    m: tuple  # output loops `a` walks, outer to inner (the last: the register tile's rows)
    k: tuple  # reduction loops, in loop order
    outer: tuple  # the other output loops
    dtypes: tuple  # element types of (a, b, out)


@dataclass
class Kernel:
    loops: list
    refs: list
    ops_per_point: int  # arithmetic operations of one iteration (a multiply-add counts 2)
    contraction: Optional[Contraction] = None
    parts: int = 1
    notes: list = field(default_factory=list)

    @property
    def names(self) -> list:
        return [lp.name for lp in self.loops]

    def loop(self, name: str) -> Loop:
        return next(lp for lp in self.loops if lp.name == name)

    def namer(self):
        """A function giving names for the loops a recipe's splits make: the loop's name with its
        last letter repeated (j -> jj -> jjj, as hand schedules write them), never one the
        schedule has or the function gave before."""
        taken = set(self.names)

        def fresh(base: str) -> str:
            name = base + base[-1]
            while name in taken:
                name += base[-1]
            taken.add(name)
            return name

        return fresh

    def points(self) -> Optional[int]:
        """Iterations of the whole space (None: a runtime size)."""
        n = 1
        for lp in self.loops:
            if lp.extent is None:
                return None
            n *= lp.extent
        return n

    @staticmethod
    def of(schedule, args) -> "Kernel":
        space = schedule.space
        loops = [Loop(d.index, d.name, d.var, _const(d.extent)) for d in space.dims]
        by_buffer = _arrays_by_buffer(args)
        refs, ops = [], 0
        for part in space.parts:
            for st in part.statements:
                store = st.assign
                refs.extend(_refs(store, part.index_map, loops, by_buffer))
                ops += _ops(store.value) + (1 if store.reduce else 0)
        k = Kernel(loops, refs, max(ops, 1), parts=len(space.parts))
        if len(space.parts) == 1 and len(space.parts[0].statements) == 1:
            k.contraction = _contraction(space.parts[0].statements[0].assign, k)
        return k


def _const(e) -> Optional[int]:
    a = to_affine(e)
    return a.const if a is not None and a.is_const else None


def _arrays_by_buffer(args) -> dict:
    out = {}
    for a in args or ():
        try:
            out[id(a.buffer)] = a
        except Exception:  # a Scalar, a Dimension: no buffer
            continue
    return out


def _strides_of(buffer) -> Optional[tuple]:
    out = []
    for s in buffer.strides:
        c = _const(s)
        if c is None:
            return None
        out.append(c)
    return tuple(out)


def _subscripts(indices, index_map) -> tuple:
    """(Affine subscripts over the loops' vars, None where not affine; every subscript as an
    expression over the loops' vars)."""
    affine, exprs = [], []
    for e in indices:
        a = to_affine(e)
        affine.append(a.subs(index_map) if a is not None else None)
        exprs.append(substitute_indices(e, index_map))
    return tuple(affine), tuple(exprs)


def _ref(buffer, indices, kind, index_map, loops, by_buffer) -> Ref:
    subs, exprs = _subscripts(indices, index_map)
    strides = _strides_of(buffer)
    per_loop = {}
    for lp in loops:
        # a quasi-affine subscript (// or % by a constant) that does not read the loop's var does not move
        # with it; one that does has no constant stride
        moves = [s.coef(lp.var) if s is not None else (None if lp.var in free_vars(x) else 0)
                 for s, x in zip(subs, exprs)]
        if strides is None or any(m is None for m in moves):
            per_loop[lp.name] = None if any(m is None or m for m in moves) else 0
            continue
        per_loop[lp.name] = sum(m * st for m, st in zip(moves, strides))
    return Ref(by_buffer.get(id(buffer)), buffer, kind, subs, per_loop, max(1, buffer.dtype.bits // 8), exprs)


def _refs(store, index_map, loops, by_buffer) -> list:
    kind = "reduce" if store.reduce else "write"
    out = [_ref(store.buffer, store.indices, kind, index_map, loops, by_buffer)]
    for acc in ir_accesses(store.value):
        if not acc.is_write:
            out.append(_ref(acc.buffer, acc.indices, "read", index_map, loops, by_buffer))
    return out


def _ops(e) -> int:
    if isinstance(e, BinOp):
        return 1 + _ops(e.a) + _ops(e.b)
    if isinstance(e, UnOp):
        return 1 + _ops(e.a)
    if isinstance(e, Cast):
        return _ops(e.value)
    return 0


def _operand(e) -> Optional[Load]:
    while isinstance(e, Cast):
        e = e.value
    return e if isinstance(e, Load) else None


def _factors(e) -> list:
    """The factors of a product tree (casts kept on their operand)."""
    if isinstance(e, BinOp) and e.op == "mul":
        return _factors(e.a) + _factors(e.b)
    return [e]


def _contraction(store, k: Kernel) -> Optional[Contraction]:
    if store.reduce != "add":
        return None
    loads, others = [], []
    for f in _factors(store.value):
        (loads if _operand(f) is not None else others).append(f)
    # two array operands; other factors must not vary (constants, scalars: a scaled product)
    if len(loads) != 2 or any(ir_accesses(f) or not _invariant(f) for f in others):
        return None
    out = k.refs[0]
    ins = [r for r in k.refs[1:] if r.kind == "read"]
    if len(ins) != 2:
        return None
    out_loops = [lp.name for lp in k.loops if out.uses(lp.name)]
    unit = [n for n in out_loops if out.stride(n) == 1]
    # when both operands are unit-stride along n (a depthwise convolution: a vector each), `a` is the
    # one that walks more of the output's other loops (the register tile's rows)
    walks = lambda r: sum(1 for x in out_loops if r.uses(x))  # noqa: E731
    pairs = sorted(((ins[1], ins[0]), (ins[0], ins[1])), key=lambda ba: -walks(ba[1]))
    for n in reversed(unit):
        for b, a in pairs:
            if b.stride(n) != 1 or a.stride(n) not in (0, 1):
                continue
            m = tuple(lp for lp in out_loops if lp != n and a.uses(lp))
            red = tuple(lp.name for lp in k.loops if not out.uses(lp.name))
            if not red:
                continue
            outer = tuple(lp for lp in out_loops if lp != n and lp not in m)
            return Contraction(out, a, b, n, m, red, outer, (a.buffer.dtype, b.buffer.dtype, out.buffer.dtype))
    return None


def _invariant(e) -> bool:
    """Whether `e` reads no index variable (a constant or a scalar argument)."""
    return not any(v.dtype is ScalarType.index for v in free_vars(e))
