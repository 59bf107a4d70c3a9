"""Record and replay: the calls made on a front-end object (a nest's logic functions, a
schedule's transforms, a plan's annotations), kept in order so that an object whose values wait
for parameters is realized by replaying them once the values are known (`Package.add(...,
parameters=...)`), one realization per set of values."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .parameters import context_key, resolve


class RecordedCall(NamedTuple):
    """One call: `op` with its (unresolved) arguments, and what it returned (a handle a later
    call may be given, e.g. a plan's Cache)."""

    op: str
    args: tuple
    kwargs: dict
    result: Any


class Recording:
    """The calls of one object, in order, and its realizations (one per parameter context)."""

    def __init__(self, calls=()):
        self.calls: list = list(calls)
        self._realized: dict = {}

    def add(self, op: str, args: tuple = (), kwargs=None, result=None) -> None:
        """Record a call (and forget realizations made before it)."""
        self.calls.append(RecordedCall(op, tuple(args), dict(kwargs or {}), result))
        self._realized = {}

    def __iter__(self):
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)

    def __getitem__(self, k):
        return self.calls[k]

    def copy(self) -> "Recording":
        """A recording of the same calls (realizations are not shared)."""
        return Recording(self.calls)

    def replay(self, apply: Callable, state=None):
        """`state = apply(state, call)` for every call in order, with its arguments resolved (the
        parameter values in effect) and a handle an earlier call returned replaced by what the
        replay of that call returned (`apply` returns (state, result))."""
        handles: dict = {}

        def mapped(x):
            return handles.get(id(x), x) if x is not None and id(x) in handles else x

        for c in self.calls:
            args = tuple(mapped(a) for a in resolve(c.args))
            kwargs = {k: mapped(v) for k, v in resolve(c.kwargs).items()}
            state, result = apply(state, RecordedCall(c.op, args, kwargs, c.result))
            if c.result is not None:
                handles[id(c.result)] = result
        return state

    def realized(self, build: Callable):
        """`build()`'s value for the parameter values in effect (built once per set of values)."""
        key = context_key()
        if key not in self._realized:
            self._realized[key] = build()
        return self._realized[key]
