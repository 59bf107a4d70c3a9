"""Search strategies: which variants to measure, and how many samples each gets.

`Exhaustive` measures every variant of the grid to the full number of samples.
`Halving` (for large grids) measures a random fraction of the grid (reproducible from its
seed), then runs successive halving: every candidate gets a few samples, the best 1/eta
go on to get eta times as many, and so on until the survivors have the full number.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Optional, Union


@dataclass(frozen=True)
class Exhaustive:
    """Every variant, `repeats` samples each."""

    def select(self, n: int) -> list:
        """Indices (into a grid of `n` variants) of the variants to measure."""
        return list(range(n))

    def rungs(self, repeats: int) -> list:
        """Samples per survivor at the end of each rung (one rung: `repeats`)."""
        return [repeats]

    def keep(self, ranked: list, rung: int) -> list:
        """The candidates (ranked best first) that go on to the next rung."""
        return ranked


@dataclass(frozen=True)
class Halving:
    """Random sampling plus successive halving.

    fraction: part of the grid measured at all (at least `min_variants`, at most all);
    eta: after each rung the best 1/eta of the candidates (at least one) go on, and the next
    rung gives each eta times the samples; seed: the sample drawn (same seed, same variants).
    """

    fraction: float = 0.25
    eta: int = 3
    seed: int = 0
    min_variants: int = 16

    def __post_init__(self):
        if not (0 < self.fraction <= 1):
            raise ValueError(f"fraction: expected a number in (0, 1], got {self.fraction!r}")
        if not (isinstance(self.eta, int) and self.eta >= 2):
            raise ValueError(f"eta: expected an integer >= 2, got {self.eta!r}")

    def select(self, n: int) -> list:
        """Indices (into a grid of `n` variants) of the variants to measure."""
        k = min(n, max(self.min_variants, math.ceil(self.fraction * n)))
        return sorted(random.Random(self.seed).sample(range(n), k))

    def rungs(self, repeats: int) -> list:
        """Samples per survivor at the end of each rung: 1, eta, eta^2, ..., repeats."""
        out, r = [], 1
        while r < repeats:
            out.append(r)
            r *= self.eta
        return out + [repeats]

    def keep(self, ranked: list, rung: int) -> list:
        """The candidates (ranked best first) that go on to the next rung."""
        return ranked[:max(1, math.ceil(len(ranked) / self.eta))]


Strategy = Union[Exhaustive, Halving]

#: grids up to this size are measured exhaustively when search="auto"
EXHAUSTIVE_LIMIT = 64


def strategy_of(search, n: int, seed: Optional[int]) -> Strategy:
    """`search` argument -> a strategy ("auto": exhaustive up to EXHAUSTIVE_LIMIT variants, else Halving)."""
    if isinstance(search, (Exhaustive, Halving)):
        return search
    if search == "auto":
        return Exhaustive() if n <= EXHAUSTIVE_LIMIT else Halving(seed=seed or 0)
    if search == "exhaustive":
        return Exhaustive()
    if search == "halving":
        return Halving(seed=seed or 0)
    raise ValueError(f"search: expected 'auto', 'exhaustive', 'halving', accpy.tune.Exhaustive() or "
                     f"accpy.tune.Halving(...), got {search!r}")
