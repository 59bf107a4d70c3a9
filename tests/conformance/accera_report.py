"""The conformance report: counts, the pass rate, failures grouped by cause (wrong results
first), Accera's own expected failures apart, and what is out of scope and why."""
from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

from accera_programs import SCOPES

BAD = ("wrong_result", "fail", "error", "timeout", "crash")
REPO = Path(__file__).resolve().parents[2]


def cause(error: str) -> str:
    """The grouping key of an error's first line: program-specific details (numbers, statement
    text, file positions, generated names) taken out."""
    s = error or "(no message)"
    s = re.sub(r"`[^`]*`", "`…`", s)
    s = re.sub(r"[\w./-]+\.(py|c|hat|so):\d+", "…", s)
    s = re.sub(r"/[\w./+-]+", "…", s)
    s = re.sub(r"\b_?[0-9a-f]{16}\b", "…", s)
    s = re.sub(r"\btest_\w+", "test_…", s)
    s = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", s)
    return s[:200]


def _declared_xfail(p) -> bool:
    return any(d.split("(")[0].split(".")[-1] == "expectedFailure" for d in p.decorators)


def summarize(programs: list, chosen: list, results: dict) -> dict:
    rows, counts = [], Counter()
    chosen_ids = {p.id for p in chosen}
    for p in programs:
        row = {"id": p.id, "kind": p.kind, "scope": p.scope, "scope_detail": p.scope_detail}
        r = results.get(p.id)
        if r is not None:
            xfail = r.get("accera_xfail", _declared_xfail(p))
            row |= {k: v for k, v in r.items() if k != "id"} | {"accera_xfail": xfail}
            if r["outcome"] == "skipped":
                counts["skipped"] += 1
            elif xfail:
                counts["accera_xfail"] += 1
                counts["xpass" if r["outcome"] in ("pass", "xpass") else "xfail"] += 1
            else:
                counts["measured"] += 1
                counts[r["outcome"]] += 1
        elif p.id in chosen_ids:
            row["outcome"] = "not run"
        counts["scope:" + p.scope] += 1
        rows.append(row)
    counts["collected"] = len(programs)
    counts["in_scope"] = sum(1 for p in programs if p.in_scope)
    counts["run"] = len(results)
    for k in ("pass", "measured", *BAD):
        counts.setdefault(k, 0)
    counts = dict(counts)
    counts["pass_rate"] = counts["pass"] / counts["measured"] if counts["measured"] else 0.0
    return {"counts": counts, "rows": rows}


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu() -> str:
    from accpy.targets.host import host_cpu_name

    return host_cpu_name()


def run_metadata(wheel: Path, args, seconds: float, whole: bool) -> dict:
    import accpy

    docs_commit = ""
    if getattr(args, "docs", None):
        try:
            docs_commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.docs, capture_output=True,
                                         text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    dirty = _git("status", "--porcelain", "--", "accpy", "native")
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "accpy_commit": _git("rev-parse", "HEAD") + (" (with uncommitted changes in accpy/)" if dirty else ""),
        "machine": f"{_cpu()}, {os.cpu_count()} cores, vector_bytes={accpy.Target.HOST.vector_bytes}, "
                   f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "accera_wheel": str(wheel),
        "docs": f"{args.docs} ({docs_commit or 'commit unknown'})" if getattr(args, "docs", None) else "not run",
        "jobs": args.jobs, "timeout": args.timeout, "seconds": round(seconds),
        "whole_run": whole, "selection": {"pattern": args.pattern, "every": args.every},
    }


def _line(r: dict) -> str:
    where = f" ({r['where']})" if r.get("where") else ""
    return f"- `{r['id']}`: {r.get('error', '')[:300]}{where}"


def markdown(summary: dict, meta: dict) -> str:
    c, rows = summary["counts"], summary["rows"]
    ran = [r for r in rows if "outcome" in r and r["outcome"] != "not run"]
    measured = [r for r in ran if r["outcome"] != "skipped" and not r.get("accera_xfail")]
    out = ["# Accera conformance", "",
           "Accera's own test programs (the tests in its PyPI wheel 1.2.29) and documentation examples, run "
           "unchanged through the translation-only shim `tests/conformance/accera_shim` "
           "(`python tests/conformance/run_accera.py --docs <Accera checkout>`; rules at the end).", ""]
    if not meta["whole_run"]:
        out += [f"**A partial run** ({meta['selection']}): counts cover only the programs run.", ""]
    out += [f"- date: {meta['date']}", f"- accpy commit: {meta['accpy_commit']}", f"- machine: {meta['machine']}; "
            f"Python {meta['python']}", f"- documentation: {meta['docs']}",
            f"- {meta['jobs']} workers, {meta['timeout']:g} s per program, {meta['seconds']} s in all", "",
            "## Counts", "",
            f"**Pass rate: {c['pass']} of {c['measured']} in-scope programs = {c['pass_rate']:.1%}** "
            f"(Accera's expected failures and tests that skip themselves are counted apart).", "",
            "| outcome | programs |", "|---|---:|"]
    for k in ("pass", "wrong_result", "fail", "error", "timeout", "crash"):
        out.append(f"| {k.replace('_', ' ')} | {c.get(k, 0)} |")
    out += [f"| **in scope, measured** | **{c['measured']}** |",
            f"| Accera's expected failures (`@expectedFailure`): accpy passes / fails | "
            f"{c.get('xpass', 0)} / {c.get('xfail', 0)} |",
            f"| skipped by the test itself | {c.get('skipped', 0)} |"]
    for scope, why in SCOPES.items():
        if scope != "in" and c.get("scope:" + scope):
            out.append(f"| out of scope: {why} | {c['scope:' + scope]} |")
    out += [f"| collected | {c['collected']} |", ""]

    wrong = [r for r in measured if r["outcome"] == "wrong_result"]
    out += ["## Wrong results", ""]
    out += [_line(r) for r in wrong] or ["None."]
    xwrong = [r for r in ran if r.get("accera_xfail") and r.get("xfail_kind") == "wrong_result"]
    if xwrong:
        out += ["", "Value mismatches in tests Accera itself expects to fail (the test's expected values may be "
                "what is wrong; reviewed separately):", ""] + [_line(r) for r in xwrong]
    out += [""]

    groups = defaultdict(list)
    for r in measured:
        if r["outcome"] in BAD and r["outcome"] != "wrong_result":
            groups[cause(r.get("error", ""))].append(r)
    out += ["## Failures grouped by cause", "",
            f"{sum(len(v) for v in groups.values())} programs in {len(groups)} groups, largest first.", ""]
    for key, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out += [f"### {len(members)} × {key}", ""] + [_line(r) for r in members] + [""]

    xf = [r for r in ran if r.get("accera_xfail")]
    if xf:
        out += ["## Accera's expected failures", "",
                "Tests Accera marks `@expectedFailure` (features Accera lacks or gets wrong). Not in the pass "
                "rate; a pass here is accpy doing what Accera did not.", ""]
        out += [f"- `{r['id']}`: " + ("passes on accpy" if r["outcome"] in ("pass", "xpass")
                                      else f"fails: {r.get('error', '')[:200]}") for r in xf] + [""]
    sk = [r for r in ran if r["outcome"] == "skipped"]
    if sk:
        out += ["## Skipped by the test itself", ""] + [f"- `{r['id']}`: {r.get('error', '')[:200]}" for r in sk] + [""]

    out += ["## Out of scope", ""]
    for scope, why in SCOPES.items():
        members = [r for r in rows if r["scope"] == scope]
        if scope == "in" or not members:
            continue
        out += [f"### {why}: {len(members)}", ""]
        if scope == "gpu":
            per = Counter(r["id"].split("::")[0] for r in members)
            out += [", ".join(f"{f}: {n}" for f, n in sorted(per.items())), ""]
        else:
            out += [f"- `{r['id']}`: {r['scope_detail'].split(': ', 1)[-1][:150]}" for r in members] + [""]
    out += ["## Rules", "",
            "- Programs: every `test*` method of Accera's `smoke_tests.py`, `dsl_tests.py`, `unit_tests.py`, "
            "`int_matmul_tests.py` and `mfma_tests.py`; each Markdown page of Accera's `docs/Manual`, "
            "`docs/Tutorials` and `docs/Reference` (its python blocks in order, as one program) and each "
            "script there.",
            "- Scope is decided from a program's text (a test's method and every helper it calls), first "
            "rule that matches: GPU names (CUDA/ROCm/Vulkan, MMA, barriers, grid units, `bind`, GPU models); "
            "FileCheck of MLIR/LLVM IR/assembly; Accera internals (native module, `_MemoryLayout`, "
            "`CompilerOptions`, ...). A documentation page that is not Python or reads names it never "
            "defines (a fragment that continues another page) is not a program; nor is an example that is wrong "
            "for Accera itself (found by reading it against Accera's API; listed with the reason).",
            "- A program passes when it runs to the end without an exception (its own assertions and "
            "`check_correctness` included). **Wrong result**: a value mismatch, from the shim's "
            "`check_correctness` (numpy `assert_allclose` with the test's tolerance, as Accera's "
            "verifier), accpy's DEBUG-mode comparison with the unscheduled nest, or an assertion raised "
            "inside `numpy.testing`.",
            "- Pass rate = passes / in-scope programs run, without Accera's `@expectedFailure` tests (listed "
            "apart) and tests that skip themselves.",
            "- Each program runs in a worker process (a fresh one after any failure); a timeout kills it.", ""]
    return "\n".join(out)
