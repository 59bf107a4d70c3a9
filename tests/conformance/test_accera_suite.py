"""Accera conformance (issue 32): a representative part of Accera's own tests (every third in-scope
test of its wheel), run unchanged through the shim, must give no wrong result and pass at no less
than the recorded floor. The whole run: `python tests/conformance/run_accera.py` (RESULTS.md)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_accera  # noqa: E402

EVERY = 3
# measured on this part (every third in-scope test); raise it as accpy closes gaps, never lower it
PASS_RATE_FLOOR = 0.85  # 2026-11-29: 77 of 86 (89.5%); the whole run 225 of 260 (86.5%)


@pytest.mark.slow
def test_accera_tests_pass_through_the_shim_without_wrong_results(tmp_path):
    try:
        run_accera.ensure_wheel()
    except run_accera.WheelUnavailable as e:
        pytest.skip(f"Accera's wheel cannot be downloaded here, so its tests cannot run: {e}")
    report = tmp_path / "RESULTS.md"
    r = subprocess.run([sys.executable, str(HERE / "run_accera.py"), "--every", str(EVERY), "--results", str(report),
                        "-q"], capture_output=True, text=True, timeout=1200)
    assert report.exists(), r.stderr[-3000:]
    data = json.loads(report.with_name("accera_results.json").read_text())
    rows = [p for p in data["programs"] if p.get("outcome") not in (None, "not run")]
    wrong = [f"{p['id']}: {p.get('error')}" for p in rows if p["outcome"] == "wrong_result" and not p["accera_xfail"]]
    assert not wrong, "wrong results:\n" + "\n".join(wrong)
    rate = data["summary"]["pass_rate"]
    assert rate >= PASS_RATE_FLOOR, (f"pass rate {rate:.1%} below the recorded floor {PASS_RATE_FLOOR:.0%}; "
                                     f"see {report}")
