"""Caches: local copies of active blocks, inserted at their key-slices.

Runs right after `unswitch`, when every loop's bounds are exact (no padding is left), so
footprints computed from loop bounds touch only real elements. For a cache at index d:
every loop over d is a *site*; the block is the box hull of the elements its body
touches (Fourier–Motzkin over the loop bounds, per array dimension), as affine
functions of the enclosing loops, clamped to the array's bounds (the projections are
rational, so they may reach a little past the elements really touched). Before the site
the block is copied in (if the array is read there, or not certainly all written: see
`_covers_box`), after it written back (mutable arrays only); inside, accesses go to the
cache. A multicache (trigger index t) copies, at each loop over t, every block the inner
sites will visit, into a buffer with one leading dimension per intermediate loop the
blocks move with (packed panels). When the blocks are not one affine function of those
loops (e.g. unswitching cut the site loop into a full tiles piece and a tail), the
multicache holds the trigger slice's block instead: the same elements, as one panel. A
trigger at the cache's own index is an ordinary cache. A `thrifty` cache whose blocks are
already contiguous in the source (same layout and element type) is not made at all.

Guarantees afterwards: each cache is a `Buffer` of role "cache", allocated once at
function level, accessed only inside its sites (and copy loops); results are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..analysis.footprint import (Footprint, cache_is_private, constant_extreme, footprint,
                                  loop_constraints, loops_with_context, prod, site_footprints, site_runs, thrifty_skips)
from ..analysis.polyhedra import ConstraintSet
from ..errors import ScheduleError
from ..ir.kinds import BufferRole, HostMemory, LoopKind
from ..ir.affine import Affine, to_affine
from ..ir.expr import BinOp, Buffer, Cast, Const, Load, Var, as_int, idx_op
from ..ir.stmt import Block, For, If, Store, block
from ..ir.types import ScalarType
from ..ir.visitor import Mutator
from .cache_checks import check_not_spanning_units, check_threads_apart, held_by_tiles
from ..targets.library import grouped_block, libraries_for, memory
from .cache_levels import resolved_level, single_iteration_sites
from .grouped_copy import grouped_copy

# Caches at most this many elements whose copies are unrolled (candidates for registers).
REGISTER_CACHE_ELEMENTS = 512


# -- the pass ---------------------------------------------------------------------------------------

@dataclass
class _CacheInfo:
    cache: object
    source: Buffer
    site_var: Var
    trigger_var: Optional[Var]
    dtype: ScalarType
    layout_last: bool
    target: object = None
    buffer: Optional[Buffer] = None
    lead_vars: list = field(default_factory=list)  # multicache: intermediate loop vars
    lead_lo: list = field(default_factory=list)
    lead_ext: list = field(default_factory=list)
    alias: bool = False  # thrifty: the source serves as the cache
    memory: Optional[str] = None  # a target memory (e.g. "scratchpad"), else host memory
    private: bool = False  # a TEMP living only in this cache: filled with zeros, never written back
    deferred: bool = False  # a CONST source whose data are stored packed as this cache lays them out
    tile: list = field(default_factory=list)  # deferred: the block extents the data are packed by
    group: int = 1  # grouped layout: rows of the second-to-last dimension in groups of this many
    block_rows: int = 1  # grouped layout: rows zero-padded to whole blocks of this many (grouped_block)
    block_cols: int = 1  # grouped layout: columns allocated in whole blocks of this many
    line_rows: bool = False  # rows allocated in whole 64-byte lines (read by a target memory's loads)
    panel: int = 1  # panel_width: columns in panels of this many (Buffer.panel)
    parallel_vars: frozenset = frozenset()  # the loops the plan runs in parallel
    shared: bool = False  # in the memory a grid's block shares (HostMemory.SHARED)
    across: frozenset = frozenset()  # (shared) loops whose units fill it together: its block spans them


def elements_per_group(request, dtype: ScalarType, target) -> int:
    """Elements of `dtype` per group of a grouped cache (`request`: its CacheRequest): the bytes it
    names, else the group the target's instructions read (its libraries' `operand_group`: the
    largest), else one element (no instruction reads groups of `dtype`: plain first-major)."""
    size = request.group_bytes
    if size is None and target is not None:
        size = max((g for lib in libraries_for(target) if (g := lib.operand_group(target, dtype))), default=None)
    return max(1, (size or 0) // max(1, dtype.bits // 8))


def cache_loop_vars(request) -> set:
    """Loop vars that caches attach to (their loops must survive simplification)."""
    space = request.space
    n = len(space.dims)
    out = set()
    for c in request.caches:
        if c.budget:
            out.update(space.vars)
            continue
        out.add(space.dims[n - c.level].var)
        if c.memory is not None:
            # a target-memory cache groups the pieces of its site loop that are consecutive
            # siblings: the loops around the site stay, so that pieces of different outer
            # iterations (a one-iteration tail loop) are never taken for one key-slice
            out.update(d.var for d in space.dims[:n - c.level])
        if c.trigger_level is not None:
            # the loops between trigger and site index a multicache's panels
            out.update(d.var for d in space.dims[n - c.trigger_level:n - c.level + 1])
    return out


def insert_caches(stmt, request, symbols, owners=None):
    """Returns (stmt, [cache buffers], {buffer: (loop var, inside)}) with every requested
    cache inserted. A multicache is filled inside the body of its trigger loop (once per
    iteration: inside=True); any other cache right before its site loop (inside=False)."""
    space = request.space
    n = len(space.dims)
    by_key = {c.key: c for c in request.caches}
    # level 0 (a budget below every key-slice's block): each iteration is its own key-slice,
    # as a loop of one iteration around the innermost loops' bodies (Accera's budget caches do so)
    single = None
    if any(c.budget for c in request.caches) and n:
        v0 = Var("single")
        single = (single_iteration_sites(stmt, space.dims[-1].var, v0), v0)
    caches = sorted(request.caches, key=lambda c: -resolved_level(c, by_key, stmt, space, symbols, single))
    if single is not None and any(resolved_level(c, by_key, stmt, space, symbols, single) == 0 for c in caches):
        stmt = single[0]
    buffers: dict = {}
    out_bufs = []
    fills: dict = {}
    held: set = set()
    for c in caches:
        if held_by_tiles(c, request.target):
            held.add(c.key)
            continue  # the tensor unit's pass places it (its tiles' fragments)
        if c.outer in held:
            raise ScheduleError(f"cache of {c.array_name}: its source is a cache in {by_key[c.outer].memory!r}, "
                                f"which the tensor unit's tiles hold; cache the array itself")
        level = resolved_level(c, by_key, stmt, space, symbols, single)
        site_var = space.dims[n - level].var if level > 0 else single[1]
        trig_var = space.dims[n - c.trigger_level].var if c.trigger_level is not None else None
        if trig_var is site_var:
            trig_var = None  # triggered at its own key-slice: one block per slice, an ordinary cache
        source = buffers[c.outer] if c.outer is not None else c.source
        info = _CacheInfo(c, source, site_var, trig_var, c.element_type or source.dtype, bool(c.layout_last),
                          request.target)
        info.memory = c.memory if c.memory is not None and memory(c.memory) is not None else None
        info.parallel_vars = frozenset(v for v, k in request.kinds.items() if k in (LoopKind.PARALLEL, LoopKind.BOUND))
        info.shared, info.across = c.shared, frozenset(c.across)
        info.deferred = c.deferred
        if c.grouped and source.rank >= 2:
            info.group = elements_per_group(c, info.dtype, request.target)
            rows, cols = grouped_block(request.target, info.dtype) if request.target is not None else (1, 1)
            info.block_rows, info.block_cols = _lcm(info.group, rows), cols
        info.panel = c.panel_width
        # a host cache that a target memory's instructions read (e.g. tile loads of A): rows of
        # whole cache lines, so that no row of a block those instructions load spans two lines
        info.line_rows = info.memory is None and any(
            o.outer == c.key and o.memory is not None and memory(o.memory) is not None for o in request.caches)
        stmt = _apply(stmt, info, symbols)
        if info.deferred:
            buffers[c.key] = info.buffer if info.buffer is not None else info.source
            continue  # a packed constant: nothing to allocate or fill
        if info.buffer is not None:
            buffers[c.key] = info.buffer
            out_bufs.append(info.buffer)
            if owners is not None:
                owners[info.buffer] = c
            c.buffer = info.buffer
            # (_apply may have turned a multicache into an ordinary cache at its trigger)
            fills[info.buffer] = ((info.trigger_var, True) if info.trigger_var is not None
                                  else (space.dims[-1].var, True) if level == 0 else (info.site_var, False))
        elif info.alias:
            buffers[c.key] = info.source  # a thrifty cache that needed no copy
    return stmt, out_bufs, fills


class _NoPanels(ScheduleError):
    """A multicache's blocks are not one affine function of the loops between trigger and site."""


def _apply(stmt, info: _CacheInfo, symbols):
    if info.trigger_var is None:
        return _apply_once(stmt, info, symbols)
    try:
        return _apply_once(stmt, info, symbols)
    except _NoPanels:
        # e.g. unswitching cut the site loop into pieces (full tiles, a tail) whose blocks
        # start at unrelated places: hold the trigger slice's block instead (the same
        # elements as all its panels together), filled where the trigger slice starts
        info.site_var, info.trigger_var = info.trigger_var, None
        info.lead_vars, info.lead_lo, info.lead_ext = [], [], []
        return _apply_once(stmt, info, symbols)


def _apply_once(stmt, info: _CacheInfo, symbols):
    # 1. analyse every site: blocks, the buffer's shape
    if info.deferred and (info.memory is not None or info.trigger_var is not None):
        raise ScheduleError(f"deferred_layout of {info.source.name}: its cache must be an ordinary cache in "
                            f"host memory (no trigger, no target memory)")
    if info.memory is not None:
        return _apply_target(stmt, info, symbols)
    one_slice = info.trigger_var is None and not info.deferred  # site loop pieces: one block (_Rewrite)
    blocks = site_footprints(stmt, info.site_var, info.source, symbols, group_pieces=one_slice, across=info.across)
    if not blocks:
        return stmt
    if info.deferred:
        return _apply_deferred(stmt, info, blocks, symbols)
    if thrifty_skips(info, blocks):
        info.alias = True  # the source itself serves as the cache: no copies at all
        return stmt
    rank = info.source.rank
    shape = [max(b.ext_max[k] for b in blocks) for k in range(rank)]
    # rows a whole number of vectors long: vector slots never straddle two rows (registers)
    isa = info.target.vector_isa.shape(info.dtype) if info.target is not None else None
    if isa is not None and shape and not info.layout_last and shape[-1] > 1 and info.group == 1:
        shape[-1] = -(-shape[-1] // isa.lanes) * isa.lanes
    line = 64 // max(1, info.dtype.bits // 8)  # elements per cache line
    if info.line_rows and rank >= 2 and not info.layout_last and info.group == 1 and info.panel <= 1:
        shape[-1] = -(-shape[-1] // line) * line
    g = info.group
    if g > 1:
        # whole groups of rows, whole blocks of the instructions that read the cache
        shape[-2] = -(-shape[-2] // info.block_rows) * info.block_rows
        shape[-1] = -(-shape[-1] // info.block_cols) * info.block_cols
    if info.panel > shape[-1] > 0:  # no panel wider than the block's rows: a wider one would only pad them
        info.cache.notes.append(f"panel_width={info.panel} clamped to {shape[-1]}: the block's rows are "
                                  f"{shape[-1]} long")
        info.panel = shape[-1]
    if info.panel > 1:  # whole panels
        shape[-1] = -(-shape[-1] // info.panel) * info.panel
    lead_shape = []
    if info.trigger_var is not None:
        lead_shape = _multicache_leads(stmt, info, blocks, symbols)
    full_shape = lead_shape + shape
    strides = _strides(full_shape, lead=len(lead_shape), last_major=info.layout_last)
    panel_stride = 0
    if g > 1:  # a group row holds `g` rows interleaved: [r // g][c][r % g]
        strides[-2], strides[-1] = shape[-1] * g, g
    if info.panel > 1:  # in panels of P columns: [c // P][r // g][c % P][r % g]
        strides[-2], strides[-1], panel_stride = info.panel * g, g, shape[-2] * info.panel
    name = f"{info.source.name}_cache"
    info.buffer = Buffer(name, info.dtype, tuple(Const(s) for s in full_shape), tuple(Const(s) for s in strides),
                         role="cache", memory=HostMemory.SHARED if info.shared else "local", group=g,
                         panel=info.panel, panel_stride=panel_stride)
    # 2. rewrite sites (and, for a multicache, copy at the trigger loops)
    return _Rewrite(info, symbols).visit(stmt)


def _apply_deferred(stmt, info: _CacheInfo, blocks, symbols):
    """A CONST source with a deferred layout: its data, packed now block after block (each in the
    cache's layout), replace the cache; the sites read the packed constant, nothing is copied."""
    import numpy as np

    src = info.source
    rank = src.rank
    tile = [max(b.ext_max[k] for b in blocks) for k in range(rank)]
    for b in blocks:
        for k in range(rank):
            a = b.lo_aff[k]
            if a is None or a.const % tile[k] or any(c % tile[k] for _, c in a.terms):
                where = "not a single affine position" if a is None else f"at {a}"
                raise ScheduleError(
                    f"deferred_layout of {src.name}: the cache's blocks ({' x '.join(map(str, tile))}) must tile "
                    f"the array, but a block starts {where} in dimension {k}, not at a multiple of {tile[k]}")
    n = [int(to_affine(x).const) for x in src.shape]
    tiles = [-(-n[k] // tile[k]) for k in range(rank)]
    padded = np.zeros([t * e for t, e in zip(tiles, tile)], dtype=src.data.dtype)
    padded[tuple(slice(0, x) for x in n)] = src.data
    split = padded.reshape([v for t, e in zip(tiles, tile) for v in (t, e)])
    packed = split.transpose(list(range(0, 2 * rank, 2)) + list(range(1, 2 * rank, 2)))
    if info.dtype is not src.dtype:
        packed = packed.astype(info.dtype.dtype)
    full = tiles + tile
    strides = _strides(full, lead=rank, last_major=info.layout_last)
    info.tile = tile
    info.buffer = Buffer(f"{src.name}_packed", info.dtype, tuple(Const(x) for x in full),
                         tuple(Const(x) for x in strides), role="const", data=np.ascontiguousarray(packed))
    return _Rewrite(info, symbols).visit(stmt)


def _apply_target(stmt, info: _CacheInfo, symbols):
    """A cache in a target memory: its key-slice is all the pieces of its index's loop under one
    iteration of the enclosing loops (unswitching may have cut the loop, e.g. a fused schedule's
    f into one loop per nest): one block, filled before the first piece, written after the last."""
    if info.trigger_var is not None:
        raise ScheduleError(f"cache of {info.source.name} in {info.memory}: triggers (multicaches) are not "
                            f"supported in target memories")
    sites = loops_with_context(stmt, info.site_var, group_pieces=True)
    blocks = [b for b in (footprint(s, enc, info.source, symbols) for s, enc in sites) if b is not None]
    if not blocks:
        return stmt
    shape = [max(b.ext_max[k] for b in blocks) for k in range(info.source.rank)]
    info.private = info.source.role == BufferRole.TEMP and cache_is_private(stmt, info, sites, blocks)
    info.buffer = Buffer(f"{info.source.name}_cache", info.dtype, tuple(Const(x) for x in shape),
                         tuple(Const(x) for x in _strides(shape, 0, False)), role="cache", memory=info.memory)
    return _Rewrite(info, symbols).visit(stmt)


def _strides(shape, lead: int, last_major: bool) -> list:
    n = len(shape)
    strides = [0] * n
    acc = 1
    block_dims = list(range(lead, n))
    order = block_dims if last_major else list(reversed(block_dims))
    for d in order:
        strides[d] = acc
        acc *= max(shape[d], 1)
    for d in reversed(range(lead)):
        strides[d] = acc
        acc *= max(shape[d], 1)
    return strides


def _multicache_leads(stmt, info, blocks, symbols) -> list:
    """Leading dims of a multicache: the loops between trigger and site the blocks move with."""
    lo_vars = set()
    for b in blocks:
        for a in b.lo_aff:
            if a is None:
                raise _NoPanels(f"cache of {info.source.name}: multicache blocks must start at affine positions")
            lo_vars.update(a.vars)
    between = _loops_between(stmt, info.trigger_var, info.site_var)
    leads = [v for v in between if v in lo_vars]
    info.lead_vars = leads
    # constant hull of each lead loop's range
    info.lead_lo, info.lead_ext = [], []
    for v in leads:
        los, his = [], []
        for f, enclosing in loops_with_context(stmt, v):
            cons = ConstraintSet([c for e in enclosing for c in loop_constraints(e)] + [Affine.var(x) for x in symbols])
            lo, hi = constant_extreme(f.lo, cons, False), constant_extreme(f.hi, cons, True)
            if lo is None or hi is None:
                raise _NoPanels(f"cache of {info.source.name}: the range of the multicache's loop {v.name} "
                                f"must be bounded by constants")
            los.append(lo)
            his.append(hi)
        info.lead_lo.append(min(los))
        info.lead_ext.append(max(his) - min(los))
    return list(info.lead_ext)


def _loops_between(stmt, outer: Var, inner: Var) -> list:
    """Vars of the loops strictly between loops over `outer` and `inner`, outermost first."""
    found: list = []
    for _, enc in loops_with_context(stmt, inner):
        chain = [f.var for f in enc if isinstance(f, For)]
        if outer in chain:
            for v in chain[chain.index(outer) + 1:]:
                if v not in found:
                    found.append(v)
    return found


class _Rewrite(Mutator):
    def __init__(self, info: _CacheInfo, symbols):
        self.info, self.symbols, self.enclosing = info, symbols, []

    def visit_Block(self, b: Block):
        info = self.info
        if info.trigger_var is not None or info.deferred:
            return self.generic_visit(b)
        # the pieces unswitching cut the site loop into (full and partial row blocks, a fused
        # schedule's f): one key-slice, filled before the first, written after the last
        out = []
        for x in site_runs(b.stmts, info.site_var):
            if not isinstance(x, list):
                out.append(self.visit(x))
                continue
            site = Block(tuple(x))
            blk = footprint(site, self.enclosing, info.source, self.symbols, info.across)
            if blk is None:
                out.extend(x)
            else:
                out.extend([*self._copy_in(blk), _RedirectAccesses(info, blk).visit(site), *self._write_back(blk)])
        return block(*out)

    def visit_If(self, s: If):
        # the taken branch's affine condition is context for the footprints inside it (e.g. a
        # parallel loop's full tiles, guarded by `j < 3` instead of split off as a loop)
        self.enclosing.append(s)
        then = self.visit(s.then)
        self.enclosing.pop()
        orelse = self.visit(s.orelse) if s.orelse is not None else None
        if then is s.then and orelse is s.orelse:
            return s
        return If(s.cond, then, orelse)

    def visit_For(self, f: For):
        info = self.info
        if f.var is info.site_var:
            blk = footprint(f, self.enclosing, info.source, self.symbols, info.across)
            if blk is None:
                return f
            check_not_spanning_units(info, f, blk)
            body = _RedirectAccesses(info, blk).visit(f)
            if info.trigger_var is not None or info.deferred:
                return body  # copies happen at the trigger loop (none: a packed constant)
            return block(*self._copy_in(blk), body, *self._write_back(blk))
        if info.trigger_var is not None and f.var is info.trigger_var:
            self.enclosing.append(f)
            inner = self.visit(f.body)
            self.enclosing.pop()
            new = For(f.var, f.lo, f.hi, block(*self._multicopy(f, inner)), f.kind, f.attrs)
            return new
        self.enclosing.append(f)
        body = self.visit(f.body)
        self.enclosing.pop()
        if body is f.body:
            return f
        return For(f.var, f.lo, f.hi, body, f.kind, f.attrs)

    # -- copies ---------------------------------------------------------------------------
    def _copy_nest(self, exts, make_body, small: bool, starts=None, simd: bool = False):
        """Loops over a block's elements (`starts` (default 0) to `exts` per dimension); `simd`:
        the innermost one left to the C compiler's vectorizer (`#pragma omp simd`)."""
        vs = [Var(f"{self.info.source.name}_c{k}") for k in range(len(exts))]
        body = make_body(vs)
        for k in reversed(range(len(exts))):
            kind = "simd" if simd and k == len(exts) - 1 else "serial"
            if small:
                kind = "vectorized" if k == len(exts) - 1 and self._vectorizable_copy() else "unrolled"
            body = For(vs[k], starts[k] if starts else Const(0), exts[k], body, kind)
        return body

    def _vectorizable_copy(self) -> bool:
        src = self.info.source
        last = to_affine(src.strides[-1]) if src.strides else None
        target = self.info.target
        return (target is not None and target.vector_isa.shape(self.info.dtype) is not None
                and self.info.dtype is src.dtype
                and last is not None and last.is_const and last.const == 1 and not self.info.layout_last
                and self.info.panel == 1)  # (a vector may not cross column panels)

    def _small(self) -> bool:
        if self.info.memory is not None or self.info.shared:
            return False
        return prod(int(to_affine(s).const) for s in self.info.buffer.shape) <= REGISTER_CACHE_ELEMENTS

    def _exts(self, blk):
        return [idx_op("add", idx_op("sub", hi, lo), Const(1)) for lo, hi in zip(blk.lo, blk.hi)]

    def _copy_in(self, blk, lead_vals=()):
        info = self.info
        if not blk.reads and blk.full_overwrite:
            return []
        src = info.source
        if info.private:
            return [self._copy_nest(self._exts(blk), lambda vs: Store(info.buffer, tuple(vs), Const(0, info.dtype)),
                                    False)]

        def body(vs):
            val = Load(src, tuple(idx_op("add", lo, v) for lo, v in zip(blk.lo, vs)))
            if info.dtype is not src.dtype:
                val = Cast(val, info.dtype)
            return Store(info.buffer, tuple(lead_vals) + tuple(vs), val)

        if info.group > 1 or info.panel > 1:
            return [grouped_copy(self.info, self._exts(blk), body, self._copy_nest)]
        return [self._copy_nest(self._exts(blk), body, self._small())]

    def _write_back(self, blk):
        info = self.info
        if not blk.writes or info.source.role in (BufferRole.INPUT, BufferRole.CONST) or info.private:
            return []
        check_threads_apart(self.info, self.enclosing, blk)
        src = info.source

        def body(vs):
            val = Load(info.buffer, tuple(vs))
            if info.dtype is not src.dtype:
                val = Cast(val, src.dtype)
            return Store(src, tuple(idx_op("add", lo, v) for lo, v in zip(blk.lo, vs)), val)

        return [self._copy_nest(self._exts(blk), body, self._small())]

    def _multicopy(self, trig: For, inner_body):
        """At each trigger iteration: copy every block the inner sites will use."""
        info = self.info
        blk_all = footprint(trig, self.enclosing, info.source, self.symbols)  # the trigger-level hull
        if blk_all is None:
            return [inner_body]
        # the block at a site, as a function of the lead vars (identical formula at every site)
        site_blocks = site_footprints(trig.body, info.site_var, info.source, self.symbols, self.enclosing + [trig])
        if not site_blocks:
            return [inner_body]
        # the most general formula (most variables) must agree with every site's own origin
        ref = max(site_blocks, key=lambda b: sum(len(a.vars) for a in b.lo_aff if a is not None))
        for b in site_blocks:
            for x, y in zip(b.lo_aff, ref.lo_aff):
                if x is None or y is None or not (b.ctx.implies(x - y) and b.ctx.implies(y - x)):
                    raise _NoPanels(f"cache of {info.source.name}: the multicache's blocks start at {x} and {y}, "
                                    f"not one affine function of the loops")
        lead_vars = info.lead_vars
        shape_blk = [int(to_affine(s).const) for s in info.buffer.shape[len(lead_vars):]]
        # per lead combination: block origin (affine in lead vars), extents clipped to the hull
        copies = []
        lvs = [Var(v.name + "_p") for v in lead_vars]
        sub = {v: Affine.var(lv) + lo for v, lv, lo in zip(lead_vars, lvs, info.lead_lo)}
        origin = [a.subs(sub) for a in ref.lo_aff]
        # Each panel is copied only where it meets the trigger slice's hull (which lies inside the
        # array): a lead combination the loops do not visit for this trigger iteration (a skewed
        # or padded range) or a block reaching past the array's start or end copies nothing
        # there. Both ends are clipped: a panel's origin may lie before the hull.
        exts, starts = [], []
        for k, o in enumerate(origin):
            full = Const(shape_blk[k])
            exts.append(BinOp("min", full, idx_op("add", _relative(blk_all.hi[k], o), Const(1)), ScalarType.index))
            start = _relative(blk_all.lo[k], o)
            nonpositive = _is_nonpositive(start) or _before_origin(to_affine(start), lvs, ref.ctx)
            starts.append(Const(0) if nonpositive else BinOp("max", Const(0), start, ScalarType.index))
        src = info.source

        def body(vs):
            val = Load(src, tuple(idx_op("add", o.to_expr(), v) for o, v in zip(origin, vs)))
            if info.dtype is not src.dtype:
                val = Cast(val, info.dtype)
            return Store(info.buffer, tuple(lvs) + tuple(vs), val)

        if (info.group > 1 and as_int(starts[-2]) == 0) or (info.group == 1 and info.panel > 1):
            nest = grouped_copy(info, exts, body, self._copy_nest, starts)
        else:
            nest = self._copy_nest(exts, body, False, starts)
        for lv, ext in reversed(list(zip(lvs, info.lead_ext))):
            nest = For(lv, Const(0), Const(ext), nest)
        copies.append(nest)
        return copies + [inner_body]


def _lcm(a: int, b: int) -> int:
    from math import gcd

    return a * b // gcd(a, b)


def _relative(bound, origin: Affine):
    """`bound` - `origin` as an index expression (affine when `bound` is)."""
    a = to_affine(bound)
    if a is not None:
        return (a - origin).to_expr()
    return idx_op("sub", bound, origin.to_expr())  # (a min / max, e.g. clamped to the array's end)


def _is_nonpositive(e) -> bool:
    a = to_affine(e)
    return a is not None and a.is_const and a.const <= 0


def _before_origin(a, lead_vars, ctx) -> bool:
    """Whether the affine `a` (a hull's start less a panel's origin) is <= 0 for every iteration:
    its lead loop counters (from 0 up) count against it, the rest is bounded by the loops' `ctx`."""
    if a is None or ctx is None or any(c > 0 for v, c in a.terms if v in lead_vars):
        return False
    rest = Affine([(v, c) for v, c in a.terms if v not in lead_vars], a.const)
    return ctx.implies(-rest)


class _RedirectAccesses(Mutator):
    """Inside a site: accesses to the source go to the cache, relative to the block's origin."""

    def __init__(self, info: _CacheInfo, blk: Footprint):
        self.info = info
        self.blk = blk

    def _index(self, indices):
        info = self.info
        if info.deferred:  # the packed constant: which block, then where in it
            tiles = [Affine([(v, c // e) for v, c in a.terms], a.const // e).to_expr()
                     for a, e in zip(self.blk.lo_aff, info.tile)]
            return tuple(tiles) + tuple(idx_op("sub", ix, o) for ix, o in zip(indices, self.blk.lo))
        lead = [idx_op("sub", v, Const(lo)) for v, lo in zip(info.lead_vars, info.lead_lo)]
        if info.trigger_var is not None:
            origin = [a.to_expr() if a is not None else lo for a, lo in zip(self.blk.lo_aff, self.blk.lo)]
        else:
            origin = self.blk.lo
        return tuple(lead) + tuple(idx_op("sub", ix, o) for ix, o in zip(indices, origin))

    def visit_Load(self, e: Load):
        e = self.generic_visit(e)
        if e.buffer is not self.info.source:
            return e
        val = Load(self.info.buffer, self._index(e.indices))
        return Cast(val, e.buffer.dtype) if self.info.dtype is not e.buffer.dtype else val

    def visit_Store(self, s: Store):
        s = self.generic_visit(s)
        if s.buffer is not self.info.source:
            return s
        value = s.value
        if self.info.dtype is not s.buffer.dtype:
            value = Cast(value, self.info.dtype)
        return Store(self.info.buffer, self._index(s.indices), value, s.reduce)

