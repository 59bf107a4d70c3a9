"""Exact dependence directions and distances over a schedule's dims (the polyhedral first step).

`dependences(space)` lists every dependence of a schedule: an ordered pair of accesses
(source, sink) on one buffer, at least one of them writing, with two instances that touch one
element and where the source's instance runs first in the program's meaning
(`dependence.original_before`). For each dim of the space, in the space's loop order, it gives
the exact set of signs the sink's dim value minus the source's takes over all such pairs of
instances, and that difference when it is one constant. Signs are over the *schedule's* dims,
so they describe a split, skewed or fused schedule as well as the default one.

Guarantees: everything is decided by z3 through dependence.py's `_Encoder` / `_Instance` (runtime
sizes are unknowns >= 1, quasi-affine subscripts with `//` and `%` by constants are exact); a
sign is listed only if a pair of instances realizes it, and every sign a pair realizes is listed.
A solver timeout raises ScheduleError naming the two statements. Speed: one solver serves a
whole call, each statement's constraints and each statement pair's ordering are built as z3 terms
once, a sign already seen in a model is not asked again, and dims pinned to constants in both
parts (the fusing dim, other parts' unfused dims) are not asked at all. Dims of one name (fused
nests that both call an unfused index `j`) are renamed apart first: `_Instance` names its z3
variables by dim name.

`refine(space, deps, positions)` restricts dependences to the pairs of instances equal on some
dims: what is left of them inside one iteration of those loops (a band's members, say).
`combined_signs(space, deps, coefs)` gives the signs of a weighted sum of the differences: what
a skew would make of them, without building the skewed schedule.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Optional

from ..errors import ScheduleError
from ..ir.affine import Affine
from ..ir.expr import Var
from ..ir.types import ScalarType
from .dependence import Access, _Encoder, _Instance, _pairs, accesses, commute, original_before

SIGNS = ("-", "0", "+")


@dataclass(frozen=True)
class Dependence:
    """One dependence of a schedule: `sink`'s instances must stay after `source`'s."""

    source: Access  # the access that runs first in the program's meaning
    sink: Access  # the one that runs second (may be the same access: a self-dependence)
    kind: str  # "flow" (write then read), "anti" (read then write), "output" (write then write)
    commuting: bool  # two updates of one commuting reduction: order free, simultaneity not
    signs: tuple  # per dim: frozenset of "-", "0", "+" that (sink's value - source's) takes
    distance: tuple  # per dim: the int when that difference is one constant, else None

    def describe(self, space) -> str:
        """One line, e.g. "A: flow S0 -> S1, distance (1, -1)"; a non-constant entry shows its sign
        ("+" or "-") or "*" when it takes several."""
        names = statement_names(space)
        entries = []
        for sg, d in zip(self.signs, self.distance):
            entries.append(str(d) if d is not None else (next(iter(sg)) if len(sg) == 1 else "*"))
        text = (f"{self.source.buffer.name}: {self.kind} {names[self.source.part, self.source.stmt]} -> "
                f"{names[self.sink.part, self.sink.stmt]}, distance ({', '.join(entries)})")
        return text + (" (commuting)" if self.commuting else "")

    def carried_at(self, position: int) -> bool:
        """Whether some pair of instances differs at dim `position`."""
        return self.signs[position] != frozenset("0")


def statement_names(space) -> dict:
    """(part, statement) -> "S<n>", numbering the statements of all parts in program order."""
    out, n = {}, 0
    for p, part in enumerate(space.parts):
        for s in range(len(part.statements)):
            out[p, s] = f"S{n}"
            n += 1
    return out


def _kind(a: Access, b: Access) -> str:
    if a.writes and b.writes:
        return "output"
    return "flow" if a.writes else "anti"


def _sign(v: int) -> str:
    return "-" if v < 0 else ("+" if v > 0 else "0")


def _pinned(space) -> list:
    """Per part: {dim position: the constant the dim always takes there} (from `d - c >= 0` and
    `c - d >= 0` among the part's constraints, e.g. the fusing dim and other parts' unfused dims)."""
    out = []
    pos = {d.var: k for k, d in enumerate(space.dims)}
    for p in range(len(space.parts)):
        lower, upper = {}, {}
        for c in space.box_constraints() + space.part_constraints(p):
            if not isinstance(c, Affine) or len(c.terms) != 1:
                continue
            (v, coef), = c.terms
            if v in pos and coef == 1:
                lower[pos[v]] = max(lower.get(pos[v], -c.const), -c.const)
            elif v in pos and coef == -1:
                upper[pos[v]] = min(upper.get(pos[v], c.const), c.const)
        out.append({k: lo for k, lo in lower.items() if upper.get(k) == lo})
    return out


def _distinct_names(space):
    """The space with dims of one name renamed apart (fused nests may each have a `j`): `_Instance`
    names its z3 variables by dim name, so two dims of one name would be one variable."""
    seen, mapping, dims = set(), {}, list(space.dims)
    for k, d in enumerate(space.dims):
        name = d.name
        while name in seen:
            name += "'"
        seen.add(name)
        if name != d.name:
            var = Var(name, ScalarType.index)
            mapping[d.var] = Affine.var(var)
            dims[k] = dataclasses.replace(d, var=var)
    if not mapping:
        return space
    return dataclasses.replace(space.substitute(mapping), dims=tuple(dims))


class _Analyzer:
    """One solver and cached instances for the dependences of one space."""

    def __init__(self, space):
        space = _distinct_names(space)
        self.space = space
        self.enc = _Encoder(space)
        self.z3 = self.enc.z3
        self.pinned = _pinned(space)
        self._inst: dict = {}
        self._stmt: dict = {}
        self._bases: dict = {}

    def instance(self, access: Access, tag: str) -> _Instance:
        """The `_Instance` of an access; the accesses of one statement share its point and
        constraints (built once: z3 terms are slow to build), each with its own element."""
        key = (id(access), tag)
        if key not in self._inst:
            first = self._stmt.get((access.part, access.stmt, tag))
            if first is None:
                inst = _Instance(self.enc, access, tag)
                self._stmt[access.part, access.stmt, tag] = inst
            else:
                inst = copy.copy(first)
                inst.access = access
                part = self.space.parts[access.part]
                nenv = {ix.var: e for ix, e in zip(part.nest.indices, first.nest)}
                inst.element = [self.enc.zaff(a, nenv) for a in access.indices]
            self._inst[key] = (inst, access)  # keeps the access alive: its id() stays its own
        return self._inst[key][0]

    def _check(self, a: Access, b: Access) -> bool:
        r = self.enc.solver.check()
        if r == self.z3.unknown:
            raise ScheduleError(f"could not decide the dependence of {a.statement.describe()} and "
                                f"{b.statement.describe()} on {a.buffer.name} (solver timeout)")
        return r == self.z3.sat

    def _base(self, ia: _Instance, ib: _Instance):
        """Both instances real and the first before the second in the program: one z3 term per pair
        of statements (built once), and the dims' differences."""
        key = (ia.access.part, ia.access.stmt, ib.access.part, ib.access.stmt)
        if key not in self._bases:
            z3 = self.z3
            term = z3.And(*ia.cons, *ib.cons, original_before(ia, ib))
            self._bases[key] = (term, [y - x for x, y in zip(ia.dims, ib.dims)])
        return self._bases[key]

    def _assert_pair(self, a: Access, b: Access, equal: tuple):
        """Push the solver and assert a dependence from a to b (equal at `equal`); the instances,
        or None (nothing pushed) when their elements have different ranks."""
        ia, ib = self.instance(a, "1"), self.instance(b, "2")
        if len(ia.element) != len(ib.element):
            return None
        base, diffs = self._base(ia, ib)
        s = self.enc.solver
        s.push()
        s.add(base, *[x == y for x, y in zip(ia.element, ib.element)], *[diffs[k] == 0 for k in equal])
        return ia, ib, diffs

    def dependence(self, a: Access, b: Access, equal: tuple = ()) -> Optional[Dependence]:
        """The dependence from a to b over pairs of instances equal at dims `equal`, or None."""
        pushed = self._assert_pair(a, b, equal)
        if pushed is None:
            return None
        try:
            if not self._check(a, b):
                return None
            return self._directions(a, b, pushed, set(equal))
        finally:
            self.enc.solver.pop()

    def combined(self, a: Access, b: Access, coefs: dict, equal: tuple) -> frozenset:
        """The signs of sum(coefs[k] * (b's dim k - a's)) over the dependence's pairs equal at `equal`."""
        pushed = self._assert_pair(a, b, equal)
        if pushed is None:
            return frozenset()
        s, out = self.enc.solver, set()
        term = sum(c * pushed[2][k] for k, c in coefs.items())
        try:
            for sg in SIGNS:
                s.push()
                s.add(term < 0 if sg == "-" else (term > 0 if sg == "+" else term == 0))
                if self._check(a, b):
                    out.add(sg)
                s.pop()
        finally:
            s.pop()
        return frozenset(out)

    def _directions(self, a, b, pushed, equal: set) -> Dependence:
        """Signs and distances of a satisfiable dependence (the solver holds its constraints)."""
        ia, ib, diffs = pushed
        s, n = self.enc.solver, len(ia.dims)
        signs = [set() for _ in range(n)]
        values = [set() for _ in range(n)]
        pa, pb = self.pinned[a.part], self.pinned[b.part]
        fixed = {k: pb[k] - pa[k] for k in range(n) if k in pa and k in pb}
        fixed.update({k: 0 for k in equal})

        def harvest():
            m = s.model()
            for k in range(n):
                v = (m.eval(ib.dims[k], model_completion=True).as_long()
                     - m.eval(ia.dims[k], model_completion=True).as_long())
                signs[k].add(_sign(v))
                values[k].add(v)

        harvest()
        for k in range(n):
            if k in fixed:
                continue
            for sg in SIGNS:
                if sg in signs[k]:
                    continue
                s.push()
                s.add(diffs[k] < 0 if sg == "-" else (diffs[k] > 0 if sg == "+" else diffs[k] == 0))
                if self._check(a, b):
                    harvest()
                s.pop()
        distance = []
        for k in range(n):
            if k in fixed:
                distance.append(fixed[k])
            elif len(values[k]) > 1:
                distance.append(None)
            else:
                v = next(iter(values[k]))
                s.push()
                s.add(diffs[k] != v)
                distance.append(None if self._check(a, b) else v)
                s.pop()
        final = tuple(frozenset({_sign(fixed[k])}) if k in fixed else frozenset(signs[k]) for k in range(n))
        return Dependence(a, b, _kind(a, b), commute(a, b), final, tuple(distance))


def combined_signs(space, deps: list, coefs: dict, positions=()) -> list:
    """Per dependence: the signs sum(coefs[k] * (sink's dim k - source's)) takes over its pairs of
    instances equal at dims `positions` (an empty set when no pair is left). Asks what a skew
    d' = d + f*t would do to the distances along d: coefs {d: 1, t: f}."""
    an, out = _Analyzer(space), []
    for d in deps:
        out.append(an.combined(d.source, d.sink, coefs, tuple(positions)))
    return out


def dependences(space, include_commuting: bool = True) -> list:
    """Every dependence of the schedule's space (see the module docstring), in access-pair order;
    `include_commuting=False` leaves out pairs of updates of one commuting reduction."""
    accs = accesses(space)
    pairs = _pairs(accs, include_commuting)
    if not pairs:
        return []
    an = _Analyzer(space)
    out = []
    for x, y in pairs:
        d = an.dependence(accs[x], accs[y])
        if d is not None:
            out.append(d)
    return out


def refine(space, deps: list, positions) -> list:
    """Each dependence restricted to its pairs of instances equal at dims `positions`; those left
    with no such pair are dropped. Without a solver call, a dependence whose signs there are all
    {"0"} is kept as is and one without "0" at one of them is dropped."""
    positions = tuple(sorted(set(positions)))
    out, an = [], None
    for d in deps:
        if any(d.distance[k] not in (None, 0) or "0" not in d.signs[k] for k in positions):
            continue
        if all(d.signs[k] == frozenset("0") for k in positions):
            out.append(d)
            continue
        an = an or _Analyzer(space)
        r = an.dependence(d.source, d.sink, positions)
        if r is not None:
            out.append(r)
    return out
