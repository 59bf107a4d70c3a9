"""What a loaded package that links the Gemmini model gains: its counters (one machine per loaded
library), read through ctypes from the `<package>_gemmini_*` functions the package exports."""
from __future__ import annotations

import ctypes

from . import machine as gm

EXPORTS = """/* The Gemmini model linked into this package: its counters (see native/gemmini/gemmini_model.c). */
void {pkg}_gemmini_counters(accpy_gemmini_counters_t* out) {{ accpy_gemmini_read_counters(out); }}
void {pkg}_gemmini_reset_counters(void) {{ accpy_gemmini_reset_counters(); }}
void {pkg}_gemmini_reset(void) {{ accpy_gemmini_reset(); }}
"""
FUNCTIONS = ("gemmini_counters", "gemmini_reset_counters", "gemmini_reset")
_KINDS = ("config_ex", "config_ld", "config_st", "mvin", "mvout", "preload", "compute_preloaded",
          "compute_accumulated", "fence", "flush")


def _lib(pkg):
    lib = pkg.__dict__.get("_gemmini_lib")
    if lib is None:
        lib = ctypes.CDLL(pkg._library_path)  # the handle the kernels were loaded from
        if not hasattr(lib, f"{pkg.name}_gemmini_counters"):
            raise AttributeError(f"package {pkg.name!r} does not run on Gemmini (no Gemmini model inside)")
        pkg.__dict__["_gemmini_lib"] = lib
    return lib


def gemmini_counters(pkg) -> dict:
    """The Gemmini model's counters since the last reset: instructions by kind (and their sum,
    `instructions`), bytes_in / bytes_out, macs, unit cycles, cycles, calls and utilization =
    macs / (cycles * 256) (the fixed cycle model of native/gemmini/gemmini_model.c)."""
    names = gm.counter_fields()

    class Counters(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64) for n in names]

    c = Counters()
    getattr(_lib(pkg), f"{pkg.name}_gemmini_counters")(ctypes.byref(c))
    out = {n: int(getattr(c, n)) for n in names}
    out["instructions"] = sum(out[k] for k in _KINDS if k in out)
    out["utilization"] = out["macs"] / (out["cycles"] * gm.DIM * gm.DIM) if out.get("cycles") else 0.0
    return out


def gemmini_reset_counters(pkg) -> None:
    """Zero the Gemmini model's counters."""
    getattr(_lib(pkg), f"{pkg.name}_gemmini_reset_counters")()


def gemmini_reset(pkg) -> None:
    """The Gemmini model back to power-on (memories, configuration, counters, error)."""
    getattr(_lib(pkg), f"{pkg.name}_gemmini_reset")()
