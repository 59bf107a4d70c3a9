"""hypothesis strategies of schedules, plans and input data for a user's nest.

Transforms are drawn one by one and applied at once; one that accpy refuses (a schedule
that would change the result, an invalid order, a vectorize with dependent lanes, a
racing parallel loop, a cache it cannot make) is skipped, so every example is legal.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from ..errors import LogicError, ScheduleError
from ..ir.affine import to_affine
from ..nest.array import Array, Dimension, OutputDimension, Role, Scalar
from ..nest.bf16 import bfloat16_bits
from ..nest.nest import Nest
from ..plan.plan import Plan
from ..schedule.schedule import Schedule
from ..targets import Target
from ..targets.library import grid_for
from ._deps import hypothesis_strategies
from .choices import HypothesisChooser, draw_transform, weighted_kinds

SCHEDULE_TRANSFORMS = ("split", "tile", "reorder", "skew", "pad")
_REFUSED = (ValueError, TypeError, ScheduleError, LogicError, NotImplementedError, RuntimeError)


# -- copies -----------------------------------------------------------------------------------

def _base(source) -> Callable:
    """A function making a fresh copy of the schedule to extend (a Nest: its default one)."""
    if isinstance(source, Nest):
        return source.create_schedule
    if callable(source) and not isinstance(source, Schedule):
        return source  # a factory, e.g. lambda: acc.fuse(...)
    if isinstance(source, Schedule):
        if len(source.nests) != 1:
            raise TypeError("schedules: for a fused schedule, pass a function that builds it "
                            "(e.g. lambda: acc.fuse(s0, s1)), so each example starts from a fresh one")
        return lambda: copy_schedule(source)
    raise TypeError(f"nest_or_schedule: expected an acc.Nest, an acc.Schedule or a function returning a "
                    f"schedule, got {type(source).__name__}")


def copy_schedule(schedule):
    """A new schedule of the same nest with the same transforms (the original is not touched)."""
    new = schedule.nests[0].create_schedule()
    same = {id(ix): ix for ix in new.get_indices()}
    m = lambda ix: same.get(id(ix), ix)  # noqa: E731
    for op, args, _, _ in schedule._commands:
        if op == "split":
            index, size, inner = args
            same[id(inner)] = new.split(m(index), size)
        elif op == "reorder":
            indices, unsafe = args
            new.reorder(*[m(ix) for ix in indices], unsafe=unsafe)
        elif op == "skew":
            index, ref, small, unsafe = args
            new.skew(m(index), m(ref), small, unsafe=unsafe)
        elif op == "pad":
            index, size = args
            new.pad(m(index), size)
        else:  # pragma: no cover
            raise NotImplementedError(f"copy_schedule: {op}")
    return new


def _extent(schedule, ix) -> Optional[int]:
    try:
        d = schedule.space.dim(ix)

        a = to_affine(d.extent)
        return a.const if a is not None and a.is_const else None
    except Exception:  # a parameterized or unknown extent
        return None


# -- schedules --------------------------------------------------------------------------------

def schedules(nest_or_schedule, *, max_transforms: int = 4, transforms: Sequence[str] = SCHEDULE_TRANSFORMS,
              max_split: int = 8):
    """A hypothesis strategy of legal schedules of a nest.

    `nest_or_schedule`: an acc.Nest (schedules start from its default order), an
    acc.Schedule (examples extend a copy of it), or a function returning a fresh schedule
    (for fused schedules: `lambda: acc.fuse(...)`). Each example applies up to
    `max_transforms` of `transforms` (split, tile, reorder, skew, pad; drawn by
    `choices.draw_transform`) with split/tile sizes 1..`max_split` (and at most 3 past the
    extent) and pads 0..3; transforms accpy refuses are skipped.
    """
    st = hypothesis_strategies()
    unknown = set(transforms) - set(SCHEDULE_TRANSFORMS)
    if unknown:
        raise ValueError(f"transforms: unknown {sorted(unknown)}; choose from {list(SCHEDULE_TRANSFORMS)}")
    if not transforms or max_transforms < 0:
        raise ValueError("transforms: give at least one transform and max_transforms >= 0")
    fresh = _base(nest_or_schedule)
    fresh()  # fail now, not in every example, if it cannot be built

    @st.composite
    def draw(d):
        s = fresh()
        ch = HypothesisChooser(d)
        kinds = weighted_kinds(transforms)
        for _ in range(d(st.integers(0, max_transforms))):
            apply_transform(s, draw_transform(ch, ch.choice(kinds), s.get_indices(), lambda ix: _extent(s, ix),
                                              _parents(s), max_split))
        return s

    return draw()


def _parents(schedule) -> Callable:
    parent = {id(h.index): h.parent for h in schedule._structure()}
    return lambda ix: parent.get(id(ix))


def apply_transform(schedule, transform: Optional[tuple]) -> bool:
    """Apply a transform drawn by `choices.draw_transform` to a live schedule; False (the
    schedule unchanged) when accpy refuses it or there is none."""
    if transform is None:
        return False
    op, *args = transform
    try:
        if op == "split":
            schedule.split(*args)
        elif op == "tile":
            schedule.tile(dict(args[0]))
        elif op == "reorder":
            schedule.reorder(*args[0])
        elif op == "skew":
            a, b, small = args
            schedule.skew(a, b, small)
        elif op == "pad":
            schedule.pad(*args)
    except _REFUSED:
        return False
    return True


# -- plans ------------------------------------------------------------------------------------

def plans(schedule, *, target=None, unroll: bool = True, vectorize: bool = True, parallelize: bool = True,
          caches: int = 2, max_unroll: int = 16, bind: bool = True):
    """A hypothesis strategy of legal plans of `schedule` (an acc.Schedule, or a strategy of them).

    Each example is a plan of a copy of the schedule on `target` (default: this machine) with
    some of: the innermost or another loop vectorized (where the lanes are independent),
    loops of at most `max_unroll` iterations unrolled, an outer loop parallelized (where no
    two threads race), and up to `caches` caches of the arrays the logic reads or writes, at
    random indices, layouts and (sometimes) triggers and column panels (then nothing is
    vectorized). Calls accpy refuses are skipped.

    On a target with a grid (`plan.bind`: blocks and threads; `targets.library.grid_for`), and
    with `bind` (the default), most examples first bind loops to the grid's units, level by
    level in the schedule's order (e.g. some loops to blocks, then some later ones to threads),
    a loop or a tuple of adjacent loops per unit (one unit per axis and level: the first the grid
    lists, so not units that only tensorized plans bind); binds accpy refuses (a loop that
    carries a dependence, more units than the target allows) are skipped, one unit at a time.
    About one example in six draws no bind. Then caches (in the default memory: a copy private
    to one thread, so only at loops inside every bound loop, triggers too) and unrolls are
    drawn as above. Nothing is vectorized or parallelized on such a target, with or without `bind` (its
    loops run at once by `bind`: `vectorize` is refused there, and `parallelize`, accepted,
    would only write an OpenMP pragma into the kernel, where nothing reads it). On other
    targets `bind` changes nothing: the examples are those drawn without it.
    """
    st = hypothesis_strategies()

    target = target if target is not None else Target.HOST
    base = schedule if isinstance(schedule, st.SearchStrategy) else st.just(schedule)
    grid = grid_for(target)
    if grid is not None:
        vectorize = parallelize = False

    @st.composite
    def draw(d):
        s0 = d(base)
        s = copy_schedule(s0) if len(s0.nests) == 1 else s0
        p = s.create_plan(target)
        assert isinstance(p, Plan)
        idx = s.get_indices()
        if grid is not None and bind:
            _draw_bind(d, p, idx, grid)
        arrays_ = [a for n in s.nests for a in n._arrays.values()
                   if isinstance(a, Array) and a.role in (Role.INPUT, Role.INPUT_OUTPUT, Role.CONST)]
        arrays_ = list({id(a): a for a in arrays_}.values())
        # (a grid's caches in the default memory are private to a thread: only inside its bound loops)
        where = _inside_bound(p, idx)
        for _ in range(d(st.integers(0, caches)) if arrays_ and caches and where else 0):
            try:
                kw = {"index": d(st.sampled_from(where))}
                if d(st.booleans()):
                    kw["layout"] = d(st.sampled_from([Array.Layout.FIRST_MAJOR, Array.Layout.LAST_MAJOR]))
                if d(st.integers(0, 3)) == 0:
                    pos = where.index(kw["index"])
                    if pos > 0:
                        kw["trigger_index"] = where[d(st.integers(0, pos - 1))]
                if d(st.integers(0, 3)) == 0:
                    kw["panel_width"] = d(st.sampled_from([2, 3, 8, 16]))  # (refused for 1-D arrays)
                p.cache(d(st.sampled_from(arrays_)), **kw)
            except _REFUSED:
                continue
        # a vectorized or unrolled loop unrolls every loop inside it: keep that code small
        def body_size(ix):
            n = 1
            for inner in idx[idx.index(ix) + 1:]:
                e = _extent(s, inner)
                n = n * e if e is not None else max_unroll + 1
            return n

        # (a vector may not cross a cache's column panels: such plans are refused when built)
        if vectorize and not any(c.panel_width > 1 for c in p.caches) and d(st.booleans()):
            ok = [ix for ix in idx if body_size(ix) <= max_unroll]
            try:
                p.vectorize(idx[-1] if d(st.booleans()) or not ok else d(st.sampled_from(ok)))
            except _REFUSED:
                pass
        if unroll:
            small = [ix for ix in idx if (_extent(s, ix) or max_unroll + 1) * body_size(ix) <= 4 * max_unroll]
            for ix in d(st.lists(st.sampled_from(small), max_size=2, unique_by=id)) if small else []:
                try:
                    p.unroll(ix)
                except _REFUSED:
                    pass
        if parallelize and d(st.booleans()):
            try:
                p.parallelize(d(st.sampled_from(idx[:max(1, len(idx) - 1)])), max_threads=2)
            except _REFUSED:
                pass
        return p

    return draw()


def _inside_bound(plan, idx: list) -> list:
    """The loops of `idx` after every loop `plan` binds (all of them when it binds none): where a
    cache's block (and its trigger) belongs to one unit of the grid."""
    bound = [idx.index(ix) for ixs, _ in plan.bindings for ix in ixs]
    return idx[max(bound) + 1:] if bound else idx


def _draw_bind(d, plan, idx: list, grid) -> None:
    """Bind loops of `plan` (schedule order `idx`) to `grid`'s units, drawn by `d`: none in about one
    example in six; else, for each level of the grid (outermost first), up to one loop or tuple of
    adjacent loops per unit of the level (at least one in all), among a drawn window of the loops
    after those drawn for the levels before (the last level's window: all of them). Each unit is
    bound by its own call, so a refused one (a dependence, a limit) leaves the others."""
    st = hypothesis_strategies()
    if d(st.integers(0, 5)) == 5:
        return
    start, drawn = 0, 0
    for n_level, level in enumerate(grid.levels):
        names = _units_of(grid, level)
        last = n_level == len(grid.levels) - 1
        end = len(idx) if last or start >= len(idx) else len(idx) - d(st.integers(1, len(idx) - start))  # (>= 1 left)
        groups = _draw_groups(d, idx[start:end], len(names), 1 if last and not drawn else 0)
        for group, name in zip(groups, d(st.permutations(names))):
            try:
                plan.bind({group if len(group) > 1 else group[0]: name})
            except _REFUSED:  # (a LimitError is a ValueError)
                continue
        if groups:
            start, drawn = max(idx.index(g[-1]) for g in groups) + 1, drawn + len(groups)


def _units_of(grid, level: str) -> list:
    """The names of `grid`'s units at `level`, one per axis (x first): the first the grid lists for
    that axis (a later one is a special kind, e.g. one only tensorized plans may bind)."""
    first: dict = {}
    for u in grid.units.values():
        if u.level == level:
            first.setdefault(u.axis, u.name)
    return [first[axis] for axis in sorted(first)]


def _draw_groups(d, loops: list, most: int, least: int) -> list:
    """`least`..`most` disjoint groups of `loops` in their order (none if there are no loops): a loop,
    or (about one in three where the next loop is free) it and the next one."""
    st = hypothesis_strategies()
    if not loops:
        return []
    most = min(most, len(loops))
    count = most - d(st.integers(0, most - least))  # (more groups, more often)
    picked = sorted(d(st.lists(st.integers(0, len(loops) - 1), min_size=count, max_size=count, unique=True)))
    groups = []
    for n, k in enumerate(picked):
        free = k + 1 < len(loops) and (n + 1 == len(picked) or picked[n + 1] > k + 1)
        groups.append(tuple(loops[k:k + 2]) if free and d(st.integers(0, 2)) == 2 else (loops[k],))
    return groups


# -- data -------------------------------------------------------------------------------------

def arrays(args, *, max_size: int = 8, int_range: tuple = (-4, 4), float_range: tuple = (-1.0, 1.0)):
    """A hypothesis strategy of input data for a function's `args`: a list with, per argument,
    a numpy array (the array's shape, element type and layout), an int for a runtime
    Dimension (1..`max_size`), a number for a Scalar, a one-element int64 array for an
    OUTPUT dimension. Integers lie in `int_range` (small enough to stay exact), floats in
    `float_range` (bfloat16 arrays: the bit patterns of such values). Values come from a numpy generator seeded by the example (fast for big
    arrays; hypothesis shrinks the sizes and the seed)."""
    st = hypothesis_strategies()

    args = tuple(args)
    for k, a in enumerate(args):
        if not isinstance(a, (Array, Dimension, Scalar, OutputDimension)):
            raise TypeError(f"args[{k}]: expected acc.Array, acc.Dimension or acc.Scalar, got {type(a).__name__}")
    dims = list({id(x): x for a in args if isinstance(a, Array) for x in a.shape if isinstance(x, Dimension)}.values())
    dims += [a for a in args if isinstance(a, Dimension) and all(a is not x for x in dims)]

    @st.composite
    def draw(d):
        sizes = {id(x): d(st.integers(1, max_size)) for x in dims}
        rng = np.random.default_rng(d(st.integers(0, 2 ** 32 - 1)))
        return [value_for(a, sizes, rng, int_range, float_range) for a in args]

    return draw()


def value_for(a, sizes: dict, rng, int_range=(-4, 4), float_range=(-1.0, 1.0)):
    """Random data for one argument (see `arrays`); `sizes` gives runtime dimensions' values."""
    if isinstance(a, Dimension):
        return int(sizes[id(a)])
    if isinstance(a, OutputDimension):
        return np.zeros(1, np.int64)
    if isinstance(a, Scalar):
        t = a.element_type
        if t.is_float:
            return float(rng.uniform(*float_range))
        return int(rng.integers(max(int_range[0], 0 if not t.is_signed else int_range[0]), int_range[1] + 1))
    assert isinstance(a, Array)
    shape = tuple(sizes[id(x)] if isinstance(x, Dimension) else int(x) for x in a.resolved_shape())
    t = a.element_type
    dt = t.dtype
    if t.is_float and dt.kind == "f":
        data = rng.uniform(*float_range, size=shape).astype(dt)
    elif t.is_float:  # bfloat16: its bit patterns (numpy has no such type), of values in float_range

        data = bfloat16_bits(rng.uniform(*float_range, size=shape).astype(np.float32))
    elif t.name == "bool":
        data = rng.integers(0, 2, size=shape).astype(dt)
    else:  # (the range clipped to the type's: int_range may ask for more than int8 holds)
        info = np.iinfo(dt)
        lo, hi = max(int_range[0] if t.is_signed else 0, info.min), min(int_range[1], info.max)
        data = rng.integers(lo, hi + 1, size=shape).astype(dt)
    if a.requested_layout is Array.Layout.LAST_MAJOR:
        data = np.asfortranarray(data)
    return data


