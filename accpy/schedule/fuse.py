"""`acc.fuse` and `FusedSchedule`: several schedules as one iteration space.

`fuse((s0, s1, ...), partial=k)` lines up the first k dims of every schedule (the fused
dims, padded to the largest extent), adds the fusing dim `f` (extent = number of
schedules), then the unfused dims of s0, s1, ... The meaning of the result is s0's nest,
then s1's, ... each in its own order: the fused order is checked against that meaning
(see `accpy/analysis/dependence.py`), at the fuse and at every later transform.
"""
from __future__ import annotations

from typing import Optional

from ..analysis.dependence import check_order
from ..nest.recording import Recording
from ..nest.logic import Index
from .schedule import Schedule, _Handle, _is_size
from .space import IterationSpace


def fuse(schedules, *args, partial: Optional[int] = None, unsafe: bool = False) -> "FusedSchedule":
    """`fuse(s0, s1, ...)` fuses every dim (equal ranks); `fuse((s0, s1, ...), partial=k)`
    fuses the first k dims (`partial=0` concatenates the schedules)."""
    if not isinstance(schedules, Schedule) and hasattr(schedules, "__iter__"):  # list, tuple, generator, ...
        if args:
            raise ValueError("fuse: give the schedules either as a tuple or as arguments, not both")
        scheds = tuple(schedules)
    else:
        scheds = (schedules,) + tuple(args)
    for n, s in enumerate(scheds):
        if not isinstance(s, Schedule):
            raise TypeError(f"schedules[{n}]: expected an acc.Schedule, got {type(s).__name__}")
    if len(scheds) < 2:
        raise ValueError("fuse: give at least two schedules")
    for a in range(len(scheds)):
        for b in range(a + 1, len(scheds)):
            if scheds[a] is scheds[b]:
                raise ValueError(f"fuse: schedules[{a}] and schedules[{b}] are the same schedule")
    ranks = [len(s._structure()) for s in scheds]
    if partial is None:
        if len(set(ranks)) > 1:
            raise ValueError(f"fuse: full fusing needs schedules of equal rank, got ranks {ranks}; "
                             f"use fuse((s0, s1, ...), partial=k)")
        partial = ranks[0]
    if not _is_size(partial) or partial < 0:
        raise ValueError(f"partial: expected an integer >= 0, got {partial!r}")
    if any(r < partial for r in ranks):
        raise ValueError(f"partial={partial}: every schedule needs at least {partial} dimensions, got ranks {ranks}")
    return FusedSchedule(scheds, int(partial), bool(unsafe))


class FusedSchedule(Schedule):
    """A schedule over the union of several schedules' iterations (Accera's fused schedule)."""

    def __init__(self, schedules: tuple, partial: int, unsafe: bool = False):
        self._schedules = schedules
        self._partial = partial
        self._unsafe = unsafe
        first = schedules[0]._structure()
        taken = {h.index.name for s in schedules for h in s._structure()[partial:]}
        self._fused = tuple(Index(first[j].index.name) for j in range(partial))
        name = "f"
        while name in taken or name in {ix.name for ix in self._fused}:
            name = "f" + ("2" if name == "f" else str(int(name[1:]) + 1))
        self._fusing = Index(name)
        self._old = {}  # id(old handle of a fused dim) -> fused handle
        for s in schedules:
            for j, h in enumerate(s._structure()[:partial]):
                self._old[id(h.index)] = self._fused[j]
        self._nest = None
        self._commands = Recording()
        parameterized = any(s.is_parameterized for s in schedules)
        self._eager = None if parameterized else self._initial_space()

    # -- the model --------------------------------------------------------------------------
    def _initial_space(self) -> IterationSpace:
        sp = IterationSpace.fuse([s.space for s in self._schedules], self._partial, self._fused, self._fusing)
        names = ", ".join(f"s{k}" for k in range(len(self._schedules)))
        check_order(sp, f"fuse(({names}), partial={self._partial})", self._unsafe)
        return sp

    def _initial_structure(self) -> list:
        out = []
        structs = [s._structure() for s in self._schedules]

        def mapped(h):
            return None if h is None else self._old.get(id(h), h)

        for j in range(self._partial):
            out.append(_Handle(self._fused[j], mapped(structs[0][j].parent)))
        out.append(_Handle(self._fusing, None))
        for st in structs:
            out.extend(_Handle(h.index, mapped(h.parent)) for h in st[self._partial:])
        return out

    def realize(self) -> "FusedSchedule":
        """This fused schedule with the parameter values in effect (for Package.add)."""
        out = super().realize()
        if out is not self:
            out._default = self._sequential_space()
        return out

    def _sequential_space(self) -> IterationSpace:
        """The meaning of the fused schedule: each nest in default order, one after the other."""
        spaces = [s.default_schedule().space for s in self._schedules]
        return IterationSpace.fuse(spaces, 0, (), Index(self._fusing.name))

    def default_schedule(self) -> Schedule:
        """The program before fusing: the schedules one after the other, each in its default order."""
        default = getattr(self, "_default", None)
        return Schedule(None, space=default if default is not None else self._sequential_space())

    # -- Accera's queries -------------------------------------------------------------------
    def get_fused_indices(self) -> tuple:
        """The indices of the fused dimensions (the first `partial` of every schedule, merged)."""
        return self._fused

    def get_fusing_index(self) -> Index:
        """The fusing index `f`: which schedule's statements run at each fused point."""
        return self._fusing

    def get_unfused_indices(self) -> tuple:
        """The indices of every schedule's dimensions that are not fused, schedule by schedule."""
        return tuple(h.index for s in self._schedules for h in s._structure()[self._partial:])

    # -- rules of fused schedules -----------------------------------------------------------
    def _known(self, index, what="index") -> None:
        if isinstance(index, Index) and id(index) in self._old:
            raise ValueError(f"{what}: {index.name} was fused into {self._old[id(index)].name}; use the fused "
                             f"schedule's indices (schedule.get_indices())")
        super()._known(index, what)

    def _check_splittable(self, index) -> None:
        if index is self._fusing:
            raise ValueError(f"the fusing index {index.name} cannot be split")

    def _unfused_set(self, structure) -> set:
        unfused = {id(ix) for ix in self.get_unfused_indices()}
        changed = True
        while changed:  # split children of unfused indices are unfused too
            changed = False
            for h in structure:
                if h.parent is not None and id(h.parent) in unfused and id(h.index) not in unfused:
                    unfused.add(id(h.index))
                    changed = True
        return unfused

    def _extra_order_problem(self, indices, pos) -> Optional[str]:
        unfused = self._unfused_set(self._structure())
        fpos = pos[id(self._fusing)]
        for ix in indices:
            if id(ix) in unfused and pos[id(ix)] < fpos:
                return (f"Invalid order: the fusing index {self._fusing.name} must precede the unfused "
                        f"index {ix.name}")
        return None

    def __repr__(self) -> str:
        base = super().__repr__()
        return "Fused" + base
