"""Target libraries as data: memories and intrinsics (each a reference body and a C template).

A target library (e.g. accpy/targets/gemmini.py) registers its `Memory`s and `Intrinsic`s
here. The loop IR calls an intrinsic as `Evaluate(Call(name, args))`; the C emitter fills
its template with the arguments (`{name}` per parameter; a *pointer* parameter given as a
`Load` is emitted as the element's address, a constant 0 as NULL). An intrinsic that writes
a *configuration state* names it (`config`, formatted with the arguments, e.g. "ld{id}"):
the config pass (accpy/lower/config.py) hoists and removes writes that cannot change it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..ir.types import ScalarType


@dataclass(frozen=True)
class Memory:
    """A target memory: `rows` rows of `row_elems` elements of `dtype` (addresses count rows)."""

    name: str  # the acc.MemorySpace value it implements ("scratchpad", "accumulator")
    rows: int
    row_elems: int
    dtype: ScalarType
    readable: bool = False  # CPU code may load/store it directly
    description: str = ""

    @property
    def bytes(self) -> int:
        """Size of the memory in bytes."""
        return self.rows * self.row_elems * self.dtype.bits // 8


@dataclass(frozen=True)
class Intrinsic:
    """One instruction: its parameters, C template, numpy reference body and effects."""

    name: str
    params: tuple
    template: str
    reference: Optional[Callable] = field(default=None, compare=False)
    pointer_params: tuple = ()
    config: Optional[str] = None  # configuration state written (format string over params)
    uses_config: tuple = ()  # configuration states read
    header: str = ""  # what the C needs (#include)
    doc: str = ""

    def config_state(self, args) -> Optional[str]:
        """The configuration state a call with `args` writes (None: not a config write)."""
        if self.config is None:
            return None
        from ..ir.expr import as_int

        vals = {}
        for p, a in zip(self.params, args):
            v = as_int(a)
            vals[p] = v if v is not None else "?"
        return self.config.format(**vals)

    def c_call(self, arg_texts: dict) -> str:
        """The C text of one call, the template filled with the arguments' C texts."""
        return self.template.format(**arg_texts)


_INTRINSICS: dict = {}
_MEMORIES: dict = {}


def register(*items) -> None:
    """Make intrinsics and tensor intrinsics known by name to lowering and codegen."""
    for it in items:
        if isinstance(it, Intrinsic):
            _INTRINSICS[it.name] = it
        elif isinstance(it, Memory):
            _MEMORIES[it.name] = it
        else:
            raise TypeError(f"register: expected an Intrinsic or a Memory, got {it!r}")


def intrinsic(name: str) -> Optional[Intrinsic]:
    """The registered intrinsic called `name`, or None (libraries register on import)."""
    _load_libraries()
    return _INTRINSICS.get(name)


def memory(name: str) -> Optional[Memory]:
    """The registered memory `name` (e.g. "scratchpad"), or None (host memory)."""
    _load_libraries()
    return _MEMORIES.get(name)


def library_for(target):
    """The tensor/memory library of a target (Gemmini's module), or None for CPUs."""
    if target is not None and getattr(target, "family", None) == "Gemmini":
        from . import gemmini

        return gemmini
    return None


def _load_libraries() -> None:
    from . import gemmini  # noqa: F401  (registers itself)
