"""Scalar semantics: native kernels equal the reference evaluator (bit-exactly for integers,
within tolerance for floats), and both follow the rules of native/accpy_runtime.h:
wrapping integer arithmetic, x / 0 == x // 0 == x % 0 == 0, floor `//` and `%`, shift
counts modulo the width, saturating float -> int casts (NaN -> 0), round half to even.
Also layouts (first-major, last-major, explicit strides), runtime sizes, scalars, CONST
data and zero-initialised TEMP arrays.

All kernels are built into one package (one gcc run) by a module fixture.
"""
import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

ST = acc.ScalarType
INT_TYPES = [ST.int8, ST.int16, ST.int32, ST.int64, ST.uint8, ST.uint16, ST.uint32, ST.uint64]
FLOAT_TYPES = [ST.float32, ST.float64]
ROWS = 64


# -- independent statement of the integer semantics (Python ints) -----------------------------

def wrap(x, t):
    bits = t.dtype.itemsize * 8
    x = int(x) % (1 << bits)
    if np.iinfo(t.dtype).min < 0 and x >= 1 << (bits - 1):
        x -= 1 << bits
    return x


def bits_of(t):
    return t.dtype.itemsize * 8


def trunc_div(a, b):
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def int_pow(a, b, t):
    if b < 0:
        return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0
    return pow(a, b, 1 << bits_of(t))


def saturate(x, t):
    """float -> integer type t: truncate, saturate, NaN -> 0."""
    if np.isnan(x):
        return 0
    info = np.iinfo(t.dtype)
    if x <= info.min:
        return int(info.min)
    if x >= info.max:
        return int(info.max)
    return int(x)


def cast_oracle(a, src, via):
    """cast(cast(a, via), src) for an integer a of type src."""
    if via is ST.bool:
        v = 1 if a != 0 else 0
        return v
    if via.is_float:
        return saturate(float(via.dtype.type(a)), src)
    return wrap(wrap(a, via), src)


INT_OPS = [
    ("add", lambda x, y: x + y, lambda a, b, t: a + b),
    ("sub", lambda x, y: x - y, lambda a, b, t: a - b),
    ("mul", lambda x, y: x * y, lambda a, b, t: a * b),
    ("div", lambda x, y: x / y, lambda a, b, t: trunc_div(a, b)),
    ("floordiv", lambda x, y: x // y, lambda a, b, t: 0 if b == 0 else a // b),
    ("mod", lambda x, y: x % y, lambda a, b, t: 0 if b == 0 else a % b),
    ("pow", lambda x, y: x ** y, lambda a, b, t: int_pow(a, b, t)),
    ("min", lambda x, y: acc.min(x, y), lambda a, b, t: min(a, b)),
    ("max", lambda x, y: acc.max(x, y), lambda a, b, t: max(a, b)),
    ("abs", lambda x, y: acc.abs(x), lambda a, b, t: abs(a)),
    ("neg", lambda x, y: -x, lambda a, b, t: -a),
    ("invert", lambda x, y: ~x, lambda a, b, t: ~a),
    ("and", lambda x, y: x & y, lambda a, b, t: a & b),
    ("or", lambda x, y: x | y, lambda a, b, t: a | b),
    ("xor", lambda x, y: x ^ y, lambda a, b, t: a ^ b),
    ("shl", lambda x, y: x << y, lambda a, b, t: a << (b & (bits_of(t) - 1))),
    ("shr", lambda x, y: x >> y, lambda a, b, t: a >> (b & (bits_of(t) - 1))),
    ("shl3", lambda x, y: x << 3, lambda a, b, t: a << 3),
    ("lt", lambda x, y: x < y, lambda a, b, t: a < b),
    ("le", lambda x, y: x <= y, lambda a, b, t: a <= b),
    ("gt", lambda x, y: x > y, lambda a, b, t: a > b),
    ("ge", lambda x, y: x >= y, lambda a, b, t: a >= b),
    ("eq", lambda x, y: x == y, lambda a, b, t: a == b),
    ("ne", lambda x, y: x != y, lambda a, b, t: a != b),
    ("select", lambda x, y: acc.select(x < y, y, x), lambda a, b, t: b if a < b else a),
    ("land", lambda x, y: acc.logical_and(x > 0, y > 0), lambda a, b, t: a > 0 and b > 0),
    ("lor", lambda x, y: acc.logical_or(x > 0, y > 0), lambda a, b, t: a > 0 or b > 0),
    ("lnot", lambda x, y: acc.logical_not(x > y), lambda a, b, t: not a > b),
    ("add_const", lambda x, y: x + 3, lambda a, b, t: a + 3),
    ("const_sub", lambda x, y: 5 - x, lambda a, b, t: 5 - a),
    ("compound", lambda x, y: (x * 7 + y) * (x - y), lambda a, b, t: wrap(wrap(a * 7, t) + b, t) * wrap(a - b, t)),
]
CAST_VIA = INT_TYPES + FLOAT_TYPES + [ST.bool]


def int_ops(t):
    ops = list(INT_OPS)
    for u in CAST_VIA:
        ops.append((f"cast_{u.name}", (lambda u: lambda x, y: acc.cast(acc.cast(x, u), t))(u),
                    (lambda u: lambda a, b, tt: cast_oracle(a, tt, u))(u)))
    return ops


def int_inputs(t, rng):
    info = np.iinfo(t.dtype)
    lo, hi, w = int(info.min), int(info.max), bits_of(t)
    a = [lo, hi, 0, 1, lo, hi, 5, 7, hi, 3, lo, 1, 100 % (hi + 1), hi, 0, 2]
    b = [0, 0, 0, hi, hi, lo, w, w + 1, 1, 2 * w + 3, 2, w - 1, 3, w - 1, w, 5]
    if lo < 0:  # negative operands of / // % and shifts, MIN / -1
        a += [-7, 7, -7, lo, -1, -9, -1, -2, -100, lo + 1, -3, -1]
        b += [2, -2, -2, -1, -1, 4, -3, 3, -7, -1, 63, w]
    n = ROWS - len(a)
    a += list(rng.integers(lo, hi, n, endpoint=True, dtype=t.dtype))
    # mostly small second operands (shift counts, exponents, divisors) and some large ones
    small = list(rng.integers(max(lo, -70), min(hi, 70), n // 2, endpoint=True, dtype=t.dtype))
    b += small + list(rng.integers(lo, hi, n - len(small), endpoint=True, dtype=t.dtype))
    return np.array(a, dtype=object).astype(t.dtype), np.array(b, dtype=object).astype(t.dtype)


FLOAT_OPS = [  # (name, logic, numpy oracle, how to compare: "exact" | "close" | "ref")
    ("add", lambda x, y: x + y, lambda a, b: a + b, "exact"),
    ("sub", lambda x, y: x - y, lambda a, b: a - b, "exact"),
    ("mul", lambda x, y: x * y, lambda a, b: a * b, "exact"),
    ("div", lambda x, y: x / y, lambda a, b: a / b, "exact"),
    ("floordiv", lambda x, y: x // y, lambda a, b: np.floor_divide(a, b), "finite"),
    ("mod", lambda x, y: x % y, lambda a, b: np.mod(a, b), "finite"),
    ("pow", lambda x, y: x ** y, lambda a, b: np.power(a, b), "close"),
    ("min", lambda x, y: acc.min(x, y), lambda a, b: np.where(a < b, a, b), "exact"),
    ("max", lambda x, y: acc.max(x, y), lambda a, b: np.where(a > b, a, b), "exact"),
    ("abs", lambda x, y: acc.abs(x), lambda a, b: np.abs(a), "exact"),
    ("neg", lambda x, y: -x, lambda a, b: -a, "exact"),
    ("sqrt", lambda x, y: acc.sqrt(x), lambda a, b: np.sqrt(a), "exact"),
    ("exp", lambda x, y: acc.exp(x), lambda a, b: np.exp(a), "close"),
    ("log", lambda x, y: acc.log(x), lambda a, b: np.log(a), "close"),
    ("tanh", lambda x, y: acc.tanh(x), lambda a, b: np.tanh(a), "close"),
    ("floor", lambda x, y: acc.floor(x), lambda a, b: np.floor(a), "exact"),
    ("ceil", lambda x, y: acc.ceil(x), lambda a, b: np.ceil(a), "exact"),
    ("round", lambda x, y: acc.round(x), lambda a, b: np.rint(a), "exact"),
    ("lt", lambda x, y: x < y, lambda a, b: a < b, "exact"),
    ("le", lambda x, y: x <= y, lambda a, b: a <= b, "exact"),
    ("eq", lambda x, y: x == y, lambda a, b: a == b, "exact"),
    ("ne", lambda x, y: x != y, lambda a, b: a != b, "exact"),
    ("select", lambda x, y: acc.select(x < y, x, y), lambda a, b: np.where(a < b, a, b), "exact"),
    ("const", lambda x, y: x * 2.5 + 0.1, lambda a, b: a * a.dtype.type(2.5) + a.dtype.type(0.1), "close"),
]


def float_ops(t):
    ops = list(FLOAT_OPS)
    for u in CAST_VIA:
        if u.is_float:
            oracle = (lambda u: lambda a, b: a.astype(u.dtype).astype(a.dtype))(u)
        elif u is ST.bool:
            oracle = lambda a, b: (a != 0).astype(a.dtype)  # noqa: E731
        else:
            oracle = (lambda u: lambda a, b: np.array([saturate(x, u) for x in a], dtype=object).astype(a.dtype))(u)
        ops.append((f"cast_{u.name}", (lambda u: lambda x, y: acc.cast(acc.cast(x, u), t))(u), oracle, "exact"))
    return ops


def float_inputs(t, rng):
    a = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 3e9, -3e9, 2.5, -2.5, 0.5, 1.5, -0.5, 7.0, -7.0,
         1e20, -1e20, 255.9, 256.0, -128.7, 65535.5, 1e-30, 3.0,
         -4.0, 4.0, -0.0, 4.204452380655215, -9.807473560440126, -13.552087462047396]
    b = [1.0, 2.0, 0.0, 0.0, 0.0, 0.5, 0.0, -1.0, 2.0, 0.0, 0.5, 3.0, -2.0, 2.0, -2.0, 3.0,
         np.nan, 1.0, 0.25, -0.0, 4.0, 1.5, 2.0, -3.0,
         2.0, -2.0, 3.0, 0.816386608237464, 1.827649478498222, -3.8474753842213856]  # // needs rounding
    n = ROWS - len(a)
    a += list(rng.standard_normal(n) * 10)
    b += list(rng.standard_normal(n) * 3)
    return np.array(a, dtype=t.dtype), np.array(b, dtype=t.dtype)


BOOL_OPS = [
    ("and", lambda x, y: x & y, lambda a, b: a & b),
    ("or", lambda x, y: x | y, lambda a, b: a | b),
    ("xor", lambda x, y: x ^ y, lambda a, b: a ^ b),
    ("eq", lambda x, y: x == y, lambda a, b: a == b),
    ("ne", lambda x, y: x != y, lambda a, b: a != b),
    ("lt", lambda x, y: x < y, lambda a, b: ~a & b),
    ("land", lambda x, y: acc.logical_and(x, y), lambda a, b: a & b),
    ("lor", lambda x, y: acc.logical_or(x, y), lambda a, b: a | b),
    ("lnot", lambda x, y: acc.logical_not(x), lambda a, b: ~a),
    ("select", lambda x, y: acc.select(x, y, x), lambda a, b: np.where(a, b, a)),
    # arithmetic on bools converts back to bool like C (nonzero is true), i.e. numpy's
    ("add", lambda x, y: x + y, lambda a, b: a | b),
    ("mul", lambda x, y: x * y, lambda a, b: a & b),
    ("sub", lambda x, y: x - y, lambda a, b: a != b),
    ("shl", lambda x, y: x << y, lambda a, b: a),
    ("min", lambda x, y: acc.min(x, y), lambda a, b: a & b),
    ("max", lambda x, y: acc.max(x, y), lambda a, b: a | b),
]


def elementwise(t, ops, out_type=None):
    a = acc.Array(role=acc.Role.INPUT, shape=(ROWS,), element_type=t, name="a")
    b = acc.Array(role=acc.Role.INPUT, shape=(ROWS,), element_type=t, name="b")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(ROWS, len(ops)), element_type=out_type or t, name="O")
    nest = acc.Nest(shape=(ROWS,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        for k, op in enumerate(ops):
            O[i, k] = op[1](a[i], b[i])

    return nest, (a, b, O)


# -- the kernels of this module --------------------------------------------------------------

def layouts_kernel():
    A = acc.Array(role=acc.Role.INPUT, shape=(4, 6), element_type=ST.int32, name="A",
                  layout=acc.Array.Layout.LAST_MAJOR)
    B = acc.Array(role=acc.Role.INPUT, shape=(4, 6), element_type=ST.int32, name="B", layout=(12, 2))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 6), element_type=ST.int32, name="C", layout=(1, 4))
    D = acc.Array(role=acc.Role.INPUT, shape=(4, 6), element_type=ST.int32, name="D",
                  layout=acc.Array.Layout.FIRST_MAJOR)
    E = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(10, 6), element_type=ST.int32, name="E", layout=(1, 10))
    nest = acc.Nest(shape=(4, 6))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] = A[i, j] + B[i, j] * 10 + D[i, j] * 100
        E[i + 3, j] += A[i, j] - D[i, j]

    return nest, (A, B, D, C, E)


CONST_DATA = (np.arange(24, dtype=np.int16).reshape(4, 6) * 37 - 300)


def const_temp_kernel():
    data = CONST_DATA.copy()
    K = acc.Array(role=acc.Role.CONST, data=data, name="K")
    data[...] = 0  # the CONST array keeps the values it was given
    T = acc.Array(role=acc.Role.TEMP, shape=(4, 6), element_type=ST.int32, name="T")
    X = acc.Array(role=acc.Role.INPUT, shape=(4, 6), element_type=ST.int32, name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 6), element_type=ST.int32, name="Y")
    nest = acc.Nest(shape=(4, 6))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        T[i, j] += X[i, j] * 2  # T starts at zero on every call
        T[i, j] += K[i, j]
        Y[i, j] = T[i, j] * 3 + Y[i, j]

    return nest, (X, Y)


def runtime_dims_kernel():
    M, N = acc.create_dimensions()
    X = acc.Array(role=acc.Role.INPUT, shape=(M, N), element_type=ST.int64, name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, M), element_type=ST.int64, name="Y")
    Z = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M,), element_type=ST.int64, name="Z")
    nest = acc.Nest(shape=(M, N))
    p, q = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[q, p] += X[p, q] * 3 - 1
        Z[p] += X[p, q]

    s = nest.create_schedule()
    s.split(q, 4)
    return nest, s, (M, N, X, Y, Z)


def index_values_kernel():
    """Loop indices used as values: index arithmetic, including variable divisors that are 0."""
    exprs = [
        lambda i: i * 3 - 5,
        lambda i: (i * 7 - 20) // (i - 2),
        lambda i: (i * 7 - 20) % (i - 2),
        lambda i: (i * 7 - 20) / (i - 2),
        lambda i: (i - 3) // 2,
        lambda i: (i - 3) % 3,
        lambda i: i ** 2 - i,
        lambda i: i << 60,
        lambda i: (i - 4) >> 1,
        lambda i: acc.abs(i - 5),
        lambda i: acc.max(i, 4) + acc.min(i, 2),
        lambda i: -i,
        lambda i: acc.select(i > 3, i, 0 - i),
        lambda i: acc.cast(acc.cast(i, ST.float32) * 1.5, ST.int64),
    ]
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, len(exprs)), element_type=ST.int64, name="O")
    nest = acc.Nest(shape=(8,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        for k, e in enumerate(exprs):
            O[i, k] = e(i)

    return nest, (O,)


def index_values_oracle():
    def fdiv(a, b):
        return 0 if b == 0 else a // b

    def fmod(a, b):
        return 0 if b == 0 else a % b

    rows = []
    for i in range(8):
        rows.append([i * 3 - 5, fdiv(i * 7 - 20, i - 2), fmod(i * 7 - 20, i - 2), trunc_div(i * 7 - 20, i - 2),
                     (i - 3) // 2, (i - 3) % 3, i * i - i, wrap(i << 60, ST.int64), (i - 4) >> 1, abs(i - 5),
                     max(i, 4) + min(i, 2), -i, i if i > 3 else -i, int(i * 1.5)])
    return np.array(rows, dtype=np.int64)


class Built:
    pass


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("semantics")
    pkg = acc.Package()
    b = Built()
    b.int = {}
    for t in INT_TYPES:
        ops = int_ops(t)
        nest, args = elementwise(t, ops)
        pkg.add(nest, args=args, base_name=f"ops_{t.name}")
        b.int[t] = (nest, args, ops)
    b.float = {}
    for t in FLOAT_TYPES:
        ops = float_ops(t)
        nest, args = elementwise(t, ops)
        pkg.add(nest, args=args, base_name=f"ops_{t.name}")
        b.float[t] = (nest, args, ops)
    nest, args = elementwise(ST.bool, BOOL_OPS)
    pkg.add(nest, args=args, base_name="ops_bool")
    b.bool = (nest, args)
    b.layouts = layouts_kernel()
    pkg.add(b.layouts[0], args=b.layouts[1], base_name="layouts")
    b.const_temp = const_temp_kernel()
    pkg.add(b.const_temp[0], args=b.const_temp[1], base_name="const_temp")
    b.dims = runtime_dims_kernel()
    pkg.add(b.dims[1], args=b.dims[2], base_name="dims")
    b.index_values = index_values_kernel()
    pkg.add(b.index_values[0], args=b.index_values[1], base_name="index_values")
    b.pkg = pkg.build("semantics", output_dir=out, python_module=False)
    b.dir = out
    return b


def clone(v):
    """A copy with the same memory layout (strided views are inputs here: passed as they are)."""
    if not isinstance(v, np.ndarray):
        return v
    if v.flags.c_contiguous or v.flags.f_contiguous:
        return np.copy(v, order="K")
    return v


def run_both(built_fn, nest, args, values):
    """Run the native kernel and the reference on copies of `values` (one per arg)."""
    native = [clone(v) for v in values]
    ref = [np.array(v) if isinstance(v, np.ndarray) else v for v in values]
    built_fn(*native)
    evaluate(nest, dict(zip(args, ref)))
    return native, ref


# -- integers ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("t", INT_TYPES, ids=lambda t: t.name)
def test_integer_operations_are_bit_exact(built, t):
    nest, args, ops = built.int[t]
    rng = np.random.default_rng(bits_of(t) + (np.iinfo(t.dtype).min < 0))
    a, b = int_inputs(t, rng)
    o = np.zeros((ROWS, len(ops)), t.dtype)
    (_, _, native), (_, _, ref) = run_both(getattr(built.pkg, f"ops_{t.name}"), nest, args, [a, b, o])
    for k, (name, _, oracle) in enumerate(ops):
        assert np.array_equal(native[:, k], ref[:, k]), (
            f"{t.name} {name}: native and reference differ at rows "
            f"{np.nonzero(native[:, k] != ref[:, k])[0][:5]}")
        want = np.array([wrap(oracle(int(x), int(y), t), t) for x, y in zip(a, b)], dtype=object).astype(t.dtype)
        bad = np.nonzero(native[:, k] != want)[0]
        assert bad.size == 0, (f"{t.name} {name}: a={a[bad[0]]} b={b[bad[0]]} gives {native[bad[0], k]}, "
                               f"expected {want[bad[0]]}")


@pytest.mark.parametrize("t", [ST.int8, ST.int32, ST.int64], ids=lambda t: t.name)
def test_documented_integer_corner_cases(built, t):
    """Spot checks of accpy_runtime.h's rules, written out by hand."""
    nest, args, ops = built.int[t]
    col = {name: k for k, (name, _, _) in enumerate(ops)}
    info = np.iinfo(t.dtype)
    w = bits_of(t)
    a = np.zeros(ROWS, t.dtype)
    b = np.zeros(ROWS, t.dtype)
    cases = [(7, 0), (-7, 2), (7, -2), (-7, -2), (int(info.min), -1), (int(info.max), 1), (1, w), (1, w + 1),
             (-8, 1), (3, -1)]
    for r, (x, y) in enumerate(cases):
        a[r], b[r] = x, y
    o = np.zeros((ROWS, len(ops)), t.dtype)
    (_, _, o), _ = run_both(getattr(built.pkg, f"ops_{t.name}"), nest, args, [a, b, o])
    # division by zero is 0
    assert o[0, col["div"]] == 0 and o[0, col["floordiv"]] == 0 and o[0, col["mod"]] == 0
    # / truncates, // and % round toward minus infinity
    assert [o[r, col["div"]] for r in (1, 2, 3)] == [-3, -3, 3]
    assert [o[r, col["floordiv"]] for r in (1, 2, 3)] == [-4, -4, 3]
    assert [o[r, col["mod"]] for r in (1, 2, 3)] == [1, -1, -1]
    # MIN / -1 and -MIN wrap to MIN; MIN % -1 is 0; abs(MIN) is MIN
    assert o[4, col["div"]] == info.min and o[4, col["floordiv"]] == info.min and o[4, col["mod"]] == 0
    assert o[4, col["neg"]] == info.min and o[4, col["abs"]] == info.min
    # MAX + 1 wraps to MIN
    assert o[5, col["add"]] == info.min
    # shift counts are taken modulo the width
    assert o[6, col["shl"]] == 1 and o[7, col["shl"]] == 2
    # >> of a negative number is arithmetic
    assert o[8, col["shr"]] == -4
    # integer ** with a negative exponent: 1 / 3**1 truncates to 0
    assert o[9, col["pow"]] == 0


def test_unsigned_wraparound(built):
    t = ST.uint8
    nest, args, ops = built.int[t]
    col = {name: k for k, (name, _, _) in enumerate(ops)}
    a = np.zeros(ROWS, np.uint8)
    b = np.zeros(ROWS, np.uint8)
    a[:4] = [0, 255, 200, 16]
    b[:4] = [1, 1, 100, 4]
    o = np.zeros((ROWS, len(ops)), np.uint8)
    (_, _, o), _ = run_both(built.pkg.ops_uint8, nest, args, [a, b, o])
    assert o[0, col["sub"]] == 255 and o[1, col["add"]] == 0 and o[2, col["mul"]] == (200 * 100) % 256
    assert o[0, col["neg"]] == 0 and o[1, col["neg"]] == 1 and o[0, col["invert"]] == 255
    assert o[3, col["pow"]] == 0  # 16**4 = 65536 wraps to 0
    assert o[1, col["cast_int8"]] == 255  # 255 -> int8 -1 -> uint8 255
    assert o[1, col["cast_int16"]] == 255 and o[1, col["cast_bool"]] == 1 and o[0, col["cast_bool"]] == 0
    assert o[1, col["cast_float32"]] == 255


# -- floats ------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", FLOAT_TYPES, ids=lambda t: t.name)
def test_float_operations_match(built, t):
    nest, args, ops = built.float[t]
    rng = np.random.default_rng(5)
    a, b = float_inputs(t, rng)
    o = np.zeros((ROWS, len(ops)), t.dtype)
    (_, _, native), (_, _, ref) = run_both(getattr(built.pkg, f"ops_{t.name}"), nest, args, [a, b, o])
    rtol = 2e-6 if t is ST.float32 else 1e-13
    with np.errstate(all="ignore"):
        for k, (name, _, oracle, how) in enumerate(ops):
            got, r = native[:, k], ref[:, k]
            want = np.asarray(oracle(a, b)).astype(t.dtype)
            if how == "close":
                np.testing.assert_allclose(got, r, rtol=rtol, atol=0, equal_nan=True, err_msg=f"{t.name} {name}")
                np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True, err_msg=f"{t.name} {name}")
                continue
            same = (got == r) | (np.isnan(got) & np.isnan(r))
            assert same.all(), f"{t.name} {name}: native {got[~same][:3]} reference {r[~same][:3]}"
            if how == "finite":  # Python's // and % are not defined for a zero divisor
                m = np.isfinite(a) & np.isfinite(b) & (b != 0)
                got, want = got[m], want[m]
                zero = want == 0  # zeros carry Python's sign (the divisor's, for %)
                assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), f"{t.name} {name}: sign of 0"
            ok = (got == want) | (np.isnan(got) & np.isnan(want))
            assert ok.all(), f"{t.name} {name}: got {got[~ok][:3]} expected {want[~ok][:3]}"


def test_float_to_int_casts_saturate(built):
    nest, args, ops = built.float[ST.float32]
    col = {name: k for k, (name, _, _, _) in enumerate(ops)}
    a = np.zeros(ROWS, np.float32)
    b = np.zeros(ROWS, np.float32)
    a[:8] = [np.nan, np.inf, -np.inf, 3e9, -3e9, -2.7, 2.7, 300.0]
    o = np.zeros((ROWS, len(ops)), np.float32)
    (_, _, o), _ = run_both(built.pkg.ops_float32, nest, args, [a, b, o])
    assert list(o[:8, col["cast_int32"]]) == [0, 2147483647, -2147483648, 2147483647, -2147483648, -2, 2, 300]
    assert list(o[:8, col["cast_uint8"]]) == [0, 255, 0, 255, 0, 0, 2, 255]
    assert list(o[:8, col["cast_int8"]]) == [0, 127, -128, 127, -128, -2, 2, 127]
    assert list(o[:8, col["cast_bool"]]) == [1, 1, 1, 1, 1, 1, 1, 1]


def test_round_is_half_to_even(built):
    nest, args, ops = built.float[ST.float64]
    col = {name: k for k, (name, _, _, _) in enumerate(ops)}
    a = np.zeros(ROWS)
    b = np.ones(ROWS)
    a[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]
    o = np.zeros((ROWS, len(ops)))
    (_, _, o), _ = run_both(built.pkg.ops_float64, nest, args, [a, b, o])
    assert list(o[:6, col["round"]]) == [0, 2, 2, -0, -2, -2]
    assert list(o[:6, col["floor"]]) == [0, 1, 2, -1, -2, -3]
    assert list(o[:6, col["ceil"]]) == [1, 2, 3, -0, -1, -2]


# -- bool ---------------------------------------------------------------------------------------

def test_bool_operations(built):
    nest, args = built.bool
    a = np.array([0, 0, 1, 1] * (ROWS // 4), dtype=bool)
    b = np.array([0, 1, 0, 1] * (ROWS // 4), dtype=bool)
    o = np.zeros((ROWS, len(BOOL_OPS)), bool)
    (_, _, native), (_, _, ref) = run_both(built.pkg.ops_bool, nest, args, [a, b, o])
    for k, (name, _, oracle) in enumerate(BOOL_OPS):
        assert np.array_equal(native[:, k], ref[:, k]), name
        assert np.array_equal(native[:, k], oracle(a, b)), name


# -- index values --------------------------------------------------------------------------------

def test_indices_as_values(built):
    nest, args = built.index_values
    o = np.zeros((8, 14), np.int64)
    (native,), (ref,) = run_both(built.pkg.index_values, nest, args, [o])
    want = index_values_oracle()
    assert np.array_equal(ref, want)
    assert np.array_equal(native, want)


# -- layouts, CONST, TEMP, runtime sizes, scalars -----------------------------------------------------

def test_layouts(built):
    nest, (A, B, D, C, E) = built.layouts
    rng = np.random.default_rng(11)
    a = np.asfortranarray(rng.integers(-50, 50, (4, 6), dtype=np.int32))
    big = rng.integers(-50, 50, (4, 12), dtype=np.int32)
    b = big[:, ::2]  # element strides (12, 2)
    assert b.strides == (48, 8)
    d = rng.integers(-50, 50, (4, 6), dtype=np.int32)
    c = np.asfortranarray(np.zeros((4, 6), np.int32))  # layout (1, 4) is last-major for this shape
    e = np.asfortranarray(rng.integers(-50, 50, (10, 6), dtype=np.int32))  # layout (1, 10)
    (_, _, _, c_nat, e_nat), (_, _, _, c_ref, e_ref) = run_both(built.pkg.layouts, nest, (A, B, D, C, E),
                                                                 [a, b, d, c, e])
    assert np.array_equal(c_nat, c_ref) and np.array_equal(e_nat, e_ref)
    assert np.array_equal(c_nat, a + 10 * b + 100 * d)
    e_want = e.copy()
    e_want[3:7] += a - d
    assert np.array_equal(e_nat, e_want)


def test_layout_mismatch_is_rejected(built):
    a = np.zeros((4, 6), np.int32)  # C order, but A is LAST_MAJOR
    b = np.zeros((4, 12), np.int32)[:, ::2]
    d = np.zeros((4, 6), np.int32)
    c = np.asfortranarray(np.zeros((4, 6), np.int32))
    e = np.asfortranarray(np.zeros((10, 6), np.int32))
    with pytest.raises(ValueError, match="'A'"):
        built.pkg.layouts(a, b, d, c, e)
    with pytest.raises(ValueError, match="'B'"):
        built.pkg.layouts(np.asfortranarray(a), np.zeros((4, 6), np.int32), d, c, e)


def test_const_data_is_baked_in_and_temp_is_zeroed_on_every_call(built):
    nest, (X, Y) = built.const_temp
    x = np.arange(24, dtype=np.int32).reshape(4, 6) - 12
    y = np.ones((4, 6), np.int32)
    want = (2 * x + CONST_DATA.astype(np.int32)) * 3 + 1
    (_, y1), (_, y_ref) = run_both(built.pkg.const_temp, nest, (X, Y), [x, y])
    assert np.array_equal(y_ref, want)
    assert np.array_equal(y1, want)
    built.pkg.const_temp(x, y1)  # a second call starts again from a zero TEMP
    assert np.array_equal(y1, want + (2 * x + CONST_DATA.astype(np.int32)) * 3)
    source = (built.dir / "semantics.c").read_text()
    assert "-300, -263, -226" in source  # the constant data is in the library


@pytest.mark.parametrize("m,n", [(5, 7), (1, 1), (3, 8), (2, 13)])
def test_runtime_dimensions(built, m, n):
    nest, _, (M, N, X, Y, Z) = built.dims
    rng = np.random.default_rng(m * 100 + n)
    x = rng.integers(-1000, 1000, (m, n))
    y = rng.integers(-1000, 1000, (n, m))
    z = rng.integers(-1000, 1000, m)
    (_, _, _, y_nat, z_nat), (_, _, _, y_ref, z_ref) = run_both(built.pkg.dims, nest, (M, N, X, Y, Z),
                                                                 [m, n, x, y, z])
    assert np.array_equal(y_ref, y + 3 * x.T - 1) and np.array_equal(z_ref, z + x.sum(axis=1))
    assert np.array_equal(y_nat, y_ref) and np.array_equal(z_nat, z_ref)


def test_runtime_dimensions_are_checked_against_the_arrays(built):
    x = np.zeros((5, 7), np.int64)
    with pytest.raises(ValueError):
        built.pkg.dims(5, 6, x, np.zeros((6, 5), np.int64), np.zeros(5, np.int64))


def test_scalar_arguments(tmp_path):
    a = acc.Array(role=acc.Role.INPUT, shape=(5,), element_type=ST.int32, name="a")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(5,), element_type=ST.int32, name="O")
    F = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(5,), element_type=ST.float32, name="F")
    s = acc.Scalar(ST.int32, name="s")
    f = acc.Scalar(ST.float32, name="f")
    nest = acc.Nest(shape=(5,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[i] = a[i] * s + acc.cast(f, ST.int32)
        F[i] = acc.cast(a[i], ST.float32) * f

    pkg = acc.Package()
    pkg.add(nest, args=(a, s, f, O, F), base_name="scaled")
    lib = pkg.build("scalars", output_dir=tmp_path, python_module=False)
    av = np.arange(5, dtype=np.int32) - 2
    (_, _, _, o, fo), (_, _, _, o_ref, f_ref) = run_both(lib.scaled, nest, (a, s, f, O, F),
                                                         [av, -3, 2.75, np.zeros(5, np.int32),
                                                          np.zeros(5, np.float32)])
    assert np.array_equal(o, o_ref) and np.array_equal(o, av * -3 + 2)
    assert np.array_equal(fo, f_ref) and np.array_equal(fo, av.astype(np.float32) * np.float32(2.75))
