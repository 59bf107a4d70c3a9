"""The C ABI of built packages, and the HAT file read by the reference loader (hatlib).

A C program (tests/abi/matmul_main.c) includes `name.h` or `name.hat` (both C headers),
links `libname.so` or `name.a`, calls the functions by full name and by base-name alias
and checks them against a naive loop. hatlib (PyPI, unmodified) loads `name.hat` and
calls the functions on numpy arrays in a Python 3.10 subprocess.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import accpy as acc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from abi import kernels as K  # noqa: E402

MAIN_C = HERE / "abi" / "matmul_main.c"
MM = (13, 11, 7)
RT = (10, 9, 5)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One package: matmul (ragged tiles), rt_matmul (runtime sizes), lm_matmul, axpy_i32."""
    tmp = tmp_path_factory.mktemp("abi")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCPY_CACHE_DIR", str(tmp / "cache"))
        kernels = {
            "matmul": K.make_matmul(*MM, tiles=(4, 5), k_split=3, base_name="matmul"),
            "rt_matmul": K.make_runtime_matmul(dims=RT, tiles=(4, 4), base_name="rt_matmul"),
            "lm_matmul": K.make_last_major(7, 10, 6, base_name="lm_matmul"),
            "axpy_i32": K.make_int_axpy(37, base_name="axpy_i32"),
        }
        pkg = acc.Package()
        fns = {n: pkg.add(k.source, args=k.args, base_name=k.base_name) for n, k in kernels.items()}
        out = tmp / "out"
        pkg.build("abi_pkg", output_dir=out, python_module=False)
    return {"out": out, "fns": fns, "kernels": kernels, "tmp": tmp}


def _compile_and_run(built, tmp: Path, headers, link: str, compiler="gcc") -> subprocess.CompletedProcess:
    out = built["out"]
    fns = built["fns"]
    defs = [f"-DACCPY_HEADER=\"{headers[0]}\"", f"-DMM_FULL={fns['matmul'].name}",
            f"-DRT_FULL={fns['rt_matmul'].name}", "-DLAST_ERROR=abi_pkg_last_error",
            f"-DSIZE_M={MM[0]}", f"-DSIZE_N={MM[1]}", f"-DSIZE_K={MM[2]}",
            f"-DRT_M={RT[0]}", f"-DRT_N={RT[1]}", f"-DRT_K={RT[2]}"]
    if len(headers) > 1:
        defs.append(f"-DACCPY_HEADER2=\"{headers[1]}\"")
    exe = tmp / "prog"
    lang = ["-x", "c++", "-std=c++17"] if compiler == "g++" else ["-std=c11", "-pedantic"]
    cmd = [compiler, *lang, "-Wall", "-Werror", "-Wno-unused-function", f"-I{out}", *defs, str(MAIN_C)]
    if compiler == "g++":
        cmd += ["-x", "none"]
    if link == "shared":
        cmd += [f"-L{out}", "-labi_pkg", f"-Wl,-rpath,{out}"]
    else:
        cmd += [str(out / "abi_pkg.a")]
    cmd += ["-lm", "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr}"
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60), exe


@pytest.mark.parametrize("headers", [("abi_pkg.h",), ("abi_pkg.hat",), ("abi_pkg.h", "abi_pkg.hat")],
                         ids=["h", "hat", "h+hat"])
@pytest.mark.slow
def test_c_program_links_shared_library(built, tmp_path, headers):
    r, _ = _compile_and_run(built, tmp_path, headers, "shared")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_c_program_links_static_archive(built, tmp_path):
    r, exe = _compile_and_run(built, tmp_path, ("abi_pkg.hat",), "static")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
    if shutil.which("readelf"):
        dyn = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
        assert "libabi_pkg" not in dyn  # the kernels are inside the executable


def test_cxx_program_uses_the_extern_c_header(built, tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    r, _ = _compile_and_run(built, tmp_path, ("abi_pkg.h", "abi_pkg.hat"), "shared", compiler="g++")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_c_program_detects_a_wrong_result(built, tmp_path):
    """The checking program is not vacuous: with a reference that subtracts, it fails."""
    fns = built["fns"]
    out = built["out"]
    bad_c = tmp_path / "bad_main.c"
    bad_c.write_text(MAIN_C.read_text().replace("s += (double)A", "s -= (double)A"))
    exe = tmp_path / "prog_bad"
    cmd = ["gcc", "-std=c11", f"-I{out}", "-DACCPY_HEADER=\"abi_pkg.h\"", f"-DMM_FULL={fns['matmul'].name}",
           f"-DRT_FULL={fns['rt_matmul'].name}", "-DLAST_ERROR=abi_pkg_last_error",
           f"-DSIZE_M={MM[0]}", f"-DSIZE_N={MM[1]}", f"-DSIZE_K={MM[2]}",
           f"-DRT_M={RT[0]}", f"-DRT_N={RT[1]}", f"-DRT_K={RT[2]}", str(bad_c),
           f"-L{out}", "-labi_pkg", f"-Wl,-rpath,{out}", "-lm", "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "matmul (alias): element" in r.stderr


# -- hatlib ---------------------------------------------------------------------------------

def _python310():
    """(interpreter with hatlib and numpy, None) or (None, why not)."""
    cands = []
    w = shutil.which("python3.10")
    if w:
        cands.append(w)
    cands += sorted(glob.glob("/root/.pyenv/versions/3.10*/bin/python3.10"))
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10*/bin/python3.10")))
    runnable = []
    for c in dict.fromkeys(cands):
        try:
            ok = subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"],
                                capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if not ok:
            continue
        runnable.append(c)
        if subprocess.run([c, "-c", "import hatlib, numpy"], capture_output=True, timeout=120).returncode == 0:
            return c, None
    if runnable:
        return None, (f"hatlib needs Python 3.10; {runnable[0]} lacks hatlib or numpy "
                      f"(`{runnable[0]} -m pip install hatlib numpy`, as .ci/run does)")
    return None, "hatlib does not import on Python 3.11 and no python3.10 interpreter was found"


HATLIB_SCRIPT = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    import hatlib

    hat_path, spec = sys.argv[1], json.loads(sys.argv[2])
    pkg, funcs = hatlib.load(hat_path)
    rng = np.random.default_rng(3)
    report = {"names": sorted(funcs.names)}

    def check(got, want, what):
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            raise SystemExit(f"{what}: max error {np.abs(got - want).max()}")

    M, N, K = spec["mm"]
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    for key in ("matmul", spec["mm_full"]):  # base-name prefix match, and the full name
        C = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        want = C + A @ B
        funcs[key](A, B, C)
        check(C, want, key)

    m, n, k = spec["rt"]
    A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    C = np.zeros((m, n), np.float32)
    funcs["rt_matmul"](np.int64(m), np.int64(n), np.int64(k), A, B, C)
    check(C, A @ B, "rt_matmul")

    A = np.asfortranarray(rng.uniform(-1, 1, (7, 6)).astype(np.float32))
    Bs = rng.uniform(-1, 1, (6, 13)).astype(np.float32)
    B = np.lib.stride_tricks.as_strided(Bs, shape=(6, 10), strides=(13 * 4, 4))
    C = np.zeros((7, 10), np.float32)
    funcs["lm_matmul"](A, B, C)
    check(C, A @ B, "lm_matmul")

    X = np.arange(37, dtype=np.int32)
    Y = np.ones(37, dtype=np.int32)
    funcs["axpy_i32"](X, Y, np.int32(3))
    if not (Y == 1 + 3 * np.arange(37)).all():
        raise SystemExit("axpy_i32 differs")
    print(json.dumps(report))
""")


def test_hatlib_loads_and_calls_the_package(built, tmp_path):
    py, why = _python310()
    if py is None:
        pytest.skip(why)
    script = tmp_path / "use_hatlib.py"
    script.write_text(HATLIB_SCRIPT)
    fns = built["fns"]
    spec = {"mm": list(MM), "mm_full": fns["matmul"].name, "rt": list(RT)}
    r = subprocess.run([py, str(script), str(built["out"] / "abi_pkg.hat"), json.dumps(spec)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, f"hatlib rejected the package:\n{r.stdout}\n{r.stderr}"
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["names"] == sorted(f.name for f in fns.values())


# -- the runtime's error channel ---------------------------------------------------------------

def test_error_channel_across_threads(tmp_path):
    """Errors on OpenMP workers reach the caller; errors on other threads never do."""
    from accpy.paths import native_dir

    exe = tmp_path / "error_channel"
    p = subprocess.run(["gcc", "-std=gnu11", "-fopenmp", "-pthread", f"-I{native_dir()}",
                        str(HERE / "abi" / "error_channel.c"), "-o", str(exe), "-lm"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr)


def test_c_entry_errors_do_not_leak_into_later_calls(tmp_path, monkeypatch):
    """A C caller's error (taken or not) is not reported again by a later, successful call."""
    import ctypes

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    from accpy.package.package import PackageFunction

    bad_k, good_k = K.make_int_axpy(16, base_name="bad"), K.make_int_axpy(16, base_name="good")
    orig = PackageFunction.lowered

    def lowered(self, name):  # `bad` adds 5 to Y[3]: a DEBUG mismatch
        import dataclasses

        from accpy.ir.expr import BinOp, Const
        from accpy.ir.stmt import If
        from accpy.ir.types import ScalarType
        from accpy.ir.visitor import Mutator

        fn = orig(self, name)
        if self.base_name != "bad":
            return fn

        class Bump(Mutator):
            def visit_Store(self, st):
                hit = BinOp("eq", st.indices[0], Const(3), ScalarType.bool)
                bumped = type(st)(st.buffer, st.indices, BinOp("add", st.value, Const(5, st.value.dtype),
                                                                st.value.dtype), st.reduce)
                return If(hit, bumped, st)

        return dataclasses.replace(fn, body=Bump().visit(fn.body))

    monkeypatch.setattr(PackageFunction, "lowered", lowered)
    pkg = acc.Package()
    bad = pkg.add(bad_k.source, args=bad_k.args, base_name="bad")
    good = pkg.add(good_k.source, args=good_k.args, base_name="good")
    out = tmp_path / "out"
    pkg.build("errs", output_dir=out, mode=acc.Package.Mode.DEBUG, python_module=False)
    so = ctypes.CDLL(str(out / "liberrs.so"))
    last_error = so.errs_last_error
    last_error.restype = ctypes.c_char_p
    P = ctypes.POINTER(ctypes.c_int32)
    x, y = np.arange(16, dtype=np.int32), np.zeros(16, np.int32)
    a = ctypes.c_int32(1)
    packed_args = (ctypes.c_void_p * 3)(x.ctypes.data, y.ctypes.data,
                                        ctypes.cast(ctypes.pointer(a), ctypes.c_void_p))
    good_packed = getattr(so, good.name + "__packed")
    for take in (True, False):
        getattr(so, bad.name)(x.ctypes.data_as(P), y.ctypes.data_as(P), ctypes.c_int32(1))
        if take:
            assert b"Y[3] differs" in last_error()
        assert good_packed(packed_args) == 0  # this call's status only
        assert last_error() is None
