"""The x86 tensor library: the tile unit (AMX: 8 tile registers, TDPB[SU][SU]D int8 -> int32,
TDPBF16PS bf16 -> float32) and the AVX-512 VNNI / BF16 dot products, behind the target interface
(accpy/targets/library.py). On a CPU without them, a target with the extra `("x86tile", "emulate")`
uses the functional model (native/x86tile/accpy_x86tile.h), bit for bit the same.

    acc.Target.HOST                                   AMX where the CPU has it
    acc.Target.HOST(extra=(("x86tile", "emulate"),))   the functional model, on any x86-64
"""
from __future__ import annotations

from ..library import NativeUnit, TargetLibrary, register_library
from . import machine  # noqa: F401  (the numpy semantics)
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


class X86TileLibrary(TargetLibrary):
    """The x86 tile unit and VNNI / BF16 dot products (the instructions, or their model)."""

    name = "x86 tile"
    memories = (TILE_MEMORY,)
    intrinsics = INTRINSICS

    def applies_to(self, target) -> bool:
        return target.is_cpu and (emulated(target) or target.has("amx_tile") or target.has("avx512_vnni")
                                  or target.has("avx512_bf16"))

    def native_units(self) -> tuple:
        return (NativeUnit(None, include="x86tile"),)

    def check_cache_location(self, target, location) -> None:
        if location is SPACE and not (emulated(target) or target.has("amx_tile")):
            raise ValueError(f"cache: target {target.name} has no {location.name} memory (no AMX; "
                             f"acc.Target.HOST(extra=(('x86tile', 'emulate'),)) runs the functional model)")


X86TILE = register_library(X86TileLibrary())
