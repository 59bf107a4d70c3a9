"""The grouped cache layout (`Array.Layout.grouped(group_bytes)`; `Array.Layout.VNNI` is
`grouped()`): the value, its checks, the group the target's libraries ask for (`operand_group`)
or the one the plan names, and the same results as the reference for groups of other sizes."""
from __future__ import annotations

import re

import numpy as np
import pytest

import accpy as acc
from accpy.ir.types import ScalarType as S
from accpy.lower.cache import elements_per_group
from accpy.targets import x86tile
from accpy.targets.library import TargetLibrary, libraries_for, register_library
from accpy.testing import assert_matches_reference
from accpy.testing.replay import plan_lines
from abi.kernels import mixed_matmul_nest

Layout = acc.Array.Layout
AVX512 = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8380)  # AVX-512 with VNNI, no tile unit
AMX = acc.Target(acc.Target.Model.INTEL_XEON_PLATINUM_8480PLUS)
AVX2 = acc.Target(acc.Target.Model.INTEL_CORE_I7_4770)


def _plan(target, layout, tab=S.int8, tc=S.int32, shape=(4, 8, 6)):
    nest, args, (i, j, k) = mixed_matmul_nest(*shape, tab, tab, tc)
    s = nest.create_schedule()
    s.reorder(j, i, k)
    plan = s.create_plan(target)
    plan.cache(args[1], index=j, layout=layout)
    return plan, args


def test_the_layout_value():
    assert Layout.VNNI == Layout.grouped() and Layout.VNNI is Layout.VNNI
    assert Layout.grouped(8) == Layout.grouped(8) != Layout.grouped(4)
    assert len({Layout.grouped(8), Layout.grouped(8), Layout.grouped()}) == 2
    assert repr(Layout.grouped()) == "acc.Array.Layout.grouped()" and repr(Layout.grouped(8)) == "acc.Array.Layout.grouped(8)"
    assert Layout.grouped(8).name == "grouped(8)" and Layout.grouped(8).group_bytes == 8
    assert Layout.grouped().group_bytes is None and Layout.grouped().to_numpy_order() is None
    assert Layout.grouped(np.int64(8)) == Layout.grouped(8) and type(Layout.grouped(np.int64(8)).group_bytes) is int
    assert list(Layout) == [Layout.FIRST_MAJOR, Layout.LAST_MAJOR, Layout.DEFERRED]  # not a member
    with pytest.raises(AttributeError, match="immutable"):
        Layout.grouped(4).group_bytes = 8
    for bad in (0, -4, 2.5, True, "4"):
        with pytest.raises(ValueError, match=r"group_bytes: expected a positive int \(bytes per group\) or None"):
            Layout.grouped(bad)


def test_grouped_layout_errors():
    with pytest.raises(ValueError, match=r"layout: acc.Array.Layout.grouped\(8\) is a cache layout"):
        acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(4, 4), layout=Layout.grouped(8))
    with pytest.raises(ValueError, match=r"groups of 3 bytes hold no whole number of int16 elements \(2 bytes "
                                         r"each\); give a multiple of 2"):
        _plan(None, Layout.grouped(3), S.int16, S.int32)
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(4, 8, 6, S.int8, S.int8, S.int32)
    plan = nest.create_plan()
    with pytest.raises(ValueError, match=r"groups of 2 bytes hold no whole number of float32"):
        plan.cache(B, index=j, layout=Layout.grouped(2), element_type=S.float32)  # the cache's type counts
    outer = plan.cache(B, index=i, element_type=S.int16)
    with pytest.raises(ValueError, match=r"groups of 3 bytes hold no whole number of int16"):
        plan.cache(outer, index=k, layout=Layout.grouped(3))  # (the outer cache's type)
    with pytest.raises(ValueError, match=r"a cache in acc.Array.Layout.grouped\(\) lives in host memory"):
        plan.cache(B, index=k, layout=Layout.VNNI, location=acc.MemorySpace.SHARED)
    v = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(16,), name="v")
    out = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int8, shape=(16,), name="out")
    nest = acc.Nest(shape=(16,))
    x = nest.get_indices()

    @nest.iteration_logic
    def _():
        out[x] += v[x]

    with pytest.raises(ValueError, match=r"layout: acc.Array.Layout.grouped\(\) groups the rows of a 2-D \(or higher\) "
                                         r"block; v has rank 1"):
        nest.create_plan().cache(v, index=x, layout=Layout.VNNI)


def test_the_plan_shows_the_layout_as_given():
    plan, _ = _plan(None, Layout.grouped(8))
    assert "layout=grouped(8)" in repr(plan)
    assert "plan.cache(B, index=j, layout=acc.Array.Layout.grouped(8))" in "\n".join(plan_lines(plan))  # replays
    plan, _ = _plan(None, Layout.VNNI)
    assert "layout=grouped()" in repr(plan)


def test_x86_libraries_read_groups_of_32_bits():
    """The x86 dot products (int16 pairs, uint8 x int8 quads, bfloat16 pairs) and the tile unit's B
    tiles read 4 bytes of k per lane; no instruction reads float32 or int32 in groups."""
    for target in (AVX2, AVX512, AMX):
        for dtype, group in ((S.int8, 4), (S.uint8, 4), (S.int16, 2), (S.bfloat16, 2), (S.float32, 1), (S.int32, 1)):
            answers = [g for lib in libraries_for(target) if (g := lib.operand_group(target, dtype))]
            assert max(answers, default=None) == (None if group == 1 else 4), (target.name, dtype, answers)
    assert x86tile.X86TILE.operand_group(AMX, S.int8) == 4 and x86tile.X86TILE.operand_group(AMX, S.float32) is None


@pytest.mark.parametrize("target", [AVX2, AVX512, AMX], ids=["AVX2", "AVX-512", "AMX"])
@pytest.mark.parametrize("tab, tc", [(S.int8, S.int32), (S.bfloat16, S.float32)])
def test_the_alias_the_target_group_and_four_bytes_emit_the_same_code(target, tab, tc):
    """On x86, `VNNI`, `grouped()` and `grouped(4)` are one layout: the same C, byte for byte."""
    codes = {repr(layout): _plan(target, layout, tab, tc)[0].emit_c() for layout in
             (Layout.VNNI, Layout.grouped(), Layout.grouped(4))}
    assert len(set(codes.values())) == 1, list(codes)
    g = 4 // (tab.bits // 8)
    assert re.search(rf"B_cache\[\d+\*B_c0 \+ {g}\*B_c1 \+ 1\]", codes["acc.Array.Layout.grouped()"])


def test_a_group_of_8_bytes_interleaves_8_rows():
    """grouped(8) of int8: the 6 rows in one group of 8 (a column's 6 elements adjacent, then 2
    zeros); of float32: pairs."""
    code = _plan(AVX512, Layout.grouped(8))[0].emit_c()
    assert "B_cache[8*B_c1 + 5] = B[B_c1 + 40];" in code and "B_cache[8*B_c1 + 7] = ((int8_t)0);" in code, code
    code = _plan(AVX512, Layout.grouped(8), S.float32, S.float32)[0].emit_c()
    assert re.search(r"B_cache\[\d+\*B_c0 \+ 2\*B_c1 \+ 1\]", code), code


@pytest.mark.parametrize("tab, tc, group_bytes", [(S.int8, S.int32, 8), (S.int8, S.int32, 2), (S.int16, S.int32, 8),
                                                  (S.float32, S.float32, 8), (S.bfloat16, S.float32, 16),
                                                  (S.uint8, S.int32, 6)])
def test_other_group_sizes_give_the_reference_results(tab, tc, group_bytes):
    """Groups of any whole number of elements (8 or 6 int8, 4 int16, 2 float32, 8 bfloat16),
    including partial last groups (K = 9), in panels of columns too: the reference's results."""
    nest, args, (i, j, k) = mixed_matmul_nest(5, 20, 9, tab, tab, tc)
    s = nest.create_schedule()
    jj = s.split(j, 4)
    s.reorder(j, i, k, jj)
    plan = s.create_plan()
    plan.cache(args[1], index=i, layout=Layout.grouped(group_bytes), panel_width=8)
    assert_matches_reference(plan, args)


class _EightByteGroups(TargetLibrary):
    """A library whose (imaginary) instructions read int8 in groups of 8 bytes, for targets that
    carry its key in `extra`."""

    name = "eight-byte groups"

    def applies_to(self, target) -> bool:
        return target.get("test-groups") == "8"

    def operand_group(self, target, dtype):
        return 8 if dtype.bits == 8 else None


_EIGHT = register_library(_EightByteGroups())


def test_the_group_comes_from_the_target_libraries():
    """`grouped()` takes the group the target's libraries read (the largest where several answer):
    8 bytes on a target with the library above, where x86 alone says 4; `grouped(4)` keeps 4."""
    target = AVX512(extra=(("test-groups", "8"),))
    assert _EIGHT in libraries_for(target)
    code = _plan(target, Layout.grouped())[0].emit_c()
    assert code == _plan(target, Layout.grouped(8))[0].emit_c()
    assert "B_cache[8*B_c1 + 5] = B[B_c1 + 40];" in code, code
    assert _plan(target, Layout.grouped(4))[0].emit_c() == _plan(AVX512, Layout.grouped())[0].emit_c()


def test_elements_per_group():
    class Req:
        group_bytes = None

    assert elements_per_group(Req, S.int8, AVX512) == 4
    assert elements_per_group(Req, S.bfloat16, AVX512) == 2
    assert elements_per_group(Req, S.float64, AVX512) == 1
    assert elements_per_group(Req, S.int8, None) == 1  # no target: no instruction reads groups
    Req.group_bytes = 8
    assert elements_per_group(Req, S.int16, None) == 4
