"""The Gemmini target library: its memories, intrinsics (reference body + C template) and how
caches and tensorized tiles map onto them (layouts, transfers, the 16x16x16 matmul tile).

Layout of a cache in the scratchpad (int8) or accumulator (int32): its last dimension is the
column dimension (16 elements per row); every other dimension is flattened, row-major, into
rows. Element (x_0, ..., x_n-1) sits at row
    base + (x_n-1 // 16) * P + sum_d<n-1 x_d * S_d,   column x_n-1 % 16,
with S_n-2 = 1, S_d = S_d+1 * E_d+1 and P = E_0 * ... * E_n-2 (E: the block's extents). A
16x16 tile whose rows move with one index and whose columns start at a multiple of 16 is then
rows `row, row + stride, ...`: what mvin / preload / compute / mvout address. The C templates
call native/gemmini/gemmini.h (Gemmini's names and argument orders); the reference bodies are
the numpy functions of machine.py, run on `RefMachine` (tests compare each
template, run on the functional model, against its body).
"""
from __future__ import annotations

from ..library import LibraryPass, NativeUnit, TargetLibrary
from ..tensor_unit import TensorUnit
from . import layout, machine, runtime, tiles
from .reuse import reuse_weights
from .objective import GemminiCycles  # noqa: F401  (registers the tuning objective "gemmini_cycles")
from . import machine as gm  # noqa: F401  (the names tests and samples use)
from .intrinsics import (ACCUMULATOR, BEGIN_CALL, COMPUTE_ACCUMULATED, COMPUTE_PRELOADED, CONFIG_EX,  # noqa: F401
                         CONFIG_LD, CONFIG_ST, DIM, END_CALL, FENCE, HEADER, INTRINSICS, MATMUL, MEMORIES, MVIN,
                         MVOUT, PRELOAD, SCRATCHPAD, SPACES, RefMachine, TensorIntrinsic, call, tensor_intrinsic)
from .tiles import matmul_operands, wrap_function


class GemminiUnit(TensorUnit):
    """Gemmini's tensor unit: the scratchpad and accumulator, mvin / mvout, the matmul tile."""

    name = "Gemmini"
    memories = MEMORIES

    def tensor_intrinsic(self, spec):
        return tensor_intrinsic(spec)

    def check_tensorize(self, store, what: str) -> None:
        matmul_operands(store, what)

    def place(self, buffers, describe, roles=None) -> dict:
        return layout.place(buffers, describe)

    def copy_in(self, lay, source, origin, extents, what: str, locality=None):
        return layout.copy_in(lay, source, origin, extents, what)  # (mvin has no locality hint)

    def copy_out(self, lay, dest, origin, extents, what: str):
        return layout.copy_out(lay, dest, origin, extents, what)

    def match_tile(self, loops, store, roles, layouts, what: str):
        return tiles.match_tile(loops, store, roles, layouts, what)

    def match_prologue(self, loops, store, roles, layouts, what: str):
        return tiles.match_prologue(loops, store, roles, layouts, what)

    def match_epilogue(self, loops, store, roles, layouts, what: str):
        return tiles.match_epilogue(loops, store, roles, layouts, what)

    def tile_calls(self, tile):
        return tiles.tile_calls(tile)

    def unmatched(self, store, what: str) -> str:
        return (f"{what}: the statement into {store.buffer.name} reads the accumulator in a way "
                f"Gemmini cannot do (expected C[i, j] = int8(round(float32(Acc[i, j]) * scale)), "
                f"optionally with max(.., 0), or a raw int32 copy)")


UNIT = GemminiUnit()


class GemminiLibrary(TargetLibrary):
    """Gemmini behind the target interface: its memories, intrinsics, tensor unit and model."""

    name = "gemmini"
    memories = MEMORIES
    intrinsics = INTRINSICS

    def applies_to(self, target) -> bool:
        return getattr(target, "family", None) == "Gemmini"

    def tensor_unit(self, target):
        return UNIT

    def lowering_passes(self) -> tuple:
        # the weights of consecutive tiles preloaded once where they can be (reuse.py); one call of
        # the accelerator per kernel: begin, the work, fence, end
        return (LibraryPass("gemmini weight reuse", "tensorize", reuse_weights),
                LibraryPass("gemmini call bracket", "configs", lambda body, request: wrap_function(body)))

    def schedule_recipes(self, kernel, target, threads: int) -> list:
        """int8 matmuls on the scratchpad, accumulator and array (auto.py)."""
        from .auto import gemmini_recipes

        return gemmini_recipes(kernel, target, threads)

    def check_cache_location(self, target, location) -> None:
        if location in SPACES and not target.has_memory(location):
            raise ValueError(f"cache: target {target.name} has no {location.name} memory")

    def native_units(self) -> tuple:
        return (NativeUnit("gemmini/gemmini_model.c", ("gemmini/gemmini.h", "accpy_runtime.h"), "gemmini",
                           ("-DACCPY_SPLIT_UNIT",), "compiling the Gemmini model"),)

    def package_exports(self, pkg: str) -> str:
        return runtime.EXPORTS.format(pkg=pkg)

    def package_symbols(self, pkg: str) -> dict:
        return {f"{pkg}_{s}": f"Gemmini model function ({pkg}_{s})" for s in runtime.FUNCTIONS}

    def runtime_methods(self) -> dict:
        return {s: getattr(runtime, s) for s in runtime.FUNCTIONS}


GEMMINI = GemminiLibrary()  # registered by registry.py
