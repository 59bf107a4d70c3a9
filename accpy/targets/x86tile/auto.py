"""The x86 tile unit's automatic schedules: its blocking rules, and contractions on its tiles.

The rules measured with samples/int8_matmul.py live here (one source of truth: the samples call
them): `tile_block_sizes` (GR x GC grids of accumulator tiles, NC columns of B per packed block,
KC rows of k per block, A's rows of tiles copied, B's tiles streamed, C's next tiles prefetched,
how threads share the work) and `conv_tile_sizes` (the implicit-GEMM convolution's grid and
weight blocks). `tile_recipes` proposes, for a matmul-like contraction (one row loop m, one
reduction loop k whose elements are consecutive in A, int8 or bf16 operands with the tile unit's
accumulator type), the sample's tile schedule as a dict recipe (accpy/auto/library_recipes.py):

    n (NC columns) -> m (16 GR rows) -> n (16 GC columns) -> k (a tile's depth) -> the grid (unrolled)
    -> one tile operation (tensorized: 16 rows x 16 columns x 64 bytes of k)

(with KC < K: n -> k (KC) -> m -> n -> k (depth) ...): B packed per block in the grouped (VNNI)
layout in panels of 16 columns, C's tiles in tile registers across k, A's tiles loaded straight
from A (or from a copy of the row of tiles' block), B's from the packed block. Its `params` carry
the unit's peak (`ops_per_cycle`: a tile operation every `CYCLES_PER_TILE_OP` cycles) and the
`rate` expected of it.
"""
from __future__ import annotations

from ..x86_auto import part
from .intrinsics import SPACE
from .tiles import BF16_TILE, INT8

# one tile dot product (16 x 16 x 64 bytes of k) issued every 16 cycles per core (Intel's optimization
# manual gives TDPBUSD / TDPBF16PS a throughput of 16 cycles)
CYCLES_PER_TILE_OP = 16
# the fraction of that peak the tile schedule is expected to reach: an assumption, from the sample's notes
# (bf16 1000^3 at 1133 GFLOP/s, about half of 1024 bf16 operations per cycle at a Xeon's clock); not
# measured on this machine (no AMX: its functional model says nothing of speed)
EXPECTED_RATE = 0.5


def tile_block_sizes(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1,
                     k_blocks: bool = True, lined: bool = False, pitch: int = 0) -> dict:
    """GR x GC tiles of C, NC columns of B per packed block and KC rows of k per block (PA: A's
    rows of tiles copied). Measured on a Xeon, ratios to MKL with the two taking turns. With
    `k_blocks` False (a plan that keeps all of k in one block, as the sample's fused epilogue), not the rule that cuts k short.
    `lined`: every accumulator tile's rows start on cache lines (samples/int8_matmul.py's `tile_matmul_parts`): then the
    short k blocks below whatever the sets C's rows fall in. `pitch`: bytes from one row of C to
    the next (0: N * 4; a window of C's columns gives the whole row's).

    One thread, where C takes 1 MiB or more and its rows spread over L1's sets (`_rows_spread`): 2 x 2
    tiles, A's rows of tiles copied (two A tiles from L1, two B tiles from L2 per four products), k
    in equal blocks of at most 640 bytes (the copied row of tiles at most 20 KiB of L1's 48), B in
    the fewest blocks of at most 1.1 MiB. Against 1 x 3 tiles (7 rounds taking turns with MKL, 1 / 2
    threads): bf16 2000^3 +31% / +8%, 2048 x 2000 x 2048 +34%, 3000^3 (two blocks of B) +16% / +12%,
    1000 x 1000 x 1100 +30%, 1000 x 1000 x 2000 +25%; int8 2000^3 +21% / +13% (1 x 3 had been 0.90x
    MKL there); against the 2 x 2 tiles' earlier blocks of 1 KiB: bf16 1000^3 +13 to +18% / +17%,
    1024 x 1000 x 1024 +22%, int8 1000^3 +5% / +7%. The block length: bf16 1000^3 in blocks of 256
    (A's row of tiles 16 KiB) 1133 GFLOP/s, 288 1112, 512 997, 224 (five blocks, the last 104) 993,
    128 916; int8 1000 x 1000 x 600 in one block of 600 20% faster than two of 320; bf16 600 in two
    of 320 3.5% faster than three of 224. With C's rows in a few sets of L1 (N = 512, 768, 1024,
    2048, 4096) shorter blocks gained nothing or lost (bf16 1024^3 -4% / 0%, 512^3 -10%, 2000 x 2048
    x 2000 -9%, 4096^3 -9 to -10%; int8 1024^3 -4%), measured on numpy's arrays, 16 bytes past a
    line: the cause was each accumulator tile row spanning two lines (with `lined`, on lines, the
    short blocks win there too). There, 2 x 2 tiles where k is in at most two blocks of at
    most 1 KiB and B's block takes all columns (at most 1.1 MiB; int8 1000^3 +17 to +20%, 1024^3 +11
    to +13%, bf16 1024^3 +27% against 1 x 3). Else 1 x 3 (one A tile meets three B tiles):

    NT (int8, `lined`, C's rows in a few sets of L1, where B in rows of 1 KiB of k takes more
    than one block of 1.1 MiB): k in
    blocks of at most 1 KiB (A's copied row of tiles 32 KiB) and B's tiles streamed past L1
    (TILELOADDT1), so that B's tiles do not push A's out: the C tiles reloaded half as often.
    Against the short blocks, C on a line, 7 rounds taking turns with MKL, 1 / 2 threads: int8
    2048^3 +10% / +8% (two threads: each its own blocks of 1024 columns), 4096^3 +6% / +4%; a C
    driver, arrays on lines: 2048^3 +11 to +13% on one thread (blocks of 1 KiB alone: +4%; B
    streamed with 512-byte blocks: 0 to -1%). Not taken: int8 1024^3 (B one block: +3% / -5%),
    bf16 (1024^3 -10% / 0%, 2048^3 +7% / -1%, 4096^3 +2% / -2%), C's rows spread over L1's sets
    (int8 2000^3 -5 to -6% / +2%, 2048 x 2000 x 2048 -2% on one thread).

    KC: rows of k longer than 4 KiB are cut into blocks of 4 KiB (bf16 K = 4096: blocks of 2048,
    so that the block keeps 240 columns rather than 96: 11% faster); the C tiles are then loaded
    and stored once per k block.
    NC, one thread: the fewest K x NC blocks of at most 1.1 MiB (about half of a core's L2; bf16
    2048^3 in 1.18 MiB blocks: -9%), then the last block least short of the others (a narrow last
    block re-reads all of A for a few columns: bf16 1000^3 in blocks of 528 and 472 rather than
    480, 480 and 40: +4%; int8 1024^3 in one block rather than 1008 and 16: +9%).
    Threads, where one thread's tiles are 2 x 2 and its B takes several blocks: each thread its own
    blocks of columns (as many per thread, equal in whole steps), packing only those (against each
    thread its own rows and a copy of every block, 5 rounds: bf16 2000^3 in blocks of 1024 +48%, 3000^3
    in blocks of 1504 +9%, int8 3000^3 +27%). Where they are 2 x 2 and B is one block, given 4 rows of
    tiles per thread or more: one thread's sizes, each thread its own block of rows (RT rows; the loop
    over them outermost and parallel) and its own copy of each packed block (against the rows shared and
    each block filled by all threads, or a block of columns per thread, 2 threads, 9 rounds taking turns
    with MKL: bf16 1000^3 +10%, 512^3 +13%, 511x513x257 +16%, int8 1000^3 +4%, 1024^3 +7%, 512^3 +49%,
    256^3 +81%; bf16 1024^3 +2%; against 1 x 3 tiles in blocks of columns per thread, bf16 2000^3 +8%,
    int8 2000^3 +13%; at 2048^3 with 1 x 3 tiles, one thread's blocks of columns for each thread's rows
    lost 4%, 5 rounds). Else, where one block of columns per thread fills it exactly (N / threads in
    whole 1 x 3 steps, or in whole 1 x 2 steps where k has 8 to 16 tile steps), share the columns (split
    "j": each thread packs its own block; against 1 x 3 steps, 2 threads, 11 rounds taking turns: bf16
    512^3 +14%, int8 1024^3 +8%). Where one block per thread would fit but not fill them exactly, given
    at least 4 rows of tiles per thread, they share the rows of tiles (split "i") with one thread's
    block sizes: every packed block is shared, filled by all threads, each reading it for its own rows
    (against a block of columns per thread, 2 threads, taking turns with MKL in both orders: int8 1000^3
    +9 to +23%, 511x513x257 +7 to +37%). Wider N (several blocks per thread; at 4096^3 the rows lost
    5-15%), or fewer rows: the NC whose busiest thread has the fewest columns, or equal blocks of whole
    tiles in each thread's share (the last step of each block narrower) where those leave a thread 5%
    more than its share or are less than half as wide (2 threads, taking turns: int8 2048^3 in blocks of
    512 rather than 384, 3 and 2 2/3 per thread, +12-13%; bf16 2048^3 256 rather than 96, +1 to +6%; but
    4096^3 256 rather than 192, -7 to -1%).
    PF (prefetch locality): where the accumulator tiles are reloaded every 16 k steps or sooner
    (KC of at most 1 KiB) and C takes 1 MiB or more, the rows of C's next block of tiles are
    prefetched into L2, a few in each k step (`plan.prefetch(C, ..., spread=k)`): against none,
    7 rounds taking turns with MKL, 1 / 2 threads: int8 1000^3 +18% / +2%, 1024^3 +6% / +3%,
    bf16 1000^3 +6% / +4%, 1024^3 +10% / +5%, 512^3 +7% / +7%; where the tiles stay for 32 k
    steps or more (2048^3) it cost 1-7%, at 256^3 (C in L2) up to 17% on two threads."""
    sz = _tile_blocks(M, N, K, dtype, threads, k_blocks, lined, pitch or N * 4)
    # C's next block of accumulator tiles prefetched into L2 over the k loop, where the tiles are
    # reloaded every 16 k steps or sooner and C does not fit in L2 with the rest (and a block has
    # two whole column steps at least: a loop of them to prefetch in)
    eb = 1 if dtype == "int8" else 2
    often = sz["KC"] * eb <= 1024 and min(N, sz["NC"]) >= 32 * sz["GC"]
    return dict(sz, PF=1) if often and M * N * 4 >= 1 << 20 else sz


def _tile_blocks(M: int, N: int, K: int, dtype: str, threads: int, k_blocks: bool, lined: bool,
                 pitch: int) -> dict:
    eb = 1 if dtype == "int8" else 2
    depth = 64 // eb
    if threads == 1:
        cols = -(-N // 32) * 32  # whole 2 x 2 steps
        spread = rows_spread(pitch)
        if k_blocks and M * N * 4 >= 1 << 20 and (lined or spread):
            # 2 x 2 tiles, k in equal blocks of at most 640 bytes (a row of tiles of A at most 20 KiB),
            # B in the fewest blocks of at most 1.1 MiB, equal in whole steps; int8 on lines where B
            # takes several such blocks and C's rows fall in a few sets: k blocks of at most 1 KiB,
            # B's tiles streamed (NT)
            stream = lined and not spread and eb == 1 and cols * min(K, 1024) > (11 << 20) // 10
            blocks = -(-K * eb // (1024 if stream else 640))
            KC = min(K, part(K, blocks, depth))
            cap = max(32, (11 << 20) // 10 // (KC * eb) // 32 * 32)
            nb = -(-cols // cap)
            return dict(GR=2, GC=2, NC=part(cols, nb, 32), KC=KC, PA=1, **({"NT": 1} if stream else {}))
        # 2 x 2 tiles where A's rows of tiles stay in L1 and B fits one block
        KC = K if K * eb <= 1024 else 1024 // eb // depth * depth
        if -(-K // KC) <= 2 and cols * KC * eb <= (11 << 20) // 10:
            return dict(GR=2, GC=2, NC=cols, KC=KC, PA=1)
    gr, gc = 1, 3
    KC = K if K * eb <= 4096 else 4096 // eb // depth * depth
    step = 16 * gc
    row = max(1, KC * eb)  # bytes of one packed column
    cols = -(-N // step) * step
    cap = min(cols, max(step, (1 << 20) // row // step * step))
    even = -(-N // (threads * 16)) * 16  # one block per thread, in whole tiles
    if threads > 1:
        one = _tile_blocks(M, N, K, dtype, 1, k_blocks, lined, pitch)
        rows = -(-M // (16 * one["GR"]))  # rows of tiles
        blocks = -(-N // one["NC"])
        if one["GR"] == 2 and blocks > 1:  # 2 x 2 tiles, B in blocks: each thread its own blocks of columns
            nb = -(-blocks // threads) * threads
            return dict(one, NC=part(N, nb, 32), split="j")
        if one["GR"] == 2 and rows >= 4 * threads:  # 2 x 2 tiles, B in one block: each thread its own rows
            return dict(one, split="i", RT=-(-rows // threads) * 16 * one["GR"])
    if threads > 1 and even <= cap * 5 // 4:  # one block of columns per thread fits
        if even * threads == N and even % step == 0:
            return dict(GR=gr, GC=gc, NC=even, KC=KC, split="j")
        if even * threads == N and 8 * depth <= KC <= 16 * depth:  # whole 1 x 2 steps, every block full
            return dict(GR=gr, GC=2, NC=even, KC=KC, split="j")
        if rows >= 4 * threads:  # rows of tiles enough to share
            return dict(one, split="i")
        if even % step == 0 or even % 32:  # whole 1 x 3 steps, or neither step fills it
            return dict(GR=gr, GC=gc, NC=even, KC=KC, split="j")
        hi = -(-even // step) * step  # short k: blocks of whole 1 x 3 steps
    else:
        hi = cap if threads > 1 else (11 << 20) // 10 // row // step * step
    limit = (1 << 20) // row // 16 * 16  # blocks of at most 1 MiB, in whole tiles
    out = dict(GR=gr, GC=gc, NC=_tile_nc(N, threads, step, cap // 2, min(cols, max(step, hi)), limit), KC=KC)
    return dict(out, split="j") if threads > 1 else out


def rows_spread(pitch: int) -> bool:
    """Whether 32 rows `pitch` bytes apart (two accumulator tiles' rows) fall in at least 16 of the
    64 sets of 64-byte lines that a 48 KiB, 12-way L1 has (a 4 KiB period): 1000 float32 columns
    (rows 96 bytes short of 4 KiB apart) fall in 32, 1024 in one, 768 in four, 2046 in five."""
    return len({r * pitch % 4096 // 64 for r in range(32)}) >= 16


def _tile_nc(N: int, threads: int, step: int, lo: int, hi: int, limit: int = 0) -> int:
    """The multiple of `step` in [lo, hi] whose busiest thread has the fewest columns, then the
    fewest blocks, the last block least short, the widest. With threads, up to `limit`: rather the
    widest blocks of whole tiles that cut each thread's share of the columns equally (the last step
    of each block narrower), where the first leaves a thread 5% more than its share or is less
    than half as wide."""
    def cost(nc):
        blocks = -(-N // nc)
        busiest = min(N, -(-blocks // threads) * nc)
        return (busiest, blocks, blocks * nc - N, -nc)

    hi = max(hi, step)
    nc = min(range(max(step, min(lo, hi) // step * step), hi + 1, step), key=cost)
    share = N // threads if threads > 1 and N % threads == 0 else 0
    equal = [share // b for b in range(1, share // 16 + 1)
             if share % b == 0 and share // b % 16 == 0 and lo <= share // b <= limit]
    if equal and (cost(nc)[0] * 20 >= share * 21 or equal[0] >= 2 * nc):
        return equal[0]
    return nc


def conv_tile_sizes(C: int, K: int, taps: int = 9) -> dict:
    """GC accumulator tiles of 16 output channels (3 where K / 16 is a multiple of 3, else 2: no
    partly empty grid), NC output channels per packed weight block (all of them up to ~1 MiB of
    `taps` x C x NC weights)."""
    tiles = -(-K // 16)
    gc = 3 if tiles % 3 == 0 else 2 if tiles > 1 else 1
    step = 16 * gc
    nc = max(step, min(-(-K // step) * step, (1 << 20) // (taps * C) // step * step))
    return dict(GC=gc, NC=nc)


# -- the recipe -------------------------------------------------------------------------------------

def tile_kind(kernel):
    """The tile operation (tiles.py's `INT8` or `BF16_TILE`) that computes `kernel`'s contraction, or
    None: one row loop m and one reduction loop k, k consecutive in A (a tile row is 64 bytes of k),
    the columns n consecutive in B and C, element types the unit takes (the accumulator's decides)."""
    c = kernel.contraction
    if c is None or len(c.m) != 1 or len(c.k) != 1:
        return None
    ta, tb, tout = c.dtypes
    kind = next((t for t in (INT8, BF16_TILE) if t.accumulator is tout), None)
    if kind is None or ta not in kind.inputs or tb not in kind.inputs:
        return None
    if c.a.stride(c.k[0]) != 1 or c.b.stride(c.n) != 1 or c.out.stride(c.n) != 1 or c.out.stride(c.m[0]) is None:
        return None
    return kind


def tile_recipes(kernel, target, threads: int) -> list:
    """The tile schedule of `kernel` (module docstring) as a one-element list of dicts, with
    `tile_block_sizes`' blocks for its sizes and threads; [] where the tile unit does not compute
    it (`tile_kind`) or a loop's extent is not known."""
    kind = tile_kind(kernel)
    if kind is None:
        return []
    c = kernel.contraction
    ext = {lp.name: lp.extent for lp in kernel.loops}
    N, M, K = ext[c.n], ext[c.m[0]], ext[c.k[0]]
    if None in (N, M, K):
        return []
    dtype = "int8" if kind is INT8 else "bf16"
    pitch = abs(c.out.stride(c.m[0])) * c.out.itemsize
    sz = tile_block_sizes(M, N, K, dtype, threads, pitch=pitch)
    return [_tile_recipe(kernel, kind, sz, threads, K)]


def _tile_recipe(kernel, kind, sz: dict, threads: int, K: int) -> dict:
    """The recipe dict of the tile schedule with the blocks `sz` (samples/int8_matmul.py's
    `_tile_schedule` and `_tile_plan`, loops named)."""
    c = kernel.contraction
    j, i, k = c.n, c.m[0], c.k[0]
    taken = set(kernel.names)
    splits = []

    def split(loop, size):
        new = loop + loop[-1]
        while new in taken:
            new += loop[-1]
        taken.add(new)
        splits.append((loop, size, new))
        return new

    per_thread = None
    if sz.get("RT"):  # the threads' blocks of rows outermost; the rows inside split as without
        per_thread, i = i, split(i, sz["RT"])
    j1 = split(j, sz["NC"])
    i2 = split(i, 16 * sz["GR"])
    ii = split(i2, 16)
    j2 = split(j1, 16 * sz["GC"])
    jj = split(j2, 16)
    depth = kind.shape[2]
    KC = sz.get("KC") or K
    head = list(c.outer) + ([per_thread] if per_thread else [])
    if KC < K:
        k1 = split(k, KC)
        kk = split(k1, depth)
        order, kloop = head + [j, k, i, j1, k1, i2, j2, ii, jj, kk], k1
    else:
        kk = split(k, depth)
        order, kloop = head + [j, i, j1, k, i2, j2, ii, jj, kk], k
    tile = SPACE.name
    caches = [dict(array=c.b.name, index=i, layout="grouped", panel_width=16),
              dict(array=c.out.name, index=kloop, location=tile)]
    if sz.get("PA"):  # A's row of tiles (a KC block of it) copied once per row of tiles
        caches += [dict(array=c.a.name, index=j1), dict(array=c.a.name, index=i2, location=tile, source=2)]
    else:
        caches.append(dict(array=c.a.name, index=i2, location=tile))
    caches.append(dict(array=c.b.name, index=i2, location=tile, source=0, locality=2 if sz.get("NT") else None))
    prefetch = ((c.out.name, j1, 1, sz["PF"], kloop),) if sz.get("PF") else ()
    par = ()
    if threads > 1:
        par = (c.outer[0],) if c.outer else (per_thread,) if per_thread else (i,) if sz.get("split") == "i" else (j,)
    ops = 2 * kind.shape[0] * kind.shape[1] * kind.shape[2] // CYCLES_PER_TILE_OP
    params = dict(sz, tile=kind.name, ops_per_cycle=ops, rate=EXPECTED_RATE, threads=threads,
                  **({"parallel": par[0]} if par else {}))
    why = (f"{kind.name}: {sz['GR']} x {sz['GC']} accumulator tiles of {c.out.name} in tile registers across "
           f"{'blocks of ' + str(KC) + ' ' if KC < K else 'all of '}{k}, one tile operation {kind.shape[0]} x "
           f"{kind.shape[1]} x {depth}",
           f"{c.b.name} packed per {min(KC, K)} x {sz['NC']} block in the grouped (VNNI) layout, panels of 16 "
           f"columns" + (f"; {c.a.name}'s rows of tiles copied" if sz.get("PA") else ""))
    return dict(family="tile-unit contraction", splits=tuple(splits), order=tuple(order), caches=tuple(caches),
                prefetch=prefetch, unroll=(i2, j2), tensorize=(((ii, jj, kk), {}),), parallel=par,
                threads=threads, why=why, params=params)
