"""Quasi-affine subscripts: `//` and `%` by positive integer constants (Accera's packing recipes).

Bounds and dependences are decided exactly (z3's integer division and modulo by a positive
constant are Python's floor semantics); the generated code uses floor semantics for negative
operands too; caches bound such subscripts by their range over the cache's block.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi import kernels as K  # noqa: E402

F32 = acc.ScalarType.float32


def _pack(schedule_fn=None, plan_fn=None, n_rows=32, cols=3):
    """Out[j, (i // 4) % 4, i % 4, i // 16] = In[i, j]: rows of In packed into 4 x 4 blocks."""
    In = acc.Array(role=acc.Role.INPUT, shape=(n_rows, cols), name="In")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(cols, 4, 4, n_rows // 16), name="Out")
    n = acc.Nest(shape=(n_rows, cols))
    i, j = n.get_indices()

    @n.iteration_logic
    def _():
        Out[j, (i // 4) % 4, i % 4, i // 16] = In[i, j]

    s = n.create_schedule()
    if schedule_fn:
        schedule_fn(s, i, j)
    plan = s.create_plan()
    if plan_fn:
        plan_fn(plan, (In, Out), s)
    return plan, (In, Out)


def _pack_reference(a):
    n_rows, cols = a.shape
    out = np.zeros((cols, 4, 4, n_rows // 16), np.float32)
    for i in range(n_rows):
        out[:, (i // 4) % 4, i % 4, i // 16] = a[i]
    return out


def _run(plan, args, tmp_path, inputs):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="q")
    fn = pkg.build("q", output_dir=tmp_path).q
    fn(*inputs)
    return inputs


def _split(s, i, j):
    s.split(i, 8)


def _tile_reorder(s, i, j):
    ii = s.split(i, 16)
    s.reorder(j, i, ii)


def _skew(s, i, j):
    s.skew(i, j)


def _pad(s, i, j):
    s.pad(i, 3)
    s.split(i, 4)


@pytest.mark.parametrize("schedule_fn", [None, _split, _tile_reorder, _skew, _pad])
def test_packing_recipe_under_schedules(tmp_path, schedule_fn):
    plan, args = _pack(schedule_fn)
    a = np.random.default_rng(0).random((32, 3), np.float32)
    out = np.zeros((3, 4, 4, 2), np.float32)
    _run(plan, args, tmp_path, [a, out])
    np.testing.assert_array_equal(out, _pack_reference(a))


def test_cache_of_a_quasi_affinely_written_array(tmp_path):
    def plan_fn(plan, args, s):
        i = s.get_indices()[0]
        plan.cache(args[1], index=s.get_indices()[1])  # Out, at the inner row loop

    plan, args = _pack(lambda s, i, j: s.split(i, 16), plan_fn)
    a = np.random.default_rng(1).random((32, 3), np.float32)
    out = np.zeros((3, 4, 4, 2), np.float32)
    _run(plan, args, tmp_path, [a, out])
    np.testing.assert_array_equal(out, _pack_reference(a))
    c = (tmp_path / "q.c").read_text()
    assert "Out_cache" in c


def test_negative_operands_use_floor_semantics(tmp_path):
    X = acc.Array(role=acc.Role.INPUT, shape=(4,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(12,), name="Y")
    Z = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(12,), name="Z")
    n = acc.Nest(shape=(12,))
    i = n.get_indices()

    @n.iteration_logic
    def _():
        Y[i] = X[(i - 7) % 4]  # (0 - 7) % 4 == 1 in Python (C's % would give -3)
        Z[i] = X[(i - 7) // 4 + 2]  # (0 - 7) // 4 == -2 (C's / would give -1)

    x = np.array([10, 20, 30, 40], np.float32)
    y, z = np.zeros(12, np.float32), np.zeros(12, np.float32)
    _run(n.create_plan(), (X, Y, Z), tmp_path, [x, y, z])
    ii = np.arange(12)
    np.testing.assert_array_equal(y, x[(ii - 7) % 4])
    np.testing.assert_array_equal(z, x[(ii - 7) // 4 + 2])


def test_out_of_bounds_quasi_affine_index_is_refused():
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="X")
    n = acc.Nest(shape=(10,))
    i = n.get_indices()
    with pytest.raises(acc.LogicError, match=r"index 0 of X \(`i // 2`\) goes out of bounds: at iteration "
                                             r"\(i=(8|9)\) it is 4, but X has shape \(4,\)"):
        @n.iteration_logic
        def _():
            X[i // 2] += 1.0


@pytest.mark.parametrize("index, what", [
    (lambda i, j: i // j, "i // j"), (lambda i, j: i % 0, "i % 0"), (lambda i, j: i // -2, "i // -2"),
    (lambda i, j: (i * j) % 4, "i * j % 4"),
])
def test_non_constant_or_non_positive_divisors_are_refused(index, what):
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(64,), name="X")
    n = acc.Nest(shape=(4, 4))
    i, j = n.get_indices()
    with pytest.raises(acc.LogicError, match="is not an affine function of the loop indices"):
        @n.iteration_logic
        def _():
            X[index(i, j)] += 1.0


def test_dependence_through_floor_division_decides_legality():
    """Instances of different t meet on one element only through `t // 2`: the reorder that
    swaps them is refused; where rows of t are disjoint, the same reorder is legal."""
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8,), name="Y")
    n = acc.Nest(shape=(4, 8))
    t, i = n.get_indices()

    @n.iteration_logic
    def _():
        Y[i // 2 + 4 * (t // 2)] = Y[i // 2 + 4 * (t // 2)] * 2.0 + 1.0  # a write, not a commuting update

    with pytest.raises(acc.ScheduleError, match=r"this order changes the result: Y\[\d+\]"):
        n.create_schedule().reorder(i, t)

    Z = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 4), name="Z")
    m = acc.Nest(shape=(4, 8))
    t2, i2 = m.get_indices()

    @m.iteration_logic
    def _():
        Z[t2, i2 // 2] = Z[t2, i2 // 2] * 2.0 + 1.0

    m.create_schedule().reorder(i2, t2)  # each t2 has its own row: legal


def test_parallel_race_through_modulo_is_found():
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="Y")
    n = acc.Nest(shape=(16,))
    i = n.get_indices()

    @n.iteration_logic
    def _():
        Y[i % 4] = Y[i % 4] * 2.0

    with pytest.raises(acc.ScheduleError, match="two threads would race on Y"):
        n.create_plan().parallelize(i)


def test_flattened_subscripts_recombine():
    from accpy.ir.affine import combination_affine, quasi_linear
    from accpy.ir.expr import Const, Var, idx_op

    p, k = Var("p"), Var("k")
    x = idx_op("add", idx_op("mul", Const(16), p), Const(3))
    row, col = idx_op("add", idx_op("floordiv", x, Const(14)), k), idx_op("mod", x, Const(14))
    # [x // 14 + k, x % 14] in rows 14 wide: offset x + 14 k
    flat = combination_affine([(row, 14), (col, 1)])
    assert flat.coef(p) == 16 and flat.coef(k) == 14 and flat.const == 3
    assert combination_affine([(row, 13), (col, 1)]) is None  # rows 13 wide: no recombination
    assert combination_affine([(row, 14)]) is None  # a division left over
    affine, quasi = quasi_linear([(row, 1)])
    assert affine.coef(k) == 1 and list(quasi.values()) == [[1, 0]]


@pytest.mark.parametrize("H, W, band", [(6, 14, 28), (6, 14, 42), (5, 9, 16), (7, 5, 3), (4, 6, 24)])
def test_cache_of_a_flattened_pixel_band(tmp_path, H, W, band):
    """The block of In[p // W + ky, p % W + kx] over a band of pixels: its rows are bounded in the
    band's first and last pixel (exact when the band is whole output rows), its columns W wide;
    the results are the window sums."""
    import re

    k = K.make_flattened_band(H, W, band)
    v = k.inputs(np.random.default_rng(2))
    want = k.oracle(v)["Out"]
    a, out = v["In"], v["Out"].copy()
    _run(k.source, k.args, tmp_path, [a, out])
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)

    # the block's size in code for a named model (rows are padded to whole vectors: this machine's
    # width would decide the padding); a row of W <= 16 floats is padded to 16 on AVX-512
    avx512 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)
    code = K.make_flattened_band(H, W, band, target=avx512).source.emit_c()
    declared = int(re.search(r"float In_cache\[(\d+)\]", code).group(1))
    rows = declared // 16
    if band % W == 0:  # whole output rows: the block is band / W input rows, not the whole input
        assert rows == band // W
    else:
        assert rows <= -(-band // W) + 1 < H + 2
