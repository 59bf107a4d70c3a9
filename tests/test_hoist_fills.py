"""The loop-invariant fill pass (accpy/lower/hoist.py): a local buffer filled with the same values
in every iteration of a loop is filled once before it; fills that read the loop's variable or a
buffer the loop writes, and loops that may not run or run in parallel, keep theirs. Then the tile
unit's partial A tile at the end of k, copied once per row of blocks, exact on the model."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.ir.expr import Buffer, Call, Const, Load, Var, idx_op
from accpy.ir.kinds import BufferRole, HostMemory, LoopKind
from accpy.ir.stmt import Alloc, Block, Evaluate, For, Store
from accpy.ir.types import ScalarType
from accpy.ir.visitor import nodes_of
from accpy.lower.hoist import hoist_invariant_fills, written_buffers
from accpy.targets import x86tile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi.kernels import mixed_matmul_nest  # noqa: E402

I32 = ScalarType.int32


def _buf(name, n, role=BufferRole.INPUT, memory=HostMemory.GLOBAL):
    return Buffer(name, I32, (Const(n),), (Const(1),), role=role, memory=memory)


def _loop(var, hi, body, lo=0):
    return For(var, Const(lo) if isinstance(lo, int) else lo, Const(hi) if isinstance(hi, int) else hi, body)


def _kernel(src_index, hi=8, written=None):
    """for j in [0, hi): s = alloc; for t: s[t] = X[src_index(t)]; Out[j] = s[0] (+ `written`)."""
    j, t = Var("j"), Var("t")
    X, Out = _buf("X", 64), _buf("Out", 64, BufferRole.INPUT_OUTPUT)
    s = _buf("s", 4, BufferRole.CACHE, HostMemory.LOCAL)
    fill = _loop(t, 4, Store(s, (t,), Load(X, (src_index(t, j),))))
    use = Store(Out, (j,), Load(s, (Const(0),)))
    rest = use if written is None else Block((use, written(X, j)))
    return _loop(j, hi, Alloc(s, Block((fill, rest)), zero=False), ), s


def _hoisted(stmt, s) -> bool:
    """Whether the Alloc of `s` now encloses the loop."""
    return isinstance(stmt, Alloc) and stmt.buffer is s and bool(nodes_of(stmt.body, For))


def test_an_invariant_fill_moves_before_its_loop():
    stmt, s = _kernel(lambda t, j: t)
    out = hoist_invariant_fills(stmt, {})
    assert _hoisted(out, s)
    fill, loop = out.body.stmts
    assert isinstance(loop, For) and not any(a.buffer is s for a in nodes_of(loop, Alloc))
    assert [st.buffer.name for st in nodes_of(fill, Store)] == ["s"]


def _x_of(stmt):
    return next(ld.buffer for ld in nodes_of(stmt, Load) if ld.buffer.name == "X")


def test_fills_that_vary_or_read_what_the_loop_writes_stay():
    varying, s = _kernel(lambda t, j: idx_op("add", t, j))
    assert hoist_invariant_fills(varying, {}) is varying
    stored, s = _kernel(lambda t, j: t, written=lambda X, j: Store(X, (j,), Const(0, I32)))
    assert hoist_invariant_fills(stored, {}) is stored
    # a call that may write through its pointer (an unknown function: any buffer it is given)
    called, s = _kernel(lambda t, j: t, written=lambda X, j: Evaluate(Call("opaque", (Load(X, (j,)),), I32)))
    assert _x_of(called) in written_buffers(called)
    assert hoist_invariant_fills(called, {}) is called


def test_loops_that_may_not_run_or_run_in_parallel_keep_their_fills():
    n = Var("n")
    runtime, s = _kernel(lambda t, j: t, hi=n)
    assert hoist_invariant_fills(runtime, {}) is runtime
    empty, s = _kernel(lambda t, j: t, hi=0)
    assert hoist_invariant_fills(empty, {}) is empty
    par, s = _kernel(lambda t, j: t)
    assert hoist_invariant_fills(par, {par.var: LoopKind.PARALLEL}) is par
    assert _hoisted(hoist_invariant_fills(par, {par.var: LoopKind.UNROLLED}), s)


def _tile_plan(target, M, N, K, NC=96):
    nest, args, (i, j, k) = mixed_matmul_nest(M, N, K, acc.ScalarType.uint8, acc.ScalarType.int8,
                                             acc.ScalarType.int32, acc.ScalarType.int32)
    A, B, C = args
    s = nest.create_schedule()
    j1 = s.split(j, NC)
    ii = s.split(i, 16)
    j2 = s.split(j1, 48)
    jj = s.split(j2, 16)
    kk = s.split(k, 64)
    s.reorder(j, i, j1, k, j2, ii, jj, kk)
    p = s.create_plan(target)
    packed = p.cache(B, index=i, layout=acc.Array.Layout.VNNI, panel_width=16)
    tile = acc.MemorySpace.AMX_TILE
    p.cache(C, index=k, location=tile)
    p.cache(A, index=ii, location=tile)
    p.cache(packed, index=ii, location=tile)
    p.unroll(j2)
    p.tensorize(indices=(ii, jj, kk))
    return p, args


@pytest.mark.slow
def test_the_last_partial_a_tile_is_copied_once_per_row_of_tiles(tmp_path):
    """K = 100: the last A tile of each row of tiles (36 of 64 bytes) is copied into its zeroed
    block once, before the loop over column blocks; the partial C tiles of the last rows are still
    copied per block. Exact on the functional model."""
    M, N, K = 40, 200, 100
    plan, args = _tile_plan(x86tile.emulating(acc.Target.HOST), M, N, K)
    code = plan.emit_c()
    j1_loop = code.index("for (int64_t j1 = 0;")
    a_fill = re.search(r"amx_scratch\d+\[[^\]]*\] = A\[", code)
    assert a_fill is not None and a_fill.start() < j1_loop
    c_fill = re.search(r"amx_scratch\d+\[[^\]]*\] = C\[", code[j1_loop:])
    assert c_fill is not None  # (its loop writes C: that copy stays where it was)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build("hoisted", output_dir=tmp_path, python_module=False, progress=False)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    c = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    want = c + a.astype(np.int32) @ b.astype(np.int32)
    lib.mm(a, b, c)
    assert np.array_equal(c, want)
