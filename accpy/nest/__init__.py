"""accpy.nest."""
from . import views  # noqa: F401  (gives Array its views: sub_array, slice, _split_dimension)
