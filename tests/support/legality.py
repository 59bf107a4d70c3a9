"""Legality property tests: ordered nests, random transforms, and a brute-force judge.

`accpy/analysis/dependence.py` decides legality symbolically (z3). This module decides it
again by enumeration, independently of the solver: walk every point of the (small)
iteration space in schedule order, list every access of every real iteration, and look for
two conflicting accesses of one element that run in the opposite order from the program
(the nests in sequence, each in default order). Parallel and vector verdicts likewise.

`draw_legality_case(chooser)` builds an ordered nest (registered below as schedgen kinds
with `ordered=True`, so the order-invariant property tests never draw them) and applies
random transforms one at a time: accpy either accepts a transform or refuses it with
`ScheduleError`; a refused transform is then applied with `unsafe=True` so the walk goes
on. Every verdict is compared with the brute force; the case's final schedule (and a
parallel plan, when one was accepted) is returned for building and comparing with the
reference — "never a silent mismatch".
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import accpy as acc
from accpy.analysis.dependence import commute, statement_accesses

from . import schedgen as sg

# -----------------------------------------------------------------------------------------
# ordered nests (int32: results compare exactly)
# -----------------------------------------------------------------------------------------

SIZE = (2, 6)

sg.nest_kind("gauss_seidel", '''
A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N} + 1, {M} + 1), layout={L0})
nest = acc.Nest(shape=({N}, {M}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    A[i + 1, j + 1] = A[i, j + 1] + A[i + 1, j] * 2 - A[i + 1, j + 1]

nests, args = [nest], (A,)
schedule = nest.create_schedule()
''', "NM", (SIZE, SIZE), 1, dtypes=("int32",), ordered=True)

sg.nest_kind("anti_diagonal", '''
A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N} + 1, {M} + 1), layout={L0})
nest = acc.Nest(shape=({N}, {M}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    A[i + 1, j] = A[i, j + 1] * 3 - A[i + 1, j]

nests, args = [nest], (A,)
schedule = nest.create_schedule()
''', "NM", (SIZE, SIZE), 1, dtypes=("int32",), ordered=True)

sg.nest_kind("chain3d", '''
A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N} + 1, {M} + 1, {K} + 1), layout={L0})
nest = acc.Nest(shape=({N}, {M}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    A[i + 1, j, k + 1] = A[i, j + 1, k] + A[i + 1, j, k] * 2

nests, args = [nest], (A,)
schedule = nest.create_schedule()
''', "NMK", ((2, 4), (2, 4), (2, 4)), 1, dtypes=("int32",), ordered=True)

sg.nest_kind("running_sum", '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({N}, {M}), layout={L0})
S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N},), layout={L1})
R = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N}, {M}), layout={L2})
nest = acc.Nest(shape=({N}, {M}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    S[i] += A[i, j]
    R[i, j] = S[i] - R[i, j]

nests, args = [nest], (A, S, R)
schedule = nest.create_schedule()
''', "NM", (SIZE, SIZE), 3, dtypes=("int32",), ordered=True)

sg.nest_kind("last_write", '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({N}, {M}), layout={L0})
B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N},), layout={L1})
nest = acc.Nest(shape=({N}, {M}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    B[i] = A[i, j] + 1

nests, args = [nest], (A, B)
schedule = nest.create_schedule()
''', "NM", (SIZE, SIZE), 2, dtypes=("int32",), ordered=True)

sg.nest_kind("fused_shift_scale", '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({N}, {M}), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({N}, {M}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N}, {M}), layout={L2})
n0 = acc.Nest(shape=({N}, {M}))
i0, j0 = n0.get_indices()

@n0.iteration_logic
def _():
    C[i0, j0] += A[i0, j0]

n1 = acc.Nest(shape=({N}, {M}))
i1, j1 = n1.get_indices()

@n1.iteration_logic
def _():
    C[i1, j1] *= B[i1, j1]

nests, args = [n0, n1], (A, B, C)
schedule = acc.fuse(n0.create_schedule(), n1.create_schedule())
i, j, f = schedule.get_indices()
''', "NM", (SIZE, SIZE), 3, dtypes=("int32",), ordered=True)

sg.nest_kind("fused_matmul_relu", '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {K}), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K}, {N}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L2})
n0 = acc.Nest(shape=({M}, {N}, {K}))
i0, j0, k0 = n0.get_indices()

@n0.iteration_logic
def _():
    C[i0, j0] += A[i0, k0] * B[k0, j0]

n1 = acc.Nest(shape=({M}, {N}))
i1, j1 = n1.get_indices()

@n1.iteration_logic
def _():
    C[i1, j1] = acc.max(C[i1, j1], 0)

nests, args = [n0, n1], (A, B, C)
schedule = acc.fuse((n0.create_schedule(), n1.create_schedule()), partial=2)
i, j, f, k = schedule.get_indices()
''', "MNK", ((2, 4), (2, 4), (2, 4)), 3, dtypes=("int32",), ordered=True)

ORDERED_KINDS = sorted(k for k, v in sg.NEST_KINDS.items() if v.ordered)


# -----------------------------------------------------------------------------------------
# the brute-force judge
# -----------------------------------------------------------------------------------------

def _ev(a, env) -> int:
    return a.const + sum(c * env[v] for v, c in a.terms)


@dataclass
class Event:
    point: tuple  # the schedule's dims
    part: int
    stmt: int
    at: tuple  # nest indices
    access: object
    element: tuple

    @property
    def program_key(self):
        return (self.part, self.at, self.stmt)

    @property
    def instance(self):
        return (self.part, self.at, self.stmt)


def events(space) -> list:
    """Every access of every real iteration, in the schedule's execution order."""
    shape = [int(e) for e in space.shape()]
    per_part = []
    for p, part in enumerate(space.parts):
        per_part.append([statement_accesses(p, s, st) for s, st in enumerate(part.statements)])
    cons = [space.part_constraints(p) for p in range(len(space.parts))]
    out = []
    for point in itertools.product(*[range(n) for n in shape]):
        env = dict(zip(space.vars, point))
        for p, part in enumerate(space.parts):
            if not all(_ev(c, env) >= 0 for c in cons[p]):
                continue
            at = tuple(_ev(part.index_map[ix.var], env) for ix in part.nest.indices)
            nenv = {ix.var: v for ix, v in zip(part.nest.indices, at)}
            for s, accs in enumerate(per_part[p]):
                for a in accs:
                    out.append(Event(point, p, s, at, a, tuple(_ev(x, nenv) for x in a.indices)))
    return out


def _conflict(a, b, include_commuting=False) -> bool:
    if a.buffer is not b.buffer or not (a.writes or b.writes):
        return False
    return include_commuting or not commute(a, b)


def _by_element(evs):
    groups: dict = {}
    for n, e in enumerate(evs):
        groups.setdefault((id(e.access.buffer), e.element), []).append((n, e))
    return groups.values()


def order_verdict(space) -> bool:
    """True when the schedule's order keeps every conflicting pair in program order."""
    for group in _by_element(events(space)):
        for x in range(len(group)):
            _, e1 = group[x]
            for y in range(x + 1, len(group)):
                _, e2 = group[y]  # e1 runs before e2 in the schedule
                if e1.instance == e2.instance or not _conflict(e1.access, e2.access):
                    continue
                if e2.program_key < e1.program_key:
                    return False
    return True


def parallel_verdict(space, positions) -> bool:
    """True when no two conflicting accesses (reductions too) may run on different threads."""
    lo, hi = positions[0], positions[-1] + 1
    for group in _by_element(events(space)):
        for x in range(len(group)):
            _, e1 = group[x]
            for y in range(x + 1, len(group)):
                _, e2 = group[y]
                if not _conflict(e1.access, e2.access, include_commuting=True):
                    continue
                if e1.point[:lo] == e2.point[:lo] and e1.point[lo:hi] != e2.point[lo:hi]:
                    return False
    return True


def vector_verdict(space, a: int) -> bool:
    """True when vector execution of dim `a` (each statement: all lanes read, then all write)
    keeps every conflicting pair of different lanes in order."""
    def vkey(e):
        return e.point[a + 1:] + (e.part, e.stmt, 1 if e.access.writes else 0)

    for group in _by_element(events(space)):
        for x in range(len(group)):
            _, e1 = group[x]
            for y in range(x + 1, len(group)):
                _, e2 = group[y]  # serial order: e1 first
                if not _conflict(e1.access, e2.access):
                    continue
                if e1.point[:a] != e2.point[:a] or e1.point[a] == e2.point[a]:
                    continue
                if vkey(e2) < vkey(e1) or (e1.access.writes and e2.access.writes and vkey(e1) == vkey(e2)):
                    return False
    return True


# -----------------------------------------------------------------------------------------
# drawing cases
# -----------------------------------------------------------------------------------------

ORDER_CHANGING = ("reorder", "skew")


@dataclass
class Verdicts:
    accepted: int = 0
    refused: int = 0
    parallel_checked: int = 0
    vector_checked: int = 0
    disagreements: list = field(default_factory=list)


def _with_unsafe(step: sg.Step) -> sg.Step:
    return sg.Step(step.op, step.args, step.kwargs + (("unsafe", True),), step.results, step.target)


def draw_legality_case(ch, verdicts: Verdicts, kinds=None, max_steps=5):
    """Draw an ordered nest and transforms, checking every verdict against the brute force.

    Returns (case, legal): `case` replays the final schedule (refused steps carry
    unsafe=True) plus, sometimes, an accepted parallelize; `legal` says whether the final
    schedule keeps the program's order (so its result must equal the reference)."""
    spec = sg.draw_spec(ch, kinds or ORDERED_KINDS, layout_probability=0.2)
    state = sg.State(spec)
    legal = True
    # order-changing transforms are the interesting ones: drawn twice as often as in schedgen
    schedule_kinds = sg._weighted(["split", "tile", "pad"]) + 2 * sg._weighted(["reorder", "skew"])
    for _ in range(ch.integer(1, max_steps)):
        step = sg.STEP_KINDS[ch.choice(schedule_kinds)].draw(ch, state)
        if step is None:
            continue
        try:
            state.apply(step)
            refused = False
        except acc.ScheduleError as e:
            refused, why = True, str(e)
            state.apply(_with_unsafe(step))
        except ValueError:
            continue  # a rule of the API (e.g. an unfused index before f): not a legality verdict
        truth = order_verdict(state.schedule.space)
        if step.op in ORDER_CHANGING:
            if refused:
                verdicts.refused += 1
            else:
                verdicts.accepted += 1
            if truth == refused:
                verdicts.disagreements.append(
                    f"{spec} steps {[s.code() for s in state.steps]}: accpy "
                    f"{'refused' if refused else 'accepted'} {step.code()}, brute force says "
                    f"{'legal' if truth else 'illegal'}" + (f"\n  ({why})" if refused else ""))
        elif truth != legal:
            verdicts.disagreements.append(f"{spec} {[s.code() for s in state.steps]}: {step.code()} changed the "
                                          f"brute-force verdict from {legal} to {truth}")
        legal = truth
    # plan verdicts: a random contiguous range of parallel dims, a random vector dim
    sp = state.schedule.space
    n = len(sp.dims)
    fusing = getattr(state.schedule, "get_fusing_index", lambda: None)()
    lo = ch.integer(0, n - 1)
    hi = ch.integer(lo, min(n - 1, lo + 1))
    names = [d.name for d in sp.dims[lo:hi + 1]]
    if fusing is None or fusing.name not in names:
        from accpy.analysis.dependence import parallel_violation, vector_violation

        verdicts.parallel_checked += 1
        got = parallel_violation(sp, list(range(lo, hi + 1))) is None
        truth = parallel_verdict(sp, list(range(lo, hi + 1)))
        if got != truth:
            verdicts.disagreements.append(f"{spec} {[s.code() for s in state.steps]}: parallel {names}: accpy "
                                          f"{'accepts' if got else 'refuses'}, brute force says {truth}")
        a = ch.integer(0, n - 1)
        if fusing is None or sp.dims[a].name != fusing.name:
            verdicts.vector_checked += 1
            got_v = vector_violation(sp, a) is None
            truth_v = vector_verdict(sp, a)
            if got_v != truth_v:
                verdicts.disagreements.append(f"{spec} {[s.code() for s in state.steps]}: vector {sp.dims[a].name}: "
                                              f"accpy {'accepts' if got_v else 'refuses'}, brute force says {truth_v}")
        if got and legal and ch.chance(0.5):
            try:
                state.apply(sg.Step("parallelize", (tuple(sg.Ref(x) for x in names),), target="plan"))
            except ValueError:
                pass
    return sg.Case(spec, tuple(state.steps), ch.integer(0, 2 ** 31 - 1)), legal


def main(argv=None) -> int:
    """`cd tests && python -m support.legality N`: N more random cases, verdicts only (no builds)."""
    import logging
    import random
    import sys
    import time

    n = int((argv if argv is not None else sys.argv[1:] or ["500"])[0])
    logging.disable(logging.WARNING)  # refused steps re-applied with unsafe=True log warnings
    v, t = Verdicts(), time.perf_counter()
    for seed in range(n):
        draw_legality_case(sg.RandomChooser(random.Random(f"many-{seed}")), v)
    print(f"{n} cases: {v.accepted} order-changing transforms accepted, {v.refused} refused, {v.parallel_checked} "
          f"parallel and {v.vector_checked} vector verdicts; {len(v.disagreements)} disagreements with the brute "
          f"force ({time.perf_counter() - t:.1f} s)")
    for d in v.disagreements[:10]:
        print(d)
    return 1 if v.disagreements else 0


if __name__ == "__main__":
    raise SystemExit(main())
