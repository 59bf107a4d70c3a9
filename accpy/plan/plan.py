"""`Plan`: how a schedule runs on a target. Annotations only; lowering applies them."""
from __future__ import annotations

from ..analysis.dependence import check_parallel, check_vector
from ..analysis.logic_check import accesses_of
from ..errors import ScheduleError
from ..ir.expr import as_int
from ..ir.kinds import MAX_UNROLLED_COPIES
from ..nest.array import Array, Role
from ..nest.logic import Index
from ..nest.parameters import has_parameter
from ..nest.recording import Recording
from ..schedule.space import unknown_index
from ..schedule.visualize import points, visualize
from ..targets import Target
from ..targets.library import grid_for, libraries
from ..targets.tensor_unit import resolve_tensorize
from .auto import AutoPlanning
from .bind import Binding_
from .cache import Cache
from .describe import _describe_cache, describe_plan
from .lowering import lowering_request, record_resolved
from .packing import RuntimePacking


class Plan(RuntimePacking, AutoPlanning, Binding_):
    """Annotations of a schedule for a target. Each call is checked and applied at once when
    nothing in it waits for parameter values; it is recorded in any case, and `realize()`
    replays the record on the realized schedule (see accpy/nest/parameters.py)."""

    # -- the public operations: apply now, or wait for parameter values ------------------------
    def unroll(self, index) -> None:
        """Fully unroll the loop of `index` (its trip counts must be compile-time constants)."""
        return self._call("unroll", index)

    def vectorize(self, index, unsafe: bool = False) -> None:
        """Run the loop of `index`, and every loop inside it, on the target's vector registers
        (e.g. 16 x float32 in a 512-bit register, 8 in a 256-bit one).

        The loops inside are unrolled (their extents must be compile-time constants), and
        each statement instance runs on all lanes of `index`: as a vector load/store where
        its access is contiguous along the index, a broadcast where it does not depend on
        it, a gather/scatter (where the target has them) for another constant stride. The
        extent of `index` need not be a multiple of the vector width (the tail is masked). Raises now: a
        fusing index, a target without vector instructions (RuntimeError), inner loops of
        runtime or too large extent (ValueError), a dependence between lanes
        (`ScheduleError`; `unsafe=True` skips that check). The build checks again.
        """
        return self._call("vectorize", index, unsafe=unsafe)

    def kernelize(self, unroll_indices, vectorize_indices=None) -> None:
        """Unroll each of `unroll_indices`, then vectorize `vectorize_indices` (an index or
        a sequence; default: the innermost index). Several vectorize indices nest: the
        outermost one takes the vector lanes and the others are unrolled inside its
        subtree. An index in both lists raises ValueError."""
        return self._call("kernelize", unroll_indices, vectorize_indices)

    def parallelize(self, indices, pin=None, policy: str = "static", max_threads=None, unsafe: bool = False) -> None:
        """Run the loops of `indices` (contiguous, in schedule order) on several threads (OpenMP).

        An index that carries a write conflict (e.g. matmul's k) raises `ScheduleError` naming
        two racing iterations; `unsafe=True` skips that check (and logs a warning)."""
        if not isinstance(indices, (Index, str)) and hasattr(indices, "__iter__"):
            indices = tuple(indices)  # a list, a tuple or any iterable of indices
        return self._call("parallelize", indices, pin=pin, policy=policy, max_threads=max_threads, unsafe=unsafe)

    def cache(self, source, index=None, trigger_index=None, layout=None, max_elements=None, element_type=None,
              thrifty=None, location=None, level=None, trigger_level=None, double_buffer=False,
              double_buffer_location=None, vectorize=None, strategy=None, panel_width=None, locality=None):
        """A local copy of `source`'s active block at a key-slice (see accpy/plan/cache.py).
        `panel_width`: the block's columns stored in panels of that many, each panel's rows one
        after another (a packed GEMM operand). `locality` (0-3, as `prefetch`'s): for a cache in a
        target memory, how near the core its loads keep the source's lines (a hint only)."""
        return self._call("cache", source, index=index, trigger_index=trigger_index, layout=layout,
                          max_elements=max_elements, element_type=element_type, thrifty=thrifty,
                          location=location, level=level, trigger_level=trigger_level,
                          double_buffer=double_buffer, double_buffer_location=double_buffer_location,
                          vectorize=vectorize, strategy=strategy, panel_width=panel_width, locality=locality)

    def tensorize(self, indices, intrinsic=None, **options) -> None:
        """Run the sub-nest spanned by `indices` = (i, j, k) on a tensor instruction: on Gemmini,
        C[i, j] += int32(A[i, k]) * int32(B[k, j]) over tiles of at most 16x16x16 (i: rows of the
        output, j: its columns, k: the reduction), with A and B cached in the SCRATCHPAD and C in
        the ACCUMULATOR. In a fused schedule, a statement reading the accumulator over (i, j)
        (C[i, j] = int8(round(float32(Acc[i, j]) * s)), optional ReLU, or a raw copy) becomes the
        output transfer. Indices, extents and element types are checked now; operand memories and
        access patterns when the package is built (a ValueError says what did not match).

        `options`: keyword arguments the target's tensor unit takes, as Accera names them (e.g.
        the tile shape, the number of passes, element-wise operations before and after; see the
        target library); `intrinsic` may then name the tile shape. A unit whose tiles must cover
        the loops exactly (`exact`) needs extents equal to its shape."""
        return self._call("tensorize", indices, intrinsic=intrinsic, **options)

    def prefetch(self, source, index, distance: int = 1, locality: int = 3, spread=None) -> None:
        """Software prefetch: each iteration of `index`'s loop asks for the cache lines its body
        will touch `distance` iterations later (the accesses outside inner loops: after unrolling
        and vectorizing, usually all of them). `source`: an array (its elements, or those of its
        caches where the body reads a cache) or a cache of this plan (its elements only).
        `locality` as C's __builtin_prefetch (3: keep in every cache level). `spread`: an index
        inside `index` whose loop's iterations share the prefetches out, a few lines each (e.g.
        the rows of the next block of accumulator tiles over the k loop), instead of all of them
        at the top of the body. A hint only: results do not change, and addresses past the data
        are never read."""
        return self._call("prefetch", source, index, distance=distance, locality=locality, spread=spread)

    def _call(self, op, *args, **kwargs):
        if not self._waiting and not self._schedule.is_parameterized and not has_parameter((args, kwargs)):
            result = getattr(self, "_" + op)(*args, **kwargs)  # raises on bad arguments: nothing recorded
            self._commands.add(op, args, kwargs, result)
            return result
        self._waiting = True
        result = None
        if op == "cache":
            # a handle now; the real cache is made when the plan is realized
            result = Cache(self, args[0], kwargs.get("index"), kwargs.get("level"), kwargs.get("trigger_index"),
                           kwargs.get("trigger_level"), kwargs.get("max_elements"), kwargs.get("layout"),
                           kwargs.get("element_type"), kwargs.get("thrifty"), kwargs.get("location"),
                           kwargs.get("double_buffer"))
        self._commands.add(op, args, kwargs, result)
        return result

    def realize(self) -> "Plan":
        """This plan with the parameter values in effect (no parameters left)."""
        if not self._waiting and not self._schedule.is_parameterized:
            return self
        out = Plan(self._schedule.realize(), self._target)

        def apply(_, c):
            real = getattr(out, "_" + c.op)(*c.args, **c.kwargs)
            out._commands.add(c.op, c.args, c.kwargs, real)
            return None, real

        self._commands.replay(apply)
        return out

    def __init__(self, schedule, target=None):
        """A plan of `schedule` for `target` (default: the host); usually made by
        `schedule.create_plan(target)`."""
        if target is None:
            target = Target.HOST
        if not isinstance(target, Target):
            raise TypeError(f"target: expected an acc.Target (e.g. acc.Target.HOST), got {type(target).__name__} "
                            f"{target!r}")
        self._schedule = schedule
        self._target = target._seal()  # the plan's code depends on its values: no assignment from now on
        self._kinds: list = []  # (index handle, "unrolled" | "vectorized"), in request order
        self._caches: list = []
        self._parallel = None
        self._commands = Recording()  # the calls, replayed by realize()
        self._waiting = False  # some call waits for parameter values
        self._tensorized: list = []  # (index handles (i, j, k), intrinsic)
        self._prefetches: list = []  # (source: Array | Cache, index handle, distance, locality)
        self._bindings: list = []  # (index handles, grid unit name) (`bind`)

    def visualize(self, filename=None, *, cache=None, format=None, view=None, title=None):
        """The schedule's picture (see Schedule.visualize) with a cache's active block outlined:
        the iterations of its first key slice (every loop outside the cache's index at its first
        value), whose elements the cache holds at once. `cache`: a Cache of this plan (default:
        the first one; none: the plain schedule)."""
        caches = [c for c in self._caches_in_order()] if cache is None else [cache]
        highlight = None
        if caches:
            c = caches[0]
            space = self.schedule.space
            index = c.index if c.index is not None else space.dims[len(space.dims) - c.level].index
            pos = space.position(index)
            pts = points(self.schedule, "logical")
            first = next(p for p in pts if p.order is not None)
            highlight = {p.box for p in pts if p.box[:pos] == first.box[:pos]}
            title = title or f"cache of {getattr(c.source, 'name', 'a cache')} at {index.name}: its first active block"
        return visualize(self.schedule, filename, format=format, view=view, title=title, highlight=highlight)

    def _caches_in_order(self) -> list:
        return [r for op, _, _, r in self._commands if op == "cache" and isinstance(r, Cache)]

    @property
    def schedule(self):
        """The schedule this plan annotates."""
        return self._schedule

    @property
    def target(self):
        """The target this plan is for."""
        return self._target

    def _kind_of(self, index):
        for ix, k in self._kinds:
            if ix is index:
                return k
        if any(index in ixs for ixs, _ in self._bindings):
            return "bound"
        return None

    def _mark(self, index, kind):
        self._kinds = [(ix, k) for ix, k in self._kinds if ix is not index] + [(index, kind)]

    def _dim_var(self, index, what="index"):
        if not isinstance(index, Index):
            raise TypeError(f"{what}: expected an index of the schedule, got {type(index).__name__} {index!r}")
        k = self._schedule.space.position(index)
        if k is None:
            raise unknown_index(index, [d.index for d in self._schedule.space.dims], what)
        return self._schedule.space.dims[k].var

    def _not_bound(self, index, what: str) -> None:
        if any(index in ixs for ixs, _ in self._bindings):
            raise ValueError(f"{what}: {index.name} is already bound (plan.bind): its iterations run at once")

    def _not_fusing(self, index, what: str) -> None:
        fusing = getattr(self._schedule, "get_fusing_index", None)
        if fusing is not None and index is fusing():
            raise ValueError(f"{what}: {index.name} is the fusing index of a fused schedule; it can be "
                             f"neither vectorized, parallelized nor tensorized")

    def _unroll(self, index) -> None:
        """Fully unroll the loop of `index` (its trip counts must be compile-time constants)."""
        self._dim_var(index)
        self._not_bound(index, "unroll")
        was_vector = self._kind_of(index) == "vectorized"
        kinds = list(self._kinds)
        self._mark(index, "unrolled")
        if was_vector:
            # vectorized indices inside it were part of its subtree; now they form their own lanes
            space = self._schedule.space
            try:
                for ix, k in list(self._kinds):
                    if k == "vectorized" and space.position(ix) > space.position(index):
                        self._vectorize(ix)
            except Exception:
                self._kinds = kinds  # a rejected call leaves the plan as it was
                raise

    def _vectorize(self, index, unsafe: bool = False) -> None:
        """See `vectorize`: the checks that need no lowering, then the mark."""
        from ..lower.vector_check import check_vector_ops  # lower is no layer of plan's: a FACADE

        self._dim_var(index)
        self._not_fusing(index, "vectorize")
        self._not_bound(index, "vectorize")
        if not self._target.vector_isa.has_vectors:
            raise RuntimeError(f"vectorize: target {self._target.name} has no vector instructions accpy can use")
        space = self._schedule.space
        pos = space.position(index)
        outer = [ix for ix, k in self._kinds if k == "vectorized" and ix is not index
                 and space.position(ix) is not None and space.position(ix) < pos]
        if not outer:
            # inside an already vectorized loop the index is unrolled in that loop's subtree,
            # whose checks cover it; its own lanes are never formed
            self._check_vector_subtree(index)
            check_vector(space, pos, f"vectorize({index.name})", unsafe)
            # an operation the lanes need that the target's vector instructions lack: refused now
            check_vector_ops(space, pos, self._target, f"vectorize({index.name})")
        before = list(self._kinds)
        self._mark(index, "vectorized")
        if pos < len(space.dims) - 1 and (self._parallel is not None or self._cache_inside(pos)
                                          or any(c.op == "skew" for c in self._schedule._commands)):
            # after a skew, or inside a parallel loop (kept whole: one parallel region), loops
            # inside may run a number of iterations that depends on the loops outside
            # (triangles, split tails) even though the box's extents are constants, and a
            # cache's copies may land inside the vectorized subtree: only lowering tells; do
            # it now so the error comes from this call, not the build
            try:
                self.lower("vectorize_check")
            except (ScheduleError, ValueError) as e:
                if f"vectorize({index.name})" in str(e):
                    self._kinds = before
                    raise


    def _vectorized_subtrees(self) -> list:
        """Positions of the vectorized loops with loops inside them (their subtrees are unrolled)."""
        space = self._schedule.space
        pos = [space.position(ix) for ix, k in self._kinds if k == "vectorized"]
        return [p for p in pos if p is not None and p < len(space.dims) - 1]

    def _cache_inside(self, pos: int) -> bool:
        """Whether some cache's key-slice lies inside the loop at `pos` (its copies would be in that
        loop's body), or may (a budget cache, placed when lowered)."""
        space = self._schedule.space
        return any(c.index is None or (space.position(c.index) or 0) > pos for c in self._caches)

    def _check_vector_subtree(self, index) -> None:
        """The loops inside a vectorized loop are unrolled: constant extents, bounded copies."""
        space = self._schedule.space
        copies = 1
        for d in space.dims[space.position(index) + 1:]:
            n = as_int(d.extent)
            if n is None:
                raise ValueError(f"vectorize({index.name}): the loop of {d.index.name} inside it has a runtime "
                                 f"extent; the loops inside a vectorized loop are unrolled, so their extents "
                                 f"must be constants (split {d.index.name} by a constant and vectorize inside)")
            copies *= max(n, 1)
            if copies > MAX_UNROLLED_COPIES:
                raise ValueError(f"vectorize({index.name}): the loops inside it run {copies} or more "
                                 f"iterations, more than the {MAX_UNROLLED_COPIES} unrolled copies allowed; "
                                 f"vectorize an inner index")

    def _kernelize(self, unroll_indices, vectorize_indices=None) -> None:
        """See `kernelize`: all of it, or nothing when one of its steps is refused."""
        if not isinstance(unroll_indices, (list, tuple)):
            raise TypeError("unroll_indices: expected a sequence of indices")
        if vectorize_indices is None:
            vectorize_indices = [self._schedule.space.dims[-1].index]
        elif not isinstance(vectorize_indices, (list, tuple)):
            vectorize_indices = [vectorize_indices]
        for v in vectorize_indices:
            if any(v is u for u in unroll_indices):
                raise ValueError(f"kernelize: {v.name} is both unrolled and vectorized")
        for u in unroll_indices:
            self._dim_var(u)
        for v in vectorize_indices:
            self._dim_var(v)
        kinds = list(self._kinds)
        try:
            for u in unroll_indices:
                self._unroll(u)
            # outermost first: the indices inside it are then part of its subtree
            space = self._schedule.space
            for v in sorted(vectorize_indices, key=space.position):
                self._vectorize(v)
        except Exception:
            self._kinds = kinds  # a rejected call leaves the plan as it was
            raise

    # -- parallelism ------------------------------------------------------------------------
    def _parallelize(self, indices, pin=None, policy: str = "static", max_threads=None, unsafe: bool = False) -> None:
        """Run the loops of `indices` (contiguous, in schedule order) on several threads (OpenMP).

        An index on which two threads would touch one element (one of them writing) raises
        `ScheduleError` naming the racing iterations; `unsafe=True` skips that check."""
        if isinstance(indices, Index):
            indices = (indices,)
        if not isinstance(indices, (tuple, list)) or not indices:
            raise TypeError("indices: expected an index or a non-empty tuple of indices")
        if grid_for(self._target) is not None:
            raise ValueError(f"parallelize: target {self._target.name} runs loops at once on its grid: bind them "
                             f"to its units with plan.bind (parallelize is for a CPU's threads)")
        if pin is not None:
            raise ValueError("parallelize: pin= is not supported")
        if policy not in ("static", "dynamic"):
            raise ValueError(f"policy: expected 'static' or 'dynamic', got {policy!r}")
        if max_threads is not None and (not isinstance(max_threads, int) or isinstance(max_threads, bool)
                                        or max_threads <= 0):
            raise ValueError(f"max_threads: expected an integer > 0, got {max_threads!r}")
        order = [d.index for d in self._schedule.space.dims]
        pos = []
        for ix in indices:
            self._dim_var(ix)
            self._not_fusing(ix, "parallelize")
            pos.append(next(k for k, d in enumerate(order) if d is ix))
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ValueError("parallelize: the indices must be contiguous in the schedule's order, and in that order")
        for ix in indices:
            if self._kind_of(ix) is not None:
                raise ValueError(f"parallelize: {ix.name} is already {self._kind_of(ix)}")
        self._check_parallel_races(indices, unsafe)
        threads = self._target.num_threads if max_threads is None else min(max_threads, self._target.num_threads)
        previous, self._parallel = self._parallel, (tuple(indices), policy, max(threads, 1))
        if any(_writes_back(c) for c in self._caches) and not unsafe:
            try:
                self._check_write_backs("parallelize_check")
            except ScheduleError:
                self._parallel = previous
                raise
        if self._vectorized_subtrees():
            # a parallel loop is kept whole (not cut into full tiles and tails): the loops of a
            # vectorized subtree inside it may then run a varying number of iterations; lower
            # now so that this call, not the build, says so
            try:
                self.lower("parallelize_check")
            except (ScheduleError, ValueError) as e:
                if "vectorize(" in str(e):
                    self._parallel = previous
                    names = ", ".join(ix.name for ix in indices)
                    raise ScheduleError(f"parallelize({names}): a parallel loop is not split into full tiles "
                                        f"and a tail, and inside it {e}") from None

    def _check_parallel_races(self, indices, unsafe: bool) -> None:
        """Refuse parallel loops on which two threads would touch one element (one writing),
        e.g. matmul's k: the exact dependence analysis names two racing iterations."""
        space = self._schedule.space
        positions = [space.position(ix) for ix in indices]
        check_parallel(space, positions, f"parallelize({', '.join(ix.name for ix in indices)})", unsafe)

    @property
    def parallel(self):
        """(indices, policy, threads) or None."""
        return self._parallel

    # -- caches ---------------------------------------------------------------------------
    def _cache(self, source, index=None, trigger_index=None, layout=None, max_elements=None, element_type=None,
              thrifty=None, location=None, level=None, trigger_level=None, double_buffer=False,
              double_buffer_location=None, vectorize=None, strategy=None, panel_width=None, locality=None):
        """A local copy of `source`'s active block at a key-slice (checked by `Cache.create`)."""
        c = Cache.create(self, source, index=index, trigger_index=trigger_index, layout=layout,
                         max_elements=max_elements, element_type=element_type, thrifty=thrifty, location=location,
                         level=level, trigger_level=trigger_level, double_buffer=double_buffer,
                         double_buffer_location=double_buffer_location, vectorize=vectorize, strategy=strategy,
                         panel_width=panel_width, locality=locality)
        self._caches.append(c)
        if any(self._cache_inside(p) for p in self._vectorized_subtrees()):
            # the cache's copies may land inside a vectorized subtree, where they may not fit
            # (e.g. a one-element cache filled and reduced into by every lane): lower now so
            # that this call, not the build, says so
            try:
                self.lower("cache_check")
            except (ScheduleError, ValueError) as e:
                if "vectorize(" in str(e):
                    self._caches.remove(c)
                    raise ScheduleError(f"cache of {c.array.name} at index {c.index.name if c.index is not None else '?'}"
                                        f": with it, {e}") from None
        if self._parallel is not None and not self._waiting and _writes_back(c):
            try:
                self._check_write_backs("cache_check")
            except ScheduleError:
                self._caches.remove(c)
                raise
        return c

    _THREADS_MEET = "meets the block of another iteration"  # (lower/cache.py's refusal)

    def _check_write_backs(self, name: str) -> None:
        """Lower now, so that a cache whose written-back blocks meet between the iterations of the
        parallel loop is refused by the call that made it so, not by the build."""
        try:
            self.lower(name)
        except (ScheduleError, ValueError) as e:
            if self._THREADS_MEET in str(e):
                raise ScheduleError(str(e)) from None

    def _prefetch(self, source, index, distance: int = 1, locality: int = 3, spread=None) -> None:
        if isinstance(source, Cache):
            if not any(c is source for c in self._caches):
                raise ValueError(f"prefetch: source is a cache of another plan ({_describe_cache(source)})")
        elif isinstance(source, Array):
            if not self._uses(source):
                raise ValueError(f"prefetch: source: the nest does not access array {source.name}")
        else:
            raise TypeError(f"prefetch: source: expected an acc.Array of the nest or a cache of this plan, "
                            f"got {type(source).__name__} {source!r}")
        self._dim_var(index)
        if isinstance(distance, bool) or not isinstance(distance, int) or distance < 1:
            raise ValueError(f"prefetch: distance: expected a positive int (iterations of {index.name} ahead), "
                             f"got {distance!r}")
        if isinstance(locality, bool) or locality not in (0, 1, 2, 3):
            raise ValueError(f"prefetch: locality: expected 0, 1, 2 or 3 (as __builtin_prefetch), got {locality!r}")
        if spread is not None:
            self._dim_var(spread, "prefetch: spread")
            if self._schedule.space.position(spread) <= self._schedule.space.position(index):
                raise ValueError(f"prefetch: spread: expected an index inside {index.name}'s loop (whose iterations "
                                 f"share out its prefetches), got {spread.name}, which is outside it")
        self._prefetches.append((source, index, distance, locality, spread))

    # -- tensorize ---------------------------------------------------------------------------------
    def _tensorize(self, indices, intrinsic=None, **options) -> None:
        spec = dict(options, intrinsic=intrinsic) if options else intrinsic
        resolved = resolve_tensorize(self._target, spec)
        if resolved is None:
            with_tensor = [lib.name for lib in libraries() if (u := lib.tensor_unit(None)) is not None
                           and u.tensor_intrinsic(None) is not None]
            raise ValueError(f"tensorize: target {self._target.name} has no tensor instructions accpy can use "
                             f"(the target libraries that have some: {', '.join(with_tensor)})")
        _, unit, intr = resolved
        unit = unit.for_intrinsic(intr)
        if not isinstance(indices, (tuple, list)) or len(indices) != len(intr.shape):
            raise ValueError(f"tensorize: indices must be {len(intr.shape)} indices (i, j, k) of the schedule: "
                             f"output rows, output columns, reduction; got {indices!r}")
        space = self._schedule.space
        for ix in indices:
            self._dim_var(ix, "indices")
            self._not_fusing(ix, "tensorize")
        if len({id(ix) for ix in indices}) != len(indices):
            raise ValueError(f"tensorize: the indices {[ix.name for ix in indices]} name a loop twice")
        positions = sorted(space.position(ix) for ix in indices)
        n = len(space.dims)
        if positions != list(range(n - len(indices), n)):
            order = [d.index.name for d in space.dims]
            raise ValueError(f"tensorize: {[ix.name for ix in indices]} must be the innermost loops of the "
                             f"schedule (in any order); the order is {order}")
        for ix, size in zip(indices, intr.shape):
            ext = as_int(space.dim(ix).extent)
            exact = getattr(intr, "exact", False)
            if ext is None or ext > size or (exact and ext != size):
                shown = ext if ext is not None else "a runtime number of"
                raise ValueError(f"tensorize: the loop of {ix.name} runs {shown} iterations; "
                                 f"{intr.name} covers {'exactly' if exact else 'at most'} {size} (split it by {size})")
        k_var = space.dim(indices[2]).var
        for part in space.parts:
            if not any(a.coef(k_var) for a in part.index_map.values()):
                continue  # no reduction loop here: e.g. a fused epilogue, matched when built
            for st in part.statements:
                unit.check_tensorize(st.store, f"tensorize: {st.describe()}")
        if any(any(a is b for a, b in zip(t[0], indices)) for t in self._tensorized):
            raise ValueError("tensorize: these loops are already tensorized")
        self._tensorized.append((tuple(indices), intr))

    def __repr__(self) -> str:
        """The schedule's loop order and every annotation: unrolled / vectorized / parallel
        indices, caches with their levels, tensorize requests, calls waiting for parameters."""
        return describe_plan(self)

    def explain(self) -> str:
        """Why the plan is what it is: for a plan made by `acc.autoschedule`, the dependences and
        bands it found, its candidates with the model's estimates, the measured times and the
        chosen calls (accpy/auto/explain.py); for a plan written by hand, `repr(plan)`."""
        report = getattr(self, "_auto_report", None)
        return report.text() if report is not None else describe_plan(self)

    def tensorize_requests(self) -> list:
        """[(loop vars (i, j, k), description, the tensor unit of its intrinsic)] of the tensorized
        sub-nests, for lowering."""
        return [(tuple(self._dim_var(ix) for ix in ixs), f"tensorize({', '.join(ix.name for ix in ixs)})",
                 resolve_tensorize(self._target, intr)[1].for_intrinsic(intr)) for ixs, intr in self._tensorized]

    def _uses(self, array) -> bool:
        for part in self._schedule.space.parts:
            for st in part.statements:
                if any(b is array.buffer for b, _, _ in accesses_of(st.store)):
                    return True
        return False

    @property
    def caches(self) -> tuple:
        """The caches of this plan, in request order."""
        return tuple(self._caches)

    def loop_annotations(self) -> dict:
        """Loop var -> kind, for the lowering passes."""
        out = {self._dim_var(ix): k for ix, k in self._kinds}
        if self._parallel is not None:
            for ix in self._parallel[0]:
                out[self._dim_var(ix)] = "parallel"
        for ixs, _ in self._bindings:
            out.update((self._dim_var(ix), "bound") for ix in ixs)
        return out

    def lowering_request(self, args=None):
        """What lowering reads of this plan, as plain data (accpy/ir/request.py)."""
        return lowering_request(self, args)

    def lower(self, name: str = "kernel", args=None):
        """The loop IR this plan lowers to: an IR `Function` named `name` (Accera-style view)."""
        from ..lower import lower_function  # lower is no layer of plan's: a FACADE

        request = self.lowering_request(args)
        fn = lower_function(request, name)
        record_resolved(self, request)
        return fn

    def emit_c(self, name: str = "kernel", args=None) -> str:
        """The C code this plan lowers to (for reading, not for building)."""
        from ..codegen.c import emit_function  # codegen is no layer of plan's: a FACADE

        return emit_function(self.lower(name, args))


def _writes_back(cache) -> bool:
    """Whether a cache may store its block back (its array is not read-only)."""
    return cache.role not in (Role.INPUT, Role.CONST)
