"""Objectives that target libraries register (accpy/targets/objective.py): found by name by
`acc.tune(objective=...)` and by class name as attributes of `accpy.tune`; bad registrations refused."""
from __future__ import annotations

import pytest

import accpy as acc
import accpy.targets.objective as objectives
from accpy.targets.gemmini.objective import GemminiCycles
from accpy.tune import Objective, WallTime
from accpy.tune.objective import objective_of


class CallCount(Objective):
    """A deterministic test objective: 1 per call."""

    name, unit = "call_count", "calls"
    deterministic = True

    def sample(self, call, package, calls: int) -> float:
        call()
        return 1.0


@pytest.fixture
def registry(monkeypatch):
    """The registry, restored after the test."""
    monkeypatch.setattr(objectives, "_REGISTERED", dict(objectives._REGISTERED))
    return objectives


def test_a_registered_objective_is_found_by_name_and_by_class_name(registry):
    assert registry.register_objective(CallCount, "call_count", "calls_made") is CallCount
    assert isinstance(objective_of("call_count"), CallCount) and isinstance(objective_of("calls_made"), CallCount)
    assert acc.tune.CallCount is CallCount and "CallCount" in dir(acc.tune)
    from accpy.tune import CallCount as imported

    assert imported is CallCount
    assert registry.registered_objectives()["call_count"] is CallCount


def test_gemmini_registers_its_cycles():
    assert objectives.registered_objectives()["gemmini_cycles"] is GemminiCycles
    assert objectives.registered_objectives()["cycles"] is GemminiCycles
    assert acc.tune.GemminiCycles is GemminiCycles and issubclass(GemminiCycles, acc.tune.Objective)
    assert isinstance(objective_of(None), WallTime) and isinstance(objective_of("cycles"), GemminiCycles)


def test_unknown_names_say_what_is_known():
    with pytest.raises(ValueError, match=r"objective: expected an accpy.tune.Objective or one of \['cycles', "
                                         r"'gemmini_cycles', 'seconds', 'time'\], got 'joules'"):
        objective_of("joules")
    with pytest.raises(AttributeError, match="module 'accpy.tune' has no attribute 'NoSuchObjective'"):
        acc.tune.NoSuchObjective


def test_bad_registrations_are_refused(registry):
    with pytest.raises(TypeError, match="register_objective: expected a subclass of Objective, got <class 'int'>"):
        registry.register_objective(int, "int")
    with pytest.raises(TypeError, match="register_objective: expected a subclass of Objective"):
        registry.register_objective(CallCount(), "instance")
    with pytest.raises(ValueError, match=r"register_objective: expected one or more names \(non-empty strings\), "
                                         r"got \(\)"):
        registry.register_objective(CallCount)
    with pytest.raises(ValueError, match="register_objective: the name 'cycles' is already GemminiCycles's"):
        registry.register_objective(CallCount, "call_count", "cycles")
    assert "call_count" not in registry.registered_objectives()  # nothing of a refused registration is kept
    registry.register_objective(GemminiCycles, "cycles")  # the same class again: fine
    assert registry.registered_objectives()["cycles"] is GemminiCycles
