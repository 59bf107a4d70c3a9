"""Floor divisions and remainders by constants that the loops' ranges decide become affine
(accpy/lower/simplify.py), so a packing subscript such as `Out[i // 16, j // 8, i % 16, j % 8]`
moves by one element per iteration of a split's inner loop and vectorizes (Accera's
test_packing_floordiv_mod_splits_vectorize and test_transpose_16x4_packed); subscripts that stay
quasi-affine vectorize where the address they make is affine (`[x // m, x % m]`, accpy/lower/lanes.py)."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.ir.expr import BinOp, Const, Var
from accpy.ir.stmt import Block, For
from accpy.ir.types import ScalarType as T
from accpy.ir.visitor import nodes_of
from accpy.lower.simplify import simplify

AVX2 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)


def _idx(op, a, b):
    return BinOp(op, a, b, T.index)


def _c(v):
    return Const(v, T.index)


def _subscript_after_simplify(expr, loops):
    """The expression `expr` after simplify, evaluated inside `loops` ((var, lo, hi), outermost first)."""
    from accpy.ir.stmt import Evaluate

    stmt = Evaluate(expr)
    for v, lo, hi in reversed(loops):
        stmt = For(v, lo, hi, Block((stmt,)))
    out = simplify(stmt)
    (ev,) = nodes_of(out, Evaluate)
    return ev.value


def test_divisions_the_ranges_decide_become_affine():
    x, y = Var("x"), Var("y")

    def e(op, m, const=0):
        return _idx(op, _idx("add", _idx("add", _idx("mul", _c(8), x), y), _c(const)), _c(m))

    loops = [(x, _c(0), _c(4)), (y, _c(0), _c(8))]
    assert _subscript_after_simplify(e("floordiv", 8), loops) == x
    assert _subscript_after_simplify(e("mod", 8), loops) == y
    # the remainder's part lies in [8, 16): one more in the quotient
    assert _subscript_after_simplify(e("floordiv", 8, 8), loops) == _idx("add", x, _c(1))
    assert _subscript_after_simplify(e("mod", 8, 8), loops) == y
    # y + 3 in [3, 7] when y < 5, so still one quotient
    short = [(x, _c(0), _c(4)), (y, _c(0), _c(5))]
    assert _subscript_after_simplify(e("floordiv", 8, 3), short) == x
    assert _subscript_after_simplify(e("mod", 8, 3), short) == _idx("add", y, _c(3))


def test_divisions_the_ranges_do_not_decide_stay():
    x, y, n = Var("x"), Var("y"), Var("n")

    def e(op, m, const=0):
        return _idx(op, _idx("add", _idx("add", _idx("mul", _c(8), x), y), _c(const)), _c(m))

    # y + 3 in [3, 10] crosses a multiple of 8; y < 8 crosses one of 4; a runtime bound is unknown
    for op in ("floordiv", "mod"):
        for m, const, hi in ((8, 3, _c(8)), (4, 0, _c(8)), (8, 0, n)):
            got = _subscript_after_simplify(e(op, m, const), [(x, _c(0), _c(4)), (y, _c(0), hi)])
            assert isinstance(got, BinOp) and got.op == op, (op, m, const, hi)


def _pack_plan(target=acc.Target.HOST):
    M, Mi, N, Ni = 64, 16, 32, 8
    Input = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.int32, shape=(M, N), name="Input")
    Output = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.int32,
                       shape=(M // Mi, N // Ni, Mi, Ni), name="Output")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Output[i // Mi, j // Ni, i % Mi, j % Ni] = Input[i, j]

    s = nest.create_schedule()
    ii, jj = s.tile({i: Mi, j: Ni})
    plan = s.create_plan(target)
    plan.vectorize(jj)
    return plan, (Input, Output)


def test_packing_subscripts_vectorize_as_contiguous_stores():
    plan, _ = _pack_plan(AVX2)
    code = plan.emit_c()
    assert "_mm256_storeu_si256" in code and "_mm256_loadu_si256" in code
    assert "%" not in code.split("{", 1)[1]  # no remainder left in the kernel


def test_packing_subscripts_vectorized_compute_the_packing(tmp_path):
    plan, args = _pack_plan()
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="pack")
    fn = pkg.build("pack", output_dir=tmp_path).pack
    a = np.arange(64 * 32, dtype=np.int32).reshape(64, 32)
    out = np.full((4, 4, 16, 8), -1, np.int32)
    fn(a, out)
    np.testing.assert_array_equal(out, a.reshape(4, 16, 4, 8).transpose(0, 2, 1, 3))


def _transpose_plan(target=acc.Target.HOST):
    In = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(16, 4), name="In")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(4, 2, 8), name="Out")
    nest = acc.Nest(shape=(16, 4))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Out[j, (i // 8) % 2, i % 8] = In[i, j]

    s = nest.create_schedule()
    ii = s.split(i, 8)
    plan = s.create_plan(target)
    plan.unroll(i)
    plan.vectorize(ii)
    return plan, (In, Out)


def test_nested_quasi_affine_subscript_vectorizes_with_gathers(tmp_path):
    """`(i // 8) % 2` with i = 8*i' + ii: i' % 2 over i' in [0, 2) is i'; In moves by 4 elements
    per lane (AVX2's gather)."""
    code = _transpose_plan(AVX2)[0].emit_c()
    assert "_mm256_i32gather_ps" in code and "_mm256_storeu_ps" in code
    plan, args = _transpose_plan()
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="tr")
    fn = pkg.build("tr", output_dir=tmp_path).tr
    a = np.arange(64, dtype=np.float32).reshape(16, 4)
    out = np.zeros((4, 2, 8), np.float32)
    fn(a, out)
    np.testing.assert_array_equal(out, a.T.reshape(4, 2, 8))


def _flattened_plan(subscripts, target=acc.Target.HOST):
    In = acc.Array(role=acc.Role.INPUT, shape=(16,), name="In")
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 4), name="Out")
    nest = acc.Nest(shape=(16,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        Out[subscripts(i)] = In[i]

    s = nest.create_schedule()
    ii = s.split(i, 8)
    plan = s.create_plan(target)
    plan.vectorize(ii)
    return plan, (In, Out)


def test_subscripts_that_recombine_into_a_flat_offset_vectorize(tmp_path):
    """`Out[i // 4, i % 4]` with i = 8*i' + ii: the subscripts are not affine in ii (ii < 8 crosses
    a row), but the address they make, 4 * (i // 4) + i % 4 = i, is: one contiguous store."""
    rows = lambda i: (i // 4, i % 4)  # noqa: E731
    code = _flattened_plan(rows, AVX2)[0].emit_c()
    assert "_mm256_storeu_ps" in code and "_mm256_loadu_ps" in code
    plan, args = _flattened_plan(rows)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="flat")
    fn = pkg.build("flat", output_dir=tmp_path).flat
    a = np.arange(16, dtype=np.float32)
    out = np.zeros((4, 4), np.float32)
    fn(a, out)
    np.testing.assert_array_equal(out, a.reshape(4, 4))


def test_subscripts_whose_address_is_not_affine_still_refuse_vectorize():
    """`Out[i % 4, i // 4]` (a transpose) is 4 * (i % 4) + i // 4: not affine in ii; refused,
    naming the array."""
    plan, _ = _flattened_plan(lambda i: (i % 4, i // 4), AVX2)
    with pytest.raises(acc.ScheduleError, match=r"vectorize\(ii\): the subscript of Out is not affine"):
        plan.emit_c()


def test_divmod_in_ranges_agrees_with_python_on_every_point():
    """Exhaustively over small ranges (negative coefficients, constants and ranges included): where
    divmod_in_ranges answers, it is Python's floor division and remainder at every point."""
    import itertools

    from accpy.ir.affine import Affine
    from accpy.lower.simplify import divmod_in_ranges

    x, y = Var("x"), Var("y")
    answered = 0
    for cx, cy, c0, m in itertools.product((-8, -3, 1, 4, 8), (-1, 1, 2), (-9, -1, 0, 3, 8), (1, 2, 4, 8)):
        for rx, ry in (((0, 3), (0, 7)), ((-2, 1), (0, 1)), ((1, 1), (-3, 4))):
            a = Affine({x: cx, y: cy}, c0)
            got = divmod_in_ranges(a, m, {x: rx, y: ry})
            if got is None:
                continue
            answered += 1
            q, r = got
            for vx in range(rx[0], rx[1] + 1):
                for vy in range(ry[0], ry[1] + 1):
                    point = {x: vx, y: vy}
                    value = cx * vx + cy * vy + c0
                    assert q.subs(point).const == value // m and r.subs(point).const == value % m, \
                        (cx, cy, c0, m, rx, ry, point)
    assert answered > 50
