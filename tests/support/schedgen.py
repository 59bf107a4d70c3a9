"""Random nests + random schedules, built natively and checked against the reference.

The unit of work is a `Case`: a nest (`NestSpec`: a kind from `NEST_KINDS`, its sizes,
element type and array layouts), a list of transform `Step`s, and a seed for the input
data. Everything in a case is plain data, so a failing case prints as a short Python
script that replays it exactly (`Case.script()`), and cases hash/compare by value.

How a case runs (`realize`): the nest kind's *template* (Python source using the public
API, the same text the replay script shows) is executed in a fresh namespace; then each
step is rendered to one line of Python (`Step.code()`, e.g. `i1 = schedule.split(i, 4)`)
and executed in that namespace. New indices are named by the step (the Python variable
receives the index, and accpy names indices after the variable), so names in printed
loops, C code and replay scripts all agree.

How cases are drawn (`draw_case(chooser)`): pick a nest kind and its sizes, then
repeatedly pick a step kind by weight and let its *drawer* (`STEP_KINDS`) choose the
step's arguments from the live schedule (`State`: current indices, extents, split
parents), applying each step as soon as it is drawn so that the next one sees the result.
Every choice goes through a `Chooser`: `cases()` is the hypothesis strategy
(`HypothesisChooser`: boundary-biased, shrinkable); `random_cases(random.Random(seed), n)`
draws n distinct cases from a seeded generator (`RandomChooser`), which is how a test
gets hundreds of different cases out of a few hypothesis examples.

Running many cases cheaply (`check_cases`): all cases of a batch go into one
`acc.Package` (gcc runs once), each one is called on seeded random inputs and compared
with `accpy.nest.reference.evaluate` (exact for integers, a tolerance for floats). Before
the native call, the lowered loop IR runs in Python with bounds-checked arrays
(`lowered_to_python`): an out-of-bounds access is reported as such instead of corrupting
or crashing the test process, and a lowering bug (both disagree with the reference) is
told from a C-emission bug (only C disagrees). Runs over `PYTHON_LOOP_BUDGET` loop
iterations skip that check (`BatchReport.notes`). Each case is lowered alone first
(timed: `BatchReport.lower_seconds`), so an exception names its case, and a compile
error is attributed by rebuilding the batch's cases one by one. Nests with runtime
sizes (`kinds_with(True)`) pass their `values` as the acc.Dimension arguments.
`minimize(case, dir)` greedily simplifies a failing case (drop steps, smaller sizes and
arguments) for a regression test.

Extending it
  * a new nest: write a template (see `_MATMUL`) and register it with `nest_kind(...)`,
    giving the (lo, hi) range of each size; the template must define `nests` (run in
    order by the reference), `args` (the function's arguments, in order) and `schedule`.
  * a fused case: a template defining several nests and their schedules (`s0`, `s1`);
    steps on them are `Step(..., target="s0")`, and the fusion itself is a step too:
    `Step("fuse", (Ref("s0"), Ref("s1")), results=("schedule",), target="acc")`.
  * a new transform: write a drawer `(chooser, state) -> Step | None` and register it
    with `step_kind(name, weight, stage)`; `stage="plan"` steps run on `plan` (made from
    the schedule once the schedule steps are done), e.g. `Step("vectorize",
    (Ref("i1"),), target="plan")`. `draw_case` draws plan steps in a second phase
    (`plan_steps=` says how many).
  * an extra check on each run: `check_cases(..., extra_checks=[fn(realized, inputs,
    outputs) -> message or None])`.

Random plans (unroll, vectorize, caches, parallelize) on top of random schedules: see the
section "random PLANS" at the end (`draw_plan_case`, `random_plan_cases`, `plan_cases`,
`check_plan_cases`, `plan_ir_to_python`), used by tests/test_property_plans.py.
"""
from __future__ import annotations

import dataclasses
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
from hypothesis import strategies as st

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.testing.asserts import first_difference
from accpy.testing.strategies import value_for

# -----------------------------------------------------------------------------------------
# step data
# -----------------------------------------------------------------------------------------


class Ref(str):
    """A reference to a variable of the case's namespace (an index, an array): prints bare."""

    def __repr__(self) -> str:
        return str(self)


class Mapping(tuple):
    """An ordered {key: value} argument (e.g. tile's shape) kept hashable; prints as a dict."""

    def __new__(cls, items):
        return super().__new__(cls, tuple((k, v) for k, v in items))

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self) + "}"


@dataclass(frozen=True)
class Step:
    """One call on the schedule (or plan): `results = target.op(*args, **kwargs)`."""

    op: str
    args: tuple = ()
    kwargs: tuple = ()  # ((name, value), ...)
    results: tuple = ()  # names bound to the result (new indices)
    target: str = "schedule"  # the namespace variable the method is called on

    def code(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        call = f"{self.target}.{self.op}({', '.join(parts)})"
        if not self.results:
            return call
        lhs = ", ".join(self.results) + ("," if len(self.results) == 1 and self.op == "tile" else "")
        return f"{lhs} = {call}"

    def __str__(self) -> str:
        return self.code()


# -----------------------------------------------------------------------------------------
# nests
# -----------------------------------------------------------------------------------------

LAYOUTS = ("FIRST_MAJOR", "LAST_MAJOR")


@dataclass(frozen=True)
class NestKind:
    name: str
    template: str  # Python source; placeholders {T} (element type), {L0}, {L1}, ... (layouts), sizes
    size_names: tuple  # placeholders of the template filled by the sizes
    sizes: tuple  # (lo, hi) inclusive range of each size
    n_arrays: int
    dtypes: tuple = ("int32", "float32")
    runtime_sizes: bool = False  # extents are acc.Dimensions (the template defines `values`)
    ordered: bool = False  # not order-invariant: transforms may be refused (tests/support/legality.py)


NEST_KINDS: dict = {}


def nest_kind(name, template, size_names, sizes, n_arrays, dtypes=("int32", "float32"),
              runtime_sizes=False, ordered=False) -> NestKind:
    kind = NestKind(name, template.strip("\n"), tuple(size_names), sizes, n_arrays, tuple(dtypes), runtime_sizes,
                    ordered)
    NEST_KINDS[name] = kind
    return kind


def kinds_with(runtime_sizes: bool) -> list:
    return sorted(k for k, v in NEST_KINDS.items() if v.runtime_sizes == runtime_sizes and not v.ordered)


def order_invariant_kinds() -> list:
    """The kinds drawn by default: every schedule of them is legal."""
    return sorted(k for k, v in NEST_KINDS.items() if not v.ordered)


@dataclass(frozen=True)
class NestSpec:
    kind: str
    sizes: tuple
    dtype: str = "int32"
    layouts: tuple = ()  # one of LAYOUTS per array; () means all FIRST_MAJOR

    def source(self) -> str:
        k = NEST_KINDS[self.kind]
        lay = self.layouts or ("FIRST_MAJOR",) * k.n_arrays
        fields = dict(zip(k.size_names, self.sizes))
        fields["T"] = f"acc.ScalarType.{self.dtype}"
        for n, lo in enumerate(lay):
            fields[f"L{n}"] = f"acc.Array.Layout.{lo}"
        return k.template.format(**fields)

    def __str__(self) -> str:
        sizes = ", ".join(f"{n}={s}" for n, s in zip(NEST_KINDS[self.kind].size_names, self.sizes))
        lay = "" if not self.layouts or set(self.layouts) == {"FIRST_MAJOR"} else \
            " layouts=" + "/".join("F" if x == "FIRST_MAJOR" else "L" for x in self.layouts)
        return f"{self.kind}({sizes}) {self.dtype}{lay}"


EXTENT = (1, 13)  # includes 1, primes, and sizes that nothing divides
SMALL = (1, 5)

_MATMUL = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {K}), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K}, {N}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L2})
nest = acc.Nest(shape=({M}, {N}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] += A[i, k] * B[k, j]

nests, args = [nest], (A, B, C)
schedule = nest.create_schedule()
'''
nest_kind("matmul", _MATMUL, "MNK", (EXTENT, EXTENT, EXTENT), 3)

_CONV1D = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({N} + {K} - 1,), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K},), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N},), layout={L2})
nest = acc.Nest(shape=({N}, {K}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    C[i] += A[i + j] * B[j]

nests, args = [nest], (A, B, C)
schedule = nest.create_schedule()
'''
nest_kind("conv1d", _CONV1D, "NK", (EXTENT, EXTENT), 3)

_CONV2D = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({H} + {R} - 1, {W} + {S} - 1), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({R}, {S}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({H}, {W}), layout={L2})
nest = acc.Nest(shape=({H}, {W}, {R}, {S}))
i, j, k, l = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] += A[i + k, j + l] * B[k, l]

nests, args = [nest], (A, B, C)
schedule = nest.create_schedule()
'''
nest_kind("conv2d", _CONV2D, "HWRS", ((1, 9), (1, 9), SMALL, SMALL), 3)

_ELEMENTWISE = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L2})
D = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L3})
nest = acc.Nest(shape=({M}, {N}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] = A[i, j] * 2 + B[i, j]
    D[i, j] += C[i, j] - 1

nests, args = [nest], (A, B, C, D)
schedule = nest.create_schedule()
'''
nest_kind("elementwise", _ELEMENTWISE, "MN", (EXTENT, EXTENT), 4)

# a 3-D element-wise nest with a transposed access and two statements
_TRANSPOSE3 = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K}, {N}, {M}), layout={L0})
B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}, {K}), layout={L1})
nest = acc.Nest(shape=({M}, {N}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    B[i, j, k] -= A[k, j, i]
    B[i, j, k] *= 3

nests, args = [nest], (A, B)
schedule = nest.create_schedule()
'''
nest_kind("transpose3", _TRANSPOSE3, "MNK", ((1, 9), (1, 9), (1, 9)), 2)

_ROWSUM = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L0})
S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M},), layout={L1})
U = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N},), layout={L2})
nest = acc.Nest(shape=({M}, {N}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    S[i] += A[i, j]
    U[j] += A[i, j] * A[i, j]

nests, args = [nest], (A, S, U)
schedule = nest.create_schedule()
'''
nest_kind("rowsum", _ROWSUM, "MN", (EXTENT, EXTENT), 3)

_MAXREDUCE = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}, {K}), layout={L0})
X = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M},), layout={L1})
Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N}, {K}), layout={L2})
nest = acc.Nest(shape=({M}, {N}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    X[i] = acc.max(X[i], A[i, j, k])
    Y[j, k] = acc.min(Y[j, k], A[i, j, k] - 1)

nests, args = [nest], (A, X, Y)
schedule = nest.create_schedule()
'''
nest_kind("maxreduce", _MAXREDUCE, "MNK", ((1, 9), (1, 9), (1, 9)), 3)


# runtime sizes: the loops' extents are only known when the function is called
_MATMUL_DYN = '''
M, N, K = acc.create_dimensions()
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=(M, K), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=(K, N), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=(M, N), layout={L2})
nest = acc.Nest(shape=(M, N, K))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] += A[i, k] * B[k, j]

nests, args = [nest], (A, B, C, M, N, K)
values = {{M: {M}, N: {N}, K: {K}}}
schedule = nest.create_schedule()
'''
nest_kind("matmul_dyn", _MATMUL_DYN, "MNK", (EXTENT, EXTENT, EXTENT), 3, runtime_sizes=True)

_ROWMAX_DYN = '''
M, N = acc.create_dimensions()
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=(M, N), layout={L0})
S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=(M,), layout={L1})
nest = acc.Nest(shape=(M, N))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    S[i] = acc.max(S[i], A[i, j] * 3 - 1)

nests, args = [nest], (A, S, M, N)
values = {{M: {M}, N: {N}}}
schedule = nest.create_schedule()
'''
nest_kind("rowmax_dyn", _ROWMAX_DYN, "MN", (EXTENT, EXTENT), 2, runtime_sizes=True)


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


# -- choosers: one generator, two sources of choices ---------------------------------------------


class Chooser:
    """The choices a generator makes. `HypothesisChooser` draws them from hypothesis
    (shrinkable, biased to boundary values); `RandomChooser` from a seeded `random.Random`
    (fast, and many distinct cases per example)."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, seq):
        raise NotImplementedError

    def subset(self, seq, min_size: int, max_size: int) -> list:
        """Distinct elements of `seq`, in a random order."""
        raise NotImplementedError

    def permutation(self, seq) -> list:
        raise NotImplementedError

    def chance(self, p: float) -> bool:
        """True with probability about p (shrinks to False)."""
        return self.integer(0, 999) >= 1000 - int(round(p * 1000))


class HypothesisChooser(Chooser):
    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def choice(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def subset(self, seq, min_size, max_size):
        return self.draw(st.lists(st.sampled_from(list(seq)), min_size=min_size, max_size=max_size, unique=True))

    def permutation(self, seq):
        return list(self.draw(st.permutations(list(seq))))


class RandomChooser(Chooser):
    def __init__(self, rng):
        self.rng = rng

    def integer(self, lo, hi):
        return self.rng.randint(lo, hi)

    def choice(self, seq):
        return self.rng.choice(list(seq))

    def subset(self, seq, min_size, max_size):
        seq = list(seq)
        return self.rng.sample(seq, self.rng.randint(min_size, min(max_size, len(seq))))

    def permutation(self, seq):
        seq = list(seq)
        self.rng.shuffle(seq)
        return seq


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


def _sized(state):
    return state.names()  # every index can be split; runtime extents too


def _split_size(ch, state, ix) -> int:
    """1..extent+3 (dividing, non-dividing, == extent, > extent); 1..16 for a runtime extent."""
    ext = state.extent(ix)
    return ch.integer(1, (ext if ext is not None else 13) + 3)


@step_kind("split", weight=4)
def _draw_split(ch, state):
    names = _sized(state)
    if not names:
        return None
    ix = ch.choice(names)
    size = _split_size(ch, state, ix)
    return Step("split", (Ref(ix), size), results=(state.fresh(ix),))


@step_kind("tile", weight=2)
def _draw_tile(ch, state):
    names = _sized(state)
    if not names:
        return None
    chosen = ch.subset(names, 1, min(3, len(names)))
    items, results, taken = [], [], set()
    for ix in chosen:
        items.append((Ref(ix), _split_size(ch, state, ix)))
        results.append(state.fresh(ix, also_taken=taken))
        taken.add(results[-1])
    return Step("tile", (Mapping(items),), results=tuple(results))


def repair_order(perm, parents: dict) -> list:
    """The order closest to `perm` in which every split parent precedes its inner index.

    Repeatedly takes the earliest index of `perm` whose parent is already placed.
    """
    placed, out, todo = set(), [], list(perm)
    while todo:
        for n, ix in enumerate(todo):
            p = parents.get(ix)
            if p is None or p in placed:
                out.append(ix)
                placed.add(ix)
                del todo[n]
                break
        else:  # pragma: no cover - parents always form a forest
            raise AssertionError(f"cyclic split parents in {parents}")
    return out


@step_kind("reorder", weight=4)
def _draw_reorder(ch, state):
    dims = state.dims()
    order = repair_order(ch.permutation([n for n, _, _ in dims]), {n: p for n, _, p in dims})
    return Step("reorder", tuple(Ref(x) for x in order))


@step_kind("skew", weight=2)
def _draw_skew(ch, state):
    names = state.names()
    if len(names) < 2:
        return None
    a, b = ch.subset(names, 2, 2)
    kwargs = (("unroll_loops_smaller_than", ch.integer(1, 8)),) if ch.chance(0.4) else ()
    return Step("skew", (Ref(a), Ref(b)), kwargs)


@step_kind("pad", weight=1)
def _draw_pad(ch, state):
    return Step("pad", (Ref(ch.choice(state.names())), ch.integer(0, 3)))


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


# -----------------------------------------------------------------------------------------
# inputs, the reference, and the lowered IR run in Python
# -----------------------------------------------------------------------------------------


def random_array(array, rng, values=None) -> np.ndarray:
    """Seeded data for an acc.Array, in the memory order its layout declares (accpy.testing's
    generator). `values` gives the runtime dimensions' sizes (acc.Dimension -> int)."""
    sizes = {id(d): int(v) for d, v in (values or {}).items()}
    return value_for(array, sizes, rng, int_range=(-9, 9))


def call_arguments(args, seed: int, values=None) -> list:
    """Arguments for a call: seeded arrays, and the sizes of runtime dimensions."""
    rng = np.random.default_rng(seed)
    values = values or {}
    return [values[a] if isinstance(a, acc.Dimension) else random_array(a, rng, values) for a in args]


def make_inputs(state: State, seed: int) -> list:
    return call_arguments(state.args, seed, state.values)


def reference_outputs(state: State, inputs: list) -> list:
    out = [_copy(x) for x in inputs]
    evaluate(state.nests, dict(zip(state.args, out)))
    return out


def _copy(x):
    return x.copy(order="K") if isinstance(x, np.ndarray) else x


class OutOfBounds(IndexError):
    pass


class OverBudget(RuntimeError):
    """The lowered loops run more iterations than `lowered_to_python`'s budget allows."""


PYTHON_LOOP_BUDGET = 300_000  # loop iterations of one run of the lowered IR in Python


class _Bounded:
    """An ndarray whose element accesses are bounds-checked (numpy would wrap -1)."""

    __slots__ = ("a", "name")

    def __init__(self, a, name):
        self.a, self.name = a, name

    def _check(self, key):
        key = key if isinstance(key, tuple) else (key,)
        for k, n in zip(key, self.a.shape):
            if not 0 <= k < n:
                raise OutOfBounds(f"{self.name}{[int(x) for x in key]} is out of bounds "
                                  f"(shape {list(self.a.shape)})")

    def __getitem__(self, key):
        self._check(key)
        return self.a[key]

    def __setitem__(self, key, value):
        self._check(key)
        self.a[key] = value


def lowered_to_python(fn, budget: int = PYTHON_LOOP_BUDGET):
    """A Python function running a lowered `Function`'s loop IR over numpy arrays.

    Expressions are translated by the reference evaluator's code generator (same scalar
    semantics); loops, guards and allocations here. Returns `run(args)` taking the
    function's arguments in order (numpy arrays, ints for runtime sizes).
    """
    from accpy.ir.expr import Buffer
    from accpy.ir.stmt import Alloc, Block, Comment, For, If, Store
    from accpy.nest import reference as R

    g = R._PyGen()
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
            lines.append(pad + R._store_line(g, s))
        elif isinstance(s, Alloc):
            shape = ", ".join(g.index(x) for x in s.buffer.shape)
            lines.append(f"{pad}{g.buf(s.buffer)} = _Bounded(np.zeros(({shape},), "
                         f"dtype=np.{s.buffer.dtype.dtype.name}), {s.buffer.name!r})")
            emit(s.body, depth)
        elif isinstance(s, Comment):
            lines.append(f"{pad}pass  # {s.text}")
        else:
            raise NotImplementedError(f"lowered_to_python: {type(s).__name__}")

    emit(fn.body, 1)
    head = ["def _run(args):"]
    for n, a in enumerate(fn.args):  # arrays, and runtime sizes / scalars
        head.append(f"    {g.buf(a)} = _Bounded(args[{n}], {a.name!r})" if isinstance(a, Buffer)
                    else f"    {g.name(a)} = args[{n}]")
    src = "\n".join(head + lines + ["    return None"])
    ns = dict(R._HELPERS)
    ns["_Bounded"] = _Bounded
    spent = [0]

    def _range(lo, hi):
        spent[0] += max(hi - lo, 0)
        if spent[0] > budget:
            raise OverBudget(f"the lowered loops run more than {budget} iterations in Python")
        return range(lo, hi)

    ns["_range"] = _range
    ns.update(g.consts)
    ns.update(g.types)
    exec(compile(src, "<lowered ir>", "exec"), ns)
    run = ns["_run"]
    run.source = src
    return run


# -----------------------------------------------------------------------------------------
# building and checking batches
# -----------------------------------------------------------------------------------------


@dataclass
class Realized:
    case: Case
    state: Optional[State] = None
    function: object = None  # PackageFunction
    lowered: object = None  # the lowered Function
    lower_seconds: float = 0.0
    single: object = None  # a package of this case alone (after a batch failed to build)
    notes: list = field(default_factory=list)  # e.g. checks skipped
    error: Optional[str] = None  # a failure before running (realize / lower / compile)


@dataclass
class Failure:
    case: Case
    what: str
    details: str = ""

    def report(self) -> str:
        out = [f"FAILED: {self.what}", f"case: {self.case.describe()}", "replay:",
               _indent(self.case.script()), self.details]
        return "\n".join(x for x in out if x)


@dataclass
class BatchReport:
    cases: int = 0
    executed: int = 0
    failures: list = field(default_factory=list)
    lower_seconds: list = field(default_factory=list)  # (seconds, case description)
    notes: list = field(default_factory=list)  # (case description, note): checks skipped
    build_seconds: float = 0.0
    total_seconds: float = 0.0

    def raise_failures(self) -> None:
        if self.failures:
            text = "\n\n".join(f.report() for f in self.failures)
            raise AssertionError(f"{len(self.failures)} of {self.cases} generated schedules failed:\n\n{text}")


def _indent(text, pad="    "):
    return "\n".join(pad + line if line else line for line in text.splitlines())


def _first_difference(name, got, want, tol) -> Optional[str]:
    return first_difference(name, got, want, rtol=tol or 0.0, atol=tol or 0.0)


def tolerance_of(state: State) -> Optional[float]:
    dts = {a.element_type for a in state.args if isinstance(a, acc.Array)}
    return None if all(t.is_int for t in dts) else 1e-4


def compare(state: State, got: list, want: list) -> Optional[str]:
    tol = tolerance_of(state)
    diffs = [d for d in (_first_difference(a.name, g, w, tol) for a, g, w in zip(state.args, got, want)
                         if isinstance(a, acc.Array)) if d]
    return "; ".join(diffs) if diffs else None


def realize_all(cases_) -> list:
    out = []
    for c in cases_:
        r = Realized(c)
        try:
            r.state = realize(c)
        except Exception:
            r.error = "realizing the schedule raised:\n" + traceback.format_exc()
        out.append(r)
    return out


def build_package(realized: list, output_dir, name: str = "schedgen"):
    """Add every realized case (without an error) to one package and build it once.

    Each case is lowered (and timed) on its own first, so that a case whose lowering
    raises is reported alone. A compile error is attributed by rebuilding the cases one
    by one. Returns the loaded package (None when nothing was built).
    """
    pkg = acc.Package()
    for n, r in enumerate(realized):
        if r.error is not None:
            continue
        try:
            probe = acc.Package().add(r.state.plan, args=r.state.args, base_name=f"case{n}")
            t = time.perf_counter()
            r.lowered = probe.lowered(probe.name + "__impl")
            r.lower_seconds = time.perf_counter() - t
        except Exception:
            r.error = "lowering raised:\n" + traceback.format_exc()
            continue
        r.function = pkg.add(r.state.plan, args=r.state.args, base_name=f"case{n}")
        if hasattr(probe, "_lowered"):
            r.function._lowered = probe._lowered  # same plan and arguments: reuse, don't lower twice
    live = [r for r in realized if r.error is None]
    if not live:
        return None
    try:
        return pkg.build(name, output_dir=str(output_dir), python_module=False)
    except Exception:
        if len(live) == 1:
            live[0].error = "building raised:\n" + traceback.format_exc()
            return None
    # attribute the failure: build each case alone
    for n, r in enumerate(live):
        one = acc.Package()
        r.function = one.add(r.state.plan, args=r.state.args, base_name="f")
        try:
            r.single = one.build(f"{name}_single{n}", output_dir=str(output_dir), python_module=False)
        except Exception:
            r.error = "building raised:\n" + traceback.format_exc()
    return None


def check_cases(cases_, output_dir, name: str = "schedgen", check_lowered_python: bool = True,
                extra_checks=()) -> BatchReport:
    """Build all cases into one package, run each, compare with the reference.

    Returns a report; call `report.raise_failures()` to fail a test with readable replays.
    """
    t0 = time.perf_counter()
    rep = BatchReport(cases=len(cases_))
    realized = realize_all(cases_)
    tb = time.perf_counter()
    lib = build_package(realized, Path(output_dir), name)
    rep.build_seconds = time.perf_counter() - tb
    for r in realized:
        if r.function is not None:
            rep.lower_seconds.append((r.lower_seconds, r.case.describe()))
        if r.error is not None:
            rep.failures.append(Failure(r.case, r.error.splitlines()[0], _indent(r.error)))
            continue
        kernel = lib[r.function.name] if lib is not None else r.single.f
        st_ = r.state
        inputs = make_inputs(st_, r.case.seed)
        want = reference_outputs(st_, inputs)
        py_diff = oob = None
        if check_lowered_python:
            # first, in Python with bounds checks: an out-of-bounds access must not reach the
            # native kernel (it would corrupt or crash the test process, not fail a test)
            py_diff, oob = _run_lowered_python(r, inputs, want)
            rep.notes += [(r.case.describe(), n) for n in r.notes]
        if oob:
            details = [f"lowered IR in Python: {py_diff}", "(the native kernel was not called)",
                       "pseudo-code:\n" + _indent(_safe(st_.schedule.to_python)),
                       "lowered:\n" + _indent(_safe(lambda: st_.schedule.to_python(unswitched=True)))]
            rep.failures.append(Failure(r.case, "the lowered loops access an array out of bounds",
                                        "\n".join(details)))
            continue
        got = [_copy(x) for x in inputs]
        try:
            kernel(*got)
        except Exception:
            rep.failures.append(Failure(r.case, "calling the kernel raised", _indent(traceback.format_exc())))
            continue
        rep.executed += 1
        diff = compare(st_, got, want)
        if diff and not check_lowered_python:
            py_diff, _ = _run_lowered_python(r, inputs, want)
        extra = []
        for chk in extra_checks:
            msg = chk(r, inputs, got)
            if msg:
                extra.append(msg)
        if diff or py_diff or extra:
            what = "native result differs from the reference" if diff else \
                "lowered IR (run in Python) differs from the reference" if py_diff else "extra check failed"
            details = [f"native: {diff or 'matches'}",
                       f"lowered IR in Python: {py_diff or 'matches'}"] + extra
            details.append("pseudo-code:\n" + _indent(_safe(st_.schedule.to_python)))
            details.append("lowered:\n" + _indent(_safe(lambda: st_.schedule.to_python(unswitched=True))))
            rep.failures.append(Failure(r.case, what, "\n".join(details)))
    rep.total_seconds = time.perf_counter() - t0
    return rep


def _run_lowered_python(r: Realized, inputs, want):
    """(difference or None, out-of-bounds?) of the lowered IR run in Python."""
    out = [_copy(x) for x in inputs]
    try:
        lowered_to_python(r.lowered)(out)
    except OutOfBounds as e:
        return f"{e}", True
    except OverBudget as e:
        r.notes.append(f"lowered IR not run in Python: {e}")
        return None, False
    except Exception:
        return "running the lowered IR in Python raised:\n" + traceback.format_exc(), False
    return compare(r.state, out, want), False


def _safe(fn) -> str:
    try:
        return fn()
    except Exception as e:  # pragma: no cover - diagnostics only
        return f"<{type(e).__name__}: {e}>"


def check_case(case: Case, output_dir, **kw) -> BatchReport:
    """One case alone (for regression tests and replays)."""
    rep = check_cases([case], output_dir, **kw)
    rep.raise_failures()
    return rep


def steps_from_code(code: str) -> tuple:
    """Parse step lines in `Step.code()` form back to Steps (for pasting a failure's replay)."""
    out = []
    for line in code.strip().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"(?:([\w, ]+?),?\s*=\s*)?([\w.]+)\.(\w+)\((.*)\)", line)
        if not m:
            raise ValueError(f"not a step: {line!r}")
        results, target, op, argtext = m.groups()
        if target == "schedule" and op == "create_plan" and not argtext.strip():
            continue  # the default plan (a step with a target argument is kept)
        args, kwargs = _parse_args(argtext)
        res = tuple(x.strip() for x in results.split(",") if x.strip()) if results else ()
        out.append(Step(op, args, kwargs, res, target))
    return tuple(out)


def _parse_args(text):
    import ast

    call = ast.parse(f"f({text})", mode="eval").body

    def conv(node):
        if isinstance(node, ast.Name):
            return Ref(node.id)
        if isinstance(node, ast.Attribute):  # e.g. acc.ScalarType.int64
            return Ref(ast.unparse(node))
        if isinstance(node, ast.Dict):
            return Mapping((conv(k), conv(v)) for k, v in zip(node.keys, node.values))
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -conv(node.operand)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(conv(x) for x in node.elts)
        raise ValueError(f"unsupported argument {ast.dump(node)}")

    return tuple(conv(a) for a in call.args), tuple((k.arg, conv(k.value)) for k in call.keywords)



# -----------------------------------------------------------------------------------------
# minimizing a failing case (for debugging; hypothesis shrinks batches too slowly)
# -----------------------------------------------------------------------------------------


def case_fails(case: Case, output_dir, what: Optional[str] = None) -> bool:
    """True when the case fails (with a failure whose headline contains `what`, if given)."""
    rep = check_cases([case], output_dir, name="minimize")
    return any(what is None or what in f.what for f in rep.failures)


def _variants(case: Case):
    """Simpler versions of a case, roughly simplest first."""
    steps = case.steps
    for n in range(len(steps)):  # drop one step
        yield dataclasses.replace(case, steps=steps[:n] + steps[n + 1:])
    spec = case.nest
    if spec.layouts:
        yield dataclasses.replace(case, nest=dataclasses.replace(spec, layouts=()))
    if spec.dtype != "int32" and "int32" in NEST_KINDS[spec.kind].dtypes:
        yield dataclasses.replace(case, nest=dataclasses.replace(spec, dtype="int32"))
    for n, s in enumerate(spec.sizes):  # smaller nest sizes
        for smaller in sorted({1, s // 2, s - 1}):
            if 1 <= smaller < s:
                sizes = spec.sizes[:n] + (smaller,) + spec.sizes[n + 1:]
                yield dataclasses.replace(case, nest=dataclasses.replace(spec, sizes=sizes))
    for n, step in enumerate(steps):  # simpler arguments
        if step.kwargs:
            yield dataclasses.replace(case, steps=steps[:n] + (dataclasses.replace(step, kwargs=()),) + steps[n + 1:])
        for k, a in enumerate(step.args):
            if isinstance(a, int) and not isinstance(a, bool) and a > 1:
                for smaller in sorted({1, a // 2, a - 1}):
                    args = step.args[:k] + (smaller,) + step.args[k + 1:]
                    yield dataclasses.replace(case, steps=steps[:n] + (dataclasses.replace(step, args=args),)
                                              + steps[n + 1:])
    if case.seed:
        yield dataclasses.replace(case, seed=0)


def minimize(case: Case, output_dir, what: Optional[str] = None, max_attempts: int = 400) -> Case:
    """Greedily simplify a failing case while it keeps failing; returns the simplest found."""
    attempts = 0
    improved = True
    while improved and attempts < max_attempts:
        improved = False
        for v in _variants(case):
            attempts += 1
            try:
                realize(v)
            except Exception:
                continue  # e.g. a later step names an index an earlier dropped step made
            if case_fails(v, output_dir, what):
                case = v
                improved = True
                break
            if attempts >= max_attempts:
                break
    return case


# =========================================================================================
# random PLANS on random schedules (unroll, vectorize, cache, parallelize)
# =========================================================================================
#
# `draw_plan_case(chooser)` draws a schedule case as above (split/tile/reorder/skew/pad),
# then plan steps on the final schedule, each checked against the logic first so that it
# is legal by construction as far as the schedule alone can tell:
#   * cache: an array the logic uses, at a random index, level or budget (max_elements);
#     for an INPUT sometimes a trigger index at or above the cache's; sometimes another
#     layout, a wider element type, thrifty, double buffering, or a cache of an earlier
#     cache at a lower level;
#   * vectorize: an index along which every access is contiguous (one element apart in
#     memory) or invariant, whose later indices all have small constant extents (unrolled
#     by request or as the vectorized loop's subtree); the element type is int32 or
#     float32; sometimes with an AVX2 target instead of the host's;
#   * unroll: one or two of the last indices with a small constant extent;
#   * parallelize: one or two contiguous outer indices that every written element moves
#     with (no race), none of them unrolled or vectorized.
# Plan calls that accpy rejects when they are made (Accera's argument rules) are dropped.
# What the schedule cannot tell is only found when the loops are lowered; the reasons in
# `LEGITIMATE_REJECTIONS` are accepted at build time (and counted), any other failure fails.
#
# `check_plan_cases` builds a batch as one package and checks every case like
# `check_cases` -- but the lowered IR (vector statements included) runs in Python through
# `plan_ir_to_python`, with bounds-checked linear memory (vector lanes included), before
# the native call.

def avx2_target_steps() -> list:
    """Steps making `plan` for this host without its AVX-512 extensions (32-byte vectors)."""
    exts = tuple(e for e in acc.Target.HOST.extensions if not e.startswith("avx512"))
    return [Step("HOST", (), (("extensions", exts), ("vector_bytes", 32)), results=("avx2",), target="acc.Target"),
            Step("create_plan", (Ref("avx2"),), results=("plan",))]

# build-time rejections that are legitimate for the plans drawn here: (pattern, why, only for
# nests with runtime sizes)
LEGITIMATE_REJECTIONS = [
    (r"ScheduleError: vectorize\(\w+\): the loop over \w+ is inside it",
     "the vectorized loop is not innermost after unrolling: an inner loop kept a runtime trip "
     "count (runtime sizes, or the pieces of a skewed / padded dimension), so it was not unrolled", False),
    (r"ScheduleError: vectorize\(\w+\): its body has a condition",
     "a guard that depends on runtime sizes is left inside the vectorized loop", True),
    (r"ScheduleError: vectorize\(\w+\): \w+ has a runtime stride along the vectorized loop",
     "vectorized along a dimension whose stride is a runtime size", True),
    (r"ScheduleError: cache of \w+: no key-slice has an active block within max_elements",
     "the budget is smaller than the block of the innermost key-slice", False),
    (r"ScheduleError: cache of \w+: the block's extent along dimension \d+ depends on runtime sizes",
     "caches need blocks of bounded size; this one grows with a runtime size", True),
    (r"ScheduleError: cache: the bounds of loop \w+ are not affine",
     "a cache inside loops whose bounds are not convex (a min of lower bounds, e.g. after two skews, "
     "or floor divisions of runtime sizes): not supported", False),
    (r"ScheduleError: cache of \w+: the block's extent along dimension \d+ is not affine",
     "a cache block of a runtime-size nest whose extent is not an affine function of the loops", True),
    (r"ScheduleError: cache: the footprint is unbounded",
     "a cache block of a runtime-size nest without a bound", True),
    (r"ScheduleError: cache of \w+_cache: subscript \d+ is not affine",
     "a cache of a cache whose source block starts at a floor division (split or skewed loops with "
     "rational bounds): the inner cache's subscripts are not affine", False),
    (r"ScheduleError: unrolling loop \w+ would emit more than \d+ copies",
     "the unrolled loops together have too many iterations", False),
]


def legitimate_rejection(error_text: str, spec: Optional[NestSpec] = None) -> Optional[str]:
    """The reason (from LEGITIMATE_REJECTIONS) a build failure is acceptable, or None."""
    last = error_text.strip().splitlines()[-1] if error_text.strip() else ""
    runtime = spec is not None and NEST_KINDS[spec.kind].runtime_sizes
    for pattern, why, runtime_only in LEGITIMATE_REJECTIONS:
        if re.search(pattern, last) and (runtime or not runtime_only):
            return why
    return None


# -- what the logic does along each schedule index --------------------------------------------


def _accesses_in_schedule(state) -> list:
    """(buffer, subscripts over schedule dim vars, is_store) of every access of every statement."""
    from accpy.ir.visitor import substitute_indices
    from accpy.ir.visitor import Visitor

    out = []
    for part in state.schedule.space.parts:
        for st in part.statements:
            store = substitute_indices(st.store, part.index_map)
            out.append((store.buffer, store.indices, True))

            class V(Visitor):
                def visit_Load(self, n):
                    out.append((n.buffer, n.indices, False))
                    self.generic_visit(n)

            V().visit(store.value)
    return out


def _dim_var(state, name):
    for d in state.schedule.space.dims:
        if d.name == name:
            return d.var
    raise KeyError(name)


def _memory_step(buffer, indices, var) -> Optional[int]:
    """Elements the address moves when `var` moves by one (None: not a constant)."""
    from accpy.ir.affine import to_affine

    total = 0
    for ix, stride in zip(indices, buffer.strides):
        a, s = to_affine(ix), to_affine(stride)
        if a is None:
            return None
        c = a.coef(var)
        if c == 0:
            continue
        if s is None or not s.is_const:
            return None
        total += c * s.const
    return total


def _cache_strides(buffer, layout_last: bool) -> tuple:
    """Element strides of a cache of `buffer` (its block's dims in the cache's own layout)."""
    from accpy.ir.expr import Const

    n = buffer.rank
    strides, acc_ = [0] * n, 1
    for d in (range(n) if layout_last else reversed(range(n))):
        strides[d] = acc_
        acc_ *= 1000  # any extent: only which stride is 1 matters here
    return tuple(Const(x) for x in strides)


def vectorizable_along(state, name) -> bool:
    """Every access contiguous along the index or invariant (in the array and in the layout
    of any cache of it); the element type is int32 or float32."""
    import dataclasses as _dc

    var = _dim_var(state, name)
    cached = {}
    for c in state.plan.caches:
        buf = c.array.buffer
        cached.setdefault(id(buf), []).append(c.layout is acc.Array.Layout.LAST_MAJOR)
    for buf, indices, is_store in _accesses_in_schedule(state):
        if buf.dtype.name not in ("int32", "float32"):
            return False
        views = [buf] + [_dc.replace(buf, strides=_cache_strides(buf, last)) for last in cached.get(id(buf), [])]
        if any(_memory_step(v, indices, var) not in (0, 1) for v in views):
            return False
    return True


def race_free(state, names) -> bool:
    """Parallel iterations never write one element: every statement's written element moves
    with each parallel index, a subscript that moves with one moves with no later (inner)
    index, and parallel indices sharing a subscript form a mixed radix of their constant
    extents (e.g. 6*j + j1 with j1 < 6). Stricter than accpy's own check, which only asks
    that the element moves with each parallel index (see
    test_plan_errors.py::test_parallelizing_a_skewed_index_that_races)."""
    from accpy.ir.affine import to_affine

    dims = state.schedule.space.dims
    order = [d.var for d in dims]
    extents = {d.var: e for d, (_, e, _) in zip(dims, state.dims())}
    pvars = [_dim_var(state, n) for n in names]
    inner = set(order[max(order.index(v) for v in pvars) + 1:])
    for buf, indices, is_store in _accesses_in_schedule(state):
        if not is_store:
            continue
        affs = [to_affine(ix) for ix in indices]
        if any(a is None for a in affs):
            return False
        for v in pvars:
            if not any(a.coef(v) != 0 for a in affs):
                return False
        for a in affs:
            ps = sorted((v for v in pvars if a.coef(v) != 0), key=lambda v: abs(a.coef(v)))
            if not ps:
                continue
            if any(a.coef(w) != 0 for w in inner):
                return False
            step = abs(a.coef(ps[0]))
            for v, w in zip(ps, ps[1:]):
                if extents[v] is None or abs(a.coef(w)) != step * extents[v]:
                    return False
                step = abs(a.coef(w))
    return True


def reductions_read_elsewhere(state, name) -> bool:
    """Does a statement reduce into an element that does not move with the index while
    another statement reads that array? (Vectorized, the element lives in a register.)"""
    from accpy.ir.visitor import substitute_indices
    from accpy.ir.visitor import Visitor

    var = _dim_var(state, name)
    reduced, read_by = [], {}
    k = 0
    for part in state.schedule.space.parts:
        for st in part.statements:
            k += 1
            store = substitute_indices(st.store, part.index_map)
            if _memory_step(store.buffer, store.indices, var) == 0:
                reduced.append((id(store.buffer), k))

            class V(Visitor):
                def visit_Load(self, n, k=k):
                    read_by.setdefault(id(n.buffer), set()).add(k)
                    self.generic_visit(n)

            V().visit(store.value)
    return any(read_by.get(b, set()) - {k} for b, k in reduced)


# -- drawing plans ------------------------------------------------------------------------------


def _try_apply(state, step) -> bool:
    """Apply a plan step unless accpy rejects it on the spot (then nothing changes)."""
    try:
        state.apply(step)
        return True
    except (ValueError, TypeError):
        return False


def _arrays(state) -> list:
    return [a for a in state.args if isinstance(a, acc.Array)]


def _array_name(state, array) -> str:
    for k, v in state.ns.items():
        if v is array and not k.startswith("_"):
            return k
    raise KeyError(array.name)


def _draw_caches(ch, state, max_caches=2) -> None:
    dims = state.dims()
    names = [n for n, _, _ in dims]
    n = len(names)
    made = []  # (variable name, level or None, budget or None)
    for _ in range(ch.integer(0, max_caches)):
        arrays = _arrays(state)
        if made and ch.chance(0.2):
            # a cache of an earlier cache, at a lower level (or a smaller budget)
            src, lv, budget = ch.choice(made)
            if budget is not None:
                kwargs = (("max_elements", ch.integer(1, max(budget - 1, 1))),)
            elif lv is not None and lv > 1:
                kwargs = (("level", ch.integer(1, lv - 1)),)
            else:
                continue
            arr_name = src
            array = None
        else:
            array = ch.choice(arrays)
            arr_name = _array_name(state, array)
            mode = ch.choice(["index", "index", "level", "budget"])
            kwargs = ()
            if mode == "budget":
                kwargs = (("max_elements", ch.choice([1, 4, 16, 30, 64, 200, 1000, 10_000])),)
            else:
                pos = ch.integer(0, n - 1)
                kwargs = ((("index", Ref(names[pos])),) if mode == "index" else (("level", n - pos),))
                if array.role is acc.Role.INPUT and ch.chance(0.35):
                    t = ch.integer(0, pos)
                    kwargs += ((("trigger_index", Ref(names[t])),) if mode == "index"
                               else (("trigger_level", n - t),))
                    if ch.chance(0.3):
                        kwargs += (("double_buffer", True),)
            if ch.chance(0.25):
                kwargs += (("layout", Ref("acc.Array.Layout." + ch.choice(["LAST_MAJOR", "FIRST_MAJOR"]))),)
            if ch.chance(0.1):
                wide = "int64" if array.element_type.name == "int32" else "float64"
                kwargs += (("element_type", Ref("acc.ScalarType." + wide)),)
            if ch.chance(0.1):
                kwargs += (("thrifty", True),)
        var = f"cache{len(made)}"
        step = Step("cache", (Ref(arr_name),), kwargs, results=(var,), target="plan")
        if _try_apply(state, step):
            c = state.ns[var]
            made.append((var, c.level, c.max_elements))


def _draw_vectorize(ch, state) -> Optional[str]:
    """Vectorize an index whose later indices are small (unrolled); returns its name."""
    dims = state.dims()
    if state.spec.dtype not in ("int32", "float32"):
        return None
    # not outside a cache's key-slice: its copies would be inside the vectorized loop (a budget
    # cache's key-slice is only known when lowering: then only the innermost index)
    caches = state.plan.caches
    inner_most = len(dims) - 1 if any(c.max_elements is not None for c in caches) else None
    limit = max([len(dims) - c.level for c in caches if c.level is not None] + [0])  # the innermost cache index
    candidates = []
    for k, (name, ext, _) in enumerate(dims):
        if k < limit or (inner_most is not None and k != inner_most):
            continue
        later = dims[k + 1:]
        if any(e is None or e > 4 for _, e, _ in later):
            continue
        prod = 1
        for _, e, _ in later:
            prod *= e
        if prod > 16 or not vectorizable_along(state, name) or reductions_read_elsewhere(state, name):
            continue
        candidates.append(k)
    if not candidates:
        return None
    k = ch.choice(candidates)
    if ch.chance(0.5):  # else they are unrolled as the vectorized loop's subtree
        for name, _, _ in dims[k + 1:]:
            _try_apply(state, Step("unroll", (Ref(name),), target="plan"))
    name = dims[k][0]
    return name if _try_apply(state, Step("vectorize", (Ref(name),), target="plan")) else None


def _draw_unrolls(ch, state, vectorized) -> None:
    dims = state.dims()
    small = [n for n, e, _ in dims[-3:] if e is not None and e <= 6 and n != vectorized]
    if small:
        for name in ch.subset(small, 1, min(2, len(small))):
            _try_apply(state, Step("unroll", (Ref(name),), target="plan"))


def _draw_parallelize(ch, state) -> None:
    names = state.names()
    kinds = state.plan.loop_annotations()
    free = [n for n in names[:3] if _dim_var(state, n) not in kinds]
    ok = [n for n in free if race_free(state, [n])]
    if not ok:
        return
    first = ch.choice(ok)
    k = names.index(first)
    chosen = [first]
    if k + 1 < len(names) and names[k + 1] in free and race_free(state, [first, names[k + 1]]) and ch.chance(0.4):
        chosen.append(names[k + 1])
    kwargs = ()
    if ch.chance(0.3):
        kwargs += (("policy", "dynamic"),)
    if ch.chance(0.3):
        kwargs += (("max_threads", ch.integer(1, 3)),)
    arg = Ref(chosen[0]) if len(chosen) == 1 else tuple(Ref(x) for x in chosen)
    _try_apply(state, Step("parallelize", (arg,), kwargs, target="plan"))


def draw_plan_steps(ch, state) -> None:
    """Draw and apply plan steps on `state` (its schedule steps done)."""
    start = len(state.steps)
    if ch.chance(0.25):
        for step in avx2_target_steps():
            state.apply(step)
    runtime = NEST_KINDS[state.spec.kind].runtime_sizes  # (caches of those are mostly refused)
    if ch.chance(0.2 if runtime else 0.75):
        _draw_caches(ch, state)
    vectorized = _draw_vectorize(ch, state) if ch.chance(0.6) else None
    if ch.chance(0.4):
        _draw_unrolls(ch, state, vectorized)
    if ch.chance(0.45):
        _draw_parallelize(ch, state)
    if len(state.steps) == start + 2 and state.steps[-1].op == "create_plan":
        del state.steps[start:]  # a target alone changes nothing worth a case


def draw_plan_case(ch, kinds=None, dtypes=None, max_steps=4) -> Case:
    """A random schedule case (see `draw_case`) with random plan steps on top."""
    sched = [n for n, k in STEP_KINDS.items() if k.stage == "schedule"]
    base = draw_case(ch, kinds=kinds, dtypes=dtypes, max_steps=max_steps, step_kinds=sched)
    state = State(base.nest)
    for step in base.steps:
        state.apply(step)
    draw_plan_steps(ch, state)
    return Case(base.nest, tuple(state.steps), base.seed)


@st.composite
def plan_cases(draw, **kw):
    """Hypothesis strategy of cases with plans (keyword arguments as for `draw_plan_case`)."""
    return draw_plan_case(HypothesisChooser(draw), **kw)


def random_plan_cases(rng, n: int, exclude=(), require_plan=True, **kw) -> list:
    """`n` distinct cases with plans (at least one plan step, if `require_plan`)."""
    ch = RandomChooser(rng)
    out, seen = [], set(exclude)
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        c = draw_plan_case(ch, **kw)
        if require_plan and not any(s.target == "plan" for s in c.steps):
            continue
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def plan_features(case: Case) -> set:
    """What a case's plan uses (for coverage counts): cache, trigger, vectorize, avx2, ..."""
    out = set()
    for s in case.steps:
        if s.op == "create_plan" and s.args:
            out.add("avx2")
        if s.target != "plan":
            continue
        out.add(s.op)
        kw = dict(s.kwargs)
        if s.op == "cache":
            out.update(k for k in ("trigger_index", "trigger_level", "max_elements", "level", "index", "layout",
                                   "element_type", "thrifty", "double_buffer") if k in kw)
            if isinstance(s.args[0], str) and s.args[0].startswith("cache"):
                out.add("cache_of_cache")
        if s.op == "parallelize" and isinstance(s.args[0], tuple):
            out.add("parallelize_2")
    return out


# -- the lowered IR (vector statements included) run in Python --------------------------------


class _Mem:
    """A buffer as bounds-checked linear memory: element (i, j, ...) is at sum(index * stride)."""

    __slots__ = ("flat", "shape", "strides", "name")

    def __init__(self, array, shape, strides, name):
        self.flat = array.ravel(order="K") if array.ndim else array.reshape(1)
        if array.size and not np.shares_memory(self.flat, array):
            raise AssertionError(f"{name}: not a contiguous array")
        self.shape, self.strides, self.name = tuple(shape), tuple(strides), name

    @staticmethod
    def alloc(shape, strides, dtype, name):
        size = 1
        for s in shape:
            size *= max(int(s), 0)
        return _Mem(np.zeros(size, dtype=dtype), shape, strides, name)

    def _offset(self, idx):
        off = 0
        for k, (i, n, st) in enumerate(zip(idx, self.shape, self.strides)):
            if not 0 <= i < n:
                raise OutOfBounds(f"{self.name}{[int(x) for x in idx]} is out of bounds (shape {list(self.shape)})")
            off += i * st
        return off

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


def plan_ir_to_python(fn, budget: int = PYTHON_LOOP_BUDGET):
    """Like `lowered_to_python`, for lowered functions with caches and vector statements.

    Every buffer is linear memory addressed through its strides (caches have their own
    layouts), bounds-checked per subscript and per vector lane; vector operations apply
    the reference's scalar semantics lane by lane (float reductions and fma in the order
    written, so within a tolerance of the native code).
    """
    from accpy.ir import vector as V
    from accpy.ir.expr import BinOp, Buffer, Call, Cast, Load, UnOp, Var
    from accpy.ir.stmt import Alloc, Block, Comment, Evaluate, For, If, Store
    from accpy.ir.types import ScalarType
    from accpy.nest import reference as R

    class Gen(R._PyGen):
        def __init__(self):
            super().__init__()
            self.vnames: dict = {}

        def vvar(self, v):
            if v.uid not in self.vnames:
                self.vnames[v.uid] = f"vv{len(self.vnames)}_{v.name}"
            return self.vnames[v.uid]

        def lanewise(self, make, operands, dtypes):
            """`[scalar(x, y, ...) for x, y, ... in zip(vectors)]` with the reference's scalar code."""
            xs = [Var(f"x{k}", t) for k, t in enumerate(dtypes)]
            body = self.expr(make(*xs))
            params = ", ".join(self.name(x) for x in xs)
            vecs = ", ".join(self.expr(o) for o in operands)
            return f"[(lambda {params}: {body})(*_z) for _z in zip({vecs})]"

        def sub(self, idx):
            return "(" + "".join(self.index(i) + ", " for i in idx) + ")"

        def expr(self, e):
            if isinstance(e, Load):
                return f"{self.buf(e.buffer)}.ld({self.sub(e.indices)})"
            if isinstance(e, V.VLoad):
                cnt = "None" if e.count is None else self.index(e.count)
                return f"{self.buf(e.buffer)}.vld({self.sub(e.indices)}, {e.lanes}, {cnt}, {e.stride})"
            if isinstance(e, V.Broadcast):
                return f"[{self.expr(e.value)}] * {e.lanes}"
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
                body = self.expr(BinOp(op, x, y, e.dtype))
                return f"_fold(lambda {self.name(x)}, {self.name(y)}: {body}, {self.expr(e.value)})"
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
            lines.append(f"{pad}{g.buf(s.buffer)}.st({g.sub(s.indices)}, {g.expr(value)})")
        elif isinstance(s, Alloc):
            shape = ", ".join(g.index(x) for x in s.buffer.shape)
            strides = ", ".join(g.index(x) for x in s.buffer.strides)
            lines.append(f"{pad}{g.buf(s.buffer)} = _Mem.alloc(({shape},), ({strides},), "
                         f"np.{s.buffer.dtype.dtype.name}, {s.buffer.name!r})")
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


# -- checking batches of plan cases ------------------------------------------------------------


@dataclass
class PlanReport(BatchReport):
    rejected: list = field(default_factory=list)  # (case, why): legitimate build-time rejections
    python_checked: int = 0  # cases whose lowered IR also ran in Python (bounds-checked)
    features: dict = field(default_factory=dict)  # plan feature -> executed cases using it


def _run_plan_python(r: Realized, inputs, want):
    out = [_copy(x) for x in inputs]
    try:
        plan_ir_to_python(r.lowered)(out)
    except OutOfBounds as e:
        return f"{e}", True, False
    except OverBudget as e:
        r.notes.append(f"lowered IR not run in Python: {e}")
        return None, False, False
    except Exception:
        return "running the lowered IR in Python raised:\n" + traceback.format_exc(), False, True
    return compare(r.state, out, want), False, True


def check_plan_cases(cases_, output_dir, name: str = "plans") -> PlanReport:
    """Build the cases (schedules with plans) as one package, run each, compare with the
    reference; build-time rejections listed in LEGITIMATE_REJECTIONS are counted, not failed."""
    t0 = time.perf_counter()
    rep = PlanReport(cases=len(cases_))
    realized = realize_all(cases_)
    tb = time.perf_counter()
    lib = build_package(realized, Path(output_dir), name)
    rep.build_seconds = time.perf_counter() - tb
    for r in realized:
        if r.function is not None:
            rep.lower_seconds.append((r.lower_seconds, r.case.describe()))
        if r.error is not None:
            why = legitimate_rejection(r.error, r.case.nest)
            if why is not None:
                rep.rejected.append((r.case, why))
            else:
                rep.failures.append(Failure(r.case, r.error.splitlines()[0], _indent(r.error)))
            continue
        kernel = lib[r.function.name] if lib is not None else r.single.f
        st_ = r.state
        inputs = make_inputs(st_, r.case.seed)
        want = reference_outputs(st_, inputs)
        py_diff, oob, ran = _run_plan_python(r, inputs, want)
        rep.python_checked += ran
        rep.notes += [(r.case.describe(), n) for n in r.notes]
        if oob:
            rep.failures.append(Failure(r.case, "the lowered loops access an array out of bounds",
                                        f"lowered IR in Python: {py_diff}\n(the native kernel was not called)\n"
                                        f"C:\n{_indent(_safe(lambda: st_.plan.emit_c('f', st_.args)))}"))
            continue
        got = [_copy(x) for x in inputs]
        try:
            kernel(*got)
        except Exception:
            rep.failures.append(Failure(r.case, "calling the kernel raised", _indent(traceback.format_exc())))
            continue
        rep.executed += 1
        for f in plan_features(r.case):
            rep.features[f] = rep.features.get(f, 0) + 1
        diff = compare(st_, got, want)
        if diff or py_diff:
            what = "native result differs from the reference" if diff else \
                "lowered IR (run in Python) differs from the reference"
            details = [f"native: {diff or 'matches'}", f"lowered IR in Python: {py_diff or 'matches'}",
                       "C:\n" + _indent(_safe(lambda: st_.plan.emit_c("f", st_.args)))]
            rep.failures.append(Failure(r.case, what, "\n".join(details)))
    rep.total_seconds = time.perf_counter() - t0
    return rep
