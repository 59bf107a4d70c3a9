"""Gemmini's machine as data: its dimensions (read from native/gemmini/gemmini.h, the one place
they are defined), the fixed cycle model, and numpy references of what the instructions compute.

The functions `acc_scale`, `mvin_scale`, `mvin_scale_acc`, `ref_mvin`, `ref_mvin_layout`,
`ref_mvout`, `ref_compute`, `ref_write_acc` and `ref_matmul` state what the instructions
compute, with numpy only: the tests compare the functional model (native/gemmini/gemmini_model.c)
against them, and they are the reference bodies of the intrinsics for the compiler.
"""
from __future__ import annotations

import re

import numpy as np

from ...paths import native_file


def _header_constants() -> dict:
    text = native_file("gemmini/gemmini.h").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define (\w+) (\d+)\s*$", text, re.M)}


_H = _header_constants()

# ---- parameters (Gemmini's int8 default configuration, as native/gemmini/gemmini.h defines them) --
DIM = _H["DIM"]
BANK_NUM = _H["BANK_NUM"]
BANK_ROWS = _H["BANK_ROWS"]
SPAD_ROWS = BANK_NUM * BANK_ROWS
ACC_ROWS = _H["ACC_ROWS"]
MAX_BYTES = _H["MAX_BYTES"]
MAX_BLOCK_LEN = MAX_BYTES // DIM
MAX_BLOCK_LEN_ACC = MAX_BYTES // (DIM * 4)

GARBAGE_ADDR = 0xFFFFFFFF
ACC_BIT = 1 << 31          # the address is in the accumulator
ACCUMULATE_BIT = 1 << 30   # a write to the accumulator adds instead of overwriting
FULL_BIT = 1 << 29         # an accumulator mvout moves raw int32

OUTPUT_STATIONARY = 0
WEIGHT_STATIONARY = 1
NO_ACTIVATION = 0
RELU = 1
ACC_SCALE_IDENTITY = 1.0
MVIN_SCALE_IDENTITY = 1.0

# ---- the fixed cycle model (see gemmini_model.c) ------------------------------------------
CONFIG_CYCLES = 1          # on each of the load, execute and store units
COMPUTE_CYCLES = DIM       # compute_preloaded / compute_accumulated, any tile size
PRELOAD_CYCLES = DIM       # preload with a B operand (new weights)
PRELOAD_REUSE_CYCLES = 1   # preload with B = GARBAGE_ADDR
BYTES_PER_CYCLE = 16       # load and store units


def transfer_cycles(rows: int, cols: int, element_bytes: int) -> int:
    """Cycles of one mvin or mvout: ceil(rows * cols * element_bytes / 16)."""
    return -(-rows * cols * element_bytes // BYTES_PER_CYCLE)


def acc_addr(row: int, accumulate: bool = False, full: bool = False) -> int:
    """The address of accumulator row `row` (bit 30: accumulate on writes, bit 29: raw int32 mvout)."""
    return ACC_BIT | (ACCUMULATE_BIT if accumulate else 0) | (FULL_BIT if full else 0) | int(row)


# ---- numpy references of the data paths ----------------------------------------------------
def acc_scale(x, scale) -> np.ndarray:
    """ACC_SCALE: float32(x) * float32(scale) in float32, rounded half to even, saturated to int8."""
    y = np.rint(np.asarray(x, dtype=np.int32).astype(np.float32) * np.float32(scale))
    return np.clip(y, -128, 127).astype(np.int8)


def mvin_scale(x, scale) -> np.ndarray:
    """MVIN_SCALE of int8 data: the same float32 arithmetic as acc_scale, saturated to int8."""
    return acc_scale(np.asarray(x, dtype=np.int8), scale)


def mvin_scale_acc(x, scale) -> np.ndarray:
    """MVIN_SCALE_ACC of int32 data: exact x * float32(scale), rounded half to even, saturated to int32."""
    y = np.rint(np.asarray(x, dtype=np.int32).astype(np.float64) * float(np.float32(scale)))
    return np.clip(y, np.iinfo(np.int32).min, np.iinfo(np.int32).max).astype(np.int32)


def relu(x) -> np.ndarray:
    """max(x, 0) in x's own dtype."""
    x = np.asarray(x)
    return np.maximum(x, np.zeros((), x.dtype))


def ref_mvin(src, scale=MVIN_SCALE_IDENTITY, *, accumulator: bool = False, shrunk: bool = False) -> np.ndarray:
    """The values a mvin writes for the DRAM tile `src` (rows x cols, as read from DRAM):
    int8 into the scratchpad, int32 into the accumulator (int8 data when `shrunk`)."""
    src = np.asarray(src)
    if accumulator and not shrunk:
        return mvin_scale_acc(src.astype(np.int32), scale)
    v = mvin_scale(src.astype(np.int8), scale)
    return v.astype(np.int32) if accumulator else v


def ref_mvin_layout(values, block_stride: int = DIM):
    """Where a mvin puts `values` (rows x cols): returns (data, written), one 16-wide row per
    memory row from the destination address on; column c of row r lands in row
    r + (c // DIM) * block_stride, column c % DIM (later blocks win where blocks overlap)."""
    values = np.asarray(values)
    rows, cols = values.shape
    blocks = -(-cols // DIM)
    span = (blocks - 1) * block_stride + rows
    data = np.zeros((span, DIM), values.dtype)
    written = np.zeros((span, DIM), bool)
    for b in range(blocks):
        w = min(DIM, cols - b * DIM)
        data[b * block_stride:b * block_stride + rows, :w] = values[:, b * DIM:b * DIM + w]
        written[b * block_stride:b * block_stride + rows, :w] = True
    return data, written


def ref_mvout(values, *, accumulator: bool = True, raw: bool = False, scale=ACC_SCALE_IDENTITY,
              act: int = NO_ACTIVATION) -> np.ndarray:
    """What a mvout writes to DRAM for the tile `values` read from memory: scratchpad int8 as is;
    accumulator int32 raw (bit 29), or acc_scale then ReLU if `act` is RELU."""
    values = np.asarray(values)
    if not accumulator:
        return values.astype(np.int8)
    if raw:
        return values.astype(np.int32)
    out = acc_scale(values, scale)
    return relu(out) if act == RELU else out


def ref_compute(A, B, D=None, *, c_rows: int = DIM, c_cols: int = DIM) -> np.ndarray:
    """One compute in the weight-stationary dataflow: D + A . B over a 16x16x16 array, A
    (a_rows x a_cols), B (the weights, b_rows x b_cols) and D (bias, or None) zero outside their
    extents, int32 arithmetic; returns the c_rows x c_cols corner written to the accumulator."""
    def pad(x, dtype):
        out = np.zeros((DIM, DIM), dtype)
        if x is not None:
            x = np.asarray(x)
            out[:x.shape[0], :x.shape[1]] = x
        return out

    r = pad(D, np.int32) + pad(A, np.int32) @ pad(B, np.int32)
    return r[:c_rows, :c_cols].astype(np.int32)


def ref_write_acc(old, result, accumulate: bool) -> np.ndarray:
    """An accumulator write: `result`, or old + result with int32 wrap-around (bit 30)."""
    result = np.asarray(result, np.int32)
    if not accumulate:
        return result.copy()
    return (np.asarray(old, np.int32).view(np.uint32) + result.view(np.uint32)).view(np.int32)


def ref_matmul(A, B, *, scale=ACC_SCALE_IDENTITY, act: int = NO_ACTIVATION, bias=None) -> np.ndarray:
    """The whole-matmul oracle: int32 A @ B (+ int32 bias), then acc_scale (float32 scale, round
    half to even, clip to int8), then ReLU if `act` is RELU."""
    acc = np.asarray(A, np.int32) @ np.asarray(B, np.int32)
    if bias is not None:
        acc = (acc.view(np.uint32) + np.broadcast_to(np.asarray(bias, np.int32), acc.shape).view(np.uint32)).view(
            np.int32)
    return ref_mvout(acc, scale=scale, act=act)


def counter_fields() -> list:
    """Field names of accpy_gemmini_counters_t, in order (read from gemmini.h)."""
    text = native_file("gemmini/gemmini.h").read_text()
    struct = re.search(r"typedef struct accpy_gemmini_counters \{(.*?)\} accpy_gemmini_counters_t;", text, re.S).group(1)
    struct = re.sub(r"/\*.*?\*/", "", struct, flags=re.S)
    names = []
    for decl in struct.split(";"):
        decl = decl.strip()
        if decl:
            names += [n.strip() for n in decl.replace("uint64_t", "", 1).split(",")]
    return names
