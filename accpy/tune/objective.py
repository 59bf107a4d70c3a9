"""What tuning minimizes: wall time on the CPU by default, or an objective a target library
registers (e.g. its model's cycles; accpy/targets/objective.py), or any `Objective`.

An objective runs inside the measuring process (accpy.tune.runner): it gets the variant's
call (arguments bound) and its loaded package, and returns one sample (smaller is better).
A custom objective is a subclass of `Objective` defined in an importable module (it is
pickled into the measuring process).
"""
from __future__ import annotations

import math
import time
from typing import Callable

from ..targets.objective import Objective, registered_objectives


class WallTime(Objective):
    """Seconds per call (wall clock), each sample averaged over enough calls to last `min_time`."""

    name, unit = "seconds", "s"

    def calls_per_sample(self, call: Callable[[], None], min_time: float) -> int:
        t = time.perf_counter()
        call()
        one = max(time.perf_counter() - t, 1e-7)
        return max(1, math.ceil(min_time / one))

    def sample(self, call: Callable[[], None], package, calls: int) -> float:
        t = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - t) / calls

    def format(self, value: float) -> str:
        for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
            if value >= scale:
                return f"{value / scale:.3f} {unit}"
        return f"{value / 1e-9:.1f} ns"


def objective_of(objective) -> Objective:
    """`objective` argument -> an Objective (None: wall time; "seconds"; a registered objective's name)."""
    if objective is None:
        return WallTime()
    if isinstance(objective, Objective):
        return objective
    if isinstance(objective, type) and issubclass(objective, Objective):
        return objective()
    known = {"seconds": WallTime, "time": WallTime, **registered_objectives()}
    if isinstance(objective, str) and objective in known:
        return known[objective]()
    raise ValueError(f"objective: expected an accpy.tune.Objective or one of {sorted(known)}, got {objective!r}")
