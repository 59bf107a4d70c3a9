"""Every intrinsic template of accpy/targets/x86.py against its IR semantics, on random data.

For each vector shape of `accpy.targets.x86.LIBRARY` and each operation it defines, a tiny C
function applies the template (gcc -O2, the shape's features as a target attribute) to rows
of random lanes, and numpy computes what the IR says the operation means
(accpy/ir/vector.py): lane-wise arithmetic with IEEE rounding (fma: one rounding), integer
arithmetic wrapping, `min(a, b) = a < b ? a : b` and `max(a, b) = a > b ? a : b` (NaN and
signed zeros included), comparisons as in C (only != is true on NaN), `select(m, a, b)`,
the mask of the first n lanes (n = 0..lanes), a masked load giving 0 in the lanes it skips
and a masked store leaving them untouched (and neither touching memory there: checked
against a protected page), horizontal reductions (add / mul reassociated, within the
error bound of any order; min / max exact), int32 -> float conversion.

Float data mixes ordinary values of many magnitudes with NaN, +-0, +-inf, subnormals and
the extremes; integer data with INT_MIN, INT_MAX, 0, -1. Comparisons are bitwise (any NaN
matches any NaN). AVX-512 shapes are marked `avx512` (skipped without avx512f).
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest

from accpy.ir.types import ScalarType
from accpy.paths import native_dir
from accpy.targets.features import BUILTIN_NAMES
from accpy.targets.x86 import LIBRARY
from support.cpu import cpu_flags

ROWS = 96  # random vectors per operation (mask counts cycle through 0..lanes)

BINARY = ("add", "sub", "mul", "div", "min", "max", "and", "or", "xor")
UNARY = ("sqrt", "abs", "neg")
COMPARE = ("cmp_lt", "cmp_le", "cmp_gt", "cmp_ge", "cmp_eq", "cmp_ne")
REDUCE = ("hadd", "hmul", "hmin", "hmax")
MEMORY = ("mask", "load", "mload", "store", "mstore", "set1", "zero")
OTHER = ("fma", "select", "from_int32")
KNOWN_OPS = set(BINARY + UNARY + COMPARE + REDUCE + MEMORY + OTHER)

C_TYPES = {ScalarType.float32: "float", ScalarType.float64: "double", ScalarType.int32: "int32_t",
           ScalarType.int64: "int64_t"}


FLAGS = cpu_flags()


def isa_id(key) -> str:
    return f"{key[0]}_{key[1].name}"


def isa_params():
    out = []
    for key, isa in LIBRARY.items():
        missing = [f for f in isa.features if f not in FLAGS]
        marks = []
        if isa.name == "avx512":
            marks.append(pytest.mark.avx512)
        elif missing:
            marks.append(pytest.mark.skip(reason=f"executes {isa.name} code: this CPU lacks {', '.join(missing)}"))
        out.append(pytest.param(key, marks=marks, id=isa_id(key)))
    return out


# ------------------------------------------------------------------------------------------
# C: one function per (shape, operation)
# ------------------------------------------------------------------------------------------


def _fill(isa, op, **kw) -> str:
    return isa.template(op).format(**kw)


def _body(isa, op) -> str:
    """C statements for one row: inputs pa, pb, pc (pi: int32), output po, mask count nr."""
    L = lambda p: _fill(isa, "load", p=p)  # noqa: E731
    store = lambda v: _fill(isa, "store", p="po", a=v) + ";"  # noqa: E731
    mask = _fill(isa, "mask", n="nr")
    T = C_TYPES[isa.dtype]
    if op in BINARY:
        return store(_fill(isa, op, a=L("pa"), b=L("pb")))
    if op in UNARY:
        return store(_fill(isa, op, a=L("pa")))
    if op in COMPARE:
        return store(_fill(isa, "select", m=_fill(isa, op, a=L("pa"), b=L("pb")),
                           a=_fill(isa, "set1", a=f"({T})1"), b=_fill(isa, "zero")))
    if op in REDUCE:
        return f"po[0] = {_fill(isa, op, a=L('pa'))};"
    if op == "fma":
        return store(_fill(isa, "fma", a=L("pa"), b=L("pb"), c=L("pc")))
    if op in ("select", "mask"):
        return store(_fill(isa, "select", m=mask, a=L("pa"), b=L("pb")))
    if op in ("load", "store"):
        return store(L("pa"))
    if op == "mload":
        return store(_fill(isa, "mload", p="pa", m=mask))
    if op == "mstore":
        return _fill(isa, "mstore", p="po", m=mask, a=L("pa")) + ";"
    if op == "set1":
        return store(_fill(isa, "set1", a="pa[0]"))
    if op == "zero":
        return store(_fill(isa, "zero"))
    if op == "from_int32":
        ints = LIBRARY[(isa.name, ScalarType.int32)]
        return store(_fill(isa, "from_int32", a=_fill(ints, "load", p="pi")))
    raise AssertionError(f"no test for {isa.name} {isa.dtype.name} `{op}`")


def fn_name(key, op) -> str:
    return f"t_{isa_id(key)}_{op}"


def c_source() -> str:
    parts = ['#include "accpy_runtime.h"', "#include <immintrin.h>", ""]
    for key, isa in LIBRARY.items():
        T = C_TYPES[isa.dtype]
        target = ",".join(BUILTIN_NAMES[f] for f in isa.features)
        for op in sorted(isa.ops):
            parts.append(textwrap.dedent(f"""\
                __attribute__((target("{target}"))) void {fn_name(key, op)}(
                        const {T}* a, const {T}* b, const {T}* c, {T}* out, const int32_t* ints,
                        const int32_t* n, int64_t rows) {{
                    for (int64_t r = 0; r < rows; ++r) {{
                        const {T}* pa = a + r * {isa.lanes};
                        const {T}* pb = b + r * {isa.lanes};
                        const {T}* pc = c + r * {isa.lanes};
                        const int32_t* pi = ints + r * 16;
                        {T}* po = out + r * {isa.lanes};
                        int nr = n[r];
                        (void)pa; (void)pb; (void)pc; (void)pi; (void)nr;
                        {_body(isa, op)}
                    }}
                }}
                """))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("intrinsics")
    src = d / "intrinsics.c"
    src.write_text(c_source())
    so = d / "libintrinsics.so"
    # -ffp-contract=off: each template computes what it says (gcc would fuse mul + add into an fma)
    cmd = ["gcc", "-O2", "-std=gnu11", "-ffp-contract=off", "-shared", "-fPIC", "-I", str(native_dir()), str(src),
           "-o", str(so)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return ctypes.CDLL(str(so))


def test_every_template_has_a_test():
    for key, isa in LIBRARY.items():
        unknown = set(isa.ops) - KNOWN_OPS
        assert not unknown, f"{isa_id(key)}: templates without a test: {sorted(unknown)}"
        for op in isa.ops:
            _body(isa, op)  # a C test body exists


@pytest.mark.slow
def test_the_c_source_compiles_with_every_template(lib):
    for key, isa in LIBRARY.items():
        for op in isa.ops:
            getattr(lib, fn_name(key, op))


# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------


def float_specials(dt):
    fi = np.finfo(dt)
    tiny = fi.smallest_subnormal
    return np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, tiny, -tiny, tiny * 3, fi.tiny, -fi.tiny,
                     fi.max, -fi.max, 1.0, -1.0, 0.5, 2.0], dtype=dt)


def random_floats(rng, dt, shape, special=0.2, finite=False, magnitude=(-3, 3)):
    x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(*magnitude, size=shape)).astype(dt)
    if special:
        sp = float_specials(dt)
        if finite:
            sp = sp[np.isfinite(sp) & (np.abs(sp) < 1e30)]
        pick = rng.random(shape) < special
        x[pick] = rng.choice(sp, size=int(pick.sum()))
    return x


def random_ints(rng, dt, shape, special=0.15):
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    small = rng.random(shape) < 0.3
    x[small] = rng.integers(-20, 21, size=int(small.sum()))
    pick = rng.random(shape) < special
    x[pick] = rng.choice(np.array([info.min, info.max, 0, -1, 1], dtype=dt), size=int(pick.sum()))
    return x


def inputs(isa, op, seed):
    """(a, b, c, ints, n): ROWS rows of lanes each."""
    rng = np.random.default_rng(seed)
    dt = isa.dtype.dtype
    shape = (ROWS, isa.lanes)
    if isa.dtype.is_int:
        a, b, c = (random_ints(rng, dt, shape) for _ in range(3))
    elif op == "fma":
        a, b, c = (random_floats(rng, dt, shape, finite=True, magnitude=(-8, 8)) for _ in range(3))
        # a few rows of specials (inf * 0, inf - inf, NaN) as well
        a[:8], b[:8], c[:8] = (random_floats(rng, dt, (8, isa.lanes), special=0.6) for _ in range(3))
    elif op in ("hadd", "hmin", "hmax"):
        a = random_floats(rng, dt, shape, finite=op == "hadd")
        if op != "hadd":  # min / max of lanes with NaN depend on the order: no NaN here
            a[np.isnan(a)] = 0.0
        b = c = a
    elif op == "hmul":
        a = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(dt)
        a[rng.random(shape) < 0.02] = 0.0
        b = c = a
    else:
        a, b, c = (random_floats(rng, dt, shape) for _ in range(3))
        # equal lanes, so that ==, <=, >= and min/max ties are exercised
        same = rng.random(shape) < 0.15
        b[same] = a[same]
    ints = random_ints(rng, np.int32, (ROWS, 16))
    n = (np.arange(ROWS) % (isa.lanes + 1)).astype(np.int32)
    return a, b, c, ints, n


# ------------------------------------------------------------------------------------------
# the IR semantics, in numpy
# ------------------------------------------------------------------------------------------


def _fma_exact(a, b, c, dt):
    """a * b + c with one rounding to `dt` (exactly, through rationals)."""
    out = np.empty_like(a)
    with np.errstate(all="ignore"):
        rough = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(dt)
    for idx in np.ndindex(a.shape):
        x, y, z = a[idx], b[idx], c[idx]
        if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
            out[idx] = rough[idx]  # inf / NaN: the float64 result is the answer
            continue
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        if exact == 0:
            # an exact zero is +0, except -0 when both the product and c are -0 (IEEE 754)
            product_neg_zero = (x == 0 or y == 0) and (np.signbit(x) != np.signbit(y))
            out[idx] = -0.0 if product_neg_zero and z == 0 and np.signbit(z) else 0.0
            continue
        out[idx] = _round_fraction(exact, dt)
    return out


def _round_fraction(q: Fraction, dt):
    """The `dt` value nearest to q (ties to even), infinities on overflow."""
    f = np.dtype(dt).type
    try:
        guess = f(float(q))
    except OverflowError:
        guess = f(np.inf if q > 0 else -np.inf)
    if q == 0:
        return f(0.0) if guess == 0 else guess
    fi = np.finfo(dt)
    big = Fraction(float(fi.max)) + (Fraction(float(fi.max)) - Fraction(float(np.nextafter(fi.max, f(0))))) / 2
    if abs(q) >= big:
        return f(np.inf if q > 0 else -np.inf)
    cands = {guess, np.nextafter(guess, f(np.inf)), np.nextafter(guess, f(-np.inf))}
    cands = [x for x in cands if np.isfinite(x)]
    best = min(cands, key=lambda x: (abs(Fraction(float(x)) - q),
                                     int(np.frombuffer(np.array([x], dt).tobytes(), np.uint64 if dt == np.float64
                                                       else np.uint32)[0]) & 1))
    if best == 0:  # the sign of a zero result: that of the exact value
        best = f(-0.0) if q < 0 else f(0.0)
    return best


def expected(isa, op, a, b, c, ints, n, sentinel):
    dt = isa.dtype.dtype
    W = isa.lanes
    lane = np.arange(W)[None, :]
    first = lane < n[:, None]  # the mask of the first n lanes
    with np.errstate(all="ignore"):
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":
            return a / b
        if op == "min":
            return np.where(a < b, a, b)
        if op == "max":
            return np.where(a > b, a, b)
        if op == "and":
            return a & b
        if op == "or":
            return a | b
        if op == "xor":
            return a ^ b
        if op == "sqrt":
            return np.sqrt(a)
        if op == "abs":
            return np.abs(a)
        if op == "neg":
            return np.negative(a)
        if op in COMPARE:
            fn = {"cmp_lt": np.less, "cmp_le": np.less_equal, "cmp_gt": np.greater, "cmp_ge": np.greater_equal,
                  "cmp_eq": np.equal, "cmp_ne": np.not_equal}[op]
            return fn(a, b).astype(dt)
        if op == "fma":
            return _fma_exact(a, b, c, dt)
        if op in ("select", "mask"):
            return np.where(first, a, b)
        if op in ("load", "store"):
            return a.copy()
        if op == "mload":
            return np.where(first, a, dt.type(0))
        if op == "mstore":
            return np.where(first, a, sentinel)
        if op == "set1":
            return np.repeat(a[:, :1], W, axis=1)
        if op == "zero":
            return np.zeros_like(a)
        if op == "from_int32":
            return ints[:, :W].astype(dt)
        if op in ("hmin", "hmax"):
            out = np.array(sentinel)
            red = np.minimum.reduce if op == "hmin" else np.maximum.reduce
            out[:, 0] = red(a, axis=1)
            return out
        if op in ("hadd", "hmul") and isa.dtype.is_int:
            out = np.array(sentinel)
            out[:, 0] = (np.add if op == "hadd" else np.multiply).reduce(a, axis=1, dtype=dt)
            return out
    raise AssertionError(op)


def _bits(x):
    return x.view(np.uint64 if x.dtype.itemsize == 8 else np.uint32)


def compare(isa, op, got, want, a):
    if isa.dtype.is_int:
        bad = got != want
    elif op in ("hmin", "hmax"):
        bad = got != want  # (+0 == -0: which zero wins depends on the lanes' order)
    else:
        bad = (_bits(got) != _bits(want)) & ~(np.isnan(got) & np.isnan(want))
    if bad.any():
        r, lane = (int(x) for x in np.argwhere(bad)[0])
        raise AssertionError(f"{isa.name} {isa.dtype.name} `{op}`: row {r} lane {lane}: got {got[r, lane]!r}, "
                             f"expected {want[r, lane]!r} ({int(bad.sum())} lanes differ)\n"
                             f"a = {a[r].tolist()}\ntemplate: {isa.template(op)}")


def call(lib, key, isa, op, a, b, c, ints, n, out):
    def ptr(x):
        return ctypes.c_void_p(x.ctypes.data)

    getattr(lib, fn_name(key, op))(ptr(a), ptr(b), ptr(c), ptr(out), ptr(ints), ptr(n), ctypes.c_int64(len(n)))


def unaligned(x):
    """A copy of `x` starting one element past a 64-byte boundary (templates use unaligned
    loads and stores)."""
    flat = np.empty(x.size + 64, dtype=x.dtype)
    off = (-flat.ctypes.data % 64) // x.itemsize + 1
    y = flat[off:off + x.size].reshape(x.shape)
    y[...] = x
    return y


@pytest.mark.parametrize("key", isa_params())
def test_templates_compute_the_ir_semantics(key, lib):
    isa = LIBRARY[key]
    for op in sorted(isa.ops):
        for seed in range(3):
            a, b, c, ints, n = inputs(isa, op, seed)
            a, b, c = unaligned(a), unaligned(b), unaligned(c)
            dt = isa.dtype.dtype
            sentinel = np.full((ROWS, isa.lanes), 77, dtype=dt)
            out = unaligned(sentinel)
            call(lib, key, isa, op, a, b, c, ints, n, out)
            if op in ("hadd", "hmul") and not isa.dtype.is_int:
                _check_float_reduction(isa, op, out, a)
                assert (out[:, 1:] == 77).all()
                continue
            compare(isa, op, out, expected(isa, op, a, b, c, ints, n, sentinel), a)


def _check_float_reduction(isa, op, out, a):
    """A reassociated sum / product is within the error bound of any evaluation order."""
    eps = float(np.finfo(isa.dtype.dtype).eps)
    W = isa.lanes
    for r in range(ROWS):
        lanes = [float(x) for x in a[r]]
        got = float(out[r, 0])
        if op == "hadd":
            exact = Fraction(0)
            for x in lanes:
                exact += Fraction(x)
            bound = W * eps * sum(abs(x) for x in lanes) + float(np.finfo(isa.dtype.dtype).smallest_subnormal) * W
            ok = abs(Fraction(got) - exact) <= Fraction(bound)
        else:
            exact = Fraction(1)
            for x in lanes:
                exact *= Fraction(x)
            ok = (got == 0) if exact == 0 else abs(Fraction(got) - exact) <= abs(exact) * Fraction(2 * W * eps)
        assert ok, f"{isa.name} {isa.dtype.name} `{op}` row {r}: got {got!r}, exact {float(exact)!r}, lanes {lanes}"


def test_fma_reference_rounds_once():
    """The oracle itself: for float32, (a * b + c) rounded once differs from the product
    rounded first (a case where two roundings lose the low bit)."""
    a = np.float32(1 + 2 ** -12)
    b = np.float32(1 + 2 ** -12)
    c = np.float32(-1)
    once = _round_fraction(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)), np.float32)
    assert once == np.float32(2 ** -11 + 2 ** -24)
    assert np.float32(a * b) + c != once  # rounding the product first loses 2**-24


# ------------------------------------------------------------------------------------------
# masked accesses never touch the lanes they skip (a protected page after the last lane)
# ------------------------------------------------------------------------------------------

_GUARD_SCRIPT = r"""
import ctypes, mmap, sys
import numpy as np
so, fns = sys.argv[1], sys.argv[2:]
lib = ctypes.CDLL(so)
libc = ctypes.CDLL(None)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
page = mmap.PAGESIZE
buf = mmap.mmap(-1, 2 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
assert libc.mprotect(base + page, page, 0) == 0   # the second page: no access at all
for spec in fns:
    name, size, lanes = spec.split(":")
    size, lanes = int(size), int(lanes)
    other = np.zeros(64, dtype=np.uint8)
    ints = np.zeros(16, dtype=np.int32)
    out = np.zeros(lanes * size, dtype=np.uint8)
    for n in range(lanes + 1):
        # the first n lanes end exactly at the protected page
        p = base + page - n * size
        cnt = np.array([n], dtype=np.int32)
        if name.endswith("_mload"):
            args = (p, p, p, out.ctypes.data)
        else:  # mstore writes its n lanes just before the page
            args = (other.ctypes.data, other.ctypes.data, other.ctypes.data, p)
        getattr(lib, name)(*(ctypes.c_void_p(x) for x in args), ctypes.c_void_p(ints.ctypes.data),
                           ctypes.c_void_p(cnt.ctypes.data), ctypes.c_int64(1))
print("ok")
"""


def test_masked_accesses_do_not_touch_skipped_lanes(lib, tmp_path):
    """Run in a child process: a fault would kill it, not the test session."""
    specs = []
    for key, isa in LIBRARY.items():
        if any(f not in FLAGS for f in isa.features):
            continue  # this CPU cannot run these (the AVX-512 ones are skipped on CPUs without them)
        for op in ("mload", "mstore"):
            specs.append(f"{fn_name(key, op)}:{isa.dtype.bits // 8}:{isa.lanes}")
    if not specs:
        pytest.skip("this CPU runs none of the vector shapes")
    script = tmp_path / "guard.py"
    script.write_text(_GUARD_SCRIPT)
    r = subprocess.run([sys.executable, str(script), lib._name, *specs], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (
        f"a masked load/store touched a skipped lane (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
