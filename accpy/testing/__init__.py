"""Property tests of your own schedules: hypothesis strategies and equivalence checks.

    from hypothesis import given, settings
    import accpy.testing as at

    @given(schedule=at.schedules(nest), data=at.arrays((A, B, C)))
    @settings(deadline=None, max_examples=50)
    def test_my_schedules(schedule, data):
        at.assert_matches_reference(schedule, (A, B, C), data=data)

- `schedules(nest_or_schedule, ...)`: schedules of a nest (or extensions of a schedule)
  drawn as random split / tile / reorder / skew / pad sequences; a transform accpy refuses
  (an order that changes the result, an invalid order) is skipped, so every schedule drawn
  is legal.
- `plans(schedule, ...)`: plans of a schedule: unroll, vectorize where legal, parallelize
  where race-free, caches at random levels and layouts.
- `arrays(args)`: input data for a function's arguments.
- `assert_equivalent(a, b, args)`, `assert_matches_reference(x, args)`: build, run,
  compare; a failure names the first differing element and prints the accpy code that
  replays the schedule or plan (`replay_code`).

hypothesis is needed only for the strategies (`pip install hypothesis`, or
`accpy[test]`); the assertions work without it. Kernels built here are compiled at -O0
(the assertions' `opt` argument changes it) and cached like any build.
"""
from __future__ import annotations

from .asserts import assert_equivalent, assert_matches_reference, run
from .replay import replay_code
from .strategies import arrays, plans, schedules

__all__ = ["schedules", "plans", "arrays", "assert_equivalent", "assert_matches_reference", "replay_code", "run"]
