"""Gemmini's tuning objective: the functional model's cycles for one call (no hardware needed)."""
from __future__ import annotations

from typing import Callable

from ..objective import Objective, register_objective


class GemminiCycles(Objective):
    """Cycles of one call in the Gemmini functional model's fixed cycle model (no hardware needed).

    The package must run on Gemmini (a plan for `acc.Target(acc.Target.Model.GEMMINI)`); the
    counters are those of `BuiltPackage.gemmini_counters()`. The utilization of the last call
    is recorded with the variant. Known to `acc.tune` as `objective="gemmini_cycles"` (or
    `"cycles"`) and as `accpy.tune.GemminiCycles`.
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


register_objective(GemminiCycles, "gemmini_cycles", "cycles")
