"""`plan.explain()` for an automatic schedule: what was found, chosen and measured, and why.

A `Report` is plain data (it is kept in the result cache with the recipe): the dependences and
bands found, the candidates with their estimates (or why accpy refused them), the measured times,
the chosen recipe as the calls a person would write, and how long the search took. `text()` is a
few lines, e.g.

    autoschedule: register-blocked contraction, chosen by measurement (3 candidates, 9.1 s)
      dependences: C: reduction over k (commuting; order free, not parallel)
      bands: (i, j, k) permutable; parallel: i, j
      why: 4 x 24 tile of C in registers (...), over blocks of 1024 steps of k
      ...
"""
from __future__ import annotations

from dataclasses import dataclass, field


SHOWN = 6  # candidates listed by text(); Report.table has them all


@dataclass
class Report:
    family: str
    lines: list  # the chosen recipe's calls
    why: list
    analysis: list  # dependences and bands, one line each
    table: list  # [(family, params, estimate text, measured seconds or None, refused or None)]
    decided_by: str  # "model" | "measurement" | "model (no candidate could be measured)"
    threads: int
    target: str
    seconds: float
    estimate: str = ""
    measured: object = None
    cached: bool = False
    notes: list = field(default_factory=list)

    @staticmethod
    def build(bands, cands, best, measured: dict, threads: int, target, measure: bool, seconds: float) -> "Report":
        table = []
        for c in cands:
            m = measured.get(c.recipe.key(), {})
            table.append((c.recipe.family, _params(c.recipe.params), str(c.estimate) if c.estimate else "",
                          m.get("seconds"), c.refused or (m.get("status") if m.get("status") not in (None, "ok")
                                                           else None)))
        got = measured.get(best.recipe.key(), {}).get("seconds")
        if not measure:
            decided = "model"
        elif got is not None:
            decided = "measurement"
        elif not measured:
            decided = "model (no two candidates fit the measuring budget)"
        else:
            decided = "model (no candidate could be measured)"
        analysis = [x for x in (bands.describe() if bands is not None else []) if not x.rstrip().endswith(": none")]
        return Report(best.recipe.family, best.recipe.lines(), list(best.recipe.why), analysis, table, decided, threads,
                      target.name, seconds, str(best.estimate) if best.estimate else "", got)

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @staticmethod
    def from_json(data: dict, cached: bool, seconds: float) -> "Report":
        r = Report(**{k: v for k, v in data.items() if k in Report.__dataclass_fields__})
        r.cached, r.seconds = cached, seconds
        return r

    def text(self) -> str:
        how = "kept from an earlier call (result cache)" if self.cached else f"chosen by {self.decided_by}"
        n = len(self.table)
        out = [f"autoschedule: {self.family}, {how} ({n} candidates, {self.threads} thread(s), "
               f"{self.seconds:.2f} s)"]
        out += [f"  {x}" for x in self.analysis]
        out += [f"  why: {x}" for x in self.why]
        if self.estimate:
            out.append(f"  model: {self.estimate}")
        if self.measured is not None:
            out.append(f"  measured: {self.measured * 1e3:.3g} ms per call (median)")
        out.append("  plan:")
        out += [f"    {x}" for x in self.lines]
        measured = sorted((row for row in self.table if row[3] is not None), key=lambda row: row[3])
        shown = (measured + [row for row in self.table if row[3] is None and not row[4]])[:max(SHOWN, len(measured))]
        out.append(f"  candidates (best {len(shown)} of {len(self.table)}; "
                   f"{sum(1 for row in self.table if row[4])} refused by accpy's checks):")
        for fam, params, est, got, refused in shown:
            tail = f"; measured {got * 1e3:.3g} ms" if got is not None else ""
            est_ms = est.split(" (")[0] if est else "-"
            out.append(f"    {fam} {params}: model {est_ms}{tail}")
        return "\n".join(out)

    def refused(self) -> list:
        """(family and sizes, why accpy refused it) of every refused candidate."""
        return [(f"{fam} {params}", why) for fam, params, _, _, why in self.table if why]


def _params(p: dict) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in p.items()) + ")"
