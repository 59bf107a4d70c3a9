"""accera._lang_python._lang._gpu: Accera's GPU names (accpy has no GPU target)."""
from ..._translate import module_getattr

__getattr__ = module_getattr("accera._lang_python._lang._gpu", globals(), {})
