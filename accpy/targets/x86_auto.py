"""The x86 vector library's automatic schedules: contractions on its dot-product instructions.

For a contraction (accpy/auto/kernel.py's roles n / m / k; operands a, broadcast, and b, vector)
whose element types are those of a dot product the target's vector ISA has (`DotProduct` rows of
x86.py, read from `target.vector_isa.dot_products()`: VPDPBUSD for uint8 x int8 -> int32, 4 k per
lane; VDPBF16PS for bfloat16 pairs -> float32, 2 k), `dot_recipes` proposes the blocking of
samples/int8_matmul.py's `vector_matmul_plan`, as a dict recipe (accpy/auto/library_recipes.py):

    n (NC columns) -> k (KC) -> m (MC rows) -> n panels (NR) -> m tiles (MR) -> k steps (the group)
    -> m rows (unrolled) -> n lanes (vectorized, NR = 4 vectors) -> the group (one instruction)

B's KC x NC block is cached in the grouped (VNNI) layout, so the group of k of every lane is one
32-bit slot; the MR x NR tile of C is cached at the k-step loop (it stays in registers). Its
`params` carry `ops_per_cycle` (2 units x lanes x group x 2: the peak) and the `rate` expected of it.
`dot_block_sizes` is the rule for the blocks, shared with the sample (one source of truth).
Nothing here names a CPU: the instruction, its group and the lanes come from the target.
"""
from __future__ import annotations

# the register tile: 6 rows x 4 vectors (24 accumulators); measured faster than 8 x 48 and 4 x 96
# columns on AVX-512 VNNI (samples/int8_matmul.py)
TILE_ROWS, TILE_VECTORS = 6, 4
# the fraction of the dot-product peak the recipe is expected to reach (not measured on this
# machine, which has no AVX-512: the register tile's loads are 4 vectors + 6 broadcasts per 24
# instructions, so the inner step is not load-bound; loop overhead and the packing cost the rest)
EXPECTED_RATE = 0.7


def part(total: int, parts: int, step: int) -> int:
    """One of `parts` equal parts of `total`, rounded up to a multiple of `step`."""
    return -(-(-(-total // parts)) // step) * step


def dot_block_sizes(M: int, N: int, K: int, group: int, elem_bytes: int, threads: int = 1,
                    lanes: int = 16) -> dict:
    """The dot-product kernel's blocks: an MR x NR tile of C in registers (NR: 4 vectors of `lanes`),
    KC steps of k per block (whole groups, at most 1024), a KC x NC block of B (`elem_bytes` an
    element) of about 1 MiB (half of L2), at most 8 panels, no wider than N in whole panels (with
    threads, at most an equal share of N each), MC = 8 MR rows of A."""
    MR, NR = TILE_ROWS, TILE_VECTORS * lanes
    KC = min(-(-K // group) * group, 1024)
    nc = max(NR, min(8 * NR, (1 << 20) // max(1, KC * elem_bytes) // NR * NR))
    nc = min(nc, -(-N // NR) * NR)
    if threads > 1:
        nc = min(nc, max(NR, part(N, threads, NR)))
    return dict(MR=MR, NR=NR, KC=KC, NC=nc, MC=8 * MR)


def dot_product_for(kernel, target):
    """The target's dot product that computes `kernel`'s contraction, or None: one that adds into
    its accumulator itself, reads its first operand as one group repeated in every lane (the
    broadcast operand a, whose group of k must then be contiguous: stride 1 along the innermost
    reduction loop), with the contraction's element types (a, b) -> out."""
    c = kernel.contraction
    if c is None or not c.k:
        return None
    ta, tb, tout = c.dtypes
    if c.a.stride(c.k[-1]) != 1 or c.b.stride(c.n) != 1:
        return None
    for p in target.vector_isa.dot_products():
        if p.acc is tout and p.accumulates and p.moves and p.moves[0] == 0 and tuple(p.factors) == (ta, tb):
            return p
    return None


def dot_recipes(kernel, target, threads: int) -> list:
    """The dot-product recipe of `kernel` on `target` (module docstring) as a one-element list of
    dicts, or [] where no dot product of the target computes it, a loop's extent is not known, or
    the rows of the output are not a loop of their own (no m role)."""
    p = dot_product_for(kernel, target)
    c = kernel.contraction
    if p is None or not c.m:
        return []
    ext = {lp.name: lp.extent for lp in kernel.loops}
    n, m, kl = c.n, c.m[-1], c.k[-1]
    N, M, K = ext[n], ext[m], ext[kl]
    if None in (N, M, K) or K < 2 * p.group:
        return []
    lanes = target.vector_isa.lanes(p.acc)
    if lanes < 2:
        return []
    b = dot_block_sizes(M, N, K, p.group, max(1, c.b.itemsize), threads, lanes)
    return [_dot_recipe(kernel, p, b, threads, lanes, (N, M, K))]


def _dot_recipe(kernel, p, b: dict, threads: int, lanes: int, sizes: tuple) -> dict:
    """The recipe dict with blocks `b` (`dot_block_sizes`) for `kernel`'s N, M, K `sizes`."""
    c = kernel.contraction
    N, M, K = sizes
    n, m, kl = c.n, c.m[-1], c.k[-1]
    fresh = kernel.namer()
    splits = []

    def split(loop, size):
        new = fresh(loop)
        splits.append((loop, size, new))
        return new

    n_blocks = n if b["NC"] < N else None
    n_in = split(n, b["NC"]) if n_blocks else n
    k_blocks = kl if b["KC"] < K else None
    k_in = split(kl, b["KC"]) if k_blocks else kl
    m_blocks = m if b["MC"] < M else None
    m_in = split(m, b["MC"]) if m_blocks else m
    n_panel, n_vec = (n_in, split(n_in, b["NR"])) if min(N, b["NC"]) > b["NR"] else (None, n_in)
    m_tile, m_row = (m_in, split(m_in, b["MR"])) if min(M, b["MC"]) > b["MR"] else (None, m_in)
    k_group = split(k_in, p.group)
    blocked = [x for x in (n_blocks, k_blocks, m_blocks, n_panel, m_tile) if x]
    inner = list(c.k[:-1]) + [k_in]
    order = list(c.outer) + list(c.m[:-1]) + blocked + inner + [m_row, n_vec, k_group]
    at = m_tile or inner[0]
    trigger = k_blocks or order[len(c.outer)]  # the whole KC x NC block, filled once (per outer iteration)
    caches = [dict(array=c.b.name, index=at, trigger=None if trigger == at else trigger, layout="grouped")]
    if c.out.array is not None:
        caches.append(dict(array=c.out.name, index=inner[0]))
    par = ()
    if threads > 1:
        eligible = [x for x in order if x not in c.k and x not in (k_blocks, m_row, n_vec, k_group)]
        if n_blocks and -(-N // b["NC"]) >= threads:
            par = (n_blocks,)
        elif eligible:
            par = (m_blocks,) if m_blocks else (eligible[0],)
    params = dict(b, group=p.group, instruction=p.op, ops_per_cycle=2 * lanes * p.group * 2, rate=EXPECTED_RATE,
                  threads=threads, **({"parallel": par[0]} if par else {}))
    why = (f"{c.dtypes[0].name} x {c.dtypes[1].name} -> {c.dtypes[2].name} on the dot product {p.op} "
           f"({p.group} {kl} per lane): {b['MR']} x {b['NR']} tile of {c.out.name} in registers over blocks of "
           f"{b['KC']} {kl}", f"{c.b.name} cached per {b['KC']} x {b['NC']} block in the grouped (VNNI) layout")
    return dict(family="dot-product contraction", splits=tuple(splits), order=tuple(order), caches=tuple(caches),
                unroll=(m_row,) if m_tile or M <= b["MR"] else (), vectorize=n_vec, parallel=par, threads=threads, why=why,
                params=params)
