"""accera._lang_python._lang: Accera's native language objects mapped onto accpy's.

`Array` here is Accera's native array (a different object from `accera.Array`): not in accpy.
`_MemorySpace` is accpy's MemorySpace; the rest are accpy's names of the same spelling.
"""
import accpy

from ..._translate import Missing, module_getattr

_TRANSLATIONS = {
    "Array": lambda: Missing("accera._lang_python._lang.Array (the native array)"),
    "_MemorySpace": lambda: getattr(accpy, "_MemorySpace", accpy.MemorySpace),
}

__getattr__ = module_getattr("accera._lang_python._lang", globals(), _TRANSLATIONS)
