"""Accera's GPU enumerations, by Accera's member names: `GridUnit` (what a bound loop runs on),
`MMAShape` (a tensor-core matmul's tile), `MMASchedulingPolicy` and `MMAFragmentOp` (what a
tensorized matmul does with its fragments), and the MMA_FRAGMENT memory space (`acc.MemorySpace`).

Guarantees: members and names are Accera's (`acc.MMAShape.M16xN16xK16_B1`); an `MMAShape`'s
`m, n, k` are the matmul it performs per pass and `blocks` the number of instructions that share
it (the `_B` suffix); the enums pickle and compare by identity."""
from __future__ import annotations

import enum
import re

import numpy as np

from ..memory_space import MemorySpace

# register matrices of a tensor-core fragment (Accera's _MemorySpace.MMA_FRAGMENT)
MMA_FRAGMENT = MemorySpace.define("MMA_FRAGMENT", "mma_fragment")


class GridUnit(enum.Enum):
    """What a loop bound by `plan.bind` runs on: a block index (BLOCK_X/Y/Z: the grid), a thread
    index within a block (THREAD_X/Y/Z) or a warp index within a block (WARP_X/Y). Accera's
    `target.GridUnit`; X is the fastest-varying dimension (CUDA's threadIdx.x, OpenCL's
    get_local_id(0))."""

    BLOCK_X = "BLOCK_X"
    BLOCK_Y = "BLOCK_Y"
    BLOCK_Z = "BLOCK_Z"
    THREAD_X = "THREAD_X"
    THREAD_Y = "THREAD_Y"
    THREAD_Z = "THREAD_Z"
    WARP_X = "WARP_X"
    WARP_Y = "WARP_Y"

    @property
    def kind(self) -> str:
        """"block", "thread" or "warp"."""
        return self.name.split("_")[0].lower()

    @property
    def axis(self) -> int:
        """The dimension: 0 for X, 1 for Y, 2 for Z."""
        return "XYZ".index(self.name[-1])

    @property
    def is_block(self) -> bool:
        """Whether the unit indexes blocks of the grid."""
        return self.kind == "block"

    @property
    def is_thread(self) -> bool:
        """Whether the unit indexes threads within a block."""
        return self.kind == "thread"

    @property
    def is_warp(self) -> bool:
        """Whether the unit indexes warps within a block."""
        return self.kind == "warp"


_SHAPE = re.compile(r"M(\d+)xN(\d+)xK(\d+)_B(\d+)")


class MMAShape(enum.Enum):
    """A tensor-core matmul tile (Accera's `acc.MMAShape`, in its order): `MmxNnxKk_Bb` multiplies an
    m x k tile of A by a k x n tile of B into an m x n tile of C in one pass, with b instructions
    each computing 1/b of C (e.g. M64xN64xK1_B4: four 16x16x1 instructions, as AMD's MFMA blocks).
    Which shapes a device supports, for which element types: `Target.tensor_core_info`."""

    M64xN64xK1_B4 = "M64xN64xK1_B4"
    M64xN64xK1_B2 = "M64xN64xK1_B2"
    M32xN32xK2_B1 = "M32xN32xK2_B1"
    M16xN16xK4_B1 = "M16xN16xK4_B1"
    M64xN64xK2_B4 = "M64xN64xK2_B4"
    M64xN64xK2_B2 = "M64xN64xK2_B2"
    M32xN32xK4_B1 = "M32xN32xK4_B1"
    M16xN16xK8_B1 = "M16xN16xK8_B1"
    M64xN64xK4_B4 = "M64xN64xK4_B4"
    M64xN64xK4_B2 = "M64xN64xK4_B2"
    M32xN32xK8_B1 = "M32xN32xK8_B1"
    M16xN16xK16_B1 = "M16xN16xK16_B1"
    M32xN8xK16_B1 = "M32xN8xK16_B1"
    M8xN32xK16_B1 = "M8xN32xK16_B1"

    def _dims(self) -> tuple:
        return tuple(int(g) for g in _SHAPE.fullmatch(self.name).groups())

    @property
    def m(self) -> int:
        """Rows of A and C per pass."""
        return self._dims()[0]

    @property
    def n(self) -> int:
        """Columns of B and C per pass."""
        return self._dims()[1]

    @property
    def k(self) -> int:
        """The reduction length per pass (columns of A, rows of B)."""
        return self._dims()[2]

    @property
    def blocks(self) -> int:
        """The number of instructions that compute the tile together (the _B suffix)."""
        return self._dims()[3]

    @property
    def shape(self) -> tuple:
        """(m, n, k)."""
        return self._dims()[:3]


class MMASchedulingPolicy(enum.Enum):
    """The order a tensorized matmul runs its blocks and passes in (Accera's enum). PASS_ORDER: pass
    groups one after another, every block within a group (accumulators of all blocks live, inputs
    of the current group only). BLOCK_ORDER: blocks one after another, every pass of the group for
    each (one block's accumulators live; inputs loaded once per block)."""

    PASS_ORDER = "PASS_ORDER"
    BLOCK_ORDER = "BLOCK_ORDER"


class MMAFragmentOp(enum.Enum):
    """An element-wise operation on a matmul fragment, as `plan.tensorize(prologue_op=...,
    epilogue_op=...)` applies it (Accera's enum; C is the scalar given with it): NONE f(x) = x;
    ReLU f(x) = max(0, x); ReLU_NoConditional f(x) = x * (x > 0) (no divergent branch); SET
    f(x) = C (e.g. C = 0 clears the accumulator); SCALE f(x) = C * x."""

    NONE = "NONE"
    ReLU = "ReLU"
    ReLU_NoConditional = "ReLU_NoConditional"
    SET = "SET"
    SCALE = "SCALE"

    @property
    def needs_scalar(self) -> bool:
        """Whether the operation reads the scalar C (SET and SCALE)."""
        return self in (MMAFragmentOp.SET, MMAFragmentOp.SCALE)

    def apply(self, x, c=None):
        """The operation on a value or numpy array `x` (the reference meaning); `c` is C, required
        by SET and SCALE (ValueError without it)."""
        if self.needs_scalar and c is None:
            raise ValueError(f"MMAFragmentOp.{self.name}: needs the scalar C (f(x) = "
                             f"{'C' if self is MMAFragmentOp.SET else 'C * x'}), got none")
        if self is MMAFragmentOp.NONE:
            return x
        if self is MMAFragmentOp.ReLU:
            return np.maximum(x, 0)
        if self is MMAFragmentOp.ReLU_NoConditional:
            return x * (x > 0)
        if self is MMAFragmentOp.SET:
            return x * 0 + c
        return x * c
