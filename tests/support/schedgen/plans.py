"""Random plans: what the logic does along each index (vectorizable, race free), and the
drawers of caches, vectorize, unroll and parallelize steps."""
from __future__ import annotations

from typing import Optional

from hypothesis import strategies as st

import accpy as acc
from .steps import Ref, Step
from .nests import NEST_KINDS
from .cases import Case, HypothesisChooser, RandomChooser, STEP_KINDS, State, draw_case
from .minimize import avx2_target_steps


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
