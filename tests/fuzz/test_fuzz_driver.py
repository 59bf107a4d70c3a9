"""The fuzz driver itself (tests/fuzz/run.py): a short run on a fixed seed, and planted failures
(a wrong reference value, a hang, a crash) that it must find, narrow to their case, minimize and
write as replay scripts that reproduce them. The workers are forked from this process, so a
bug planted here with monkeypatch is in them too."""
from __future__ import annotations

import faulthandler
import os
import re
import runpy
import signal
import time

import numpy as np
import pytest

from support import schedgen as sg

from fuzz import generators as G
from fuzz import run as fuzz_run


def _main(capsys, *argv) -> tuple:
    code = fuzz_run.main([str(a) for a in argv])
    return code, capsys.readouterr().out


def _replay(path) -> int:
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(path), run_name="__main__")
    return e.value.code


def _plant(monkeypatch, fn) -> None:
    """Wrap the reference as both checkers call it: `fn(state, outputs)` may spoil the outputs."""
    real = sg.reference_outputs

    def planted(state, inputs):
        out = real(state, inputs)
        fn(state, out)
        return out

    monkeypatch.setattr(sg.batches, "reference_outputs", planted)
    monkeypatch.setattr(sg.plan_batches, "reference_outputs", planted)


def _ops(state) -> set:
    return {s.op for s in state.steps}


@pytest.mark.slow
def test_a_short_run_on_a_fixed_seed(tmp_path, capsys):
    """Every generator runs, the seed comes first, the summary counts, a sanitized sample."""
    code, out = _main(capsys, "--cases", 12, "--batch", 4, "--seed", 5, "--sanitize", 2, "--out", tmp_path)
    lines = out.splitlines()
    assert lines[0].startswith("fuzz seed 5 "), lines[0]
    assert code == 0, out
    assert re.search(r"fuzz summary \(seed 5\): 12 cases in \d+ s \([\d.]+ cases/s\)", out), out
    for gen in G.GENERATORS:
        assert re.search(rf"  {gen} +4 cases: \d+ ok", out), out
    assert "sanitizers (ASan + UBSan): 2 kernels, 0 failures" in out or "sanitizers: skipped" in out
    assert "0 failures" in out and not list(tmp_path.iterdir())


def test_the_same_seed_draws_the_same_cases():
    for gen in G.GENERATORS:
        a = G.draw_batch(gen, 11, 2, 3)
        assert a == G.draw_batch(gen, 11, 2, 3) and len(a) == 3
        assert a != G.draw_batch(gen, 12, 2, 3)
    narrow = G.draw_batch("testing", 3, 0, 10)
    assert {c.nest.kind for c in narrow} <= set(sg.narrow_kinds())


@pytest.mark.slow
def test_a_planted_mismatch_is_minimized_and_written_as_a_replay(tmp_path, capsys, monkeypatch):
    """A 'bug' that spoils one output element whenever a schedule splits: the run fails, the
    case shrinks to a single split of a small nest, and its replay fails while the bug is in
    and passes once it is gone."""
    def spoil(state, out):
        if "split" in _ops(state):
            last = [x for x in out if isinstance(x, np.ndarray)][-1]
            last.reshape(-1)[0] += 1

    _plant(monkeypatch, spoil)
    code, out = _main(capsys, "--cases", 8, "--batch", 8, "--seed", 7, "--generators", "schedules",
                      "--minimize-minutes", 2, "--max-minimize", 1, "--out", tmp_path)
    assert code == 1, out
    assert "MISMATCH: native result differs from the reference" in out
    replays = sorted(tmp_path.glob("replay_schedules_mismatch_*.py"))
    assert replays, out
    text = replays[0].read_text()
    assert "--seed 7" in text and "minimized from" in text
    steps = text.split('STEPS = """')[1].split('"""')[0].strip().splitlines()
    assert len(steps) == 1 and ".split(" in steps[0], steps  # one step left: the split
    sizes = re.search(r"replay\('schedules', '\w+', \(([\d, ]+)\)", text).group(1)
    assert all(int(s) <= 2 for s in sizes.split(",") if s.strip()), sizes
    assert _replay(replays[0]) == 1  # the bug is in: it reproduces
    monkeypatch.undo()
    assert _replay(replays[0]) == 0  # fixed


@pytest.mark.slow
def test_a_hang_and_a_crash_are_narrowed_to_their_cases(tmp_path, capsys, monkeypatch):
    """A case that never ends and one that kills its process: each batch is rerun case by case;
    the run ends, names both, writes their replays and fails."""
    def misbehave(state, out):
        if "pad" in _ops(state):
            time.sleep(3600)
        if "skew" in _ops(state):
            faulthandler.disable()  # (pytest's: no stack dump in the test's output)
            os.kill(os.getpid(), signal.SIGSEGV)

    _plant(monkeypatch, misbehave)
    t0 = time.monotonic()
    code, out = _main(capsys, "--cases", 5, "--batch", 5, "--seed", 1, "--generators", "schedules",
                      "--timeout", 20, "--case-timeout", 12, "--max-minimize", 0, "--out", tmp_path)
    assert code == 1, out
    assert time.monotonic() - t0 < 180
    assert "running its 5 cases one by one" in out
    assert "HANG: no result after 12 s" in out and "CRASH: the process died (signal SIGSEGV)" in out
    hung = [o for o in out.splitlines() if o.startswith("[schedules batch 0] HANG")]
    assert hung and list(tmp_path.glob("replay_schedules_hang_*.py"))
    assert list(tmp_path.glob("replay_schedules_crash_*.py"))


def test_bad_arguments_are_refused(capsys):
    for argv, msg in ((["--generators", "nests"], "--generators: expected names from schedules, plans, testing"),
                      (["--batch", "0"], "--batch: expected a positive number, got 0"),
                      (["--timeout", "0"], "--timeout: expected a positive number of seconds"),
                      (["--minutes", "-1"], "--minutes: expected a number >= 0")):
        with pytest.raises(SystemExit):
            fuzz_run.parse_args(argv)
        assert msg in capsys.readouterr().err


def test_refusal_reasons_are_generalized():
    text = "Traceback...\naccpy.errors.ScheduleError: vectorize(j1): avx2 has no `add` for int8 (32 lanes)"
    assert G.refusal_reason(text) == "ScheduleError: vectorize(<ix>): avx2 has no `add` for int8 (N lanes)"
    assert G.refusal_reason("Traceback...\nKeyError: 'x'") is None
