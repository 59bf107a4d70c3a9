"""The tensor unit: what a target library gives `plan.tensorize` and caches in target memories.

A library with tensor instructions or memories of its own returns a `TensorUnit` from
`TargetLibrary.tensor_unit(target)`; the generic passes reach the hardware only through it:

* memories (`memories`, `place`, `copy_in`, `copy_out`): the unit places the caches that live in
  its memories and turns their copy loops into its transfers (lower/target_memory.py);
* instructions (`tensor_intrinsic`, `check_tensorize`): what `plan.tensorize(indices, intrinsic)`
  maps a sub-nest onto, resolved at plan time;
* operand layouts (`operand_layout(role, dtype)`): how its instructions read an operand kept in the
  grouped layout (`Array.Layout.grouped()`), as bytes per group and whole blocks;
* matching (`match_tile`, `match_prologue`, `match_epilogue`, `tile_calls`, `unmatched`): a
  tensorized sub-nest becomes a tile object the unit declares, whose calls are its own
  (lower/tensorize.py). The generic pass knows nothing of a tile's fields; anything a unit does
  across tiles (e.g. Gemmini's weight reuse) is a pass of its library (`LibraryPass`).

Several libraries may serve one target: the memory a cache is placed in decides which unit places
and copies it (`memory_unit`), the intrinsic `plan.tensorize` names decides which unit matches
(`resolve_tensorize`); a unit may read the layouts of another library's memories.
Operand roles: "A" (i, k), "B" (k, j), "C" (i, j) of C[i, j] += A[i, k] * B[k, j].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.types import ScalarType
from .library import libraries_for

ROLES = ("A", "B", "C")


@dataclass(frozen=True)
class OperandLayout:
    """How a unit's instructions read one operand from a cache in the grouped layout: groups of
    `group_bytes` bytes of consecutive reduction values, the cache allocated in whole `block`s
    (rows, columns), its rows past the data zeros (e.g. a B tile)."""

    group_bytes: int
    block: tuple = (1, 1)


class TensorUnit:
    """Base of a library's tensor unit; each hook's default says "not this unit's business"."""

    name: str = ""  # for messages ("Gemmini", "the x86 tile unit")
    memories: tuple = ()  # the Memory objects whose caches this unit places and copies

    # -- instructions ------------------------------------------------------------------------------
    def tensor_intrinsic(self, spec):
        """`Plan.tensorize`'s `intrinsic` argument resolved (an object with `name` and `shape`; an
        already resolved one of this unit's gives itself back), None when this unit has no tensor
        instructions; ValueError for one it does not have."""
        return None

    def check_tensorize(self, store, what: str) -> None:
        """ValueError unless the statement `store` of a tensorized part can become tiles."""

    def fused_ops(self, store) -> tuple:
        """(before, after): the element-wise operations this unit's intrinsic applies to the output
        of the tensorized statement `store` beyond the nest's logic, each None or a function from an
        element's value (an IR expression) to its new value; applied once to every element the
        sub-nest updates, before its first update and after its last. DEBUG mode's oracle applies
        them too."""
        return None, None

    def for_intrinsic(self, intrinsic) -> "TensorUnit":
        """The unit that checks and matches the sub-nests tensorized onto `intrinsic` (one this unit
        resolved): the unit itself, unless its tiles depend on options of the call (e.g. a number of
        passes), then a unit bound to them."""
        return self

    def operand_layout(self, role: str, dtype: ScalarType) -> Optional[OperandLayout]:
        """How this unit's instructions read operand `role` ("A", "B" or "C") of `dtype` from a cache
        in the grouped layout, or None (none reads it grouped)."""
        return None

    # -- memories ----------------------------------------------------------------------------------
    def place(self, buffers, describe, roles=None) -> dict:
        """Addresses of the caches in this unit's memories: {buffer: layout}. `roles`: {buffer: per
        dimension, which tensorized index (0, 1, 2: i, j, k) its subscripts follow, or None}."""
        raise NotImplementedError(f"{self.name} has no memories")

    def copy_in(self, layout, source, origin, extents, what: str, locality=None):
        """The transfers filling the block at `layout` from `source` (None: zeros) at `origin`;
        `locality`: the cache's hint (`plan.cache(..., locality=)`), which a unit may ignore."""
        raise NotImplementedError(f"{self.name} has no memories")

    def copy_out(self, layout, dest, origin, extents, what: str):
        """The transfers writing the block at `layout` back to `dest` at `origin`."""
        raise NotImplementedError(f"{self.name} has no memories")

    # -- matching ----------------------------------------------------------------------------------
    def match_tile(self, loops, store, roles, layouts, what: str):
        """The tile (an object of this unit's) a tensorized statement, a reduction into a target
        memory, becomes; ValueError says what does not match. `layouts`: {buffer: layout} of every
        target-memory cache (of any unit)."""
        raise NotImplementedError(f"{self.name} has no tensor instructions")

    def match_prologue(self, loops, store, roles, layouts, what: str):
        """The statements a prologue (e.g. a bias loaded into an accumulator) becomes, or None."""
        return None

    def match_epilogue(self, loops, store, roles, layouts, what: str):
        """The statements an epilogue (reading a target memory out) becomes, or None."""
        return None

    def tile_calls(self, tile):
        """The statements (intrinsic calls) of a matched tile."""
        raise NotImplementedError(f"{self.name} has no tensor instructions")

    def unmatched(self, store, what: str) -> str:
        """The message for a statement that reads a target memory but matched nothing."""
        return f"{what}: the statement into {store.buffer.name} uses {self.name}'s memory in a way it cannot do"


def tensor_units(target) -> tuple:
    """((library, unit), ...) of `target`'s libraries that have a tensor unit, in registration order."""
    out = []
    for lib in libraries_for(target):
        unit = lib.tensor_unit(target)
        if unit is not None:
            out.append((lib, unit))
    return tuple(out)


def memory_unit(target, name: str) -> Optional[tuple]:
    """(library, unit) placing caches in the memory called `name` on `target`, or None."""
    for lib, unit in tensor_units(target):
        if any(m.name == name for m in unit.memories):
            return lib, unit
    return None


def resolve_tensorize(target, spec) -> tuple:
    """(library, unit, intrinsic) of `plan.tensorize(..., intrinsic=spec)` on `target`: the first
    unit with tensor instructions that has `spec` (None: the first unit's default one)."""
    with_tiles = [(lib, u) for lib, u in tensor_units(target) if u.tensor_intrinsic(None) is not None]
    if not with_tiles:
        return None
    errors = []
    for lib, unit in with_tiles:
        try:
            return lib, unit, unit.tensor_intrinsic(spec)
        except ValueError as e:
            errors.append((lib, e))
    if len(errors) == 1:
        raise errors[0][1]
    raise ValueError(f"tensorize: no tensor unit of target {target.name} has the intrinsic {spec!r}: "
                     + "; ".join(f"library {lib.name!r}: {e}" for lib, e in errors))
