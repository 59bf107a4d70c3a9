"""A handle on accpy's functional model of Gemmini, for tests: `GemminiModel` builds
native/gemmini/gemmini_model.c into a shared library (cached in the accpy build cache) and drives
it directly: each Gemmini intrinsic is a method, DRAM operands are numpy arrays (their extent is
checked against the rows the instruction moves, so the model never touches memory outside them),
and any error of the model raises `GemminiError` with the model's message. The semantics, limits
and the fixed cycle model are documented at the top of native/gemmini/gemmini_model.c; the numpy
references it is tested against are accpy/targets/gemmini/machine.py.

Every `GemminiModel` of a process drives the same machine (the library is loaded once).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import CompileError
from ...paths import cache_dir, native_file
from ..toolchain import HOST_TOOLCHAIN, compiler_identity
from .machine import (ACC_BIT, ACC_SCALE_IDENTITY, DIM, FULL_BIT, GARBAGE_ADDR, MAX_BYTES, MVIN_SCALE_IDENTITY,
                      NO_ACTIVATION, WEIGHT_STATIONARY)


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


def library_path() -> Path:
    """The model compiled by the host C compiler ($ACCPY_CC, else gcc) as a standalone shared library,
    built once per source, flags and compiler (a model of its own, not a package: no package build)."""
    cc = HOST_TOOLCHAIN.cc
    src, hdr = native_file("gemmini/gemmini_model.c"), native_file("gemmini/gemmini.h")
    h = hashlib.sha256()
    for part in (src.read_text(), hdr.read_text(), " ".join(_BUILD_FLAGS), compiler_identity(cc)):
        h.update(part.encode() + b"\0")
    final = cache_dir() / "gemmini" / h.hexdigest()[:32]
    so = final / "libaccpy_gemmini.so"
    if so.exists():
        return so
    final.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final, prefix=".build-") as tmp:
        out = Path(tmp) / so.name
        cmd = [cc, *_BUILD_FLAGS, "-I", str(hdr.parent), str(src), "-o", str(out), "-lm", "-lpthread"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise CompileError(f"compiling the Gemmini model failed for native/gemmini/gemmini_model.c:\n"
                               f"{p.stderr or p.stdout}\ncommand: {' '.join(cmd)}")
        os.replace(out, so)  # atomic: a build racing this one writes the same library
    return so


def _load():
    global _LOADED
    with _LOCK:
        if _LOADED is None:
            from cffi import FFI

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
