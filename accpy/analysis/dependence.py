"""Exact dependences over the iteration-space model, decided with z3.

The *meaning* of a schedule is its nests run one after the other (the parts of a fused
space in order), each nest in its own default order: lexicographic over its indices,
statements in order inside an iteration. A schedule, a parallel loop or a vector loop is
legal when every pair of accesses that may not be swapped still runs in that order.

Accesses: each statement writes its target (a plain write, or a *reduction update* for
`+=`, `-=`, `*=`, `&=`, `|=`, `^=` and `x = max(x, e)` / `min`) and reads every other
element it loads. Two accesses *conflict* when they may touch one element and at least one
of them writes; two reduction updates of the same kind commute (float reassociation is
accepted, as in BLAS), so they conflict only where they may run at the same time (threads).

Every question is one z3 query over two instances, each a point of the schedule's box
(its own copy of the dim variables) that is real for its part; runtime sizes are shared
unknowns >= 1. A satisfying model is the counterexample the error message shows.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import ScheduleError
from ..ir.affine import Affine, to_affine
from ..ir.expr import BinOp, Load
from ..ir.types import ScalarType
from ..ir.visitor import accesses as ir_accesses, free_vars
from .logic_check import guard_formula, split_condition
from .smt import z3_affine, z3_index

log = logging.getLogger("accpy")

_REDUCE_CLASS = {"add": "add", "sub": "add", "mul": "mul", "and": "and", "or": "or", "xor": "xor"}


@dataclass(frozen=True)
class Access:
    part: int  # which part (nest) of the space
    stmt: int  # position of the statement in its part
    statement: object  # nest.logic.LogicStatement (for messages)
    buffer: object
    indices: tuple  # Affine over the nest's index vars and runtime sizes (quasi-affine: the expression)
    kind: str  # "read" | "write" | "reduce"
    op: Optional[str] = None  # commuting class of a reduction update

    @property
    def writes(self) -> bool:
        return self.kind != "read"

    def verb(self) -> str:
        return {"read": "reads", "write": "writes", "reduce": "updates"}[self.kind]


_SELF_UPDATE = {"max": "max", "min": "min", "add": "add", "mul": "mul", "and": "and", "or": "or", "xor": "xor"}


def _self_load(store):
    """For an update written as an assignment -- `x = max(x, e)` / `min`, `x = x + e` (or `e + x`,
    `x - e`), `x = x * e`, `&`, `|`, `^` -- (its commuting class, the operand that reads the target
    itself), else None: such a statement is the reduction update `x += e` spelled out."""
    v = store.value
    if not isinstance(v, BinOp):
        return None
    sides = (v.a,) if v.op == "sub" else (v.a, v.b)  # x - e updates x; e - x does not
    op = "add" if v.op == "sub" else _SELF_UPDATE.get(v.op)
    if op is None:
        return None
    for side in sides:
        if isinstance(side, Load) and side.buffer is store.buffer and side.indices == store.indices:
            return op, side
    return None


def _index(e):
    a = to_affine(e)
    return a if a is not None else e  # a quasi-affine index (// and % by constants): z3 takes it as is


def statement_accesses(part_no: int, stmt_no: int, st) -> list:
    """A statement's accesses; under an _If it still may write its target, and it reads what its
    condition loads (the condition's affine part narrows its instances: see _Instance)."""
    store = st.assign
    idx = tuple(_index(e) for e in store.indices)
    out = []
    skip = None
    if store.reduce is not None and store.reduce in _REDUCE_CLASS:
        out.append(Access(part_no, stmt_no, st, store.buffer, idx, "reduce", _REDUCE_CLASS[store.reduce]))
    elif store.reduce is not None:  # e.g. /=: a read and a write that do not commute
        out.append(Access(part_no, stmt_no, st, store.buffer, idx, "write"))
        out.append(Access(part_no, stmt_no, st, store.buffer, idx, "read"))
    else:
        sl = _self_load(store)
        if sl is not None:
            skip = sl[1]
            out.append(Access(part_no, stmt_no, st, store.buffer, idx, "reduce", sl[0]))
        else:
            out.append(Access(part_no, stmt_no, st, store.buffer, idx, "write"))

    for a in ir_accesses(store.value) + (ir_accesses(st.cond) if st.cond is not None else []):
        if a.node is not skip:
            out.append(Access(part_no, stmt_no, st, a.buffer, tuple(_index(e) for e in a.indices), "read"))
    return out


def _condition_pieces(st) -> list:
    """The index part of a statement's _If condition: disjoint conjunctions of Affine >= 0 over the
    nest's indices and runtime sizes ([[]]: none; see logic_check.split_condition)."""
    if st.cond is None:
        return [[]]

    allowed = {v for v in free_vars(st.cond) if v.dtype is ScalarType.index}
    return split_condition(st.cond, allowed)[0]


def accesses(space) -> list:
    out = []
    for p, part in enumerate(space.parts):
        for s, st in enumerate(part.statements):
            out.extend(statement_accesses(p, s, st))
    return out


def commute(a: Access, b: Access) -> bool:
    return a.kind == "reduce" and b.kind == "reduce" and a.op == b.op


# -- instances and the solver -------------------------------------------------------------------

class _Instance:
    """One access at one point of the box: z3 dim variables, nest indices, element."""

    def __init__(self, enc: "_Encoder", access: Access, tag: str, point: Optional["_Instance"] = None):
        """`point`: an instance of another access of the same statement and tag, whose point (dims,
        constraints, nest indices) this one shares: z3 terms are slow to build."""
        import z3

        space = enc.space
        part = space.parts[access.part]
        self.access = access
        if point is not None:
            self.dims, self.cons, self.nest = point.dims, point.cons, point.nest
        else:
            # named by position too: two fused nests' unfused dims may share a name
            self.dims = [z3.Int(f"{d.name}@{k}#{tag}") for k, d in enumerate(space.dims)]
            env = dict(zip(space.vars, self.dims))
            self.cons = [enc.zaff(c, env) >= 0 for c in enc.box + space.part_constraints(access.part)]
            self.nest = [enc.zaff(part.index_map[ix.var], env) for ix in part.nest.indices]
        nenv = {ix.var: e for ix, e in zip(part.nest.indices, self.nest)}
        self.element = [enc.zaff(a, nenv) for a in access.indices]
        if point is None:
            pieces = _condition_pieces(access.statement)
            if pieces != [[]]:
                self.cons.append(guard_formula(pieces, lambda c: enc.zaff(c, nenv)))

    @property
    def key(self) -> tuple:  # position in the fused sequence, then the statement
        return self.access.part, self.access.stmt


class _Encoder:
    def __init__(self, space):
        import z3

        self.z3 = z3
        self.space = space
        self.box = space.box_constraints()
        self.syms: dict = {}
        self.solver = z3.Solver()
        self.solver.set("timeout", 10000)
        self._points: dict = {}  # (part, statement, tag) -> the first _Instance built there
        self._instances: dict = {}

    def instance(self, access: Access, tag: str) -> "_Instance":
        """The `_Instance` of `access` with `tag`, built once; accesses of one statement share a point."""
        key = (id(access), tag)
        if key not in self._instances:
            at = (access.part, access.stmt, tag)
            inst = _Instance(self, access, tag, self._points.get(at))
            self._points.setdefault(at, inst)
            self._instances[key] = inst
        return self._instances[key]

    def sym(self, v):
        if v not in self.syms:
            self.syms[v] = self.z3.Int(f"{v.name}${v.uid}")
            self.solver.add(self.syms[v] >= 1)  # runtime sizes
        return self.syms[v]

    def zaff(self, a, env: dict):
        term = lambda v: env[v] if v in env else self.sym(v)  # noqa: E731
        return z3_affine(a, term) if isinstance(a, Affine) else z3_index(a, term)

    def find(self, a: Access, b: Access, relation: Callable) -> Optional["Violation"]:
        """Two instances of a and b on one element with `relation(ia, ib)`: a Violation, or None."""
        z3 = self.z3
        ia, ib = self.instance(a, "1"), self.instance(b, "2")
        if len(ia.element) != len(ib.element):
            return None
        s = self.solver
        s.push()
        try:
            s.add(*ia.cons, *ib.cons)
            s.add(*[x == y for x, y in zip(ia.element, ib.element)])
            s.add(relation(ia, ib))
            r = s.check()
            if r == z3.unknown:
                raise ScheduleError(f"could not decide whether {a.statement.describe()} and "
                                    f"{b.statement.describe()} conflict on {a.buffer.name} (solver timeout)")
            if r != z3.sat:
                return None
            m = s.model()

            def val(e):
                return m.eval(e, model_completion=True).as_long()

            space = self.space
            return Violation(
                a, b,
                tuple(val(e) for e in ia.nest), tuple(val(e) for e in ib.nest),
                tuple(val(e) for e in ia.element),
                {d.name: val(x) for d, x in zip(space.dims, ia.dims)},
                {d.name: val(x) for d, x in zip(space.dims, ib.dims)},
                {v.name: val(x) for v, x in self.syms.items()})
        finally:
            s.pop()


def lex_less(xs, ys):
    """xs < ys lexicographically (z3 terms or ints)."""
    import z3

    out = z3.BoolVal(False)
    for x, y in reversed(list(zip(xs, ys))):
        out = z3.Or(x < y, z3.And(x == y, out))
    return out


def _eq(xs, ys):
    import z3

    return z3.And(*[x == y for x, y in zip(xs, ys)]) if xs else z3.BoolVal(True)


def original_before(a: _Instance, b: _Instance):
    """a runs before b in the meaning of the program (nests in sequence, each in default order)."""
    import z3

    if a.access.part != b.access.part:
        return z3.BoolVal(a.access.part < b.access.part)
    return lex_less(a.nest + [a.access.stmt], b.nest + [b.access.stmt])


def scheduled_before(a: _Instance, b: _Instance):
    """a runs before b in the schedule's order: the box lexicographically, then part, then statement."""
    return lex_less(a.dims + list(a.key), b.dims + list(b.key))


# -- violations and their messages ----------------------------------------------------------------

@dataclass
class Violation:
    first: Access  # the access that runs first in the program's meaning
    second: Access
    first_at: tuple  # nest index values
    second_at: tuple
    element: tuple
    first_point: dict  # dim name -> value in the schedule
    second_point: dict
    sizes: dict  # runtime size name -> value

    def _who(self, acc: Access, at: tuple, space) -> str:
        nest = space.parts[acc.part].nest
        it = ", ".join(f"{ix.name}={v}" for ix, v in zip(nest.indices, at))
        where = f" of nest {acc.part}" if len(space.parts) > 1 else ""
        return f"iteration ({it}){where} ({acc.statement.describe()}) {acc.verb()} it"

    def describe(self, space, concurrent: bool = False) -> str:
        el = ", ".join(str(v) for v in self.element)
        msg = (f"{self.first.buffer.name}[{el}]: {self._who(self.first, self.first_at, space)}, and "
               f"{self._who(self.second, self.second_at, space)}")
        if concurrent:
            msg += "; both may run at the same time on different threads"
        else:
            msg += "; the program runs the first before the second, but this order runs the second first"
        if self.sizes:
            msg += " (when " + ", ".join(f"{k}={v}" for k, v in sorted(self.sizes.items())) + ")"
        return msg


def _raise_or_warn(what: str, detail: str, unsafe: bool) -> None:
    text = f"{what}: {detail}"
    if unsafe:
        log.warning("unsafe=True: building a schedule that changes the result: %s", text)
        return
    raise ScheduleError(text + ". Pass unsafe=True to build it anyway.")


# -- the checks -------------------------------------------------------------------------------------

def _pairs(accs: list, include_commuting: bool) -> list:
    out = []
    for x, a in enumerate(accs):
        for y, b in enumerate(accs):
            if a.buffer is not b.buffer or not (a.writes or b.writes):
                continue
            if not include_commuting and commute(a, b):
                continue
            out.append((x, y))
    return out


def order_violation(space) -> Optional[Violation]:
    """A pair of accesses that the schedule's order runs opposite to the program's order, or None."""
    accs = accesses(space)
    pairs = _pairs(accs, include_commuting=False)
    import z3

    return _first_violation(space, accs, pairs,
                            lambda ia, ib: z3.And(original_before(ia, ib), scheduled_before(ib, ia)))


def _first_violation(space, accs: list, pairs: list, relation) -> Optional["Violation"]:
    """The first pair (indices into accs) with two instances on one element in `relation`."""
    if not pairs:
        return None
    enc = _Encoder(space)
    for x, y in pairs:
        v = enc.find(accs[x], accs[y], relation)
        if v is not None:
            return v
    return None


def check_order(space, what: str, unsafe: bool = False) -> None:
    """Raise ScheduleError (naming two iterations and the element) if the schedule's order
    changes the program's result."""
    v = order_violation(space)
    if v is not None:
        _raise_or_warn(what, "this order changes the result: " + v.describe(space), unsafe)


def parallel_violation(space, positions: list) -> Optional[Violation]:
    """Two conflicting accesses (reduction updates included) that the parallel loops at
    `positions` (contiguous) may run on different threads at once."""
    import z3

    accs = accesses(space)
    pairs = [(x, y) for x, y in _pairs(accs, include_commuting=True) if x <= y]
    lo, hi = positions[0], positions[-1] + 1

    def rel(ia, ib):
        return z3.And(_eq(ia.dims[:lo], ib.dims[:lo]), z3.Not(_eq(ia.dims[lo:hi], ib.dims[lo:hi])))

    return _first_violation(space, accs, pairs, rel)


def check_parallel(space, positions: list, what: str, unsafe: bool = False) -> None:
    v = parallel_violation(space, positions)
    if v is not None:
        _raise_or_warn(what, "two threads would race on " + v.describe(space, concurrent=True), unsafe)


def _concurrent(positions):
    import z3

    at = sorted(positions)
    return lambda ia, ib: z3.Not(_eq([ia.dims[p] for p in at], [ib.dims[p] for p in at]))


def concurrent_violation(space, positions: list, commuting: bool = True) -> Optional[Violation]:
    """Two conflicting accesses in iterations that differ in one of the loops at `positions` (any
    of them, in any order): those loops all run at once, one iteration per unit of a grid, and
    every other loop runs inside each unit (`plan.bind`), so iterations that differ there have no
    order at all. `commuting`: whether two updates of one reduction (e.g. two `+=`) count."""
    accs = accesses(space)
    pairs = [(x, y) for x, y in _pairs(accs, include_commuting=commuting) if x <= y]
    return _first_violation(space, accs, pairs, _concurrent(positions))


def concurrent_reductions(space, positions: list) -> dict:
    """The reductions whose updates meet across the units of the loops at `positions` (they would
    have to be atomic): {buffer: (operator, element type)}."""
    accs = accesses(space)
    out = {}
    enc = _Encoder(space)
    rel = _concurrent(positions)
    for x, y in _pairs(accs, include_commuting=True):
        a, b = accs[x], accs[y]
        if x > y or not commute(a, b) or a.buffer in out:
            continue
        if enc.find(a, b, rel) is not None:
            out[a.buffer] = (a.op, a.buffer.dtype)
    return out


def check_concurrent(space, positions: list, what: str) -> None:
    """ScheduleError when the loops at `positions` may not all run at once (concurrent_violation)."""
    v = concurrent_violation(space, positions, commuting=False)
    if v is not None:
        raise ScheduleError(f"{what}: two units of the grid would race on {v.describe(space, concurrent=True)}; "
                            f"bind only loops whose iterations touch different elements (a reduction's loop "
                            f"stays unbound, inside each unit)")


def vector_violation(space, position: int) -> Optional[Violation]:
    """A dependence between lanes of the vector loop at `position`: in vector code each
    statement (of the unrolled inner loops, in order) reads for all lanes, then writes for
    all lanes; a pair whose order that reverses (or two lanes writing one element) is a
    violation. Reductions of one kind become vector accumulators, so they commute."""
    import z3

    accs = accesses(space)
    pairs = _pairs(accs, include_commuting=False)
    a = position

    def vkey(i: _Instance):
        return i.dims[a + 1:] + list(i.key) + [1 if i.access.writes else 0]

    def rel(ia, ib):
        same_vec = z3.And(_eq(ia.dims[:a], ib.dims[:a]), ia.dims[a] != ib.dims[a])
        serial = lex_less(ia.dims[a:] + list(ia.key), ib.dims[a:] + list(ib.key))
        vec_rev = lex_less(vkey(ib), vkey(ia))
        if ia.access.writes and ib.access.writes:
            vec_rev = z3.Or(vec_rev, _eq(vkey(ib), vkey(ia)))
        return z3.And(same_vec, serial, vec_rev)

    return _first_violation(space, accs, pairs, rel)


def check_vector(space, position: int, what: str, unsafe: bool = False) -> None:
    v = vector_violation(space, position)
    if v is not None:
        _raise_or_warn(what, "lanes of the vector loop depend on each other: " + v.describe(space), unsafe)
