"""OUTPUT dimensions computed when a function starts (`OutputDimension._define`), and the OUTPUT
arrays they size (which the function allocates): the nest computing them, and their allocation
for the reference evaluator. The package side is accpy/package/allocating.py."""
from __future__ import annotations

import numpy as np

from ..errors import LogicError
from ..ir.affine import to_affine
from ..ir.expr import Cast
from ..ir.types import ScalarType
from .array import Array, Dimension, OutputDimension, Role
from .logic import Value, lift


def defined_dimensions(args) -> list:
    """The OUTPUT dimensions among `args` (and in the shapes of array arguments) that are defined
    at definition time, in first-use order."""
    out: list = []

    def note(d):
        if isinstance(d, OutputDimension) and d.definition is not None and all(d is not x for x in out):
            out.append(d)

    for a in args:
        note(a)
        if isinstance(a, Array):
            for s in a.shape:
                note(s)
    return out


def allocated_arrays(args) -> list:
    """The OUTPUT arrays among `args` sized by defined OUTPUT dimensions: the function allocates them."""
    return [a for a in args if isinstance(a, Array) and a.role is Role.OUTPUT and
            any(isinstance(s, OutputDimension) for s in a.shape)]


def sizes_nest(dims: list, nest_class):
    """A one-iteration nest (of `nest_class`, acc.Nest) setting each of `dims` to its definition (what
    the function runs first)."""
    nest = nest_class((1,))

    @nest.iteration_logic
    def _():
        for d in dims:
            d.array[0] = d.definition

    return nest


def allocate_outputs(nests, args: dict, evaluate) -> None:
    """For the reference evaluator (`evaluate`): OUTPUT arrays of the nests' logic sized by defined
    OUTPUT dimensions, and those dimensions, are computed from `args` and added to it (zero-filled
    arrays; the dimensions' values as ints, keyed by their sizes)."""
    arrays = []
    for n in nests:
        for a in getattr(n, "_arrays", {}).values():
            if a not in arrays and a not in args and a in allocated_arrays([a]):
                arrays.append(a)
    dims = defined_dimensions(arrays)
    for n in nests:
        for s in n.get_shape():
            if isinstance(s, OutputDimension) and s.definition is not None and s not in dims:
                dims.append(s)
    dims = [d for d in dims if d.size not in args]
    if not dims and not arrays:
        return
    values = {d.array: np.zeros(1, np.int64) for d in dims}
    evaluate(sizes_nest(dims, type(nests[0])), {**args, **values})
    for d in dims:
        n = int(values[d.array][0])
        if n < 0:
            raise ValueError(f"evaluate: the OUTPUT dimension {d.name} is computed as {n} (< 0)")
        args[d.size] = n
    for a in arrays:
        shape = tuple(args[s.size] if isinstance(s, OutputDimension) else
                      args.get(s, args.get(getattr(s, "name", None))) if isinstance(s, Dimension) else int(s)
                      for s in a.shape)
        args[a] = np.zeros(shape, a.element_type.dtype)
