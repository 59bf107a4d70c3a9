"""accera.test: the shim's verifiers first, then Accera's own test modules (from its wheel,
unpacked where ACCERA_WHEEL_DIR points: the `accera` folder), run unchanged."""
import os

_wheel = os.environ.get("ACCERA_WHEEL_DIR")
if _wheel:
    __path__.append(os.path.join(_wheel, "test"))  # noqa: F821 (a package's __path__)
