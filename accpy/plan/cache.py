"""`Cache`: a plan's request for a local copy of an array's active block (Accera's model).

With loop order (d1, ..., dn), the key-slice of index dp is the set of iterations that
share d1..d(p-1); its level is n - p + 1. The active block of an array at a key-slice
is the smallest box holding every element the slice touches. A cache holds that block
in its own layout: filled when the slice starts, written back (mutable arrays only)
when it ends. The lowering is accpy/lower/cache.py.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.types import ScalarType
from ..nest.array import Array, Role, scalar_type
from ..nest.layouts import GroupedLayout
from ..nest.parameters import UnresolvedParameter
from ..nest.views import ArrayView
from ..targets.library import grid_for, libraries
from ..targets.cache_strategy import AUTO, CacheStrategy
from ..targets.memory_space import MemorySpace


def _buffer_or_none(array):
    try:
        return array.buffer
    except UnresolvedParameter:
        return None  # a handle of a plan still waiting for parameter values


class Cache:
    """The handle `Plan.cache` returns; usable as the source of another (inner) cache."""

    def __init__(self, plan, source, index, level, trigger_index, trigger_level, max_elements, layout,
                 element_type, thrifty, location, double_buffer, panel_width=1, locality=None,
                 double_buffer_location=None):
        """Made by `Plan.cache` (arguments already checked there)."""
        self.plan = plan
        self.source = source  # an Array or an outer Cache
        self.index = index
        self.level = level
        self.trigger_index = trigger_index
        self.trigger_level = trigger_level
        self.max_elements = max_elements
        self.layout = layout  # as given (a tuple of coefficients stays one: Accera's `cache.layout`)
        self.element_type: Optional[ScalarType] = element_type
        self.thrifty = thrifty
        self.location = location
        self.double_buffer = double_buffer
        # where the next step's block waits (double_buffer): None, the cache's own memory (a second
        # buffer there), or PRIVATE (each unit's registers, stored into the one buffer after the step)
        self.double_buffer_location = double_buffer_location
        self.strategy = None  # how the units sharing the cache divide its copy (a CacheStrategy; None: AUTO)
        self.panel_width = panel_width  # columns per panel (1: none)
        self.notes: list = []  # what accpy changed in the request, and why (shown by repr(plan))
        self.locality = locality  # a target memory's loads: how near the core the source's lines stay
        # the IR buffer of an Array source, taken when the cache is made (with the
        # parameter values of its plan in effect)
        self.source_buffer = None if isinstance(source, Cache) else _buffer_or_none(source)

    @classmethod
    def create(cls, plan, source, index=None, trigger_index=None, layout=None, max_elements=None,
               element_type=None, thrifty=None, location=None, level=None, trigger_level=None,
               double_buffer=False, double_buffer_location=None, vectorize=None, strategy=None,
               panel_width=None, locality=None) -> "Cache":
        """A checked Cache of `plan` (what `Plan.cache` makes): every argument validated, the
        index and level (and trigger index and level) resolved from whichever was given."""
        if isinstance(source, ArrayView):
            raise TypeError(f"source: {source!r} is a view; cache the array it views ({source.root.name})")
        if not isinstance(source, (Array, Cache)):
            raise TypeError(f"source: expected an acc.Array or a Cache, got {type(source).__name__}")
        if isinstance(source, Cache) and source.plan is not plan:
            raise ValueError("source: that cache belongs to another plan")
        given = [x is not None for x in (index, level, max_elements)]
        if sum(given) != 1:
            raise ValueError("cache: give exactly one of index, level or max_elements")
        if index is not None and (level is not None or trigger_level is not None):
            raise ValueError("cache: index cannot be combined with level or trigger_level")
        if level is not None and (index is not None or trigger_index is not None):
            raise ValueError("cache: level cannot be combined with index or trigger_index")
        if trigger_index is not None and trigger_level is not None:
            raise ValueError("cache: give at most one of trigger_index and trigger_level")
        if max_elements is not None and (trigger_index is not None or trigger_level is not None):
            raise ValueError("cache: max_elements cannot be combined with a trigger")
        n = len(plan.schedule.space.dims)
        order = [d.index for d in plan.schedule.space.dims]

        def level_of(ix, what):
            plan._dim_var(ix, what)
            return n - next(k for k, d in enumerate(order) if d is ix)

        def check_level(lv, what):
            if not isinstance(lv, (int, np.integer)) or isinstance(lv, bool) or lv < 1 or lv > n:
                raise ValueError(f"{what}: expected an integer level in 1..{n}, got {lv!r}")
            return int(lv)

        if max_elements is not None:
            max_elements = _positive_int(max_elements, "max_elements", "an integer > 0 (elements)")
        thrifty = _flag(thrifty, "thrifty", none=True)
        double_buffer = _flag(double_buffer, "double_buffer")
        if index is not None:
            level = level_of(index, "index")
        elif level is not None:
            level = check_level(level, "level")
            index = order[n - level]
        if trigger_index is not None:
            trigger_level = level_of(trigger_index, "trigger_index")
        elif trigger_level is not None:
            trigger_level = check_level(trigger_level, "trigger_level")
            trigger_index = order[n - trigger_level]
        if trigger_level is not None and level is not None and level > trigger_level:
            raise ValueError(f"cache: the trigger level ({trigger_level}) must be >= the cache level ({level})")
        array = source.array if isinstance(source, Cache) else source
        if (trigger_level is not None or double_buffer) and array.role not in (Role.INPUT, Role.CONST):
            raise ValueError(f"cache: triggers (multicaches) and double_buffer need an INPUT or CONST source; "
                             f"{array.name} is {array.role.name}")
        double_buffer_location = _checked_double_buffer_location(double_buffer_location, double_buffer, location)
        if location is not None and not isinstance(location, MemorySpace):
            raise TypeError(f"location: expected an acc.MemorySpace, got {location!r}")
        strategy = _checked_strategy(strategy, plan.target, location)
        if location is MemorySpace.GLOBAL:
            raise ValueError("cache: a GLOBAL-memory cache is not supported")
        for lib in libraries():
            lib.check_cache_location(plan.target, location)
            if double_buffer:
                lib.check_double_buffer(plan.target, location)
        if layout is not None:
            if isinstance(layout, (tuple, list)):
                _order_of_coefficients(layout, (source.array if isinstance(source, Cache) else source).rank)
                layout = tuple(int(c) for c in layout)
            elif not isinstance(layout, GroupedLayout) and layout not in (Array.Layout.FIRST_MAJOR,
                                                                          Array.Layout.LAST_MAJOR):
                raise ValueError(f"layout: expected Array.Layout.FIRST_MAJOR, LAST_MAJOR, grouped(...) or a "
                                 f"tuple of coefficients, got {layout!r}")
        if element_type is not None:
            element_type = scalar_type(element_type, "element_type")
        if isinstance(layout, GroupedLayout):
            _check_grouped(layout, array, location, element_type or _element_type(source))
        if isinstance(source, Cache):
            outer = source
            if outer.budget != (max_elements is not None):
                raise ValueError("cache: a budget (max_elements) cache can only be nested in another budget cache")
            if outer.budget:
                if outer.max_elements <= max_elements:
                    raise ValueError("cache: an inner budget cache needs a smaller max_elements than its source")
            else:
                if outer.level <= level:
                    raise ValueError(f"cache: a cache of a cache sits at a lower level than its source "
                                     f"(source level {outer.level}, requested {level})")
                if trigger_level is not None and outer.level < trigger_level:
                    raise ValueError(f"cache: the source cache's level ({outer.level}) must be >= this "
                                     f"cache's trigger level ({trigger_level})")
        if not plan._uses(array):
            raise ValueError(f"source: {array.name} is not used by this schedule's logic")
        panel_width, note = _checked_panel_width(panel_width, array, layout, location, max_elements, double_buffer)
        if locality is not None:
            if isinstance(locality, bool) or locality not in (0, 1, 2, 3):
                raise ValueError(f"locality: expected 0, 1, 2 or 3 (as prefetch's), or None, got {locality!r}")
            if location is None or location is MemorySpace.NONE:
                raise ValueError("locality: a hint for the loads into a target memory; give location= too")
        made = cls(plan, source, index, level, trigger_index, trigger_level, max_elements, layout, element_type,
                   thrifty, location, double_buffer, panel_width, locality, double_buffer_location)
        made.strategy = strategy
        made.notes += [note] if note else []
        return made

    @property
    def storage_layout(self):
        """The layout the cache is stored in: FIRST_MAJOR, LAST_MAJOR, a grouped one (`GroupedLayout`),
        or None (the source's); coefficients give the dimension order they describe."""
        if isinstance(self.layout, tuple):
            return _order_of_coefficients(self.layout, len(self.layout))
        return self.layout

    @property
    def array(self):
        """The array this cache (or the cache it copies) finally stands for."""
        s = self.source
        while isinstance(s, Cache):
            s = s.source
        return s

    @property
    def role(self):
        """The role (INPUT, INPUT_OUTPUT, ...) of the cached array."""
        return self.array.role

    @property
    def budget(self) -> bool:
        """True when the cache was placed by an element budget (`max_elements`)."""
        return self.max_elements is not None

    def __repr__(self) -> str:
        """`Cache(source, index=... | level=... | max_elements=...)`."""
        where = (f"index={self.index.name}" if self.index is not None else
                 f"level={self.level}" if self.level is not None else f"max_elements={self.max_elements}")
        src = self.source.name if not isinstance(self.source, Cache) else repr(self.source)
        return f"Cache({src}, {where})"


def _order_of_coefficients(coefficients, rank: int):
    """Array.Layout.FIRST_MAJOR or LAST_MAJOR for a cache layout given as coefficients (element
    strides, one per dimension): strides falling to 1 at the last dimension are first-major,
    rising from 1 at the first last-major. The cache is stored compactly in that order (its
    block's own extents give the strides); other orders raise ValueError (not built)."""
    c = list(coefficients)
    if len(c) != rank or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1 for x in c):
        raise ValueError(f"layout: expected {rank} coefficients (integers >= 1, one per dimension of the "
                         f"source), got {tuple(coefficients)!r}")
    if c[-1] == 1 and all(a > b for a, b in zip(c, c[1:])):
        return Array.Layout.FIRST_MAJOR
    if c[0] == 1 and all(a < b for a, b in zip(c, c[1:])):
        return Array.Layout.LAST_MAJOR
    raise ValueError(f"layout: the coefficients {tuple(c)} are in neither first-major order (falling to 1) "
                     f"nor last-major order (rising from 1); other dimension orders are not built")


def _element_type(source) -> ScalarType:
    """The element type of a cache's source: an array's, or the type the outer cache holds."""
    while isinstance(source, Cache):
        if source.element_type is not None:
            return source.element_type
        source = source.source
    return source.element_type


def _check_grouped(layout, array, location, dtype: ScalarType) -> None:
    """ValueError unless a cache of `array` with elements of `dtype` can take the grouped `layout`."""
    if array.rank < 2:
        raise ValueError(f"layout: {layout!r} groups the rows of a 2-D (or higher) block; {array.name} has "
                         f"rank {array.rank}")
    if location is not None and location is not MemorySpace.NONE:
        raise ValueError(f"layout: a cache in {layout!r} lives in host memory (location= must be left out)")
    size = max(1, dtype.bits // 8)
    if layout.group_bytes is not None and layout.group_bytes % size:
        raise ValueError(f"layout: groups of {layout.group_bytes} bytes hold no whole number of {dtype.name} "
                         f"elements ({size} bytes each); give a multiple of {size}")


def _positive_int(value, what: str, expected: str) -> int:
    """`value` as an int when it is an integer >= 1 (Python's or numpy's, not a bool), else a
    ValueError naming `what`, saying what was `expected` and what came."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{what}: expected {expected}, got {type(value).__name__} {value!r}")
    return int(value)


def _flag(value, what: str, none: bool = False):
    """`value` if it is True or False (or None where `none`), else TypeError naming `what`."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if value is None and none:
        return None
    raise TypeError(f"{what}: expected True or False, got {type(value).__name__} {value!r}")


def _checked_strategy(strategy, target, location):
    """`strategy` as kept on the Cache: None (None or AUTO) or a CacheStrategy for a SHARED cache on
    a target with a grid (its units copy the cache together). ValueError / TypeError otherwise."""
    if strategy is None or strategy is AUTO:
        return None
    if not isinstance(strategy, CacheStrategy):
        raise TypeError(f"strategy: expected an acc.CacheStrategy or acc.AUTO, got {strategy!r}")
    if grid_for(target) is None:  # Accera: only AUTO on a CPU (targets/cache_strategy.py)
        raise ValueError(f"cache: strategy={strategy!r} is for GPU targets; a CPU cache takes only acc.AUTO "
                         f"(the default), as in Accera")
    if location is not MemorySpace.SHARED:
        raise ValueError(f"cache: strategy={strategy!r} divides the copy of a SHARED cache among the threads of a "
                         f"block; this cache's location is {getattr(location, 'name', location)}")
    return strategy


def _checked_double_buffer_location(where, double_buffer, location):
    """`double_buffer_location` as kept on the Cache: None (AUTO, None or the cache's own memory: the
    second buffer sits beside the first) or MemorySpace.PRIVATE (a SHARED cache's next block loaded
    into each unit's registers, then stored into the one shared buffer). ValueError otherwise."""
    if where is None or where is AUTO:
        return None
    if not double_buffer:
        raise ValueError("cache: double_buffer_location requires double_buffer=True")
    if not isinstance(where, MemorySpace):
        raise TypeError(f"double_buffer_location: expected an acc.MemorySpace or acc.AUTO, got {where!r}")
    if where is (location if location is not None else MemorySpace.NONE):
        return None
    if where is MemorySpace.PRIVATE and location is MemorySpace.SHARED:
        return where
    raise ValueError(f"double_buffer_location: expected acc.AUTO, the cache's own location "
                     f"({getattr(location, 'name', location)}) or, for a SHARED cache, PRIVATE; got {where.name}")


def _checked_panel_width(width, array, layout, location, max_elements, double_buffer):
    """`panel_width` checked: columns per panel of a first-major (or grouped) block in host memory,
    and a note when it was clamped.

    A width above the array's columns (its last dimension, where that is a number) is clamped to
    them: no block is wider, and a panel wider than its block only pads it (the cache's rows would
    be `panel_width` long, allocated on every call). The lowering clamps again, to the block
    itself (lower/cache.py), where the block is narrower than the array; both say so in `notes`.
    """
    if width is None:
        return 1, None
    width = _positive_int(width, "panel_width", "a positive int (columns per panel)")
    if array.rank < 2:
        raise ValueError(f"panel_width: panels cut the columns of a 2-D (or higher) block; {array.name} has "
                         f"rank {array.rank}")
    if isinstance(layout, tuple):
        layout = _order_of_coefficients(layout, len(layout))
    if layout is not None and layout is not Array.Layout.FIRST_MAJOR and not isinstance(layout, GroupedLayout):
        raise ValueError(f"panel_width: panels of columns need a FIRST_MAJOR or grouped layout, got {layout!r}")
    if location is not None and location is not MemorySpace.NONE:
        raise ValueError("panel_width: a cache in panels lives in host memory (location= must be left out)")
    if max_elements is not None or double_buffer:
        raise ValueError("panel_width: a cache in panels is placed by index or level, without double_buffer")
    columns = _columns(array)
    if columns is not None and width > columns:
        return columns, (f"panel_width={width} clamped to {columns}: {array.name} has {columns} columns, "
                         f"and a panel wider than its block only pads it")
    return width, None


def _columns(array):
    """The extent of `array`'s last dimension when it is a number (None: a runtime size or a parameter
    still without a value)."""
    try:
        last = array.shape[-1]
    except Exception:  # (a shape waiting for parameter values)
        return None
    return int(last) if isinstance(last, (int, np.integer)) and not isinstance(last, bool) else None
