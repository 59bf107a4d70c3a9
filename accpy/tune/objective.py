"""What tuning minimizes: wall time on the CPU by default, Gemmini model cycles for Gemmini plans.

An objective runs inside the measuring process (accpy.tune.runner): it gets the variant's
call (arguments bound) and its loaded package, and returns one sample (smaller is better).
A custom objective is a subclass of `Objective` defined in an importable module (it is
pickled into the measuring process).
"""
from __future__ import annotations

import math
import time
from typing import Callable


class Objective:
    """Base class: `sample()` returns one measurement of one variant; smaller is better."""

    name: str = "objective"
    unit: str = ""
    #: True when every sample is the same (a model's count): one sample is enough, and
    #: samples are not affected by other work on the machine
    deterministic: bool = False

    def calls_per_sample(self, call: Callable[[], None], min_time: float) -> int:
        """How many calls one sample averages over (1 unless the objective times calls)."""
        return 1

    def sample(self, call: Callable[[], None], package, calls: int) -> float:
        """One sample: run `call` (the variant with its arguments) and return the figure."""
        raise NotImplementedError

    def details(self, package) -> dict:
        """Extra facts recorded with the variant after its last sample (JSON-able)."""
        return {}

    def format(self, value: float) -> str:
        """`value` for a person to read."""
        return f"{value:.4g} {self.unit}".strip()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


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


class GemminiCycles(Objective):
    """Cycles of one call in the Gemmini functional model's fixed cycle model (no hardware needed).

    The package must run on Gemmini (a plan for `acc.Target(acc.Target.Model.GEMMINI)`); the
    counters are those of `BuiltPackage.gemmini_counters()`. The utilization of the last call
    is recorded with the variant.
    """

    name, unit = "gemmini_cycles", "cycles"
    deterministic = True

    def sample(self, call: Callable[[], None], package, calls: int) -> float:
        package.gemmini_reset_counters()
        call()
        return float(package.gemmini_counters()["cycles"])

    def details(self, package) -> dict:
        c = package.gemmini_counters()
        return {"utilization": round(c["utilization"], 4), "macs": c["macs"], "instructions": c["instructions"]}

    def format(self, value: float) -> str:
        return f"{int(value)} cycles"


def objective_of(objective) -> Objective:
    """`objective` argument -> an Objective (None: wall time; "seconds"; "gemmini_cycles")."""
    if objective is None:
        return WallTime()
    if isinstance(objective, Objective):
        return objective
    if isinstance(objective, type) and issubclass(objective, Objective):
        return objective()
    known = {"seconds": WallTime, "time": WallTime, "gemmini_cycles": GemminiCycles, "cycles": GemminiCycles}
    if isinstance(objective, str) and objective in known:
        return known[objective]()
    raise ValueError(f"objective: expected an accpy.tune.Objective or one of {sorted(known)}, got {objective!r}")
