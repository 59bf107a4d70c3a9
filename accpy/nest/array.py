"""Data of a nest: `Array` (roles, element types, layouts), `Scalar` and runtime `Dimension`s."""
from __future__ import annotations

import enum
from typing import Optional

import numpy as np

from ..errors import LogicError
from ..ir.expr import Buffer, Const, Expr, Var, idx_op
from ..ir.names import check_name
from ..ir.types import ScalarType
from .logic import Access, Value, lift, record_assignment
from .naming import assigned_names


class Role(enum.Enum):
    INPUT = "input"
    INPUT_OUTPUT = "input_output"
    OUTPUT = "output"
    CONST = "const"
    TEMP = "temp"


def scalar_type(t, what: str = "element_type") -> ScalarType:
    """Accept a ScalarType, a numpy dtype/type, or Python's int/float/bool."""
    if isinstance(t, ScalarType):
        return t
    if t is int:
        return ScalarType.int64
    if t is float:
        return ScalarType.float32
    if t is bool:
        return ScalarType.bool
    try:
        return ScalarType.from_dtype(t)
    except TypeError:
        raise TypeError(f"{what}: expected an acc.ScalarType or a numpy dtype, got {t!r}") from None


class Dimension(Value):
    """A size known only when the function is called (an `int64_t` argument in C)."""

    class Role(enum.Enum):
        INPUT = "input"
        OUTPUT = "output"

    def __init__(self, role=None, name: Optional[str] = None, value=None):
        role = Role.INPUT if role is None else role
        if role in (Role.OUTPUT, Dimension.Role.OUTPUT):
            raise NotImplementedError("OUTPUT dimensions (sizes computed by the function) are not supported yet")
        if role not in (Role.INPUT, Dimension.Role.INPUT):
            raise ValueError(f"role: a Dimension is INPUT or OUTPUT, got {role!r}")
        if name is None:
            names = assigned_names()
            name = names[0] if len(names) == 1 else f"dim{id(self) % 10000}"
        else:
            check_name(name, "name")
        self.name = name
        self.role = Role.INPUT
        self.value = value
        super().__init__(Var(name, ScalarType.index))

    @property
    def var(self) -> Var:
        return self._expr  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Dimension({self.name})"


def create_dimensions(role=None):
    """`M, N = acc.create_dimensions()`: runtime sizes named after the variables."""
    names = assigned_names()
    if not names:
        raise RuntimeError("create_dimensions(): assign the result directly to variables, "
                           "e.g. `M, N = acc.create_dimensions()`")
    dims = [Dimension(role, name=n) for n in names]
    return dims[0] if len(dims) == 1 else tuple(dims)


def size_expr(s, what: str) -> Expr:
    """A shape entry as an index expression: a positive int, a Dimension or a Parameter."""
    from .parameters import Parameter

    if isinstance(s, Parameter):
        s = s.value  # raises UnresolvedParameter outside Package.add
    if isinstance(s, Dimension):
        return s.var
    if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
        if s < 1:
            raise ValueError(f"{what}: sizes must be integers >= 1, got {s}")
        return Const(int(s))
    raise TypeError(f"{what}: expected an int >= 1 or an acc.Dimension, got {type(s).__name__} {s!r}")


class _Layout(enum.Enum):
    FIRST_MAJOR = "first_major"
    LAST_MAJOR = "last_major"
    DEFERRED = "deferred"


class Array:
    """An n-D array used by nests; becomes a function argument (or constant, or temporary)."""

    Layout = _Layout

    def __init__(self, role: Role = None, name: str = "", data=None, element_type=None,
                 layout=_Layout.FIRST_MAJOR, offset: int = 0, shape=None):
        if not isinstance(role, Role):
            raise TypeError(f"role: expected an acc.Role (INPUT, INPUT_OUTPUT, OUTPUT, CONST, TEMP), got {role!r}")
        if name:
            check_name(name, "name")
        else:
            names = assigned_names()
            name = names[0] if len(names) == 1 else ""
        self.role = role
        self.name = name or f"array{id(self) % 100000}"
        self.offset = offset
        if offset:
            raise NotImplementedError("offset: array offsets are not supported")
        if role is Role.CONST:
            if data is None:
                raise ValueError("data: a CONST array needs its data (a numpy array)")
        if data is not None:
            data = np.asarray(data)
            if data.ndim == 0:
                data = data.reshape(1)
            if shape is not None and tuple(shape) != data.shape:
                raise ValueError(f"shape: {tuple(shape)} does not match the data's shape {data.shape}")
            shape = data.shape
            if element_type is None:
                element_type = ScalarType.from_dtype(data.dtype)
        if shape is None:
            raise ValueError("shape: an Array needs a shape (or data)")
        from .parameters import Parameter

        if isinstance(shape, (int, Dimension, Parameter)):
            shape = (shape,)
        self._shape = tuple(shape)
        self.element_type = scalar_type(element_type, "element_type") if element_type is not None else ScalarType.float32
        if data is not None:
            data = data.astype(self.element_type.dtype)
        self.data = data
        self.requested_layout = layout
        self._buffer: Optional[Buffer] = None
        self._buffers: dict = {}
        self._check_layout(layout)

    def _check_layout(self, layout):
        if layout is _Layout.DEFERRED:
            if self.role is not Role.CONST:
                raise ValueError("layout: DEFERRED layouts are only for CONST arrays")
        elif isinstance(layout, _Layout):
            pass
        elif isinstance(layout, (tuple, list)):
            if len(layout) != len(self._shape):
                raise ValueError(f"layout: {len(layout)} strides given for an array of rank {len(self._shape)}")
            for s in layout:
                if not isinstance(s, (int, np.integer)) or s < 1:
                    raise ValueError(f"layout: explicit strides must be integers >= 1, got {layout!r}")
        else:
            raise TypeError(f"layout: expected Array.Layout.FIRST_MAJOR/LAST_MAJOR or a tuple of strides, got {layout!r}")

    # -- properties -----------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def layout(self):
        return self.requested_layout

    @property
    def rank(self) -> int:
        return len(self._shape)

    def shape_exprs(self) -> tuple:
        return tuple(size_expr(s, f"shape of {self.name}") for s in self._shape)

    def stride_exprs(self) -> tuple:
        shape = self.shape_exprs()
        layout = self.requested_layout
        if isinstance(layout, (tuple, list)):
            return tuple(Const(int(s)) for s in layout)
        n = len(shape)
        strides: list = [None] * n
        acc: Expr = Const(1)
        dims = range(n - 1, -1, -1) if layout in (_Layout.FIRST_MAJOR, _Layout.DEFERRED) else range(n)
        for d in dims:
            strides[d] = acc
            acc = idx_op("mul", acc, shape[d])
        return tuple(strides)

    @property
    def buffer(self) -> Buffer:
        """The IR buffer of this array (one per value of its parameters, if its shape has any)."""
        from .parameters import has_parameter, resolve

        if not has_parameter(self._shape):
            if self._buffer is None:
                self._buffer = Buffer(self.name, self.element_type, self.shape_exprs(), self.stride_exprs(),
                                      role=self.role.value, data=self.data)
            return self._buffer
        key = tuple(s.name if isinstance(s, Dimension) else s for s in resolve(self._shape))
        if key not in self._buffers:
            self._buffers[key] = Buffer(self.name, self.element_type, self.shape_exprs(), self.stride_exprs(),
                                        role=self.role.value, data=self.data)
        return self._buffers[key]

    def resolved_shape(self) -> tuple:
        """The shape with parameters replaced by their current values."""
        from .parameters import resolve

        return tuple(resolve(self._shape))

    def dimensions(self) -> list:
        return [s for s in self._shape if isinstance(s, Dimension)]

    # -- logic ----------------------------------------------------------------------------
    def normalize_indices(self, key) -> tuple:
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) == 1 and isinstance(key[0], (list, tuple)):
            key = tuple(key[0])
        if len(key) != self.rank:
            raise LogicError(f"wrong rank: {self.name} has rank {self.rank} but is indexed with {len(key)} "
                             f"{'index' if len(key) == 1 else 'indices'}")
        out = []
        for k in key:
            if isinstance(k, slice):
                raise LogicError(f"slices are not supported in accesses to {self.name}")
            v = lift(k)
            if not v.element_type.is_int:
                raise LogicError(f"index of {self.name} must be an integer expression, got {v.element_type.name}")
            out.append(v)
        return tuple(out)

    def __getitem__(self, key) -> Access:
        return Access(self, self.normalize_indices(key))

    def __setitem__(self, key, value) -> None:
        record_assignment(self, key, value)

    def __repr__(self) -> str:
        return f"Array({self.name}: {self.role.name} {self.element_type.name}{list(self._shape)})"


class Scalar(Value):
    """A runtime scalar argument (by value when INPUT)."""

    def __init__(self, element_type=None, role: Role = Role.INPUT, name: str = ""):
        value = None
        if element_type is not None and not isinstance(element_type, ScalarType) and \
                isinstance(element_type, (int, float, np.number)) and not isinstance(element_type, type):
            value = element_type
            element_type = ScalarType.int64 if isinstance(value, (int, np.integer)) else ScalarType.float32
        t = scalar_type(element_type if element_type is not None else ScalarType.float32)
        if role is not Role.INPUT:
            raise NotImplementedError("Scalar: only INPUT scalars are supported")
        if name:
            check_name(name, "name")
        else:
            names = assigned_names()
            name = names[0] if len(names) == 1 else f"scalar{id(self) % 10000}"
        self.name = name
        self.role = role
        self.value = value
        super().__init__(Var(name, t))

    @property
    def var(self) -> Var:
        return self._expr  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Scalar({self.name}: {self.element_type.name})"
