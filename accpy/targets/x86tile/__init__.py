"""The x86 tensor library: the tile unit (AMX: 8 tile registers, TDPB[SU][SU]D int8 -> int32,
TDPBF16PS bf16 -> float32) and the AVX-512 VNNI / BF16 dot products, behind the target interface
(accpy/targets/library.py). On a CPU without them, a target with the extra `("x86tile", "emulate")`
uses the functional model (native/x86tile/accpy_x86tile.h), bit for bit the same.

    acc.Target.HOST                                   AMX where the CPU has it
    acc.Target.HOST(extra=(("x86tile", "emulate"),))   the functional model, on any x86-64
"""
from __future__ import annotations

from ..library import LibraryPass, NativeUnit, TargetLibrary
from ..tensor_unit import OperandLayout, TensorUnit
from . import machine, tiles  # noqa: F401  (the numpy semantics)
from .intrinsics import EMULATED, FEATURES, HARDWARE, INTRINSICS, SPACE, TILE_MEMORY  # noqa: F401

EMULATE = ("x86tile", "emulate")


def emulated(target) -> bool:
    """Whether `target` asks for the functional model instead of the instructions."""
    return target.get(EMULATE[0]) == EMULATE[1]


def emulating(target):
    """A copy of `target` whose tile-unit code runs on the functional model."""
    return target(extra=tuple(kv for kv in target.extra if kv[0] != EMULATE[0]) + (EMULATE,))


def operations(target) -> dict:
    """{short name: Intrinsic} of the form `target` runs: the model's or the instructions'."""
    return EMULATED if emulated(target) else HARDWARE


def available(target, op: str) -> bool:
    """Whether `target` can run the operation `op` (e.g. "dpbusd", "vpdpbusd"): always on the model."""
    if emulated(target):
        return target.is_cpu
    return target.is_cpu and all(target.has(f) for f in FEATURES[op])


class X86TileUnit(TensorUnit):
    """The tile unit's registers as a memory (AMX_TILE), its loads and stores, the tile dot products."""

    name = "the x86 tile unit"
    memories = (TILE_MEMORY,)

    def __init__(self, emulate: bool):
        self.emulate = emulate

    @property
    def ops(self) -> dict:
        """The tile intrinsics by name: the functional model's or the hardware's."""
        return EMULATED if self.emulate else HARDWARE

    def tensor_intrinsic(self, spec):
        return tiles.tensor_intrinsic(spec)

    def check_tensorize(self, store, what: str) -> None:
        tiles.matmul_operands(store, what)

    def operand_layout(self, role, dtype):
        # B tiles hold groups of 4 bytes of consecutive k (as the AVX-512 dot products read them), in
        # blocks of a whole tile: 16 group rows (64 int8 / 32 bf16 k) of 16 columns, loaded straight
        # from the cache
        group = tiles.b_group_bytes(dtype) if role == "B" else None
        return OperandLayout(group, tiles.b_tile_block(dtype)) if group is not None else None

    def place(self, buffers, describe, roles=None) -> dict:
        return tiles.place(buffers, describe, roles)

    def copy_in(self, layout, source, origin, extents, what: str, locality=None):
        return tiles.copy_in(self.ops, layout, source, origin, extents, what, locality)

    def copy_out(self, layout, dest, origin, extents, what: str):
        return tiles.copy_out(self.ops, layout, dest, origin, extents, what)

    def match_tile(self, loops, store, roles, layouts, what: str):
        return tiles.match_tile(loops, store, roles, layouts, what)

    def tile_calls(self, tile):
        return tiles.tile_calls(self.ops, tile)

    def match_epilogue(self, loops, store, roles, layouts, what: str):
        return tiles.match_epilogue(self.ops, loops, store, roles, layouts, what)

    def unmatched(self, store, what: str) -> str:
        return (f"{what}: the statement into {store.buffer.name} reads a tile register in a way the tile unit "
                f"cannot (only C[i, j] += A[i, k] * B[k, j] and the copies of the caches)")


class X86TileLibrary(TargetLibrary):
    """The x86 tile unit: its instructions (`emulate=False`) or its functional model."""

    memories = (TILE_MEMORY,)

    def __init__(self, emulate: bool):
        self.emulate = emulate
        self.ops = EMULATED if emulate else HARDWARE
        self.intrinsics = tuple(self.ops.values())
        self.name = "x86 tile (model)" if emulate else "x86 tile"
        self.unit = X86TileUnit(emulate)

    def applies_to(self, target) -> bool:
        if not target.is_cpu:
            return False
        return emulated(target) if self.emulate else (not emulated(target) and target.has("amx_tile"))

    def tensor_unit(self, target):
        return self.unit

    def lowering_passes(self) -> tuple:
        return (LibraryPass("x86 tile call bracket", "configs",
                            lambda body, request: tiles.bracket(self.ops, body, request)),
                LibraryPass("x86 tile numbers", "simplify (after unroll)",
                            lambda body, request: tiles.check_tile_numbers(self.ops, body)))

    def native_units(self) -> tuple:
        return (NativeUnit(None, ("x86tile/accpy_x86tile_ops.h", "x86tile/accpy_x86tile.h"), include="x86tile"),)

    def schedule_recipes(self, kernel, target, threads: int) -> list:
        """int8 / bf16 matmul-like contractions on the tile unit (auto.py)."""
        from .auto import tile_recipes

        return tile_recipes(kernel, target, threads)

    def check_cache_location(self, target, location) -> None:
        if location is SPACE and not (emulated(target) or target.has("amx_tile")):
            raise ValueError(f"cache: target {target.name} has no {location.name} memory (no AMX; "
                             f"acc.Target.HOST(extra=(('x86tile', 'emulate'),)) runs the functional model)")


# registered by registry.py
X86TILE = X86TileLibrary(emulate=False)
X86TILE_MODEL = X86TileLibrary(emulate=True)
