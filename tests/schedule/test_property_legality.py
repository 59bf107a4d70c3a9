"""Property test: on ordered nests (in-place stencils, recurrences, running sums, output
dependences, fused schedules) random transform sequences either raise `ScheduleError` or
build code that matches the reference — never a silent mismatch.

Every verdict (each reorder/skew/fuse accepted or refused, a random parallel range, a
random vector dim) is compared with a brute-force enumeration of the iteration order on
the same small sizes (tests/support/legality.py). Refused transforms are applied with
`unsafe=True` to continue the walk; the final schedules the brute force calls legal are
built (one package per batch) and compared exactly with the reference evaluator.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import legality as lg
from support import schedgen as sg

CASES = 240
MIN_REFUSED = 40
MIN_ACCEPTED = 40


def _draw(n, seed):
    ch = sg.RandomChooser(random.Random(seed))
    verdicts = lg.Verdicts()
    cases, seen = [], set()
    tries = 0
    while len(cases) < n and tries < 20 * n:
        tries += 1
        case, legal = lg.draw_legality_case(ch, verdicts)
        if case in seen:
            continue
        seen.add(case)
        cases.append((case, legal))
    return cases, verdicts


@pytest.mark.slow
def test_verdicts_agree_with_brute_force_and_legal_schedules_match_reference(tmp_path):
    cases, v = _draw(CASES, "legality")
    assert len(cases) == CASES
    assert not v.disagreements, "\n".join(v.disagreements[:10])
    # both kinds of verdict really happen
    assert v.refused >= MIN_REFUSED and v.accepted >= MIN_ACCEPTED, (v.refused, v.accepted)
    assert v.parallel_checked >= CASES // 2 and v.vector_checked >= CASES // 3
    legal = [c for c, ok in cases if ok]
    assert len(legal) >= CASES // 4
    print(f"[legality] {len(cases)} cases: {v.accepted} order-changing transforms accepted, {v.refused} refused, "
          f"{v.parallel_checked} parallel and {v.vector_checked} vector verdicts, all as the brute force; "
          f"{len(legal)} legal final schedules built")
    failures = []
    for b in range(0, len(legal), 40):
        rep = sg.check_cases(legal[b:b + 40], tmp_path / f"b{b}", name=f"legal{b}")
        failures += rep.failures
    assert not failures, "\n\n".join(str(f) for f in failures[:5])


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_hypothesis_verdicts_agree_with_brute_force(data):
    verdicts = lg.Verdicts()
    lg.draw_legality_case(sg.HypothesisChooser(data.draw), verdicts)
    assert not verdicts.disagreements, "\n".join(verdicts.disagreements)
