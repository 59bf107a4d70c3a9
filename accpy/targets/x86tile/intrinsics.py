"""The x86 tile unit's memory and intrinsics, each a C template (native/x86tile/accpy_x86tile_ops.h)
and a reference body (machine.py's numpy, run on `RefTiles`; tests/test_x86tile_intrinsics.py runs
every template against its body on random data).

Every operation exists twice: `amx.*` / `vnni.*` emit the instructions themselves; `amx_emu.*` /
`vnni_emu.*` call the functional model, bit for bit the same, on any x86-64 (the target's
`("x86tile", "emulate")` extra selects it). Pointer parameters are byte addresses in the C; in the
reference bodies they are numpy byte buffers starting at that address.
"""
from __future__ import annotations

import numpy as np

from ...ir.types import ScalarType
from ..library import Intrinsic, Memory
from ..memory_space import MemorySpace
from . import machine as mc

HEADER = '#include "accpy_x86tile_ops.h"'

# the tile registers: 8 tiles x 16 rows of 64 bytes (addresses count rows: tile t is rows 16t..16t+15)
TILE_MEMORY = Memory("amx_tile", mc.TILES * mc.ROWS, mc.COLSB, ScalarType.uint8,
                     description="8 tiles x 16 rows x 64 bytes (8 KiB)", owner="the x86 tile unit")
SPACE = MemorySpace.define("AMX_TILE", TILE_MEMORY.name)

_SHAPE_PARAMS = tuple(p for k in range(mc.TILES) for p in (f"r{k}", f"c{k}"))


def _rows(buf: np.ndarray, rows: int, nbytes: int, stride: int) -> np.ndarray:
    """rows x nbytes bytes of `buf`, row r at byte r * stride (a view)."""
    b = np.asarray(buf).view(np.uint8).reshape(-1)
    return np.lib.stride_tricks.as_strided(b, shape=(rows, nbytes), strides=(int(stride), 1))


def _ref_begin(m):
    return 1


def _ref_config(m, *shape):
    m.config([(int(shape[2 * k]), int(shape[2 * k + 1])) for k in range(mc.TILES)])


def _ref_loadd(m, t, base, stride):
    m.t[t] = 0
    m.tile(t)[...] = _rows(base, m.rows[t], m.colsb[t], stride)


def _ref_stored(m, t, base, stride):
    _rows(base, m.rows[t], m.colsb[t], stride)[...] = m.tile(t)


def _ref_zero(m, t):
    m.tile(t)[...] = 0


def _ref_dp(a_signed, b_signed):
    def body(m, d, a, b):
        c = m.tile(d).view(np.int32)
        c[...] = mc.tile_dp_int8(c, m.tile(a), m.tile(b), a_signed, b_signed)
    return body


def _ref_dpbf16ps(m, d, a, b):
    c = m.tile(d).view(np.float32)
    c[...] = mc.tile_dpbf16ps(c, m.tile(a).view(np.uint16), m.tile(b).view(np.uint16))


def _ref_end(m):
    m.__init__()


def _ref_vnni(saturate):
    def body(m, acc, a, b):
        v = np.asarray(acc).view(np.int32)[:16]
        v[...] = mc.vpdpbusd(v, np.asarray(a).view(np.uint8)[:64], np.asarray(b).view(np.int8)[:64], saturate)
    return body


def _ref_vdpbf16ps(m, acc, a, b):
    v = np.asarray(acc).view(np.float32)[:16]
    v[...] = mc.vdpbf16ps(v, np.asarray(a).view(np.uint16)[:32], np.asarray(b).view(np.uint16)[:32])


def _tile_rows(args) -> list:
    """What a tile load or store touches: at most 16 rows of 64 bytes, `stride` bytes apart."""
    return [("base", mc.ROWS, args["stride"], mc.COLSB)]


def _ops(hw: bool) -> dict:
    """The intrinsics of one form: {short name: Intrinsic}."""
    amx = "amx" if hw else "amx_emu"
    vnni = "vnni" if hw else "vnni_emu"
    c = f"accpy_{amx}_"
    v = f"accpy_{vnni}_"

    def intr(prefix, name, params, template, ref, **kw):
        return Intrinsic(f"{prefix}.{name}", params, template, ref, header=HEADER, **kw)

    shape_args = ", ".join("{" + p + "}" for p in _SHAPE_PARAMS)
    out = {
        "begin": intr(amx, "begin", (), c + "begin()", _ref_begin,
                      doc="1 when the tile unit may be used (else the kernel's error says why)"),
        "config": intr(amx, "config", _SHAPE_PARAMS, c + f"config({shape_args})", _ref_config, config="tiles",
                       doc="LDTILECFG, palette 1: tile k is r_k rows of c_k bytes"),
        "loadd": intr(amx, "loadd", ("t", "base", "stride"), c + "loadd({t}, {base}, {stride})", _ref_loadd,
                      pointer_params=("base",), read_only=("base",), uses_config=("tiles",), footprint=_tile_rows),
        # TILELOADDT1: the same load, its lines hinted non-temporal (kept out of L1; the model: a load)
        "loaddt1": intr(amx, "loaddt1", ("t", "base", "stride"), c + "loaddt1({t}, {base}, {stride})", _ref_loadd,
                        pointer_params=("base",), read_only=("base",), uses_config=("tiles",), footprint=_tile_rows),
        "stored": intr(amx, "stored", ("t", "base", "stride"), c + "stored({t}, {base}, {stride})", _ref_stored,
                       pointer_params=("base",), uses_config=("tiles",), footprint=_tile_rows),
        "zero": intr(amx, "zero", ("t",), c + "zero({t})", _ref_zero, uses_config=("tiles",)),
        "end": intr(amx, "end", (), c + "end()", _ref_end, doc="TILERELEASE (and the model's error, if any)"),
        "dpbf16ps": intr(amx, "dpbf16ps", ("d", "a", "b"), c + "dpbf16ps({d}, {a}, {b})", _ref_dpbf16ps,
                         uses_config=("tiles",)),
        "vpdpbusd": intr(vnni, "dpbusd", ("acc", "a", "b"), v + "dpbusd({acc}, {a}, {b})", _ref_vnni(False),
                         pointer_params=("acc", "a", "b"), read_only=("a", "b")),
        "vpdpbusds": intr(vnni, "dpbusds", ("acc", "a", "b"), v + "dpbusds({acc}, {a}, {b})", _ref_vnni(True),
                          pointer_params=("acc", "a", "b"), read_only=("a", "b")),
        "vdpbf16ps": intr(vnni, "dpbf16ps", ("acc", "a", "b"), v + "dpbf16ps({acc}, {a}, {b})", _ref_vdpbf16ps,
                          pointer_params=("acc", "a", "b"), read_only=("a", "b")),
    }
    for sa, sb in ((True, True), (True, False), (False, True), (False, False)):
        name = f"dpb{'s' if sa else 'u'}{'s' if sb else 'u'}d"
        out[name] = intr(amx, name, ("d", "a", "b"), c + name + "({d}, {a}, {b})", _ref_dp(sa, sb),
                         uses_config=("tiles",))
    return out


HARDWARE = _ops(True)
EMULATED = _ops(False)
INTRINSICS = tuple(HARDWARE.values()) + tuple(EMULATED.values())
# the features the instructions of each hardware intrinsic need (the model needs none)
FEATURES = {"vpdpbusd": ("avx512f", "avx512_vnni"), "vpdpbusds": ("avx512f", "avx512_vnni"),
            "vdpbf16ps": ("avx512f", "avx512_bf16"), "dpbf16ps": ("amx_tile", "amx_bf16")}
for _n in HARDWARE:
    FEATURES.setdefault(_n, ("amx_tile", "amx_int8") if _n.startswith("dpb") else ("amx_tile",))
