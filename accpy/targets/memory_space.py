"""`acc.MemorySpace`: where a cache lives. The generic spaces are here; a target library adds
its own memories' spaces (`MemorySpace.define`, e.g. Gemmini's SCRATCHPAD and ACCUMULATOR)."""
from __future__ import annotations


class _Members(type):
    def __iter__(cls):
        return iter(cls._members.values())

    def __len__(cls):
        return len(cls._members)

    def __getitem__(cls, name: str) -> "MemorySpace":
        return cls._members[name]


class MemorySpace(metaclass=_Members):
    """A memory space (`Plan.cache(location=...)`): NONE, SHARED, PRIVATE, GLOBAL, plus those
    the target libraries define. Members compare by identity, like an enum's."""

    _members: dict = {}

    def __init__(self, name: str, value: str):
        """Use `MemorySpace.define`."""
        self.name, self.value = name, value

    @classmethod
    def define(cls, name: str, value: str) -> "MemorySpace":
        """The member `name` (made on first definition): `acc.MemorySpace.<name>`."""
        m = cls._members.get(name)
        if m is None:
            m = cls(name, value)
            cls._members[name] = m
            setattr(cls, name, m)
        elif m.value != value:
            raise ValueError(f"MemorySpace.{name} is already defined with the value {m.value!r}")
        return m

    def __repr__(self) -> str:
        return f"<MemorySpace.{self.name}: {self.value!r}>"

    def __str__(self) -> str:
        return f"MemorySpace.{self.name}"

    def __reduce__(self):
        return (_member, (self.name,))


def _member(name: str) -> MemorySpace:
    return MemorySpace[name]


MemorySpace.define("NONE", "none")  # chosen by the target (host memory / registers)
MemorySpace.define("SHARED", "shared")  # accepted for Accera compatibility; same as NONE on a CPU
MemorySpace.define("PRIVATE", "private")
MemorySpace.define("GLOBAL", "global")
