"""Capture of iteration logic: Python operators on `Value`s build IR expressions, and
assignments to array elements record statements into the active `LogicCapture`.

Types follow numpy: arithmetic happens in the operands' common type; operands of
different types meet only by exact (widening) conversion, otherwise `acc.cast` is needed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import LogicError
from ..ir.boolean import conjunction, conjuncts
from ..ir.expr import BinOp, Call, Cast, Const, Expr, Load, Select, UnOp, Var
from ..ir.printer import expr_str
from ..ir.stmt import If, Store
from ..ir.types import ScalarType, common_type, int_range, widens_to
from ..ir.visitor import Visitor
from .handles import LogicIndex, LogicValue
from .naming import user_frame, user_location
from .parameters import Parameter


def _describe(t: ScalarType) -> str:
    return t.name


class Value(LogicValue):
    """A typed expression inside iteration logic."""

    __array_priority__ = 1000  # make numpy scalars defer to our operators

    def __init__(self, expr: Expr):
        self._expr = expr

    @property
    def expr(self) -> Expr:
        """The IR expression this value stands for."""
        return self._expr

    @property
    def element_type(self) -> ScalarType:
        """The acc.ScalarType of the value."""
        return self.expr.dtype

    # arithmetic
    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __floordiv__(self, o): return binary("floordiv", self, o)
    def __rfloordiv__(self, o): return binary("floordiv", o, self)
    def __mod__(self, o): return binary("mod", self, o)
    def __rmod__(self, o): return binary("mod", o, self)
    def __pow__(self, o): return binary("pow", self, o)
    def __rpow__(self, o): return binary("pow", o, self)
    def __neg__(self): return unary("neg", self)
    def __pos__(self): return self

    def __abs__(self):  # acc.abs (ops.py), written here so that logic needs nothing of ops
        if self.element_type is ScalarType.bool:
            raise LogicError("acc.abs needs a numeric operand, got bool")
        return Value(Call("abs", (self.expr,), self.element_type))

    def __invert__(self): return unary("invert", self)
    # bitwise (integers only)
    def __and__(self, o): return binary("and", self, o)
    def __rand__(self, o): return binary("and", o, self)
    def __or__(self, o): return binary("or", self, o)
    def __ror__(self, o): return binary("or", o, self)
    def __xor__(self, o): return binary("xor", self, o)
    def __rxor__(self, o): return binary("xor", o, self)
    def __lshift__(self, o): return binary("shl", self, o)
    def __rlshift__(self, o): return binary("shl", o, self)
    def __rshift__(self, o): return binary("shr", self, o)
    def __rrshift__(self, o): return binary("shr", o, self)
    # comparisons
    def __lt__(self, o): return binary("lt", self, o)
    def __le__(self, o): return binary("le", self, o)
    def __gt__(self, o): return binary("gt", self, o)
    def __ge__(self, o): return binary("ge", self, o)

    def __eq__(self, o):  # type: ignore[override]
        return binary("eq", self, o)

    def __ne__(self, o):  # type: ignore[override]
        return binary("ne", self, o)

    __hash__ = object.__hash__

    def __bool__(self):
        # `c1 and c2` / `c1 or c2` written directly as an _If or acc.select condition (as Accera's
        # programs do) means the logical and / or: the truth test is answered so that Python goes on
        # to the second operand, and this one is kept until the condition is consumed
        kind = _short_circuit_kind()
        cap = LogicCapture.current()
        if kind is None or cap is None or self.element_type is not ScalarType.bool:
            raise LogicError(
                "a logic value has no Python truth value: Python `if`, `not` and chained comparisons do "
                "not work inside iteration logic (`and` / `or` only directly inside an _If or acc.select "
                "condition); use _If(cond, fn), acc.select(cond, a, b), acc.logical_and / acc.logical_or")
        cap.pending_bool.append((kind, self.expr, kind_frame()))
        return kind == "and"

    def __repr__(self) -> str:
        return f"<{self.element_type.name} {expr_str(self.expr)}>"


_AND_OR_MESSAGE = ("a logic value has no Python truth value outside a condition: Python `and` / `or` of logic "
                   "values are understood only directly inside an _If(...) or acc.select(...) condition; use "
                   "acc.logical_and / acc.logical_or (or & and |)")
_SHORT_CIRCUIT = {"JUMP_IF_FALSE_OR_POP": "and", "JUMP_IF_TRUE_OR_POP": "or"}
_POP_JUMP = {"POP_JUMP_IF_FALSE": "and", "POP_JUMP_IF_TRUE": "or"}
_code_ops: dict = {}


def kind_frame():
    """The user frame evaluating the current expression."""
    return user_frame()


def _short_circuit_kind() -> Optional[str]:
    """"and" / "or" when the truth test being made is that of a Python `and` / `or` keeping its
    operand (`x = a and b`), else None (an `if`, a `not`, a chained comparison)."""
    import dis

    f = kind_frame()
    if f is None:
        return None
    code = f.f_code
    if code not in _code_ops:
        _code_ops[code] = {ins.offset: (k, ins) for k, ins in enumerate(dis.get_instructions(code))}
        _code_ops[code] = (_code_ops[code], [ins for _, ins in sorted(_code_ops[code].values(), key=lambda t: t[0])])
    by_offset, seq = _code_ops[code]
    if f.f_lasti not in by_offset:
        return None
    k, ins = by_offset[f.f_lasti]
    if ins.opname in _SHORT_CIRCUIT:  # Python 3.11
        return _SHORT_CIRCUIT[ins.opname]
    # 3.12: COPY 1; POP_JUMP_IF_*  (3.13: COPY 1; TO_BOOL; POP_JUMP_IF_*)
    if ins.opname == "TO_BOOL" and k + 1 < len(seq):
        k, ins = k + 1, seq[k + 1]
        prev = seq[k - 2] if k >= 2 else None
    else:
        prev = seq[k - 1] if k >= 1 else None
    if ins.opname.replace("_FORWARD", "").replace("_BACKWARD", "") in _POP_JUMP and prev is not None \
            and prev.opname == "COPY" and prev.arg == 1:
        return _POP_JUMP[ins.opname.replace("_FORWARD", "").replace("_BACKWARD", "")]
    return None


def pending_and_or(cond):
    """`cond` with the operands of a Python `and` / `or` chain that ended in it (see
    Value.__bool__) joined back: `a and b` -> logical_and(a, b)."""
    cap = LogicCapture.current()
    if cap is None or not cap.pending_bool:
        return cond
    frame = kind_frame()
    mine = [p for p in cap.pending_bool if p[2] is frame]
    if len(mine) != len(cap.pending_bool) or not isinstance(_plain(cond), Value):
        cap.pending_bool.clear()
        raise LogicError(_AND_OR_MESSAGE)
    cap.pending_bool.clear()
    out = lift(cond)
    for kind, e, _ in reversed(mine):
        out = Value(BinOp("land" if kind == "and" else "lor", e, _bool_expr(out), ScalarType.bool))
    return out


def _bool_expr(v: Value):
    if v.element_type is not ScalarType.bool:
        raise LogicError(f"`and` / `or` of conditions needs boolean operands, got {v.element_type.name}")
    return v.expr


def _plain(x):
    """An untyped constant acc.Scalar (`acc.Scalar(0.2)`) stands for the number it holds."""
    lit = getattr(x, "literal", None)
    return x if lit is None else lit


def lift(x, like: Optional[ScalarType] = None) -> Value:
    """Turn a Python number (or Value) into a Value, adopting the type `like` for literals."""
    x = _plain(x)
    if isinstance(x, Value):
        return x
    if isinstance(x, Parameter):
        x = x.value  # a parameter in logic is the value it has when the function is added
        if isinstance(x, Value):
            return x
    import numpy as np

    if isinstance(x, (bool, np.bool_)):
        return Value(Const(bool(x), ScalarType.bool))
    if isinstance(x, (int, np.integer)):
        t = like if like is not None else ScalarType.index
        if t.is_int or t is ScalarType.bool:
            lo, hi = int_range(t)
            if not lo <= int(x) <= hi:
                raise LogicError(f"the constant {int(x)} does not fit in {t.name} (range {lo}..{hi})")
        return Value(Const(int(x) if not t.is_float else float(x), t))
    if isinstance(x, (float, np.floating)):
        t = like if like is not None and like.is_float else None
        if t is None:
            if like is not None:
                raise LogicError(
                    f"mixed types: the float constant {x!r} meets a {like.name} value; "
                    f"use acc.cast(value, acc.ScalarType.float32) (or another float type)")
            t = ScalarType.float32
        return Value(Const(float(x), t))
    raise LogicError(f"cannot use {type(x).__name__} {x!r} in iteration logic")


def _operand_types(op: str, a, b) -> tuple[Value, Value, ScalarType]:
    a, b = _plain(a), _plain(b)
    if not isinstance(a, Value):
        a = lift(a, b.element_type if isinstance(b, Value) else None)
    if not isinstance(b, Value):
        b = lift(b, a.element_type)
    ta, tb = a.element_type, b.element_type
    if ta is not tb and ta.is_float and tb.is_float:
        # a float constant meeting a float value of another type takes that type (rounded), as a
        # Python float literal does: `A[i] * c` with c a float64 constant stays float32
        la, lb = _literal_only(a.expr), _literal_only(b.expr)
        if la and not lb:
            a, ta = Value(Cast(a.expr, tb)), tb
        elif lb and not la:
            b, tb = Value(Cast(b.expr, ta)), ta
    t = common_type(ta, tb)
    if t is None:
        raise LogicError(
            f"mixed types in `{op}`: {_describe(ta)} and {_describe(tb)} do not convert to each "
            f"other exactly; add an explicit acc.cast(...)")
    return a, b, t


def _coerce(v: Value, t: ScalarType) -> Expr:
    return v.expr if v.element_type is t else Cast(v.expr, t)


def binary(op: str, a, b) -> Value:
    """The logic value `a <op> b` (`op` an IR operator name such as "add" or "lt"), with numpy-like typing."""
    a, b, t = _operand_types(op, a, b)
    if op == "div" and t is ScalarType.index:
        op = "floordiv"  # Accera's `/` on indices (`Out[j, (i / 4) % 4, i % 4]`) is floor division
    if op in ("and", "or", "xor", "shl", "shr") and not (t.is_int or t is ScalarType.bool):
        raise LogicError(f"bitwise `{op}` needs integer operands, got {t.name}")
    if op in ("mod", "floordiv") and t is ScalarType.bool:
        raise LogicError(f"`{op}` is not defined for bool operands")
    ea, eb = _coerce(a, t), _coerce(b, t)
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return Value(BinOp(op, ea, eb, ScalarType.bool))
    return Value(BinOp(op, ea, eb, t))


def unary(op: str, a) -> Value:
    """The logic value `<op> a` ("neg" or "invert")."""
    a = lift(a)
    if op == "invert" and not a.element_type.is_int:
        raise LogicError(f"bitwise not needs an integer operand, got {a.element_type.name}")
    return Value(UnOp(op, a.expr, a.element_type))


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


def cast(value, element_type) -> Value:
    """`acc.cast(value, type)`: the value converted to `type` (an acc.ScalarType or numpy dtype)."""
    t = scalar_type(element_type, "element_type")
    v = lift(value, t)
    if v.element_type is t:
        return v
    return Value(Cast(v.expr, t))


def select(cond, a, b) -> Value:
    """`acc.select(cond, a, b)`: `a` where the boolean `cond` holds, else `b` (both converted to a common type)."""
    c = lift(pending_and_or(cond))
    if c.element_type is not ScalarType.bool:
        raise LogicError(f"acc.select needs a boolean condition, got {c.element_type.name}")
    a, b, t = _operand_types("select", a, b)
    return Value(Select(c.expr, _coerce(a, t), _coerce(b, t)))


# -- indices ------------------------------------------------------------------------------

class Index(Value, LogicIndex):
    """A loop index: a value inside logic and a dimension handle for schedules and plans."""

    def __init__(self, name: str):
        super().__init__(Var(name, ScalarType.index))
        self.name = name

    @property
    def var(self) -> Var:
        """The IR variable of this loop index."""
        return self._expr  # type: ignore[return-value]

    def __eq__(self, o):  # type: ignore[override]
        # inside iteration logic `i == j` is a condition; elsewhere (`cache.index == j`) identity
        if LogicCapture.current() is None:
            return self is o
        return binary("eq", self, o)

    def __ne__(self, o):  # type: ignore[override]
        if LogicCapture.current() is None:
            return self is not o
        return binary("ne", self, o)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Index({self.name})"

    def __str__(self) -> str:
        return self.name


# -- array accesses and statements ----------------------------------------------------------

@dataclass
class _Update:
    access: "Access"
    op: str
    value: Value


_REDUCE_BY_INPLACE = {
    "__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "div",
    "__iand__": "and", "__ior__": "or", "__ixor__": "xor",
}


class Access(Value):
    """`array[indices]` inside logic; its in-place operators record compound assignments."""

    def __init__(self, array, indices: tuple):
        self.array = array
        self.indices = indices  # tuple of Value
        super().__init__(Load(array.buffer, tuple(ix.expr for ix in indices)))
        cap = LogicCapture.current()
        if cap is not None:
            cap.arrays.setdefault(id(array), array)

    def _update(self, op, other):
        other = lift(other, self.element_type)
        return _Update(self, op, other)

    def __iadd__(self, o): return self._update("add", o)
    def __isub__(self, o): return self._update("sub", o)
    def __imul__(self, o): return self._update("mul", o)
    def __itruediv__(self, o): return self._update("div", o)
    def __iand__(self, o): return self._update("and", o)
    def __ior__(self, o): return self._update("or", o)
    def __ixor__(self, o): return self._update("xor", o)


@dataclass
class LogicStatement:
    """One captured statement with where it came from (for error messages)."""

    store: object  # the Store, or If(cond, Store) under an _If
    number: int
    file: str
    line: int
    text: str
    cond: Optional[Expr] = None  # the conjunction of the conditions it runs under (None: always)

    @property
    def assign(self) -> Store:
        """The statement's Store (without the condition)."""
        return self.store.then if isinstance(self.store, If) else self.store

    def describe(self) -> str:
        """"statement N (`source text`, file:line)", for error messages."""
        loc = f"{self.file}:{self.line}" if self.line else self.file
        return f"statement {self.number} (`{self.text}`, {loc})"


class LogicCapture:
    """Collects the statements of one `iteration_logic` call."""

    _active: list = []

    def __init__(self, nest, first_number: int = 1):
        self.nest = nest
        self.statements: list = []
        self.first_number = first_number
        #: the Arrays the logic accesses (id -> Array), in first-use order
        self.arrays: dict = {}
        #: accesses through array views: (statement being written, view, index exprs), whose
        #: indices must stay inside the view (proved with the statements' own bounds)
        self.view_accesses: list = []
        #: the conditions in force (nest/conditions.py CondFrame), outermost first
        self.cond_stack: list = []
        #: truth tests of a Python `and` / `or` waiting for the condition they are part of
        self.pending_bool: list = []
        #: calls of package functions written in the logic (nest/functions.py CallRecord), in order
        self.calls: list = []

    def record_call(self, rec) -> None:
        """Record a call of a package function (a statement of a nest whose logic is made of calls)."""
        if self.cond_stack:
            raise LogicError(f"{rec.describe()}: a call under an _If is not built in accpy")
        rec.number = self.first_number + len(self.calls)
        self.calls.append(rec)

    def note_view_access(self, view, indices: tuple) -> None:
        """Remember an access through `view` (its bounds are proved when the logic is checked)."""
        file, line, text = user_location()
        where = LogicStatement(None, self.first_number + len(self.statements), file, line, text)  # type: ignore[arg-type]
        self.view_accesses.append((where, view, tuple(ix.expr for ix in indices)))

    def __enter__(self):
        LogicCapture._active.append(self)
        return self

    def __exit__(self, *exc):
        LogicCapture._active.pop()
        if exc[0] is None:
            self._check_no_pending()
        return False

    def _check_no_pending(self) -> None:
        if self.pending_bool:
            self.pending_bool.clear()
            raise LogicError(_AND_OR_MESSAGE)

    @staticmethod
    def current() -> Optional["LogicCapture"]:
        """The capture of the iteration logic running now, or None outside iteration logic."""
        return LogicCapture._active[-1] if LogicCapture._active else None

    def record(self, array, indices: tuple, value, reduce: Optional[str]):
        """Record `array[indices] = value` (or `op=` with `reduce`), checking types; returns the statement."""
        self.arrays.setdefault(id(array), array)
        file, line, text = user_location()
        number = self.first_number + len(self.statements)
        where = LogicStatement(None, number, file, line, text)  # type: ignore[arg-type]
        try:
            self._check_no_pending()
            t = array.element_type
            v = lift(value, t)
            if v.element_type is ScalarType.index and not t.is_float and _literal_only(v.expr):
                # an expression of integer literals only (e.g. acc.select(c, 1, 0)) takes the target's type
                _check_literals_fit(v.expr, t)
                v = Value(Cast(v.expr, t))
            # a float stored into an integer array converts (toward zero, as C and Accera do);
            # arithmetic and compound assignments keep the exact-conversion rule
            # a float constant of another float type (`acc.Scalar(ScalarType.float64, value=0.1)`)
            # converts too, rounded to the array's type, as Accera's implicit casts do
            converts = (reduce is None and v.element_type.is_float and t.is_int) or \
                (v.element_type.is_float and t.is_float and _literal_only(v.expr))
            if not converts and not widens_to(v.element_type, t):
                raise LogicError(
                    f"mixed types: a {v.element_type.name} value is assigned to {array.name}, "
                    f"whose elements are {t.name}; use acc.cast(...)")
            e = v.expr if v.element_type is t else Cast(v.expr, t)
            store = Store(array.buffer, tuple(ix.expr for ix in indices), e, reduce)
        except LogicError as err:
            raise LogicError(f"{where.describe()}: {err}") from None
        if self.cond_stack:
            check_hazard(self, where)
            note_write(self, where, array.buffer)
            where.cond = conjunction([c for f in self.cond_stack for c in conjuncts(f.expr)])
            store = If(where.cond, store)
        where.store = store
        self.statements.append(where)
        return where


def _literal_only(e) -> bool:
    """True when an index-typed expression involves no variable and no memory (only literals)."""
    found = []

    class V(Visitor):
        def visit_Var(self, n):
            found.append(n)

        def visit_Load(self, n):
            found.append(n)

    V().visit(e)
    return not found


def _check_literals_fit(e, t: ScalarType) -> None:
    lo, hi = int_range(t)

    class V(Visitor):
        def visit_Const(self, c):
            if c.dtype is ScalarType.index and not lo <= int(c.value) <= hi:
                raise LogicError(f"the constant {int(c.value)} does not fit in {t.name} (range {lo}..{hi})")

    V().visit(e)


def record_assignment(array, key, value) -> None:
    """`array[key] = value` inside iteration logic (compound assignments included); LogicError elsewhere."""
    cap = LogicCapture.current()
    if cap is None:
        raise LogicError(
            f"assignment to {array.name}[...] outside iteration logic: write array elements "
            f"inside a function decorated with @nest.iteration_logic")
    indices = array.normalize_indices(key)
    if isinstance(value, _Update):
        same = value.access.array is array and len(value.access.indices) == len(indices) and all(
            a.expr == b.expr for a, b in zip(value.access.indices, indices))
        if not same:
            raise LogicError("a compound assignment must read and write the same element")
        cap.record(array, indices, value.value, value.op)
    else:
        cap.record(array, indices, value, None)


# -- conditions (nest/conditions.py's _If pushes them on LogicCapture.cond_stack) -------------------

def check_hazard(cap, where) -> None:
    """A statement is evaluated with its conditions re-tested: refuse (not built) when an earlier
    statement under the same chain wrote an array those conditions read."""
    for f in cap.cond_stack:
        hit = [b for b in f.chain.reads if b in f.chain.written]
        if hit:
            b = hit[0]
            raise LogicError(
                f"{where.describe()}: its condition reads {b.name}, which {f.chain.written[b]} writes "
                f"earlier under the same _If chain; accpy re-tests conditions per statement, so this is "
                f"not built: compute the condition into a TEMP array first")


def note_write(cap, where, buffer) -> None:
    """Record that the statement `where` writes `buffer` inside every open conditional chain (so a
    later condition of the chain that reads it is refused by `check_hazard`)."""
    for f in cap.cond_stack:
        f.chain.written.setdefault(buffer, where.describe())
