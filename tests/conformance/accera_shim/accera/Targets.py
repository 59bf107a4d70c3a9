"""accera.Targets: Accera's target names (Target, the device tables) mapped onto accpy's."""
from ._translate import module_getattr

__getattr__ = module_getattr("accera.Targets", globals(), {})
