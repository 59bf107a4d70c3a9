"""Plain data of a case's steps: `Ref` (a name in the case's namespace), `Mapping`, `Step`."""
from __future__ import annotations

from dataclasses import dataclass


# -----------------------------------------------------------------------------------------
# step data
# -----------------------------------------------------------------------------------------


class Ref(str):
    """A reference to a variable of the case's namespace (an index, an array): prints bare."""

    def __repr__(self) -> str:
        return str(self)


class Mapping(tuple):
    """An ordered {key: value} argument (e.g. tile's shape) kept hashable; prints as a dict."""

    def __new__(cls, items):
        return super().__new__(cls, tuple((k, v) for k, v in items))

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self) + "}"


@dataclass(frozen=True)
class Step:
    """One call on the schedule (or plan): `results = target.op(*args, **kwargs)`."""

    op: str
    args: tuple = ()
    kwargs: tuple = ()  # ((name, value), ...)
    results: tuple = ()  # names bound to the result (new indices)
    target: str = "schedule"  # the namespace variable the method is called on

    def code(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        call = f"{self.target}.{self.op}({', '.join(parts)})"
        if not self.results:
            return call
        lhs = ", ".join(self.results) + ("," if len(self.results) == 1 and self.op == "tile" else "")
        return f"{lhs} = {call}"

    def __str__(self) -> str:
        return self.code()
