"""The package layer: Package.add/build, outputs, names, the .hat file, argument
validation of the Python entry points (the generic binder and the pybind11 module),
the GIL, DEBUG mode, the build cache and concurrent builds, compiler errors, acc.load.

Every test module-wide shares one build cache (the pybind11 module core is compiled once);
tests about the cache itself use their own cache directory.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

import accpy as acc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from abi import kernels as K  # noqa: E402

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*_[0-9a-f]{16}$")
EXT = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
I32, F32 = acc.ScalarType.int32, acc.ScalarType.float32


@pytest.fixture(scope="module", autouse=True)
def shared_cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("accpy_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCPY_CACHE_DIR", str(d))
        yield d


# -- kernels of the validation package ---------------------------------------------------

def _axpy_runtime():
    """Y[i, j] += X[i, j] * s, sizes M x N at run time, s an int8 scalar: args (M, N, X, Y, s)."""
    M, N = acc.create_dimensions()
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(M, N))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(M, N))
    s = acc.Scalar(acc.ScalarType.int8, name="s")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i, j] += X[i, j] * acc.cast(s, F32)

    sched = nest.create_schedule()
    sched.split(j, 3)
    return sched, (M, N, X, Y, s)


def _convert_last_major():
    """B[i, j] = int(A[i, j]): A (4, 3) LAST_MAJOR float32 input, B (4, 3) int32 OUTPUT."""
    A = acc.Array(role=acc.Role.INPUT, name="A", shape=(4, 3), layout=acc.Array.Layout.LAST_MAJOR)
    B = acc.Array(role=acc.Role.OUTPUT, name="B", shape=(4, 3), element_type=I32)
    nest = acc.Nest(shape=(4, 3))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] = acc.cast(A[i, j], I32)

    return nest, (A, B)


def _strided():
    """Y[i, j] += X[i, j] with X in explicit strides (5, 1) (rows padded to 5)."""
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(4, 3), layout=(5, 1))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(4, 3))
    nest = acc.Nest(shape=(4, 3))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i, j] += X[i, j]

    return nest, (X, Y)


def _scalars():
    """Y[i] = X[i] * alpha + b + c + d + e + h with scalars of six element types."""
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(5,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(5,))
    alpha = acc.Scalar(F32, name="alpha")
    b = acc.Scalar(acc.ScalarType.uint8, name="b")
    c = acc.Scalar(acc.ScalarType.int64, name="c")
    d = acc.Scalar(acc.ScalarType.uint64, name="d")
    e = acc.Scalar(acc.ScalarType.float64, name="e")
    h = acc.Scalar(acc.ScalarType.float16, name="h")
    nest = acc.Nest(shape=(5,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] = X[i] * alpha + acc.cast(b, F32) + acc.cast(c, F32) + acc.cast(d, F32) + acc.cast(e, F32) \
            + acc.cast(h, F32)

    return nest, (X, Y, alpha, b, c, d, e, h)


def _slow_matmul():
    """C += A @ B, float64, runtime sizes, naive order: slow enough to observe the GIL."""
    M, N, K_ = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, name="A", shape=(M, K_), element_type=acc.ScalarType.float64)
    B = acc.Array(role=acc.Role.INPUT, name="B", shape=(K_, N), element_type=acc.ScalarType.float64)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, name="C", shape=(M, N), element_type=acc.ScalarType.float64)
    nest = acc.Nest(shape=(M, N, K_))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (M, N, K_, A, B, C)


MM = K.make_matmul(16, 20, 12, tiles=(5, 7), base_name="matmul")


@pytest.fixture(scope="module")
def vpkg(tmp_path_factory, shared_cache):
    """The validation package, built once (pybind11 module in the background)."""
    out = tmp_path_factory.mktemp("vpkg")
    pkg = acc.Package()
    fns = {"matmul": pkg.add(MM.source, args=MM.args, base_name="matmul")}
    for base, (src, args) in {"axpy": _axpy_runtime(), "conv": _convert_last_major(), "strided": _strided(),
                              "scal": _scalars(), "slowmm": _slow_matmul()}.items():
        fns[base] = pkg.add(src, args=args, base_name=base)
    pkg.add_description(author="Ada", license="MIT", version="1.2.3", other={"team": "kernels", "drop": 1})
    pkg.add_description(other={"drop": None, "count": 3})
    lib = pkg.build("vpkg", output_dir=out)
    return {"lib": lib, "out": out, "fns": fns, "pkg": pkg}


@pytest.fixture(scope="module")
def vmod(vpkg):
    return vpkg["lib"].python_module()


@pytest.fixture(params=["binder", "module"])
def impl(request, vpkg):
    """The package's functions through the object build() returned, or through its pybind11 module."""
    if request.param == "binder":
        return vpkg["lib"]
    return request.getfixturevalue("vmod")


# -- 1. outputs, names, alias, description, .hat --------------------------------------------

@pytest.mark.slow
def test_outputs_exist_and_are_sane(vpkg):
    out, lib, fns = vpkg["out"], vpkg["lib"], vpkg["fns"]
    lib.python_module()  # waits for the background build
    for f in ("vpkg.c", "vpkg.h", "vpkg.hat", "libvpkg.so", "vpkg.a", "vpkg_module.cpp", f"vpkg{EXT}"):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    c = (out / "vpkg.c").read_text()
    h = (out / "vpkg.h").read_text()
    for f in fns.values():
        assert f"void {f.name}(" in c and f"int {f.name}__packed(void** args)" in c
        assert f"void {f.name}(" in h
    assert "const char* vpkg_last_error(void);" in h and 'extern "C"' in h
    if shutil.which("nm"):
        syms = subprocess.run(["nm", "-D", "--defined-only", str(out / "libvpkg.so")], capture_output=True,
                              text=True).stdout
        for f in fns.values():
            assert re.search(rf"\bT {f.name}$", syms, re.M), f.name
    if shutil.which("ar"):
        members = subprocess.run(["ar", "t", str(out / "vpkg.a")], capture_output=True, text=True).stdout.split()
        assert members and all(m.endswith(".o") for m in members)
    # no temporary files are left behind
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert lib.files["hat"] == out / "vpkg.hat"


def test_function_names_and_aliases(vpkg, vmod):
    lib, fns = vpkg["lib"], vpkg["fns"]
    for base, f in fns.items():
        assert NAME_RE.match(f.name) and f.name.startswith(base + "_"), f.name
        assert re.fullmatch(rf"{base}_[0-9a-f]{{16}}", f.name)
        assert getattr(lib, base) is getattr(lib, f.name)
        assert getattr(vmod, base) is getattr(vmod, f.name)
        assert lib[base] is lib[f.name]
        assert getattr(lib, base).name == f.name
    assert set(lib.function_names) == set(fns) | {f.name for f in fns.values()}
    with pytest.raises(AttributeError, match="has no function 'nope'"):
        lib.nope
    # the alias computes like the full name
    rng = np.random.default_rng(0)
    K.run(MM, lib.matmul, rng)
    K.run(MM, getattr(lib, fns["matmul"].name), rng)
    K.run(MM, vmod.matmul, rng)


def test_header_declares_a_static_inline_alias(vpkg):
    h = (vpkg["out"] / "vpkg.h").read_text()
    full = vpkg["fns"]["matmul"].name
    assert re.search(r"static inline void matmul\(const float\* A, const float\* B, float\* C\) \{ "
                     + full + r"\(A, B, C\); \}", h), h
    assert "#ifndef __matmul_DEFINED__" in h
    # runtime dimensions are int64_t, scalars by value
    assert re.search(r"void axpy_[0-9a-f]{16}\(int64_t M, int64_t N, const float\* X, float\* Y, int8_t s\);", h)


KERNEL_SRC = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    import accpy as acc
    from abi import kernels as K
    names = []
    for k in (K.make_matmul(16, 20, 12, tiles=(5, 7), base_name="matmul"), K.make_runtime_matmul(),
              K.make_conv1d_skewed(), K.make_last_major(), K.make_int_axpy()):
        names.append(acc.Package().add(k.source, args=k.args, base_name=k.base_name).name)
    print(json.dumps(names))
""")


@pytest.mark.slow
def test_names_are_stable_across_processes(tmp_path):
    names = []
    for k in (K.make_matmul(16, 20, 12, tiles=(5, 7), base_name="matmul"), K.make_runtime_matmul(),
              K.make_conv1d_skewed(), K.make_last_major(), K.make_int_axpy()):
        names.append(acc.Package().add(k.source, args=k.args, base_name=k.base_name).name)
    runs = []
    for seed in ("0", "12345"):  # different hash seeds: no dependence on Python's str hashing
        env = dict(os.environ, PYTHONHASHSEED=seed)
        p = subprocess.run([sys.executable, "-c", KERNEL_SRC.format(tests=str(HERE))], capture_output=True,
                           text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1] == names
    assert all(NAME_RE.match(n) for n in names)


def test_names_depend_on_the_signature_not_the_schedule():
    def name_of(**kw):
        k = K.make_matmul(**kw)
        return acc.Package().add(k.source, args=k.args, base_name=k.base_name).name

    base = name_of(M=8, N=8, K=8)
    assert name_of(M=8, N=8, K=8, tiles=(2, 4)) == base  # same function, another schedule
    assert name_of(M=8, N=8, K=9) != base  # shape
    assert name_of(M=8, N=8, K=8, dtype="float64") != base  # element type
    assert name_of(M=8, N=8, K=8, layout_a=K.LAST) != base  # layout
    assert name_of(M=8, N=8, K=8, base_name="other").startswith("other_")
    k = K.make_matmul(8, 8, 8)
    pkg = acc.Package()
    f1, f2 = pkg.add(k.source, args=k.args, base_name="mm", parameters=[{"P": 1}, {"P": 2}])
    assert f1.name != f2.name and f1.name.startswith("mm_")
    with pytest.raises(ValueError, match="already in the package"):
        pkg.add(k.source, args=k.args, base_name="mm", parameters={"P": 1})
    unnamed = acc.Package().add(k.source, args=k.args)
    assert re.fullmatch(r"_[0-9a-f]{16}", unnamed.name)


def test_description_lands_in_the_hat(vpkg):
    meta = tomllib.loads((vpkg["out"] / "vpkg.hat").read_text())
    d = meta["description"]
    assert d["author"] == "Ada" and d["version"] == "1.2.3" and d["license_url"] == "MIT"
    assert d["auxiliary"] == {"team": "kernels", "count": 3}  # "drop" was removed by None


def test_hat_is_toml_with_the_tables_hatlib_requires(vpkg):
    out, fns = vpkg["out"], vpkg["fns"]
    meta = tomllib.loads((out / "vpkg.hat").read_text())
    for table in ("description", "functions", "target", "dependencies", "compiled_with", "declaration"):
        assert table in meta, table
    assert (out / meta["dependencies"]["link_target"]).is_file()
    assert meta["target"]["required"]["os"] and meta["target"]["required"]["CPU"]["architecture"]
    assert set(meta["functions"]) == {f.name for f in fns.values()}
    args = {a["name"]: a for a in meta["functions"][fns["matmul"].name]["arguments"]}
    assert args["A"]["logical_type"] == "affine_array" and args["A"]["shape"] == [16, 12]
    assert args["A"]["affine_map"] == [12, 1] and args["A"]["usage"] == "input"
    assert args["C"]["usage"] == "input_output" and args["C"]["declared_type"] == "float*"
    conv = {a["name"]: a for a in meta["functions"][fns["conv"].name]["arguments"]}
    assert conv["A"]["affine_map"] == [1, 4]  # LAST_MAJOR (4, 3)
    assert conv["B"]["usage"] == "output" and conv["B"]["element_type"] == "int32_t"
    strided = {a["name"]: a for a in meta["functions"][fns["strided"].name]["arguments"]}
    assert strided["X"]["affine_map"] == [5, 1]
    axpy = {a["name"]: a for a in meta["functions"][fns["axpy"].name]["arguments"]}
    assert axpy["X"]["logical_type"] == "runtime_array" and axpy["X"]["size"] == "M*N"
    assert axpy["M"]["logical_type"] == "element" and axpy["M"]["declared_type"] == "int64_t"
    assert axpy["s"]["declared_type"] == "int8_t" and axpy["s"]["usage"] == "input"
    fn = meta["functions"][fns["matmul"].name]
    assert fn["calling_convention"] == "cdecl" and fn["return"]["logical_type"] == "void"
    assert fns["matmul"].name in meta["declaration"]["code"]


def _syntax_check(tmp_path: Path, out: Path, includes, compiler: str):
    src = tmp_path / ("check.cpp" if compiler == "g++" else "check.c")
    src.write_text("".join(f'#include "{i}"\n' for i in includes) + "int main(void) { return 0; }\n")
    std = ["-std=c++17"] if compiler == "g++" else ["-std=c11", "-pedantic"]
    p = subprocess.run([compiler, *std, "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-fsyntax-only",
                        f"-I{out}", str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("compiler", ["gcc", "g++"])
def test_hat_and_header_compile_as_c(vpkg, tmp_path, compiler):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    out = vpkg["out"]
    _syntax_check(tmp_path, out, ["vpkg.hat"], compiler)
    _syntax_check(tmp_path, out, ["vpkg.h"], compiler)
    _syntax_check(tmp_path, out, ["vpkg.h", "vpkg.hat", "vpkg.hat"], compiler)  # guards


def test_unusual_description_text_keeps_the_hat_valid(tmp_path):
    k = K.make_int_axpy(8)
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="ax")
    weird = "O'Brien \"quoted\" back\\slash */ /* ''' \"\"\" tab\t nl\n del\x7f emoji \U0001F600 é"
    pkg.add_description(author=weird, version="0", other={"key with space": weird, "x.y": [1, 2.5, True],
                                                          "nested": {"a": "b"}})
    out = tmp_path / "out"
    pkg.build("weird", output_dir=out, format=acc.Package.Format.HAT_SOURCE)
    meta = tomllib.loads((out / "weird.hat").read_text(encoding="utf-8"))
    assert meta["description"]["author"] == weird
    aux = meta["description"]["auxiliary"]
    assert aux["key with space"] == weird and aux["x.y"] == [1, 2.5, True] and aux["nested"] == {"a": "b"}
    if shutil.which("gcc"):
        _syntax_check(tmp_path, out, ["weird.hat"], "gcc")


# -- 2. argument validation ----------------------------------------------------------------

def _axpy_args(m=3, n=4):
    return [m, n, np.ones((m, n), np.float32), np.zeros((m, n), np.float32), 2]


def test_valid_calls_compute(impl):
    args = _axpy_args()
    impl.axpy(*args)
    assert (args[3] == 2).all()
    x, y = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((3, 4), np.float32)
    impl.axpy(M=3, N=4, X=x, Y=y, s=-3)  # keywords
    np.testing.assert_array_equal(y, 1 - 3 * x)
    impl.axpy(3, 4, x, Y=y, s=np.int8(1))  # positional then keywords; numpy integer scalar
    np.testing.assert_array_equal(y, 1 - 2 * x)
    impl.axpy(0, 0, np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32), 1)  # empty
    a = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    b = np.full((4, 3), -1, np.int32)
    impl.conv(a, b)
    np.testing.assert_array_equal(b, np.arange(12).reshape(4, 3))
    store = np.arange(20, dtype=np.float32).reshape(4, 5)
    y = np.zeros((4, 3), np.float32)
    impl.strided(store[:, :3], y)
    np.testing.assert_array_equal(y, store[:, :3])


def test_wrong_argument_count_and_keywords(impl):
    args = _axpy_args()
    with pytest.raises(TypeError, match=r"takes 5 arguments but 6 were given"):
        impl.axpy(*args, 1)
    with pytest.raises(TypeError, match=r"missing argument 's'"):
        impl.axpy(*args[:4])
    with pytest.raises(TypeError, match=r"missing argument 'M'"):
        impl.axpy()
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'Z'"):
        impl.axpy(*args, Z=1)
    with pytest.raises(TypeError, match=r"multiple values for argument 'Y'"):
        impl.axpy(*args[:4], Y=args[3], s=1)
    with pytest.raises(TypeError, match=r"multiple values for argument 'M'"):
        impl.axpy(*args, M=3)


def test_wrong_dtype_names_the_argument(impl):
    m, n, x, y, s = _axpy_args()
    with pytest.raises(TypeError, match=r"argument 'X': expected dtype float32, got float64"):
        impl.axpy(m, n, x.astype(np.float64), y, s)
    with pytest.raises(TypeError, match=r"argument 'Y': expected dtype float32, got int32"):
        impl.axpy(m, n, x, y.astype(np.int32), s)
    with pytest.raises(TypeError, match=r"argument 'B': expected dtype int32, got >i4"):
        impl.conv(np.asfortranarray(np.zeros((4, 3), np.float32)), np.zeros((4, 3), ">i4"))  # byte order


def test_wrong_shape_names_the_argument(impl):
    m, n, x, y, s = _axpy_args()
    with pytest.raises(ValueError, match=r"argument 'X': expected shape \(3, 4\), got \(4, 3\)"):
        impl.axpy(m, n, x.reshape(4, 3), y, s)
    with pytest.raises(ValueError, match=r"argument 'Y': expected a 2-D array with shape \(3, 4\), got 1-D"):
        impl.axpy(m, n, x, y.reshape(12), s)
    a = np.asfortranarray(np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"argument 'B': expected shape \(4, 3\), got \(4, 4\)"):
        impl.conv(a, np.zeros((4, 4), np.int32))
    with pytest.raises(ValueError, match=r"argument 'A': expected a 2-D array"):
        impl.conv(np.zeros((4, 3, 1), np.float32), np.zeros((4, 3), np.int32))


def test_wrong_strides_and_layouts(impl):
    m, n, x, y, s = _axpy_args()
    wide = np.ones((3, 8), np.float32)
    with pytest.raises(ValueError, match=r"argument 'X': expected a C-contiguous \(FIRST_MAJOR\) array"):
        impl.axpy(m, n, wide[:, ::2], y, s)  # non-contiguous
    with pytest.raises(ValueError, match=r"argument 'Y': expected a C-contiguous"):
        impl.axpy(m, n, x, np.asfortranarray(y), s)
    with pytest.raises(ValueError, match=r"argument 'X'.*byte strides"):
        impl.axpy(m, n, np.ones((3, 4), np.float32)[::-1], y, s)  # negative strides
    c_order = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"argument 'A': expected a Fortran-ordered \(LAST_MAJOR\) array"):
        impl.conv(c_order, np.zeros((4, 3), np.int32))
    with pytest.raises(ValueError, match=r"argument 'B': expected a C-contiguous"):
        impl.conv(np.asfortranarray(c_order), np.asfortranarray(np.zeros((4, 3), np.int32)))
    with pytest.raises(ValueError, match=r"argument 'X': expected an array with the declared explicit strides "
                                         r"\(byte strides \(20, 4\)\), got byte strides \(12, 4\)"):
        impl.strided(np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32))
    # dimensions of size 1 may have any stride
    one = np.ones((1, 4), np.float32)
    impl.axpy(1, 4, np.ones((2, 4), np.float32)[:1], one, 1)
    assert (one == 2).all()


def test_misaligned_array_is_rejected(impl):
    raw = np.zeros(3 * 4 * 4 + 1, np.uint8)
    x = raw[1:].view(np.float32).reshape(3, 4)  # data pointer not aligned to 4 bytes
    assert not x.flags.aligned
    with pytest.raises(ValueError, match=r"argument 'X': the array's data is not aligned"):
        impl.axpy(3, 4, x, np.zeros((3, 4), np.float32), 1)


def test_read_only_output_is_rejected(impl):
    m, n, x, y, s = _axpy_args()
    y.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 'Y' \(input_output\) is written by axpy but the "
                                         r"array is read-only"):
        impl.axpy(m, n, x, y, s)
    b = np.broadcast_to(np.zeros(3, np.int32), (4, 3))
    with pytest.raises(ValueError, match=r"argument 'B'"):
        impl.conv(np.asfortranarray(np.zeros((4, 3), np.float32)), b)
    # read-only inputs are fine
    x.flags.writeable = False
    y2 = np.zeros((3, 4), np.float32)
    impl.axpy(m, n, x, y2, s)
    assert (y2 == 2).all()


def test_overlapping_memory_names_both_arguments(impl):
    buf = np.zeros(24, np.float32)
    with pytest.raises(ValueError, match=r"arguments 'Y' and 'X' share memory"):
        impl.axpy(3, 4, buf[:12].reshape(3, 4), buf[6:18].reshape(3, 4), 1)
    y = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"arguments 'Y' and 'X' share memory"):
        impl.axpy(3, 4, y, y, 1)
    # adjacent, non-overlapping views of one buffer are fine
    buf[:12] = 1
    impl.axpy(3, 4, buf[:12].reshape(3, 4), buf[12:].reshape(3, 4), 5)
    assert (buf[12:] == 5).all() and (buf[:12] == 1).all()


@pytest.mark.parametrize("bad", [[[1.0] * 4] * 3, (1.0,), None, 3.0, "x", object()], ids=repr)
def test_non_numpy_array_argument(impl, bad):
    m, n, x, y, s = _axpy_args()
    with pytest.raises(TypeError, match=r"argument 'X': expected a numpy array of float32 with shape \(3, 4\)"):
        impl.axpy(m, n, bad, y, s)
    with pytest.raises(TypeError, match=r"argument 'Y': expected a numpy array"):
        impl.axpy(m, n, x, bad, s)


def test_runtime_dimensions(impl):
    m, n, x, y, s = _axpy_args()
    with pytest.raises(ValueError, match=r"argument 'M': a dimension must be >= 0, got -1"):
        impl.axpy(-1, n, x, y, s)
    with pytest.raises(ValueError, match=r"argument 'X': expected shape \(4, 4\), got \(3, 4\)"):
        impl.axpy(4, n, x, y, s)
    with pytest.raises(ValueError, match=r"argument 'X': expected shape \(3, 5\)"):
        impl.axpy(m, 5, x, y, s)
    with pytest.raises(ValueError, match=r"argument 'M': the dimension \d+ does not fit in int64"):
        impl.axpy(2 ** 70, n, x, y, s)
    for bad in (3.0, "3", None, np.float64(3), [3]):
        with pytest.raises(TypeError, match=r"argument 'M': expected an int \(a runtime dimension\)"):
            impl.axpy(bad, n, x, y, s)
    impl.axpy(np.int64(3), np.uint8(4), x, y, s)  # any integer type
    assert (y == 2).all()


def test_scalar_arguments(impl):
    x, y = np.ones(5, np.float32), np.zeros(5, np.float32)
    ok = dict(alpha=2.0, b=3, c=-4, d=5, e=0.5, h=0.25)
    impl.scal(x, y, **ok)
    np.testing.assert_allclose(y, 2 + 3 - 4 + 5 + 0.5 + 0.25)
    impl.scal(x, y, **dict(ok, d=2 ** 64 - 1, b=255, alpha=float("inf")))
    assert np.isinf(y).all()
    impl.scal(x, y, **dict(ok, alpha=3.4028235e38, c=-2 ** 63))  # the extremes fit
    out_of_range = [("b", 256), ("b", -1), ("c", 2 ** 63), ("d", -1), ("d", 2 ** 64), ("alpha", 1e39),
                    ("h", 1e5), ("e", 10 ** 400)]
    for name, value in out_of_range:
        with pytest.raises(ValueError, match=rf"argument '{name}': .* does not fit in"):
            impl.scal(x, y, **dict(ok, **{name: value}))
    wrong_type = [("b", 2.5), ("c", "1"), ("d", None), ("b", np.float32(1)), ("alpha", "1.0"), ("e", None)]
    for name, value in wrong_type:
        with pytest.raises(TypeError, match=rf"argument '{name}': expected a"):
            impl.scal(x, y, **dict(ok, **{name: value}))
    with pytest.raises(ValueError, match=r"argument 's': 200 does not fit in int8"):
        impl.axpy(*_axpy_args()[:4], 200)


def test_failed_validation_leaves_arrays_untouched(impl):
    m, n, x, y, s = _axpy_args()
    y[:] = 7
    with pytest.raises(ValueError):
        impl.axpy(m, n, x, y, 1000)  # the last argument is checked after the arrays
    assert (y == 7).all()


def test_garbage_arguments_never_crash(impl):
    """Every argument position, every kind of wrong value: a TypeError or ValueError, nothing else."""
    rng = np.random.default_rng(1)
    garbage = [None, -1, 2 ** 80, 1.5, "s", b"b", [1], (), {}, object(), np.float32(1), np.zeros(0, np.float32),
               np.zeros((3, 4), np.float64), np.zeros((3, 4), np.float32)[:, :2], np.zeros((3, 4, 1), np.float32),
               np.array(3), np.array([[1, 2]], dtype=object), np.zeros((3, 4), np.complex64),
               np.zeros((3, 4), dtype=[("a", "f4")])]
    good = _axpy_args()
    for _ in range(3):
        for pos in range(5):
            for g in garbage:
                args = list(good)
                args[pos] = g
                try:
                    impl.axpy(*args)
                except (TypeError, ValueError):
                    pass
                else:  # a few are valid (e.g. M = np.array(3) when pos is 0)
                    assert pos in (0, 1, 4), (pos, g)
        rng.shuffle(garbage)


@pytest.mark.slow
def test_gil_is_released_while_a_kernel_runs(impl):
    """While one thread runs a long kernel, the main thread keeps running Python code."""
    f = impl.slowmm

    def arrays(n):
        return (np.ones((n, n)), np.ones((n, n)), np.zeros((n, n)))

    n = 128
    while True:  # size the call to take about 0.3 s
        a, b, c = arrays(n)
        t = time.perf_counter()
        f(n, n, n, a, b, c)
        dt = time.perf_counter() - t
        if dt > 0.05 or n >= 1024:
            break
        n *= 2
    n = min(2048, int(n * (0.3 / max(dt, 1e-3)) ** (1 / 3)) + 1)
    a, b, c = arrays(n)
    window = {}

    def run():
        window["start"] = time.perf_counter()
        f(n, n, n, a, b, c)
        window["end"] = time.perf_counter()

    th = threading.Thread(target=run)
    ticks = []
    th.start()
    while th.is_alive():
        ticks.append(time.perf_counter())
    th.join()
    assert c[0, 0] == n and c[-1, -1] == n  # it computed
    lo, hi = window["start"], window["end"]
    inside = [t for t in ticks if lo + 0.01 < t < hi - 0.01]
    assert hi - lo > 0.05
    # with the GIL held during the call, the main thread could not tick inside the window
    assert len(inside) > 100, (len(inside), hi - lo)


def test_kernel_objects_have_a_useful_repr(vpkg, vmod):
    for f in (vpkg["lib"].axpy, vmod.axpy):
        assert re.fullmatch(r"<accpy kernel axpy_[0-9a-f]{16}\(M, N, X, Y, s\)>", repr(f))


# -- 3. DEBUG mode -------------------------------------------------------------------------

def _wrong_lowering(monkeypatch, buffer_name, cells, delta=None):
    """Make PackageFunction.lowered emit a wrong kernel: the stores into `buffer_name` at the
    given cells are dropped (delta None) or have `delta` added to their value."""
    import dataclasses

    from accpy.ir.expr import BinOp, Const, UnOp
    from accpy.ir.stmt import If
    from accpy.ir.types import ScalarType
    from accpy.ir.visitor import Mutator
    from accpy.package.package import PackageFunction

    orig = PackageFunction.lowered
    B = ScalarType.bool

    def at(indices, cell):
        cond = None
        for e, v in zip(indices, cell):
            c = BinOp("eq", e, Const(v), B)
            cond = c if cond is None else BinOp("land", cond, c, B)
        return cond

    class Perturb(Mutator):
        def visit_Store(self, st):
            if st.buffer.name != buffer_name:
                return st
            hit = None
            for cell in cells:
                c = at(st.indices, cell)
                hit = c if hit is None else BinOp("lor", hit, c, B)
            if delta is None:
                return If(UnOp("not", hit, B), st)
            bumped = type(st)(st.buffer, st.indices, BinOp("add", st.value, Const(delta, st.value.dtype),
                                                            st.value.dtype), st.reduce)
            return If(hit, bumped, st)

    def wrong(self, name):
        fn = orig(self, name)
        return dataclasses.replace(fn, body=Perturb().visit(fn.body))

    monkeypatch.setattr(PackageFunction, "lowered", wrong)


DEBUG = acc.Package.Mode.DEBUG


@pytest.mark.slow
def test_debug_mode_passes_correct_kernels(tmp_path):
    kernels = [K.make_matmul(13, 11, 7, tiles=(4, 5), k_split=3, base_name="mm"), K.make_runtime_matmul(),
               K.make_conv1d_skewed(), K.make_conv1d_skewed(9, 4, unroll_below=3, base_name="conv_u"),
               K.make_last_major(), K.make_int_axpy()]
    pkg = acc.Package()
    for k in kernels:
        pkg.add(k.source, args=k.args, base_name=k.base_name)
    lib = pkg.build("dbg_ok", output_dir=tmp_path, mode=DEBUG, python_module=False)
    rng = np.random.default_rng(5)
    for k in kernels:
        K.run(k, getattr(lib, k.base_name), rng)
    assert "__reference" in (tmp_path / "dbg_ok.c").read_text()


def test_debug_mode_reports_the_first_differing_index(tmp_path, monkeypatch, capfd):
    k = K.make_matmul(6, 7, 5, tiles=(4, 3), base_name="mm")
    _wrong_lowering(monkeypatch, "C", [(3, 2), (5, 1)])  # two elements never updated
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="mm")
    lib = pkg.build("dbg_bad", output_dir=tmp_path / "d", mode=DEBUG, python_module=False)
    vals = k.call_args(np.random.default_rng(2))
    want = k.oracle(K.copy_inputs(vals))["C"]
    with pytest.raises(acc.KernelError, match=r"DEBUG mode: C\[3, 2\] differs from the reference \(unscheduled\) "
                                              r"result: expected [-\d.e+]+, got [-\d.e+]+") as e:
        lib.mm(*vals.values())
    assert str(e.value).startswith("mm: ")  # the name the user calls it by, not the hashed name
    assert "C[3, 2]" in capfd.readouterr().err  # also printed, as Accera does
    # the array holds the scheduled (wrong) result; the rest is right
    assert vals["C"][3, 2] != pytest.approx(want[3, 2])
    mask = np.ones_like(want, bool)
    mask[3, 2] = mask[5, 1] = False
    np.testing.assert_allclose(vals["C"][mask], want[mask], rtol=1e-4, atol=1e-4)
    # the same wrong kernel in RELEASE mode is silently wrong: DEBUG is what catches it
    rel = pkg.build("rel_bad", output_dir=tmp_path / "r", python_module=False)
    vals = k.call_args(np.random.default_rng(2))
    rel.mm(*vals.values())
    assert vals["C"][3, 2] != pytest.approx(want[3, 2])


def test_debug_mode_tolerance(tmp_path, monkeypatch):
    k = K.make_matmul(6, 7, 5, tiles=(4, 3), base_name="mm")
    _wrong_lowering(monkeypatch, "C", [(4, 6)], delta=1e-3)  # a small error in one element
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="mm")
    strict = pkg.build("tol_strict", output_dir=tmp_path, mode=DEBUG, python_module=False)
    loose = pkg.build("tol_loose", output_dir=tmp_path, mode=DEBUG, tolerance=1e-2, python_module=False)
    with pytest.raises(acc.KernelError, match=r"C\[4, 6\] differs"):
        strict.mm(*k.call_args(np.random.default_rng(3)).values())
    loose.mm(*k.call_args(np.random.default_rng(3)).values())  # within tolerance


def test_debug_mode_compares_integers_exactly(tmp_path, monkeypatch):
    k = K.make_int_axpy(37)
    _wrong_lowering(monkeypatch, "Y", [(33,)], delta=1)
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="ax")
    lib = pkg.build("dbg_int", output_dir=tmp_path, mode=DEBUG, python_module=False)
    vals = k.call_args(np.random.default_rng(4))
    want = k.oracle(K.copy_inputs(vals))["Y"]
    with pytest.raises(acc.KernelError, match=rf"Y\[33\] differs .*: expected {want[33]}, got {want[33] + 1}$"):
        lib.ax(*vals.values())


def test_debug_mismatch_through_the_c_error_channel(tmp_path, monkeypatch):
    """From C, a DEBUG mismatch is reported by <package>_last_error(), once."""
    import ctypes

    k = K.make_int_axpy(16)
    _wrong_lowering(monkeypatch, "Y", [(3,)], delta=5)
    pkg = acc.Package()
    f = pkg.add(k.source, args=k.args, base_name="ax")
    pkg.build("dbg_c", output_dir=tmp_path, mode=DEBUG, python_module=False)
    so = ctypes.CDLL(str(tmp_path / "libdbg_c.so"))
    last_error = so.dbg_c_last_error
    last_error.restype = ctypes.c_char_p
    fn = getattr(so, f.name)
    x, y = np.arange(16, dtype=np.int32), np.zeros(16, np.int32)
    P = ctypes.POINTER(ctypes.c_int32)
    assert last_error() is None
    fn(x.ctypes.data_as(P), y.ctypes.data_as(P), ctypes.c_int32(2))
    msg = last_error()
    assert msg is not None and b"Y[3] differs" in msg
    assert last_error() is None  # taken


# -- 4. build cache, concurrency, compiler errors -------------------------------------------

def _build_mm(out, tiles=(5, 7), name="cpk", **kw):
    k = K.make_matmul(16, 20, 12, tiles=tiles, base_name="matmul")
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="matmul")
    return k, pkg.build(name, output_dir=out, **kw)


def test_identical_rebuild_hits_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    k, first = _build_mm(tmp_path / "a", python_module=False)
    assert first.timings["cache_hit"] is False and first.timings["gcc"] > 0
    t = time.perf_counter()
    k2, second = _build_mm(tmp_path / "b", python_module=False)  # a new Package with the same content
    wall = time.perf_counter() - t
    assert second.timings["cache_hit"] is True and second.timings["gcc"] == 0
    assert wall < max(1.0, first.timings["total"])
    assert (tmp_path / "a" / "libcpk.so").read_bytes() == (tmp_path / "b" / "libcpk.so").read_bytes()
    K.run(k2, second.matmul, np.random.default_rng(0))
    assert list((tmp_path / "cache" / "lib").iterdir())  # entries live in $ACCPY_CACHE_DIR


@pytest.mark.slow
def test_identical_rebuild_in_another_process_hits_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    _build_mm(tmp_path / "a", python_module=False)
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(HERE)!r})
        import accpy as acc
        from abi import kernels as K
        k = K.make_matmul(16, 20, 12, tiles=(5, 7), base_name="matmul")
        pkg = acc.Package()
        pkg.add(k.source, args=k.args, base_name="matmul")
        lib = pkg.build("cpk", output_dir={str(tmp_path / "b")!r}, python_module=False)
        print(json.dumps(lib.timings["cache_hit"]))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) is True


def test_changed_schedule_recompiles(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    _, first = _build_mm(tmp_path, tiles=(5, 7), python_module=False)
    before = (tmp_path / "libcpk.so").read_bytes()
    k, second = _build_mm(tmp_path, tiles=(4, 4), python_module=False)
    assert second.timings["cache_hit"] is False and second.timings["gcc"] > 0
    assert (tmp_path / "libcpk.so").read_bytes() != before
    K.run(k, second.matmul, np.random.default_rng(1))
    K.run(k, first.matmul, np.random.default_rng(1))  # the earlier object still works


@pytest.mark.slow
def test_module_of_an_identical_rebuild_is_cached(tmp_path, vpkg):
    vpkg["lib"].python_module()  # the module core is in the shared cache
    _, a = _build_mm(tmp_path / "a", name="mpk", python_module="sync")
    _, b = _build_mm(tmp_path / "b", name="mpk", python_module="sync")
    assert b.timings["pybind11_cache_hit"] is True
    k, c = _build_mm(tmp_path / "c", name="mpk", tiles=(3, 3), python_module="sync")
    # a new schedule relinks the module but does not recompile pybind11 (the core is cached)
    assert c.timings["pybind11_cache_hit"] is False and c.timings["pybind11"] < 5
    K.run(k, c.python_module().matmul, np.random.default_rng(2))


CONCURRENT_SRC = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {tests!r})
    import numpy as np
    import accpy as acc
    from abi import kernels as K
    name, tiles, start, module = sys.argv[1], tuple(json.loads(sys.argv[2])), float(sys.argv[3]), sys.argv[4]
    k = K.make_matmul(16, 20, 12, tiles=tiles, base_name="matmul")
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="matmul")
    while time.time() < start:  # all processes start building together
        time.sleep(0.001)
    lib = pkg.build(name, output_dir={out!r}, python_module=module if module != "none" else False)
    K.run(k, lib.matmul, np.random.default_rng(0))
    if module != "none":
        K.run(k, lib.python_module().matmul, np.random.default_rng(0))
    print("built", name, lib.timings["cache_hit"])
""")


@pytest.mark.slow
def test_concurrent_builds_into_one_directory(tmp_path, monkeypatch, vpkg):
    """Processes building the same and different packages into one directory at once."""
    vpkg["lib"].python_module()  # the module core is in the shared cache: module builds are links
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "build_one.py"
    script.write_text(CONCURRENT_SRC.format(tests=str(HERE), out=str(out)))
    start = time.time() + 2.0
    jobs = [("same", [5, 7], "sync")] * 3 + [("same", [5, 7], "none")] + \
        [(f"p{t}", [t, t + 1], "sync" if t % 2 else "none") for t in (2, 3, 4)]
    procs = [subprocess.Popen([sys.executable, str(script), name, json.dumps(tiles), str(start), mod],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, tiles, mod in jobs]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for (stdout, stderr, rc), job in zip(results, jobs):
        assert rc == 0, f"{job}: {stderr}"
        assert stdout.startswith(f"built {job[0]}")
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    for name, tiles, _ in dict(((j[0], j) for j in jobs)).values():
        k = K.make_matmul(16, 20, 12, tiles=tuple(tiles), base_name="matmul")
        lib = acc.load(out / f"{name}.hat")
        K.run(k, lib.matmul, np.random.default_rng(9))
        tomllib.loads((out / f"{name}.hat").read_text())
        if (out / f"{name}{EXT}").exists():
            K.run(k, lib.python_module().matmul, np.random.default_rng(9))
    cache = Path(os.environ["ACCPY_CACHE_DIR"])
    assert not [p for p in (cache / "lib").iterdir() if p.name.startswith(".build-")]


RACE_SRC = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_package import _build_scale
    factor, start = int(sys.argv[1]), float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.001)
    _build_scale({out!r}, factor, name="race", python_module=sys.argv[3] if sys.argv[3] != "none" else False)
""")


@pytest.mark.slow
def test_racing_builds_of_one_package_leave_a_consistent_set(tmp_path, vpkg):
    """Builds of the same package with different code, racing into one directory: the
    directory ends up holding one build's files (.c, .hat, .so, module), not a mix."""
    vpkg["lib"].python_module()  # module core cached
    out = tmp_path / "out"
    script = tmp_path / "race.py"
    script.write_text(RACE_SRC.format(tests=str(HERE), out=str(out)))
    start = time.time() + 2.0
    jobs = [(2, "sync"), (3, "async"), (4, "none"), (5, "sync")]
    procs = [subprocess.Popen([sys.executable, str(script), str(f), str(start), m], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f, m in jobs]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    lib = acc.load(out / "race.hat")
    factor = _scale(lib.scale)
    assert factor in (2, 3, 4, 5)
    products = re.findall(r"\* (\d+)\.0f\)", (out / "race.c").read_text())
    assert products == [str(int(factor))]  # the emitted source is that build's too
    module = out / f"race{EXT}"
    if module.exists():  # absent only when the last build had no module
        assert _scale(lib.python_module().scale) == factor
    else:
        assert factor == 4


def test_compiler_failure_bad_flag(tmp_path, monkeypatch):
    import accpy.package.compile as comp

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(comp, "BASE_CFLAGS", comp.BASE_CFLAGS + ["-fno-such-flag-accpy"])
    with pytest.raises(acc.CompileError) as e:
        _build_mm(tmp_path / "out", name="badflag", python_module=False)
    msg = str(e.value)
    assert "-fno-such-flag-accpy" in msg and "unrecognized" in msg  # the compiler's own message
    assert str(tmp_path / "out" / "badflag.c") in msg
    assert isinstance(e.value, RuntimeError)
    assert (tmp_path / "out" / "badflag.c").is_file()  # kept for inspection
    assert not [p for p in (tmp_path / "cache" / "lib").iterdir()]  # nothing half-built is published


def test_compiler_failure_bad_source(tmp_path, monkeypatch):
    import accpy.package.package as pkgmod

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    orig = pkgmod.c_source
    monkeypatch.setattr(pkgmod, "c_source", lambda *a, **kw: orig(*a, **kw) + "\nint accpy_broken( {\n")
    with pytest.raises(acc.CompileError) as e:
        _build_mm(tmp_path / "out", name="badsrc", python_module=False)
    msg = str(e.value)
    path = str(tmp_path / "out" / "badsrc.c")
    assert re.search(re.escape(path) + r":\d+:\d+: error:", msg), msg  # gcc's message, with our file's path
    assert "kernel.c" not in msg  # not the cache's private copy
    n_lines = len((tmp_path / "out" / "badsrc.c").read_text().splitlines())
    line = int(re.search(re.escape(path) + r":(\d+):", msg).group(1))
    assert n_lines - 2 <= line <= n_lines


def test_python_module_compiler_failure(tmp_path, vpkg, monkeypatch):
    import accpy.package.package as pkgmod

    vpkg["lib"].python_module()  # module core cached
    orig = pkgmod.module_source
    monkeypatch.setattr(pkgmod, "module_source", lambda *a: orig(*a) + "\nint broken( {\n")
    k = K.make_int_axpy(5)
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="ax")
    with pytest.raises(acc.CompileError) as e:
        pkg.build("badmod", output_dir=tmp_path, python_module="sync")
    msg = str(e.value)
    assert re.search(re.escape(str(tmp_path / "badmod_module.cpp")) + r":\d+:\d+: error:", msg), msg
    # the library itself was built and works; the failed module was not published
    assert not (tmp_path / f"badmod{EXT}").exists()
    K.run(k, acc.load(tmp_path / "badmod.hat").ax, np.random.default_rng(0))


# -- 8. acc.load ---------------------------------------------------------------------------

def _build_scale(out, factor, name="ld", tiles=None, python_module=False):
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(10,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(10,))
    nest = acc.Nest(shape=(10,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] = X[i] * float(factor)

    sched = nest.create_schedule()
    if tiles:
        sched.split(i, tiles)
    pkg = acc.Package()
    f = pkg.add(sched, args=(X, Y), base_name="scale")
    return f, pkg.build(name, output_dir=out, python_module=python_module)


def _scale(fn):
    y = np.zeros(10, np.float32)
    fn(np.arange(10, dtype=np.float32), y)
    return y[3] / 3


def test_load_by_hat_directory_and_name(vpkg, tmp_path):
    out = vpkg["out"]
    rng = np.random.default_rng(6)
    for lib in (acc.load(out / "vpkg.hat"), acc.load(str(out / "vpkg.hat")), acc.load(out, name="vpkg"),
                acc.load(out / "vpkg"), acc.load(out)):
        assert set(lib.function_names) == set(vpkg["lib"].function_names)
        K.run(MM, lib.matmul, rng)
        K.run(MM, getattr(lib, vpkg["fns"]["matmul"].name), rng)
        args = _axpy_args()
        lib.axpy(*args)
        assert (args[3] == 2).all()
        with pytest.raises(TypeError, match="argument 'X'"):  # the signature came from the .hat
            lib.axpy(3, 4, np.ones((3, 4)), args[3], 1)
    vpkg["lib"].python_module()  # wait for the background build
    K.run(MM, acc.load(out).python_module().matmul, rng)
    with pytest.raises(FileNotFoundError):
        acc.load(tmp_path / "nothing.hat")
    two = tmp_path / "two"
    _build_scale(two, 2, name="one")
    _build_scale(two, 3, name="other")
    with pytest.raises(ValueError, match="2 .hat files"):
        acc.load(two)
    assert _scale(acc.load(two, name="other").scale) == 3
    # a HAT file written by another tool (no accpy metadata): a clear error, not a KeyError
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    text = (two / "one.hat").read_text()
    (foreign / "one.hat").write_text(re.sub(r", accpy_\w+ = (\[[^\]]*\]|\"[^\"]*\")", "", text))
    shutil.copy(two / "libone.so", foreign / "libone.so")
    assert "accpy_kind" not in (foreign / "one.hat").read_text()
    tomllib.loads((foreign / "one.hat").read_text())
    with pytest.raises(ValueError, match="was not built by accpy"):
        acc.load(foreign / "one.hat")
    # sources only: no library to load
    src_only = tmp_path / "src_only"
    k = K.make_int_axpy(4)
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="ax")
    pkg.build("srconly", output_dir=src_only, format=acc.Package.Format.HAT_SOURCE)
    with pytest.raises(FileNotFoundError, match="libsrconly.so does not exist"):
        acc.load(src_only / "srconly.hat")


@pytest.mark.slow
def test_load_after_rebuild_is_not_stale(tmp_path):
    out = tmp_path / "out"
    _, b1 = _build_scale(out, 2, python_module="sync")
    l1 = acc.load(out / "ld.hat")
    m1 = l1.python_module()
    assert _scale(b1.scale) == _scale(l1.scale) == _scale(m1.scale) == 2
    _, b2 = _build_scale(out, 5, python_module="sync")  # same name and signature, new code
    l2 = acc.load(out / "ld.hat")
    m2 = l2.python_module()
    assert _scale(b2.scale) == _scale(l2.scale) == _scale(m2.scale) == 5
    assert _scale(l1.scale) == _scale(m1.scale) == 2  # objects loaded earlier keep their code
    # a changed schedule of the same function: a different library, still right
    _, b3 = _build_scale(out, 5, tiles=4, python_module="sync")
    assert b3.timings["cache_hit"] is False
    assert _scale(acc.load(out / "ld.hat").scale) == 5
    assert _scale(acc.load(out / "ld.hat").python_module().scale) == 5


@pytest.mark.slow
def test_same_package_name_in_two_directories(tmp_path):
    """Modules of two packages with the same name coexist in one process (no cross-binding)."""
    _, a = _build_scale(tmp_path / "a", 2, name="twin", python_module="sync")
    _, b = _build_scale(tmp_path / "b", 3, name="twin", python_module="sync")
    ma, mb = a.python_module(), b.python_module()
    assert ma is not mb
    assert (_scale(a.scale), _scale(b.scale), _scale(ma.scale), _scale(mb.scale)) == (2, 3, 2, 3)


def test_python_module_is_standalone(vpkg, tmp_path):
    """The module imports with a plain `import`, from a directory holding nothing else."""
    vpkg["lib"].python_module()
    shutil.copy(vpkg["out"] / f"vpkg{EXT}", tmp_path / f"vpkg{EXT}")
    code = textwrap.dedent("""
        import numpy as np, vpkg
        x, y = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
        vpkg.axpy(2, 3, x, y, 4)
        assert (y == 4).all()
        try:
            vpkg.axpy(2, 3, x, y, 1000)
        except ValueError as e:
            print("ValueError", e)
        print("ok", vpkg.matmul.name)
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"})
    assert p.returncode == 0, p.stderr
    assert "does not fit in int8" in p.stdout and f"ok {vpkg['fns']['matmul'].name}" in p.stdout
    if shutil.which("readelf"):
        dyn = subprocess.run(["readelf", "-d", str(tmp_path / f"vpkg{EXT}")], capture_output=True, text=True).stdout
        assert "libvpkg" not in dyn


# -- Package.add / build arguments -------------------------------------------------------

def test_add_rejects_bad_arguments():
    k = K.make_matmul(4, 4, 4)
    A, B, C = k.args
    pkg = acc.Package()
    with pytest.raises(ValueError, match=r"args: the array C is used by the logic"):
        pkg.add(k.source, args=(A, B), base_name="mm")
    with pytest.raises(ValueError, match=r"args"):
        pkg.add(k.source, args=None, base_name="mm")
    with pytest.raises(ValueError, match=r"base_name: '1mm' is not a valid C identifier"):
        pkg.add(k.source, args=k.args, base_name="1mm")
    for kw in ("for", "int", "class", "main"):
        with pytest.raises(ValueError, match=rf"base_name: '{kw}' is a C/C\+\+ keyword"):
            pkg.add(k.source, args=k.args, base_name=kw)
    with pytest.raises(ValueError, match=r"source: expected an acc.Nest, Schedule or Plan"):
        pkg.add("nest", args=k.args, base_name="mm")
    with pytest.raises(TypeError, match=r"parameters"):
        pkg.add(k.source, args=k.args, base_name="mm", parameters=3)
    T = acc.Array(role=acc.Role.TEMP, name="T", shape=(4,))
    with pytest.raises(ValueError, match=r"TEMP"):
        pkg.add(k.source, args=(A, B, C, T), base_name="mm")
    assert pkg.functions == []


@pytest.mark.parametrize("bad", ["exp", "int32_t", "NAN", "linux", "new", "accpy_x", "__x"])
def test_argument_names_that_cannot_name_c_parameters(bad):
    X = acc.Array(role=acc.Role.INPUT, name=bad, shape=(4,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(4,))
    nest = acc.Nest(shape=(4,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i]

    with pytest.raises(ValueError, match=rf"args\[0\]: the name '{bad}' cannot name a C argument"):
        acc.Package().add(nest, args=(X, Y), base_name="f")


@pytest.mark.parametrize("name", ["free", "fabs_", "ref_Y", "stderr", "malloc", "memcpy_"])
def test_argument_names_near_library_names_build_in_debug_mode(tmp_path, name):
    X = acc.Array(role=acc.Role.INPUT, name=name, shape=(4,), element_type=acc.ScalarType.float64)
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(4,), element_type=acc.ScalarType.float64)
    nest = acc.Nest(shape=(4,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += acc.abs(X[i])

    pkg = acc.Package()
    pkg.add(nest, args=(X, Y), base_name="f")
    lib = pkg.build("names_" + name, output_dir=tmp_path, mode=DEBUG, python_module=False)
    y = np.zeros(4)
    lib.f(-np.arange(4.0), y)
    np.testing.assert_array_equal(y, np.arange(4.0))


def test_build_rejects_bad_arguments(tmp_path):
    with pytest.raises(RuntimeError, match="no functions"):
        acc.Package().build("empty", output_dir=tmp_path)
    pkg = acc.Package()
    k = K.make_int_axpy(4)
    pkg.add(k.source, args=k.args, base_name="ax")
    for bad in ("1x", "a-b", "", "é"):
        with pytest.raises(ValueError, match="name"):
            pkg.build(bad, output_dir=tmp_path)
    with pytest.raises(ValueError, match="platform"):
        pkg.build("p", output_dir=tmp_path, platform=acc.Package.Platform.WINDOWS)
    with pytest.raises(ValueError, match="MLIR"):
        pkg.build("p", output_dir=tmp_path, format=acc.Package.Format.MLIR)
    with pytest.raises(TypeError, match="mode"):
        pkg.build("p", output_dir=tmp_path, mode="debug")
    with pytest.raises(ValueError, match="tolerance"):
        pkg.build("p", output_dir=tmp_path, tolerance=-1)
    with pytest.raises(ValueError, match="python_module"):
        pkg.build("p", output_dir=tmp_path, python_module="later")


def test_formats(tmp_path):
    k = K.make_int_axpy(6)
    pkg = acc.Package()
    pkg.add(k.source, args=k.args, base_name="ax")
    assert pkg.build("src", output_dir=tmp_path / "s", format=acc.Package.Format.HAT_SOURCE) is None
    # (and the lock file that serializes concurrent builds of this package)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [".src.lock", "src.c", "src.h", "src.hat"]
    lib = pkg.build("dyn", output_dir=tmp_path / "d", format=acc.Package.Format.HAT_DYNAMIC, python_module=False)
    assert (tmp_path / "d" / "libdyn.so").is_file() and not (tmp_path / "d" / "dyn.a").exists()
    K.run(k, lib.ax, np.random.default_rng(0))
    pkg.build("both", output_dir=tmp_path / "b", python_module=False)
    assert (tmp_path / "b" / "libboth.so").is_file() and (tmp_path / "b" / "both.a").is_file()
    # a rebuild never leaves files of the earlier build that no longer match
    pkg.build("both", output_dir=tmp_path / "b", format=acc.Package.Format.HAT_DYNAMIC, python_module=False)
    assert not (tmp_path / "b" / "both.a").exists()
    pkg.build("both", output_dir=tmp_path / "b", format=acc.Package.Format.HAT_SOURCE)
    assert not (tmp_path / "b" / "libboth.so").exists()
