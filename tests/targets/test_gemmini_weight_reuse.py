"""Gemmini's weight reuse is a pass of the Gemmini library (targets/gemmini/reuse.py), run right
after the generic tensorize pass, which itself emits every tile as config_ex + preload +
compute_preloaded and knows nothing of weights."""
from __future__ import annotations

import os
import sys

import accpy as acc
from accpy.ir.expr import BinOp, Const, Var
from accpy.ir.kinds import LoopKind
from accpy.ir.printer import stmt_str
from accpy.ir.stmt import For, If, block
from accpy.ir.visitor import nodes_of
from accpy.lower import _passes, run_passes
from accpy.targets import gemmini as g
from accpy.targets.gemmini.reuse import reuse_weights

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "samples"))
import gemmini_matmul  # noqa: E402

GARBAGE = Const(g.gm.GARBAGE_ADDR)


def _tile(b, c=Const(0), a=Const(0), tk=Const(16)):
    """A tile's three calls as the generic pass emits them (tiles.tile_calls)."""
    return block(g.call(g.CONFIG_EX, 1, 1), g.call(g.PRELOAD, b, c, Const(16), tk, Const(16), Const(16)),
                 g.call(g.COMPUTE_PRELOADED, a, GARBAGE, tk, Const(16), 16, 16))


def _calls(stmt, intr):
    return [s for s in nodes_of(stmt, type(g.call(g.FENCE))) if s.value.fn == intr.name]


def test_the_pass_follows_tensorize_on_gemmini_only():
    plan, args = gemmini_matmul.matmul_plan(64, 64, 64)
    names = [p.name for p in _passes(plan.lowering_request(args))]
    assert names[names.index("tensorize") + 1] == "gemmini weight reuse"
    assert names.index("gemmini call bracket") == names.index("configs") + 1
    host = acc.Nest(shape=(4,)).create_schedule().create_plan(acc.Target.HOST)
    assert "gemmini weight reuse" not in [p.name for p in _passes(host.lowering_request())]


def test_tensorize_emits_fresh_tiles_and_the_pass_reuses_weights():
    plan, args = gemmini_matmul.matmul_plan(128, 64, 64)
    request = plan.lowering_request(args)
    before = run_passes(request, until="gemmini weight reuse").stmt
    assert not _calls(before, g.COMPUTE_ACCUMULATED)  # (the generic pass: every tile preloads its weights)
    assert len(_calls(before, g.PRELOAD)) == len(_calls(before, g.COMPUTE_PRELOADED)) > 0
    after = run_passes(plan.lowering_request(args), until="simplify (after tensorize)").stmt
    assert _calls(after, g.COMPUTE_ACCUMULATED) and any(c.value.args[0] == GARBAGE for c in _calls(after, g.PRELOAD))
    assert nodes_of(after, If)


def test_a_loop_that_does_not_move_the_weights_preloads_them_at_its_first_iteration():
    i, kb = Var("i"), Var("kb")
    # B's rows move with kb only: across the i loop inside it, the same weights
    body = For(kb, Const(0), Const(2), For(i, Const(0), Const(4), _tile(BinOp("mul", kb, Const(16), kb.dtype),
                                                                           c=i, a=i)))
    out = reuse_weights(body)
    text = stmt_str(out)
    assert isinstance(out, For) and out.var is kb and out.body.var is i  # (the loops stay as they were)
    ifs = nodes_of(out, If)
    assert len(ifs) == 1 and "compute_accumulated" in stmt_str(ifs[0].orelse), text
    assert stmt_str(ifs[0]).startswith("if i == 0:") and "kb" not in stmt_str(ifs[0].cond)  # (kb moves the weights)
    # the same loops around weights that move with i: nothing to reuse
    moving = For(i, Const(0), Const(4), _tile(i))
    assert stmt_str(reuse_weights(moving)) == stmt_str(moving)


def test_consecutive_tiles_with_equal_weights_share_one_preload():
    out = reuse_weights(block(_tile(Const(0), c=Const(0)), _tile(Const(0), c=Const(16))))
    pre = _calls(out, g.PRELOAD)
    assert [c.value.args[0] for c in pre] == [Const(0), GARBAGE]
    assert len(_calls(out, g.COMPUTE_PRELOADED)) == 1 and len(_calls(out, g.COMPUTE_ACCUMULATED)) == 1
    other = block(_tile(Const(0)), _tile(Const(32)))  # different weights: each its own
    assert stmt_str(reuse_weights(other)) == stmt_str(other)


def test_a_parallel_loop_keeps_its_preloads():
    i = Var("i")
    par = For(i, Const(0), Const(4), _tile(Const(0), c=i), LoopKind.PARALLEL)
    assert stmt_str(reuse_weights(par)) == stmt_str(par)
