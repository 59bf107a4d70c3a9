"""Caches in VNNI order (`plan.cache(X, ..., layout=acc.Array.Layout.VNNI)`): the rows of a block
kept in groups of 32 bits' worth (4 one-byte / 2 two-byte elements) interleaved into the columns.
The same results as without the cache (reference evaluator), for every element type, blocks with
a partial last group, caches of panels (multicaches) and host code reading the cache directly;
and the errors for what the layout cannot be."""
from __future__ import annotations

import re

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import accpy as acc
import accpy.testing as at
from accpy.ir.affine import element_offset
from accpy.ir.expr import Buffer, Const, Var, idx_op
from accpy.testing import assert_matches_reference

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi.kernels import mixed_matmul_nest  # noqa: E402

S = acc.ScalarType
VNNI = acc.Array.Layout.VNNI
# code read here is emitted for named models, whatever this machine is
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)  # AVX-512 with VNNI, no tile unit
AMX = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8480PLUS)  # the tile unit's instructions
AVX2 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)  # 8 float32 lanes


def _tile_host():
    """The host with the tile unit (its functional model where the CPU has none)."""
    from accpy.targets import x86tile

    return x86tile.emulating(acc.Target.HOST)


def _matmul(M, N, K, ta, tc):
    return mixed_matmul_nest(M, N, K, ta, ta, tc)


def _vector_add():
    """(nest, v, i) of out[i] += v[i] over 16 int8: a 1-D array, which no layout of rows fits."""
    v = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(16,), name="v")
    out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(16,), name="out")
    nest = acc.Nest(shape=(16,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        out[i] += v[i]

    return nest, v, i


def test_element_offset_of_a_grouped_buffer():
    b = Buffer("b", S.int8, (Const(12), Const(8)), (Const(32), Const(4)), group=4)
    assert [element_offset(b, (Const(r), Const(c))).value for r, c in ((0, 0), (1, 0), (3, 0), (4, 0), (5, 2))] == \
        [0, 1, 3, 32, 32 + 8 + 1]
    v = Var("v")
    # whole groups of rows: no division left in the address
    assert "floordiv" not in repr(element_offset(b, (idx_op("mul", v, Const(4)), Const(1))))


def test_element_offset_of_a_buffer_in_column_panels():
    """[r, c] of a VNNI buffer in panels of 16 columns (4 rows per group, 8 group rows per panel):
    panel c // 16 at (c // 16) * panel_stride, then group row r // 4, column c % 16, row r % 4. With
    the loops' ranges, a column P * p + c (c < P) needs no division."""
    b = Buffer("b", S.int8, (Const(32), Const(48)), (Const(64), Const(4)), group=4, panel=16, panel_stride=512)
    at = lambda r, c: element_offset(b, (Const(r), Const(c))).value  # noqa: E731
    assert [at(0, 0), at(1, 0), at(4, 0), at(0, 1), at(5, 15), at(0, 16), at(7, 40)] == \
        [0, 1, 64, 4, 64 + 60 + 1, 512, 1024 + 64 + 32 + 3]
    p, c, kq = Var("p"), Var("c"), Var("kq")
    col = idx_op("add", idx_op("mul", p, Const(16)), c)
    row = idx_op("add", idx_op("mul", kq, Const(4)), Const(3))
    assert "floordiv" in repr(element_offset(b, (row, col)))  # c unbounded: the division stays
    folded = element_offset(b, (row, col), {c: (0, 15), p: (0, 2), kq: (0, 7)})
    assert "floordiv" not in repr(folded) and "mod" not in repr(folded), folded
    assert element_offset(b, (row, col), {c: (0, 16)}) is not None  # c may reach the next panel: kept
    assert "floordiv" in repr(element_offset(b, (row, col), {c: (0, 16)}))


@pytest.mark.parametrize("ta, tc", [(S.int8, S.int32), (S.uint8, S.int32), (S.bfloat16, S.float32),
                                    (S.float32, S.float32)])
@pytest.mark.slow
@pytest.mark.parametrize("shape", [(8, 40, 16), (5, 20, 9), (3, 7, 70)])
@pytest.mark.parametrize("layout", [VNNI, None])
def test_a_cache_in_column_panels_gives_the_same_results(ta, tc, shape, layout):
    """Panels of 16 columns, in VNNI order or not: whole and partial last panels (40 = 16 + 16 +
    8, 7), partial last groups of rows (9, 70), read back element by element by host code."""
    M, N, K = shape
    nest, args, (i, j, k) = _matmul(M, N, K, ta, tc)
    s = nest.create_schedule()
    jj = s.split(j, 4)
    s.reorder(j, i, k, jj)
    plan = s.create_plan(_tile_host())
    plan.cache(args[1], index=i, layout=layout, panel_width=16)
    assert_matches_reference(plan, args)


def test_a_vectorized_loop_reads_whole_vectors_inside_one_panel():
    """An sgemm-like micro-kernel over B packed in panels of 48 columns: each vector of 16 columns
    lies inside one panel, so the loads stay vector loads (one panel: 48 columns, the rows 48
    apart); the results unchanged, with a partial last panel."""
    M, N, K = 6, 100, 12
    nest, args, (i, j, k) = _matmul(M, N, K, S.float32, S.float32)
    s = nest.create_schedule()
    jj = s.split(j, 48)
    jjj = s.split(jj, 16)
    s.reorder(j, i, jj, k, jjj)
    for target, load in ((AVX512, "_mm512_loadu_ps(&B_cache["), (AVX2, "_mm256_loadu_ps(&B_cache["), (None, None)):
        plan = s.create_plan(target)
        plan.cache(args[1], index=i, panel_width=48)
        plan.vectorize(jjj)
        if load:
            code = plan.emit_c()
            kernel = [ln for ln in code.splitlines() if "_fmadd_ps(" in ln]
            assert load in code and kernel, code
            for ln in kernel:  # every read of the packed block is a vector load (masked in the last panel)
                assert ln.count("B_cache[") == len(re.findall(r"\w*load\w*_ps\([^&;]*&B_cache\[", ln)), ln
    assert_matches_reference(plan, args)  # on this machine


def test_the_copy_into_column_panels_reads_each_row_in_order():
    """Per group row, per panel, a panel row of 16 columns (no division in any address), then the
    last panel's columns; the cache is read where the panels put each element."""
    from accpy.targets import x86tile

    nest, args, (i, j, k) = _matmul(4, 40, 8, S.int8, S.int32)
    s = nest.create_schedule()
    s.reorder(j, i, k)
    for target in (AMX, x86tile.emulating(AVX2), _tile_host()):  # named models' code; this machine's run
        plan = s.create_plan(target)
        plan.cache(args[1], index=j, layout=VNNI, panel_width=16)
        code = plan.emit_c()
        copy = code[code.index("B_cache["):code.index("for (int64_t i")]
        assert "B_p < 2" in copy and "< 8" in copy, copy  # two whole panels, then 8 columns
        assert "floordiv" not in copy, copy
    assert_matches_reference(plan, args)


def test_column_panels_errors():
    nest, args, (i, j, k) = _matmul(8, 32, 8, S.int8, S.int32)
    plan = nest.create_plan()
    for bad in (0, -16, 2.5, True, "16"):
        with pytest.raises(ValueError, match="panel_width: expected a positive int"):
            plan.cache(args[1], index=k, panel_width=bad)
    with pytest.raises(ValueError, match="need a FIRST_MAJOR or grouped layout"):
        plan.cache(args[1], index=k, layout=acc.Array.Layout.LAST_MAJOR, panel_width=16)
    with pytest.raises(ValueError, match="a cache in panels lives in host memory"):
        plan.cache(args[1], index=k, panel_width=16, location=acc.MemorySpace.SHARED)
    with pytest.raises(ValueError, match="placed by index or level"):
        plan.cache(args[1], max_elements=64, panel_width=16)
    nest, v, x = _vector_add()
    with pytest.raises(ValueError, match="panels cut the columns of a 2-D"):
        nest.create_plan().cache(v, index=x, panel_width=4)


_PANEL_NESTS = {"int8": mixed_matmul_nest(5, 18, 11, S.int8, S.int8, S.int32)[:2],
                "float32": mixed_matmul_nest(7, 20, 9, S.float32, S.float32, S.float32)[:2]}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(_PANEL_NESTS))
def test_drawn_plans_with_caches_in_column_panels_match_the_reference(kind):
    """Plans drawn by accpy.testing over random schedules of a matmul: caches at random indices,
    some in column panels (widths 2, 3, 8, 16, so partial panels), their copies and write-backs
    in panel order; every one gives the reference's results (a fixed set of examples)."""
    nest, args = _PANEL_NESTS[kind]
    seen = []

    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(plan=at.plans(at.schedules(nest)), data=at.arrays(args))
    def check(plan, data):
        seen.append(any(c.panel_width > 1 for c in plan.caches))
        at.assert_matches_reference(plan, args, data=data)

    check()
    assert sum(seen) >= 5, f"only {sum(seen)} of {len(seen)} drawn plans had a cache in panels"


def test_a_cache_in_column_panels_is_never_vectorized_across_its_panels():
    """A vectorized loop along the columns of a cache in panels of 8, whose vectors (16 float32
    lanes) would cross panels: an error saying why (vectors of 8 lanes fit: the same results)."""
    def plan_in_panels(width, target=None):
        nest, args, (i, j, k) = _matmul(4, 48, 8, S.float32, S.float32)
        s = nest.create_schedule()
        s.reorder(i, k, j)
        plan = s.create_plan(target)
        plan.cache(args[1], index=i, panel_width=width)
        plan.vectorize(j)
        return plan, args

    with pytest.raises(acc.ScheduleError, match="panels of 8: the vectorized loop may move along them only"):
        plan_in_panels(8, AVX512)[0].emit_c()
    assert "_mm256_loadu_ps(&B_cache[" in plan_in_panels(8, AVX2)[0].emit_c()  # 8 lanes: one panel each
    assert_matches_reference(*plan_in_panels(32))  # on this machine


@pytest.mark.slow
@pytest.mark.parametrize("ta, tc", [(S.int8, S.int32), (S.uint8, S.int32), (S.bfloat16, S.float32),
                                    (S.float32, S.float32), (S.int16, S.int32)])
@pytest.mark.parametrize("shape", [(8, 12, 16), (5, 7, 9)])
def test_a_vnni_cache_gives_the_same_results(ta, tc, shape):
    M, N, K = shape
    nest, args, (i, j, k) = _matmul(M, N, K, ta, tc)
    s = nest.create_schedule()
    jj = s.split(j, 4)
    s.reorder(j, i, k, jj)
    plan = s.create_plan()
    plan.cache(args[1], index=i, layout=VNNI)
    assert_matches_reference(plan, args)


@pytest.mark.slow
@pytest.mark.parametrize("ta, tc, width", [(S.int8, S.int32, None), (S.int8, S.int32, 4), (S.float32, S.float32, 4)])
def test_a_vnni_multicache_of_panels_gives_the_same_results(ta, tc, width):
    """A multicache in VNNI order (filled at j for each (i, j1) panel), also in column panels."""
    M, N, K = 9, 20, 11
    nest, args, (i, j, k) = _matmul(M, N, K, ta, tc)
    s = nest.create_schedule()
    j1 = s.split(j, 8)
    jj = s.split(j1, 4)
    s.reorder(j, i, j1, k, jj)
    for target in (AVX2, AVX512, AMX, None):  # named models' code; the results on this machine
        plan = s.create_plan(target)
        plan.cache(args[1], index=k, trigger_index=j, layout=VNNI, panel_width=width)
        code = plan.emit_c()
        fills = [line for line in code.splitlines() if "B_cache[" in line and "= B[" in line]
        assert fills and not any("floordiv" in line for line in fills), fills  # group row by group row
    assert_matches_reference(plan, args)


@pytest.mark.parametrize("target", [AVX2, AVX512, AMX], ids=["AVX2", "AVX-512", "AMX"])
def test_the_copy_into_a_vnni_cache_runs_in_its_memory_order(target):
    """The fill loops go group row by group row, column by column, the rows of a group unrolled:
    consecutive stores to consecutive elements; a partial last group is guarded."""
    nest, args, (i, j, k) = _matmul(4, 8, 6, S.int8, S.int32)
    s = nest.create_schedule()
    s.reorder(j, i, k)
    plan = s.create_plan(target)
    plan.cache(args[1], index=j, layout=VNNI)
    code = plan.emit_c()
    from accpy.targets.library import grouped_block

    cols = -(-8 // grouped_block(plan.target, S.int8)[1]) * grouped_block(plan.target, S.int8)[1]
    assert f"B_cache[{4 * cols}*B_c0 + 4*B_c1 + 1]" in code  # (columns in whole tiles where there are tiles)
    assert "< 6" in code  # rows 6, 7 of the second group do not exist: zeros


def test_vnni_layout_errors():
    with pytest.raises(ValueError, match=r"Array.Layout.grouped\(\) is a cache layout"):
        acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(4, 4), layout=VNNI)
    nest, v, i = _vector_add()
    plan = nest.create_plan()
    with pytest.raises(ValueError, match=r"Array.Layout.grouped\(\) groups the rows of a 2-D"):
        plan.cache(v, index=i, layout=VNNI)
    nest, args, (i, j, k) = _matmul(8, 8, 8, S.int8, S.int32)
    plan = nest.create_plan()
    with pytest.raises(ValueError, match=r"a cache in acc.Array.Layout.grouped\(\) lives in host memory"):
        plan.cache(args[1], index=k, layout=VNNI, location=acc.MemorySpace.SHARED)


def test_a_vnni_cache_is_never_vectorized_across_its_groups():
    """A vectorized loop moving along the grouped dimension would need gathers: it stays scalar (or
    moves along the columns), the results unchanged."""
    M, N, K = 8, 32, 16
    nest, args, (i, j, k) = _matmul(M, N, K, S.float32, S.float32)
    s = nest.create_schedule()
    s.reorder(i, j, k)
    plan = s.create_plan()
    plan.cache(args[1], index=i, layout=VNNI)
    plan.vectorize(k)
    assert_matches_reference(plan, args)


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
@pytest.mark.parametrize("shape, kc", [((37, 61, 70), None), ((20, 100, 33), None), ((16, 48, 64), None),
                                       ((37, 61, 150), 64), ((20, 50, 100), 64)])
@pytest.mark.slow
def test_tile_unit_caches_in_vnni_order_take_whole_tiles(tmp_path, dtype, shape, kc):
    """On a target with the tile unit, a VNNI-ordered cache is allocated in whole B tiles (64 int8
    or 32 bf16 rows x 16 columns) with zeros in the rows past the data, so every B tile, partial
    ones included, is one load straight from the cache (no scratch block); exact (int8) or within
    bf16 rounding against numpy on the functional model. With k blocks (`kc`: the sample's
    blocks of 4 KiB rows, made small here), a packed block per k block, partial ones included."""
    import re

    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_matmul_plan

    M, N, K = shape
    sizes = dict(NC=48, KC=kc) if kc else dict(NC=48)
    plan, args = tile_matmul_plan(M, N, K, dtype, target=x86tile.emulating(acc.Target.HOST), sizes=sizes)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    name = f"whole_{dtype}_{M}_{N}_{K}_{kc or 0}"
    lib = pkg.build(name, output_dir=str(tmp_path), python_module=False, progress=False)
    src = (tmp_path / f"{name}.c").read_text()
    # no scratch block is filled from the packed B cache: every B tile loads straight from it
    assert re.search(r"B_cache_cache\[[^\]]*\] = B_cache\[|amx_scratch\d+\[[^\]]*\] = B_cache\[", src) is None
    assert re.search(r"loadd\(\d+, &B_cache\[", src), "no B tile loaded from the packed cache"
    rows = 64 if dtype == "int8" else 32
    m = re.search(r"(?:int8_t|uint16_t) B_cache\[(\d+)\]|accpy_alloc_array\(\"the temporary B_cache\".*?\{([^}]*)\}", src)
    assert m, "no B cache"
    if m.group(1):  # on the stack: rows x columns elements
        assert int(m.group(1)) % (rows * 16) == 0, m.group(0)
    else:
        dims = [int(x) for x in re.findall(r"\((\d+)\)", m.group(2))]
        assert dims[-2] % rows == 0 and dims[-1] % 16 == 0, dims
    _check_tile_matmul(lib.mm, M, N, K, dtype, seed=7)


def test_the_tile_sample_cuts_long_rows_of_k_into_blocks():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_block_sizes

    assert tile_block_sizes(4096, 4096, 4096, "bf16") == dict(GR=1, GC=3, NC=240, KC=2048)
    assert tile_block_sizes(4096, 4096, 4096, "int8")["KC"] == 4096  # 4 KiB rows: one block
    # 2 x 2 tiles with A's rows of tiles packed, where a row of tiles of A stays in L1 (k blocks of
    # at most 1 KiB) and B's block (two k blocks at most) takes all columns
    assert tile_block_sizes(1024, 1024, 1024, "bf16") == dict(GR=2, GC=2, NC=1024, KC=512, PA=1, PF=1)
    assert tile_block_sizes(1024, 1024, 1024, "int8") == dict(GR=2, GC=2, NC=1024, KC=1024, PA=1, PF=1)
    assert tile_block_sizes(2048, 2048, 2048, "int8")["GR"] == 1  # B in two blocks of columns


def test_the_tile_sample_takes_2x2_tiles_and_short_k_blocks_where_c_rows_spread_over_l1_sets():
    """Where C takes 1 MiB or more and 32 of its rows fall in 16 or more of L1's 64 sets: 2 x 2
    tiles, k in equal blocks of at most 640 bytes, B in the fewest blocks of at most 1.1 MiB (rows in
    fewer sets keep the earlier rule: blocks of 1 KiB, two at most, else 1 x 3 tiles)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import _rows_spread, tile_block_sizes

    def kc(M, N, K, dtype, threads=1):
        return tile_block_sizes(M, N, K, dtype, threads)["KC"]

    for threads in (1, 2):
        assert kc(1000, 1000, 1000, "bf16", threads) == 256  # four blocks (not three of 352: 704 bytes)
        assert kc(1000, 1000, 1000, "int8", threads) == 512
        assert kc(1024, 1000, 1024, "bf16", threads) == 256
        for M, N, K in ((1024, 1024, 1024), (768, 768, 768), (1000, 512, 1000)):  # rows of whole KiB
            assert kc(M, N, K, "bf16", threads) == 512
        assert kc(1000, 1000, 320, "bf16", threads) == 320  # 640 bytes: one block
        assert kc(1000, 1000, 600, "int8", threads) == 600
        assert kc(1000, 1000, 600, "bf16", threads) == 320  # two blocks: 320 and 280
        assert kc(511, 513, 257, "bf16", threads) == 257  # C just under 1 MiB: the earlier rule
    one = tile_block_sizes(2000, 2000, 2000, "bf16")
    assert (one["GR"], one["GC"], one["KC"], one["NC"]) == (2, 2, 288, 1024)  # 1.16 MiB: two blocks of B
    assert tile_block_sizes(2000, 2000, 2000, "int8")["NC"] == 2016  # 512 bytes: one block
    assert tile_block_sizes(2048, 2048, 2048, "bf16")["GR"] == 1  # C's rows 8 KiB apart: one set
    assert tile_block_sizes(2048, 2046, 2048, "int8")["GR"] == 1  # 8 bytes short of 8 KiB: five sets
    # the fused sample keeps k in one block: B's block sized for all of k (1 x 3 tiles, 528 x 2000 bytes)
    assert tile_block_sizes(2000, 2000, 2000, "int8", k_blocks=False) == dict(GR=1, GC=3, NC=528, KC=2000)
    assert _rows_spread(4000) and _rows_spread(4032) and not _rows_spread(3072) and not _rows_spread(4096)
    # two threads: each its own rows where B is one block, else its own blocks of columns
    assert tile_block_sizes(2000, 2000, 2000, "int8", 2) == dict(GR=2, GC=2, NC=2016, KC=512, PA=1, split="i",
                                                                 RT=1024, PF=1)
    assert tile_block_sizes(3000, 3000, 3000, "bf16", 2) == dict(GR=2, GC=2, NC=1504, KC=320, PA=1, split="j", PF=1)
    assert tile_block_sizes(2000, 2000, 2000, "bf16", 2)["NC"] == 1024  # two blocks: one each
    assert tile_block_sizes(2000, 2000, 2000, "bf16", 3)["NC"] == 672  # three: one each


@pytest.mark.parametrize("dtype, shape, threads", [("int8", (520, 520, 1100), 1), ("bf16", (520, 520, 600), 1),
                                                   ("bf16", (150, 1800, 640), 1), ("bf16", (150, 1800, 640), 2)])
@pytest.mark.slow
def test_the_tile_sample_with_short_k_blocks_is_exact_on_the_model(dtype, shape, threads, tmp_path):
    """k in equal blocks of at most 640 bytes, the last partial in its last tile step (int8 1100:
    576 and 524; bf16 600: 320 and 280), 2 x 2 tiles with a partial last row and column of tiles;
    bf16 150 x 1800 x 640: B in two blocks of 928 columns (the last partial), on two threads one
    block each; on the model."""
    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_block_sizes, tile_matmul_plan

    M, N, K = shape
    sz = tile_block_sizes(M, N, K, dtype, threads)
    assert (sz["GR"], sz["GC"], sz["KC"]) == (2, 2, 576 if dtype == "int8" else 320)
    assert sz["NC"] == (928 if N == 1800 else 544)
    assert sz.get("split") == ("j" if threads > 1 else None)
    plan, args = tile_matmul_plan(M, N, K, dtype, threads, target=x86tile.emulating(acc.Target.HOST))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build(f"short_k_{dtype}_{N}_{threads}", output_dir=str(tmp_path), python_module=False,
                    progress=False)
    _check_tile_matmul(lib.mm, M, N, K, dtype, seed=5)


def _at_offset(shape, dtype, offset):
    """A zeroed numpy array of `shape` starting `offset` bytes past a 64-byte line."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + n].view(dtype).reshape(shape)


def test_the_tile_sample_starts_its_accumulator_tiles_on_cache_lines():
    """Where C's rows all start 16, 32 or 48 bytes past a cache line, the tile sample's product is
    two functions: "mm" over the columns from the first on a line in every row, with the rule of
    lined tiles (2 x 2, short k blocks, whatever sets C's rows fall in), and "mm_edge" over the
    columns before it; one function where C is on a line or its rows are not equally far past one."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import first_line_column, tile_block_sizes, tile_matmul_layout, tile_matmul_parts

    assert [first_line_column(4096, off) for off in (0, 16, 32, 48, 64 + 16)] == [0, 12, 8, 4, 12]
    assert first_line_column(1000, 16) == 0  # rows 4000 bytes apart: each row its own offset
    assert first_line_column(4096, 18) == 0  # not whole elements past a line
    assert tile_block_sizes(4096, 4084, 4096, "bf16", lined=True) == dict(GR=2, GC=2, NC=1376, KC=320, PA=1, PF=1)
    assert tile_block_sizes(4096, 4096, 4096, "bf16")["GR"] == 1  # rows 16 KiB apart, not lined: 1 x 3
    assert [n for n, _, _ in tile_matmul_parts(2048, 2048, 2048, "int8", c_offset=0)] == ["mm"]
    # C on a line: one function, its tiles' rows whole lines (2 x 2, short k; int8 where B takes
    # several blocks: k blocks of 1 KiB, B's tiles streamed); offset not known: 1 x 3
    (_, cols, sz, lined), = tile_matmul_layout(2048, 2048, 2048, "int8", c_offset=0)
    assert cols == (0, 2048) and lined and (sz["GR"], sz["KC"], sz["NC"], sz.get("NT")) == (2, 1024, 1024, 1)
    (_, cols, sz, lined), = tile_matmul_layout(2048, 2048, 2048, "int8", 2, c_offset=0)
    assert (sz["KC"], sz["NC"], sz["split"], sz.get("NT")) == (1024, 1024, "j", 1)  # each thread its columns
    (_, cols, sz, lined), = tile_matmul_layout(1024, 1024, 1024, "int8", c_offset=0)
    assert (sz["GR"], sz["KC"], sz.get("NT")) == (2, 512, None)  # B in one block of 1 KiB rows: short k
    (_, cols, sz, lined), = tile_matmul_layout(2048, 2048, 2048, "bf16", c_offset=0)
    assert (sz["GR"], sz["KC"], sz.get("NT")) == (2, 320, None)  # bf16: short k blocks, B loaded as usual
    (_, cols, sz, lined), = tile_matmul_layout(2000, 2000, 2000, "int8", c_offset=0)
    assert lined and (sz["KC"], sz.get("NT")) == (512, None)  # rows 8000 bytes apart: spread, short k
    (_, cols, sz, _), _ = tile_matmul_layout(2048, 2048, 2048, "int8", c_offset=16)
    assert cols == (12, 2048) and sz.get("NT") == 1  # judged by C's whole rows (8 KiB), not 2036 columns
    (_, cols, sz, lined), = tile_matmul_layout(2048, 2048, 2048, "int8")
    assert not lined and sz["GR"] == 1
    (_, main, msz, _), (_, edge, esz, _) = tile_matmul_layout(2048, 2048, 2048, "bf16", 2, c_offset=48)
    assert main == (4, 2048) and edge == (0, 4) and msz["GR"] == 2
    assert (esz["GR"], esz["GC"], esz["NC"], esz["KC"], esz["split"]) == (1, 1, 16, 2048, "i")
    assert [n for n, _, _ in tile_matmul_parts(1000, 1000, 1000, "int8", c_offset=16)] == ["mm"]
    assert [n for n, _, _ in tile_matmul_parts(512, 512, 512, "int8", c_offset=16)] == ["mm"]  # C under 4 MiB
    parts = tile_matmul_parts(2048, 2048, 2048, "int8", target=AMX, c_offset=16)
    assert [n for n, _, _ in parts] == ["mm", "mm_edge"]
    main, edge = (plan.emit_c() for _, plan, _ in parts)
    # the first part's accumulator tiles from column 12 (48 bytes: 16 + 48 is a whole line)
    assert re.search(r"accpy_amx_loadd\(0, &C\[[^\]]*\+ 12\], 8192\)", main)
    assert "accpy_amx_dpbusd(3, 5, 7)" in main  # a 2 x 2 grid
    assert "accpy_amx_loaddt1(6, &B_cache[" in main and "accpy_amx_loadd(6," not in main  # B streamed
    assert re.search(r"C\[[^\]]*\] = ", edge) and "accpy_amx_dpbusd(0, 1, 2)" in edge  # one partial tile


@pytest.mark.parametrize("dtype, shape, threads, offset", [("int8", (40, 96, 130), 1, 16), ("int8", (70, 64, 64), 2, 48),
                                                           ("bf16", (40, 96, 70), 1, 32), ("bf16", (33, 112, 200), 2, 16),
                                                           ("int8", (20, 8, 64), 1, 16)])
@pytest.mark.slow
def test_the_tile_sample_in_two_parts_is_exact_on_the_model(dtype, shape, threads, offset, tmp_path):
    """The two functions of a C 16, 32 or 48 bytes past a line add A @ B to every column of C
    (int8 exactly), on one and two threads, on the model; and C at another offset than the one
    they were built for gets the same results (8 columns: rows 32 bytes apart, one function)."""
    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import build_tile_matmul

    M, N, K = shape
    _, run = build_tile_matmul(M, N, K, dtype, threads, c_offset=offset, output_dir=str(tmp_path),
                               target=x86tile.emulating(acc.Target.HOST), min_c_bytes=0)
    for off in (offset, 0):
        def mm(a, b, c, off=off):
            placed = _at_offset(c.shape, c.dtype, off)
            placed[:] = 3
            run(a, b, placed)
            c[:] = placed - 3

        _check_tile_matmul(mm, M, N, K, dtype, seed=7)


def test_the_tile_sample_prefetches_the_next_accumulator_block_where_tiles_are_reloaded_often():
    """C's next block of tiles is prefetched over the k loop where the tiles are reloaded every 16
    k steps or sooner (k blocks of at most 1 KiB) and C takes 1 MiB or more."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_block_sizes, tile_matmul_plan

    for threads in (1, 2):
        assert tile_block_sizes(1000, 1000, 1000, "bf16", threads)["PF"] == 1  # k blocks of 256 (512 bytes)
        assert tile_block_sizes(512, 512, 512, "int8", threads)["PF"] == 1  # C: exactly 1 MiB
        assert "PF" not in tile_block_sizes(2048, 2048, 2048, "int8", threads)  # 32 k steps per block
        assert "PF" not in tile_block_sizes(256, 256, 256, "bf16", threads)  # C: 256 KiB
        assert "PF" not in tile_block_sizes(511, 513, 257, "int8", threads)  # C: just under 1 MiB
        assert "PF" not in tile_block_sizes(8000, 40, 256, "int8", threads)  # one whole column step
    plan, _ = tile_matmul_plan(512, 512, 512, "int8", 1, target=AMX)
    code = plan.emit_c()
    k_loop = code[code.index("for (int64_t k = "):]
    assert "__builtin_prefetch((const void*)((uintptr_t)C" in k_loop[:k_loop.index("accpy_amx_dpbusd")]
    assert "spread=k" in repr(plan)


@pytest.mark.slow
def test_the_fused_quantized_plan_prefetches_the_next_accumulator_block_where_k_is_short():
    """The fused plan keeps all of k in one block: C's next tiles are prefetched over it where k
    takes at most 1 KiB (as the product's rule asks of its blocks), not where it is longer."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import fused_block_sizes, fused_tile_plan, tile_block_sizes

    assert fused_block_sizes(1000, 1000, 1000)["PF"] == 1 and fused_block_sizes(1000, 1000, 1000, 2)["PF"] == 1
    assert tile_block_sizes(1000, 1000, 1500, "int8", k_blocks=False)["PF"] == 1  # its blocks: 1024 bytes
    assert "PF" not in fused_block_sizes(1000, 1000, 1500)  # the fused plan's one block: 1500 bytes
    for K, fetched in ((1000, True), (1500, False)):
        code = fused_tile_plan(1000, 1000, K, True, 1, target=AMX)[0].emit_c()
        k_loop = code[code.index("for (int64_t k = "):]
        assert ("__builtin_prefetch((const void*)((uintptr_t)Acc" in k_loop[:k_loop.index("accpy_amx_dpbusd")]) is fetched


@pytest.mark.slow
def test_the_tile_sample_gives_each_thread_one_block_in_whole_steps(tmp_path):
    """With threads, where one thread's B is one block of columns and there are 4 rows of tiles per
    thread or more: one thread's sizes, each thread its own block of rows (RT). Elsewhere one block
    of columns per thread where it fills it exactly: in 1 x 3 steps when they do, else in 1 x 2
    steps (where k has 8 to 16 tile steps); else the threads share the rows of tiles, given 4 rows
    of tiles per thread (else blocks of columns again). One thread's sizes do not change. The 1 x 2
    grid with two threads is exact on the model."""
    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_block_sizes, tile_matmul_plan

    for shape, dtype, rows in (((1000, 1000, 1000), "int8", 512), ((1024, 1024, 1024), "bf16", 512),
                               ((511, 513, 257), "bf16", 256), ((256, 256, 256), "int8", 128),
                               ((512, 512, 512), "bf16", 256), ((1024, 1024, 1024), "int8", 512)):
        assert tile_block_sizes(*shape, dtype, 2) == dict(tile_block_sizes(*shape, dtype), split="i", RT=rows)
    assert tile_block_sizes(96, 96, 1024, "int8", 2) == dict(GR=1, GC=3, NC=48, KC=1024, split="j")  # 6 rows
    # one thread: two blocks of 240 and 4 KiB rows of k (C under 1 MiB); two: one block each, 1 x 3 steps
    assert tile_block_sizes(512, 480, 4096, "int8", 2) == dict(GR=1, GC=3, NC=240, KC=4096, split="j")
    # one thread: blocks of 192 (4 KiB rows of k); a block of 256 per thread would not be whole 1 x 3
    # steps: the threads share the rows of tiles and each packed block
    assert tile_block_sizes(2000, 512, 2048, "bf16", 2) == dict(tile_block_sizes(2000, 512, 2048, "bf16"), split="i")
    assert tile_block_sizes(96, 96, 256, "int8", 2)["GC"] == 3 and tile_block_sizes(96, 96, 256, "int8", 2)["NC"] == 48
    assert tile_block_sizes(512, 512, 512, "bf16", 1)["GR"] == 2
    assert tile_block_sizes(40, 128, 520, "int8", 2) == dict(GR=1, GC=2, NC=64, KC=520, split="j")
    M, N, K = 40, 100, 520  # blocks of 64 and 36 columns in 1 x 2 steps: a partial tile, a k tail
    plan, args = tile_matmul_plan(M, N, K, "int8", 2, target=x86tile.emulating(acc.Target.HOST),
                                  sizes=dict(GC=2, NC=64))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build("threads_1x2", output_dir=str(tmp_path), python_module=False, progress=False)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = np.zeros((M, N), np.int32)
    lib.mm(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def test_the_tile_sample_cuts_each_threads_share_of_wide_n_into_equal_blocks(tmp_path):
    """Wide N on threads: blocks of whole tiles that cut each thread's share of the columns equally
    (the last 1 x 3 step of each block narrower), where they fit in 1 MiB and blocks of whole
    steps would leave a thread 5% more than its share or be less than half as wide; exact on the
    model."""
    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_block_sizes, tile_matmul_plan

    assert tile_block_sizes(2048, 2048, 2048, "int8", 2)["NC"] == 512  # 1024 each, in 2 blocks (not 384s)
    assert tile_block_sizes(2048, 2048, 2048, "bf16", 2)["NC"] == 256  # 4 KiB per column: 4 blocks each
    assert tile_block_sizes(4096, 4096, 4096, "int8", 2)["NC"] == 192  # 11 blocks of 192 are within 5%
    assert tile_block_sizes(2048, 2048, 2048, "bf16", 1)["NC"] == 240  # one thread: whole 1 x 3 steps
    assert tile_block_sizes(2048, 2046, 2048, "int8", 2)["NC"] % 48 == 0  # 1023 each: no equal blocks
    M, N, K = 32, 640, 4096  # 320 columns each: two blocks of 160 (three 1 x 3 steps and one tile)
    sz = tile_block_sizes(M, N, K, "int8", 2)
    assert (sz["NC"], sz["GC"], sz["split"]) == (160, 3, "j")
    plan, args = tile_matmul_plan(M, N, K, "int8", 2, target=x86tile.emulating(acc.Target.HOST))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build("threads_equal_blocks", output_dir=str(tmp_path), python_module=False, progress=False)
    _check_tile_matmul(lib.mm, M, N, K, "int8", seed=4)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_threads_each_taking_their_rows_with_their_own_packed_b_are_exact(dtype, tmp_path):
    """Where one thread's B is one block of columns, each of two threads takes its own block of rows
    (9 rows of 2 x 2 tiles: 5 and 4, the last partial) and packs its own copy of B (one parallel
    region, the rows' loop outermost); on the model."""
    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_block_sizes, tile_matmul_plan

    M, N, K = 264, 200, 520
    sz = tile_block_sizes(M, N, K, dtype, 2)
    assert (sz["split"], sz["RT"], sz["PA"]) == ("i", 160, 1) and sz["NC"] >= N
    plan, args = tile_matmul_plan(M, N, K, dtype, 2, target=x86tile.emulating(acc.Target.HOST))
    code = plan.emit_c()
    region = code[code.index("#pragma omp parallel num_threads"):]
    assert region.index("B_cache = ") < region.index("#pragma omp for")  # a copy of B per thread
    assert re.search(r"#pragma omp for[^\n]*\n\s*for \(int64_t i = 0; i < 2; \+\+i\)", region)
    assert "#pragma omp parallel for" not in code  # no fill shared between threads
    # A's copy feeds tile loads: its rows are whole cache lines (int8, 520 k: 576 bytes; bf16: k blocks of 512)
    assert re.search(r"loadd\(\d+, &A_cache\[[^\]]*\], %d\)" % (576 if dtype == "int8" else 1024), code)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build(f"own_rows_{dtype}", output_dir=str(tmp_path), python_module=False, progress=False)
    _check_tile_matmul(lib.mm, M, N, K, dtype, seed=4)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_threads_sharing_rows_of_tiles_and_the_packed_block_are_exact(dtype, tmp_path):
    """Two threads sharing the rows of tiles (split "i" without blocks of rows: 9 rows of 2 x 2
    tiles, the last partial) and each packed block of B, which all threads fill (a parallel loop of
    its own), each packing its rows of A; on the model."""
    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_matmul_plan

    M, N, K = 264, 200, 520
    plan, args = tile_matmul_plan(M, N, K, dtype, 2, target=x86tile.emulating(acc.Target.HOST), sizes=dict(RT=0))
    code = plan.emit_c()
    assert re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(int64_t B_c0 = 0;", code)
    assert re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(int64_t i = 0;", code)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build(f"rows_{dtype}", output_dir=str(tmp_path), python_module=False, progress=False)
    _check_tile_matmul(lib.mm, M, N, K, dtype, seed=4)


def _check_tile_matmul(mm, M, N, K, dtype, seed):
    """`mm` (C += A @ B, int8 or bf16) against numpy on random data: int8 exactly."""
    rng = np.random.default_rng(seed)
    if dtype == "int8":
        a = rng.integers(0, 256, (M, K)).astype(np.uint8)
        b = rng.integers(-128, 128, (K, N)).astype(np.int8)
        c = np.zeros((M, N), np.int32)
        mm(a, b, c)
        np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    else:
        a = acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32))
        b = acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32))
        c = np.zeros((M, N), np.float32)
        mm(a, b, c)
        want = acc.bfloat16_values(a).astype(np.float64) @ acc.bfloat16_values(b).astype(np.float64)
        np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 9000), st.sampled_from(["int8", "bf16"]),
       st.integers(1, 8))
def test_tile_block_sizes_are_whole_tiles_for_any_shape_and_threads(M, N, K, dtype, threads):
    # (8 threads on 2000 columns once asked min() of an empty range of candidates)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_block_sizes

    s = tile_block_sizes(M, N, K, dtype, threads)
    assert (s["GR"], s["GC"]) in ((1, 2), (1, 3), (2, 2)) and 1 <= s["KC"] <= K
    assert bool(s.get("PA")) == (s["GR"] == 2)  # 2 x 2: A's rows of tiles packed
    assert s["GR"] == 1 or s["KC"] * (1 if dtype == "int8" else 2) <= 1024  # ... and in L1
    assert s.get("split") in ((None,) if threads == 1 else ("i", "j"))
    assert s["NC"] >= 16 and s["NC"] % 16 == 0
