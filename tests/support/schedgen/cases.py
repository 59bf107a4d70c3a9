"""`Case` and its live `State`; the choosers (hypothesis or seeded random) and the drawers of
schedule steps; drawing whole cases."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from hypothesis import strategies as st

import accpy as acc
from accpy.testing import choices
from .steps import Mapping, Ref, Step
from .nests import LAYOUTS, NEST_KINDS, NestSpec, order_invariant_kinds


# -----------------------------------------------------------------------------------------
# cases
# -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    nest: NestSpec
    steps: tuple = ()
    seed: int = 0

    def step_code(self) -> str:
        lines, planned = [], False
        for s in self.steps:
            if s.target == "plan" and not planned:
                lines.append("plan = schedule.create_plan()")
                planned = True
            planned = planned or "plan" in s.results  # e.g. plan = schedule.create_plan(target)
            lines.append(s.code())
        return "\n".join(lines)

    def script(self) -> str:
        """A stand-alone script replaying this case (run it from the repository root)."""
        has_plan = any(s.target == "plan" for s in self.steps)
        return "\n".join([
            "import sys; sys.path.insert(0, 'tests')",
            "import numpy as np",
            "import accpy as acc",
            "from accpy.nest.reference import evaluate",
            "from support.schedgen import call_arguments",
            "",
            self.nest.source(),
            self.step_code() or "# (no transforms)",
            "" if has_plan else "plan = schedule.create_plan()",
            "print(schedule.to_python(unswitched=True))",
            "pkg = acc.Package()",
            "pkg.add(plan, args=args, base_name='f')",
            "lib = pkg.build('repro', output_dir='repro_build', python_module=False)",
            f"got = call_arguments(args, {self.seed}, globals().get('values'))",
            "want = [x.copy() if isinstance(x, np.ndarray) else x for x in got]",
            "evaluate(nests, dict(zip(args, want)))",
            "lib.f(*got)",
            "for a, g, w in zip(args, got, want):",
            "    if isinstance(g, np.ndarray):",
            "        print(a.name, 'OK' if np.allclose(g, w, rtol=1e-4, atol=1e-4) else f'MISMATCH\\n{g}\\n{w}')",
        ])

    def describe(self) -> str:
        steps = "; ".join(s.code() for s in self.steps) or "(no transforms)"
        return f"{self.nest} seed={self.seed}: {steps}"


class State:
    """The live namespace of a case being realized: schedule, plan, arrays, indices."""

    def __init__(self, case_or_spec):
        spec = case_or_spec.nest if isinstance(case_or_spec, Case) else case_or_spec
        self.spec = spec
        self.ns: dict = {"acc": acc, "np": np}
        self.ns["__name__"] = "schedgen_case"
        _exec(spec.source(), f"<schedgen {spec.kind}>", self.ns)
        self.steps: list = []

    # -- views of the current schedule -----------------------------------------------------------
    @property
    def schedule(self):
        return self.ns["schedule"]

    @property
    def plan(self):
        if "plan" not in self.ns:
            self.ns["plan"] = self.schedule.create_plan()
        return self.ns["plan"]

    @property
    def args(self) -> tuple:
        return tuple(self.ns["args"])

    @property
    def nests(self) -> list:
        return list(self.ns["nests"])

    @property
    def values(self) -> dict:
        """Sizes of the runtime dimensions (the template's `values`, if any)."""
        return dict(self.ns.get("values", {}))

    def dims(self) -> list:
        """(name, extent, parent name or None) of each schedule index, in loop order."""
        sp = self.schedule.space
        out = []
        for d, ext in zip(sp.dims, self.schedule.get_shape()):
            out.append((d.name, int(ext) if isinstance(ext, (int, np.integer)) else None,
                        d.parent.name if d.parent is not None else None))
        return out

    def names(self) -> list:
        return [n for n, _, _ in self.dims()]

    def extent(self, name) -> int:
        for n, e, _ in self.dims():
            if n == name:
                return e
        raise KeyError(name)

    def fresh(self, name: str, also_taken=()) -> str:
        """A new index name derived from `name`: i -> i1, i1 -> i2, ..."""
        root = name.rstrip("0123456789")
        taken = set(self.ns) | set(also_taken)
        n = 1
        while f"{root}{n}" in taken:
            n += 1
        return f"{root}{n}"

    # -- applying steps ------------------------------------------------------------------------
    def apply(self, step: Step) -> None:
        if step.target == "plan":
            self.plan  # noqa: B018 - create it once the schedule is final
        _exec(step.code(), "<schedgen step>", self.ns)
        self.steps.append(step)


def _exec(src: str, filename: str, ns: dict) -> None:
    """exec with the source registered in linecache, so accpy's messages quote the line."""
    import linecache

    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compile(src, filename, "exec"), ns)


def realize(case: Case) -> State:
    """Build the case's nest and apply its steps (raises what accpy raises)."""
    s = State(case)
    for step in case.steps:
        s.apply(step)
    s.plan  # noqa: B018
    return s


# -- choosers: accpy.testing's (one generator, two sources of choices) --------------------------------

Chooser, HypothesisChooser, RandomChooser = choices.Chooser, choices.HypothesisChooser, choices.RandomChooser


# -- step kinds ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepKind:
    name: str
    weight: int
    stage: str  # "schedule" | "plan"
    draw: Callable  # (Chooser, State) -> Step | None (None: not applicable now)


STEP_KINDS: dict = {}


def step_kind(name: str, weight: int = 1, stage: str = "schedule"):
    """Register a drawer `(chooser, state) -> Step | None` for a transform."""

    def deco(fn):
        STEP_KINDS[name] = StepKind(name, weight, stage, fn)
        return fn

    return deco


def repair_order(perm, parents: dict) -> list:
    """accpy.testing's repair_order over names (`parents`: name -> parent name or None)."""
    return choices.repair_order(perm, parents.get)


def _transform_step(state, kind: str, ch) -> Optional[Step]:
    """accpy.testing's drawer (`choices.draw_transform`) over the case's index names, its
    transform recorded as a replayable Step (new indices named by the step)."""
    dims = state.dims()
    parents = {n: p for n, _, p in dims}
    t = choices.draw_transform(ch, kind, [n for n, _, _ in dims], state.extent, parents.get)
    if t is None:
        return None
    op, *args = t
    if op == "split":
        ix, size = args
        return Step("split", (Ref(ix), size), results=(state.fresh(ix),))
    if op == "tile":
        items, results = [], []
        for ix, size in args[0]:
            items.append((Ref(ix), size))
            results.append(state.fresh(ix, also_taken=results))
        return Step("tile", (Mapping(items),), results=tuple(results))
    if op == "reorder":
        return Step("reorder", tuple(Ref(x) for x in args[0]))
    if op == "skew":
        a, b, small = args
        return Step("skew", (Ref(a), Ref(b)), (("unroll_loops_smaller_than", small),) if small else ())
    ix, size = args
    return Step("pad", (Ref(ix), size))


for _kind in choices.TRANSFORM_WEIGHTS:
    step_kind(_kind, weight=choices.TRANSFORM_WEIGHTS[_kind])(
        lambda ch, state, _kind=_kind: _transform_step(state, _kind, ch))


# -- drawing whole cases --------------------------------------------------------------------


def draw_spec(ch: Chooser, kinds=None, dtypes=None, layout_probability=0.3) -> NestSpec:
    kind = NEST_KINDS[ch.choice(sorted(kinds or order_invariant_kinds()))]
    sizes = tuple(ch.integer(lo, hi) for lo, hi in kind.sizes)
    dtype = ch.choice([d for d in kind.dtypes if dtypes is None or d in dtypes])
    layouts = ()
    if ch.chance(layout_probability):
        layouts = tuple(ch.choice(LAYOUTS) for _ in range(kind.n_arrays))
    return NestSpec(kind.name, sizes, dtype, layouts)


def _weighted(names):
    out = []
    for n in names:
        out += [n] * STEP_KINDS[n].weight
    return out


def draw_case(ch: Chooser, kinds=None, dtypes=None, max_steps=6, step_kinds=None, plan_steps=0,
              spec: Optional[NestSpec] = None) -> Case:
    """A random nest (or `spec`), 0..max_steps schedule steps, then `plan_steps` plan steps."""
    spec = spec if spec is not None else draw_spec(ch, kinds, dtypes)
    state = State(spec)
    names = list(step_kinds or STEP_KINDS)
    sched = _weighted([n for n in names if STEP_KINDS[n].stage == "schedule"])
    plan = _weighted([n for n in names if STEP_KINDS[n].stage == "plan"])
    for pool, count in ((sched, ch.integer(0, max_steps)), (plan, plan_steps)):
        for _ in range(count if pool else 0):
            step = STEP_KINDS[ch.choice(pool)].draw(ch, state)
            if step is not None:
                state.apply(step)
    return Case(spec, tuple(state.steps), ch.integer(0, 2 ** 31 - 1))


@st.composite
def cases(draw, **kw):
    """Hypothesis strategy of `Case`s (keyword arguments as for `draw_case`)."""
    return draw_case(HypothesisChooser(draw), **kw)


def random_cases(rng, n: int, exclude=(), **kw) -> list:
    """`n` distinct cases drawn with `random.Random` `rng`, none of them in `exclude`."""
    ch = RandomChooser(rng)
    out, seen = [], set(exclude)
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        c = draw_case(ch, **kw)
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out
