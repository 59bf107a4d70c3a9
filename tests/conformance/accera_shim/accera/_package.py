"""accera.Package: accpy's Package under Accera's spelling of its build options.

Accera's `Package.Format` is a set of flags where MLIR and MLIR_VERBOSE only add IR dumps to a
HAT format (MLIR_DYNAMIC = HAT_DYNAMIC plus dumps): the shim keeps the HAT part, since accpy
writes C, not MLIR (tests that read those dumps are out of scope). `_quiet` (Accera's compiler
verbosity) has no accpy meaning. Accera builds no Python module, so none is built here.
"""
from __future__ import annotations

import enum

import accpy

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

    def build(self, name, format=Format.DEFAULT, mode=accpy.Package.Mode.RELEASE,
              platform=accpy.Package.Platform.HOST, tolerance=1e-5, output_dir=None, fail_on_error=False,
              _quiet=True, **kwargs):
        kwargs.setdefault("python_module", False)
        return super().build(name, format=accpy_format(format), mode=mode, platform=platform, tolerance=tolerance,
                             output_dir=output_dir, fail_on_error=fail_on_error, **kwargs)
