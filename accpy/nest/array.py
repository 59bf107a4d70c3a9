"""Data of a nest: `Array` (roles, element types, layouts), `Scalar` and runtime `Dimension`s."""
from __future__ import annotations

import enum
from typing import Optional

import numpy as np

from ..errors import LogicError
from ..ir.expr import Buffer, Cast, Const, Expr, Var, idx_op
from ..ir.names import check_name
from ..ir.types import ScalarType
from .logic import Access, Value, lift, record_assignment, scalar_type  # noqa: F401  (scalar_type: re-exported)
from .naming import assigned_names, inferred_or_generated


class Role(enum.Enum):
    """Role of an array in a function: INPUT, INPUT_OUTPUT, OUTPUT, CONST (built-in data) or TEMP (internal)."""

    INPUT = "input"
    INPUT_OUTPUT = "input_output"
    OUTPUT = "output"
    CONST = "const"
    TEMP = "temp"




class Dimension(Value):
    """A size known only when the function is called (an `int64_t` argument in C)."""

    class Role(enum.Enum):
        INPUT = "input"
        OUTPUT = "output"

    def __new__(cls, name=None, role=None, value=None):
        if isinstance(name, (Role, Dimension.Role)) and not isinstance(role, (Role, Dimension.Role)):
            name, role = role, name
        if role in (Role.OUTPUT, Dimension.Role.OUTPUT):
            return OutputDimension(name)  # (not a Dimension: __init__ does not run)
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

    @property
    def var(self) -> Var:
        """The IR variable standing for this size in expressions and the C signature."""
        return self._expr  # type: ignore[return-value]

    def __eq__(self, o):  # type: ignore[override]
        # a condition inside iteration logic; identity elsewhere (`A.shape == [M, 3]`, `M in dims`)
        from .logic import LogicCapture

        return super().__eq__(o) if LogicCapture.current() is not None else self is o

    def __ne__(self, o):  # type: ignore[override]
        from .logic import LogicCapture

        return super().__ne__(o) if LogicCapture.current() is not None else self is not o

    __hash__ = Value.__hash__

    def __repr__(self) -> str:
        return f"Dimension({self.name})"


class OutputDimension:
    """A size the function computes and hands back (`acc.Dimension(role=acc.Role.OUTPUT)`).

    Inside iteration logic, `N.value = expr` (an integer expression of indices, runtime
    sizes and array elements) sets it; the last assignment in the scheduled order wins.
    It is an argument like an OUTPUT array of one int64 element: `int64_t*` in C, and from
    Python a numpy int64 array of shape (1,) that receives the value. It cannot size an
    array (arrays the function allocates are not supported) and cannot be read in logic.
    """

    def __init__(self, name=None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected a string, got {type(name).__name__} {name!r}")
        if name:
            check_name(name, "name")
        self.name_given = bool(name)
        self.name = name or inferred_or_generated("dim")
        self.role = Role.OUTPUT
        self.array = Array(role=Role.OUTPUT, shape=(1,), element_type=ScalarType.int64, name=self.name)
        self.array.name_given = self.name_given

    @property
    def value(self):
        """Write-only inside iteration logic (`N.value = expr`); reading it is an error."""
        raise LogicError(f"the OUTPUT dimension {self.name} is computed by the function: set it with "
                         f"`{self.name}.value = ...` inside iteration logic; it cannot be read")

    @value.setter
    def value(self, expr) -> None:
        from .logic import LogicCapture

        if LogicCapture.current() is None:
            raise LogicError(f"{self.name}.value = ... sets an OUTPUT dimension inside iteration logic only")
        v = lift(expr)
        if not v.element_type.is_int:
            raise LogicError(f"{self.name}.value: expected an integer expression, got {v.element_type.name}; "
                             f"use acc.cast(..., acc.ScalarType.int64)")
        record_assignment(self.array, (0,), v if v.element_type is ScalarType.int64 else
                          Value(Cast(v.expr, ScalarType.int64)))

    def __repr__(self) -> str:
        return f"OutputDimension({self.name})"


def create_dimensions(role=None):
    """`M, N = acc.create_dimensions()`: runtime sizes named after the variables."""
    names = assigned_names()
    if not names:
        raise RuntimeError("create_dimensions(): assign the result directly to variables, "
                           "e.g. `M, N = acc.create_dimensions()`")
    dims = [Dimension(name=n, role=role) for n in names]
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
    if isinstance(s, OutputDimension):
        raise NotImplementedError(f"{what}: the OUTPUT dimension {s.name} cannot size an array (arrays the "
                                  f"function allocates are not supported); size it with an INPUT dimension")
    if isinstance(s, float) and s == float("inf"):
        raise NotImplementedError(f"{what}: unbounded (acc.inf) sizes are not supported; give the size, "
                                  f"an acc.Dimension or a parameter")
    raise TypeError(f"{what}: expected an int >= 1 or an acc.Dimension, got {type(s).__name__} {s!r}")


class Shape(tuple):
    """An array's shape: a tuple that also equals a list of the same sizes (`A.shape == [2, 3]`)."""

    def __eq__(self, other):
        return tuple.__eq__(self, tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__


class _Layout(enum.Enum):
    FIRST_MAJOR = "first_major"
    LAST_MAJOR = "last_major"
    DEFERRED = "deferred"
    # a cache layout: first-major, with the rows of the second-to-last dimension in groups of
    # 32 bits' worth (4 int8 / 2 bfloat16) interleaved into the last one, as the dot-product
    # instructions read their second operand (VNNI order)
    VNNI = "vnni"


class Array:
    """An n-D array used by nests; becomes a function argument (or constant, or temporary)."""

    Layout = _Layout

    def __init__(self, role: Role = None, name: str = "", data=None, element_type=None,
                 layout=_Layout.FIRST_MAJOR, offset: int = 0, shape=None):
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
        from .parameters import Parameter

        if isinstance(shape, (int, Dimension, Parameter)):
            shape = (shape,)
        self._shape = tuple(shape)
        for k, s in enumerate(self._shape):
            if isinstance(s, float) and s == float("inf"):
                size_expr(s, f"shape[{k}]")  # explains that unbounded sizes are not supported
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
        elif layout is _Layout.VNNI:
            raise ValueError("layout: Array.Layout.VNNI is a cache layout (plan.cache(..., layout=Array.Layout.VNNI)); "
                             "an array is FIRST_MAJOR, LAST_MAJOR, DEFERRED or explicit strides")
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
        """The layout as given: Array.Layout.FIRST_MAJOR / LAST_MAJOR / DEFERRED, or a tuple of strides."""
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
        return tuple(out)

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
        if getattr(self, "_deferred_cache", None) is not None and self._deferred_cache is not cache:
            raise ValueError(f"deferred_layout: the layout of {self.name} is already set by another cache")
        if cache.trigger_index is not None or cache.trigger_level is not None:
            raise ValueError("deferred_layout: the cache has a trigger (a multicache); give a cache without one")
        self._deferred_cache = cache

    # -- views ----------------------------------------------------------------------------
    def sub_array(self, offsets, shape, strides=()) -> "ArrayView":
        """A view of a window of this array: `view[i0, i1, ...]` is `self[offsets[0] + strides[0]*i0, ...]`.

        `offsets`: one per dimension (ints, runtime Dimensions, or index expressions of a nest's
        indices when the view is made inside iteration logic); `shape`: the view's sizes (ints,
        Dimensions or Parameters); `strides`: steps in this array's elements (default 1). The
        view shares this array's storage and role; accesses through it become accesses to this
        array (and are proved to stay inside the view). Windows that do not fit raise ValueError.
        """
        return ArrayView(self, "sub_array", offsets=offsets, shape=shape, strides=strides)

    def slice(self, dims, offsets) -> "ArrayView":
        """A view of lower rank: the dimensions `dims` fixed at `offsets` (one offset per dim).

        E.g. `A.slice([0], [3])` of a 2-D `A` is row 3 of A, indexed by the column.
        """
        return ArrayView(self, "slice", dims=dims, offsets=offsets)

    def __repr__(self) -> str:
        return f"Array({self.name}: {self.role.name} {self.element_type.name}{list(self._shape)})"


def _view_int(x, what: str, minimum: int):
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{what}: expected an integer, got {x!r}")
    if isinstance(x, (int, np.integer)):
        if x < minimum:
            raise ValueError(f"{what}: expected an integer >= {minimum}, got {x}")
        return int(x)
    return None


class ArrayView:
    """A window of an Array (`Array.sub_array`, `Array.slice`): the same storage, indexed anew.

    A view is used in iteration logic like an array; each access becomes an access to the
    root array (so analyses, caches and generated code see only that array), and the view's
    own bounds are proved like any array's. Pass the root array as a function argument and
    to `plan.cache`, not the view.
    """

    def __init__(self, parent, kind: str, offsets, shape=None, strides=(), dims=None):
        from .parameters import Parameter

        self.parent = parent
        self.kind = kind
        what = f"{kind} of {parent.name}"
        prank = parent.rank
        offsets = tuple(offsets) if isinstance(offsets, (list, tuple)) else (offsets,)
        if kind == "sub_array":
            shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
            if len(offsets) != prank or len(shape) != prank:
                raise ValueError(f"{what}: expected {prank} offsets and {prank} sizes (the rank of "
                                 f"{parent.name}), got {len(offsets)} and {len(shape)}")
            strides = tuple(strides) if strides else (1,) * prank
            if len(strides) != prank:
                raise ValueError(f"{what}: strides: expected {prank} strides, got {len(strides)}")
            for k, st in enumerate(strides):
                if _view_int(st, f"{what}: strides[{k}]", 1) is None:
                    raise TypeError(f"{what}: strides[{k}]: expected an integer >= 1, got {st!r}")
            for k, sz in enumerate(shape):
                if _view_int(sz, f"{what}: shape[{k}]", 1) is None and not isinstance(sz, (Dimension, Parameter)):
                    raise TypeError(f"{what}: shape[{k}]: expected an int >= 1, an acc.Dimension or a "
                                    f"parameter, got {sz!r}")
            self._kept = tuple(range(prank))
            self._fixed = {}
            self._offsets, self._strides, self._shape = offsets, strides, shape
        elif kind == "slice":
            dims = tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)
            if len(dims) != len(offsets):
                raise ValueError(f"{what}: expected one offset per sliced dimension, got {len(dims)} "
                                 f"dimensions and {len(offsets)} offsets")
            for d in dims:
                if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not 0 <= d < prank:
                    raise ValueError(f"{what}: dims: expected dimensions of {parent.name} (0..{prank - 1}), got {d!r}")
            if len(set(dims)) != len(dims):
                raise ValueError(f"{what}: dims: a dimension is given twice: {list(dims)}")
            if len(dims) >= prank:
                raise ValueError(f"{what}: slicing all {prank} dimensions leaves no array; index {parent.name} instead")
            self._fixed = dict(zip((int(d) for d in dims), offsets))
            self._kept = tuple(d for d in range(prank) if d not in self._fixed)
            pshape = parent.shape
            self._offsets = tuple(self._fixed.get(d, 0) for d in range(prank))
            self._strides = (1,) * prank
            self._shape = tuple(pshape[d] for d in self._kept)
        else:  # pragma: no cover - internal
            raise ValueError(kind)
        for k, off in enumerate(self._offsets):
            if _view_int(off, f"{what}: offsets[{k}]", 0) is None and not isinstance(off, (Dimension, Value)):
                raise TypeError(f"{what}: offsets[{k}]: expected an int >= 0, an acc.Dimension or an index "
                                f"expression, got {off!r}")
        self._check_fits(what)
        self.name = f"{parent.name}_{kind}"
        self.role = parent.role
        self.element_type = parent.element_type

    def _check_fits(self, what: str) -> None:
        """A window of known numbers must lie inside the parent (runtime sizes are proved at use)."""
        pshape = self.parent.shape
        view_shape = dict(zip(self._kept, self._shape)) if self.kind == "slice" else dict(enumerate(self._shape))
        for d in range(self.parent.rank):
            off, psz = self._offsets[d], pshape[d]
            if not isinstance(off, int) or not isinstance(psz, (int, np.integer)):
                continue
            if d in self._fixed:
                last = off
            else:
                sz = view_shape[d]
                if not isinstance(sz, int):
                    continue
                last = off + (sz - 1) * self._strides[d]
            if last >= psz:
                raise ValueError(f"{what}: dimension {d} reaches element {last}, but {self.parent.name} has "
                                 f"{psz} there (offset {off}" + (f", size {view_shape[d]}, stride "
                                                                 f"{self._strides[d]})" if d not in self._fixed else ")"))

    # -- the Array interface used by logic ------------------------------------------------
    @property
    def shape(self) -> "Shape":
        """The view's sizes."""
        return Shape(self._shape)

    @property
    def rank(self) -> int:
        """The view's number of dimensions."""
        return len(self._shape)

    @property
    def root(self) -> "Array":
        """The array whose storage this view (or a view of a view) shares."""
        return self.parent.root if isinstance(self.parent, ArrayView) else self.parent

    def shape_exprs(self) -> tuple:
        """The view's sizes as IR index expressions."""
        return tuple(size_expr(s, f"shape of {self.name}") for s in self._shape)

    def normalize_indices(self, key) -> tuple:
        """A subscript of the view, checked like an array's (rank, integer type)."""
        return Array.normalize_indices(self, key)

    def parent_indices(self, indices: tuple) -> tuple:
        """Logic Values indexing the parent for the view's `indices`."""
        out = []
        kept = iter(indices)
        for d in range(self.parent.rank):
            off = self._offsets[d]
            off_v = lift(off)
            if d in self._fixed:
                out.append(off_v)
            else:
                ix = next(kept)
                st = self._strides[d]
                term = ix if st == 1 else ix * st
                out.append(term if isinstance(off, int) and off == 0 else off_v + term)
        return tuple(out)

    def _to_root(self, indices: tuple):
        """(root array, its indices) for view `indices`; records the view's bounds obligation."""
        from .logic import LogicCapture

        cap = LogicCapture.current()
        if cap is not None:
            cap.note_view_access(self, indices)
        parent_ix = self.parent_indices(indices)
        if isinstance(self.parent, ArrayView):
            return self.parent._to_root(parent_ix)
        return self.parent, parent_ix

    def __getitem__(self, key) -> Access:
        array, ix = self._to_root(self.normalize_indices(key))
        return Access(array, ix)

    def __setitem__(self, key, value) -> None:
        array, ix = self._to_root(self.normalize_indices(key))
        record_assignment(array, tuple(ix), value)

    def sub_array(self, offsets, shape, strides=()) -> "ArrayView":
        """A window of this view (see Array.sub_array)."""
        return ArrayView(self, "sub_array", offsets=offsets, shape=shape, strides=strides)

    def slice(self, dims, offsets) -> "ArrayView":
        """This view with dimensions `dims` fixed at `offsets` (see Array.slice)."""
        return ArrayView(self, "slice", dims=dims, offsets=offsets)

    def __repr__(self) -> str:
        return f"ArrayView({self.kind} of {self.parent.name}: {self.role.name} {self.element_type.name}{list(self._shape)})"


class Scalar(Value):
    """A runtime scalar argument (by value when INPUT)."""

    def __init__(self, element_type=None, role: Role = Role.INPUT, name: str = "", value=None):
        if element_type is not None and not isinstance(element_type, ScalarType) and \
                isinstance(element_type, (int, float, np.number)) and not isinstance(element_type, type):
            if value is not None:
                raise ValueError("Scalar: give the value once (as the first argument or as value=)")
            value, element_type = element_type, None
        # a constant without a type given is used as the Python number it holds (a literal
        # takes the type of the value it meets); with a type, as a constant of that type
        self.literal = value if element_type is None and isinstance(value, (int, float)) else None
        if value is not None:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                raise TypeError(f"value: expected a number, got {type(value).__name__} {value!r}")
            if element_type is None:
                element_type = ScalarType.from_dtype(value.dtype) if isinstance(value, np.number) else \
                    ScalarType.int64 if isinstance(value, int) else ScalarType.float32
        t = scalar_type(element_type if element_type is not None else ScalarType.float32)
        if role is not Role.INPUT:
            raise NotImplementedError("Scalar: only INPUT scalars are supported")
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

    def __repr__(self) -> str:
        return f"Scalar({self.name}: {self.element_type.name})"
