"""Quantized int8 matmul on the x86 tile unit (AMX) or AVX-512 VNNI, with output scaling, bias and ReLU.

    Acc = A @ B                                     (A: M x K uint8, B: K x N int8, Acc int32)
    Out = relu(int8(round(float32(Acc) * scale + bias)))   (round half to even, saturating)

On the tile unit, one function (`fused_tile_plan`): the product and the epilogue are two nests
fused on (i, j), so each block of accumulator tiles is quantized as soon as its k loop is done
(stored from its tiles to a 16 x 16 block in L1, converted with AVX-512 there, by the same
thread). On AVX-512 VNNI, two functions: the product, then the epilogue as a second nest over
the int32 result, vectorized. The product's schedule (`tile_matmul_plan`, shared with
bf16_matmul.py and benchmarks/lowp.py):

    j (NC columns) -> i (16 * GR rows) -> j1 (16 * GC columns) -> k (tile depth) -> i2, j2 (the grid)
    -> ii, jj, kk (one tile operation)

(with rows of k longer than 4 KiB, k blocks of KC first: j -> k (KC) -> i -> j1 -> k1 (tile depth) ...)

B's NC-column block is packed once, into a host cache in VNNI order (`layout=Array.Layout.VNNI`:
4 consecutive k per 32-bit slot, as the tile unit reads B) in panels of a tile's 16 columns
(`panel_width=16`: each tile's rows one contiguous KiB), from which every B tile is one tile load;
C's GR x GC tiles stay in tile registers across all of k; A's tiles are loaded straight from A,
or (2 x 2 tiles) from a copy of the row of tiles' block of A, made once per row of tiles. The
grid loops i2, j2 are unrolled (tile numbers are immediates). With threads, each configuring its
own tiles, either each thread takes whole NC blocks (packing its own), or all threads fill each
packed block together and then share its rows of tiles (`tile_block_sizes`' "split"). For a C
whose rows start 16, 32 or 48 bytes past a cache line (numpy's large arrays), `build_tile_matmul`
makes the product two functions, the first over the columns whose tile rows are whole lines.

Where the CPU has no AMX, the product runs on AVX-512 VNNI instead (`vector_matmul_plan`: the same
nest, an MR x NR register tile, four k per VPDPBUSD), or `--path amx` runs the tile schedule on
the tile unit's functional model (bit-exact, much slower).

    python samples/int8_matmul.py [M N K] [--threads T] [--path amx|vector] [--compare] [--output-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# first: numpy only checks results here, its BLAS on one thread (no idle BLAS thread next to the kernels)
from sample_support import functional_model, not_timed, output_dir  # noqa: E402

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402
# the block-size rules (measured with this sample) are the tile and vector libraries' own, used by
# acc.autoschedule too: accpy/targets/x86tile/auto.py and accpy/targets/x86_auto.py
from accpy.targets.x86_auto import dot_block_sizes  # noqa: E402
from accpy.targets.x86tile.auto import rows_spread as _rows_spread, tile_block_sizes  # noqa: E402,F401

S = acc.ScalarType


def has_amx(target=None) -> bool:
    target = target or acc.Target.HOST
    return all(target.has(f) for f in ("amx_tile", "amx_int8", "amx_bf16"))


def tile_target():
    """The host where it has AMX, else the host running the tile unit's functional model."""
    host = acc.Target.HOST
    return host if has_amx(host) else host(extra=(("x86tile", "emulate"),))


def matmul_nest(M: int, N: int, K: int, dtype: str = "int8", c_name: str = "C", columns=None):
    """(nest, (A, B, C)) of C += A @ B: int8 (uint8 A, int8 B, int32 C) or bf16 (bfloat16 A and
    B, float32 C), the products summed in the accumulator's type. `columns` (lo, hi): only C's
    columns lo..hi-1 (the nest's j runs from 0, at column j + lo)."""
    ta, tb, tc = (S.uint8, S.int8, S.int32) if dtype == "int8" else (S.bfloat16, S.bfloat16, S.float32)
    A = acc.Array(role=acc.Role.INPUT, element_type=ta, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=tb, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=tc, shape=(M, N), name=c_name)
    lo, hi = columns or (0, N)
    nest = acc.Nest(shape=(M, hi - lo, K))
    i, j, k = nest.get_indices()
    col = j + lo if lo else j

    @nest.iteration_logic
    def _():
        C[i, col] += acc.cast(A[i, k], tc) * acc.cast(B[k, col], tc)

    return nest, (A, B, C)


def first_line_column(N: int, c_offset: int) -> int:
    """The first column of a 4-byte C, N columns a row, at `c_offset` bytes past a cache line,
    that is on a line in every row: 0 where C is on a line, or where its rows do not all start
    equally far past one (N * 4 not a multiple of 64), or the offset is not whole elements."""
    off = c_offset % 64
    return 0 if off == 0 or off % 4 or N * 4 % 64 else (64 - off) // 4


def _tile_schedule(s, i, j, k, sz: dict, depth: int, K: int, f=None):
    """Split and order a schedule (or a fused one, with its fusing index `f`) for the tile unit;
    returns (j, i, i2, j1, j2, ii, jj, kk, the loop the accumulators stay across, the loop over
    each thread's rows or None). With sz["RT"], the rows in blocks of RT, one per thread, outermost."""
    per_thread = None
    if sz.get("RT"):  # i: the threads' blocks of rows; the rows inside split as without
        per_thread, i = i, s.split(i, sz["RT"])
    outer = (per_thread,) if per_thread is not None else ()
    j1 = s.split(j, sz["NC"])
    i2 = s.split(i, 16 * sz["GR"])
    ii = s.split(i2, 16)
    j2 = s.split(j1, 16 * sz["GC"])
    jj = s.split(j2, 16)
    KC = sz.get("KC") or K
    fused = (f,) if f is not None else ()
    if KC < K:
        k1 = s.split(k, KC)  # k blocks: the packed KC x NC block, C's tiles stored after each
        kk = s.split(k1, depth)
        s.reorder(*outer, j, k, i, j1, *fused, k1, i2, j2, ii, jj, kk)
        kloop = k1
    else:
        kk = s.split(k, depth)
        s.reorder(*outer, j, i, j1, *fused, k, i2, j2, ii, jj, kk)
        kloop = k
    return j, i, i2, j1, j2, ii, jj, kk, kloop, per_thread


def _tile_plan(s, target, A, B, C, idx, threads: int, c_index=None, split="j", pack_a=False, prefetch_c=0,
               stream_b=False):
    """The plan of a tile schedule (`_tile_schedule`'s indices): B packed per block, C's tiles in
    tile registers at `c_index` (default: across k), A's and B's tiles loaded per grid step (with
    `pack_a`, A's from a copy of the row of tiles' block of A, rows of whole cache lines); with
    threads, sharing the blocks of columns (`split` "j") or the rows of tiles ("i"); with
    `prefetch_c` (a locality), C's next block of tiles asked for a few rows in each k step; with
    `stream_b`, B's tiles loaded from the packed block with TILELOADDT1 (the cache's locality 2:
    its lines kept out of L1, where A's row of tiles stays)."""
    j, i, i2, j1, j2, ii, jj, kk, kloop, per_thread = idx
    plan = s.create_plan(target)
    tile = acc.MemorySpace.AMX_TILE
    # once per NC block (and k block), in VNNI order, in panels of a tile's 16 columns: each B tile one
    # contiguous KiB (against rows of the whole block, 7 rounds taking turns with MKL, 1024^3-4096^3,
    # 1000^3, 511x513x257: one thread -2 to +12%, most +3 to +8%; two threads -8 to +6%)
    packed = plan.cache(B, index=i, layout=acc.Array.Layout.VNNI, panel_width=16)
    plan.cache(C, index=kloop if c_index is None else c_index, location=tile)  # accumulators stay in tiles
    # with pack_a: the GR tile rows of A (a KC block of them) copied once per row of tiles
    plan.cache(plan.cache(A, index=j1) if pack_a else A, index=i2, location=tile)
    plan.cache(packed, index=i2, location=tile, locality=2 if stream_b else None)
    plan.unroll(i2)
    plan.unroll(j2)
    plan.tensorize(indices=(ii, jj, kk))
    if prefetch_c:
        plan.prefetch(C, index=j1, distance=1, locality=prefetch_c, spread=kloop)
    if threads > 1:
        plan.parallelize(indices=(per_thread,) if per_thread is not None else (i,) if split == "i" else (j,),
                         max_threads=threads)
    return plan


def tile_matmul_plan(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, target=None, sizes=None,
                     columns=None, lined: bool = False):
    """(plan, (A, B, C)) of C += A @ B on the tile unit: int8 (uint8 A, int8 B, int32 C) or bf16
    (bfloat16 A and B, float32 C); `columns` (lo, hi): only those of C (`matmul_nest`); `lined`:
    the accumulator tiles' rows start on cache lines (the block sizes' rule)."""
    target = target or tile_target()
    lo, hi = columns or (0, N)
    sz = dict(tile_block_sizes(M, hi - lo, K, dtype, threads, lined=lined, pitch=N * 4), **(sizes or {}))
    depth = 64 if dtype == "int8" else 32  # one tile row: 64 bytes of k
    nest, (A, B, C) = matmul_nest(M, N, K, dtype, columns=columns)
    s = nest.create_schedule()
    idx = _tile_schedule(s, *nest.get_indices(), sz, depth, K)
    return _tile_plan(s, target, A, B, C, idx, threads, split=sz.get("split", "j"), pack_a=bool(sz.get("PA")),
                      prefetch_c=sz.get("PF", 0), stream_b=bool(sz.get("NT"))), (A, B, C)


def tile_matmul_parts(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, target=None,
                      c_offset=None, min_c_bytes: int = 4 << 20) -> list:
    """[(name, plan, (A, B, C))]: C += A @ B on the tile unit, for a C that starts `c_offset` bytes
    past a cache line (numpy's large arrays: 16, 32 or 48; None: not known). Where C's rows do not
    all start equally far past a line, or C takes less than `min_c_bytes`, or the offset is not
    known: one function "mm" (`tile_matmul_plan`); where C is on a line, one function too, its
    accumulator tiles' rows whole lines (`lined`). Else two, called one after the other: "mm" over
    C's columns from the first on a line in every row (`first_line_column`), so that each 64-byte
    row of an accumulator tile is one cache line, with the block sizes' rule for such tiles, and
    "mm_edge" over the columns before it (at most 12: one partial tile per row of tiles, k in
    blocks of at most 4 KiB). Any C gives the right result; it is only faster at the offset it
    was built for. Against the one function on the same arrays (16 bytes past a
    line, 5 rounds taking turns with MKL, one / two threads; the first part alone): int8 1024^3
    +14% / +16%, 2048^3 +30% / +20%, 4096^3 +6% / +22%; bf16 1024^3 +25% / +20%, 2048^3 +21% /
    +12%, 4096^3 +12% / +17% (the edge: 1.6 ms of bf16 4096^3's 127 on one thread); both
    functions against the one, 7 rounds taking turns: 1024^3 +3 to +10%, but 512^3 -14 to +3% and
    256^3 -8 to -23% (the edge's own call), hence `min_c_bytes` (C of 1024 x 1024)."""
    return [(name, *tile_matmul_plan(M, N, K, dtype, threads, target, sizes=sz, columns=cols, lined=lined))
            for name, cols, sz, lined in tile_matmul_layout(M, N, K, dtype, threads, c_offset, min_c_bytes)]


def tile_matmul_layout(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, c_offset=None,
                       min_c_bytes: int = 4 << 20) -> list:
    """[(name, (first column, end), block sizes, lined)]: the functions of `tile_matmul_parts`."""
    # every row of C equally far past a line (rows whole lines), the offset known, C large enough
    known = c_offset is not None and N * 4 % 64 == 0 and M * N * 4 >= min_c_bytes
    p = first_line_column(N, c_offset) if known else 0
    if p == 0:
        lined = known and c_offset % 64 == 0
        return [("mm", (0, N), tile_block_sizes(M, N, K, dtype, threads, lined=lined), lined)]
    eb = 1 if dtype == "int8" else 2
    edge = dict(GR=1, GC=1, NC=16, KC=K if K * eb <= 4096 else 4096 // eb, **({"split": "i"} if threads > 1 else {}))
    return [("mm", (p, N), tile_block_sizes(M, N - p, K, dtype, threads, lined=True, pitch=N * 4), True),
            ("mm_edge", (0, p), dict(tile_block_sizes(M, p, K, dtype, threads, pitch=N * 4), **edge), False)]


def build_tile_matmul(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, c_offset=None,
                      output_dir=None, target=None, min_c_bytes: int = 4 << 20):
    """The package of `tile_matmul_parts`, built, and `run(a, b, c)`: c += a @ b, each part in turn."""
    pkg = acc.Package()
    names = []
    for name, plan, args in tile_matmul_parts(M, N, K, dtype, threads, target, c_offset, min_c_bytes):
        pkg.add(plan, args=args, base_name=name)
        names.append(name)
    out = output_dir or tempfile.mkdtemp(prefix=f"accpy_tile_{dtype}_")
    lib = pkg.build(f"tile_{dtype}_{M}_{N}_{K}_{threads}_{'x' if c_offset is None else c_offset % 64}",
                    output_dir=out, python_module=False, progress=False)
    fns = [getattr(lib, n) for n in names]

    def run(a, b, c):
        for f in fns:
            f(a, b, c)

    return lib, run


def fused_block_sizes(M: int, N: int, K: int, threads: int = 1) -> dict:
    """The fused quantized plan's blocks: `tile_block_sizes`' without blocks of k (the epilogue
    follows all of k, so the fusing index is outside k); C's next tiles prefetched (PF) only where
    all of k takes at most 1 KiB, as the product's rule asks of its blocks of k."""
    sz = dict(tile_block_sizes(M, N, K, "int8", threads, k_blocks=False), KC=K)
    if K > 1024:
        sz.pop("PF", None)
    return sz


def fused_tile_plan(M: int, N: int, K: int, relu: bool = True, threads: int = 1, target=None, sizes=None):
    """(plan, (A, B, Acc, bias, Out, scale)) of the quantized matmul in one function on the tile
    unit: Acc += A @ B, then Out = relu(int8(round(float32(Acc) * scale + bias))). The two nests
    are fused on (i, j), the fusing index right outside k: each GR x GC block of accumulator tiles
    is quantized as soon as its k loop is done, stored from its tiles to a 16 x 16 block in L1 and
    converted there with AVX-512 (the tile library's epilogue), in the same thread. Where the sizes
    ask for it (PF: all of k in at most 1 KiB), the next block of accumulator tiles is prefetched
    over the k loop as in the product's plan (against none, 7-9 rounds: int8 1000^3 +2% on one
    thread and +15% on two, 1024^3 +6% and +2%, 512^3 -4% and -1%)."""
    target = target or tile_target()
    sz = {**fused_block_sizes(M, N, K, threads), **(sizes or {}), "KC": K}
    nest, (A, B, Acc) = matmul_nest(M, N, K, "int8", c_name="Acc")
    epi, (_, bias, Out, scale) = quantize_nest(M, N, relu, Acc)
    s = acc.fuse((nest.create_schedule(), epi.create_schedule()), partial=2)
    i, j, f, k = s.get_indices()
    idx = _tile_schedule(s, i, j, k, sz, 64, K, f)
    # the accumulators stay in their tiles across both parts (product, then epilogue)
    plan = _tile_plan(s, target, A, B, Acc, idx, threads, c_index=f, split=sz.get("split", "j"),
                      pack_a=bool(sz.get("PA")), prefetch_c=sz.get("PF", 0))
    return plan, (A, B, Acc, bias, Out, scale)


def vector_block_sizes(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1) -> dict:
    """The AVX-512 dot-product kernel's blocks (x86_auto.py's `dot_block_sizes`): an MR x NR micro-tile
    of C in registers (NR / 16 vectors per row), a KC x NC block of B packed in VNNI order (about half
    of L2), MC rows of A."""
    eb = 1 if dtype == "int8" else 2
    return dot_block_sizes(M, N, K, 4 if dtype == "int8" else 2, eb, threads, lanes=16)


def vector_matmul_plan(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, target=None, sizes=None):
    """(plan, (A, B, C)) of C += A @ B on AVX-512 dot products, for CPUs without the tile unit:
    int8 (uint8 A, int8 B, int32 C: VPDPBUSD, 4 k per instruction) or bf16 (VDPBF16PS, 2 k).

        j (NC) -> k (KC) -> i (MC) -> j1 (NR) -> i1 (MR) -> k1 (k groups) -> i2 (unrolled)
        -> j2 (vectorized, 16 lanes) -> k2 (the group: 4 or 2 k, one instruction)

    B's KC x NC block is packed in VNNI order (each lane's 4 or 2 k are one 32-bit slot, so the
    group of statements over k2 reads one contiguous vector of B and one 32-bit quad of A,
    repeated in every lane); the MR x NR tile of C stays in registers across the KC loop."""
    target = target or acc.Target.HOST
    sz = dict(vector_block_sizes(M, N, K, dtype, threads), **(sizes or {}))
    group = 4 if dtype == "int8" else 2
    nest, (A, B, C) = matmul_nest(M, N, K, dtype)
    i, j, k = nest.get_indices()
    s = nest.create_schedule()
    j1 = s.split(j, sz["NC"])
    k1 = s.split(k, sz["KC"])
    i1 = s.split(i, sz["MC"])
    j2 = s.split(j1, sz["NR"])
    i2 = s.split(i1, sz["MR"])
    k2 = s.split(k1, group)
    s.reorder(j, k, i, j1, i1, k1, i2, j2, k2)
    plan = s.create_plan(target)
    plan.cache(B, index=i1, trigger_index=k, layout=acc.Array.Layout.VNNI)  # KC x NC, VNNI order
    plan.cache(C, index=k1)  # the MR x NR micro-tile: registers
    plan.unroll(i2)
    plan.vectorize(j2)
    if threads > 1:
        plan.parallelize(indices=(j,) if -(-N // sz["NC"]) >= threads else (i,), max_threads=threads)
    return plan, (A, B, C)


def auto_matmul_plan(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, target=None):
    """(plan, (A, B, C)) of C += A @ B from the nest alone (`acc.autoschedule`, the model deciding):
    on the tile unit (or its model) the tile library proposes the schedule above, with the same
    block sizes; on AVX-512 the vector library the dot-product one."""
    target = target or (tile_target() if default_path(dtype) == "amx" else acc.Target.HOST)
    nest, args = matmul_nest(M, N, K, dtype)
    return acc.autoschedule(nest, args, target=target, measure=False, threads=threads), args


def quantize_nest(M: int, N: int, relu: bool = True, Acc=None):
    """(nest, (Acc, bias, Out, scale)): Out = relu(int8(round(float32(Acc) * scale + bias[j])))."""
    if Acc is None:
        Acc = acc.Array(role=acc.Role.INPUT, element_type=S.int32, shape=(M, N), name="Acc")
    bias = acc.Array(role=acc.Role.INPUT, element_type=S.float32, shape=(N,), name="bias")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(M, N), name="Out")
    scale = acc.Scalar(S.float32, name="scale")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        y = acc.cast(acc.round(acc.cast(Acc[i, j], S.float32) * scale + bias[j]), S.int8)
        Out[i, j] = acc.max(y, acc.cast(0, S.int8)) if relu else y

    return nest, (Acc, bias, Out, scale)


def quantize_plan(M: int, N: int, relu: bool = True, target=None):
    """(plan, (Acc, bias, Out, scale)): Out = relu(int8(round(float32(Acc) * scale + bias[j])))."""
    nest, args = quantize_nest(M, N, relu)
    plan = nest.create_plan(target or acc.Target.HOST)
    # 16 lanes: int32 sums converted, scaled and rounded in float32 lanes, saturated to int8 in
    # 32-bit lanes, narrowed as they are stored (where the target has no such vectors, the loop is
    # left to the C compiler's vectorizer, with a warning)
    plan.vectorize(nest.get_indices()[1])
    return plan, args


def has_vector_dot(dtype: str = "int8", target=None) -> bool:
    """Whether the CPU has the AVX-512 dot product of `dtype` (VNNI for int8, BF16 for bf16)."""
    target = target or acc.Target.HOST
    return all(target.has(f) for f in ("avx512f", "avx512bw", "avx512_vnni" if dtype == "int8" else "avx512_bf16"))


def default_path(dtype: str = "int8") -> str:
    """"amx" where the CPU has the tile unit, else "vector" where it has the dot products, else
    "amx" on the functional model."""
    return "amx" if has_amx() or not has_vector_dot(dtype) else "vector"


def matmul_plan(M: int, N: int, K: int, dtype: str = "int8", threads: int = 1, path=None):
    """The product's plan on `path` ("amx": the tile unit or its model; "vector": AVX-512)."""
    path = path or default_path(dtype)
    if path not in ("amx", "vector"):
        raise ValueError(f"path: expected 'amx' or 'vector', got {path!r}")
    return (tile_matmul_plan if path == "amx" else vector_matmul_plan)(M, N, K, dtype, threads)


def describe_path(path: str, dtype: str = "int8") -> str:
    if path == "vector":
        return "AVX-512 " + ("VNNI" if dtype == "int8" else "BF16") + " dot products"
    return "the tile unit (" + ("AMX" if has_amx() else "functional model: no AMX here") + ")"


def reference(a, b, scale, bias, relu=True):
    """numpy: int32 matmul, float32 scale and bias, round half to even, saturate to int8, ReLU."""
    return quantized(a.astype(np.int32) @ b.astype(np.int32), scale, bias, relu)


def quantized(acc32, scale, bias, relu=True):
    """numpy: the epilogue of int32 sums (bias along the last axis). float32(Acc) * scale + bias is
    rounded once, as the kernels' fused multiply-add does (the product of two float32 values is
    exact in float64). Rounded twice, it differs where the sum lands on a tie: at 1000^3 one
    element of the million (Acc 159306, scale 1/16000) came to exactly 11.5 with two roundings
    (12) and just under it with one (11)."""
    exact = acc32.astype(np.float32).astype(np.float64) * np.float64(np.float32(scale))
    y = np.rint((exact + bias.astype(np.float32).astype(np.float64)).astype(np.float32))
    y = np.clip(y, -128, 127).astype(np.int8)
    return np.maximum(y, 0).astype(np.int8) if relu else y


def with_epilogue(name: str, product, product_args, rows: int, cols: int, relu: bool, output_dir=None):
    """A package of the int32 product (function `name`) and the quantizing epilogue over its
    rows x cols result (function `quantize`), built."""
    q, q_args = quantize_plan(rows, cols, relu)
    pkg = acc.Package()
    pkg.add(product, args=product_args, base_name=name)
    pkg.add(q, args=q_args, base_name="quantize")
    out = output_dir or tempfile.mkdtemp(prefix=f"accpy_{name}_")
    return pkg.build(name, output_dir=out, python_module=False, progress=False)


def build_one(name: str, plan, args, output_dir=None):
    """A package of one function `name`, built (in a temporary folder unless `output_dir`)."""
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name=name)
    return pkg.build(name, output_dir=output_dir or tempfile.mkdtemp(prefix=f"accpy_{name}_"), python_module=False,
                     progress=False)


def build(M, N, K, threads=1, relu=True, output_dir=None, path=None, fused=True):
    """The package, and `run(a, b, bias, scale) -> (int8 result, int32 sums)`: on the tile unit one
    function (`qmm`, the fused plan), on AVX-512 (or with fused=False) two (`matmul_i8`, then
    `quantize`)."""
    path = path or default_path("int8")
    if path == "amx" and fused:
        lib = build_one("qmm", *fused_tile_plan(M, N, K, relu, threads), output_dir)

        def run(a, b, bias, scale):
            c = np.zeros((M, N), np.int32)
            o = np.zeros((M, N), np.int8)
            lib.qmm(a, b, c, bias, o, np.float32(scale))
            return o, c

        return lib, run
    mm, mm_args = matmul_plan(M, N, K, "int8", threads, path)
    lib = with_epilogue("matmul_i8", mm, mm_args, M, N, relu, output_dir)

    def run(a, b, bias, scale):
        c = np.zeros((M, N), np.int32)
        lib.matmul_i8(a, b, c)
        o = np.zeros((M, N), np.int8)
        lib.quantize(c, bias, o, np.float32(scale))
        return o, c

    return lib, run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", nargs="*", type=int, default=[256, 256, 256])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--output-dir", default=None, help="where the package is written (default: a temporary folder)")
    ap.add_argument("--no-relu", action="store_true")
    ap.add_argument("--path", choices=("amx", "vector"), default=None,
                    help="the tile unit (its model without AMX) or AVX-512 VNNI (default: AMX if present, else VNNI)")
    ap.add_argument("--compare", action="store_true",
                    help="on the tile unit, also time the product and the epilogue as two functions (taking turns)")
    a = ap.parse_args(argv)
    M, N, K = (a.shape + a.shape[-1:] * 3)[:3]
    path = a.path or default_path("int8")
    sizes = fused_block_sizes(M, N, K, a.threads) if path == "amx" else vector_block_sizes(M, N, K, "int8", a.threads)
    print(f"int8 matmul {M}x{N}x{K} on {describe_path(path)}, threads={a.threads}, sizes {sizes}")
    pkg_dir = output_dir("int8_matmul", a.output_dir)
    _, run = build(M, N, K, a.threads, relu=not a.no_relu, output_dir=pkg_dir, path=path)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (M, K), dtype=np.uint8)
    y = rng.integers(-128, 128, (K, N), dtype=np.int8)
    bias = rng.standard_normal(N).astype(np.float32) * 4
    scale = 1.0 / (16 * K)
    out, c = run(x, y, bias, scale)
    want = reference(x, y, scale, bias, relu=not a.no_relu)
    if not np.array_equal(c, x.astype(np.int32) @ y.astype(np.int32)) or not np.array_equal(out, want):
        print("MISMATCH against numpy", file=sys.stderr)
        return 1
    runs = {"fused product and epilogue" if path == "amx" else "product + epilogue": run}
    if a.compare and path == "amx":
        _, unfused = build(M, N, K, a.threads, relu=not a.no_relu, output_dir=pkg_dir, path=path, fused=False)
        if not np.array_equal(unfused(x, y, bias, scale)[0], want):
            print("MISMATCH against numpy (two functions)", file=sys.stderr)
            return 1
        runs["product + epilogue, two functions"] = unfused
    model = functional_model(tile_target()) if path == "amx" else ""
    if model:  # bit-exact, but its speed says nothing of the tile unit's
        print(f"exact against numpy; {not_timed(model)}")
        return 0
    ts = {how: [] for how in runs}
    for _ in range(7):  # (taking turns: drift hits all alike)
        for how, f in runs.items():
            t0 = time.perf_counter()
            f(x, y, bias, scale)
            ts[how].append(time.perf_counter() - t0)
    first = float(np.median(next(iter(ts.values()))))
    for n, (how, v) in enumerate(ts.items()):
        t = float(np.median(v))
        vs = "" if n == 0 else f"; the fused one {t / first:.2f}x as fast"
        print(f"{'exact against numpy; ' if n == 0 else ''}{2 * M * N * K / t / 1e9:.1f} int8 GOPS ({how}, median of 7{vs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
