"""Functions made of calls: a call of a package function (inside iteration logic, or inside a Python
function given to `Package.add`) bound to the caller's arrays, views and index expressions, and
the capture of such a Python function into a sequence of steps; `acc.logic_function`.

A call binds each parameter of the callee: an array parameter to an array or a view of one (an
affine window of a root array: `root[offsets + M @ view_index]`), a dimension or scalar parameter
to an integer (or scalar) expression of the caller's indices, sizes and scalars.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from ..errors import LogicError
from ..ir.affine import to_affine
from ..ir.expr import Cast, Const, Expr, Var
from ..ir.types import ScalarType, widens_to
from ..ir.visitor import accesses
from .array import Array, Dimension, OutputDimension, Scalar
from .logic import Index, LogicCapture, Value, lift
from .naming import traceback_location, user_location
from .nest import Nest
from .views import ArrayView


@dataclass
class ArrayBinding:
    """An array argument of a call: `root[offsets[d] + sum_k coeffs[d][k] * t_k]` for view index t
    (a whole array: zero offsets, the identity), with the view's sizes."""

    root: Array
    offsets: tuple  # one index Expr per root dimension
    coeffs: tuple  # coeffs[d][k]: ints, root dimension d by view dimension k
    shape: tuple  # the view's sizes as index Exprs
    view: object = None  # the ArrayView given (None: the whole array)

    @property
    def whole(self) -> bool:
        """Is the argument the root array itself (no view)?"""
        return self.view is None


@dataclass
class CallRecord:
    """`callee(args...)`: one step of a function, or one statement of a nest's logic."""

    callee: object  # the package function called (package layer: PackageFunction)
    bindings: tuple  # per callee parameter: ArrayBinding, or an Expr (dimension / scalar value)
    file: str = "<unknown>"
    line: int = 0
    text: str = ""
    number: int = 0

    def describe(self) -> str:
        """"call N (`source text`, file:line)", for error messages."""
        loc = f"{self.file}:{self.line}" if self.line else self.file
        return f"call {self.number} (`{self.text}`, {loc})"


def _callee_name(callee) -> str:
    return getattr(callee, "base_name", "") or getattr(callee, "name", "the function")


def _window(view, rank: int) -> tuple:
    """(root array, offsets, coeffs) of a view (or array), from its index map on symbolic indices."""
    ts = tuple(Value(Var(f"accpy_t{k}", ScalarType.index)) for k in range(rank))
    obj, ix = view, ts
    while not isinstance(obj, Array):
        ix = obj.parent_indices(ix)
        obj = obj.parent
    offsets, coeffs = [], []
    for d, e in enumerate(ix):
        a = to_affine(lift(e).expr)
        if a is None:
            raise LogicError(f"the view of {obj.name} given as an argument is not an affine window of it "
                             f"(dimension {d}: `{e!r}`); pass a sub_array or a split of constant size")
        tvars = [t.expr for t in ts]
        coef = dict(a.terms)
        row = [int(coef.get(t, 0)) for t in tvars]
        rest = type(a)([(v, c) for v, c in a.terms if v not in tvars], a.const)
        offsets.append(rest.to_expr())
        coeffs.append(tuple(row))
    return obj, tuple(offsets), tuple(coeffs)


def _bind_array(fname: str, k: int, param: Array, given) -> ArrayBinding:
    if isinstance(given, OutputDimension):
        raise TypeError(f"{fname}: argument {k} ({param.name}): expected an array, got the OUTPUT dimension "
                        f"{given.name}")
    if not isinstance(given, (Array, ArrayView)):
        raise TypeError(f"{fname}: argument {k} ({param.name}): expected an acc.Array (or a view of one), got "
                        f"{type(given).__name__} {given!r}")
    if given.element_type is not param.element_type:
        raise TypeError(f"{fname}: argument {k} ({param.name}): expected {param.element_type.name} elements, "
                        f"got {given.name} of {given.element_type.name}")
    if given.rank != param.rank:
        raise ValueError(f"{fname}: argument {k} ({param.name}): expected an array of rank {param.rank}, got "
                         f"{given.name} of rank {given.rank}")
    if isinstance(given, Array):
        root, offsets = given, tuple(Const(0) for _ in range(given.rank))
        coeffs = tuple(tuple(int(d == e) for e in range(given.rank)) for d in range(given.rank))
        shape = given.shape_exprs()
        return ArrayBinding(root, offsets, coeffs, shape)
    root, offsets, coeffs = _window(given, given.rank)
    return ArrayBinding(root, offsets, coeffs, given.shape_exprs(), view=given)


def _bind_value(fname: str, k: int, param, given) -> Expr:
    what = f"{fname}: argument {k} ({param.name})"
    if isinstance(given, (Array, OutputDimension)) or hasattr(given, "parent_indices"):
        raise TypeError(f"{what}: expected a value, got the array {given.name}")
    try:
        v = lift(given, ScalarType.index if isinstance(param, Dimension) else param.element_type)
    except LogicError as e:
        raise TypeError(f"{what}: {e}") from None
    if isinstance(param, Dimension):
        if not v.element_type.is_int:
            raise TypeError(f"{what}: expected an integer (index) value, got {v.element_type.name}")
        return v.expr if v.element_type is ScalarType.index else Cast(v.expr, ScalarType.index)
    t = param.element_type
    if v.element_type is not t:
        if not widens_to(v.element_type, t) and not (isinstance(v.expr, Const)):
            raise TypeError(f"{what}: expected a {t.name} value, got {v.element_type.name}; use acc.cast(...)")
        return Cast(v.expr, t)
    return v.expr


def bind_call(callee, params: tuple, given: tuple) -> CallRecord:
    """The call `callee(*given)` against its parameters `params` (the Arrays, Dimensions and Scalars
    it was added with), checked: count, kinds, element types, ranks."""
    fname = _callee_name(callee)
    if len(given) != len(params):
        raise TypeError(f"{fname}: takes {len(params)} argument{'s' if len(params) != 1 else ''} "
                        f"({', '.join(p.name for p in params)}), got {len(given)}")
    out = []
    for k, (p, g) in enumerate(zip(params, given)):
        if isinstance(p, Array):
            out.append(_bind_array(fname, k, p, g))
        elif isinstance(p, (Dimension, Scalar)):
            out.append(_bind_value(fname, k, p, g))
        else:
            raise NotImplementedError(f"{fname}: argument {k} ({getattr(p, 'name', p)}): calling a function with "
                                      f"a {type(p).__name__} parameter is not built in accpy")
    file, line, text = user_location()
    return CallRecord(callee, tuple(out), file, line, text)


def record_call(callee, params: tuple, given: tuple) -> None:
    """`callee(*given)` written inside iteration logic or inside a function given to Package.add."""
    cap = LogicCapture.current()
    if cap is None:
        raise TypeError(
            f"{_callee_name(callee)}: a package function is called inside iteration logic or inside a Python "
            f"function given to Package.add (it becomes a call in the generated code); to run it, build the "
            f"package and call the loaded function (lib.{_callee_name(callee)}(...))")
    rec = bind_call(callee, params, given)
    cap.record_call(rec)


# -- Python functions given to Package.add ------------------------------------------------------

class FunctionCapture(LogicCapture):
    """Runs a Python function given to Package.add on its arguments, recording its steps in order:
    calls of package functions, and element assignments (each one a step of its own)."""

    def __init__(self):
        super().__init__(None)
        #: ("call", CallRecord) and ("store", LogicStatement, view obligations) in program order
        self.steps: list = []
        #: the Arrays the function uses (id -> Array): arguments, TEMP arrays, arrays read
        self.used: dict = {}

    def record_call(self, rec: CallRecord) -> None:
        rec.number = len(self.steps) + 1
        for b in rec.bindings:
            if isinstance(b, ArrayBinding):
                self.used.setdefault(id(b.root), b.root)
        self.steps.append(("call", rec))

    def record(self, array, indices: tuple, value, reduce):
        where = super().record(array, indices, value, reduce)
        self.used.setdefault(id(array), array)
        self.used.update(self.arrays)
        obligations = list(self.view_accesses)
        self.view_accesses.clear()
        self.statements.clear()
        where.number = len(self.steps) + 1
        self.steps.append(("store", where, obligations))
        return where


def capture_function(fn, args: tuple) -> FunctionCapture:
    """Run `fn(*args)` (a Python function given to Package.add), recording its steps."""
    with FunctionCapture() as cap:
        try:
            fn(*args)
        except LogicError as err:
            if str(err).startswith(("statement ", "call ")):
                raise

            file, line, text = traceback_location(err.__traceback__)
            raise LogicError(f"step {len(cap.steps) + 1} of {getattr(fn, '__name__', 'the function')} "
                             f"(`{text}`, {file}:{line}): {err}") from None
    return cap


# -- acc.logic_function ------------------------------------------------------------------------

class LogicFunction:
    """`acc.logic_function(fn)`: `fn` with the arrays and indices it captures (globals and closure
    variables) listed, and callable with some of them replaced: `logic(A=other_array)` runs `fn`
    with `A` standing for `other_array` (the replacements are undone when it returns)."""

    _KINDS = (Array, Index)

    def __init__(self, func):
        if isinstance(func, LogicFunction):
            func = func.func
        if not callable(func) or not hasattr(func, "__code__"):
            raise TypeError(f"logic_function: expected a Python function, got {type(func).__name__} {func!r}")
        self.func = func
        self.__name__ = func.__name__
        cv = inspect.getclosurevars(func)
        self.func_globals = dict(cv.globals)
        self.func_nonlocals = dict(cv.nonlocals)

    def get_captures(self, kind=None) -> dict:
        """The captured names and values (of type `kind`, or arrays, indices and everything else when None)."""
        out = {}
        for d in (self.func_globals, self.func_nonlocals):
            for k, v in d.items():
                if kind is None or isinstance(v, kind):
                    out[k] = v
                elif isinstance(v, (list, tuple)) and v and all(isinstance(x, kind) for x in v):
                    out[k] = v
        return out

    def get_args(self) -> dict:
        """The captured arrays."""
        return self.get_captures(Array)

    def get_indices(self) -> dict:
        """The captured indices."""
        return self.get_captures(Index)

    def __call__(self, **replace):
        unknown = [k for k in replace if k not in self.func_globals and k not in self.func_nonlocals]
        if unknown:
            raise TypeError(f"{self.__name__}: {', '.join(unknown)} is not a variable the function captures "
                            f"(it captures {', '.join(sorted({**self.func_globals, **self.func_nonlocals})) or 'none'})")
        saved_globals = {k: self.func.__globals__[k] for k in replace if k in self.func_globals}
        cells = dict(zip(self.func.__code__.co_freevars, self.func.__closure__ or ()))
        saved_cells = {k: cells[k].cell_contents for k in replace if k in cells}
        try:
            for k in saved_globals:
                self.func.__globals__[k] = replace[k]
            for k in saved_cells:
                cells[k].cell_contents = replace[k]
            return self.func()
        finally:
            for k, v in saved_globals.items():
                self.func.__globals__[k] = v
            for k, v in saved_cells.items():
                cells[k].cell_contents = v

    def __repr__(self) -> str:
        return f"LogicFunction({self.__name__})"


def logic_function(func) -> LogicFunction:
    """`acc.logic_function(fn)`: a LogicFunction of `fn` (itself when `fn` already is one)."""
    return func if isinstance(func, LogicFunction) else LogicFunction(func)



def statement_nest(where, obligations=(), arrays=()):
    """A one-point Nest whose logic is the statement `where` (an element assignment made in a function
    given to Package.add), checked as any logic is (roles, bounds, the views' `obligations`);
    `arrays`: the Arrays the function uses (those the statement accesses are the nest's)."""
    touched = {a.buffer for a in accesses(where.store)}
    mine = [a for a in arrays if a.buffer in touched]

    def assignment():
        cap = LogicCapture.current()
        cap.view_accesses.extend(obligations)
        cap.statements.append(where)
        for a in mine:
            cap.arrays.setdefault(id(a), a)

    assignment.__name__ = f"step {where.number}"
    nest = Nest([1])
    nest.iteration_logic(assignment)
    return nest
