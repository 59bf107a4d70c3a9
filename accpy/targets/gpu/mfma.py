"""AMD matrix cores (CDNA1 / CDNA2: MI100, MI200): which lane of a 64-lane wavefront holds which
element of a `v_mfma_*` operand, for the instructions behind Accera's AMD MMA shapes.

An instruction `v_mfma_<acc>_<R>x<R>x<K><type>` with `B` blocks multiplies, per block b, an R x K
tile of A by a K x R tile of B into an R x R tile of D. Accera's shape `M<M>xN<N>xK<K>_B<B>` (M = N =
R * B) uses it with the A broadcast (`cbsz`, `abid = q`): instruction q multiplies rows R*q ..
R*q+R-1 of A (M x K: block b of A is rows R*b..) by all of B (K x N: block b of B is columns R*b..),
giving rows R*q.. of D for all N columns. The shape is B instructions (q = 0 .. B-1; one for B1).

Ownership (AMD's matrix instruction calculator is the authority; the tests hold facts read from it):

* A (M x K) and B (K x N): each lane holds `kpl = M * K / 64` consecutive k values of one row of A
  (one column of B): with g = lane // R, r = lane % R, slot s holds row (column) r + R * (g % B)
  at k = (g // B) * kpl + s. Slots are in register order: 32-bit inputs one per VGPR, 16-bit two
  (the lower slot in bits 15:0), 8-bit four (slot 4v+j in bits 8j+7:8j).
* C / D of one instruction (R x N): R * N / 64 slots, one VGPR each: slot v is output block
  b = v // (R*R/64); with w = v % (R*R/64), the element at row 4 * (64/R) * (w // 4) + 4 * (lane
  // R) + w % 4, column R * b + lane % R.

Guarantees: every table covers its tile exactly once (checked at import); arrays are read-only;
`emulate` is a numpy model of the instructions through the maps (each lane's slots scattered to
a shared tile, each lane computing its own D slots, k in order), as native/gpu/accpy_mma.cl.h
emulates them on OpenCL.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mma import FragmentError, bf16_round

WAVE = 64  # lanes of a wavefront
# input type tag -> (instruction suffix, bits, accumulator name of the instruction)
TYPES = {"f32": ("f32", 32, "f32"), "bf16": ("bf16", 16, "f32"), "f16": ("f16", 16, "f32"), "s8": ("i8", 8, "i32")}
_ALIASES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int8": "s8"}
# Accera's AMD shapes (MMAShape names) per input type: (M, N, K, blocks) of one pass
SHAPES = {
    "f32": {"M16xN16xK4_B1": (16, 16, 4, 1), "M32xN32xK2_B1": (32, 32, 2, 1),
            "M64xN64xK1_B2": (64, 64, 1, 2), "M64xN64xK1_B4": (64, 64, 1, 4)},
    "bf16": {"M16xN16xK8_B1": (16, 16, 8, 1), "M32xN32xK4_B1": (32, 32, 4, 1),
             "M64xN64xK2_B2": (64, 64, 2, 2), "M64xN64xK2_B4": (64, 64, 2, 4)},
    "f16": {"M16xN16xK16_B1": (16, 16, 16, 1), "M32xN32xK8_B1": (32, 32, 8, 1),
            "M64xN64xK4_B2": (64, 64, 4, 2), "M64xN64xK4_B4": (64, 64, 4, 4)},
}
SHAPES["s8"] = dict(SHAPES["f16"])  # the i8 instructions have the f16 ones' geometry
SCRATCH_WORDS = 512  # 32-bit words of one wavefront's scratch: the largest M*K + K*N of any shape
WORDS = {"a": 4, "b": 4, "c": 32}  # 32-bit words of a fragment (the largest of any shape)


def tag_of(dtype) -> str:
    """The input type tag ("f32", "bf16", "f16", "s8") named by `dtype` (a tag, a ScalarType name
    or an enum member with one); FragmentError otherwise."""
    key = getattr(dtype, "name", dtype) if not isinstance(dtype, str) else dtype
    key = _ALIASES.get(key, key)
    if key not in TYPES:
        raise FragmentError(f"dtype: expected one of float32, bfloat16, float16, int8 (AMD matrix cores), "
                            f"got {dtype!r}")
    return key


@dataclass(frozen=True)
class Instruction:
    """The MFMA instruction behind an Accera shape: `rows` (R), `k`, `blocks` (B) and its input
    type `tag`. M = N = R * B; `slots(role)` per lane."""

    tag: str
    rows: int
    k: int
    blocks: int

    @property
    def m(self) -> int:
        """Rows of A and of the shape's D (= columns of B and D)."""
        return self.rows * self.blocks

    @property
    def name(self) -> str:
        """AMD's mnemonic, e.g. v_mfma_f32_16x16x1f32."""
        suffix, _, acc = TYPES[self.tag]
        return f"v_mfma_{acc}_{self.rows}x{self.rows}x{self.k}{suffix}"

    @property
    def bits(self) -> int:
        """Width of an input element."""
        return TYPES[self.tag][1]

    def slots(self, role: str) -> int:
        """Elements of operand `role` ("A", "B", "C"/"D": one instruction's R x N) per lane."""
        r = _role(role)
        return self.m * self.k // WAVE if r in "AB" else self.rows * self.m // WAVE

    def register(self, role: str, slot: int) -> tuple:
        """(VGPR, lowest bit) of `slot` of operand `role` in a lane's registers."""
        if _role(role) == "C":
            return slot, 0
        per = 32 // self.bits
        return slot // per, (slot % per) * self.bits


def _role(role: str) -> str:
    r = "C" if role == "D" else role
    if r not in ("A", "B", "C"):
        raise FragmentError(f"role: expected one of 'A', 'B', 'C' (or 'D'), got {role!r}")
    return r


def instruction(shape, dtype) -> Instruction:
    """The instruction of Accera shape `shape` (an MMAShape, its name, or (M, N, K, B)) for inputs
    of `dtype`; FragmentError naming the shapes there are."""
    tag = tag_of(dtype)
    name = getattr(shape, "name", shape)
    table = SHAPES[tag]
    dims = table.get(name) if isinstance(name, str) else (tuple(shape) if tuple(shape) in table.values() else None)
    if dims is None:
        raise FragmentError(f"shape: AMD matrix cores take {', '.join(table)} for {tag} inputs, got {shape!r}")
    m, _, k, blocks = dims
    return Instruction(tag, m // blocks, k, blocks)


# -- the ownership formulas ------------------------------------------------------------------------
def _coord(ins: Instruction, role: str, lane: int, s: int) -> tuple:
    """(row, col) of slot `s` of lane `lane` in operand `role`'s tile (A: M x K, B: K x N, C: R x N)."""
    R, B = ins.rows, ins.blocks
    if role == "C":
        per = R * R // WAVE
        b, w = s // per, s % per
        return 4 * (WAVE // R) * (w // 4) + 4 * (lane // R) + w % 4, R * b + lane % R
    g, r = lane // R, lane % R
    kpl = ins.slots("A")
    line, k = r + R * (g % B), (g // B) * kpl + s
    return (line, k) if role == "A" else (k, line)


def tile(ins: Instruction, role: str) -> tuple:
    """(rows, cols) of operand `role`'s tile: A M x K, B K x N, C/D (one instruction) R x N."""
    return {"A": (ins.m, ins.k), "B": (ins.k, ins.m), "C": (ins.rows, ins.m)}[_role(role)]


def _build(ins: Instruction, role: str) -> np.ndarray:
    table = np.array([[_coord(ins, role, lane, s) for s in range(ins.slots(role))] for lane in range(WAVE)],
                     dtype=np.int64)
    rows, cols = tile(ins, role)
    seen = np.zeros((rows, cols), dtype=np.int64)
    if (table < 0).any() or (table[..., 0] >= rows).any() or (table[..., 1] >= cols).any():
        raise FragmentError(f"{ins.name}: the map of {role} leaves its {rows}x{cols} tile")
    np.add.at(seen, (table[..., 0], table[..., 1]), 1)
    if not (seen == 1).all():
        bad = tuple(np.argwhere(seen != 1)[0])
        raise FragmentError(f"{ins.name}: the map of {role} owns element {bad} {seen[bad]} times (expected once)")
    table.flags.writeable = False
    return table


_TABLES = {(ins, role): _build(ins, role)
           for tag, shapes in SHAPES.items() for name in shapes for ins in [instruction(name, tag)]
           for role in "ABC"}


def owner(role: str, shape, dtype) -> np.ndarray:
    """The ownership map of operand `role` of Accera shape `shape` with `dtype` inputs: a read-only
    int array [64, slots, 2], entry [lane, slot] the (row, col) that slot holds in the row-major
    tile (A M x K, B K x N, C/D the R x N output of one instruction)."""
    return _TABLES[(instruction(shape, dtype), _role(role))]


# -- numpy model -----------------------------------------------------------------------------------
def _values(x, tag: str, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if tag == "f32":
        return arr.astype(np.float32)
    if tag == "f16":
        return arr.astype(np.float16).astype(np.float32)
    if tag == "bf16":
        return bf16_round(arr)
    if arr.dtype.kind not in "iu" or arr.min() < -128 or arr.max() > 127:
        raise FragmentError(f"{what}: expected integers in [-128, 127] for int8 inputs")
    return arr.astype(np.int64)


def emulate(shape, dtype, a, b, c, maps=None) -> np.ndarray:
    """D = A @ B + C of one pass of Accera shape `shape` (a M x K, b K x N, c M x N) as the B
    broadcast instructions compute it: each lane's slots are read from memory through the maps (C
    of instruction q from rows R*q..), scattered into a shared tile by the instruction's own maps,
    each lane sums its own D slots over k in order (float32; int32 wrapping for int8), and D goes
    back where its C came from. `maps`: {"A", "B", "C": table} the loads and stores use instead of
    `owner`'s (a kernel with a wrong layout: a wrong answer)."""
    ins = instruction(shape, dtype)
    tag = ins.tag
    qa, qb = _values(a, tag, "a"), _values(b, tag, "b")
    acc_t = np.int64 if tag == "s8" else np.float32
    d = np.array(c, dtype=acc_t)
    if qa.shape != tile(ins, "A") or qb.shape != tile(ins, "B") or d.shape != (ins.m, ins.m):
        raise FragmentError(f"a, b, c: expected shapes {tile(ins, 'A')}, {tile(ins, 'B')}, {(ins.m, ins.m)}, "
                            f"got {qa.shape}, {qb.shape}, {d.shape}")
    true = {r: owner(r, shape, dtype) for r in "ABC"}
    load = {r: (maps or {}).get(r, true[r]) for r in "ABC"}
    shared_a, shared_b = np.zeros_like(qa), np.zeros_like(qb)
    shared_a[true["A"][..., 0], true["A"][..., 1]] = qa[load["A"][..., 0], load["A"][..., 1]]
    shared_b[true["B"][..., 0], true["B"][..., 1]] = qb[load["B"][..., 0], load["B"][..., 1]]
    rows, cols = true["C"][..., 0], true["C"][..., 1]
    at_rows, at_cols = load["C"][..., 0], load["C"][..., 1]
    out = d.copy()
    for q in range(ins.blocks):
        r0 = ins.rows * q
        acc = d[r0 + at_rows, at_cols].copy()
        for k in range(ins.k):
            acc = (acc + shared_a[r0 + rows, k] * shared_b[k, cols]).astype(acc_t)
        out[r0 + at_rows, at_cols] = acc
    if tag == "s8":
        return ((out + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)
    return out
