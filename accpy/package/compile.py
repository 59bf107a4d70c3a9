"""Compile and link emitted C, through a content-addressed build cache.

The cache key is a hash of the source text, the flags and the compiler's identity, so an
unchanged rebuild costs a hash and a copy. Entries are built in a private temporary
directory and published with an atomic rename; outputs are written to a temporary file
and renamed into place, so concurrent builds into one directory never see torn files.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import CompileError
from .. import paths
from ..paths import cache_dir
from ..targets.toolchain import compiler_identity  # noqa: F401  (part of every cache key; tune/ reads it here)
from .sources import PRELUDE_END

CC = os.environ.get("ACCPY_CC", "gcc")
CXX = os.environ.get("ACCPY_CXX", "g++")

BASE_CFLAGS = ["-O3", "-fPIC", "-std=gnu11", "-fwrapv", "-fno-math-errno", "-fopenmp-simd", "-w",
               "-Werror=implicit-function-declaration"]

# the optimization level of kernels (BASE_CFLAGS' first flag) while `optimization(...)` is active
_opt_override: list = []


@contextlib.contextmanager
def optimization(level: str):
    """Compile kernels built inside this context at `level` (e.g. "-O1": faster builds while
    testing; the results are the same, the kernels slower). Part of the build cache's key."""
    if level not in ("-O0", "-O1", "-O2", "-O3", "-Os"):
        raise ValueError(f"level: expected one of -O0, -O1, -O2, -O3, -Os, got {level!r}")
    _opt_override.append(level)
    try:
        yield
    finally:
        _opt_override.pop()


def base_cflags() -> list:
    """BASE_CFLAGS with the optimization level in effect."""
    return ([_opt_override[-1]] + BASE_CFLAGS[1:]) if _opt_override else list(BASE_CFLAGS)


def cache_key(*parts: str) -> str:
    """32 hex digits of sha256 over `parts`."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _umask() -> int:
    """The process's umask (read without changing it where the system allows)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # (elsewhere: set and restore)
    os.umask(mask)
    return mask


def file_mode(executable: bool = False) -> int:
    """The mode a new file gets from open(): 0666 (0777 for executables) less the umask.

    (mkstemp creates 0600 files; published outputs are ordinary files.)
    """
    return (0o777 if executable else 0o666) & ~_umask()


def write_atomic(path: Path, data) -> None:
    """Write `data` (str or bytes) to `path` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def output_lock(directory: Path, name: str):
    """Exclusive lock on the outputs of package `name` in `directory` (between processes).

    Each file is already replaced atomically; the lock makes a build's set of files (.c, .h,
    .hat, .so, .a, module) land together, so that builds of the same package racing into
    one directory leave the files of one of them, never a mix.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: files are still atomic one by one
        yield
        return
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(directory / f".{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # e.g. reading a package from a read-only directory: nobody builds there
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def remove_file(path: Path) -> None:
    """Remove `path` if it exists."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def copy_atomic(src: Path, dst: Path, executable: bool = True) -> None:
    """Copy `src` to `dst` through a temporary file and a rename (mode from the umask)."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix="." + dst.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, file_mode(executable))
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _run(cmd: list, display_path: str, src_path: str, what: str) -> None:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).replace(src_path, display_path)
        # the command as the user can rerun it: on the kept file, not the cache's private copy
        cmd_text = " ".join(cmd).replace(src_path, display_path)
        raise CompileError(f"{what} failed for {display_path}:\n{msg}\ncommand: {cmd_text}")


@dataclass
class Library:
    """A compiled package in the cache: its shared library and static archive."""

    key: str
    shared: Path
    static: Optional[Path]
    cached: bool
    seconds: float
    flags: list


MANIFEST = "manifest.json"
log = logging.getLogger("accpy")


def file_digest(path: Path) -> str:
    """sha256 of a file's content (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_manifest(entry: Path) -> None:
    """Record the size and hash of every file of a cache entry (before it is published)."""
    files = {p.name: {"size": p.stat().st_size, "sha256": file_digest(p)}
             for p in sorted(entry.iterdir()) if p.is_file() and p.name != MANIFEST}
    write_atomic(entry / MANIFEST, json.dumps(files, indent=1, sort_keys=True))


def entry_problem(entry: Path, needed: list) -> Optional[str]:
    """Why the cache entry `entry` cannot be used (a file missing, truncated or changed), or None."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        return f"its manifest cannot be read ({e.__class__.__name__})"
    for name in needed:
        rec = manifest.get(name) if isinstance(manifest, dict) else None
        if not isinstance(rec, dict):
            return f"{name} is not in its manifest"
        path = entry / name
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != rec.get("size"):
            return f"{name} has {size} bytes, {rec.get('size')} were written"
        if file_digest(path) != rec.get("sha256"):
            return f"{name} does not have the content that was written (hash mismatch)"
    return None


def _cache_hit(final: Path, needed: list) -> bool:
    """Is the cache entry `final` present and intact? A damaged one is removed (and said so)."""
    if not final.exists():
        return False
    why = entry_problem(final, needed)
    if why is None:
        return True
    log.warning("accpy build cache: %s is damaged (%s); rebuilding it", final, why)
    _discard(final)
    return False


def _discard(entry: Path) -> None:
    """Remove a cache entry: renamed away first, so no other process sees it half-deleted."""
    gone = entry.parent / f".stale-{entry.name}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        os.rename(entry, gone)
    except OSError:
        return  # already replaced or removed by another process
    shutil.rmtree(gone, ignore_errors=True)


# A build works in a private `.build-*` directory that it holds a lock on (flock, released by
# the kernel when the process dies): a directory nobody holds is left by a killed build.
STALE_AGE = 10.0  # seconds; a directory younger than that may not be locked by its owner yet


@contextlib.contextmanager
def build_directory(parent: Path):
    """A private directory under `parent` for one build, removed afterwards.

    Directories left there by builds that were killed are removed first.
    """
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    clean_stale_builds(parent)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=".build-"))
    fd = _lock_dir(tmp, blocking=True)
    try:
        yield tmp
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if fd is not None:
            os.close(fd)


def _lock_dir(path: Path, blocking: bool) -> Optional[int]:
    try:
        import fcntl
    except ImportError:  # not POSIX: no stale-directory detection
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except OSError:
        os.close(fd)
        raise
    return fd


def clean_stale_builds(parent: Path) -> list:
    """Remove `.build-*` directories under `parent` whose build is dead; returns them."""
    removed = []
    try:
        cands = [p for p in Path(parent).iterdir() if p.name.startswith((".build-", ".stale-"))]
    except OSError:
        return removed
    for d in cands:
        try:
            if time.time() - d.stat().st_mtime < STALE_AGE:
                continue
            fd = _lock_dir(d, blocking=False) if d.name.startswith(".build-") else None
        except OSError:
            continue  # held by a live build (or just removed)
        try:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        finally:
            if fd is not None:
                os.close(fd)
    return removed


def _publish(tmp: Path, final: Path) -> None:
    """Publish a finished build directory as the cache entry `final` (with its manifest)."""
    _write_manifest(tmp)
    try:
        os.rename(tmp, final)
    except OSError:
        # another process published the same entry first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)


def _cached_object(kind: str, compiler: str, flags: list, src: Path, texts: list, display: str, what: str) -> Path:
    """`src` compiled alone to `<cache>/<kind>/<key>/<name>.o` (key: its texts, flags, compiler)."""
    key = cache_key(*texts, " ".join(flags), compiler_identity(compiler))
    final = cache_dir() / kind / key
    obj = final / (src.stem + ".o")
    if _cache_hit(final, [obj.name]):
        return obj
    with build_directory(cache_dir() / kind) as tmp:
        _run([compiler, *flags, "-c", str(src), "-o", str(tmp / obj.name)], display, str(src), what)
        _publish(tmp, final)
    return obj


def native_unit_object(unit, cflags: list, cc: str = CC) -> Path:
    """A target library's native unit (targets/library.py `NativeUnit`) compiled by `cc`, cached."""
    src = paths.native_file(unit.source)
    texts = [src.read_text()] + [paths.native_file(h).read_text() for h in unit.headers]
    flags = list(cflags) + list(unit.defines) + [f"-I{src.parent}"]
    return _cached_object("obj", cc, flags, src, texts, f"native/{unit.source}", unit.what or "compiling")


_verified_pch: set = set()  # cache entries (paths) of precompiled headers checked by this process
_NAME_LINE = re.compile(r"^/\* \S+\.c: generated by accpy\..*\*/$", re.M)


def split_prelude(text: str) -> Optional[tuple]:
    """(prelude, rest) of a package's C at sources.PRELUDE_END: the prelude (runtime, intrinsic
    headers) is the same for every package of its kind once its one named line (the file
    comment) is blanked; `rest` keeps the prelude's lines blank, so the compiler's line numbers
    are those of the whole text. None without the marker."""
    at = text.find(PRELUDE_END)
    if at < 0:
        return None
    cut = at + len(PRELUDE_END)
    prelude = _NAME_LINE.sub("", text[:cut], count=1)
    return prelude + "\n", "\n" * text.count("\n", 0, cut) + text[cut:]


def prelude_pch(cflags: list, text: str, headers=(), cc: str = CC) -> Optional[Path]:
    """A header of C `text` (a prelude, see split_prelude), precompiled for exactly these flags
    (cached): a unit compiled with `-include <it>` skips parsing the runtime and system headers
    (<immintrin.h> alone is about 0.2 s of a kernel with vector code; the runtime's headers are
    most of a small scalar kernel's compile). `headers`: the texts of the target libraries'
    headers the prelude includes (part of the key: a changed header is precompiled anew).
    None when the compiler (`cc`) cannot precompile it."""
    key = cache_key("prelude-pch", text, " ".join(cflags), compiler_identity(cc), *headers)
    final = cache_dir() / "pch" / key
    header = final / "accpy_prelude.h"
    if (str(final) in _verified_pch and header.exists()) or _cache_hit(final, ["accpy_prelude.h", "accpy_prelude.h.gch"]):
        _verified_pch.add(str(final))
        return header
    try:
        with build_directory(cache_dir() / "pch") as tmp:
            (tmp / "accpy_prelude.h").write_text(text)
            _run([cc, *cflags, "-x", "c-header", str(tmp / "accpy_prelude.h"), "-o", str(tmp / "accpy_prelude.h.gch")],
                 "accpy_prelude.h", str(tmp / "accpy_prelude.h"), "precompiling")
            _publish(tmp, final)
    except CompileError:
        return None
    _verified_pch.add(str(final))
    return header if header.exists() else None


def _precompiled(cflags: list, text: str, precompile: Optional[str], headers=(), cc: str = CC) -> tuple:
    """(compiler arguments, text to compile) for one unit: its prelude precompiled and included,
    and the rest; the text itself when it has no prelude or the prelude cannot be precompiled.
    `precompile` (a target library's large header) goes first when the unit has vector code."""
    parts = split_prelude(text)
    if parts is None:
        return [], text
    prelude, rest = parts
    if precompile is not None and "#define ACCPY_NO_VECTORS" not in prelude:
        prelude = precompile + prelude
    header = prelude_pch(cflags, prelude, headers, cc)
    return (["-include", str(header)], rest) if header is not None else ([], text)


def compile_c(source: str, flags: list, display_path: str, openmp: bool = False, units=None,
              progress=None, native_units=(), precompile: Optional[str] = None, archive: bool = True,
              cc: str = CC, ar: str = "ar", precompile_prelude: bool = True) -> Library:
    """Compile C source into a shared library and a static archive (cached).

    `units`: the same code split into translation units (see sources.c_source), compiled
    in parallel on all cores; `progress(done, total)` is called as units finish.
    `native_units`: target libraries' native files the code calls (e.g. a functional model),
    each compiled once (cached) and linked in. `precompile`: C text to precompile and include
    (the vector ISA's header) when the code has vector statements. `archive`: also the static
    archive (what HAT_STATIC packages and Python modules link); without it, the build is cached
    under its own key, holding the shared library only. `cc` and `ar`: the compiler and archiver
    (the target's toolchain's; a cross compiler's for another architecture); `precompile_prelude`:
    whether the prelude may be precompiled (the toolchain says).
    """
    cflags = base_cflags() + list(flags) + (["-fopenmp"] if openmp else [])
    extra_objs = []
    for unit in native_units:
        if unit.include:
            cflags = cflags + [f"-I{paths.native_file(unit.include)}"]
        if unit.source is not None:
            extra_objs.append(native_unit_object(unit, BASE_CFLAGS + [f for f in flags if f.startswith("-march")], cc))
    headers = [paths.native_file(h).read_text() for unit in native_units for h in unit.headers]
    key = cache_key(source, " ".join(cflags), compiler_identity(cc), *[str(o) for o in extra_objs], *headers,
                    *([] if archive else ["shared library only"]))  # (entries never lack what they promise)
    final = cache_dir() / "lib" / key
    so, static = final / "lib.so", final / "lib.a"
    if _cache_hit(final, ["lib.so", "lib.a"] if archive else ["lib.so"]):
        return Library(key, so, static if archive else None, True, 0.0, cflags)
    t0 = time.perf_counter()
    texts = list(units) if units else [source]
    with build_directory(cache_dir() / "lib") as tmp:
        srcs, pres = [], []
        for k, text in enumerate(texts):
            src = tmp / (f"kernel{k}.c" if len(texts) > 1 else "kernel.c")
            pre, text = _precompiled(cflags, text, precompile, headers, cc) if precompile_prelude else ([], text)
            src.write_text(text)
            srcs.append(src)
            pres.append(pre)
        objs = [src.with_suffix(".o") for src in srcs]
        done = [0]

        link = [*map(str, extra_objs), "-o", str(tmp / "lib.so"), "-lm", "-lpthread"] + (["-fopenmp"] if openmp else [])
        if len(srcs) == 1 and not archive:
            # one unit, no archive: compiled and linked by one compiler run (no object file)
            _run([cc, *cflags, *pres[0], "-shared", str(srcs[0]), *link], display_path, str(srcs[0]), "compiling")
            if progress is not None:
                progress(1, 1)
            srcs[0].unlink()
            _publish(tmp, final)
            return Library(key, so, None, False, time.perf_counter() - t0, cflags)

        def one(k):
            """Compile unit k."""
            _run([cc, *cflags, *pres[k], "-c", str(srcs[k]), "-o", str(objs[k])], display_path, str(srcs[k]), "compiling")
            done[0] += 1
            if progress is not None:
                progress(done[0], len(srcs))

        workers = min(len(srcs), os.cpu_count() or 1)
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(one, range(len(srcs))))  # gcc runs in its own processes: real parallelism
        else:
            for k in range(len(srcs)):
                one(k)
        objs = objs + list(extra_objs)
        _run([cc, "-shared", *map(str, objs[:len(srcs)]), *link], display_path, str(srcs[0]), "linking")
        if archive:
            _run([ar, "rcs", str(tmp / "lib.a"), *map(str, objs)], display_path, str(srcs[0]), "archiving")
        for p in srcs + objs[:len(srcs)]:
            p.unlink()  # (the entry holds what is used: the library and the archive)
        _publish(tmp, final)
    return Library(key, so, static if archive else None, False, time.perf_counter() - t0, cflags)


class ProgressBar:
    """`building name: [#####-----] 3/6 units` on stderr, redrawn in place on a terminal."""

    def __init__(self, label: str, stream=None, width: int = 24):
        import sys

        self.label, self.stream, self.width = label, stream or sys.stderr, width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        filled = self.width * done // max(total, 1)
        line = f"building {self.label}: [{'#' * filled}{'-' * (self.width - filled)}] {done}/{total} units"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done == total else ""))
        elif done == total or done == 1:
            self.stream.write(line + "\n")
        self.stream.flush()


def _python_module_flags() -> list:
    import sysconfig

    return ["-fPIC", "-std=c++17", "-fvisibility=hidden", "-w", f"-I{sysconfig.get_paths()['include']}",
            f"-I{paths.native_dir()}"]


def compile_module_core() -> tuple:
    """native/accpy_pymodule.cpp compiled (pybind11; cached). Returns (object path, its cache key)."""
    import pybind11

    flags = ["-O2", *_python_module_flags(), f"-I{pybind11.get_include()}"]
    texts = [(paths.native_dir() / f).read_text()
             for f in ("accpy_pymodule.cpp", "accpy_pymodule.h", "accpy_pyargs.hpp")]
    texts.append(getattr(pybind11, "__version__", ""))
    obj = _cached_object("modcore", CXX, flags, paths.native_dir() / "accpy_pymodule.cpp", texts,
                         "native/accpy_pymodule.cpp", "compiling the Python module core")
    return obj, obj.parent.name


def compile_cxx_module(source: str, flags: list, static_lib: Path, lib_key: str, display_path: str) -> tuple:
    """Build a package's Python module (cached). Returns (path, seconds, cached).

    `source` is the generated table file (pymodule.module_source); it is linked with the
    cached module core (compile_module_core) and with the kernels from the static archive
    `static_lib` (position-independent code), whose symbols stay local to the module
    (`--exclude-libs`): the module depends on no `lib<name>.so`, so two packages of the
    same name, or a package and its rebuild, can be loaded side by side in one process
    without one binding to the other's kernels. `lib_key` (the archive's cache key) is
    part of the module's cache key.
    """
    import sysconfig

    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    t0 = time.perf_counter()
    core, core_key = compile_module_core()
    cxxflags = ["-O1", *_python_module_flags()] + list(flags)
    key = cache_key(source, " ".join(cxxflags), lib_key, core_key, compiler_identity(CXX))
    final = cache_dir() / "mod" / key
    out = final / f"module{suffix}"
    if _cache_hit(final, [out.name]):
        return out, 0.0, True
    with build_directory(cache_dir() / "mod") as tmp:
        src = tmp / "module.cpp"
        src.write_text(source)
        _run([CXX, *cxxflags, "-c", str(src), "-o", str(tmp / "module.o")], display_path, str(src),
             "compiling the Python module")
        _run([CXX, "-shared", *flags, str(tmp / "module.o"), str(core), str(static_lib), "-Wl,--exclude-libs,ALL",
              "-lm", "-lpthread", "-o", str(tmp / f"module{suffix}")], display_path, str(src), "linking the Python module")
        (tmp / "module.o").unlink()
        _publish(tmp, final)
    return out, time.perf_counter() - t0, False


def compile_cxx_module_standalone() -> Path:
    """Build accpy._binder from native/binder.cpp into the cache (when not built at install)."""
    import sysconfig

    import pybind11

    src = (paths.native_dir() / "binder.cpp").read_text() + (paths.native_dir() / "accpy_pyargs.hpp").read_text()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    flags = ["-O2", "-shared", "-fPIC", "-std=c++17", "-fvisibility=hidden", "-w",
             f"-I{pybind11.get_include()}", f"-I{sysconfig.get_paths()['include']}", f"-I{paths.native_dir()}"]
    key = cache_key(src, " ".join(flags), compiler_identity(CXX))
    final = cache_dir() / "binder" / key
    out = final / f"_binder{suffix}"
    if _cache_hit(final, [out.name]):
        return out
    with build_directory(cache_dir() / "binder") as tmp:
        _run([CXX, *flags, str(paths.native_dir() / "binder.cpp"), "-o", str(tmp / f"_binder{suffix}"), "-ldl"],
             "native/binder.cpp", str(paths.native_dir() / "binder.cpp"), "compiling the binder")
        _publish(tmp, final)
    return out
