"""accera.Targets: Accera's target names (Target, the device tables) mapped onto accpy's."""
from accpy.targets import gpu as _gpu

from ._translate import module_getattr

# Accera's GridUnits enum is accpy's GridUnit (same members)
__getattr__ = module_getattr("accera.Targets", globals(), {"GridUnits": lambda: _gpu.GridUnit})
