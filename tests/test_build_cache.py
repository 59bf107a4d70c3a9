"""The build cache and the output directory survive damaged files and killed builds.

Damage is made by truncating files; everything that would load a damaged library runs in
a subprocess, so a crash (SIGBUS from a truncated mapping) fails the test instead of
killing pytest.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import accpy as acc

ROOT = Path(__file__).resolve().parent.parent

BUILD = textwrap.dedent("""
    import sys, logging
    import numpy as np
    import accpy as acc
    logging.basicConfig(level=logging.WARNING, format="LOG %(name)s %(message)s")
    out, factor = sys.argv[1], float(sys.argv[2])
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(10,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(10,))
    nest = acc.Nest(shape=(10,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] = X[i] * factor

    pkg = acc.Package()
    pkg.add(nest, args=(X, Y), base_name="scale")
    lib = pkg.build("cached", output_dir=out, python_module=sys.argv[3] if len(sys.argv) > 3 else False)
    y = np.zeros(10, np.float32)
    lib.scale(np.arange(10, dtype=np.float32), y)
    print("hit" if lib.timings["cache_hit"] else "miss", y[3])
    if len(sys.argv) > 3:
        m = lib.python_module()
        y = np.zeros(10, np.float32)
        m.scale(np.arange(10, dtype=np.float32), y)
        print("module", y[3])
""")

LOAD = textwrap.dedent("""
    import sys
    import numpy as np
    import accpy as acc
    try:
        lib = acc.load(sys.argv[1], name="cached")
        y = np.zeros(10, np.float32)
        lib.scale(np.arange(10, dtype=np.float32), y)
        if len(sys.argv) > 2:
            lib.python_module()
        print("loaded", y[3])
    except Exception as e:
        print("error", type(e).__name__, e)
""")


def _run(code: str, *args, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ACCPY_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 0, f"crashed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p


def _truncate(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


@pytest.mark.slow
@pytest.mark.parametrize("keep", [0.0, 0.5, 0.97])
def test_a_damaged_cache_entry_is_rebuilt_and_said_so(tmp_path, keep):
    cache = tmp_path / "cache"
    assert _run(BUILD, tmp_path / "a", 3, cache=cache).stdout.split() == ["miss", "9.0"]
    entries = [p for p in (cache / "lib").iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1
    _truncate(entries[0] / "lib.so", keep)
    p = _run(BUILD, tmp_path / "b", 3, cache=cache)
    assert p.stdout.split() == ["miss", "9.0"]  # rebuilt, not trusted
    assert "LOG accpy accpy build cache:" in p.stderr and "is damaged" in p.stderr and "lib.so" in p.stderr
    p = _run(BUILD, tmp_path / "c", 3, cache=cache)
    assert p.stdout.split() == ["hit", "9.0"] and "damaged" not in p.stderr  # repaired for good


@pytest.mark.slow
@pytest.mark.parametrize("keep", [0.0, 0.5])
def test_a_damaged_loaded_copy_is_replaced(tmp_path, keep):
    cache = tmp_path / "cache"
    _run(BUILD, tmp_path / "a", 2, cache=cache)
    for p in (cache / "loaded").glob("*.so"):
        _truncate(p, keep)
    p = _run(BUILD, tmp_path / "a", 2, cache=cache)
    assert p.stdout.split() == ["hit", "6.0"]
    assert "is damaged (not the content it is named after)" in p.stderr


@pytest.mark.slow
def test_a_damaged_module_cache_entry_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    assert _run(BUILD, tmp_path / "a", 2, "sync", cache=cache).stdout.split()[-2:] == ["module", "6.0"]
    for p in (cache / "mod").glob("*/module*.so"):
        _truncate(p, 0.5)
    for p in (cache / "loaded").glob("*/*.so"):
        _truncate(p, 0.5)
    p = _run(BUILD, tmp_path / "b", 2, "sync", cache=cache)
    assert p.stdout.split()[-2:] == ["module", "6.0"]
    assert "is damaged" in p.stderr


@pytest.fixture(scope="module")
def built_package(tmp_path_factory):
    """One package with its Python module, built once; each test damages its own copy."""
    root = tmp_path_factory.mktemp("pristine")
    _run(BUILD, root / "out", 2, "sync", cache=root / "cache")
    return root / "out"


@pytest.mark.parametrize("what, keep", [("libcached.so", 0.0), ("libcached.so", 0.5), ("libcached.so", 0.99),
                                        ("module", 0.5)])
@pytest.mark.slow
def test_loading_a_damaged_package_is_a_clear_error(tmp_path, built_package, what, keep):
    out = tmp_path / "out"
    shutil.copytree(built_package, out)
    assert _run(LOAD, out, cache=tmp_path / "cache2").stdout.split() == ["loaded", "6.0"]
    target = out / what if what != "module" else next(out.glob("cached.cpython*.so"))
    _truncate(target, keep)
    p = _run(LOAD, out, "module", cache=tmp_path / "cache3")  # (a fresh cache: nothing loaded before)
    assert p.stdout.startswith("error DamagedLibraryError"), p.stdout
    assert str(target) in p.stdout and "damaged" in p.stdout and "rebuild the package" in p.stdout


def test_stale_build_directories_of_dead_builds_are_removed(tmp_path, monkeypatch):
    import fcntl

    from accpy.package import compile as comp

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    lib_dir = tmp_path / "cache" / "lib"
    dead = lib_dir / ".build-dead"
    live = lib_dir / ".build-live"
    young = lib_dir / ".build-young"
    for d in (dead, live, young):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "kernel.o").write_bytes(b"x" * 100)
    old = time.time() - 3600
    for d in (dead, live):
        os.utime(d, (old, old))
    fd = os.open(live, os.O_RDONLY)  # a build still running holds its directory
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        X = acc.Array(role=acc.Role.INPUT, name="X", shape=(4,))
        Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(4,))
        nest = acc.Nest(shape=(4,))
        i, = nest.get_indices()

        @nest.iteration_logic
        def _():
            Y[i] += X[i] * 7.0

        pkg = acc.Package()
        pkg.add(nest, args=(X, Y), base_name="f")
        pkg.build("stale", output_dir=tmp_path / "out", python_module=False)
        assert not dead.exists()
        assert live.exists() and young.exists()
    finally:
        os.close(fd)
    assert comp.clean_stale_builds(lib_dir) == [live]  # its owner is gone now
    assert not [p for p in lib_dir.iterdir() if p.name.startswith(".build-") and p != young]


def _package(factor: float):
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(4,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(4,))
    nest = acc.Nest(shape=(4,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] = X[i] * factor

    pkg = acc.Package()
    pkg.add(nest, args=(X, Y), base_name="f")
    return pkg


def test_a_killed_build_leaves_the_previous_outputs_consistent(tmp_path, monkeypatch):
    import accpy.package.package as pkgmod

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    _package(2.0).build("k", output_dir=out, python_module=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")}
    (out / ".k.c.abc123.tmp").write_text("left by a killed build")
    (out / ".libk.so.xyz.tmp").write_text("left by a killed build")

    def killed(*a, **kw):
        raise KeyboardInterrupt  # the build stops while compiling

    monkeypatch.setattr(pkgmod, "compile_c", killed)
    with pytest.raises(KeyboardInterrupt):
        _package(5.0).build("k", output_dir=out, python_module=False)
    assert {p.name: p.read_bytes() for p in out.iterdir() if not p.name.startswith(".")} == before
    monkeypatch.undo()
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    lib = _package(5.0).build("k", output_dir=out, python_module=False)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".k.lock"]
    y = np.zeros(4, np.float32)
    lib.f(np.ones(4, np.float32), y)
    assert (y == 5).all()


@pytest.mark.slow
def test_outputs_get_the_modes_of_ordinary_files(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    old = os.umask(0o022)
    try:
        _package(2.0).build("modes", output_dir=tmp_path / "a", python_module="sync")
        os.umask(0o027)
        _package(2.0).build("modes", output_dir=tmp_path / "b", python_module=False,
                            format=acc.Package.Format.HAT_SOURCE)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "a").iterdir()}
    assert modes["modes.c"] == modes["modes.h"] == modes["modes.hat"] == modes["modes.a"] == 0o644
    assert modes["modes_module.cpp"] == 0o644
    assert modes["libmodes.so"] == 0o755 and modes[next(n for n in modes if n.startswith("modes.cpython"))] == 0o755
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "b").iterdir()}
    assert modes["modes.c"] == modes["modes.h"] == modes["modes.hat"] == 0o640


def test_output_dir_errors_name_it(tmp_path):
    pkg = _package(2.0)
    f = tmp_path / "a_file"
    f.write_text("")
    with pytest.raises(NotADirectoryError, match=rf"^output_dir: {f} exists and is not a directory"):
        pkg.build("x", output_dir=f, python_module=False)
    with pytest.raises(NotADirectoryError, match=r"^output_dir: cannot create"):
        pkg.build("x", output_dir=f / "sub", python_module=False)
    if os.geteuid() != 0:  # (root writes anywhere)
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        with pytest.raises(PermissionError, match=rf"^output_dir: {ro} is not writable"):
            pkg.build("x", output_dir=ro, python_module=False)


def test_compile_failures_name_output_dir(tmp_path, monkeypatch):
    import accpy.package.package as pkgmod

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    orig = pkgmod.c_source
    monkeypatch.setattr(pkgmod, "c_source", lambda *a, **kw: orig(*a, **kw) + "\nint accpy_broken( {\n")
    with pytest.raises(acc.CompileError, match=rf"\(output_dir: {tmp_path / 'o'}; the emitted source is kept at "
                                               rf"{tmp_path / 'o' / 'bad.c'}\)"):
        _package(2.0).build("bad", output_dir=tmp_path / "o", python_module=False)
    assert "accpy_broken" in (tmp_path / "o" / "bad.c").read_text()


def test_a_shared_library_only_build_makes_no_archive(tmp_path, monkeypatch):
    """HAT_DYNAMIC without a Python module skips the static archive (accpy.testing builds this
    way); it is cached under its own key, so a later default build still gets its archive."""
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8,), name="A")
    nest = acc.Nest(shape=(8,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1.0

    pkg = acc.Package()
    pkg.add(nest, args=(A,), base_name="inc")
    lib = pkg.build("shared_only", format=acc.Package.Format.HAT_DYNAMIC, output_dir=tmp_path / "a",
                    python_module=False, progress=False)
    x = np.zeros(8, np.float32)
    lib.inc(x)
    assert (x == 1).all() and not (tmp_path / "a" / "shared_only.a").exists()
    assert not list((tmp_path / "cache" / "lib").glob("*/lib.a"))
    pkg.build("with_archive", output_dir=tmp_path / "b", python_module=False, progress=False)
    assert (tmp_path / "b" / "with_archive.a").exists()


def _inc_package(value: float, vector: bool = False):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(64,), name="A")
    nest = acc.Nest(shape=(64,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += value

    plan = nest.create_plan()
    if vector:
        plan.vectorize(i)
    pkg = acc.Package()
    pkg.add(plan, args=(A,), base_name="inc")
    return pkg


@pytest.mark.slow
@pytest.mark.parametrize("vector", [False, True])
def test_the_prelude_is_precompiled_once_per_kind(tmp_path, monkeypatch, vector):
    """The runtime part of a package's C is compiled once into a precompiled header that later
    builds of the same kind include; what they compute is that of the whole text."""
    from accpy.package import compile as compiling

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    commands = []
    real_run = compiling._run
    monkeypatch.setattr(compiling, "_run", lambda cmd, *a: (commands.append(cmd), real_run(cmd, *a))[1])
    for n, value in enumerate((1.0, 2.0, 3.0)):
        lib = _inc_package(value, vector).build(f"p{n}", format=acc.Package.Format.HAT_DYNAMIC,
                                               output_dir=tmp_path / "o", python_module=False, progress=False)
        x = np.ones(64, np.float32)
        lib.inc(x)
        assert (x == 1 + value).all()
    precompiles = [c for c in commands if "c-header" in c]
    assert len(precompiles) == 1  # one kind: one header, made by the first build
    headers = list((tmp_path / "cache" / "pch").glob("*/accpy_prelude.h"))
    assert len(headers) == 1 and headers[0].with_suffix(".h.gch").is_file()
    text = headers[0].read_text()
    assert "ACCPY_RUNTIME_H" in text and "generated by accpy" not in text  # no package's name in it
    # the vector ISA's header first with vector code, else the runtime does without it
    assert text.startswith("#include <immintrin.h>") == vector and ("#define ACCPY_NO_VECTORS" in text) != vector
    kernels = [c for c in commands if "c-header" not in c]
    assert len(kernels) == 3 and all(str(headers[0]) in c for c in kernels)


def test_split_prelude_keeps_line_numbers():
    from accpy.package.compile import split_prelude
    from accpy.package.sources import PRELUDE_END

    text = f"/* k.c: generated by accpy. Do not edit: rebuild the package instead. */\n#define X 1\n{PRELUDE_END}\nint f(void) {{ return X; }}\n"
    prelude, rest = split_prelude(text)
    assert "generated by accpy" not in prelude and "#define X 1" in prelude
    assert rest.splitlines()[3] == "int f(void) { return X; }"  # on its line of the whole text
    assert not any(rest.splitlines()[:3])
    assert split_prelude("int f(void) { return 0; }\n") is None


def test_a_build_without_a_precompiled_header_still_works(tmp_path, monkeypatch):
    """A compiler that cannot precompile the prelude compiles the whole text."""
    from accpy.package import compile as compiling

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiling, "prelude_pch", lambda cflags, text, headers=(), cc=None: None)
    lib = _inc_package(5.0).build("nopch", format=acc.Package.Format.HAT_DYNAMIC, output_dir=tmp_path / "o",
                                  python_module=False, progress=False)
    x = np.ones(64, np.float32)
    lib.inc(x)
    assert (x == 6).all()


def test_a_changed_library_header_is_precompiled_anew(tmp_path, monkeypatch):
    """A package's prelude only names a target library's header (#include); an edited (or
    upgraded) header is compiled in, never served from a precompiled prelude made with the old one."""
    import ctypes

    from accpy import paths
    from accpy.package import compile as compiling
    from accpy.package.sources import PRELUDE_END
    from accpy.targets.library import NativeUnit

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    native = tmp_path / "native"
    (native / "lib").mkdir(parents=True)
    monkeypatch.setattr(paths, "native_file", lambda name: native / name)
    unit = NativeUnit(None, ("lib/lib_h.h",), include="lib")
    source = f'#include "lib_h.h"\n{PRELUDE_END}\nint value(void) {{ return LIB_VALUE; }}\n'
    got = []
    for v in (1, 2):
        (native / "lib" / "lib_h.h").write_text(f"#define LIB_VALUE {v}\n")
        lib = compiling.compile_c(source, [], "k.c", native_units=(unit,))
        got.append(ctypes.CDLL(str(lib.shared)).value())
    assert got == [1, 2]
