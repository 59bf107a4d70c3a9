"""Gemmini's memories and intrinsics: each a C template (native/gemmini/gemmini.h's names and
argument orders) and a reference body, the numpy function of machine.py it runs on `RefMachine`
(tests compare each template, run on the functional model, against its body); and the tensor
intrinsic `plan.tensorize` maps a sub-nest onto (the 16x16x16 matmul tile)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.expr import Call, Const
from ...ir.stmt import Evaluate
from ...ir.types import ScalarType
from ..library import Intrinsic, Memory
from ..memory_space import MemorySpace
from . import machine as gm


DIM = gm.DIM
I8, I32, F32, IDX = ScalarType.int8, ScalarType.int32, ScalarType.float32, ScalarType.index
HEADER = '#include "gemmini.h"'

# ---- memories --------------------------------------------------------------------------------
SCRATCHPAD = Memory("scratchpad", gm.SPAD_ROWS, DIM, I8,
                    description="4 banks x 4096 rows x 16 int8 (256 KiB)", owner="Gemmini")
ACCUMULATOR = Memory("accumulator", gm.ACC_ROWS, DIM, I32, description="1024 rows x 16 int32 (64 KiB)",
                     owner="Gemmini")
MEMORIES = (SCRATCHPAD, ACCUMULATOR)
# `acc.MemorySpace.SCRATCHPAD` / `.ACCUMULATOR`: where `plan.cache(location=...)` puts a cache
SPACES = (MemorySpace.define("SCRATCHPAD", SCRATCHPAD.name), MemorySpace.define("ACCUMULATOR", ACCUMULATOR.name))


# ---- the numpy machine the reference bodies run on ---------------------------------------------
class RefMachine:
    """Scratchpad, accumulator, configuration and weights as numpy state (the intrinsics' meaning)."""

    def __init__(self):
        self.spad = np.zeros((gm.SPAD_ROWS, DIM), np.int8)
        self.acc = np.zeros((gm.ACC_ROWS, DIM), np.int32)
        self.ld = {q: dict(stride=0, scale=1.0, shrunk=0, block_stride=DIM) for q in range(3)}
        self.st = dict(stride=0, act=gm.NO_ACTIVATION, scale=1.0)
        self.ex = dict(c_stride=1, a_stride=1)
        self.weights = np.zeros((DIM, DIM), np.int8)
        self.pre = None


def _dram_rows(dram: np.ndarray, rows: int, cols: int, stride: int) -> np.ndarray:
    """The rows x cols DRAM tile at dram's first element, rows `stride` bytes apart (a view)."""
    dram = np.asarray(dram)
    return np.lib.stride_tricks.as_strided(dram, shape=(rows, cols), strides=(stride, dram.itemsize))


def _ref_config_ex(m, c_stride, a_stride):
    m.ex = dict(c_stride=int(c_stride), a_stride=int(a_stride))


def _ref_config_ld(m, stride, scale, shrunk, block_stride, id):
    m.ld[int(id)] = dict(stride=int(stride), scale=float(scale), shrunk=int(shrunk), block_stride=int(block_stride))


def _ref_config_st(m, stride, act, scale):
    m.st = dict(stride=int(stride), act=int(act), scale=float(scale))


def _ref_mvin(queue):
    def body(m, dram, addr, cols, rows):
        q = m.ld[queue]
        to_acc = bool(addr & gm.ACC_BIT)
        if dram is None:
            vals = np.zeros((rows, cols), np.int32 if to_acc else np.int8)
        else:
            vals = gm.ref_mvin(_dram_rows(dram, rows, cols, q["stride"]), q["scale"], accumulator=to_acc,
                               shrunk=bool(q["shrunk"]))
        data, written = gm.ref_mvin_layout(vals, q["block_stride"])
        row = addr & 0x1FFFFFFF if to_acc else addr
        mem = m.acc if to_acc else m.spad
        region = mem[row:row + data.shape[0]]
        if to_acc and addr & gm.ACCUMULATE_BIT:
            data = gm.ref_write_acc(region, data, True)
        region[written] = data[written]
    return body


def _ref_mvout(m, dram, addr, cols, rows):
    to_acc = bool(addr & gm.ACC_BIT)
    row = addr & 0x1FFFFFFF if to_acc else addr
    src = (m.acc if to_acc else m.spad)[row:row + rows, :cols]
    out = _dram_rows(dram, rows, cols, m.st["stride"])
    out[...] = gm.ref_mvout(src, accumulator=to_acc, raw=bool(addr & gm.FULL_BIT), scale=m.st["scale"], act=m.st["act"])


def _ref_preload(m, b, c, b_cols, b_rows, c_cols, c_rows):
    m.pre = (b, c, b_cols, b_rows, c_cols, c_rows)


def _ref_compute(accumulated):
    def body(m, a, bd, a_cols, a_rows, bd_cols, bd_rows):
        b, c, b_cols, b_rows, c_cols, c_rows = m.pre
        m.pre = None
        if not accumulated:
            m.weights = np.zeros((DIM, DIM), np.int8)
            if b != gm.GARBAGE_ADDR:
                m.weights[:b_rows, :b_cols] = m.spad[b:b + b_rows, :b_cols]
        A = m.spad[a:a + m.ex["a_stride"] * a_rows:m.ex["a_stride"], :a_cols]
        r = gm.ref_compute(A, m.weights, c_rows=c_rows, c_cols=c_cols)
        if c != gm.GARBAGE_ADDR:
            row = c & 0x1FFFFFFF
            rows = slice(row, row + m.ex["c_stride"] * c_rows, m.ex["c_stride"])
            m.acc[rows, :c_cols] = gm.ref_write_acc(m.acc[rows, :c_cols], r, bool(c & gm.ACCUMULATE_BIT))
    return body


def _noop(m):
    return None


# ---- intrinsics ---------------------------------------------------------------------------------
def _intr(name, params, template, reference, **kw):
    return Intrinsic(f"gemmini.{name}", tuple(params), template, reference, header=HEADER, **kw)


CONFIG_EX = _intr("config_ex", ("c_stride", "a_stride"),
                  "gemmini_extended3_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, ACC_SCALE_IDENTITY, "
                  "{c_stride}, {a_stride}, 0, 0, 0)", _ref_config_ex, config="ex",
                  doc="weight-stationary dataflow; C rows step c_stride, A rows step a_stride")
CONFIG_LD = _intr("config_ld", ("stride", "scale", "shrunk", "block_stride", "id"),
                  "gemmini_extended4_config_ld({stride}, {scale}, {shrunk}, {block_stride}, {id})", _ref_config_ld,
                  config="ld{id}", doc="load queue id: DRAM row stride (bytes), scale, shrunk, block stride (rows)")
CONFIG_ST = _intr("config_st", ("stride", "act", "scale"), "gemmini_extended_config_st({stride}, {act}, {scale})",
                  _ref_config_st, config="st", doc="mvout: DRAM row stride (bytes), activation, output scale")
MVIN = tuple(_intr(n, ("dram", "addr", "cols", "rows"), f"gemmini_extended_{n}({{dram}}, {{addr}}, {{cols}}, {{rows}})",
                   _ref_mvin(q), pointer_params=("dram",), read_only=("dram",), uses_config=(f"ld{q}",))
             for q, n in enumerate(("mvin", "mvin2", "mvin3")))
MVOUT = _intr("mvout", ("dram", "addr", "cols", "rows"), "gemmini_extended_mvout({dram}, {addr}, {cols}, {rows})",
              _ref_mvout, pointer_params=("dram",), uses_config=("st",))
PRELOAD = _intr("preload", ("b", "c", "b_cols", "b_rows", "c_cols", "c_rows"),
                "gemmini_extended_preload({b}, {c}, {b_cols}, {b_rows}, {c_cols}, {c_rows})", _ref_preload)
COMPUTE_PRELOADED = _intr("compute_preloaded", ("a", "bd", "a_cols", "a_rows", "bd_cols", "bd_rows"),
                          "gemmini_extended_compute_preloaded({a}, {bd}, {a_cols}, {a_rows}, {bd_cols}, {bd_rows})",
                          _ref_compute(False), uses_config=("ex",))
COMPUTE_ACCUMULATED = _intr("compute_accumulated", ("a", "bd", "a_cols", "a_rows", "bd_cols", "bd_rows"),
                            "gemmini_extended_compute_accumulated({a}, {bd}, {a_cols}, {a_rows}, {bd_cols}, "
                            "{bd_rows})", _ref_compute(True), uses_config=("ex",))
FENCE = _intr("fence", (), "gemmini_fence()", _noop)
BEGIN_CALL = _intr("begin_call", (), "accpy_gemmini_begin_call()", _noop,
                   doc="a kernel invocation starts: the model forgets configuration and weights")
END_CALL = _intr("end_call", (), "accpy_gemmini_end_call()", _noop)

INTRINSICS = (CONFIG_EX, CONFIG_LD, CONFIG_ST) + MVIN + (MVOUT, PRELOAD, COMPUTE_PRELOADED, COMPUTE_ACCUMULATED,
                                                        FENCE, BEGIN_CALL, END_CALL)


@dataclass(frozen=True)
class TensorIntrinsic:
    """What `Plan.tensorize` maps a sub-nest onto: C[i, j] += int32(A[i, k]) * int32(B[k, j]) over
    tiles of at most shape (i, j, k), A and B in `input_memory`, C in `output_memory`; emitted as
    preload + compute (`reference`: ref_matmul's int32 product)."""

    name: str
    shape: tuple
    input_type: ScalarType
    accumulator_type: ScalarType
    input_memory: Memory
    output_memory: Memory

    def reference(self, A, B, C):
        """The numpy result of the intrinsic on blocks A, B and accumulator block C."""
        return gm.ref_write_acc(C, gm.ref_compute(A, B, c_rows=A.shape[0], c_cols=B.shape[1]), True)


MATMUL = TensorIntrinsic("gemmini.matmul", (DIM, DIM, DIM), I8, I32, SCRATCHPAD, ACCUMULATOR)
TENSOR_INTRINSICS = {"matmul": MATMUL, MATMUL.name: MATMUL}



def call(intr: Intrinsic, *args) -> Evaluate:
    """A statement calling intrinsic `intr` (int arguments become constants)."""
    return Evaluate(Call(intr.name, tuple(a if not isinstance(a, int) else Const(a) for a in args), IDX))


def tensor_intrinsic(spec):
    """`Plan.tensorize`'s intrinsic argument: None (the matmul), its name, or MATMUL."""
    if spec is None or spec == MATMUL:  # (==: a plan unpickled holds a copy)
        return MATMUL
    if isinstance(spec, str) and spec.lower() in TENSOR_INTRINSICS:
        return TENSOR_INTRINSICS[spec.lower()]
    raise ValueError(f"tensorize: Gemmini has no intrinsic {spec!r}; it has {MATMUL.name!r} "
                     f"(the {DIM}x{DIM}x{DIM} int8 matmul with int32 accumulation)")
