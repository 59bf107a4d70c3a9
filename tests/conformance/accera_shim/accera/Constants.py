"""accera.Constants: Accera's constants, each accpy's own where accpy has it."""
from ._translate import module_getattr

__getattr__ = module_getattr("accera.Constants", globals(), {})
