"""Gemmini's automatic schedules: its blocking rules, and int8 matmuls on its scratchpad and array.

The block sizes measured with samples/gemmini_matmul.py and samples/gemmini_conv.py live here (one
source of truth: the samples call them), read from the library's memories (`SCRATCHPAD`,
`ACCUMULATOR`: rows of `DIM` elements): `matmul_blocks` (an output block that fills the
accumulator, its rows many so that each weight tile meets many row tiles; A's and B's blocks
in the scratchpad) and `conv_blocks` (the implicit-GEMM convolution's bands of output pixels).

`gemmini_recipes` proposes, for an int8 x int8 -> int32 matmul-like contraction (one row loop m,
one reduction loop k, each operand's last subscript its unit-stride loop: k for A, n for B and C,
as the scratchpad's and accumulator's rows hold them), the sample's blocked plan as a dict recipe
(accpy/auto/library_recipes.py):

    m (Mb rows) -> n (Nb columns) -> k (Kb) -> n tiles -> k tiles -> m tiles -> one 16 x 16 x 16 tile

C's Mb x Nb block in the ACCUMULATOR across k, A's and B's blocks moved into the SCRATCHPAD per
block of k, the tile tensorized (each weight tile stays in the array while it meets every row tile
of the block). Its `params` carry the array's peak (`ops_per_cycle`: DIM x DIM multiply-adds per
cycle) and the `rate` expected of it.
"""
from __future__ import annotations

from math import gcd

from .intrinsics import ACCUMULATOR, DIM, SCRATCHPAD

# the fraction of the array's peak the blocked plan is expected to reach: the functional model's cycle
# estimate gave a utilization of 0.892 for samples/gemmini_matmul.py's 256 x 256 x 128 (its counters)
EXPECTED_RATE = 0.85


def _r16(x: int) -> int:
    return max(DIM, -(-x // DIM) * DIM)


def matmul_blocks(M: int, N: int, K: int) -> tuple:
    """Block sizes (Mb, Nb, Kb): the output block fills the accumulator (Mb * Nb int32 at most its
    rows x DIM), with Mb large (each weight tile meets Mb / DIM row tiles); A's and B's blocks fit
    the scratchpad (Kb * (Mb + Nb) int8 at most its rows x DIM)."""
    acc_elems = ACCUMULATOR.rows * ACCUMULATOR.row_elems
    sp_elems = SCRATCHPAD.rows * SCRATCHPAD.row_elems
    Nb = min(_r16(N), 64)
    Mb = min(_r16(M), acc_elems // Nb)
    Kb = min(_r16(K), 512)
    while Kb * (Mb + Nb) > sp_elems:
        Kb //= 2
    return Mb, Nb, Kb


def conv_blocks(H: int, W: int, C: int, K: int) -> tuple:
    """(output pixels per band Pb, output channels per block Kb) of the flattened-pixel 3x3 conv
    (samples/gemmini_conv.py). The band's int32 sums fill the accumulator (Pb * Kb / DIM rows at
    most); Pb is a multiple of W (a band of whole output rows: its input block starts at a row the
    loops compute without a division) and, where the accumulator allows, of DIM (every pixel tile
    full); the band's input block for one tap and the block's weights for it fit the scratchpad."""
    acc_rows, sp_rows = ACCUMULATOR.rows, SCRATCHPAD.rows
    ct = -(-C // DIM)
    Kb = min(-(-K // DIM) * DIM, 64)
    while Kb > DIM and W * Kb // DIM > acc_rows:
        Kb -= DIM
    cap = acc_rows * DIM // Kb  # pixels of the band
    if W > cap:
        raise ValueError(f"W: an output row of {W} pixels does not fit Gemmini's accumulator; tile the width")
    step = W * DIM // gcd(W, DIM)  # whole output rows and whole pixel tiles
    step = step if step <= cap else W
    Pb = min(max(step, cap // step * step), H * W)  # (H * W: one band, whole rows too)
    while Pb > step and Pb * ct + C * Kb // DIM > sp_rows:
        Pb -= step
    return Pb, Kb


def gemmini_matmul(kernel) -> bool:
    """Whether `kernel` is a contraction Gemmini's blocked plan computes (module docstring)."""
    c = kernel.contraction
    if c is None or len(c.m) != 1 or len(c.k) != 1 or c.outer:
        return False
    if [t.name for t in c.dtypes] != ["int8", "int8", "int32"]:
        return False
    k, n, m = c.k[0], c.n, c.m[0]
    return c.a.stride(k) == 1 and c.b.stride(n) == 1 and c.out.stride(n) == 1 and c.out.stride(m) not in (None, 0)


def gemmini_recipes(kernel, target, threads: int) -> list:
    """The blocked scratchpad / accumulator plan of `kernel` as a one-element list of dicts, or []
    where Gemmini does not compute it (`gemmini_matmul`) or a loop's extent is not known. Gemmini
    is one unit: the recipe runs on one thread."""
    if not gemmini_matmul(kernel):
        return []
    c = kernel.contraction
    i, j, k = c.m[0], c.n, c.k[0]
    ext = {lp.name: lp.extent for lp in kernel.loops}
    M, N, K = ext[i], ext[j], ext[k]
    if None in (M, N, K):
        return []
    Mb, Nb, Kb = matmul_blocks(M, N, K)
    taken = set(kernel.names)

    def fresh(base):
        name = base + base[-1]
        while name in taken:
            name += base[-1]
        taken.add(name)
        return name

    i2, j2, k2 = fresh(i), fresh(j), fresh(k)
    i3, j3, k3 = fresh(i), fresh(j), fresh(k)
    splits = ((i, Mb, i2), (j, Nb, j2), (k, Kb, k2), (i2, DIM, i3), (j2, DIM, j3), (k2, DIM, k3))
    caches = (dict(array=c.out.name, index=k, location="ACCUMULATOR"),
              dict(array=c.a.name, index=j2, location="SCRATCHPAD"),
              dict(array=c.b.name, index=j2, location="SCRATCHPAD"))
    why = (f"{Mb} x {Nb} block of {c.out.name} in the accumulator across {k}; {c.a.name}'s {Mb} x {Kb} and "
           f"{c.b.name}'s {Kb} x {Nb} blocks in the scratchpad",
           f"{DIM} x {DIM} x {DIM} tiles tensorized, each weight tile of {c.b.name} meeting the block's "
           f"{-(-min(M, Mb) // DIM)} row tiles")
    params = dict(Mb=Mb, Nb=Nb, Kb=Kb, ops_per_cycle=2 * DIM * DIM, rate=EXPECTED_RATE, threads=1)
    return [dict(family="Gemmini tiled matmul", splits=splits, order=(i, j, k, j2, k2, i2, i3, j3, k3),
                 caches=caches, tensorize=(((i3, j3, k3), {}),), threads=1, why=why, params=params)]
