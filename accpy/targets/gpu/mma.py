"""Tensor-core fragments: which lane of a warp holds which element of an `mma.sync` operand.

PTX's `mma.sync.aligned.m16n8k16.row.col` computes D (16 x 8) = A (16 x 16) @ B (16 x 8) + C
(16 x 8) across the 32 lanes of a warp; each lane holds a fixed set of elements ("slots") of each
operand in its registers. This module keeps that ownership as data (from NVIDIA's PTX ISA,
"Matrix Fragments for mma.m16n8k16", with groupID = lane >> 2, threadID_in_group = lane % 4):

* 16-bit inputs (.f16, .bf16): A in 8 slots (4 .f16x2 registers: slots 2r and 2r+1 share
  register r, the lower slot in the low half), B in 4 slots (2 registers);
* 8-bit inputs (.s8, .u8): A in 8 slots (2 .b32 registers of 4 bytes, slot 4r+j in byte j of
  register r), B in 4 slots (1 register);
* accumulators C and D (.f32 for 16-bit inputs, .s32 for 8-bit ones): 4 slots, one register each.

Both dialects of the GPU target read the same maps: native/gpu/accpy_mma.cuh packs the slots into
the registers `mma.sync` reads, native/gpu/accpy_mma.cl.h emulates the warp with 32 work-items
that each hold exactly their slots, so a wrong map gives a wrong answer on either.

Guarantees: the tables are built once and checked at import (every element of every operand tile
is owned by exactly one (lane, slot)); the arrays returned are read-only. `steps` composes
Accera's MMA shapes from m16n8k16 steps; `emulate_step` is a numpy model of one warp's step that
goes through the maps (scatter each lane's slots, compute each lane's owned D elements, gather).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

WARP_SIZE = 32
STEP_M, STEP_N, STEP_K = 16, 8, 16  # the shape of one mma.sync.m16n8k16
ROLES = ("A", "B", "C")  # C also stands for D: the accumulator's input and output share a map
TILE = {"A": (STEP_M, STEP_K), "B": (STEP_K, STEP_N), "C": (STEP_M, STEP_N)}


class FragmentError(ValueError):
    """An unknown operand role, element type or MMA shape, or operands of the wrong shape or range
    (the message names the argument and what is accepted)."""


@dataclass(frozen=True)
class ElementType:
    """An input element type of m16n8k16: its PTX name, its width, the accumulator type and the
    full PTX instruction (row-major A, column-major B, as the hardware reads them)."""

    name: str
    bits: int
    accumulator: str
    instruction: str

    @property
    def is_int(self) -> bool:
        """True for the 8-bit integer inputs (exact int32 accumulation)."""
        return self.accumulator == "s32"


def _instruction(acc: str, t: str) -> str:
    return f"mma.sync.aligned.m16n8k16.row.col.{acc}.{t}.{t}.{acc}"


ELEMENT_TYPES = {t.name: t for t in (
    ElementType("f16", 16, "f32", _instruction("f32", "f16")),
    ElementType("bf16", 16, "f32", _instruction("f32", "bf16")),
    ElementType("s8", 8, "s32", _instruction("s32", "s8")),
    ElementType("u8", 8, "s32", _instruction("s32", "u8")),
)}
_ALIASES = {"float16": "f16", "bfloat16": "bf16", "int8": "s8", "uint8": "u8"}


def element_type(dtype) -> ElementType:
    """The m16n8k16 input type named by `dtype`: a PTX name ("f16", "bf16", "s8", "u8"), a
    ScalarType-style name ("float16", "bfloat16", "int8", "uint8") or an enum member whose value is
    one of those. FragmentError for any other."""
    key = getattr(dtype, "value", dtype)
    key = _ALIASES.get(key, key) if isinstance(key, str) else key
    if key not in ELEMENT_TYPES:
        raise FragmentError(f"dtype: expected one of {sorted(ELEMENT_TYPES)} (or float16, bfloat16, int8, uint8), "
                            f"got {dtype!r}")
    return ELEMENT_TYPES[key]


def _role(role: str) -> str:
    r = "C" if role == "D" else role
    if r not in ROLES:
        raise FragmentError(f"role: expected one of 'A', 'B', 'C' (or 'D'), got {role!r}")
    return r


# -- the ownership formulas (PTX ISA, matrix fragments of mma.m16n8k16) ----------------------------
def _coord(role: str, bits: int, lane: int, i: int) -> tuple:
    """(row, col) in the operand tile of slot `i` of lane `lane`."""
    group, tig = lane >> 2, lane % 4
    if role == "C":
        return group + 8 * (i >> 1), tig * 2 + (i & 1)
    if bits == 16:
        if role == "A":
            return group + 8 * ((i >> 1) & 1), tig * 2 + (i & 1) + 8 * (i >> 2)
        return tig * 2 + (i & 1) + 8 * (i >> 1), group
    if role == "A":
        return group + 8 * (i >> 2), tig * 4 + (i & 3)
    return tig * 4 + i, group


def _slots(role: str) -> int:
    rows, cols = TILE[role]
    return rows * cols // WARP_SIZE


def _build(role: str, bits: int) -> np.ndarray:
    table = np.array([[_coord(role, bits, lane, i) for i in range(_slots(role))] for lane in range(WARP_SIZE)],
                     dtype=np.int64)
    _check_once(table, role, bits)
    table.flags.writeable = False
    return table


def _check_once(table: np.ndarray, role: str, bits: int) -> None:
    """FragmentError unless the (lane, slot) -> (row, col) table covers its tile exactly once."""
    rows, cols = TILE[role]
    seen = np.zeros((rows, cols), dtype=np.int64)
    inside = (table[..., 0] >= 0) & (table[..., 0] < rows) & (table[..., 1] >= 0) & (table[..., 1] < cols)
    if not inside.all():
        raise FragmentError(f"the {bits}-bit map of {role} leaves its {rows}x{cols} tile")
    np.add.at(seen, (table[..., 0], table[..., 1]), 1)
    if not (seen == 1).all():
        bad = np.argwhere(seen != 1)[0]
        raise FragmentError(f"the {bits}-bit map of {role} owns element {tuple(bad)} "
                            f"{seen[tuple(bad)]} times (expected once)")


_TABLES = {(role, bits): _build(role, bits) for role in ROLES for bits in (16, 8)}


def owner(role: str, dtype) -> np.ndarray:
    """The ownership map of operand `role` ("A", "B", "C" or "D") for input type `dtype`, as a
    read-only int array [32, slots, 2]: entry [lane, slot] is the (row, col) that slot holds, in
    the row-major operand tile (A 16x16, B 16x8 given as K x N, C/D 16x8). Slots are in register
    order, low to high."""
    return _TABLES[(_role(role), element_type(dtype).bits)]


def slots(role: str) -> int:
    """How many elements of operand `role` each lane holds (A 8, B 4, C/D 4 for every type)."""
    return _slots(_role(role))


def holder(role: str, dtype) -> np.ndarray:
    """The inverse of `owner`: an int array [rows, cols, 2] giving the (lane, slot) that holds each
    element of the operand tile."""
    table = owner(role, dtype)
    rows, cols = TILE[_role(role)]
    out = np.empty((rows, cols, 2), dtype=np.int64)
    lanes, slot = np.meshgrid(np.arange(WARP_SIZE), np.arange(table.shape[1]), indexing="ij")
    out[table[..., 0], table[..., 1], 0] = lanes
    out[table[..., 0], table[..., 1], 1] = slot
    return out


# -- Accera's MMA shapes as m16n8k16 steps ----------------------------------------------------------
class Step(NamedTuple):
    """One m16n8k16 step of a larger MMA shape: the offsets of its 16x8 D tile and of its 16-deep
    slice of K, and how many of its 16 rows are real (the rest of A's rows are zeros and the
    matching D rows are discarded)."""

    m0: int
    n0: int
    k0: int
    rows_valid: int


# (M, N, K) of Accera's tensor-core shapes that m16n8k16 composes. M8xN32xK16_B1 runs 4 steps along
# N on an A tile whose rows 8..15 are zeros (only rows 0..7 of each D tile are kept).
SHAPES = {"M16xN16xK16_B1": (16, 16, 16), "M32xN8xK16_B1": (32, 8, 16), "M8xN32xK16_B1": (8, 32, 16)}


def shape_of(shape) -> tuple:
    """(M, N, K) of an Accera MMA shape given by name ("M16xN16xK16_B1"), by an enum member with
    that name, or as the (M, N, K) tuple itself. FragmentError for a shape m16n8k16 does not compose."""
    if isinstance(shape, tuple) and shape in SHAPES.values():
        return shape
    name = getattr(shape, "name", shape)
    if name not in SHAPES:
        raise FragmentError(f"shape: expected one of {sorted(SHAPES)} or their (M, N, K) tuples, got {shape!r}")
    return SHAPES[name]


def steps(shape, passes: int = 1) -> tuple:
    """The m16n8k16 steps of one block of `shape` (Accera's MMAShape), in pass order: for each of
    `passes` consecutive K slices of 16 (Accera's num_total_passes), the D tiles along M, then
    along N. Each step is a `Step(m0, n0, k0, rows_valid)`."""
    m, n, k = shape_of(shape)
    if not isinstance(passes, int) or passes < 1:
        raise FragmentError(f"passes: expected an int >= 1, got {passes!r}")
    rows = min(m, STEP_M)
    return tuple(Step(m0, n0, p * k, rows) for p in range(passes)
                 for m0 in range(0, m, STEP_M) for n0 in range(0, n, STEP_N))


# -- numpy model of one warp's step ------------------------------------------------------------------
def bf16_round(x) -> np.ndarray:
    """float32 values rounded to bfloat16 (round to nearest, ties to even), as float32. Finite
    inputs only."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def bf16_bits(x) -> np.ndarray:
    """The bfloat16 encodings (uint16: the upper half of the float32) of `bf16_round(x)`."""
    return (bf16_round(x).view(np.uint32) >> 16).astype(np.uint16)


def _quantize(x, t: ElementType, what: str) -> np.ndarray:
    """`x` as the values type `t` holds: float32 for the 16-bit floats, int64 for the integers."""
    if t.name == "f16":
        return np.asarray(x).astype(np.float16).astype(np.float32)
    if t.name == "bf16":
        return bf16_round(x)
    arr = np.asarray(x)
    lo, hi = (-128, 127) if t.name == "s8" else (0, 255)
    if arr.dtype.kind not in "iu" or arr.min() < lo or arr.max() > hi:
        raise FragmentError(f"{what}: expected integers in [{lo}, {hi}] for {t.name}")
    return arr.astype(np.int64)


def _check_tile(x, role: str, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.shape != TILE[role]:
        raise FragmentError(f"{what}: expected a {TILE[role][0]}x{TILE[role][1]} tile, got shape {arr.shape}")
    return arr


def emulate_step(a, b, c, dtype) -> np.ndarray:
    """D = A @ B + C of one m16n8k16 step, computed as the emulated warp does: each lane takes its
    slots of A, B, C through the ownership maps, scatters its A and B slots into a shared tile,
    then computes each of its D slots as C + sum over k = 0..15 in order (float32 for 16-bit
    floats, whose products are exact; int32 wrapping for 8-bit integers); D is gathered back
    through the map. `a` is 16x16, `b` 16x8 (K x N), `c` 16x8; the result is float32 or int32."""
    t = element_type(dtype)
    qa = _quantize(_check_tile(a, "A", "a"), t, "a")
    qb = _quantize(_check_tile(b, "B", "b"), t, "b")
    acc_type = np.int64 if t.is_int else np.float32
    qc = _check_tile(c, "C", "c").astype(acc_type)
    oa, ob, oc = owner("A", t.name), owner("B", t.name), owner("C", t.name)
    frag_a, frag_b, frag_c = qa[oa[..., 0], oa[..., 1]], qb[ob[..., 0], ob[..., 1]], qc[oc[..., 0], oc[..., 1]]
    shared_a, shared_b = np.zeros_like(qa), np.zeros_like(qb)
    shared_a[oa[..., 0], oa[..., 1]] = frag_a
    shared_b[ob[..., 0], ob[..., 1]] = frag_b
    acc = frag_c.copy()
    rows, cols = oc[..., 0], oc[..., 1]
    for k in range(STEP_K):
        acc = (acc + shared_a[rows, k] * shared_b[k, cols]).astype(acc_type)
    d = np.empty(TILE["C"], dtype=np.int32 if t.is_int else np.float32)
    d[rows, cols] = acc.astype(np.int32) if t.is_int else acc
    return d


def emulate_shape(shape, a, b, c, dtype, passes: int = 1) -> np.ndarray:
    """D = A @ B + C of one block of an Accera MMA shape (`a` M x K*passes, `b` K*passes x N, `c`
    M x N), as the sequence of `steps(shape, passes)` through `emulate_step`; rows of A past a
    step's `rows_valid` are zeros."""
    m, n, k = shape_of(shape)
    a, b = np.asarray(a), np.asarray(b)
    d = np.array(c, dtype=np.int32 if element_type(dtype).is_int else np.float32)
    if a.shape != (m, k * passes) or b.shape != (k * passes, n) or d.shape != (m, n):
        raise FragmentError(f"a, b, c: expected shapes {(m, k * passes)}, {(k * passes, n)}, {(m, n)}, "
                            f"got {a.shape}, {b.shape}, {d.shape}")
    for s in steps(shape, passes):
        ta = np.zeros(TILE["A"], dtype=a.dtype)
        ta[:s.rows_valid] = a[s.m0:s.m0 + s.rows_valid, s.k0:s.k0 + STEP_K]
        tc = np.zeros(TILE["C"], dtype=d.dtype)
        tc[:s.rows_valid] = d[s.m0:s.m0 + s.rows_valid, s.n0:s.n0 + STEP_N]
        out = emulate_step(ta, b[s.k0:s.k0 + STEP_K, s.n0:s.n0 + STEP_N], tc, dtype)
        d[s.m0:s.m0 + s.rows_valid, s.n0:s.n0 + STEP_N] = out[:s.rows_valid]
    return d
