"""accera.samples: Accera's sample modules from its wheel (ACCERA_WHEEL_DIR), run unchanged."""
import os

_wheel = os.environ.get("ACCERA_WHEEL_DIR")
if not _wheel:
    raise ImportError("accera.samples: set ACCERA_WHEEL_DIR to the unpacked wheel's accera folder")
__path__.append(os.path.join(_wheel, "samples"))  # noqa: F821 (a package's __path__)
_init = os.path.join(_wheel, "samples", "__init__.py")
with open(_init) as _f:
    exec(compile(_f.read(), _init, "exec"), globals())  # the wheel's own __init__, unchanged
