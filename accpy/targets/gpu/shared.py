"""Caches in a block's shared memory (`plan.cache(..., location=target.MemorySpace.SHARED)`): a
lowering pass of the GPU library, run after the generic cache pass.

A shared cache's block is the union of its threads' blocks (the generic cache pass spans the
threads' loops: CacheRequest.across), and its copies sit where each thread's would, inside the
threads' loops. This pass makes those copies cooperative and ordered:

* a copy's loops are flattened and dealt out to the block's threads: element e goes to thread
  e mod T (T threads), so consecutive threads copy consecutive elements of the fastest
  dimension (coalesced loads and stores);
* a barrier follows each run of fills (every thread sees the whole block before using it) and
  each run of write-backs, and precedes each run of write-backs (every thread has written its
  part) and each fill that follows a use of shared memory not yet closed by a barrier (no thread
  still reads the block being replaced, e.g. an unswitched loop's earlier piece's); a loop whose
  steps fill shared caches ends each step with a barrier. Adjacent barriers are merged.

`double_buffer=True` fills the next step's block while this step computes: into a second buffer
(one barrier a step), or, with `double_buffer_location=PRIVATE`, into each thread's registers (its
share of the copy) stored into the one buffer after the step's barrier (two barriers a step, half
the shared memory).

Then every thread of a block must reach every barrier: a bound loop around a barrier loses its
guard (`if (v < hi)`, units past the loop's end), which goes down to the statements between the
barriers and copies instead; loops and branches around a barrier must not depend on the thread's
indices (GuardError otherwise).
"""
from __future__ import annotations

import dataclasses

from ...errors import ScheduleError

from ...ir.expr import BinOp, Buffer, Call, Cast, Const, Load, UnOp, Var, as_int, idx_op
from ...ir.kinds import HostMemory, LoopKind
from ...ir.stmt import Alloc, Block, Evaluate, For, If, Store, block
from ...ir.types import ScalarType
from ...ir.visitor import Mutator, buffers_of, nodes_of, substitute
from ..grid import ATOMIC, BARRIER, UNIT_ID
from .tiles import is_emulation_scratch


def _shared(b) -> bool:
    return b.memory == HostMemory.SHARED


def _copied(value):
    """The buffer a copy's value is read from (a load, possibly converted), or None."""
    while isinstance(value, Cast):
        value = value.value
    return value.buffer if isinstance(value, Load) else None


def copy_kind(s):
    """"fill" for a nest of loops around one plain store of another buffer's element into a shared
    buffer, "write" for one storing a shared buffer's element elsewhere (a write-back), else None;
    with the loops and the store."""
    loops = []
    while isinstance(s, For) and s.kind != LoopKind.BOUND:
        loops.append(s)
        s = s.body
        while isinstance(s, Block) and len(s.stmts) == 1:
            s = s.stmts[0]
    if not loops or not isinstance(s, Store) or s.reduce is not None:
        return None, loops, s
    src = _copied(s.value)
    if src is None or _shared(src) == _shared(s.buffer):
        return None, loops, s
    return ("fill" if _shared(s.buffer) else "write"), loops, s


def _thread_units(bindings, inner_level_units) -> list:
    """[(unit name, count)] of the threads' units, by axis (x first)."""
    out = [(b.unit, b.extent) for b in bindings if b.unit in inner_level_units]
    return sorted(out, key=lambda u: u[0])


def cooperative(loops, store, threads, strategy=None):
    """The copy `loops` around `store`, dealt out to the block's threads (`threads`: [(unit, count)]):
    element e to thread e mod T (None, "striped": consecutive threads on consecutive elements), or
    ("blocked") each thread one contiguous run of ceil(E / T) elements."""
    total_threads, tid, stride = Const(1), Const(0), Const(1)
    for unit, count in threads:  # x fastest
        tid = idx_op("add", tid, idx_op("mul", Call(UNIT_ID + unit, (), ScalarType.index), stride))
        stride = idx_op("mul", stride, count)
    total_threads = stride
    exts = [idx_op("sub", f.hi, f.lo) for f in loops]
    total = Const(1)
    for e in exts:
        total = idx_op("mul", total, e)
    t = Var(f"{loops[-1].var.name}_t")
    rounds = idx_op("floordiv", idx_op("sub", idx_op("add", total, total_threads), Const(1)), total_threads)
    if strategy == "blocked":
        flat = idx_op("add", idx_op("mul", tid, rounds), t)
    else:
        flat = idx_op("add", idx_op("mul", t, total_threads), tid)
    mapping, inner = {}, Const(1)
    for f, e in reversed(list(zip(loops, exts))):
        mapping[f.var] = idx_op("add", f.lo, idx_op("mod", idx_op("floordiv", flat, inner), e))
        inner = idx_op("mul", inner, e)
    body = If(BinOp("lt", flat, total, ScalarType.bool), substitute(store, mapping))
    return For(t, Const(0), rounds, body, attrs=(("cooperative", True), ("threads", total_threads)))


def _barrier():
    return Evaluate(Call(BARRIER, (), ScalarType.int32))


class _Cooperate(Mutator):
    """Copies of shared caches dealt out to the block's threads, with their barriers. `dirty`: a
    statement since the last barrier read a shared cache (a fill must wait for it)."""

    def __init__(self, threads, strategies=None):
        self.threads = threads
        self.strategies = strategies or {}  # a cache's buffer -> its CacheStrategy value
        self.dirty = False

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        if f.kind == LoopKind.BOUND or _cooperative(f) or not _needs_all(f.body):
            return f
        # a loop whose steps fill shared caches ends each step with a barrier: no thread reads a
        # step's blocks while another already fills the next step's (a barrier at the end of the
        # body, rather than before the fill: PoCL 3.1 miscompiles a barrier right after a loop
        # that holds barriers)
        self.dirty = False
        body = block(*_merge_barriers(list(_stmts(f.body)) + [_barrier()]))
        return For(f.var, f.lo, f.hi, body, f.kind, f.attrs)

    def visit_Block(self, b: Block):
        out, run, run_kind = [], [], None

        def flush():
            if not run:
                return
            if run_kind == "write" or self.dirty:  # all have written / no one still reads the old block
                out.append(_barrier())
            out.extend(run)
            out.append(_barrier())  # the whole block is there / written back
            self.dirty = False
            run.clear()

        for s in b.stmts:
            kind, loops, store = copy_kind(s)
            if kind != run_kind:
                flush()
                run_kind = kind
            if kind is None:
                out.append(self.visit(s))
                if _is_barrier(out[-1]) or (_ends_with_barrier(out[-1])):
                    self.dirty = False
                if any(_shared(x.buffer) for x in nodes_of(s, Load)) and not _ends_with_barrier(out[-1]):
                    self.dirty = True
            else:
                run.append(cooperative(loops, store, self.threads, self.strategies.get(_filled(store))))
        flush()
        return block(*_merge_barriers(out))


def _filled(store):
    """The shared cache a copy's store fills or writes back (the shared side of the copy)."""
    return store.buffer if _shared(store.buffer) else _copied(store.value)


def _stmts(s) -> tuple:
    return s.stmts if isinstance(s, Block) else (s,)


def _ends_with_barrier(s) -> bool:
    """Whether every path through `s` ends with a barrier (a loop whose body does)."""
    if _is_barrier(s):
        return True
    if isinstance(s, Block):
        return bool(s.stmts) and _ends_with_barrier(s.stmts[-1])
    if isinstance(s, For) and s.kind != LoopKind.BOUND:
        return _ends_with_barrier(s.body)
    return False


def _is_barrier(s) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.fn == BARRIER


def _merge_barriers(stmts) -> list:
    out = []
    for s in stmts:
        if _is_barrier(s) and out and _is_barrier(out[-1]):
            continue
        out.append(s)
    return out


def _accessed(stmt, b) -> bool:
    return any(x.buffer is b for x in nodes_of(stmt, Load)) or any(x.buffer is b for x in nodes_of(stmt, Store))


def _bytes(b) -> int:
    n = 1
    for d in b.shape:
        n *= as_int(d)
    return n * max(1, b.dtype.bits // 8)


def _constant(b) -> bool:
    return all(as_int(d) is not None for d in b.shape)


def _has_barrier(s) -> bool:
    return any(_is_barrier(e) for e in nodes_of(s, Evaluate))


def _cooperative(s) -> bool:
    return isinstance(s, For) and s.attr("cooperative", False)


def _needs_all(s) -> bool:
    """Whether every thread of the block must run `s`: it holds a barrier or a cooperative copy."""
    return _has_barrier(s) or any(_cooperative(f) for f in nodes_of(s, For))


class GuardError(ScheduleError):
    """A barrier that some threads of a block would not reach."""


def push_guard(s, cond, threads: frozenset):
    """`s` run only where `cond` holds, except its barriers and cooperative copies, which every thread
    of the block runs: the guard goes down to the statements between them. Loops and branches
    around a barrier must be the same for every thread (no thread var in their bounds or conditions)."""
    if _cooperative(s) or _is_barrier(s):
        return s
    if not _needs_all(s):
        return If(cond, s)
    if isinstance(s, Block):
        return block(*[push_guard(x, cond, threads) for x in s.stmts])
    if isinstance(s, For):
        if s.kind == LoopKind.BOUND:  # an inner thread loop: its own guard is pushed down by the caller
            return For(s.var, s.lo, s.hi, push_guard(s.body, cond, threads), s.kind, s.attrs)
        _uniform((s.lo, s.hi), threads, f"the loop over {s.var.name}")
        return For(s.var, s.lo, s.hi, push_guard(s.body, cond, threads), s.kind, s.attrs)
    if isinstance(s, If):
        _uniform((s.cond,), threads, "a condition")
        return If(s.cond, push_guard(s.then, cond, threads),
                  push_guard(s.orelse, cond, threads) if s.orelse is not None else None)
    if hasattr(s, "body"):
        return dataclasses.replace(s, body=push_guard(s.body, cond, threads))
    raise GuardError(f"a barrier inside {type(s).__name__} cannot be reached by every thread")


def _uniform(exprs, threads, what: str) -> None:
    used = {v for e in exprs for v in nodes_of(e, Var)} & threads
    if used:
        raise GuardError(f"{what} around a shared cache's barrier depends on the thread loop(s) "
                         f"{', '.join(sorted(v.name for v in used))}: the threads of a block would not all reach "
                         f"the barrier; place the cache where its copies are outside such loops and branches")


class _PushGuards(Mutator):
    """Bound loops around barriers: no `if (v < hi)` around the body (every thread runs the barriers);
    the guard goes down to the statements between them."""

    def __init__(self, threads):
        self.threads = threads

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        if f.kind != LoopKind.BOUND or not _needs_all(f.body):
            return f
        cond = BinOp("lt", f.var, f.hi, ScalarType.bool)
        if not (isinstance(f.lo, Const) and f.lo.value == 0):
            cond = BinOp("land", BinOp("ge", f.var, f.lo, ScalarType.bool), cond, ScalarType.bool)
        return For(f.var, f.lo, f.hi, push_guard(f.body, cond, self.threads), f.kind, f.attrs + (("guard", False),))


def _store_buffer(copy: For):
    s = copy
    while isinstance(s, (For, If, Block)):
        s = s.body if isinstance(s, For) else s.then if isinstance(s, If) else s.stmts[0]
    return s.buffer if isinstance(s, Store) else None


class _Slot(Mutator):
    """Accesses of the buffers `pairs` ({buffer: doubled buffer}) go to slot `slot` of their double."""

    def __init__(self, pairs, slot):
        self.pairs, self.slot = pairs, slot

    def visit_Load(self, e: Load):
        d = self.pairs.get(e.buffer)
        return e if d is None else Load(d, (self.slot,) + tuple(self.visit(x) for x in e.indices))

    def visit_Store(self, s: Store):
        s = self.generic_visit(s)
        d = self.pairs.get(s.buffer)
        return s if d is None else Store(d, (self.slot,) + s.indices, s.value, s.reduce)


def _doubled(b):
    span = 1
    for d in b.shape:
        span *= as_int(d)
    return Buffer(f"{b.name}_2", b.dtype, (Const(2),) + b.shape, (Const(span),) + b.strides, role=b.role,
                  memory=b.memory)


class _DoubleBuffer(Mutator):
    """A serial loop whose body starts by filling double-buffered shared caches (barrier, fills,
    barrier, ...): the fills of iteration k + 1 are issued while iteration k computes, the first
    block filled before the loop. A cache of `buffers` fills the other of two buffers (one barrier
    per iteration); a cache of `staged` (double_buffer_location=PRIVATE) loads its next block into
    each thread's registers and stores it into its one buffer after the step's barrier (a second
    barrier)."""

    def __init__(self, buffers, staged=frozenset()):
        self.buffers, self.staged = buffers, staged

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        if f.kind == LoopKind.BOUND or not isinstance(f.body, Block):
            return f
        st = list(f.body.stmts)
        head = 1 if st and _is_barrier(st[0]) else 0
        n = head
        while n < len(st) and _cooperative(st[n]) and _store_buffer(st[n]) in (self.buffers | self.staged):
            n += 1
        if n == head or n >= len(st) or not _is_barrier(st[n]):
            return f
        fills, rest = st[head:n], st[n + 1:]
        pairs = {_store_buffer(c): _doubled(_store_buffer(c)) for c in fills if _store_buffer(c) not in self.staged}
        k, one = f.var, Const(1)
        slot = lambda e: idx_op("mod", idx_op("sub", e, f.lo), Const(2))  # noqa: E731
        nxt = idx_op("add", k, one)
        more = BinOp("lt", nxt, f.hi, ScalarType.bool)
        first = [_Slot(pairs, Const(0)).visit(substitute(c, {k: f.lo})) for c in fills]
        ahead, regs, stores = [], [], []
        for c in fills:
            c_next = substitute(c, {k: nxt})
            if _store_buffer(c) in self.staged:
                reg, load, store = _staged(c_next, f"{_store_buffer(c).name}_next{len(regs)}")
                regs.append(reg)
                ahead.append(load)
                stores.append(store)
            else:
                ahead.append(_Slot(pairs, slot(nxt)).visit(c_next))
        body = [If(more, block(*ahead))] + [_Slot(pairs, slot(k)).visit(x) for x in rest] + [_barrier()]
        if stores:
            body += [If(more, block(*stores)), _barrier()]
        loop = For(f.var, f.lo, f.hi, block(*_merge_barriers(body)), f.kind, f.attrs)
        for reg in regs:  # each thread's registers for its share of the next block
            loop = Alloc(reg, loop, zero=False)
        guard = BinOp("lt", f.lo, f.hi, ScalarType.bool)
        return block(If(guard, block(*first, _barrier())), loop)


def _staged(copy: For, name: str):
    """A cooperative fill `copy` split in two through registers: (the thread's register buffer, the
    loop loading its share of the source into it, the loop storing it into the shared buffer)."""
    body = copy.body  # If(flat < total, Store(shared, ..., value))
    store = body.then if isinstance(body, If) else body
    threads = as_int(copy.attr("threads", None))
    elements = _bytes(store.buffer) // max(1, store.buffer.dtype.bits // 8) if _constant(store.buffer) else None
    if threads is None or elements is None:
        raise ScheduleError(f"cache of {store.buffer.name}: double_buffer_location=PRIVATE needs a block of a size "
                            f"known when the kernel is built (each thread holds its share of the next block in "
                            f"registers); use the default double_buffer_location")
    rounds = (elements + threads - 1) // threads  # the most any thread holds (a tail block holds fewer)
    reg = Buffer(name, store.buffer.dtype, (Const(rounds),), (Const(1),), memory=HostMemory.LOCAL)
    t = (copy.var,)
    load = Store(reg, t, store.value)
    put = Store(store.buffer, store.indices, Load(reg, t))
    wrap = (lambda s: If(body.cond, s)) if isinstance(body, If) else (lambda s: s)  # noqa: E731
    return (reg, For(copy.var, copy.lo, copy.hi, wrap(load), copy.kind, copy.attrs),
            For(copy.var, copy.lo, copy.hi, wrap(put), copy.kind, copy.attrs))


def cooperative_copies(stmt, request, grid):
    """`stmt` with every copy of a shared cache made cooperative, with its barriers, and the guards of
    the bound loops around them moved below the barriers."""
    if not any(c.shared for c in request.caches):
        return stmt
    inner = {u for u, unit in grid.units.items() if unit.level == grid.levels[-1]}
    threads = _thread_units(request.bindings, inner)
    strategies = {c.buffer: c.strategy for c in request.caches if c.shared and c.buffer is not None}
    stmt = _Cooperate(threads, strategies).visit(stmt)
    ahead = [c for c in request.caches if c.shared and c.double_buffer and c.buffer is not None]
    if ahead:
        stmt = _DoubleBuffer(frozenset(c.buffer for c in ahead if not c.staged),
                             frozenset(c.buffer for c in ahead if c.staged)).visit(stmt)
    # (the tensor-core emulation's scratch is not on the device: the OpenCL device checks its own limit)
    sizes = {b.name: _bytes(b) for b in buffers_of(stmt)
             if _shared(b) and _accessed(stmt, b) and not is_emulation_scratch(b)}
    grid.check_shared_memory(request.target, sizes)
    thread_vars = frozenset(v for b in request.bindings if b.unit in inner for v in b.vars)
    return _PushGuards(thread_vars).visit(stmt)


class _Atomic(Mutator):
    """Updates of the buffers `bufs` become atomic calls: `X[e] += v` (or -=) an atomic add,
    `X[e] = max(X[e], v)` (min) an atomic max (min)."""

    def __init__(self, bufs):
        self.bufs = bufs

    def visit_Store(self, s: Store):
        if s.buffer not in self.bufs:
            return s
        target = Load(s.buffer, s.indices)
        if s.reduce in ("add", "sub"):
            v = s.value if s.reduce == "add" else UnOp("neg", s.value, s.value.dtype)
            return Evaluate(Call(ATOMIC + "add", (target, v), s.buffer.dtype))
        v = s.value
        if s.reduce is None and isinstance(v, BinOp) and v.op in ("max", "min"):
            for own, other in ((v.a, v.b), (v.b, v.a)):
                if own == target:
                    return Evaluate(Call(ATOMIC + v.op, (target, other), s.buffer.dtype))
        raise GuardError(f"{s.buffer.name}: the bound units update its elements together (atomically), and "
                         f"here it is written by a plain store (e.g. a cache of {s.buffer.name} copied back): "
                         f"the units would overwrite each other's updates; leave {s.buffer.name} uncached or "
                         f"keep the reduction's loop unbound")


def atomic_updates(stmt, request):
    """`stmt` with the updates that bound units make together (request.atomic) made atomic."""
    return _Atomic(set(request.atomic)).visit(stmt) if request.atomic else stmt
