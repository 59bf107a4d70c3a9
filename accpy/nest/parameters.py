"""Parameters: values chosen when a function is added to a package (Accera's parameters).

A `Parameter` stands for a value in shapes, split sizes, loop orders, cache levels and
scalar logic. Nests, schedules and plans that use one record what the user asked for;
`Package.add(..., parameters={P: value})` realizes them with the values in effect (see
`parameter_values`). `create_parameter_grid` lists the combinations to add.
"""
from __future__ import annotations

import contextlib
import itertools
import operator
import random
from typing import Optional

from .naming import assigned_names

_active: list = []  # stack of {Parameter: value}


class UnresolvedParameter(ValueError):
    """A parameter's value was needed while none was set (raised inside accpy, caught there)."""

    def __init__(self, parameter):
        super().__init__(f"parameter {parameter.name} has no value here; give it with "
                         f"Package.add(..., parameters={{{parameter.name}: value}})")
        self.parameter = parameter


class Parameter:
    """A value supplied later; arithmetic on parameters gives derived parameters."""

    def __init__(self, name: str):
        self.name = name

    @property
    def value(self):
        for ctx in reversed(_active):
            if self in ctx:
                return ctx[self]
        raise UnresolvedParameter(self)

    def _derive(self, op, other, sym, reverse=False):
        return DerivedParameter(op, (other, self) if reverse else (self, other), sym)

    def __add__(self, o): return self._derive(operator.add, o, "+")
    def __radd__(self, o): return self._derive(operator.add, o, "+", True)
    def __sub__(self, o): return self._derive(operator.sub, o, "-")
    def __rsub__(self, o): return self._derive(operator.sub, o, "-", True)
    def __mul__(self, o): return self._derive(operator.mul, o, "*")
    def __rmul__(self, o): return self._derive(operator.mul, o, "*", True)
    def __floordiv__(self, o): return self._derive(operator.floordiv, o, "//")
    def __rfloordiv__(self, o): return self._derive(operator.floordiv, o, "//", True)

    def __repr__(self) -> str:
        return f"Parameter({self.name})"

    def __str__(self) -> str:
        return self.name


class DerivedParameter(Parameter):
    def __init__(self, op, operands, sym):
        super().__init__("(" + f" {sym} ".join(str(o) for o in operands) + ")")
        self.op, self.operands = op, operands

    @property
    def value(self):
        return self.op(*(resolve(o) for o in self.operands))


def resolve(x):
    """x with every Parameter replaced by its value (tuples, lists and dicts recursively)."""
    if isinstance(x, Parameter):
        return x.value
    if isinstance(x, tuple):
        return tuple(resolve(v) for v in x)
    if isinstance(x, list):
        return [resolve(v) for v in x]
    if isinstance(x, dict):
        return {resolve(k): resolve(v) for k, v in x.items()}
    return x


def has_parameter(x) -> bool:
    if isinstance(x, Parameter):
        return True
    if isinstance(x, (tuple, list)):
        return any(has_parameter(v) for v in x)
    if isinstance(x, dict):
        return any(has_parameter(k) or has_parameter(v) for k, v in x.items())
    return False


@contextlib.contextmanager
def parameter_values(values: Optional[dict]):
    """Within the block, each Parameter in `values` has its value."""
    values = dict(values or {})
    for p in values:
        if not isinstance(p, (Parameter, str)):
            raise TypeError(f"parameters: keys must be acc parameters (from acc.create_parameters()) or names, "
                            f"got {p!r}")
    # names (str keys) are only recorded with the function; parameters get their values
    values = {p: v for p, v in values.items() if isinstance(p, Parameter)}
    _active.append(values)
    try:
        yield values
    finally:
        _active.pop()


def context_key() -> tuple:
    """Identifies the parameter values in effect (for caching realizations)."""
    items = {}
    for ctx in _active:
        items.update(ctx)
    return tuple(sorted(((id(p), _hashable(v)) for p, v in items.items()), key=lambda t: t[0]))


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((repr(k), _hashable(x)) for k, x in v.items()))
    try:
        hash(v)
        return v
    except TypeError:
        return id(v)


def create_parameters():
    """`P0, P1 = acc.create_parameters()`: parameters named after the variables."""
    names = assigned_names()
    if not names:
        raise RuntimeError("create_parameters(): assign the result directly to variables, "
                           "e.g. `P0, P1 = acc.create_parameters()`")
    ps = [Parameter(n) for n in names]
    return ps[0] if len(ps) == 1 else tuple(ps)


def create_parameter_grid(parameter_choices: dict, filter_func=None, sample: int = 0, seed=None) -> list:
    """Every combination of `parameter_choices` (a dict Parameter -> list of values).

    A choice given as a tuple of indices stands for all its permutations (loop orders).
    `filter_func` receives one tuple of values (in the dict's order) and keeps those it
    returns True for; `sample` > 0 draws that many combinations (reproducibly with `seed`).
    """
    from .logic import Index

    if not isinstance(parameter_choices, dict) or not parameter_choices:
        raise ValueError("parameter_choices: expected a non-empty dict {parameter: list of values}")
    keys = list(parameter_choices)
    for k in keys:
        if not isinstance(k, Parameter):
            raise TypeError(f"parameter_choices: keys must be parameters, got {k!r}")
    value_lists = []
    for k in keys:
        v = parameter_choices[k]
        if isinstance(v, tuple) and v and all(isinstance(x, Index) for x in v):
            value_lists.append(list(itertools.permutations(v)))
        elif isinstance(v, (list, tuple, range)):
            value_lists.append(list(v))
        else:
            raise ValueError(f"parameter_choices[{k.name}]: expected a list of values (or a tuple of indices), "
                             f"got {v!r}")
        if not value_lists[-1]:
            raise ValueError(f"parameter_choices[{k.name}]: no values")
    combos = list(itertools.product(*value_lists))
    if filter_func is not None:
        combos = [c for c in combos if filter_func(c)]
    if sample and 0 < sample < len(combos):
        combos = random.Random(seed).sample(combos, sample)
    return [dict(zip(keys, c)) for c in combos]
