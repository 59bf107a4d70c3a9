"""`Nest`: a rectilinear iteration space and the logic run at each of its points."""
from __future__ import annotations

from typing import Optional

from ..errors import LogicError
from ..ir.expr import Var
from .array import DIMENSION_VARS, Dimension, OutputDimension, size_expr
from .parameters import UnresolvedParameter, has_parameter
from .recording import Recording
from .logic import Index, LogicCapture
from .naming import assigned_names, traceback_location

_DEFAULT_NAMES = "ijklmnopqrstuvwxyz"


class Nest:
    """`acc.Nest(shape)`: loops over `shape`, in order, running the iteration logic."""

    def __init__(self, shape):
        if LogicCapture.current() is not None:
            raise LogicError(
                "Nest: a nest built inside another nest's iteration logic (a loop nest run at every "
                "iteration of the outer one) is not built in accpy; build the inner nest outside, over "
                "the combined indices (or as a separate function / fused schedule)")
        if isinstance(shape, (int, Dimension, OutputDimension)):
            shape = (shape,)
        if not isinstance(shape, (list, tuple)) or not shape:
            raise ValueError(f"shape: expected a non-empty list of sizes, got {shape!r}")
        self._shape = tuple(shape)
        if not has_parameter(self._shape):
            for k, sz in enumerate(shape):
                size_expr(sz, f"shape[{k}]")  # validate now; parameter sizes when realized
        names = [_DEFAULT_NAMES[k] if k < len(_DEFAULT_NAMES) else f"i{k}" for k in range(len(shape))]
        self._indices = [Index(n) for n in names]
        self._logic = Recording()  # the logic functions, in order (replayed with parameter values)
        self._statements: list = []  # captured now, when no parameter is needed
        self._arrays: dict = {}  # id -> the Arrays the captured logic accesses
        self._deferred = False  # True once some logic needs parameter values
        self._calls: list = []  # calls of package functions in the logic (nest/functions.py CallRecord)
        self._preconditions: list = []  # on index arguments (analysis/preconditions.py), from the checks

    # -- structure ----------------------------------------------------------------------
    def get_shape(self) -> list:
        """The sizes of the iteration space as given (ints, Dimensions, Parameters)."""
        return list(self._shape)

    @property
    def extents(self) -> tuple:
        """Extents as index expressions (constants, runtime dimensions, parameter values)."""
        return tuple(size_expr(s, f"shape[{k}]") for k, s in enumerate(self._shape))

    @property
    def statements(self) -> list:
        """The captured statements (realized with the parameter values in effect)."""
        if not self._deferred:
            return self._statements
        return self._logic.realized(lambda: self._logic.replay(
            lambda stmts, c: (stmts + self._capture(c.args[0], len(stmts) + 1), None), []))

    @property
    def arrays_used(self) -> list:
        """The Arrays the captured logic accesses."""
        return list(self._arrays.values())

    @property
    def preconditions(self) -> list:
        """Constraints on the index arguments under which every access is in bounds (analysis/preconditions.py)."""
        return list(self._preconditions)

    @property
    def calls(self) -> list:
        """The calls of package functions the logic makes, in order (a nest of calls assigns nothing)."""
        return list(self._calls)

    @property
    def uses_parameters(self) -> bool:
        """Whether the shape or the logic needs parameter values (given at Package.add)."""
        return self._deferred or has_parameter(self._shape)

    def get_indices(self):
        """The loop indices (a tuple; one index for a 1-D nest assigned to a single name), named after the assigned
        variables."""
        names, unpacked = assigned_names(with_kind=True)
        if len(names) == len(self._indices) and not self._logic:
            for ix, n in zip(self._indices, names):
                ix.name = n
                ix._expr = Var(n, ix.var.dtype)
        if len(self._indices) == 1:
            return self._indices[0] if names and not unpacked else list(self._indices)
        return tuple(self._indices)

    @property
    def indices(self) -> tuple:
        """The loop indices, outermost first."""
        return tuple(self._indices)

    @property
    def index_vars(self) -> tuple:
        """The IR variables of the loop indices, outermost first."""
        return tuple(ix.var for ix in self._indices)

    def dimensions(self) -> list:
        """Runtime dimensions used by the shape and the arrays of the logic."""
        out: list = []
        for s in self._shape:
            if isinstance(s, Dimension) and s not in out:
                out.append(s)
        return out

    # -- logic --------------------------------------------------------------------------
    def iteration_logic(self, logic=None, predicate=None, placement=None):
        """Decorator (repeatable): run `logic()` now and record its statements."""
        if predicate is not None or placement is not None:
            raise NotImplementedError("iteration_logic: predicate= and placement= are not supported; "
                                      "use acc.select for conditional values")
        if logic is None:
            return lambda fn: self.iteration_logic(fn)
        if not callable(logic):
            raise TypeError(f"logic: expected a function, got {type(logic).__name__}")
        if not self._deferred and not has_parameter(self._shape):
            try:
                self._statements.extend(self._capture(logic, len(self._statements) + 1))
            except UnresolvedParameter:
                self._deferred = True  # captured (and checked) when the function is added
        else:
            self._deferred = True
        self._logic.add("iteration_logic", (logic,))
        return logic

    def _capture(self, logic, first_number: int) -> list:
        with LogicCapture(self, first_number=first_number) as cap:
            try:
                logic()
            except LogicError as err:
                if str(err).startswith("statement "):
                    raise
                # raised while building an expression: name the statement being written
                file, line, text = traceback_location(err.__traceback__)
                number = cap.first_number + len(cap.statements)
                raise LogicError(f"statement {number} (`{text}`, {file}:{line}): {err}") from None
        if cap.calls:  # a nest of calls (accpy/package/calls.py builds it): no element is assigned
            if cap.statements or self._statements:
                raise LogicError(f"iteration logic `{getattr(logic, '__name__', logic)}` both assigns array "
                                 f"elements and calls package functions; this mix is not built in accpy: put the "
                                 f"assignments in a nest of their own and call it as a function")
            self._calls.extend(cap.calls)
            return []
        if self._calls:
            raise LogicError(f"iteration logic `{getattr(logic, '__name__', logic)}` assigns array elements in a "
                             f"nest whose logic calls package functions; this mix is not built in accpy")
        if not cap.statements:
            raise LogicError(f"iteration logic `{getattr(logic, '__name__', logic)}` assigns no array element")
        from ..analysis.logic_check import check_statements  # analysis is no layer of nest's: a FACADE

        # acc.Dimensions used in an index: index arguments
        pre = check_statements(self, cap.statements, cap.view_accesses, list(cap.arrays.values()),
                               DIMENSION_VARS)
        self._preconditions.extend(p for p in pre if p not in self._preconditions)
        self._arrays.update(cap.arrays)
        return cap.statements

    # -- next stages --------------------------------------------------------------------
    def create_schedule(self):
        """A new acc.Schedule of this nest (default order, no transforms)."""
        from ..schedule.schedule import Schedule  # schedule is above nest: a FACADE

        return Schedule(self)

    def create_plan(self, target=None):
        """`create_schedule().create_plan(target)`: a plan of the default schedule for `target` (HOST when None)."""
        return self.create_schedule().create_plan(target)

    def __repr__(self) -> str:
        return f"Nest(shape={list(self._shape)}, {len(self._logic)} logic function(s))"


def index_position(nest: Nest, var: Var) -> Optional[int]:
    """The position of loop variable `var` in `nest`, or None."""
    for k, v in enumerate(nest.index_vars):
        if v == var:
            return k
    return None
