"""Tuning results: one record per variant, the results file (JSON lines) and `TuneResult`.

The results file is an append-only log of events (a build, a measurement, a failure), one
JSON object per line, each naming its variant by a stable key. Reading it back merges the
events per variant, so a rerun knows what was measured, what failed, and skips it.
"""
from __future__ import annotations

import enum
import hashlib
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

#: statuses of a variant that end its tuning (recorded, not retried unless asked)
FAILED = ("build_error", "wrong", "timeout", "crashed", "error")


def json_value(v) -> Any:
    """A parameter value as JSON (indices by name, tuples as lists)."""
    from ..nest.logic import Index

    if isinstance(v, Index):
        return v.name
    if isinstance(v, (tuple, list)):
        return [json_value(x) for x in v]
    if isinstance(v, enum.Enum):
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    return repr(v)


def parameter_name(k) -> str:
    """The name under which grid key `k` (a Parameter or a string) is recorded."""
    from ..nest.parameters import Parameter

    return k.name if isinstance(k, Parameter) else str(k)


def variant_key(label: str, fingerprint: str, values: dict, objective: str) -> str:
    """16 hex digits naming one variant of one tuning problem, stable across runs."""
    text = json.dumps([label, fingerprint, values, objective], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class VariantResult:
    """One variant: its parameters, what happened to it, and its samples."""

    index: int  # position in the grid
    key: str
    parameters: dict  # as in the grid (acc parameters or names as keys): usable with Package.add
    values: dict  # parameter name -> value (JSON-able)
    status: str = "pending"  # ok | built | pending | build_error | wrong | timeout | crashed | error
    error: str = ""
    samples: list = field(default_factory=list)
    calls: Optional[int] = None  # calls averaged per sample
    checked: bool = False
    details: dict = field(default_factory=dict)
    build_seconds: Optional[float] = None
    host: str = ""
    artifact: Optional[dict] = field(default=None, repr=False)
    reference: Optional[dict] = field(default=None, repr=False)

    @property
    def value(self) -> Optional[float]:
        """The median sample (None until measured)."""
        return statistics.median(self.samples) if self.samples and self.status == "ok" else None

    @property
    def failed(self) -> bool:
        """True when the variant failed to build, was wrong, timed out or crashed."""
        return self.status in FAILED


class ResultsFile:
    """An append-only JSON-lines log of tuning events."""

    def __init__(self, path):
        self.path = Path(path)

    def load(self) -> dict:
        """key -> merged state of every variant in the file (unreadable lines are skipped)."""
        state: dict = {}
        if not self.path.exists():
            return state
        for line in self.path.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line cut short by an interrupted run
            if not isinstance(ev, dict) or "key" not in ev:
                continue
            s = state.setdefault(ev["key"], {"samples": [], "status": "pending"})
            if not (ev.get("status") == "built" and s["status"] == "ok"):  # a rebuild keeps the samples
                s["status"] = ev.get("status", s["status"])
            if ev.get("status") == "retry":  # a rerun with retry_failed=True starts over
                state[ev["key"]] = {"samples": [], "status": "pending"}
                continue
            for k in ("error", "calls", "details", "build_seconds", "host"):
                if k in ev:
                    s[k] = ev[k]
            s["samples"] = s["samples"] + list(ev.get("samples", []))
            s["checked"] = s.get("checked", False) or bool(ev.get("checked"))
        return state

    def append(self, event: dict) -> None:
        """Append one event (a JSON-able dict, stamped with the time) as one line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**event, "time": round(time.time(), 3)}, default=str) + "\n"
        # one write on an O_APPEND descriptor: lines of concurrent runs do not interleave
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            if end and os.pread(fd, 1, end - 1) != b"\n":
                line = "\n" + line  # the last run was cut mid-line: do not glue this event onto it
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class TuneResult:
    """What `acc.tune` found: every variant measured, the best one, and the best function."""

    def __init__(self, label: str, objective, variants: list, grid_size: int, strategy, seconds: float,
                 results_file: Optional[Path], build_best: Callable, repeats: int):
        self.label = label
        self.repeats = repeats
        self.objective = objective
        self.variants = variants
        self.grid_size = grid_size
        self.strategy = strategy
        self.seconds = seconds
        self.results_file = results_file
        self._build_best = build_best
        self._best_function = None
        #: the `baseline` entry's variant (measured in full), or None
        self.baseline: Optional[VariantResult] = None

    @property
    def ranked(self) -> list:
        """Measured variants, best first: those measured furthest (the last rung of a halving search)
        before those dropped earlier, each group by its median."""
        return sorted((v for v in self.variants if v.value is not None),
                      key=lambda v: (-min(len(v.samples), self.repeats), v.value))

    @property
    def best(self) -> VariantResult:
        """The fastest variant measured to the full number of samples; RuntimeError when none was."""
        r = self.ranked
        if not r:
            raise RuntimeError(f"tuning {self.label}: no variant was measured successfully; see .table()")
        return r[0]

    @property
    def best_parameters(self) -> dict:
        """The best variant's parameters, keyed as in the grid (pass them to Package.add(parameters=...))."""
        return dict(self.best.parameters)

    @property
    def best_function(self):
        """The best variant, built and loaded in this process: call it on numpy arrays."""
        if self._best_function is None:
            self._best_function = self._build_best(self.best)
        return self._best_function

    def failures(self) -> list:
        """The variants that failed, in grid order."""
        return [v for v in self.variants if v.failed]

    def table(self, limit: Optional[int] = None) -> str:
        """A text table: measured variants best first, then the failed ones with the reason."""
        names = []
        for v in self.variants:
            names += [n for n in v.values if n not in names]
        rows = []
        best = self.ranked[0].value if self.ranked else None
        detail_keys = sorted({k for v in self.variants for k in v.details})
        for rank, v in enumerate(self.ranked[:limit] if limit else self.ranked, 1):
            rows.append([str(rank)] + [_cell(v.values.get(n)) for n in names]
                        + [self.objective.format(v.value), f"{v.value / best:.2f}x" if best else "",
                           str(len(v.samples))] + [_cell(v.details.get(k)) for k in detail_keys] + ["ok"])
        for v in self.variants:
            if v.failed:
                rows.append(["-"] + [_cell(v.values.get(n)) for n in names] + ["", "", str(len(v.samples))]
                            + ["" for _ in detail_keys] + [f"{v.status}: {_short(v.error)}"])
        head = ["#"] + names + [self.objective.name, "vs best", "samples"] + detail_keys + ["status"]
        widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
        fmt = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
        lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
        return "\n".join(lines)

    def summary(self) -> str:
        """One paragraph: how many variants were measured and failed, and the best one."""
        n_ok = len(self.ranked)
        head = (f"tuned {self.label}: {len(self.variants)} of {self.grid_size} variants ({self.strategy}), "
                f"{n_ok} measured, {len(self.failures())} failed, {self.seconds:.1f} s")
        if n_ok:
            head += f"; best {self.objective.format(self.best.value)} with {self.best.values}"
        return head

    def __str__(self) -> str:
        return self.summary() + "\n" + self.table()

    def __repr__(self) -> str:
        return f"<TuneResult {self.summary()}>"


def _cell(v) -> str:
    if isinstance(v, list):
        return "(" + ", ".join(map(str, v)) + ")"
    return "" if v is None else str(v)


def _short(text: str, n: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3] + "..."
