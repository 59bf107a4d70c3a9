"""The cost model: candidate recipes for a kernel on a target, each with its estimate.

The families, each general (no kernel is named), plus the recipes the target's libraries propose
(library_recipes.py: dot products, tensor units) and the nest's own order (the baseline):

* **register-blocked contraction** (`kernel.Contraction`: matmuls, batched and transposed ones,
  convolutions): the five-loop blocking of fast GEMMs. An MR x NR tile of the output lives in
  vector registers for the whole (blocked) reduction: MR rows of the loop the broadcast operand
  walks, NR = NV vectors of the unit-stride loop. The register file bounds the tile (MR * NV
  accumulators, NV vectors of the vector operand and one broadcast must fit); the caches bound the
  blocks: KC steps of the reduction per block (the tile's loads and stores amortized over it),
  NC columns of the vector operand per packed block (3/4 of L2, at most 256 columns), MC rows per
  block of rows. The vector operand's block is packed (a cache, in panels of NR columns) when its
  rows are far apart or it outgrows half of L2; with one, each step of the reduction prefetches
  the packed lines 8 steps ahead. Threads take the column blocks (balanced: the NC whose busiest
  thread has the least work), else the rows.
* **ordered loops** (everything else: matrix-vector products, stencils, element-wise nests): the
  loops of each permutable band (bands.py) ordered by memory cost (the loop whose iterations move
  the fewest cache lines innermost), the innermost loop vectorized where its lanes are
  independent and it walks memory with unit stride (a reduction's loop vectorized whole), the
  outermost coincident loop parallel.
* **tiled bands**: tiles of the outermost permutable band of two or more loops; on a band that a
  skew made permutable (a stencil's time loop), time tiles.

With threads, every parallel recipe also comes without its parallel loop, and entering a parallel
loop costs `FORK_JOIN_SECONDS`. Every recipe is estimated on its own transformed schedule
(estimate.py; contractions and library recipes by their own rates); those the checks refuse are
kept with the reason (explain counts them).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Optional

from ..errors import ScheduleError
from ..lower.lanes import subscripts_apart
from .estimate import Estimate, estimate
from .kernel import Kernel
from .library_recipes import library_recipes
from .recipe import CacheStep, Recipe

# what accpy raises when it refuses a plan (RuntimeError: e.g. a target without vector instructions)
_REFUSED = (ScheduleError, ValueError, TypeError, NotImplementedError, RuntimeError)


@dataclass
class Candidate:
    recipe: Recipe
    estimate: Optional[Estimate] = None
    refused: Optional[str] = None  # why accpy's checks refused it

    @property
    def seconds(self) -> float:
        return self.estimate.seconds if self.estimate else math.inf


def has_vectors(kernel: Kernel, target) -> bool:
    """Whether the target's vector ISA has registers for every element type the kernel touches (a
    loop vectorized without them is left to the C compiler, and nothing of the recipe's register
    blocking or prefetching holds)."""
    isa = target.vector_isa
    return isa is not None and all(isa.shape(r.buffer.dtype) is not None for r in kernel.refs)


def lanes_of(target, itemsize: int) -> int:
    return max(1, target.vector_bytes // itemsize)


# -- the register-blocked contraction --------------------------------------------------------------

def register_tiles(target, itemsize: int) -> list:
    """(MR, NV) register tiles that fit the target's vector registers, best first: those whose
    inner step is not load-bound (MR * NV multiply-adds per MR + NV loads, two of each per cycle),
    with at least 12 accumulators to hide the FMA latency, and fewest loads per multiply-add.
    Measured preferences first: 4 x 3 vectors with 8 lanes, 6 x 4 with 16 (8 x 3 for long blocks
    of k, `preferred_tile`)."""
    regs = max(8, target.vector_registers or 16)
    tiles = [(mr, nv) for mr in range(1, 17) for nv in range(1, 7) if mr * nv + nv + 1 <= regs]

    def score(t):
        mr, nv = t
        acc = mr * nv
        return (-min(1.0, acc / (mr + nv)), -min(acc, 12), -(acc / (mr + nv)), -acc)

    return sorted(tiles, key=score)


def preferred_tile(lanes: int, kc: int) -> Optional[tuple]:
    """The register tile measured fastest for this vector width (None: use the model's best)."""
    if lanes == 16:
        return (8, 3) if kc >= 768 else (6, 4)
    if lanes == 8:
        return (4, 3)
    return None


def balanced_nc(N: int, nc_max: int, NR: int, threads: int, lanes: int) -> int:
    """The NC whose busiest thread has the least work when threads take contiguous runs of the N / NC
    column blocks (OpenMP's static schedule); work is counted in NR-wide panels, a narrower tail panel
    costing its vectors' share and a little more. Candidates: multiples of NR up to the cache-sized
    NC, and N split evenly between the threads (513 columns on 2 threads: 257 each, not 64-wide
    blocks shared 5 to 4)."""
    def cost(width):
        tail = width % NR
        return width // NR + (-(-tail // lanes) / (NR // lanes) + 0.1 if tail else 0.0)

    def busiest(nc):
        widths = [min(nc, N - b * nc) for b in range(-(-N // nc))]
        q, r = divmod(len(widths), threads)
        runs, start = [], 0
        for t in range(threads):
            n = q + (1 if t < r else 0)
            runs.append(sum(cost(w) for w in widths[start:start + n]))
            start += n
        return max(runs)

    even = {-(-N // (threads * m)) for m in range(1, 9)}
    cands = set(range(NR, nc_max + 1, NR)) | {nc for nc in even if NR <= nc <= nc_max + NR}
    return min(sorted(cands), key=lambda nc: (busiest(nc), -nc))


def contraction_blocks(kernel: Kernel, target, threads: int, tile: Optional[tuple] = None) -> dict:
    """The block sizes of the register-blocked recipe (module docstring): MR, NV, NR, KC, NC, MC, lanes,
    and whether to pack the vector operand."""
    c = kernel.contraction
    isz = c.out.itemsize
    lanes = lanes_of(target, isz)
    ext = {lp.name: (lp.extent or 1024) for lp in kernel.loops}
    N = ext[c.n]
    M = ext[c.m[-1]] if c.m else 1
    kin = ext[c.k[-1]]
    k_outer = math.prod(ext[x] for x in c.k[:-1])
    KC = max(1, min(kin, 1024))
    mr, nv = tile or preferred_tile(lanes, KC) or register_tiles(target, isz)[0]
    nv = max(1, min(nv, -(-N // lanes)))
    mr = max(1, min(mr, M))
    NR = nv * lanes
    caches = target.cache_bytes or (32768, 524288)
    l2 = caches[1] if len(caches) > 1 else caches[0] * 16
    NC = max(NR, min(max(4 * NR, 256) // NR * NR, (3 * l2 // 4 // (c.b.itemsize * KC * k_outer)) // NR * NR))
    if threads > 1 and N >= 2 * NR * threads:
        NC = balanced_nc(N, NC, NR, threads, lanes)
    MC = 96 if 96 % mr == 0 else 16 * mr
    b_row = max((abs(c.b.stride(x) or 0) for x in c.k), default=0)
    b_bytes = math.prod(ext[x] for x in kernel.names if c.b.uses(x)) * c.b.itemsize
    pack = b_row * c.b.itemsize >= 1024 or b_bytes > l2 // 2
    return dict(MR=mr, NV=nv, NR=NR, KC=KC, NC=NC, MC=MC, lanes=lanes, pack=pack, N=N, M=M, K=kin)


def contraction_recipe(kernel: Kernel, threads: int, b: dict, pack: Optional[bool] = None,
                       parallel_at: int = 0) -> Recipe:
    """The register-blocked recipe of `kernel` (a contraction) with the blocks `b`; with threads, the
    parallel loop is the outermost loop that is not a reduction's (`parallel_at`=1: the next one)."""
    c = kernel.contraction
    pack = b["pack"] if pack is None else pack
    splits, why = [], []
    fresh = kernel.namer()
    origin = {}

    def split(loop, size, of):
        new = fresh(of)
        splits.append((loop, size, new))
        origin[new] = of
        return new

    n_vec = c.n
    n0 = n1 = None
    if b["N"] > b["NR"]:
        n0 = c.n
        if b["NC"] < b["N"] and b["NC"] > b["NR"]:
            n1 = split(c.n, b["NC"], c.n)
        n_vec = split(n1 or c.n, b["NR"], c.n)
    kb = None
    k_inner = list(c.k)
    if b["KC"] < b["K"]:
        kb = c.k[-1]
        k_inner[-1] = split(c.k[-1], b["KC"], c.k[-1])
    m_rows = c.m[-1] if c.m else None
    m_tile = m0 = m1 = None
    if m_rows is not None:
        m1 = m_rows
        if b["MC"] < b["M"] and b["MC"] > b["MR"]:
            m0 = m_rows
            m1 = split(m_rows, b["MC"], m_rows)
        if b["MR"] > 1:
            m_tile = split(m1, b["MR"], m_rows)
    order = [x for x in (n0,) if x] + ([kb] if kb else []) + list(c.outer) + list(c.m[:-1])
    order += [x for x in (m0,) if x] + [x for x in (m1,) if x and x != m0] + [x for x in (n1,) if x]
    order += k_inner + [x for x in (m_tile,) if x] + [n_vec]
    caches, prefetch = [], []
    first_k = k_inner[0]
    if pack and c.b.array is not None:
        at = n1 or first_k
        before = order[:order.index(at)]
        moving = [x for x in before if c.b.uses(origin.get(x, x))]
        trigger = moving[-1] if moving else None
        caches.append(CacheStep(c.b.name, at, trigger, b["NR"] if n1 else None))
        prefetch.append((c.b.name, k_inner[-1], 8))
        why.append(f"{c.b.name} packed per block ({b['KC']} x {b['NC']}): its rows are far apart or it "
                   f"outgrows half of L2")
    if c.out.array is not None:
        caches.append(CacheStep(c.out.name, first_k, None, None))
    why.insert(0, f"{b['MR']} x {b['NR']} tile of {c.out.name} in registers ({b['MR']} rows of {m_rows or '-'} x "
                  f"{b['NV']} vectors of {c.n}), over blocks of {b['KC']} steps of {c.k[-1]}")
    unroll = [m_tile] if m_tile else []
    par = ()
    if threads > 1:
        eligible = [x for x in order if x not in c.k and x != kb and x not in (m_tile, n_vec)]
        if eligible:
            par = (eligible[min(parallel_at, len(eligible) - 1)],)
    params = {k: b[k] for k in ("MR", "NV", "NR", "KC", "NC", "MC")}
    params["pack"] = bool(pack)
    params["threads"] = threads
    if par:
        params["parallel"] = par[0]
    return Recipe("register-blocked contraction", splits=tuple(splits), order=tuple(order), caches=tuple(caches),
                  prefetch=tuple(prefetch), unroll=tuple(unroll), vectorize=n_vec, parallel=par, threads=threads,
                  why=tuple(why), params=params)


def contraction_candidates(kernel: Kernel, target, threads: int) -> list:
    """The model's register-blocked recipes: the preferred tile; the same without (or with) packing;
    with blocks of NR columns only (each tile of the output sweeps the whole reduction against its
    own packed panel, as convolutions like); other register tiles; and with threads, the parallel
    loop one level further in."""
    c = kernel.contraction
    if len(set(c.dtypes)) != 1 or not has_vectors(kernel, target):
        return []  # mixed types (int8 x int8 -> int32): the libraries' dot products, not this FMA tile
    base = contraction_blocks(kernel, target, threads)
    out = [contraction_recipe(kernel, threads, base)]
    out.append(contraction_recipe(kernel, threads, base, pack=not base["pack"]))
    if base["NC"] > base["NR"] and base["N"] > base["NR"]:
        out.append(contraction_recipe(kernel, threads, dict(base, NC=base["NR"])))
    for tile in register_tiles(target, c.out.itemsize)[:4]:
        b = contraction_blocks(kernel, target, threads, tile)
        if (b["MR"], b["NV"]) != (base["MR"], base["NV"]):
            out.append(contraction_recipe(kernel, threads, b))
    if threads > 1:
        out += [contraction_recipe(kernel, threads, base, parallel_at=1),
                contraction_recipe(kernel, threads, dict(base, NC=base["NR"]), parallel_at=1)]
    return out


def contraction_rate(params: dict, kernel: Kernel, target) -> float:
    """The fraction of the FMA peak the register tile's inner step runs at, tails included: 0.9 for
    the measured preferred tile, 0.85 for others (loop overhead), less when the step is load-bound,
    has fewer than 12 accumulators, or reads an unpacked operand whose rows are 1 KiB or more apart;
    less again when the reduction is short (the tile's loads and stores over few steps) and when
    both operands are vectors (no broadcast: every multiply-add loads its own; a depthwise 3x3
    convolution, 112 x 112 x 64, measured 0.53-0.94 ms with such tiles against 0.51-0.53 ms in plain
    vectorized loops, where the tile's estimate was 0.2 ms: a factor 0.3)."""
    mr, nv, NR = params["MR"], params["NV"], params["NR"]
    c = kernel.contraction
    lanes = lanes_of(target, c.out.itemsize)
    base = 0.9 if preferred_tile(lanes, params["KC"]) == (mr, nv) else 0.85
    rate = min(1.0, mr * nv / (mr + nv)) * min(1.0, mr * nv / 12)
    b_row = max((abs(c.b.stride(x) or 0) for x in c.k), default=0) * c.b.itemsize
    if not params.get("pack") and b_row >= 1024:
        rate *= 0.9
    ext = {lp.name: (lp.extent or 1024) for lp in kernel.loops}
    N, M = ext[c.n], (ext[c.m[-1]] if c.m else 1)
    steps = math.prod(ext[x] for x in c.k)
    rate *= steps / (steps + 2)  # the tile loaded and stored once per sweep of the reduction
    if c.a.stride(c.n) == 1:
        rate *= 0.3  # measured: see the docstring
    tail_n = (N % NR) / N if N > NR else 0.0
    tail_m = (M % mr) / M if M > mr else 0.0
    return base * rate * (1 - 0.5 * tail_n) * (1 - 0.3 * tail_m)


def contraction_estimate(params: dict, kernel: Kernel, target, rate: float, copies: float,
                         parallel_trip: int) -> Estimate:
    """Seconds of a register-blocked recipe: its multiply-adds at `rate` of the FMA peak, against
    the streams that feed the tiles: the vector operand's panels (read once per row tile, from the
    cache level its packed block fits in) and the broadcast operand's rows (read once per column
    block; NC = NR re-reads them for every panel), each at its level's bandwidth; plus the copies."""
    c = kernel.contraction
    ext = {lp.name: (lp.extent or 1024) for lp in kernel.loops}
    isz = c.b.itemsize
    lanes = lanes_of(target, c.out.itemsize)
    M = math.prod(ext[x] for x in c.m) * math.prod(ext[x] for x in c.outer) if (c.m or c.outer) else 1
    N = ext[c.n]
    Kt = math.prod(ext[x] for x in c.k)
    caches = list(target.cache_bytes or (32768, 524288))
    bw = [_L2_BW, _L3_BW, _MEM_BW]

    def level(nbytes: float) -> int:
        if len(caches) > 1 and nbytes <= 3 * caches[1] // 4:
            return 0
        if len(caches) > 2 and nbytes <= caches[2] // 2:
            return 1
        return 2

    block_b = params["KC"] * (Kt // max(1, ext[c.k[-1]])) * params["NC"] * isz
    t_b = M * N * Kt * isz / max(1, params["MR"]) / bw[level(block_b)]
    a_bytes = M * Kt * c.a.itemsize
    t_a = a_bytes * max(1, -(-N // params["NC"])) / bw[level(a_bytes)]
    compute = 2.0 * M * N * Kt / (2 * 2 * lanes * rate)
    threads = max(1, min(params.get("threads", 1), parallel_trip))
    work = max(compute, t_b + t_a) / threads + copies / _L2_BW
    bound = "compute" if compute >= t_b + t_a else "operand streams"
    detail = (f"compute {compute / _GHZ / 1e6:.3g} ms, panels {t_b / _GHZ / 1e6:.3g} ms, rows {t_a / _GHZ / 1e6:.3g} ms, "
              f"copies {copies / _L2_BW / _GHZ / 1e6:.3g} ms")
    return Estimate(work / (_GHZ * 1e9), bound, detail)


def unit_estimate(params: dict, kernel: Kernel, parallel_trip: int) -> Estimate:
    """Seconds of a library's recipe: the kernel's operations at `rate` of its unit's
    `ops_per_cycle` (the library's figures, params of its recipe), over its threads."""
    ops = (kernel.points() or 256 ** len(kernel.loops)) * kernel.ops_per_point
    rate = params.get("rate", 0.5)
    threads = max(1, min(params.get("threads", 1), parallel_trip))
    cycles = ops / (params["ops_per_cycle"] * rate) / threads
    return Estimate(cycles / (_GHZ * 1e9), "compute",
                    f"{ops / 1e9:.3g} G operations at {rate:.0%} of {params['ops_per_cycle']} per cycle "
                    f"({params.get('library', 'its library')}'s unit)")


_L2_BW, _L3_BW, _MEM_BW = 32.0, 16.0, 8.0  # bytes per cycle per core (estimate.py's figures)
_GHZ = 2.5


# -- ordered loops ----------------------------------------------------------------------------------

def memory_cost(kernel: Kernel, name: str, line: int = 64) -> float:
    """Cache lines the accesses move per iteration of loop `name` when it is innermost (Kennedy and
    McKinley's loop cost): 0 for an access it does not move, stride * size / line for a short stride,
    1 for a long one; writes count twice."""
    cost = 0.0
    for r in kernel.refs:
        s = r.stride(name)
        if s == 0:
            continue
        w = 2.0 if r.kind != "read" else 1.0
        cost += w * (1.0 if s is None else min(1.0, abs(s) * r.itemsize / line))
    return cost


def ordered_candidates(kernel: Kernel, target, threads: int, bands) -> list:
    """Recipes of the ordered family: loop orders within the bands by memory cost, the innermost loop
    vectorized where it can be (and, in case the checks refuse it, not), the outermost coincident
    loop parallel."""
    out = []
    for order in _orders(kernel, bands)[:3]:
        out.append(_ordered_recipe(kernel, order, target, threads, bands, vectorize=True))
        out.append(_ordered_recipe(kernel, order, target, threads, bands, vectorize=False))
    return out


def reduces_along(kernel: Kernel, loop: str) -> bool:
    """Whether every array written stays put along `loop` (a reduction over it): vectorized whole,
    its vector accumulators then sum across the loop and are reduced once at its end (split into
    short vector loops, each would be reduced at its own end)."""
    return all(r.stride(loop) == 0 for r in kernel.refs if r.kind != "read")


def vector_friendly(kernel: Kernel, loop: str) -> bool:
    """Whether accpy's vectorizer can take `loop` innermost: every array written moves with it at
    unit stride (or not at all), and all of that array's accesses that move with the loop touch the
    same element (a value written in one lane and read in another is a loop-carried dependence the
    vectorizer refuses even where the exact check allows it)."""
    for w in kernel.refs:
        if w.kind == "read":
            continue
        if w.stride(loop) not in (0, 1):
            return False
        lane = kernel.loop(loop).var
        same = [r for r in kernel.refs if r.buffer is w.buffer and r.uses(loop)
                and not subscripts_apart(r.indices, w.indices, lane)]
        if len({tuple(repr(x) for x in r.indices) for r in same}) > 1:
            return False
    return True


def _orders(kernel: Kernel, bands) -> list:
    """Loop orders: each band's members by decreasing memory cost (cheapest innermost), the bands in
    their order; then the same with the two innermost of the last band swapped, and the current order."""
    names = kernel.names
    groups = [[ix.name for ix in band] for band in bands.bands] if bands is not None else [names]
    best = []
    for g in groups:
        best += sorted(g, key=lambda n: (-memory_cost(kernel, n), names.index(n)))
    out = [best]
    if len(groups[-1]) >= 2:
        alt = best[:-2] + [best[-1], best[-2]]
        out.append(alt)
    if names not in out:
        out.append(list(names))
    return out


def _ordered_recipe(kernel: Kernel, order: list, target, threads: int, bands, vectorize: bool) -> Recipe:
    inner = order[-1]
    refs = kernel.refs
    lanes = lanes_of(target, max(r.itemsize for r in refs))
    ext = kernel.loop(inner).extent or 0
    unit = any(r.stride(inner) == 1 for r in refs)
    splits, vec, unroll, why = [], None, [], []
    new_order = list(order)
    if vectorize and unit and has_vectors(kernel, target) and vector_friendly(kernel, inner) and ext >= 2 * lanes:
        if reduces_along(kernel, inner):
            vec = inner  # the whole loop: its vector accumulators live across all of it
            why.append(f"{inner} innermost (unit stride), a reduction vectorized whole ({lanes} lanes)")
        else:
            vec = kernel.namer()(inner)
            splits.append((inner, 2 * lanes, vec))
            new_order.append(vec)
            why.append(f"{inner} innermost (unit stride), vectorized 2 x {lanes} lanes")
    else:
        why.append(f"{inner} innermost (fewest cache lines per iteration)")
    par = ()
    coincident = {ix.name for ix in bands.coincident} if bands is not None else set()
    if threads > 1:
        for n in new_order[:-1] if vec else new_order:
            if n in coincident and (kernel.loop(n).extent or threads) >= threads:
                par = (n,)
                why.append(f"{n} on {threads} threads (no dependence crosses its iterations)")
                break
    return Recipe("ordered loops", splits=tuple(splits), order=tuple(new_order) if new_order != kernel.names else (),
                  unroll=tuple(unroll), vectorize=vec, parallel=par, threads=threads, why=tuple(why),
                  params={"order": list(order), "vector": bool(vec)})


# -- all of them, estimated --------------------------------------------------------------------------

def tiled_candidates(kernel: Kernel, target, threads: int, bands, skewed: bool) -> list:
    """Recipes that tile the outermost permutable band of two or more loops (a band's loops may be
    tiled in any order: each tile runs after the tiles it depends on): tiles of T iterations of each
    band loop but the innermost, which keeps a longer run (vectorized where it can be), tile loops
    outside point loops. On a skewed band this is time tiling (a stencil's time steps run a tile at
    a time while its data stays in cache); the tiles' loops run in parallel where coincident."""
    if bands is None:
        return []
    band = next((b for b in bands.bands if len(b) >= 2), None)
    if band is None:
        return []
    names = kernel.names
    members = sorted((ix.name for ix in band), key=lambda n: (-memory_cost(kernel, n), names.index(n)))
    before = [n for n in names if n not in members and names.index(n) < names.index(members[0])]
    after = [n for n in names if n not in members and n not in before]
    inner = members[-1]
    lanes = lanes_of(target, max(r.itemsize for r in kernel.refs))
    coincident = {ix.name for ix in bands.coincident}
    out = []
    for T, TI in ((16, 64), (32, 128), (8, 256), (32, 0)):
        fresh = kernel.namer()
        splits, points, why = [], [], []
        for n in members:
            size = T if n != inner else TI
            ext = kernel.loop(n).extent
            if size and ext is not None and ext > size:
                p = fresh(n)
                splits.append((n, size, p))
                points.append(p)
            else:
                points.append(None)
        if not splits:
            continue
        tiles = [n for n, p in zip(members, points) if p is not None]
        pts = [p if p is not None else n for n, p in zip(members, points)]
        order = before + tiles + pts + after
        vec = None
        last = order[-1]
        ext_last = TI if last != inner or points[-1] is not None else (kernel.loop(inner).extent or 0)
        if last in (inner, points[-1]) and has_vectors(kernel, target) and vector_friendly(kernel, inner) and \
                any(r.stride(inner) == 1 for r in kernel.refs) and (ext_last or 0) >= 2 * lanes:
            if reduces_along(kernel, inner):
                vec = last  # a reduction: vectorized whole (see reduces_along)
            else:
                vec = fresh(inner)
                splits.append((last, 2 * lanes, vec))
                order.append(vec)
        par = ()
        if threads > 1:
            par = next(((n,) for n in before + tiles if n in coincident), ())
        why.append(f"{'time-' if skewed else ''}tiled band ({', '.join(members)}): tiles of {T}" +
                   (f" x {TI} ({inner})" if TI else f" ({inner} whole)"))
        out.append(Recipe("tiled band" + (" (skewed)" if skewed else ""), splits=tuple(splits), order=tuple(order),
                          vectorize=vec, parallel=par, threads=threads, why=tuple(why),
                          params={"tile": T, "inner": TI or "whole", "vector": bool(vec)}))
    return out


def candidates(schedule, args, target, threads: int, bands=None, skewed_bands=None,
               deadline: Optional[float] = None) -> list:
    """Every candidate recipe of the model for `schedule`, each estimated on its own transformed
    schedule (or refused, with the reason), best estimate first. `bands`: the schedule's bands
    (bands.py, no skews); `skewed_bands`: those of a copy skewed to grow a band (its tiled recipes
    start with the skews). Past `deadline` (time.perf_counter()), once one candidate is usable, the
    rest are not estimated (checking a recipe's order is the costly part: z3)."""
    kernel = Kernel.of(schedule, args)
    recipes = []
    recipes += library_recipes(kernel, target, threads)
    if kernel.contraction is not None and kernel.parts == 1:
        recipes += contraction_candidates(kernel, target, threads)
    recipes += ordered_candidates(kernel, target, threads, bands)
    if kernel.contraction is None:
        recipes += tiled_candidates(kernel, target, threads, bands, skewed=False)
    recipes.append(Recipe("default order", why=("the nest's own order, as written (the baseline every search "
                                                "measures)",), params={}))
    skewed = None
    if skewed_bands is not None and skewed_bands.skews:
        skewed = skewed_bands.schedule
        skews = tuple((a.name, b.name) for a, b in skewed_bands.skews)
        for r in tiled_candidates(Kernel.of(skewed, args), target, threads, skewed_bands, skewed=True):
            r.skews = skews
            recipes.append(r)
    if threads > 1:  # each parallel recipe also on one thread: small or memory-bound nests may prefer it
        recipes += [dataclasses.replace(r, parallel=(), threads=1, params=dict(r.params, threads=1, parallel=None),
                                        why=tuple(w for w in r.why if not w.startswith(f"{r.parallel[0]} on ")))
                    for r in recipes if r.parallel]
    out, seen = [], set()
    for r in recipes:
        if r.key() in seen:
            continue
        if deadline is not None and time.perf_counter() > deadline and any(c.refused is None for c in out):
            break
        seen.add(r.key())
        out.append(_estimated(r, schedule, args, target, kernel, skewed))
    out.sort(key=lambda c: (c.refused is not None, c.seconds))
    return out


FORK_JOIN_SECONDS = 20e-6  # one entry into a parallel loop: waking the threads and joining them
SKEWED_RATE = 0.5  # skewed tiles' code runs the arithmetic at about half speed (partial tiles, bounds;
#                    measured on jacobi-2d, 1300^2 x 1000 half-steps, one thread: 0.89 s against 0.40 s)


def _estimated(r: Recipe, schedule, args, target, kernel: Kernel, skewed=None) -> Candidate:
    try:
        s, handles = r.schedule_on(schedule, skewed)
        r.apply(schedule, args, target, parallel=False, skewed=skewed)  # the plan's checks (vector lanes, caches)
    except _REFUSED as e:
        return Candidate(r, refused=f"{type(e).__name__}: {e}")
    k2 = Kernel.of(s, args)
    lanes = lanes_of(target, max(x.itemsize for x in kernel.refs))
    par_trip, regions = 1, 0
    if r.parallel:
        name = handles[r.parallel[0]].name
        par_trip = k2.loop(name).extent or r.threads
        regions = math.prod(lp.extent or 256 for lp in k2.loops[:k2.names.index(name)])
    overhead = regions * FORK_JOIN_SECONDS
    rate = None
    copies = 0.0
    if r.family == "register-blocked contraction":
        rate = contraction_rate(r.params, kernel, target)
        if r.params.get("pack"):
            c = kernel.contraction
            ext = {lp.name: (lp.extent or 1024) for lp in kernel.loops}
            copies = 2.0 * math.prod(ext[x] for x in kernel.names if c.b.uses(x)) * c.b.itemsize
    if rate is not None:
        est = contraction_estimate(r.params, kernel, target, rate, copies, par_trip)
    elif "ops_per_cycle" in r.params:
        est = unit_estimate(r.params, kernel, par_trip)
    else:
        # a plain innermost loop the vectorizer could take, the C compiler vectorizes itself (-O3)
        inner = k2.loops[-1].name if k2.loops else None
        auto_vec = (not r.vectorize and inner is not None and has_vectors(k2, target)
                    and vector_friendly(k2, inner) and any(x.stride(inner) == 1 for x in k2.refs))
        vloop = handles[r.vectorize].name if r.vectorize else (inner if auto_vec else None)
        est = estimate(k2, target, vector_loop=vloop, lanes=lanes if vloop else 1, threads=r.threads,
                       parallel_trip=par_trip, real_points=kernel.points(),
                       slowdown=1 / SKEWED_RATE if r.skews else 1.0)
    if overhead:
        est = Estimate(est.seconds + overhead, est.bound,
                       est.detail + f", {regions} parallel region(s) {overhead * 1e3:.3g} ms")
    return Candidate(r, est)
