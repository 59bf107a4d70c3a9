"""Autotuning: measure the variants of a parameter grid and keep the fastest (`acc.tune`).

    result = acc.tune(plan, args=(A, B, C), grid=acc.create_parameter_grid({P: [16, 32]}))
    print(result.table()); result.best_parameters; result.best_function(a, b, c)

Work runs on any `concurrent.futures.Executor` (local processes by default) or a Dask
`distributed.Client`; measurements never overlap on one machine. This package is callable:
`acc.tune(...)` is `accpy.tune.tune(...)`. The objectives target libraries register
(accpy/targets/objective.py) are attributes too, by class name.
"""
import sys as _sys
import types as _types

from ..targets.objective import registered_objectives as _registered_objectives
from .objective import Objective, WallTime
from .results import ResultsFile, TuneResult, VariantResult
from .search import Exhaustive, Halving
from .tune import tune

__all__ = ["Exhaustive", "Halving", "Objective", "ResultsFile", "TuneResult", "VariantResult", "WallTime", "tune"]


def _objective_classes() -> dict:
    return {cls.__name__: cls for cls in _registered_objectives().values()}


def __getattr__(name: str):
    """A registered objective by its class name (`accpy.tune.<ClassName>`)."""
    cls = _objective_classes().get(name)
    if cls is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return cls


def __dir__() -> list:
    return sorted(set(globals()) | set(_objective_classes()))


class _CallableModule(_types.ModuleType):
    """`acc.tune(...)` runs `tune`, while `acc.tune.Halving` etc. stay reachable: one name, both uses."""

    def __call__(self, *args, **kwargs) -> TuneResult:
        return tune(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
