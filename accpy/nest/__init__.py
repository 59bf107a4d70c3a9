"""accpy.nest."""
from . import views  # noqa: F401  (gives Array its views: sub_array, slice, _split_dimension)
from . import scalars  # noqa: F401  (gives Scalar its INPUT_OUTPUT / OUTPUT / TEMP kind: MemoryScalar)
