"""Views of arrays (`Array.sub_array`, `Array.slice`, `Array._split_dimension`): the same
storage indexed anew; every access through a view becomes an access to the root array."""
from __future__ import annotations

import numpy as np

from ..errors import LogicError
from ..ir.affine import to_affine
from ..ir.expr import BinOp, Const, idx_op
from .array import Array, Dimension, Shape, size_expr
from .logic import Access, LogicCapture, Value, lift, record_assignment
from .parameters import Parameter


def _view_int(x, what: str, minimum: int):
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{what}: expected an integer, got {x!r}")
    if isinstance(x, (int, np.integer)):
        if x < minimum:
            raise ValueError(f"{what}: expected an integer >= {minimum}, got {x}")
        return int(x)
    return None


def _is_int_value(x) -> bool:
    return isinstance(x, Value) and x.element_type.is_int


def _constant_of(x):
    """The integer a logic value stands for when it is a constant (`acc.cast(16, index)`), else None."""
    if isinstance(x, Value):
        a = to_affine(x.expr)
        return int(a.const) if a is not None and a.is_const else None
    return None


def _bounds_of(size_expr_) -> list:
    """Upper bounds an index below `size_expr_` must respect, as affine expressions: the size
    itself, or each operand of a `min` of them (`min(N - i, 16)`); [] when neither (the root
    array's own bounds still hold every access)."""
    if to_affine(size_expr_) is not None:
        return [size_expr_]
    if isinstance(size_expr_, BinOp) and size_expr_.op == "min":
        a, b = _bounds_of(size_expr_.a), _bounds_of(size_expr_.b)
        return a + b if a and b else (a or b)
    return []


class _Obligation:
    """One bound of a view's dimension, as the bounds proof reads a view (a kind, a parent, sizes)."""

    def __init__(self, view, dim: int, bound):
        self.kind = view.kind if view.rank == 1 else f"{view.kind} (its dimension {dim})"
        self.parent = view.parent
        self._bound = bound

    def shape_exprs(self) -> tuple:
        return (self._bound,)


class ArrayView:
    """A window of an Array (`Array.sub_array`, `Array.slice`, `Array._split_dimension`).

    A view is used in iteration logic like an array; each access becomes an access to the
    root array (so analyses, caches and generated code see only that array), and the view's
    own bounds are proved like any array's. Pass the root array as a function argument and
    to `plan.cache`, not the view.
    """

    def __init__(self, parent, kind: str, offsets=(), shape=None, strides=(), dims=None, split=None):
        self.parent = parent
        self.kind = kind
        what = f"{kind} of {parent.name}"
        prank = parent.rank
        self._split = None
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
            shape = tuple(_constant_of(s) or s for s in shape)
            for k, sz in enumerate(shape):
                if _view_int(sz, f"{what}: shape[{k}]", 1) is None and \
                        not isinstance(sz, (Dimension, Parameter)) and not _is_int_value(sz):
                    raise TypeError(f"{what}: shape[{k}]: expected an int >= 1, an acc.Dimension, a "
                                    f"parameter or an integer expression of indices, got {sz!r}")
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
        elif kind == "split":
            self._split_init(split, what)
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

    def _split_init(self, split, what: str) -> None:
        """`_split_dimension(dim, size)`: dimension `dim` (extent E) as (ceil(E / size), size)."""
        dim, size = split
        prank = self.parent.rank
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or not 0 <= dim < prank:
            raise ValueError(f"{what}: dim: expected a dimension of {self.parent.name} (0..{prank - 1}), got {dim!r}")
        const = _constant_of(size)
        size = const if const is not None else size
        if isinstance(size, float) and size.is_integer():
            size = int(size)
        if isinstance(size, Dimension) or (isinstance(size, Value) and size.element_type.is_int):
            raise NotImplementedError(
                f"{what}: size: a split size known only at run time ({size!r}) makes the index "
                f"`outer * size + inner`, which is not affine; accpy's analyses need a constant split "
                f"size (an int, or acc.cast(<int>, acc.ScalarType.index))")
        if _view_int(size, f"{what}: size", 1) is None:
            raise TypeError(f"{what}: size: expected an integer >= 1, got {size!r}")
        dim = int(dim)
        extent = self.parent.shape[dim]
        if isinstance(extent, (int, np.integer)):
            outer = -(-int(extent) // size)
        else:  # a runtime or index-dependent extent: ceil(extent / size), a quasi-affine size
            outer = Value(idx_op("floordiv", idx_op("add", _size_expr(extent), Const(size - 1)), Const(size)))
        pshape = list(self.parent.shape)
        self._split = (dim, size)
        self._kept = tuple(range(prank))
        self._fixed = {}
        self._offsets, self._strides = (0,) * prank, (1,) * prank
        self._shape = tuple(pshape[:dim] + [outer, size] + pshape[dim + 1:])

    def _check_fits(self, what: str) -> None:
        """A window of known numbers must lie inside the parent (runtime sizes are proved at use)."""
        if self._split is not None:
            return
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
    def layout(self) -> tuple:
        """The view's layout as explicit strides: per dimension of the view, the step in elements of
        the root array's storage (ints; index expressions where runtime sizes enter), e.g. (256, 1)
        for a window of a first-major 256 x 256 array. Two views of one array with the same
        strides have equal layouts (their offsets may differ: see `offset`)."""
        return tuple(_plain_int(e) for e in self.stride_exprs())

    @property
    def offset(self):
        """Where the view's element (0, ..., 0) is in the root array's storage, in elements (an int, or
        an index expression where runtime sizes or indices enter)."""
        return _plain_int(self.offset_expr())

    def stride_exprs(self) -> tuple:
        """The view's strides in the root's storage as IR index expressions (see `layout`)."""
        ps = self.parent.stride_exprs()
        if self._split is not None:
            d, size = self._split
            return tuple(ps[:d]) + (idx_op("mul", ps[d], Const(size)), ps[d]) + tuple(ps[d + 1:])
        return tuple(ps[d] if self._strides[d] == 1 else idx_op("mul", ps[d], Const(self._strides[d]))
                     for d in self._kept)

    def offset_expr(self):
        """`offset` as an IR index expression."""
        ps = self.parent.stride_exprs()
        total = self.parent.offset_expr() if isinstance(self.parent, ArrayView) else Const(0)
        for d, off in enumerate(self._offsets):
            if isinstance(off, int) and off == 0:
                continue
            total = idx_op("add", total, idx_op("mul", lift(off).expr, ps[d]))
        return total

    @property
    def root(self) -> "Array":
        """The array whose storage this view (or a view of a view) shares."""
        return self.parent.root if isinstance(self.parent, ArrayView) else self.parent

    def shape_exprs(self) -> tuple:
        """The view's sizes as IR index expressions."""
        return tuple(_size_expr(s, f"shape of {self.name}") for s in self._shape)

    def normalize_indices(self, key) -> tuple:
        """A subscript of the view, checked like an array's (rank, integer type)."""
        return Array.normalize_indices(self, key)

    def parent_indices(self, indices: tuple) -> tuple:
        """Logic Values indexing the parent for the view's `indices`."""
        if self._split is not None:
            d, size = self._split
            return tuple(indices[:d]) + (indices[d] * size + indices[d + 1],) + tuple(indices[d + 2:])
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

    def _note_bounds(self, cap, indices: tuple) -> None:
        """Record the view's bounds obligations for `indices` (proved when the logic is checked)."""
        sizes = self.shape_exprs()
        if all(to_affine(s) is not None for s in sizes):
            cap.note_view_access(self, indices)
            return
        for d, (ix, s) in enumerate(zip(indices, sizes)):
            for bound in _bounds_of(s):
                cap.note_view_access(_Obligation(self, d, bound), (ix,))

    def _to_root(self, indices: tuple):
        """(root array, its indices) for view `indices`; records the view's bounds obligation."""
        cap = LogicCapture.current()
        if cap is not None:
            self._note_bounds(cap, indices)
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

    def _split_dimension(self, dim: int, size) -> "ArrayView":
        """This view with dimension `dim` split in two (see Array._split_dimension)."""
        return ArrayView(self, "split", split=(dim, size))

    def __repr__(self) -> str:
        return f"ArrayView({self.kind} of {self.parent.name}: {self.role.name} {self.element_type.name}{list(self._shape)})"


def _plain_int(e):
    """An index expression as an int where it is a constant, else the expression."""
    return int(e.value) if isinstance(e, Const) else e


def _size_expr(s, what: str = "shape"):
    """A view's size as an index expression: an array's sizes, or an integer logic value."""
    if isinstance(s, Value):
        if not s.element_type.is_int:
            raise LogicError(f"{what}: expected an integer size, got {s.element_type.name}")
        return s.expr
    return size_expr(s, what)


Array._view_class = ArrayView
