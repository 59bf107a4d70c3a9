"""What tuning minimizes, as a target may define it: the `Objective` base and the objectives
target libraries register by name (e.g. a functional model's cycle count).

An objective runs inside tuning's measuring process (accpy/tune/runner.py): it gets the variant's
call (arguments bound) and its loaded package, and returns one sample (smaller is better). A
custom objective is a subclass of `Objective` defined in an importable module (it is pickled
into the measuring process). `accpy.tune` re-exports `Objective` and finds the registered ones
by name (`acc.tune(..., objective="name")`) and by class name (`accpy.tune.ClassName`).
"""
from __future__ import annotations

from typing import Callable


class Objective:
    """Base class: `sample()` returns one measurement of one variant; smaller is better."""

    name: str = "objective"
    unit: str = ""
    #: True when every sample is the same (a model's count): one sample is enough, and
    #: samples are not affected by other work on the machine
    deterministic: bool = False

    def calls_per_sample(self, call: Callable[[], None], min_time: float) -> int:
        """How many calls one sample averages over (1 unless the objective times calls)."""
        return 1

    def sample(self, call: Callable[[], None], package, calls: int) -> float:
        """One sample: run `call` (the variant with its arguments) and return the figure."""
        raise NotImplementedError

    def details(self, package) -> dict:
        """Extra facts recorded with the variant after its last sample (JSON-able)."""
        return {}

    def format(self, value: float) -> str:
        """`value` for a person to read."""
        return f"{value:.4g} {self.unit}".strip()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


_REGISTERED: dict = {}  # name -> Objective subclass


def register_objective(cls: type, *names: str) -> type:
    """Make `cls` (an Objective subclass) known under each of `names` (`objective="name"`)."""
    if not (isinstance(cls, type) and issubclass(cls, Objective)):
        raise TypeError(f"register_objective: expected a subclass of Objective, got {cls!r}")
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"register_objective: expected one or more names (non-empty strings), got {names!r}")
    for n in names:
        if _REGISTERED.get(n, cls) is not cls:
            raise ValueError(f"register_objective: the name {n!r} is already {_REGISTERED[n].__name__}'s")
    _REGISTERED.update(dict.fromkeys(names, cls))
    return cls


def registered_objectives() -> dict:
    """{name: Objective subclass} of every registered objective."""
    return dict(_REGISTERED)
