"""accera._lang_python: Accera's native-module names mapped onto accpy's."""
from .._translate import module_getattr

__getattr__ = module_getattr("accera._lang_python", globals(), {})
