"""The cost model's estimate of one candidate: seconds per call, from a roofline over the caches.

The candidate's schedule is read as loops (trip counts, in order) and accesses (`Kernel`). For
every cache level of the target (L1, L2, L3 from `Target.cache_bytes`, then memory), the loops are
cut at the outermost position whose inner loops' footprint (the distinct cache lines all accesses
touch there, from the subscripts' ranges) fits in that level; each access then moves its footprint
into the level once per iteration of the outer loops it moves with (the loops it does not move
with, right outside the cut, reuse it). Time is the largest of: the arithmetic at the rate the
innermost loops allow (vector lanes when vectorized, bounded by the loads per operation), and each
level's traffic at that level's bandwidth. Threads divide the work of a parallel loop (and the
private levels' traffic); memory bandwidth grows less. (A register-blocked contraction and a
library's recipe have estimates of their own, in model.py.)

The numbers are per core and per cycle, conservative x86 server figures (they rank candidates; the
measured search corrects them): 2 vector FMA units, loads of 2 vectors and L2 at 32 bytes per
cycle, L3 at 16, memory at 8 (one core), 12 for two or more.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..ir.affine import to_affine
from ..ir.expr import BinOp, Const
from ..ir.visitor import free_vars
from .kernel import Kernel

_BW = (64.0, 32.0, 16.0)  # bytes per cycle into L1 (loads), from L2, from L3
_MEM_BW = {1: 8.0, 2: 12.0}
_GHZ = 2.5


@dataclass(frozen=True)
class Estimate:
    seconds: float
    bound: str  # what limits it: "compute", "L1", "L2", "L3", "memory"
    detail: str  # one line: the figures behind it

    def __str__(self) -> str:
        return f"{self.seconds * 1e3:.3g} ms ({self.bound}-bound: {self.detail})"


def _trip(lp) -> int:
    return lp.extent if lp.extent is not None else 256  # a runtime size: a typical size


@dataclass
class _Group:
    """Accesses of one array whose subscripts differ only by constants (a stencil's neighbours):
    one stream, its footprint widened by the spread of the constants (group reuse)."""

    ref: object  # one of them (its subscripts' variable parts are the group's)
    spread: list  # per subscript: max - min of the constant parts (0 where not affine)
    writes: bool


def _groups(refs) -> list:
    groups: dict = {}
    for r in refs:
        key = (id(r.buffer), tuple(repr(s - s.const) if s is not None else repr(x)
                                   for s, x in zip(r.subscripts, r.indices or r.subscripts)))
        consts = [s.const if s is not None else 0 for s in r.subscripts]
        g = groups.get(key)
        if g is None:
            groups[key] = [_Group(r, [0] * len(consts), r.kind != "read"), consts, consts]
            continue
        lo = [min(a, b) for a, b in zip(g[1], consts)]
        hi = [max(a, b) for a, b in zip(g[2], consts)]
        g[0].spread = [h - l for h, l in zip(hi, lo)]
        g[0].writes = g[0].writes or r.kind != "read"
        g[1], g[2] = lo, hi
    return [g[0] for g in groups.values()]


def _footprint_lines(g: _Group, inner: list, line: int, held: bool = True) -> float:
    """Distinct cache lines the group touches over the loops `inner` (one iteration of the rest);
    `held=False`: only the lines new to this iteration of the loop outside (a neighbour's row that
    the previous iteration brought in is not counted again)."""
    ref = g.ref
    if not ref.subscripts:
        return 1.0
    ranges = []
    for s, x, spread in zip(ref.subscripts, ref.indices or ref.subscripts, g.spread):
        if s is None:  # quasi-affine: (e) % m spans at most m values, (e) // d about 1/d of e's
            ranges.append(_quasi_range(x, inner))
            continue
        r = 1
        for lp in inner:
            c = abs(s.coef(lp.var))
            if c:
                r += c * (_trip(lp) - 1)
        moved = any(s.coef(lp.var) for lp in inner)
        ranges.append(r + (spread if held or moved else 0))
    per_line = max(1, line // ref.itemsize)
    rows = math.prod(ranges[:-1]) if len(ranges) > 1 else 1
    return float(rows * math.ceil(ranges[-1] / per_line))  # the last subscript is the contiguous one


def _quasi_range(x, inner: list) -> int:
    """How many values a quasi-affine subscript takes over the loops `inner`."""
    def affine_range(e) -> Optional[int]:
        a = to_affine(e)
        if a is None:
            return None
        return 1 + sum(abs(a.coef(lp.var)) * (_trip(lp) - 1) for lp in inner)

    if isinstance(x, BinOp) and isinstance(x.b, Const) and x.b.value > 0:
        r = affine_range(x.a)
        if r is not None and x.op == "mod":
            return min(r, x.b.value)
        if r is not None and x.op == "floordiv":
            return -(-r // x.b.value) + 1
    return int(math.prod(_trip(lp) for lp in inner if lp.var in free_vars(x)) or 1)


def _traffic(kernel: Kernel, capacity: int, line: int) -> float:
    """Bytes moved into a level of `capacity` bytes over the whole run."""
    loops = kernel.loops
    groups = _groups(kernel.refs)
    cut = len(loops)
    for p in range(len(loops) + 1):
        inner = loops[p:]
        size = sum(_footprint_lines(g, inner, line) for g in groups) * line
        if size <= capacity:
            cut = p
            break
    inner = loops[cut:]
    total = 0.0
    for g in groups:
        fp = _footprint_lines(g, inner, line, held=False) * line
        reps = 1
        reuse = True
        for lp in reversed(loops[:cut]):
            if g.ref.uses(lp.name):
                reuse = False
                reps *= _trip(lp)
            elif not reuse:
                reps *= _trip(lp)
        total += fp * reps * (2 if g.writes else 1)
    return total


def estimate(kernel: Kernel, target, *, vector_loop: Optional[str] = None, lanes: int = 1,
             threads: int = 1, parallel_trip: int = 1, copies_bytes: float = 0.0,
             real_points: Optional[int] = None, slowdown: float = 1.0) -> Estimate:
    """Seconds per call of `kernel`'s loops as scheduled (see the module docstring).

    vector_loop / lanes: the vectorized loop and its lanes (1: scalar code); threads /
    parallel_trip: threads used and the parallel loop's trip count (its balance); copies_bytes:
    bytes the plan's caches copy per call; real_points: the iterations that are not padding
    (splits that do not divide add empty ones to the box: the traffic is scaled); slowdown: a
    factor on the arithmetic for code the model knows to run slower (skewed tiles)."""
    points = kernel.points() or 256 ** len(kernel.loops)
    real = real_points or points
    scale = real / points
    ops = real * kernel.ops_per_point
    if vector_loop is not None:
        loads = max(1, sum(1 for r in kernel.refs if r.uses(vector_loop)))
        per_cycle = min(2 * lanes, 2.0 * lanes * kernel.ops_per_point / loads)
    else:
        per_cycle = min(2.0, kernel.ops_per_point / max(1, len(kernel.refs)) * 2)
    used = max(1, min(threads, parallel_trip))
    balance = math.ceil(parallel_trip / used) * used / parallel_trip if parallel_trip > 1 else 1.0
    compute = ops / per_cycle / used * balance * slowdown
    caps = list(target.cache_bytes) or [32768, 524288]
    line = (target.cache_lines or (64,))[0]
    terms = {"compute": compute}
    for lvl, cap in enumerate(caps[:3]):
        bytes_in = _traffic(kernel, cap, line) * scale
        terms[f"L{lvl + 1}"] = bytes_in / _BW[min(lvl + 1, 2)] / (used if lvl < 2 else 1)
    mem = _traffic(kernel, caps[-1], line) * scale + copies_bytes
    terms["memory"] = mem / _MEM_BW[2 if used > 1 else 1]
    terms["copies"] = copies_bytes / _BW[1]
    bound = max(terms, key=terms.get)
    cycles = terms[bound]
    detail = ", ".join(f"{k} {v / _GHZ / 1e6:.3g} ms" for k, v in terms.items())
    return Estimate(cycles / (_GHZ * 1e9), bound, detail)
