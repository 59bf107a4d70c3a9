"""How the shim maps a name of Accera's onto accpy: the same name in accpy, else a listed
translation, else a placeholder that fails, when used, saying accpy has no equivalent."""
from __future__ import annotations

import accpy


class NotInAccpyError(NotImplementedError):
    """A program used a name of Accera's that accpy does not have."""


class Missing:
    """Stands for an Accera name accpy lacks; importing it works, using it raises NotInAccpyError.

    Attribute access gives another placeholder (`_MemorySpace.SHARED`), so a test module that
    names such things at import time still loads and only the tests that use them fail.
    """

    def __init__(self, qualname: str):
        self._qualname = qualname

    def _fail(self, *args, **kwargs):
        raise NotInAccpyError(f"accpy has no equivalent of Accera's {self._qualname}")

    def __getattr__(self, item):
        if item.startswith("__"):
            raise AttributeError(item)
        return Missing(f"{self._qualname}.{item}")

    def __repr__(self):
        return f"<Accera's {self._qualname}: not in accpy>"

    __call__ = __getitem__ = __setitem__ = __iter__ = __len__ = __bool__ = __enter__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _fail
    __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __or__ = __and__ = __invert__ = __index__ = __int__ = _fail
    __float__ = _fail
    __hash__ = object.__hash__


def resolve(module: str, name: str, translations: dict):
    """The accpy object for Accera's `module.name` (`translations`: Accera name -> thunk)."""
    if name in translations:
        return translations[name]()
    if hasattr(accpy, name):
        return getattr(accpy, name)
    return Missing(f"{module}.{name}" if module != "accera" else name)


def module_getattr(module: str, namespace: dict, translations: dict):
    """A PEP 562 `__getattr__` for a shim module: resolve a name once and keep it."""

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = resolve(module, name, translations)
        namespace[name] = value
        return value

    return __getattr__
