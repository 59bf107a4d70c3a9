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

from .handles import LogicIndex, LogicValue
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
        """The value given for this parameter in the Package.add being realized; UnresolvedParameter outside one."""
        for ctx in reversed(_active):
            if self in ctx:
                return ctx[self]
        raise UnresolvedParameter(self)

    def _derive(self, op, other, sym, reverse=False):
        if isinstance(other, LogicValue):
            # with a logic value the result is logic: the value's own (reflected) operator
            # builds it from this parameter's value
            return NotImplemented
        return DerivedParameter(op, (other, self) if reverse else (self, other), sym)

    def __add__(self, o): return self._derive(operator.add, o, "+")
    def __radd__(self, o): return self._derive(operator.add, o, "+", True)
    def __sub__(self, o): return self._derive(operator.sub, o, "-")
    def __rsub__(self, o): return self._derive(operator.sub, o, "-", True)
    def __mul__(self, o): return self._derive(operator.mul, o, "*")
    def __rmul__(self, o): return self._derive(operator.mul, o, "*", True)
    def __truediv__(self, o): return self._derive(operator.truediv, o, "/")
    def __rtruediv__(self, o): return self._derive(operator.truediv, o, "/", True)
    def __floordiv__(self, o): return self._derive(operator.floordiv, o, "//")
    def __rfloordiv__(self, o): return self._derive(operator.floordiv, o, "//", True)
    def __mod__(self, o): return self._derive(operator.mod, o, "%")
    def __rmod__(self, o): return self._derive(operator.mod, o, "%", True)
    def __pow__(self, o): return self._derive(operator.pow, o, "**")
    def __rpow__(self, o): return self._derive(operator.pow, o, "**", True)
    def __and__(self, o): return self._derive(operator.and_, o, "&")
    def __rand__(self, o): return self._derive(operator.and_, o, "&", True)
    def __or__(self, o): return self._derive(operator.or_, o, "|")
    def __ror__(self, o): return self._derive(operator.or_, o, "|", True)
    def __xor__(self, o): return self._derive(operator.xor, o, "^")
    def __rxor__(self, o): return self._derive(operator.xor, o, "^", True)
    def __lshift__(self, o): return self._derive(operator.lshift, o, "<<")
    def __rlshift__(self, o): return self._derive(operator.lshift, o, "<<", True)
    def __rshift__(self, o): return self._derive(operator.rshift, o, ">>")
    def __rrshift__(self, o): return self._derive(operator.rshift, o, ">>", True)
    # ordering comparisons with logic values build logic (equality stays identity: parameters are dict keys)
    def __lt__(self, o): return self._compare(operator.lt, o, "<")
    def __le__(self, o): return self._compare(operator.le, o, "<=")
    def __gt__(self, o): return self._compare(operator.gt, o, ">")
    def __ge__(self, o): return self._compare(operator.ge, o, ">=")

    def _compare(self, op, other, sym):
        d = self._derive(op, other, sym)
        if isinstance(d, DerivedParameter):
            d.is_condition = True  # no truth value until the parameters have values
        return d

    def __eq__(self, o):
        return NotImplemented if isinstance(o, LogicValue) else self is o

    def __ne__(self, o):
        return NotImplemented if isinstance(o, LogicValue) else self is not o

    __hash__ = object.__hash__

    def __neg__(self): return DerivedParameter(operator.neg, (self,), "-", unary=True)
    def __pos__(self): return self
    def __abs__(self): return DerivedParameter(abs, (self,), "abs", unary=True)
    def __invert__(self): return DerivedParameter(operator.invert, (self,), "~", unary=True)

    def __repr__(self) -> str:
        return f"Parameter({self.name})"

    def __str__(self) -> str:
        return self.name


class DerivedParameter(Parameter):
    """A parameter computed from others (`2 * P`, `-P`); its value follows theirs."""

    def __init__(self, op, operands, sym, unary: bool = False):
        super().__init__(f"{sym}({operands[0]})" if unary else "(" + f" {sym} ".join(str(o) for o in operands) + ")")
        self.op, self.operands = op, operands

    is_condition = False

    @property
    def value(self):
        """The value computed from the operands' values."""
        return self.op(*(resolve(o) for o in self.operands))

    def __bool__(self):
        if self.is_condition:
            raise TypeError(f"the condition {self.name} has no truth value before the parameters have values; "
                            f"use it in iteration logic (acc.select) or compare the values given to Package.add")
        return True


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
    """Whether `x` is or contains (in tuples, lists, dicts) a Parameter."""
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
    if not isinstance(parameter_choices, dict) or not parameter_choices:
        raise ValueError("parameter_choices: expected a non-empty dict {parameter: list of values}")
    keys = list(parameter_choices)
    for k in keys:
        if not isinstance(k, Parameter):
            raise TypeError(f"parameter_choices: keys must be parameters, got {k!r}")
    value_lists = []
    for k in keys:
        v = parameter_choices[k]
        if isinstance(v, tuple) and v and all(isinstance(x, LogicIndex) for x in v):
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
