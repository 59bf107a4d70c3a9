"""Autotuning: measure the variants of a parameter grid and keep the fastest (`acc.tune`).

    result = acc.tune(plan, args=(A, B, C), grid=acc.create_parameter_grid({P: [16, 32]}))
    print(result.table()); result.best_parameters; result.best_function(a, b, c)

Work runs on any `concurrent.futures.Executor` (local processes by default) or a Dask
`distributed.Client`; measurements never overlap on one machine. This package is callable:
`acc.tune(...)` is `accpy.tune.tune(...)`.
"""
import sys as _sys
import types as _types

from .objective import GemminiCycles, Objective, WallTime
from .results import ResultsFile, TuneResult, VariantResult
from .search import Exhaustive, Halving
from .tune import tune

__all__ = ["Exhaustive", "GemminiCycles", "Halving", "Objective", "ResultsFile", "TuneResult", "VariantResult",
           "WallTime", "tune"]


class _CallableModule(_types.ModuleType):
    """`acc.tune(...)` runs `tune`, while `acc.tune.Halving` etc. stay reachable: one name, both uses."""

    def __call__(self, *args, **kwargs) -> TuneResult:
        return tune(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
