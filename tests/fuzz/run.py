"""Fuzz accpy for a while: random schedules, random plans and accpy.testing's plans, checked
against the reference evaluator, round-robin until the time is up.

    python tests/fuzz/run.py --minutes 5                 # CI: a fresh seed each run
    python tests/fuzz/run.py --minutes 60 --sanitize 100 # nightly
    python tests/fuzz/run.py --seed 1234 --cases 200     # replay a run (same seed, same cases)

The seed is printed first. Each batch (one package of `--batch` cases) runs in a watched child
process: a batch that outlives `--timeout` seconds is a hang and one that kills its process a
crash; both are narrowed to their case by running the batch's cases one by one. Every mismatch,
error, hang or crash is minimized and written as a replay script under `--out`, and the exit
status is then 1. `--sanitize N` rebuilds N of the kernels that ran (a random sample over the
generators) under AddressSanitizer + UBSan and checks them again. The summary gives the cases
per generator, the failures, the refusals by reason and the cases per second.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import sys
import threading
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _p in (str(_HERE.parent.parent), str(_HERE.parent)):  # the repository, tests/
    if _p not in sys.path:
        sys.path.insert(0, _p)

from fuzz import engine, generators as G, replay as R  # noqa: E402

SHOWN_FEATURES = ("int8", "uint8", "int16", "bfloat16", "grouped", "panels", "vectorize", "parallelize", "unroll",
                  "cache", "avx2")
SANITIZE_CHUNK = 10  # kernels per sanitized build
SANITIZE_SECONDS = 25  # a chunk's time on a loaded 2-core machine (reserved from the time box)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--minutes", type=float, default=None, help="time box (default 5; with --cases: no limit)")
    p.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    p.add_argument("--seed", type=int, default=None, help="the run's seed (default: a fresh one)")
    p.add_argument("--sanitize", type=int, default=0, metavar="N", help="kernels rebuilt under ASan + UBSan")
    p.add_argument("--out", default="fuzz-out", help="where replay scripts are written (default ./fuzz-out)")
    p.add_argument("--generators", default=",".join(G.GENERATORS), help="comma-separated subset of "
                   + ", ".join(G.GENERATORS))
    p.add_argument("-v", "--verbose", action="store_true", help="a line per batch")
    p.add_argument("--opt", default="mixed", choices=["mixed", "-O0", "-O1", "-O2", "-O3"],
                   help="the kernels' optimization level (mixed: -O3 every fourth batch, else -O0)")
    p.add_argument("--batch", type=int, default=25, help="cases per batch (one package)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds a batch may take before it is a hang")
    p.add_argument("--case-timeout", type=float, default=60.0, help="seconds one case may take (narrowing)")
    p.add_argument("--minimize-minutes", type=float, default=3.0, help="time to minimize each failure")
    p.add_argument("--max-minimize", type=int, default=3, help="failures minimized (the rest written as found)")
    args = p.parse_args(argv)
    gens = tuple(g.strip() for g in args.generators.split(",") if g.strip())
    bad = [g for g in gens if g not in G.GENERATORS]
    if bad or not gens:
        p.error(f"--generators: expected names from {', '.join(G.GENERATORS)}, got {args.generators!r}")
    for name in ("batch", "jobs"):
        if getattr(args, name) < 1:
            p.error(f"--{name}: expected a positive number, got {getattr(args, name)}")
    for name in ("timeout", "case_timeout"):
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')}: expected a positive number of seconds, got {getattr(args, name)}")
    if args.minutes is not None and not args.minutes >= 0:
        p.error(f"--minutes: expected a number >= 0, got {args.minutes}")
    if args.cases is not None and args.cases < 0 or args.sanitize < 0:
        p.error("--cases and --sanitize: expected numbers >= 0")
    if args.minutes is None and args.cases is None:
        args.minutes = 5.0
    args.gens = gens
    return args


class Stats:
    def __init__(self, gens):
        self.gens = gens
        self.kinds = {g: collections.Counter() for g in gens}
        self.features = {g: collections.Counter() for g in gens}  # of the cases that ran fine
        self.refused = collections.Counter()  # (gen, reason) -> n
        self.failures: list = []  # (gen, batch index, Outcome)
        self.draw_failures: list = []  # a generator that hung or died while drawing (no case to show)
        self.sample: list = []  # a reservoir of cases that ran fine, for the sanitizer pass
        self.sample_seen = 0
        self.rng = random.Random()

    @property
    def cases(self) -> int:
        return sum(sum(c.values()) for c in self.kinds.values())

    def add(self, gen, index, outcomes, keep: int) -> None:
        for o in outcomes:
            self.kinds[gen][o.kind] += 1
            if o.kind == "refused":
                self.refused[(gen, o.what)] += 1
            elif o.kind in G.FAILING:
                self.failures.append((gen, index, o))
                print(f"[{gen} batch {index}] {o.kind.upper()}: {o.what}\n  {o.case.describe()}", flush=True)
            if o.kind == "ok":
                self.features[gen].update(features(o.case))
            if o.kind == "ok" and keep:
                self.sample_seen += 1
                if len(self.sample) < keep:
                    self.sample.append(o.case)
                elif (r := self.rng.randrange(self.sample_seen)) < keep:
                    self.sample[r] = o.case


def features(case) -> set:
    """What a case exercises, for the summary: its element type and plan features (grouped layouts, panels)."""
    from support import schedgen as sg

    out = {case.nest.dtype} | sg.plan_features(case)
    for s in case.steps:
        kw = dict(s.kwargs)
        if s.op == "cache" and ("VNNI" in str(kw.get("layout", "")) or "grouped(" in str(kw.get("layout", ""))):
            out.add("grouped")
        if s.op == "cache" and kw.get("panel_width", 1) > 1:
            out.add("panels")
    return out


def _batches(args, seed):
    """(gen, index) round-robin over the generators."""
    index = 0
    while True:
        for gen in args.gens:
            yield gen, index
        index += 1


def opt_level(args, index: int) -> str:
    """The kernels' optimization level in batch `index`: -O0 builds fastest, every fourth
    batch -O3 (how packages are built: the C compiler's optimizations see the code too)."""
    if args.opt != "mixed":
        return args.opt
    return "-O3" if index % 4 == 3 else "-O0"


def _narrow(worker, gen, index, cases, args, work) -> list:
    """A batch that hung or crashed: each of its cases alone, each watched."""
    out = []
    for n, case in enumerate(cases):
        job = ("check", gen, case, str(work / f"one{n}"), opt_level(args, index))
        kind, data = worker.call(job, args.case_timeout)
        out.append(_outcome(kind, data, case, args.case_timeout))
    return out


def _outcome(kind, data, case, timeout) -> G.Outcome:
    if kind == "done":
        return data
    if kind == "hang":
        return G.Outcome(case, "hang", f"no result after {timeout:g} s")
    if kind == "crash":
        return G.Outcome(case, "crash", f"the process died ({_status(data)})")
    return G.Outcome(case, "error", "the fuzz driver raised", data)


def _status(code) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def fuzz(args, seed, work: Path, stats: Stats, deadline) -> None:
    """The round-robin loop over watched workers until the deadline or the case count."""
    workers = [engine.Worker(G.run_job) for _ in range(args.jobs)]
    todo = _batches(args, seed)
    keep = args.sanitize
    pending = 0  # cases in batches still running (for --cases)

    def more() -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        return args.cases is None or stats.cases + pending < args.cases

    try:
        while True:
            for w in workers:
                if not w.busy and more():
                    gen, index = next(todo)
                    size = args.batch if args.cases is None else min(args.batch, args.cases - stats.cases - pending)
                    job = ("batch", gen, seed, index, size, str(work / f"{gen}{index}"), opt_level(args, index))
                    w.submit(job, args.timeout)
                    w.meta, w.started = (gen, index, size), time.monotonic()
                    pending += size
            if not any(w.busy for w in workers):
                break
            engine.wait_any(workers, 1.0)
            for w in workers:
                if not w.busy:
                    continue
                out = w.poll()
                if out is None:
                    continue
                gen, index, size = w.meta
                pending -= size
                kind, data = out
                if kind == "done":
                    stats.add(gen, index, data, keep)
                    if args.verbose:
                        kinds = collections.Counter(o.kind for o in data)
                        print(f"[{gen} batch {index}] {len(data)} cases in {time.monotonic() - w.started:.1f} s: "
                              + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())), flush=True)
                    continue
                cases = next((n[1] for n in w.notes if n[0] == "cases"), None)
                if kind == "error":
                    print(f"[{gen} batch {index}] the fuzz driver raised:\n{data}", flush=True)
                if cases is None:  # before the cases were drawn: the draw itself
                    why = _outcome(kind, data, None, args.timeout).what
                    stats.draw_failures.append(f"{gen} batch {index}: drawing the cases: {kind} ({why})")
                    continue
                print(f"[{gen} batch {index}] {kind}: running its {len(cases)} cases one by one", flush=True)
                stats.add(gen, index, _narrow(w, gen, index, cases, args, work / f"narrow{gen}{index}"), keep)
    finally:
        for w in workers:
            w.kill()


def sanitizer_pass(args, stats, work) -> dict:
    res = {"cases": 0, "skipped": None, "failures": []}
    cases = list(stats.sample)
    if not cases:
        return res
    worker = engine.Worker(G.run_job)
    try:
        for n in range(0, len(cases), SANITIZE_CHUNK):
            chunk = cases[n:n + SANITIZE_CHUNK]
            kind, data = worker.call(("sanitize", chunk, str(work / f"san{n}")), args.timeout)
            if kind != "done":
                res["failures"].append((chunk[0], f"the sanitized chunk {kind}: "
                                                  f"{_outcome(kind, data, chunk[0], args.timeout).what}"))
                continue
            if data["skipped"]:
                res["skipped"] = data["skipped"]
                break
            res["cases"] += data["cases"]
            res["failures"] += data["failures"]
    finally:
        worker.kill()
    return res


def report_failures(args, seed, stats, work, out: Path) -> list:
    """Minimize (the first few) and write every failure as a replay; the paths written."""
    paths = []
    worker = engine.Worker(G.run_job)
    try:
        for k, (gen, index, o) in enumerate(stats.failures):
            original = o.case
            if k < args.max_minimize:
                print(f"minimizing the {o.kind} of {gen} batch {index}:", flush=True)
                timeout = args.case_timeout if o.kind != "hang" else min(args.case_timeout, 30.0)
                n = [0]

                def check(case, gen=gen, timeout=timeout, opt=opt_level(args, index)):
                    n[0] += 1
                    kind, data = worker.call(("check", gen, case, str(work / f"min{n[0]}"), opt), timeout)
                    return _outcome(kind, data, case, timeout)

                o = R.minimize(check, o, args.minimize_minutes * 60)
            paths.append(R.write_replay(out, o, gen, seed, index, original, timeout=max(args.case_timeout, 120.0),
                                        opt=opt_level(args, index)))
    finally:
        worker.kill()
    return paths


def summary(stats, seconds, san, paths, seed) -> str:
    lines = [f"fuzz summary (seed {seed}): {stats.cases} cases in {seconds:.0f} s "
             f"({stats.cases / max(seconds, 1e-9):.2f} cases/s)"]
    for gen in stats.gens:
        c = stats.kinds[gen]
        lines.append(f"  {gen:9} {sum(c.values()):6} cases: {c['ok']} ok, {c['refused']} refused, "
                     f"{c['mismatch']} mismatches, {c['error']} errors, {c['hang']} hangs, {c['crash']} crashes")
        shown = [f"{k} {n}" for k, n in sorted(stats.features[gen].items()) if k in SHOWN_FEATURES]
        if shown:
            lines.append(f"  {'':9} ran fine with: " + ", ".join(shown))
    for (gen, why), n in stats.refused.most_common():
        lines.append(f"  refused {n}x ({gen}): {why}")
    if san is not None:
        if san["skipped"]:
            lines.append(f"  sanitizers: skipped ({san['skipped']})")
        else:
            lines.append(f"  sanitizers (ASan + UBSan): {san['cases']} kernels, {len(san['failures'])} failures")
        for case, msg in san["failures"]:
            lines.append(f"    SANITIZER: {case.describe()}\n      {msg[:2000]}")
    for text in stats.draw_failures:
        lines.append(f"  DRAW FAILED: {text} (rerun with this seed and --generators)")
    bad = len(stats.failures) + len(stats.draw_failures) + (len(san["failures"]) if san else 0)
    lines.append(f"  {bad} failures" + (": replays in " + ", ".join(str(p) for p in paths) if paths else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if threading.current_thread() is threading.main_thread():  # killed (e.g. by CI): workers ended too
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    print(f"fuzz seed {seed} (the same cases again: python tests/fuzz/run.py --seed {seed}"
          f"{' --cases ' + str(args.cases) if args.cases is not None else ''} ...)", flush=True)
    t0 = time.monotonic()
    reserve = SANITIZE_SECONDS * -(-args.sanitize // SANITIZE_CHUNK)
    deadline = None if args.minutes is None else t0 + max(args.minutes * 60 - reserve, 0)
    work = Path(tempfile.mkdtemp(prefix="accpy-fuzz-"))
    old_cache = os.environ.get("ACCPY_CACHE_DIR")
    os.environ["ACCPY_CACHE_DIR"] = str(work / "cache")  # (the kernels of a run are not worth keeping)
    stats = Stats(args.gens)
    try:
        fuzz(args, seed, work, stats, deadline)
        fuzzed = time.monotonic() - t0
        san = sanitizer_pass(args, stats, work) if args.sanitize else None
        paths = report_failures(args, seed, stats, work, Path(args.out)) if stats.failures else []
        if san:
            for case, msg in san["failures"]:
                o = G.Outcome(case, "error", "under ASan + UBSan: " + msg.splitlines()[0], msg)
                paths.append(R.write_replay(args.out, o, "sanitize", seed, "-"))
    finally:
        if old_cache is None:
            os.environ.pop("ACCPY_CACHE_DIR", None)
        else:
            os.environ["ACCPY_CACHE_DIR"] = old_cache
        shutil.rmtree(work, ignore_errors=True)
    print(summary(stats, fuzzed, san, paths, seed), flush=True)
    return 1 if stats.failures or stats.draw_failures or (san and san["failures"]) else 0


if __name__ == "__main__":
    sys.exit(main())
