"""Gemmini from Python: a handle on accpy's functional model, and numpy references of the intrinsics.

`GemminiModel` builds native/gemmini/gemmini_model.c into a shared library (cached in the
accpy build cache) and drives it directly: each Gemmini intrinsic is a method, DRAM operands
are numpy arrays (their extent is checked against the rows the instruction moves, so the model
never touches memory outside them), and any error of the model raises `GemminiError` with the
model's message. The semantics, limits and the fixed cycle model are documented at the top of
native/gemmini/gemmini_model.c.

The functions `acc_scale`, `mvin_scale`, `mvin_scale_acc`, `ref_mvin`, `ref_mvin_layout`,
`ref_mvout`, `ref_compute`, `ref_write_acc` and `ref_matmul` state what the instructions
compute, with numpy only: the tests compare the model against them, and they are the
reference bodies of the intrinsics for the compiler.

Every `GemminiModel` of a process drives the same machine (the library is loaded once).
"""
from __future__ import annotations

import contextlib
import re
import tempfile
import threading
from pathlib import Path
from typing import Optional

import numpy as np

# ---- parameters (Gemmini's int8 default configuration, as in native/gemmini/gemmini.h) ------
DIM = 16
BANK_NUM = 4
BANK_ROWS = 4096
SPAD_ROWS = BANK_NUM * BANK_ROWS
ACC_ROWS = 1024
MAX_BYTES = 64
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


# ---- the native library ------------------------------------------------------------------------
class GemminiError(RuntimeError):
    """The Gemmini model rejected an instruction (the message names it, the operand and what was expected)."""


_LOCK = threading.Lock()
_LOADED = None  # (ffi, lib)
_BUILD_FLAGS = ["-O2", "-fPIC", "-std=gnu11", "-shared"]


def _declarations(header_text: str) -> str:
    """The cdef of the model's exported API, taken from gemmini.h (one source of truth)."""
    struct = re.search(r"typedef struct accpy_gemmini_counters \{.*?\} accpy_gemmini_counters_t;", header_text,
                       re.S).group(0)
    struct = re.sub(r"/\*.*?\*/", "", struct, flags=re.S)
    funcs = re.findall(r"^ACCPY_GEMMINI_API\s+([^;]*;)", header_text, re.M)
    return struct + "\n" + "\n".join(" ".join(f.split()) for f in funcs)


def counter_fields() -> list:
    """Field names of accpy_gemmini_counters_t, in order (read from gemmini.h)."""
    from ..package.paths import native_file

    text = native_file("gemmini/gemmini.h").read_text()
    struct = re.search(r"typedef struct accpy_gemmini_counters \{(.*?)\} accpy_gemmini_counters_t;", text, re.S).group(1)
    struct = re.sub(r"/\*.*?\*/", "", struct, flags=re.S)
    names = []
    for decl in struct.split(";"):
        decl = decl.strip()
        if decl:
            names += [n.strip() for n in decl.replace("uint64_t", "", 1).split(",")]
    return names


def library_path() -> Path:
    """The model compiled as a standalone shared library (built once per source/flags/compiler)."""
    from ..package.compile import CC, _run, cache_key, compiler_identity, copy_atomic, output_lock
    from ..package.paths import cache_dir, native_file

    src, hdr = native_file("gemmini/gemmini_model.c"), native_file("gemmini/gemmini.h")
    key = cache_key(src.read_text(), hdr.read_text(), " ".join(_BUILD_FLAGS), compiler_identity(CC))
    final = cache_dir() / "gemmini" / key
    so = final / "libaccpy_gemmini.so"
    if so.exists():
        return so
    with output_lock(final, "libaccpy_gemmini"):
        if so.exists():
            return so
        with tempfile.TemporaryDirectory(dir=final, prefix=".build-") as tmp:
            out = Path(tmp) / so.name
            _run([CC, *_BUILD_FLAGS, "-I", str(hdr.parent), str(src), "-o", str(out), "-lm", "-lpthread"],
                 "native/gemmini/gemmini_model.c", str(src), "compiling the Gemmini model")
            copy_atomic(out, so)
    return so


def _load():
    global _LOADED
    with _LOCK:
        if _LOADED is None:
            from cffi import FFI

            from ..package.paths import native_file

            ffi = FFI()
            ffi.cdef(_declarations(native_file("gemmini/gemmini.h").read_text()))
            lib = ffi.dlopen(str(library_path()))
            lib.accpy_gemmini_reset()
            _LOADED = (ffi, lib)
        return _LOADED


def _byte_bounds(a: np.ndarray):
    """[low, high) addresses of the bytes of array `a` (numpy's byte_bounds, which moved in numpy 2)."""
    low = high = a.ctypes.data
    if a.size == 0:
        return low, low
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
    return low, high + a.itemsize


def _dram_extent_check(arr: np.ndarray, itemsize: int, rows: int, cols: int, stride: int, what: str) -> None:
    """Rows r < rows at arr's first element + r*stride, `cols` items each, must lie in arr's buffer."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    low, high = _byte_bounds(root)
    start = arr.ctypes.data
    firsts = (start, start + (rows - 1) * stride)
    lo, hi = min(firsts), max(firsts) + cols * itemsize
    if lo < low or hi > high:
        raise ValueError(f"{what}: {rows} rows x {cols} columns with a DRAM stride of {stride} bytes span bytes "
                         f"[{lo - low}, {hi - low}) of an array buffer of {high - low} bytes")


class GemminiModel:
    """A handle on the Gemmini functional model: one method per intrinsic, counters, raw memory access.

    DRAM operands are numpy arrays (int8, or int32 for accumulator mvins that are not shrunk and
    raw int32 mvouts) whose first element is the DRAM address; views work (`A[16:32, 32:48]`,
    with the DRAM stride A.strides[0] configured), as long as a row's columns are contiguous.
    `None` as a mvin source is the NULL address (zeros). Scratchpad/accumulator addresses are
    ints (see `acc_addr`). With `raise_errors` (the default) a model error raises GemminiError
    and is cleared (the failed instruction did nothing); otherwise it stays recorded, and the
    model ignores every instruction until reset() or clear_error().
    """

    def __init__(self, *, raise_errors: bool = True, reset: bool = True):
        self._ffi, self._lib = _load()
        self.raise_errors = raise_errors
        self._fields = [name for name, _ in self._ffi.typeof("accpy_gemmini_counters_t").fields]
        if reset:
            self.reset()

    # -- errors, state ------------------------------------------------------------------------
    def error(self) -> Optional[str]:
        """The model's pending error message, or None."""
        p = self._lib.accpy_gemmini_error()
        return None if p == self._ffi.NULL else self._ffi.string(p).decode()

    def clear_error(self) -> None:
        """Forget the pending error."""
        self._lib.accpy_gemmini_clear_error()

    def _check(self) -> None:
        if self.raise_errors:
            msg = self.error()
            if msg is not None:
                self._lib.accpy_gemmini_clear_error()
                raise GemminiError(msg)

    def reset(self) -> None:
        """Everything back to power-on: memories (zero, never written), configuration, counters, error."""
        self._lib.accpy_gemmini_reset()

    def reset_counters(self) -> None:
        """Zero the cycle, instruction and MAC counters."""
        self._lib.accpy_gemmini_reset_counters()

    def counters(self) -> dict:
        """Instruction counts by kind, bytes_in/out, macs, unit cycles, cycles, calls, and utilization."""
        c = self._ffi.new("accpy_gemmini_counters_t*")
        self._lib.accpy_gemmini_read_counters(c)
        out = {name: int(getattr(c, name)) for name in self._fields}
        out["utilization"] = out["macs"] / (out["cycles"] * DIM * DIM) if out["cycles"] else 0.0
        return out

    @property
    def utilization(self) -> float:
        """MACs done / MACs the array could have done in the counted cycles."""
        return self.counters()["utilization"]

    # -- calls ----------------------------------------------------------------------------------
    def begin_call(self) -> None:
        """Mark the start of a kernel call (state the call must set is reset)."""
        self._lib.accpy_gemmini_begin_call()

    def end_call(self) -> None:
        """Mark the end of a kernel call; raises the model's error if one occurred."""
        self._lib.accpy_gemmini_end_call()
        self._check()

    @contextlib.contextmanager
    def call(self):
        """One kernel invocation: `with model.call(): ...` (see begin_call in gemmini_model.c)."""
        self.begin_call()
        try:
            yield self
        finally:
            self.end_call()

    # -- configuration ----------------------------------------------------------------------------
    def config_ex(self, dataflow: int = WEIGHT_STATIONARY, act: int = NO_ACTIVATION, sys_shift: int = 0,
                  a_stride: int = 1, a_transpose: bool = False, b_transpose: bool = False, *, c_stride: int = 1,
                  sys_acc_scale: float = ACC_SCALE_IDENTITY, set_only_strides: bool = False) -> None:
        """gemmini_extended3_config_ex (gemmini_extended_config_ex with the defaults)."""
        self._lib.accpy_gemmini_config_ex(dataflow, act, sys_shift, sys_acc_scale, c_stride, a_stride,
                                          int(a_transpose), int(b_transpose), int(set_only_strides))
        self._check()

    def config_ld(self, stride: int, scale: float = MVIN_SCALE_IDENTITY, shrunk: bool = False, id: int = 0,
                  block_stride: int = DIM) -> None:
        """gemmini_extended4_config_ld(stride, scale, shrunk, block_mvin_stride, id); stride in bytes."""
        self._lib.accpy_gemmini_config_ld(stride, scale, int(shrunk), block_stride, id)
        self._check()

    def config_st(self, stride: int, act: int = NO_ACTIVATION, scale: float = ACC_SCALE_IDENTITY) -> None:
        """gemmini_extended_config_st(stride, acc_act, acc_scale); stride in bytes."""
        self._lib.accpy_gemmini_config_st(stride, act, scale, 0)
        self._check()

    # -- data movement ------------------------------------------------------------------------------
    def _pointer(self, arr, itemsize: int, rows: int, cols: int, queue: int, limit: int, what: str, write: bool):
        ffi = self._ffi
        if arr is None:
            return ffi.NULL
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{what}: the DRAM operand must be a numpy array or None, not {type(arr).__name__}")
        want = np.int8 if itemsize == 1 else np.int32
        if arr.dtype != want:
            raise TypeError(f"{what}: this transfer moves {np.dtype(want).name} elements; the array is {arr.dtype}")
        if write and not arr.flags.writeable:
            raise ValueError(f"{what}: the destination array is read-only")
        if arr.ndim >= 1 and arr.shape[-1] > 1 and arr.strides[-1] != itemsize:
            raise ValueError(f"{what}: the columns of a DRAM row must be contiguous (last stride {arr.strides[-1]})")
        stride = ffi.new("int64_t*")
        configured = self._lib.accpy_gemmini_dram_stride(queue, stride, ffi.NULL)
        # the model rejects unconfigured queues and bad counts before touching DRAM
        if configured and 1 <= rows <= DIM and 1 <= cols <= limit:
            _dram_extent_check(arr, itemsize, rows, cols, int(stride[0]), what)
        return ffi.cast("void*", arr.ctypes.data)

    def mvin(self, dram, spad_addr: int, cols: int = DIM, rows: int = DIM, *, queue: int = 0) -> None:
        """gemmini_extended_mvin (queue 0), mvin2 (1), mvin3 (2): rows x cols from `dram` (None: zeros)."""
        shrunk = self._ffi.new("int*")
        stride = self._ffi.new("int64_t*")
        self._lib.accpy_gemmini_dram_stride(queue, stride, shrunk)
        to_acc = spad_addr != GARBAGE_ADDR and bool(spad_addr & ACC_BIT) and spad_addr <= 0xFFFFFFFF
        itemsize = 4 if to_acc and not shrunk[0] else 1
        name = ("mvin", "mvin2", "mvin3")[queue] if queue in (0, 1, 2) else "mvin"
        p = self._pointer(dram, itemsize, rows, cols, queue, MAX_BYTES // itemsize, name, False)
        self._lib.accpy_gemmini_mvin(queue, p, spad_addr, cols, rows)
        self._check()

    def mvin2(self, dram, spad_addr: int, cols: int = DIM, rows: int = DIM) -> None:
        """`mvin` on the second load queue."""
        self.mvin(dram, spad_addr, cols, rows, queue=1)

    def mvin3(self, dram, spad_addr: int, cols: int = DIM, rows: int = DIM) -> None:
        """`mvin` on the third load queue."""
        self.mvin(dram, spad_addr, cols, rows, queue=2)

    def mvout(self, dram, spad_addr: int, cols: int = DIM, rows: int = DIM) -> None:
        """gemmini_extended_mvout: rows x cols to `dram` (int8; int32 for a raw accumulator read)."""
        raw = spad_addr != GARBAGE_ADDR and spad_addr <= 0xFFFFFFFF and bool(spad_addr & ACC_BIT) and bool(
            spad_addr & FULL_BIT)
        itemsize = 4 if raw else 1
        if dram is None:
            p = self._ffi.NULL
        else:
            p = self._pointer(dram, itemsize, rows, cols, -1, MAX_BYTES // itemsize, "mvout", True)
        self._lib.accpy_gemmini_mvout(p, spad_addr, cols, rows)
        self._check()

    # -- execute ----------------------------------------------------------------------------------
    def preload(self, bd: int, c: int, bd_cols: int = DIM, bd_rows: int = DIM, c_cols: int = DIM,
                c_rows: int = DIM) -> None:
        """gemmini_extended_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows)."""
        self._lib.accpy_gemmini_preload(bd, c, bd_cols, bd_rows, c_cols, c_rows)
        self._check()

    def preload_zeros(self, c: int) -> None:
        """Preload a zero bias for output address `c`."""
        self.preload(GARBAGE_ADDR, c)

    def compute_preloaded(self, a: int, bd: int = GARBAGE_ADDR, a_cols: int = DIM, a_rows: int = DIM,
                          bd_cols: int = DIM, bd_rows: int = DIM) -> None:
        """gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows) (BD: the bias D)."""
        self._lib.accpy_gemmini_compute(0, a, bd, a_cols, a_rows, bd_cols, bd_rows)
        self._check()

    def compute_accumulated(self, a: int, bd: int = GARBAGE_ADDR, a_cols: int = DIM, a_rows: int = DIM,
                            bd_cols: int = DIM, bd_rows: int = DIM) -> None:
        """gemmini_extended_compute_accumulated: the same with the weights already in the array."""
        self._lib.accpy_gemmini_compute(1, a, bd, a_cols, a_rows, bd_cols, bd_rows)
        self._check()

    def fence(self) -> None:
        """Wait until every issued instruction has completed."""
        self._lib.accpy_gemmini_fence()
        self._check()

    def flush(self, skip: int = 0) -> None:
        """Flush the model's TLB-like state (as the hardware's flush instruction)."""
        self._lib.accpy_gemmini_flush(skip)
        self._check()

    # -- raw memory (tests) ---------------------------------------------------------------------------
    def _rows(self, memory: int, row: int, count: int):
        dtype = np.int32 if memory else np.int8
        data = np.zeros((count, DIM), dtype)
        valid = np.zeros(count, np.uint16)
        rc = self._lib.accpy_gemmini_read_rows(memory, row, count, self._ffi.cast("void*", data.ctypes.data),
                                               self._ffi.cast("uint16_t*", valid.ctypes.data))
        if rc != 0:
            raise IndexError(f"rows {row}..{row + count - 1} are outside the "
                             f"{'accumulator' if memory else 'scratchpad'}")
        written = (valid[:, None] >> np.arange(DIM, dtype=np.uint16)[None, :]) & 1
        return data, written.astype(bool)

    def read_spad(self, row: int, count: int = 1) -> np.ndarray:
        """(count, DIM) int8 values of scratchpad rows from `row`."""
        return self._rows(0, row, count)[0]

    def read_acc(self, row: int, count: int = 1) -> np.ndarray:
        """(count, DIM) int32 values of accumulator rows from `row`."""
        return self._rows(1, row, count)[0]

    def spad_written(self, row: int, count: int = 1) -> np.ndarray:
        """(count, 16) booleans: which scratchpad elements were written (since reset / begin_call)."""
        return self._rows(0, row, count)[1]

    def acc_written(self, row: int, count: int = 1) -> np.ndarray:
        """(count, DIM) booleans: which accumulator elements were written."""
        return self._rows(1, row, count)[1]

    def _write(self, memory: int, row: int, data) -> None:
        data = np.ascontiguousarray(data, np.int32 if memory else np.int8).reshape(-1, DIM)
        rc = self._lib.accpy_gemmini_write_rows(memory, row, data.shape[0], self._ffi.cast("void*", data.ctypes.data))
        if rc != 0:
            raise IndexError(f"rows {row}..{row + data.shape[0] - 1} are outside the "
                             f"{'accumulator' if memory else 'scratchpad'}")

    def write_spad(self, row: int, data) -> None:
        """Store rows of int8 data into the scratchpad from `row`."""
        self._write(0, row, data)

    def write_acc(self, row: int, data) -> None:
        """Store rows of int32 data into the accumulator from `row`."""
        self._write(1, row, data)
