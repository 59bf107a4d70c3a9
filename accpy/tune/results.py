"""Tuning results: one record per variant, the results file (JSON lines) and `TuneResult`.

The results file is an append-only log of events (a build, a measurement, a failure), one
JSON object per line, each naming its variant by a stable key. Reading it back merges the
events per variant, so a rerun knows what was measured, what failed, and skips it.

Each record carries the accpy version and the C compiler (first line of `--version`) of the
run that wrote it, and a checksum (sha256 of the record's canonical JSON). Reading back, a
record that fails its checksum, holds an invalid value (a negative or non-finite time, say) or
comes from another accpy or compiler is not trusted: its variant starts over (is measured
again), and the later records of that variant count.
"""
from __future__ import annotations

import enum
import hashlib
import json
import math
import numbers
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..nest.logic import Index
from ..nest.parameters import Parameter
from ..package.compile import CC, compiler_identity
from ..version import __version__

#: statuses of a variant that end its tuning (recorded, not retried unless asked)
FAILED = ("build_error", "wrong", "timeout", "crashed", "error", "invalid")
#: the fields of a VariantResult that the results file keeps
STORED = ("status", "stage", "error", "invalid_sample", "samples", "calls", "checked", "details", "build_seconds",
          "host")


def json_value(v) -> Any:
    """A parameter value as JSON (indices by name, tuples as lists)."""
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
    #: ok | built | pending | build_error | crashed | timeout | wrong | error | invalid
    status: str = "pending"
    error: str = ""
    #: where a failed variant failed: "build" (plan function, lowering, compiler, loading),
    #: "check" (the reference) or "measure" (the variant's check and samples)
    stage: str = ""
    #: the sample that made the variant `invalid` (the number, or the text of a non-number)
    invalid_sample: Any = None
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
        """The median sample (None until measured, and for a variant that failed)."""
        if not self.samples or self.status != "ok" or not all(_valid_number(x) for x in self.samples):
            return None
        return statistics.median(self.samples)

    @property
    def failed(self) -> bool:
        """True when the variant failed: status build_error, crashed, timeout, wrong, error or invalid."""
        return self.status in FAILED

    @property
    def cause(self) -> str:
        """Why the variant failed, in one line ('' if it did not): status, stage and message."""
        if not self.failed:
            return ""
        return f"{self.status}" + (f" ({self.stage})" if self.stage else "") + (f": {self.error}" if self.error else "")


def _valid_number(x, positive: bool = False) -> bool:
    ok = not isinstance(x, bool) and isinstance(x, numbers.Real) and math.isfinite(x) and x >= 0
    return ok and (x > 0 or not positive)


def _problem(ev: dict) -> str:
    """'' for a record whose values can be true, else what is wrong with it."""
    samples = ev.get("samples", [])
    if not isinstance(samples, list) or not all(_valid_number(x) for x in samples):
        return "a sample that is not a finite number >= 0"
    if "calls" in ev and ev["calls"] is not None and (
            isinstance(ev["calls"], bool) or not isinstance(ev["calls"], int) or ev["calls"] < 1):
        return "calls that are not a positive integer"
    if ev.get("build_seconds") is not None and not _valid_number(ev["build_seconds"]):
        return "a build time that is not a finite number >= 0"
    if not isinstance(ev.get("status", ""), str) or (ev.get("status") == "ok" and not samples):
        return "a status without its samples"
    return ""


def _canonical(ev: dict) -> bytes:
    return json.dumps({k: v for k, v in ev.items() if k != "sha256"}, sort_keys=True, separators=(",", ":"),
                      default=str).encode()


def checksum(ev: dict) -> str:
    """sha256 (hex) of a record's canonical JSON, its own checksum left out."""
    return hashlib.sha256(_canonical(ev)).hexdigest()


def run_stamp() -> dict:
    """What wrote a record: this accpy's version and its C compiler's `--version` first line."""
    try:
        compiler = compiler_identity(CC)
    except Exception:  # no compiler: the build will say so
        compiler = CC
    return {"accpy": __version__, "compiler": compiler}


class ResultsFile:
    """An append-only JSON-lines log of tuning events."""

    def __init__(self, path):
        self.path = Path(path)
        #: key -> why its records were not trusted, for the variants `load` made start over
        self.distrusted: dict = {}

    def _distrust(self, ev: dict, stamp: dict) -> str:
        if "sha256" not in ev:
            return "a record without a checksum"
        if ev["sha256"] != checksum(ev):
            return "a record that fails its checksum"
        for k in ("accpy", "compiler"):
            if ev.get(k) != stamp[k]:
                return f"a record written with {'accpy ' if k == 'accpy' else ''}{ev.get(k)!r}, not {stamp[k]!r}"
        return _problem(ev)

    def load(self) -> dict:
        """key -> merged state of every variant in the file (unreadable lines are skipped; a record
        not trusted makes its variant start over, and says why in `distrusted`)."""
        state: dict = {}
        self.distrusted = {}
        if not self.path.exists():
            return state
        stamp = run_stamp()
        for line in self.path.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line cut short by an interrupted run
            if not isinstance(ev, dict) or not isinstance(ev.get("key"), str):
                continue
            why = self._distrust(ev, stamp)
            if why:  # measured again: what the variant had so far is forgotten with it
                state.pop(ev["key"], None)
                self.distrusted[ev["key"]] = why
                continue
            if ev.get("status") != "retry":
                self.distrusted.pop(ev["key"], None)  # trusted records written after: measured again already
            s = state.setdefault(ev["key"], {"samples": [], "status": "pending"})
            if not (ev.get("status") == "built" and s["status"] == "ok"):  # a rebuild keeps the samples
                s["status"] = ev.get("status", s["status"])
            if ev.get("status") == "retry":  # a rerun with retry_failed=True starts over
                state[ev["key"]] = {"samples": [], "status": "pending"}
                continue
            for k in ("error", "stage", "invalid_sample", "calls", "details", "build_seconds", "host"):
                if k in ev:
                    s[k] = ev[k]
            s["samples"] = s["samples"] + list(ev.get("samples", []))
            s["checked"] = s.get("checked", False) or bool(ev.get("checked"))
        return state

    def append(self, event: dict) -> None:
        """Append one event (a JSON-able dict) as one line, stamped with the time, the accpy version and
        compiler, and its checksum."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ev = json.loads(json.dumps({**event, "time": round(time.time(), 3), **run_stamp()}, default=str))
        ev["sha256"] = checksum(ev)
        line = json.dumps(ev, sort_keys=True) + "\n"
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
        """The fastest valid variant (measured furthest); RuntimeError saying why when none is valid."""
        r = self.ranked
        if not r:
            counts: dict = {}
            for v in self.variants:
                counts[v.status] = counts.get(v.status, 0) + 1
            what = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            raise RuntimeError(f"tuning {self.label}: no valid variant to choose from ({what} of "
                               f"{len(self.variants)}); result.failures() and result.table() say why")
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
                            + ["" for _ in detail_keys] + [_short(v.cause)])
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
