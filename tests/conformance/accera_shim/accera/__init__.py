"""A package importable as `accera` that maps Accera's names onto accpy's (translation only).

Names accpy has are accpy's objects; names it lacks import as placeholders that raise
`NotInAccpyError` when used. See tests/conformance/README.md for the translations.
"""
import accpy as _accpy
from accpy import *  # noqa: F401,F403

from ._translate import Missing, NotInAccpyError, module_getattr  # noqa: F401
from ._package import Package  # noqa: F401  (Accera's Package.Format and build keywords)
from . import Constants  # noqa: F401

__version__ = "1.2.29+accpy-shim"

_TRANSLATIONS = {
    "Constants": lambda: Constants,
    "k_dynamic_size": lambda: getattr(_accpy, "k_dynamic_size", Missing("k_dynamic_size")),
}

__getattr__ = module_getattr("accera", globals(), _TRANSLATIONS)
