"""The reference evaluator: a nest's logic run in its default order, in Python over numpy.

This is the oracle of every test. It shares nothing with scheduling or code generation:
it reads the captured statements and turns them into a Python function with one loop
per nest index, evaluating every operation on numpy scalars with the semantics of
`native/accpy_runtime.h` (wrapping integers, truncating division with 0 for a zero
divisor, floor `//` and `%`, shifts modulo the width, saturating float->int casts).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.affine import to_affine
from ..ir.expr import BinOp, Call, Cast, Const, Load, Select, UnOp, Var
from ..ir.types import ScalarType, int_range
from ..ir.visitor import accesses
from .array import Array, Dimension, Scalar
from .output_arrays import allocate_outputs
from .reference_vec import vectorized_run


# -- scalar semantics (mirror of native/accpy_runtime.h) ---------------------------------------

def _wrap(x: int, t: ScalarType):
    if t is ScalarType.bool:  # C's conversion to bool: any nonzero value is true
        return np.bool_(int(x) != 0)
    lo, hi = int_range(t)
    span = hi - lo + 1
    return t.dtype.type(((int(x) - lo) % span) + lo)


def _int_div(a, b, t):
    a, b = int(a), int(b)
    if b == 0:
        return t.dtype.type(0)
    q = abs(a) // abs(b)
    return _wrap(q if (a < 0) == (b < 0) else -q, t)


def _int_floordiv(a, b, t):
    a, b = int(a), int(b)
    if b == 0:
        return t.dtype.type(0)
    return _wrap(a // b, t)


def _int_mod(a, b, t):
    a, b = int(a), int(b)
    if b == 0 or (b == -1 and t.is_signed):
        return t.dtype.type(0)
    return _wrap(a % b, t)


def _float_mod(a, b, t):
    f = t.dtype.type
    r = f(np.fmod(a, b))
    if r != 0:
        if (r < 0) != (b < 0):
            r = f(r + b)
    else:
        r = f(np.copysign(f(0), b))
    return r


def _float_floordiv(a, b, t):
    """Python's float //: (a - fmod(a, b)) / b, adjusted and rounded as CPython does."""
    f = t.dtype.type
    m = f(np.fmod(a, b))
    d = f(f(a - m) / b)
    if m != 0 and ((b < 0) != (m < 0)):
        d = f(d - f(1))
    if d != 0:
        fl = f(np.floor(d))
        if f(d - fl) > 0.5:
            fl = f(fl + f(1))
        return fl
    return f(np.copysign(f(0), f(a / b)))


def _shl(a, b, t):
    return _wrap(int(a) << (int(b) & (t.bits - 1)), t)


def _shr(a, b, t):
    n = int(b) & (t.bits - 1)
    return _wrap(int(a) >> n, t)


def _int_pow(a, b, t):
    a, b = int(a), int(b)
    if b < 0:  # the truncated value of 1 / a**|b|
        if a == 1:
            return _wrap(1, t)
        if a == -1:
            return _wrap(-1 if b & 1 else 1, t)
        return _wrap(0, t)
    return _wrap(pow(a, b, 1 << t.bits), t)


def _float_to_int(x, t):
    x = float(x)
    if math.isnan(x):
        return t.dtype.type(0)
    lo, hi = int_range(t if t is not ScalarType.index else ScalarType.int64)
    if x <= lo:
        return t.dtype.type(lo)
    if x >= hi:
        return t.dtype.type(hi)
    return t.dtype.type(int(x))  # truncation toward zero


def _cast(x, src: ScalarType, dst: ScalarType):
    if dst is ScalarType.bool:
        return np.bool_(x != 0)
    if dst.is_float:
        return dst.dtype.type(x)
    if src.is_float:
        return _float_to_int(x, dst)
    return _wrap(int(x), dst)


def _abs(a, t):
    if t.is_float:
        return t.dtype.type(np.abs(a))
    return _wrap(abs(int(a)), t)


_MATH = {"sqrt": np.sqrt, "exp": np.exp, "log": np.log, "log2": np.log2, "log10": np.log10,
         "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh,
         "floor": np.floor, "ceil": np.ceil, "round": np.rint, "fast_exp": np.exp, "fast_exp_mlas": np.exp}


def _remainder(a, b, t):
    """C's remainder / remainderf: a - n b with n = a / b rounded to nearest, ties to even."""
    f = t.dtype.type
    a64, b64 = float(a), float(b)
    if math.isnan(a64) or math.isnan(b64) or math.isinf(a64) or b64 == 0:
        return f(np.nan)
    if math.isinf(b64):
        return f(a)
    return f(math.remainder(a64, b64))


def _math(fn, a, t):
    f = t.dtype.type
    if t is ScalarType.float16:
        return f(_MATH[fn](np.float32(a)))
    return f(_MATH[fn](a))


# -- bfloat16: values are float32s with bfloat16's precision; arrays hold the 16-bit patterns ------
def _bf16_bits(x) -> np.uint16:
    """float32(x) rounded to bfloat16 (nearest even; NaN stays a quiet NaN), as its pattern."""
    u = int(np.float32(x).view(np.uint32))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return np.uint16((u >> 16) | 0x40)
    return np.uint16(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)


def _bf16_value(bits) -> np.float32:
    """The float32 a bfloat16 pattern stands for."""
    return np.uint32(int(bits) << 16).view(np.float32)


def _bf16_round(x) -> np.float32:
    return _bf16_value(_bf16_bits(x))


class _BF16Values:
    """What the generated code calls `T.dtype.type` for bfloat16: rounding to a bfloat16 value."""

    class dtype:  # noqa: N801  (stands for a numpy dtype)
        type = staticmethod(_bf16_round)

    is_float, is_int, name = True, False, "bfloat16"


_HELPERS = {"_bf16_bits": _bf16_bits, "_bf16_value": _bf16_value, "_wrap": _wrap, "_int_div": _int_div, "_int_floordiv": _int_floordiv, "_int_mod": _int_mod,
            "_int_pow": _int_pow, "_float_mod": _float_mod, "_float_floordiv": _float_floordiv, "_shl": _shl, "_shr": _shr,
            "_cast": _cast, "_abs": _abs, "_math": _math, "_remainder": _remainder, "np": np, "ScalarType": ScalarType}


# -- code generation to Python ------------------------------------------------------------------

# index operations evaluated on plain Python ints; any other index op (/, <<, &, **, ...)
# takes the int64 path below, like the C emitter
_INDEX_OPS = ("add", "sub", "mul", "floordiv", "mod", "min", "max")


def _plain_index_op(e) -> bool:
    """A divisor that is not a constant may be 0: that takes the int64 path (x // 0 == 0)."""
    if e.op in ("floordiv", "mod"):
        return isinstance(e.b, Const) and int(e.b.value) != 0
    return e.op in _INDEX_OPS


class _PyGen:
    def __init__(self):
        self.consts: dict = {}
        self.names: dict = {}
        self.types: dict = {}

    def name(self, v: Var) -> str:
        if v not in self.names:
            self.names[v] = f"v{len(self.names)}_{v.name}"
        return self.names[v]

    def type_ref(self, t: ScalarType) -> str:
        key = f"T_{t.name}"
        self.types[key] = t if t is not ScalarType.bfloat16 else _BF16Values
        return key

    def const(self, c: Const) -> str:
        if c.dtype is ScalarType.index:
            return str(int(c.value))
        key = f"c{len(self.consts)}"
        self.consts[key] = (np.bool_(c.value) if c.dtype is ScalarType.bool else
                            _bf16_round(c.value) if c.dtype is ScalarType.bfloat16 else c.dtype.dtype.type(c.value))
        return key

    def index(self, e) -> str:
        """Index arithmetic in plain Python ints (int64 in C; never near overflow here)."""
        if isinstance(e, Const):
            return str(int(e.value))
        if isinstance(e, Var):
            return self.name(e)
        if isinstance(e, BinOp) and e.dtype is ScalarType.index and _plain_index_op(e):
            a, b = self.index(e.a), self.index(e.b)
            op = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}.get(e.op)
            if op:
                return f"({a} {op} {b})"
            if e.op in ("min", "max"):
                return f"{e.op}({a}, {b})"
        if isinstance(e, Cast) and e.dtype.is_int:
            return f"int({self.expr(e.value)})"
        return f"int({self.expr(e)})"

    def expr(self, e) -> str:
        t = getattr(e, "dtype", None)
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Var):
            return self.name(e) if e.dtype is not ScalarType.bfloat16 else f"_bf16_value({self.name(e)})"
        if isinstance(e, Load):
            s = f"{self.buf(e.buffer)}[{', '.join(self.index(i) for i in e.indices)}]"
            return s if e.buffer.dtype is not ScalarType.bfloat16 else f"_bf16_value({s})"
        if isinstance(e, BinOp):
            if t is ScalarType.index and _plain_index_op(e):
                return self.index(e)
            a, b = self.expr(e.a), self.expr(e.b)
            ot = e.a.dtype
            T = self.type_ref(t if e.op not in ("lt", "le", "gt", "ge", "eq", "ne") else ot)
            op = e.op
            cmp = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
            if op in cmp:
                return f"np.bool_({a} {cmp[op]} {b})"
            if op == "land":
                return f"np.bool_(bool({a}) and bool({b}))"
            if op == "lor":
                return f"np.bool_(bool({a}) or bool({b}))"
            if op in ("min", "max"):
                return f"(({a}) if ({a}) {'<' if op == 'min' else '>'} ({b}) else ({b}))"
            if t.is_float:
                f = f"{T}.dtype.type"
                if op in ("add", "sub", "mul", "div"):
                    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[op]
                    return f"{f}(({a}) {sym} ({b}))"
                if op == "pow":
                    return f"{f}(np.power({a}, {b}))"
                if op == "mod":
                    return f"_float_mod({a}, {b}, {T})"
                if op == "floordiv":
                    return f"_float_floordiv({a}, {b}, {T})"
            else:
                if op in ("add", "sub", "mul", "and", "or", "xor"):
                    sym = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}[op]
                    return f"_wrap(int({a}) {sym} int({b}), {T})"
                if op == "div":
                    return f"_int_div({a}, {b}, {T})"
                if op == "floordiv":
                    return f"_int_floordiv({a}, {b}, {T})"
                if op == "mod":
                    return f"_int_mod({a}, {b}, {T})"
                if op == "shl":
                    return f"_shl({a}, {b}, {T})"
                if op == "shr":
                    return f"_shr({a}, {b}, {T})"
                if op == "pow":
                    return f"_int_pow({a}, {b}, {T})"
            raise NotImplementedError(f"reference: {op} on {t.name}")
        if isinstance(e, UnOp):
            a = self.expr(e.a)
            T = self.type_ref(t)
            if e.op == "not":
                return f"np.bool_(not bool({a}))"
            if e.op == "neg":
                return f"{T}.dtype.type(-({a}))" if t.is_float else f"_wrap(-int({a}), {T})"
            return f"_wrap(~int({a}), {T})"
        if isinstance(e, Select):
            return f"(({self.expr(e.a)}) if bool({self.expr(e.cond)}) else ({self.expr(e.b)}))"
        if isinstance(e, Cast):
            return f"_cast({self.expr(e.value)}, {self.type_ref(e.value.dtype)}, {self.type_ref(t)})"
        if isinstance(e, Call):
            T = self.type_ref(t)
            if e.fn == "abs":
                return f"_abs({self.expr(e.args[0])}, {T})"
            if e.fn == "remainder":
                return f"_remainder({self.expr(e.args[0])}, {self.expr(e.args[1])}, {T})"
            return f"_math({e.fn!r}, {self.expr(e.args[0])}, {T})"
        raise NotImplementedError(f"reference: {type(e).__name__}")

    def buf(self, b) -> str:
        key = f"buf_{b.uid}"
        return key


def _store_line(g: _PyGen, st) -> str:
    target = f"{g.buf(st.buffer)}[{', '.join(g.index(i) for i in st.indices)}]"
    if st.reduce is None:
        value = g.expr(st.value)
    else:
        value = g.expr(BinOp(st.reduce, Load(st.buffer, st.indices), st.value, st.buffer.dtype))
    return f"{target} = {value}" if st.buffer.dtype is not ScalarType.bfloat16 else f"{target} = _bf16_bits({value})"


def compile_reference(nests):
    """A Python function running the nests' logic in order, each in its default loop order.

    Returns `run(env)` where `env` maps each Buffer and each runtime-size/scalar Var to
    its value (numpy arrays with the buffer's logical shape; ints; numpy scalars).
    """
    g = _PyGen()
    lines = ["def _run(env):"]
    body: list = []
    bufs, vars_ = {}, {}
    for nest in nests:
        depth = 1
        for ix, ext in zip(nest.indices, nest.extents):
            body.append("    " * depth + f"for {g.name(ix.var)} in range({g.index(ext)}):")
            depth += 1
        for st in nest.statements:
            if st.cond is not None:  # a statement under an _If: its condition, tested when it runs
                body.append("    " * depth + f"if bool({g.expr(st.cond)}):")
                body.append("    " * (depth + 1) + _store_line(g, st.assign))
            else:
                body.append("    " * depth + _store_line(g, st.store))
            for b in _buffers_in(st.store):
                bufs[b.uid] = b
    for v in list(g.names):
        if v not in [ix.var for n in nests for ix in n.indices]:
            vars_[v] = g.names[v]
    pre = []
    for uid, b in bufs.items():
        pre.append(f"    buf_{uid} = env[{uid}]")
    for v, nm in vars_.items():
        pre.append(f"    {nm} = env[{v.uid}]")
    src = "\n".join(lines + pre + body + ["    return None"])
    ns = dict(_HELPERS)
    ns.update(g.consts)
    ns.update(g.types)
    exec(compile(src, "<accpy reference>", "exec"), ns)
    run = ns["_run"]
    run.source = src  # for debugging
    run.buffers = list(bufs.values())
    run.vars = list(vars_)
    return run


def _buffers_in(store):
    return [a.buffer for a in accesses(store)]


def evaluate(nests, args: dict, vectorize: bool = True) -> None:
    """Run the nests' logic in default order on `args` (updated in place).

    `args` maps Array / Dimension / Scalar objects (or their names) to values: numpy
    arrays of the array's shape and dtype, ints for dimensions, numbers for scalars.
    TEMP arrays are allocated zero-filled; CONST arrays use their data; OUTPUT arrays sized by
    OUTPUT dimensions set at definition are allocated and added to `args`. With `vectorize`,
    nests whose result cannot depend on the order (see reference_vec) run as whole-domain
    numpy operations (the same values: reductions are applied in loop order); the others,
    loop by loop.
    """
    if not isinstance(nests, (list, tuple)):
        nests = [nests]

    allocate_outputs(nests, args, evaluate)  # OUTPUT arrays the function allocates: computed sizes, added to args
    run = compile_reference(nests)
    env = {}
    by_name = {}
    for k, v in args.items():
        if isinstance(k, Array):
            env[k.buffer.uid] = v
            by_name[k.name] = v
        elif isinstance(k, (Dimension, Scalar)):
            env[k.var.uid] = v if isinstance(k, Dimension) else k.element_type.dtype.type(v)
            by_name[k.name] = env[k.var.uid]
        elif isinstance(k, str):
            by_name[k] = v
    dims = {}
    for b in run.buffers:
        if b.uid in env:
            continue
        if b.name in by_name and b.role not in ("temp", "const"):
            env[b.uid] = by_name[b.name]
        elif b.role == "const":
            env[b.uid] = b.data.copy()
        elif b.role == "temp":
            shape = tuple(int(_eval_size(s, env, by_name)) for s in b.shape)
            env[b.uid] = np.zeros(shape, dtype=b.dtype.dtype)
        else:
            raise ValueError(f"evaluate: no value given for array {b.name}")
    for v in run.vars:
        if v.uid not in env:
            if v.name in by_name:
                env[v.uid] = by_name[v.name]
            else:
                raise ValueError(f"evaluate: no value given for {v.name}")
    _ = dims
    fast = None
    if vectorize:
        fast = vectorized_run(nests, lambda e, env_: _eval_size(e, env_, by_name))
    with np.errstate(all="ignore"):
        if fast is None or not fast(env):
            run(env)


def _eval_size(e, env, by_name):
    a = to_affine(e)
    total = a.const
    for v, c in a.terms:
        val = env.get(v.uid, by_name.get(v.name))
        total += c * int(val)
    return total


def evaluate_expr(e, values: dict):
    """The value of expression `e` (no array access) with `values` mapping its variables (IR Vars) to
    numbers, under the same semantics as the generated code."""
    g = _PyGen()
    code = g.expr(e)
    ns = dict(_HELPERS)
    ns.update(g.consts)
    ns.update(g.types)
    for v, name in g.names.items():
        if v not in values:
            raise ValueError(f"evaluate_expr: no value given for {v.name}")
        ns[name] = values[v]
    with np.errstate(all="ignore"):
        return eval(compile(code, "<accpy expression>", "eval"), ns)
