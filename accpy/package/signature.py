"""Function signatures: one description of each argument, read by every writer.

The C header, the HAT metadata, the packed C entry point, the binder's validation and
the pybind11 module all derive from `ArgInfo`, so they cannot disagree.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

from ..ir.kinds import BufferRole
from ..ir.affine import to_affine
from ..ir.names import C_KEYWORDS, C_LIBRARY_NAMES, CXX_KEYWORDS, argument_name_problem  # noqa: F401
from ..ir.types import ScalarType
from ..nest.array import Array, Dimension, OutputDimension, Role, is_scalar_argument
from ..nest.naming import argument_names

KIND_ARRAY, KIND_SCALAR, KIND_DIM = 0, 1, 2

# (the rules for names in C live in accpy/ir/names.py; kept here under their old names)
C_RESERVED = C_KEYWORDS | {"args"}
c_name_problem = argument_name_problem


@dataclass(frozen=True)
class ArgInfo:
    """One argument of a package function, as every writer (header, .hat, binders) sees it."""

    name: str
    kind: int
    dtype: ScalarType
    shape: tuple  # ints, or names of dimension arguments
    layout: str  # "C" (first-major), "F" (last-major), "S" (explicit strides)
    strides: tuple  # element strides when all sizes are constant (else ())
    role: str  # input | input_output | output
    obj: object = None  # the IR Buffer or Var

    @property
    def written(self) -> bool:
        """Does the function write this argument (INPUT_OUTPUT or OUTPUT)?"""
        return self.role in (BufferRole.INPUT_OUTPUT, BufferRole.OUTPUT)

    @property
    def is_array(self) -> bool:
        """Is it an array (passed by pointer)?"""
        return self.kind == KIND_ARRAY

    def c_decl_type(self) -> str:
        """Its C type in declarations (`float*`, `int64_t`)."""
        t = self.dtype.c_name
        return f"{t}*" if self.is_array else t

    def hat_declared_type(self) -> str:
        """Its type as the .hat's `declared_type`."""
        t = self.dtype.hat_name
        return f"{t}*" if self.is_array else t

    def binder_tuple(self, position_of: dict) -> tuple:
        """The description the binders check calls against (native/accpy_pyargs.hpp parse_signature)."""
        shape = [s if isinstance(s, int) else -(position_of[s] + 1) for s in self.shape]
        return (self.name, self.kind, self.dtype.dtype.name if self.dtype is not ScalarType.bfloat16 else "uint16",
                shape, self.layout, list(self.strides), self.written, self.role)


def _layout_of(array) -> tuple:
    lay = array.requested_layout
    if isinstance(lay, (tuple, list)):
        return "S", tuple(int(s) for s in lay)
    code = "F" if lay is Array.Layout.LAST_MAJOR else "C"
    strides = []
    for s in array.buffer.strides:
        a = to_affine(s)
        if a is None or not a.is_const:
            return code, ()
        strides.append(a.const)
    return code, tuple(strides)


def describe_arguments(args) -> list:
    """ArgInfo for each of a function's `args` (Arrays, Dimensions, Scalars)."""
    out = []
    seen = set()
    names = argument_names(args)  # inferred names that clash get a suffix (X, X_1)
    name_of = {id(a): n for a, n in zip(args, names)}
    for k, a in enumerate(args):
        if isinstance(a, Array):
            if a.role is Role.TEMP:
                raise ValueError(f"args[{k}]: {a.name} is a TEMP array; TEMP arrays are internal and cannot be arguments")
            shape = []
            for s in a.resolved_shape():
                if isinstance(s, OutputDimension):  # computed when the function starts: a size there
                    if s.size is None:
                        raise ValueError(f"args[{k}]: {a.name} is sized by the OUTPUT dimension {s.name}, which "
                                         f"is set in iteration logic; set it at definition to size an array")
                    s = s.size
                shape.append(name_of.get(id(s), s.name) if isinstance(s, Dimension) else int(s))
            layout, strides = _layout_of(a)
            # a CONST array given as an argument is an input: the function reads the caller's
            # array, not the data given at definition (as Accera does)
            role = Role.INPUT.value if a.role is Role.CONST else a.role.value
            info = ArgInfo(names[k], KIND_ARRAY, a.element_type, tuple(shape), layout, strides, role, a.buffer)
        elif isinstance(a, Dimension):
            info = ArgInfo(names[k], KIND_DIM, ScalarType.index, (), "C", (), "input", a.var)
        elif isinstance(a, OutputDimension):  # an int64_t* the function writes
            info = ArgInfo(names[k], KIND_ARRAY, ScalarType.int64, (1,), "C", (1,), "output", a.array.buffer)
        elif is_scalar_argument(a):  # a Scalar itself (isinstance also accepts any logic value, as Accera's)
            if a.value is not None:
                raise ValueError(f"args[{k}]: the scalar {a.name} has a value ({a.value!r}): it is a constant "
                                 f"used as a literal, not an argument; leave it out of args")
            info = ArgInfo(names[k], KIND_SCALAR, a.element_type, (), "C", (), "input", a.var)
        else:
            raise TypeError(f"args[{k}]: expected acc.Array, acc.Dimension or acc.Scalar, got {type(a).__name__} {a!r}")
        why = c_name_problem(info.name)
        if why:
            raise ValueError(f"args[{k}]: the name {info.name!r} cannot name a C argument ({why}); "
                             f"give the array, dimension or scalar another name")
        if info.name in seen:
            raise ValueError(f"args[{k}]: two arguments are named {info.name!r}; give arrays distinct names")
        seen.add(info.name)
        out.append(info)
    dims = {i.name for i in out if i.kind == KIND_DIM}
    for i in out:
        for s in i.shape:
            if isinstance(s, str) and s not in dims:
                raise ValueError(f"args: array {i.name} has the runtime dimension {s}, which is not among the "
                                 f"arguments; pass it in args")
    return out


def position_map(infos) -> dict:
    """{argument name: position}."""
    return {i.name: k for k, i in enumerate(infos)}


def function_hash(base_name: str, target_desc: str, parameters: Optional[dict], infos) -> str:
    """16 hex digits, stable across runs, over everything that identifies the function."""
    h = hashlib.md5()
    h.update(base_name.encode())
    h.update(b"|" + target_desc.encode())
    for k in sorted(parameters or {}):
        h.update(f"|{k}={parameters[k]!r}".encode())
    for i in infos:
        h.update(f"|{i.name}:{i.kind}:{i.role}:{i.dtype.name}:{i.shape}:{i.layout}:{i.strides}".encode())
    return h.hexdigest()[:16]
