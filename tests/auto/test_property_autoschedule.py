"""Property test: random nests, autoscheduled, compute what they say.

The nests are the project's random ones (tests/support/schedgen: matmul, 1-D and 2-D convolution,
element-wise, transposes, reductions, narrow integer and bfloat16 kinds, extents 1..13, both
layouts, int32 exact), some after 0..3 random transforms of their own (a given schedule is kept
and extended), and the ordered nests of tests/support/legality.py (Gauss-Seidel, anti-diagonal
dependences, running sums, fused ones) whose every reordering accpy must prove. Each gets
`acc.autoschedule(..., measure=False)` with one or two threads and is compared with the
reference evaluator.
"""
from __future__ import annotations

import os
import random

import pytest

import accpy as acc
from accpy.testing import assert_matches_reference
from support import legality  # noqa: F401 - registers the ordered nest kinds
from support import schedgen as sg

CASES = int(os.environ.get("ACCPY_AUTO_CASES", "36"))  # a longer run: ACCPY_AUTO_CASES=300


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))


def _cases(n: int) -> list:
    rng = random.Random(os.environ.get("ACCPY_AUTO_SEED", "autoschedule-property"))
    ch = sg.RandomChooser(rng)
    free = sg.kinds_with(False) + sg.narrow_kinds()
    ordered = sorted(k for k, v in sg.NEST_KINDS.items() if v.ordered and not v.runtime_sizes)
    out = []
    for c in range(n):
        if c % 3 == 2:
            out.append((sg.Case(sg.draw_spec(ch, kinds=ordered), (), 0), rng.choice((1, 2))))
        else:
            out.append((sg.draw_case(ch, kinds=free, max_steps=3), rng.choice((1, 2))))
    return out


@pytest.mark.parametrize("case, threads", _cases(CASES), ids=lambda x: str(x)[:60] if not isinstance(x, int) else f"t{x}")
def test_random_nest_autoscheduled_matches_reference(case, threads):
    state = sg.realize(case)
    plan = acc.autoschedule(state.schedule, state.args, measure=False, threads=threads)
    assert "autoschedule:" in plan.explain()
    assert_matches_reference(plan, state.args, opt="-O1", rtol=1e-3, atol=1e-3)
