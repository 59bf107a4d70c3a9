"""Data of a nest: `Array` (roles, element types, layouts), `Scalar` and runtime `Dimension`s."""
from __future__ import annotations

import enum
import weakref
from typing import Optional

import numpy as np

from ..errors import LogicError
from ..ir.affine import to_affine
from ..ir.expr import Buffer, Cast, Const, Expr, Var, idx_op
from ..ir.kinds import HostMemory
from ..ir.names import check_name
from ..ir.types import ScalarType
from .handles import LogicValue
from .logic import (Access, LogicCapture, Value, lift, record_assignment,  # noqa: F401  (scalar_type: re-exported)
                    scalar_type)
from .layouts import AllocateFlags, GroupedLayout, Shape, _Layout  # noqa: F401  (re-exported)
from .naming import assigned_names, c_name_of_variable, generated_name, inferred_or_generated
from .parameters import Parameter, has_parameter, resolve


class Role(enum.Enum):
    """Role of an array in a function: INPUT, INPUT_OUTPUT, OUTPUT, CONST (built-in data) or TEMP (internal)."""

    INPUT = "input"
    INPUT_OUTPUT = "input_output"
    OUTPUT = "output"
    CONST = "const"
    TEMP = "temp"




DIMENSION_VARS: "weakref.WeakSet" = weakref.WeakSet()  # the variables of every acc.Dimension


class Dimension(Value):
    """A size known only when the function is called (an `int64_t` argument in C)."""

    class Role(enum.Enum):
        INPUT = "input"
        OUTPUT = "output"

    def __new__(cls, name=None, role=None, value=None):
        if isinstance(name, (Role, Dimension.Role)) and not isinstance(role, (Role, Dimension.Role)):
            name, role = role, name
        if role in (Role.OUTPUT, Dimension.Role.OUTPUT):
            return OutputDimension(name, value)  # (not a Dimension: __init__ does not run)
        return super().__new__(cls)

    def __init__(self, name=None, role=None, value=None):
        # Accera takes the name first (`Dimension("M")`) or a role first (`Dimension(Role.INPUT)`)
        if isinstance(name, (Role, Dimension.Role)) and not isinstance(role, (Role, Dimension.Role)):
            name, role = role, name
        role = Role.INPUT if role is None else role
        if role not in (Role.INPUT, Dimension.Role.INPUT):
            raise ValueError(f"role: a Dimension is INPUT or OUTPUT, got {role!r}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected a string, got {type(name).__name__} {name!r}")
        if name:
            check_name(name, "name")
        self.name_given = bool(name)
        self.name = name or inferred_or_generated("dim")
        self.role = Role.INPUT
        self.value = value
        super().__init__(Var(self.name, ScalarType.index))
        DIMENSION_VARS.add(self.var)  # (a Dimension that sizes nothing is an index argument: nest/functions.py)

    @property
    def var(self) -> Var:
        """The IR variable standing for this size in expressions and the C signature."""
        return self._expr  # type: ignore[return-value]

    def __eq__(self, o):  # type: ignore[override]
        # a condition inside iteration logic; identity elsewhere (`A.shape == [M, 3]`, `M in dims`)
        return super().__eq__(o) if LogicCapture.current() is not None else self is o

    def __ne__(self, o):  # type: ignore[override]
        return super().__ne__(o) if LogicCapture.current() is not None else self is not o

    __hash__ = Value.__hash__

    def __repr__(self) -> str:
        return f"Dimension({self.name})"


class OutputDimension:
    """A size the function computes and hands back (`acc.Dimension(role=acc.Role.OUTPUT)`).

    Set inside iteration logic (`N.value = expr`: an integer expression of indices, runtime
    sizes and array elements; the last assignment in the scheduled order wins), it is an
    argument like an OUTPUT array of one int64 element: `int64_t*` in C, and from Python a
    numpy int64 array of shape (1,) that receives the value; it cannot be read in logic.

    Set at definition instead (`N.value = expr` outside iteration logic, `N.set(expr)`, or
    `acc.Dimension(role=acc.Role.OUTPUT, value=expr)`; `expr` an expression of INPUT
    dimensions, scalars and numbers), the function computes it when it starts, so it can size
    the nest and an OUTPUT array that the function allocates (see accpy/nest/output_arrays.py).
    """

    def __init__(self, name=None, value=None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected a string, got {type(name).__name__} {name!r}")
        if name:
            check_name(name, "name")
        self.name_given = bool(name)
        self.name = name or inferred_or_generated("dim")
        self.role = Role.OUTPUT
        self.array = Array(role=Role.OUTPUT, shape=(1,), element_type=ScalarType.int64, name=self.name)
        self.array.name_given = self.name_given
        #: the expression computing it when the function starts (None: set in iteration logic)
        self.definition: Optional[Value] = None
        #: the size it stands for inside the function, once defined (a runtime dimension)
        self.size: Optional[Dimension] = None
        #: the definition when it is an affine expression of runtime sizes (`M`, `M + K + 1`): the size
        #: then stands for it inside the function, so that bounds proofs see `N == M + K + 1`
        self.affine: Optional[Expr] = None
        if value is not None:
            self.value = value

    @property
    def value(self):
        """Write-only (`N.value = expr`): inside iteration logic, or at definition; reading it is an error."""
        raise LogicError(f"the OUTPUT dimension {self.name} is computed by the function: set it with "
                         f"`{self.name}.value = ...` inside iteration logic; it cannot be read")

    @value.setter
    def value(self, expr) -> None:
        if LogicCapture.current() is None:
            self._define(expr)
            return
        if self.definition is not None:
            raise LogicError(f"{self.name}.value: {self.name} is already computed when the function starts "
                             f"(set at definition); it cannot also be set in iteration logic")
        v = lift(expr)
        if not v.element_type.is_int:
            raise LogicError(f"{self.name}.value: expected an integer expression, got {v.element_type.name}; "
                             f"use acc.cast(..., acc.ScalarType.int64)")
        record_assignment(self.array, (0,), v if v.element_type is ScalarType.int64 else
                          Value(Cast(v.expr, ScalarType.int64)))

    def set(self, expr) -> None:
        """`N.set(expr)`: Accera's other spelling of `N.value = expr`."""
        self.value = expr

    def _define(self, expr) -> None:
        """`N.value = expr` outside iteration logic: N is computed from `expr` when the function starts.

        `expr`: an int, an INPUT acc.Dimension, an acc.Scalar argument, or an expression of them;
        a float expression (`acc.floor((End - Start) / Step)`) is converted to int64 as C converts.
        """
        if self.definition is not None:
            raise ValueError(f"{self.name}.value: {self.name} is already defined (an OUTPUT dimension is "
                             f"computed once)")
        if isinstance(expr, OutputDimension):
            if expr.definition is None:
                raise ValueError(f"{self.name}.value: {expr.name} is an OUTPUT dimension set in iteration logic; "
                                 f"its value is not known when the function starts")
            expr = expr.size
        try:
            if isinstance(expr, (bool, np.bool_)):
                raise LogicError("a bool")
            v = lift(expr)
        except LogicError:
            raise TypeError(f"{self.name}.value: expected an int, an acc.Dimension, an acc.Scalar or an "
                            f"expression of them, got {type(expr).__name__} {expr!r}") from None
        if v.element_type is ScalarType.bool:
            raise TypeError(f"{self.name}.value: expected an integer expression, got a condition")
        if v.element_type is ScalarType.index and to_affine(v.expr) is not None:
            self.affine = v.expr
        self.definition = v if v.element_type is ScalarType.int64 else Value(Cast(v.expr, ScalarType.int64))
        self.size = Dimension(name=self.name)

    def __repr__(self) -> str:
        return f"OutputDimension({self.name})"


def create_dimensions(role=None):
    """`M, N = acc.create_dimensions()`: runtime sizes named after the variables."""
    names = assigned_names()
    if not names:
        raise RuntimeError("create_dimensions(): assign the result directly to variables, "
                           "e.g. `M, N = acc.create_dimensions()`")
    dims = [Dimension(name=c_name_of_variable(n) or generated_name("dim"), role=role) for n in names]  # `Mé` -> Me
    return dims[0] if len(dims) == 1 else tuple(dims)


def size_expr(s, what: str) -> Expr:
    """A shape entry as an index expression: a positive int, a Dimension or a Parameter."""
    if isinstance(s, Parameter):
        s = s.value  # raises UnresolvedParameter outside Package.add
    if isinstance(s, Dimension):
        return s.var
    if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
        if s < 1:
            raise ValueError(f"{what}: sizes must be integers >= 1, got {s}")
        return Const(int(s))
    if isinstance(s, OutputDimension):
        if s.size is not None:
            return s.affine if s.affine is not None else s.size.var
        raise ValueError(f"{what}: the OUTPUT dimension {s.name} is set in iteration logic, so its value is known "
                         f"only when the function ends; to size an array or a nest with it, set it at "
                         f"definition (`{s.name}.value = ...` outside iteration logic)")
    if _is_inf(s):
        raise ValueError(f"{what}: the size is acc.inf (unbounded) and not known yet: it is taken from the "
                         f"nest index that subscripts that dimension in iteration logic")
    raise TypeError(f"{what}: expected an int >= 1 or an acc.Dimension, got {type(s).__name__} {s!r}")


def _is_inf(s) -> bool:
    return isinstance(s, float) and s == float("inf")


class Array:
    """An n-D array used by nests; becomes a function argument (or constant, or temporary)."""

    Layout = _Layout
    #: the class of views (`sub_array`, `slice`, `_split_dimension`): accpy/nest/views.py's ArrayView,
    #: set when that module is imported (accpy.nest imports it), as it builds on Array
    _view_class = None

    def __init__(self, role: Role = None, name: str = "", data=None, element_type=None,
                 layout=_Layout.FIRST_MAJOR, offset: int = 0, shape=None, flags=AllocateFlags.NONE):
        if not isinstance(role, Role):
            raise TypeError(f"role: expected an acc.Role (INPUT, INPUT_OUTPUT, OUTPUT, CONST, TEMP), got {role!r}")
        if name:
            check_name(name, "name")
        self.name_given = bool(name)
        self.role = role
        self.name = name or inferred_or_generated("array")
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
        if isinstance(shape, (int, Dimension, Parameter)):
            shape = (shape,)
        self._shape = tuple(shape)
        if any(_is_inf(s) for s in self._shape[:-1]):
            raise ValueError(f"shape: only the last dimension can be acc.inf (unbounded), got {list(self._shape)}")
        # the last size acc.inf: taken from the nest index that subscripts it (Accera infers it the same way)
        self._unbounded = bool(self._shape) and _is_inf(self._shape[-1])
        if self._unbounded and role is Role.TEMP:
            raise ValueError("shape: a TEMP array needs its sizes (acc.inf is for arrays given as arguments)")
        if not isinstance(flags, AllocateFlags):
            raise TypeError(f"flags: expected an acc.AllocateFlags (NONE, GLOBAL, STACK, HEAP, THREAD_LOCAL), "
                            f"got {flags!r}")
        if flags & AllocateFlags.STACK and flags & AllocateFlags.HEAP:
            raise ValueError("flags: an array is allocated either on the STACK or on the HEAP, not both")
        self.flags = flags
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
        elif isinstance(layout, GroupedLayout):
            raise ValueError(f"layout: {layout!r} is a cache layout (plan.cache(..., layout={layout!r})); an "
                             f"array is FIRST_MAJOR, LAST_MAJOR, DEFERRED or explicit strides")
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
    def shape(self) -> "Shape":
        """The sizes (ints, Dimensions, Parameters); compares equal to a tuple or a list."""
        return Shape(self._shape)

    @property
    def layout(self):
        """The layout as given: Array.Layout.FIRST_MAJOR / LAST_MAJOR / DEFERRED, or a tuple of strides;
        once `deferred_layout(cache)` fixed a DEFERRED layout, the cache's layout (as in Accera)."""
        cache = getattr(self, "_deferred_cache", None)
        if cache is not None:
            return cache.layout if cache.layout is not None else _Layout.FIRST_MAJOR
        return self.requested_layout

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    def shape_exprs(self) -> tuple:
        """The sizes as IR index expressions (parameters resolved with the values in effect)."""
        return tuple(size_expr(s, f"shape of {self.name}") for s in self._shape)

    def stride_exprs(self) -> tuple:
        """The element strides of each dimension as IR index expressions (from the layout)."""
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
        if not has_parameter(self._shape):
            if self._buffer is None:
                self._buffer = self._new_buffer()
            return self._buffer
        key = tuple(s.name if isinstance(s, Dimension) else s for s in resolve(self._shape))
        if key not in self._buffers:
            self._buffers[key] = self._new_buffer()
        return self._buffers[key]

    def _new_buffer(self) -> Buffer:
        memory = HostMemory.GLOBAL
        if self.role is Role.TEMP and self.flags & AllocateFlags.HEAP:
            memory = HostMemory.HEAP
        elif self.role is Role.TEMP and self.flags & AllocateFlags.STACK:
            memory = HostMemory.LOCAL
        return Buffer(self.name, self.element_type, self.shape_exprs(), self.stride_exprs(),
                      role=self.role.value, memory=memory, data=self.data)

    def resolved_shape(self) -> tuple:
        """The shape with parameters replaced by their current values."""
        return tuple(resolve(self._shape))

    def dimensions(self) -> list:
        """The runtime acc.Dimensions among the sizes, in order."""
        return [s for s in self._shape if isinstance(s, Dimension)]

    # -- logic ----------------------------------------------------------------------------
    def normalize_indices(self, key) -> tuple:
        """A subscript (`A[i, j]`, `A[(i, j)]`) as one integer logic Value per dimension; LogicError if not."""
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
        if getattr(self, "_unbounded", False):
            self._resolve_unbounded(out[-1])
        return tuple(out)

    def _resolve_unbounded(self, last) -> None:
        """The acc.inf last size: the extent of the nest index subscripting that dimension."""
        cap = LogicCapture.current()
        nest = cap.nest if cap is not None else None
        pos = None
        if nest is not None and isinstance(last.expr, Var):
            pos = next((k for k, v in enumerate(nest.index_vars) if v is last.expr), None)
        if pos is None:
            raise LogicError(f"the last dimension of {self.name} is acc.inf (unbounded): its size is taken "
                             f"from the nest index that subscripts it, so index it there with one of the "
                             f"nest's indices alone")
        self._shape = self._shape[:-1] + (nest.get_shape()[pos],)
        self._unbounded = False

    def __getitem__(self, key) -> Access:
        return Access(self, self.normalize_indices(key))

    def __setitem__(self, key, value) -> None:
        record_assignment(self, key, value)

    # -- deferred layout ------------------------------------------------------------------
    def deferred_layout(self, cache) -> None:
        """Store this CONST array's data as `cache` packs it (a DEFERRED layout fixed by a cache).

        The data are packed when the package is built: block after block, each in the
        cache's layout, so the cache costs no copy at run time (the kernel reads the packed
        constant directly). The array must be CONST with `layout=Array.Layout.DEFERRED`,
        and `cache` a cache of this array (`plan.cache(A, ...)`, not a multicache). Its blocks
        must tile the array: each starts at a multiple of the block's extents (as split and
        tile give); otherwise the build raises ScheduleError.
        """
        if self.role is not Role.CONST:
            raise ValueError(f"deferred_layout: {self.name} is {self.role.name}; only CONST arrays have a "
                             f"deferred layout")
        if self.requested_layout is not _Layout.DEFERRED:
            raise ValueError(f"deferred_layout: the layout of {self.name} is already set "
                             f"({self.requested_layout}); create it with layout=Array.Layout.DEFERRED")
        if not (hasattr(cache, "source") and hasattr(cache, "trigger_index")):  # a plan's Cache handle
            raise TypeError(f"cache: expected the Cache returned by plan.cache({self.name}, ...), got {cache!r}")
        if cache.source is not self:
            raise ValueError(f"cache: that cache is of {getattr(cache.source, 'name', cache.source)}, "
                             f"not of {self.name}")
        if getattr(self, "_deferred_cache", None) is not None:
            raise ValueError(f"deferred_layout: the layout of {self.name} is already set (by "
                             f"{'this' if self._deferred_cache is cache else 'another'} cache)")
        if cache.trigger_index is not None or cache.trigger_level is not None:
            raise ValueError("deferred_layout: the cache has a trigger (a multicache); give a cache without one")
        self._deferred_cache = cache

    # -- Accera's private helpers its programs call ------------------------------------------
    @property
    def _size_str(self) -> str:
        """The element count as Accera writes it: the sizes joined by `*` ("M*K", "16*N")."""
        return "*".join(s.name if isinstance(s, Dimension) else str(s) for s in self._shape)

    def _allocate(self) -> None:
        """Accera materializes a TEMP array made inside iteration logic with this; accpy allocates
        every TEMP array the logic uses (zeroed, once per call), so there is nothing to do."""
        if self.role is not Role.TEMP:
            raise ValueError(f"_allocate: {self.name} is {self.role.name}; only TEMP arrays are allocated "
                             f"by the function")

    def _get_native_array(self) -> "Array":
        """The array itself (Accera's handle of the allocated storage)."""
        return self

    def _get_memory_buffer(self):
        """Accera's flat uint8 view of an array's bytes: not built in accpy (NotImplementedError)."""
        raise NotImplementedError(f"_get_memory_buffer of {self.name}: viewing an array's bytes as another "
                                  f"element type is not built in accpy; copy with acc.cast(...) in iteration logic")

    def _reinterpret_cast(self, element_type):
        """Accera's view of an array's bits as another element type: not built in accpy."""
        raise NotImplementedError(f"_reinterpret_cast of {self.name}: reinterpreting an array's bits as "
                                  f"another element type is not built in accpy; convert values with acc.cast(...)")

    # -- views ----------------------------------------------------------------------------
    def sub_array(self, offsets, shape, strides=()) -> "ArrayView":
        """A view of a window of this array: `view[i0, i1, ...]` is `self[offsets[0] + strides[0]*i0, ...]`.

        `offsets`: one per dimension (ints, runtime Dimensions, or index expressions of a nest's
        indices when the view is made inside iteration logic); `shape`: the view's sizes (ints,
        Dimensions or Parameters); `strides`: steps in this array's elements (default 1). The
        view shares this array's storage and role; accesses through it become accesses to this
        array (and are proved to stay inside the view). Windows that do not fit raise ValueError.
        """
        return self._view_class(self, "sub_array", offsets=offsets, shape=shape, strides=strides)

    def slice(self, dims, offsets) -> "ArrayView":
        """A view of lower rank: the dimensions `dims` fixed at `offsets` (one offset per dim).

        E.g. `A.slice([0], [3])` of a 2-D `A` is row 3 of A, indexed by the column.
        """
        return self._view_class(self, "slice", dims=dims, offsets=offsets)

    def _split_dimension(self, dim: int, size) -> "ArrayView":
        """A view with dimension `dim` split in two: (ceil(extent / size), size), first-major, so
        `view[..., a, b, ...]` is `self[..., a * size + b, ...]` (Accera's `_split_dimension`).
        `size`: an int >= 1 (or a constant logic value, `acc.cast(16, acc.ScalarType.index)`)."""
        return self._view_class(self, "split", split=(dim, size))

    def __repr__(self) -> str:
        return f"Array({self.name}: {self.role.name} {self.element_type.name}{list(self._shape)})"


_MEMORY_ROLES = (Role.INPUT_OUTPUT, Role.OUTPUT, Role.TEMP)


class _ScalarType(type):
    """`isinstance(x, Scalar)`: a Scalar, or any scalar value of iteration logic (an index, an array
    element, an expression), as Accera's Scalar is; arrays and runtime dimensions are not."""

    def __instancecheck__(cls, obj) -> bool:
        if cls is Scalar and isinstance(obj, LogicValue) and not isinstance(obj, (Array, Dimension)):
            return True
        return type.__instancecheck__(cls, obj)


def is_scalar_argument(x) -> bool:
    """Whether `x` is an acc.Scalar itself (not any logic value, which isinstance also accepts)."""
    return issubclass(type(x), Scalar)


def _type_and_value(element_type, value, type_):
    if type_ is not None:
        if element_type is not None:
            raise ValueError("Scalar: give the type once (as element_type or as type=)")
        element_type = type_
    if element_type is not None and not isinstance(element_type, ScalarType) and \
            isinstance(element_type, (int, float, np.number)) and not isinstance(element_type, type):
        if value is not None:
            raise ValueError("Scalar: give the value once (as the first argument or as value=)")
        value, element_type = element_type, None
    if value is not None:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"value: expected a number, got {type(value).__name__} {value!r}")
    return element_type, value


class Scalar(Value, metaclass=_ScalarType):
    """`acc.Scalar(element_type=float32, role=Role.INPUT, name="", value=None)` (`type=` is Accera's
    other name for element_type; a number first is the value).

    - INPUT (the default): an argument passed by value; read-only in logic.
    - a value given: a constant, used as a literal of its type (without a type, as the Python number).
    - INPUT_OUTPUT / OUTPUT: an argument passed by pointer, written with `s.set(expr)` in logic:
      `T*` in C, a numpy array of shape (1,) from Python (see MemoryScalar).
    - TEMP: a variable of the function, zero when it starts, never an argument.
    """

    #: the class of scalars held in memory: accpy/nest/scalars.py's MemoryScalar, set when that module
    #: is imported (accpy.nest imports it), as it builds on Array
    _memory_class = None

    def __new__(cls, element_type=None, role: Role = Role.INPUT, name: str = "", value=None, type=None):
        if cls is Scalar and role in _MEMORY_ROLES:
            element_type, value = _type_and_value(element_type, value, type)
            return cls._memory_class(element_type, role, name, value)
        return super().__new__(cls)

    def __init__(self, element_type=None, role: Role = Role.INPUT, name: str = "", value=None, type=None):
        element_type, value = _type_and_value(element_type, value, type)
        # a constant without a type given is used as the Python number it holds (a literal
        # takes the type of the value it meets); with a type, as a constant of that type
        self.literal = value if element_type is None and isinstance(value, (int, float)) else None
        if value is not None and element_type is None:
            element_type = ScalarType.from_dtype(value.dtype) if isinstance(value, np.number) else \
                ScalarType.int64 if isinstance(value, int) else ScalarType.float32
        t = scalar_type(element_type if element_type is not None else ScalarType.float32)
        if role is not Role.INPUT:
            raise ValueError(f"role: a Scalar is INPUT, INPUT_OUTPUT, OUTPUT or TEMP, got {role!r}"
                             + ("; a constant scalar is one with a value (acc.Scalar(value=...))"
                                if role is Role.CONST else ""))
        if name:
            check_name(name, "name")
        self.name_given = bool(name)
        self.name = name or inferred_or_generated("scalar")
        self.role = role
        self.value = value
        if value is not None:
            # a Scalar with a value is a constant: a literal of its type wherever it is used
            if t.is_int:
                if float(value) != int(value):
                    raise ValueError(f"value: {value!r} is not an integer, but the scalar's type is {t.name}")
                lift(int(value), t)  # checks the range
            super().__init__(Const(value, t))
        else:
            super().__init__(Var(self.name, t))

    @property
    def var(self) -> Var:
        """The IR variable of this scalar argument (ValueError for a constant Scalar, which has a value)."""
        if not isinstance(self._expr, Var):
            raise ValueError(f"Scalar {self.name} has a value ({self.value!r}): it is a constant, not an argument")
        return self._expr  # type: ignore[return-value]

    def set(self, value) -> None:
        """Writing is for scalars held in memory: an INPUT scalar is passed by value (LogicError)."""
        raise LogicError(f"{self.name}.set(...): {self.name} is an INPUT scalar, passed by value and read-only; "
                         f"create it with role=acc.Role.INPUT_OUTPUT (an argument the function updates) or "
                         f"acc.Role.TEMP (a variable of the function) to write it")

    def __repr__(self) -> str:
        return f"Scalar({self.name}: {self.element_type.name})"
