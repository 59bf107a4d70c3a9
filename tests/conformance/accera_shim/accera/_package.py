"""accera.Package: accpy's Package under Accera's spelling of its build options.

Accera's `Package.Format` is a set of flags where MLIR and MLIR_VERBOSE only add IR dumps to a
HAT format (MLIR_DYNAMIC = HAT_DYNAMIC plus dumps): the shim keeps the HAT part, since accpy
writes C, not MLIR (tests that read those dumps are out of scope). `_quiet` (Accera's compiler
verbosity) has no accpy meaning. Accera builds no Python module, so none is built here.

A package with GPU functions (Accera builds their source only: HAT_SOURCE) is also built as a
library in DEBUG mode, and each of its functions is then run once on random inputs on the OpenCL
device (PoCL here): DEBUG mode compares every written array with the unscheduled nest's result
and raises on a difference, so a GPU program passes only if its kernels compute what its nest
says. `ACCPY_CONFORMANCE_RUN_GPU=0` turns this off (build only, as Accera does).
"""
from __future__ import annotations

import enum
import os
import tomllib
from pathlib import Path

import numpy as np

# PoCL 3.1 runs a work-group's tensor-core emulation wrongly on several threads at once (as
# tests/targets/gpu/conftest.py notes): one thread, set before the first OpenCL call
os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", "1")

import accpy  # noqa: E402

from ._translate import NotInAccpyError


class Format(enum.Flag):
    """Accera's Package.Format flags (names and combinations as Accera defines them)."""

    DYNAMIC_LIBRARY = enum.auto()
    STATIC_LIBRARY = enum.auto()
    HAT_PACKAGE = enum.auto()
    MLIR = enum.auto()
    MLIR_VERBOSE = enum.auto()
    SOURCE = enum.auto()
    DEFAULT = enum.auto()
    HAT_DYNAMIC = HAT_PACKAGE | DYNAMIC_LIBRARY
    HAT_STATIC = HAT_PACKAGE | STATIC_LIBRARY
    HAT_SOURCE = HAT_PACKAGE | SOURCE
    MLIR_DYNAMIC = HAT_DYNAMIC | MLIR
    MLIR_STATIC = HAT_STATIC | MLIR
    MLIR_SOURCE = HAT_SOURCE | MLIR


def accpy_format(fmt):
    """accpy's Format for Accera's `fmt` (an accpy Format passes unchanged)."""
    if isinstance(fmt, accpy.Format):
        return fmt
    if not isinstance(fmt, Format):
        return fmt  # accpy's build reports the bad value
    if fmt & Format.DEFAULT:
        return accpy.Format.DEFAULT
    out = None
    for flag, mapped in ((Format.DYNAMIC_LIBRARY, accpy.Format.HAT_DYNAMIC),
                         (Format.STATIC_LIBRARY, accpy.Format.HAT_STATIC),
                         (Format.SOURCE, accpy.Format.HAT_SOURCE)):
        if fmt & flag:
            out = mapped if out is None else out | mapped
    if out is None:
        raise NotInAccpyError(f"accpy has no equivalent of Accera's Package.Format {fmt} without a library "
                              "or source format (only MLIR dumps)")
    return out


class Package(accpy.Package):
    """accpy's Package; `build` takes Accera's Format flags and keywords."""

    Format = Format

    def _gpu_functions(self) -> list:
        return [f for f in self._functions if getattr(getattr(f, "target", None), "category", None) is not None
                and f.target.category.name == "GPU"]

    def build(self, name, format=Format.DEFAULT, mode=accpy.Package.Mode.RELEASE,
              platform=accpy.Package.Platform.HOST, tolerance=1e-5, output_dir=None, fail_on_error=False,
              _quiet=True, **kwargs):
        kwargs.setdefault("python_module", False)
        built = accpy.Package.build(self, name, format=accpy_format(format), mode=mode, platform=platform,
                                    tolerance=tolerance, output_dir=output_dir, fail_on_error=fail_on_error, **kwargs)
        if self._gpu_functions() and os.environ.get("ACCPY_CONFORMANCE_RUN_GPU", "1") != "0":
            run_on_device(self, name, tolerance, output_dir)
        return built


def _random_argument(arg: dict, rng) -> np.ndarray:
    """A random array (or scalar array) for one argument of a .hat function."""
    dtype = np.dtype({"float": "float32", "double": "float64", "bfloat16": "uint16"}.get(arg["element_type"],
                                                                                         arg["element_type"]))
    shape = tuple(arg.get("shape") or ())
    if dtype.kind == "f":
        return rng.random(size=shape).astype(dtype)  # [0, 1), as Accera's own tests draw floats
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -8), min(info.max, 8), size=shape, endpoint=True).astype(dtype)
    return rng.integers(0, 2, size=shape).astype(dtype)


def run_on_device(package, name, tolerance, output_dir) -> None:
    """Build `package` again as a DEBUG-mode library (beside the first build, named `<name>_run`)
    and call each of its functions once on random inputs: a kernel that computes other values than
    the unscheduled nest raises (accpy's DEBUG-mode comparison)."""
    out = Path(output_dir or ".") / f"{name}_run"
    accpy.Package.build(package, f"{name}_run", format=accpy.Format.HAT_DYNAMIC, mode=accpy.Package.Mode.DEBUG,
                        tolerance=tolerance, output_dir=str(out), python_module=False)
    hat = tomllib.loads((out / f"{name}_run.hat").read_text())
    loaded = accpy.load(out / f"{name}_run.hat")
    rng = np.random.default_rng(0)
    for fn_name, fn in hat["functions"].items():
        args = [_random_argument(a, rng) for a in fn.get("arguments", [])]
        loaded[fn_name](*args)
