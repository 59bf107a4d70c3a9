"""accpy: fast, verified loop-nest kernels from Python (Accera-compatible API).

    Nest (what to compute) -> Schedule (in which order) -> Plan (how, on a target)
    -> Package (a native library, a header, a HAT file and a Python module)
"""
from .errors import CompileError, InputWriteError, InputWriteWarning, KernelError, LogicError, ScheduleError
from .ir.types import ScalarType
from .nest.array import AllocateFlags, Array, Dimension, Role, Scalar, create_dimensions
from .nest.bf16 import bfloat16_bits, bfloat16_values
from .nest.nest import Nest
from .nest.conditions import If as _If  # Accera's accera._lang_python._lang._If
from .nest.functions import LogicFunction, logic_function
from .nest.parameters import Parameter, create_parameter_grid, create_parameters
from .nest.ops import (abs, as_index, cast, ceil, cos, cosh, exp, fast_exp, fast_exp_mlas, floor, log, log2, log10,
                       logical_and, logical_not, logical_or, max, min, remainderf, round, select, sin, sinh, sqrt,
                       tan, tanh, type_size_bytes)
from .package import BuiltPackage, Format, Mode, Package, Platform, load
from .plan import Plan
from . import algorithms  # Accera's acc.algorithms: heuristics for Plan.auto
from .plan.cache import Cache, MemorySpace
from .schedule.fuse import FusedSchedule, fuse
from .schedule.schedule import Schedule
from .targets import MMAFragmentOp, MMASchedulingPolicy, MMAShape, Target
from . import targets as Targets  # Accera's module name: acc.Targets.Model lists the known models
from .targets.cache_strategy import AUTO, CacheStrategy
from . import tune  # the accpy.tune package; calling it runs accpy.tune.tune
from .auto.search import autoschedule

inf = float("inf")  # Accera's acc.inf: a float constant usable in logic (e.g. -acc.inf to start a max)

from .version import __version__
