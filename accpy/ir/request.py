"""What a plan asks lowering to do, as plain data: the iteration space, loop kinds, caches with
resolved levels and IR buffers, tensorize requests and the target. `Plan.lowering_request`
builds it; accpy/lower reads nothing else of the front end."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .expr import Buffer, Const, Var, idx_op
from .types import ScalarType


@dataclass
class CacheRequest:
    """One `plan.cache(...)`: `key` is its position in the plan; `outer` the key of the cache it
    copies from (None: it copies `source`, an array); `level` None for a budget cache
    (`max_elements`), whose level lowering picks (and records in `resolved_level`)."""

    key: int
    source: Optional[Buffer]
    outer: Optional[int]
    array_name: str
    level: Optional[int]
    trigger_level: Optional[int]
    max_elements: Optional[int]
    layout_last: Optional[bool]  # None: the source's own order
    element_type: Optional[ScalarType]
    thrifty: bool
    memory: Optional[str]  # a target library's Memory name, or None: host memory
    deferred: bool  # a CONST source stored packed in this cache's layout
    resolved_level: Optional[int] = None  # a budget cache's level, once lowering picked it
    grouped: bool = False  # rows of the second-to-last dimension kept in groups (Buffer.group)
    group_bytes: Optional[int] = None  # bytes per group (None: the group the target's instructions read)
    panel_width: int = 1  # the block's columns in panels of this many (Buffer.panel)
    locality: Optional[int] = None  # a target memory's loads: how near the core the source's lines stay
    shared: bool = False  # in the memory the units of a grid's block share (filled by them together)
    across: tuple = ()  # (shared) the loop vars of those units: the block is the union over them
    double_buffer: bool = False  # filled one iteration ahead into a second buffer
    strategy: Optional[str] = None  # (shared) how the units divide the copy: "blocked", "striped" (None: auto)
    staged: bool = False  # (double_buffer) the next block waits in each unit's registers, not a second buffer
    buffer: Any = None  # the buffer the cache pass made for it (None: none, e.g. a thrifty alias)
    notes: list = field(default_factory=list)  # what lowering changed in the request, and why (Cache.notes)

    @property
    def budget(self) -> bool:
        """Placed by an element budget (`max_elements`) rather than an index or level."""
        return self.max_elements is not None

    @property
    def placed_level(self) -> Optional[int]:
        """The level the cache sits at (None: a budget cache not placed yet)."""
        return self.level if self.level is not None else self.resolved_level


@dataclass(frozen=True)
class PrefetchRequest:
    """One `plan.prefetch(...)`: in each iteration of loop `var`, the lines that the accesses of
    its body (outside inner loops) will touch `distance` iterations later. The accesses are
    those of `array` and its caches, or of the cache with key `cache_key` only; with `spread`, asked
    for a few at a time in the iterations of that inner loop."""

    array: Optional[Buffer]
    cache_key: Optional[int]
    var: Var
    distance: int
    locality: int
    describe: str  # e.g. "prefetch(B, index=kk, distance=8)", for messages
    spread: Optional[Var] = None  # an inner loop whose iterations share the prefetches out


@dataclass(frozen=True)
class Binding:
    """One `plan.bind` entry: the loops `vars` (outermost first; several share one unit, the first
    varying slowest) run at once on the units `unit` names of the target's grid (e.g. "THREAD_X"),
    `extents` iterations each (index expressions over the function's sizes)."""

    vars: tuple
    unit: str
    extents: tuple

    @property
    def extent(self):
        """The number of units the loops take (the product of their extents)."""
        total = Const(1)
        for e in self.extents:
            total = idx_op("mul", total, e)
        return total


@dataclass
class LoweringRequest:
    """Everything lowering reads. `space`: the schedule's IterationSpace; `kinds`: loop var ->
    LoopKind; `unroll_below`: loop var -> threshold (a split's tail loops run unrolled when
    shorter); `tensorize`: ((i, j, k) loop vars, description, tensor unit) per request; `parallel`:
    (policy, threads) or None; `args`: the function's IR arguments (None: in first-use order);
    `prefetch`: software prefetches (PrefetchRequest)."""

    space: Any
    target: Any = None
    kinds: dict = field(default_factory=dict)
    unroll_below: dict = field(default_factory=dict)
    caches: tuple = ()
    tensorize: tuple = ()
    parallel: Optional[tuple] = None
    args: Optional[tuple] = None
    prefetch: tuple = ()  # of PrefetchRequest
    bindings: tuple = ()  # of Binding (`plan.bind`), in the plan's order
    atomic: tuple = ()  # buffers whose reduction updates the bound units make together (atomically)

    def loop_var(self, level: int) -> Var:
        """The loop var of the key-slice at `level` (1: the innermost loop)."""
        return self.space.dims[len(self.space.dims) - level].var
