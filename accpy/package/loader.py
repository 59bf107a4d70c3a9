"""Calling built packages from Python: `acc.load(...)` and the object `Package.build` returns."""
from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import importlib.util
import tomllib
from pathlib import Path
from typing import Optional

from ..errors import KernelError
from ..ir.types import ScalarType
from ..paths import cache_dir
from ..targets.grid import device_arrays
from ..targets.library import libraries
from ..targets.toolchain import ForeignArchitectureError, host_machine
from .compile import compile_cxx_module_standalone, copy_atomic, file_digest, log, output_lock
from .signature import KIND_ARRAY, KIND_DIM, KIND_SCALAR, ArgInfo, position_map
from .sources import alias_error_text

_BINDER = None
BINDER_ABI = 2  # native/binder.cpp's `ABI`


def get_binder():
    """accpy._binder, built at install; compiled into the cache if missing (e.g. a bare checkout)."""
    global _BINDER
    if _BINDER is not None:
        return _BINDER
    try:
        from .. import _binder  # type: ignore[attr-defined]  # optional (built at install): may be missing

        # built at install: used unless it predates the interface this accpy calls
        if getattr(_binder, "ABI", None) == BINDER_ABI:
            _BINDER = _binder
            return _BINDER
    except ImportError:
        pass
    else:
        # a second extension module of the same name cannot be loaded into this process (CPython keeps the
        # first one's definitions), so an outdated build cannot be replaced here: say how to rebuild it
        raise RuntimeError(f"accpy._binder ({_binder.__file__}) was built by an older accpy (interface "
                           f"{getattr(_binder, 'ABI', 1)}, this accpy needs {BINDER_ABI}); reinstall accpy "
                           "(pip install -e .) to rebuild it")
    path = compile_cxx_module_standalone()
    spec = importlib.util.spec_from_file_location("accpy._binder", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    _BINDER = mod
    return mod


def stable_library_path(lib: Path, file_name: Optional[str] = None) -> Path:
    """A content-addressed copy of a library, so that reloading after a rebuild is never stale.

    The dynamic loader (and Python's extension-module cache) reuse an already loaded file
    by its path: loading `output_dir/libx.so` again after a rebuild would give the old
    code. A copy named after its content gives each version its own path. `file_name`
    keeps a fixed file name (an extension module's), inside a directory named by content.
    """
    check_shared_object(lib)
    full = file_digest(lib)
    digest = full[:32]
    dst = cache_dir() / "loaded" / (f"{digest}.so" if file_name is None else f"{digest}/{file_name}")
    if dst.exists():
        # named after its content: anything else there (a truncated copy) is replaced
        if dst.stat().st_size == Path(lib).stat().st_size and file_digest(dst) == full:
            return dst
        log.warning("accpy build cache: %s is damaged (not the content it is named after); replacing it", dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    copy_atomic(lib, dst)
    return dst


class DamagedLibraryError(RuntimeError):
    """A shared library that cannot be loaded as it is (truncated, or not what was built)."""


def check_shared_object(path) -> None:
    """Refuse a file the dynamic loader would crash on: not ELF, or shorter than its own
    headers say (a truncated library is mapped past its end: SIGBUS on first use)."""
    import struct

    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DamagedLibraryError(f"{path}: cannot read the library ({e})") from None
    size = len(data)

    def bad(why: str):
        """The error for this file, saying why."""
        return DamagedLibraryError(f"{path} is damaged ({why}); rebuild the package")

    if size < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise bad(f"not a 64-bit little-endian ELF file, {size} bytes")
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    if phoff + phnum * phentsize > size or (shnum and shoff + shnum * shentsize > size):
        raise bad(f"its headers end past its {size} bytes: it is truncated")
    for k in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + k * phentsize)
        if p_offset + p_filesz > size:
            raise bad(f"a segment ends at byte {p_offset + p_filesz}, past its {size} bytes: it is truncated")
    for k in range(shnum):
        sh_type, = struct.unpack_from("<I", data, shoff + k * shentsize + 4)
        sh_offset, sh_size = struct.unpack_from("<QQ", data, shoff + k * shentsize + 0x18)
        if sh_type != 8 and sh_offset + sh_size > size:  # (8: NOBITS, no bytes in the file)
            raise bad(f"a section ends at byte {sh_offset + sh_size}, past its {size} bytes: it is truncated")


def check_recorded(path: Path, size, sha256: str, what: str) -> None:
    """`path` has the size and hash recorded when it was written, else DamagedLibraryError."""
    got = path.stat().st_size
    if size is not None and got != size:
        raise DamagedLibraryError(f"{what} {path} is damaged: it has {got} bytes, {size} were written; "
                                  f"rebuild the package")
    if sha256 and file_digest(path) != sha256:
        raise DamagedLibraryError(f"{what} {path} is damaged: its content is not what was built (hash "
                                  f"mismatch); rebuild the package")


class AmbiguousAlias:
    """The base name of several variants (a parameter grid): calling it raises a TypeError
    that lists them; call a variant by its full name (`variants` holds their names)."""

    def __init__(self, name: str, message: str, variants: list):
        self.name = name
        self.variants = list(variants)
        self._message = message

    def __call__(self, *args, **kwargs):
        """Always refused: which variant to run is the caller's choice."""
        raise TypeError(self._message)

    def __repr__(self) -> str:
        return f"<accpy alias {self.name} of {len(self.variants)} variants: {', '.join(self.variants)}>"


class SizesFromShapes:
    """A kernel that also takes its arrays alone, its runtime sizes read from their shapes (as
    hatlib's loader allows): `f(A, B)` for `f(N, A, B)` where A's shape names N."""

    @classmethod
    def wrap(cls, kernel, infos: list):
        """`kernel` itself unless it has runtime sizes that its array arguments' shapes give."""
        dims = [k for k, i in enumerate(infos) if i.kind == KIND_DIM]
        return cls(kernel, infos, dims) if dims else kernel

    def __init__(self, kernel, infos: list, dims: list):
        self._kernel = kernel
        self._n = len(infos)
        self._rest = [k for k in range(len(infos)) if k not in dims]
        self._from = {}  # size's position -> (position among the arrays given, axis)
        for k in dims:
            for pos, j in enumerate(self._rest):
                if infos[j].kind == KIND_ARRAY and infos[k].name in infos[j].shape:
                    self._from[k] = (pos, infos[j].shape.index(infos[k].name))
                    break
        self._complete = len(self._from) == len(dims)

    def __call__(self, *args, **kwargs):
        import numpy as np

        if (kwargs or not self._complete or len(args) != len(self._rest)
                or not all(isinstance(a, np.ndarray) for a in args)):
            return self._kernel(*args, **kwargs)  # the kernel's own checks and messages
        full = [None] * self._n
        for pos, j in enumerate(self._rest):
            full[j] = args[pos]
        for k, (pos, axis) in self._from.items():
            full[k] = args[pos].shape[axis] if axis < args[pos].ndim else None  # (a wrong rank: the kernel says so)
        return self._kernel(*full)

    def __getattr__(self, item):
        return getattr(self._kernel, item)

    def __repr__(self):
        return repr(self._kernel)


_CTYPES = {"bool": "c_bool", "int8": "c_int8", "int16": "c_int16", "int32": "c_int32", "int64": "c_int64",
           "uint8": "c_uint8", "uint16": "c_uint16", "uint32": "c_uint32", "uint64": "c_uint64",
           "float32": "c_float", "float64": "c_double", "index": "c_int64"}


class DeviceCall:
    """A function that also runs on device arrays (targets/grid.py `DeviceArrays`, e.g. arrays of
    a device library), through its device entry (package/launch.py): called with such arrays, it
    checks them against its signature (element type, shape, strides, offset; arrays of one call
    share a queue) and calls the entry, which launches on the arrays' queue without copies and
    without waiting. Called with numpy arrays, it is the function itself (copies inside the call).
    Mixing numpy and device arrays in one call is refused, as are device arrays of a runtime
    whose entry is not in the loaded library (the error says which file holds it)."""

    def __init__(self, kernel, infos: list, entries: list, library: str, library_file: str, pkg_name: str,
                 display: str):
        """`entries`: the function's device entries from the .hat ({runtime, symbol, file}); those in
        `library_file` (the .hat's name of the library, loaded from the path `library`) are callable."""
        self._kernel, self._infos, self._display = kernel, infos, display
        self._entries = {e["runtime"]: e for e in entries}
        self._library, self._library_file, self._pkg_name = library, library_file, pkg_name
        self._loaded: dict = {}  # runtime -> (entry, last_error), bound on first use

    def __call__(self, *args, **kwargs):
        found = self._device_arguments(args)
        if not found:
            return self._kernel(*args, **kwargs)
        if kwargs:
            raise TypeError(f"{self._display}: device arrays are passed by position (got keywords {sorted(kwargs)})")
        return self._run(args, found)

    def _device_arguments(self, args) -> dict:
        """{position: DeviceArrays} of the arguments that are device arrays."""
        import numpy as np

        found = {}
        for k, a in enumerate(args):
            if isinstance(a, (np.ndarray, np.generic, int, float, bool)):
                continue
            for kind in device_arrays():
                if kind.owns(a):
                    found[k] = kind
                    break
        return found

    def _full_arguments(self, args) -> list:
        """All arguments in order; runtime sizes left out of `args` are read from the arrays' shapes."""
        n = len(self._infos)
        if len(args) == n:
            return list(args)
        rest = [k for k, i in enumerate(self._infos) if i.kind != KIND_DIM]
        if len(args) != len(rest):
            raise TypeError(f"{self._display}: expected {n} arguments ({', '.join(i.name for i in self._infos)}), "
                            f"or {len(rest)} without the sizes, got {len(args)}")
        full = [None] * n
        for pos, k in enumerate(rest):
            full[k] = args[pos]
        for k, info in enumerate(self._infos):
            if info.kind == KIND_DIM:
                src = next(((j, a.shape.index(info.name)) for j, a in enumerate(self._infos)
                            if a.kind == KIND_ARRAY and info.name in a.shape), None)
                if src is None:
                    raise TypeError(f"{self._display}: no array's shape gives the size {info.name}; pass every argument")
                full[k] = int(full[src[0]].shape[src[1]])
        return full

    def _run(self, args, found: dict):
        kinds = set(found.values())
        positions = {k for k, i in enumerate(self._infos) if i.kind == KIND_ARRAY}
        full = self._full_arguments(args)
        if len(full) != len(args):  # (positions of `found` were among the arrays given)
            found = {k: kind for k, a in enumerate(full) for kind in kinds if kind.owns(a)}
        plain = [k for k in positions if k not in found]
        if plain:
            k, j = plain[0], next(iter(found))
            raise TypeError(f"{self._display}: argument {self._infos[k].name} is not {found[j].what} and argument "
                            f"{self._infos[j].name} is; pass every array as numpy arrays (copied to and from the "
                            f"device inside the call) or every array as device arrays of one kind (no copies)")
        if len(kinds) > 1:
            raise TypeError(f"{self._display}: the arrays given are of different kinds ("
                            f"{', '.join(sorted(k.what for k in kinds))}); pass one kind")
        kind = kinds.pop()
        entry, last_error = self._entry(kind)
        sizes = {i.name: full[k] for k, i in enumerate(self._infos) if i.kind == KIND_DIM}
        for k, i in enumerate(self._infos):
            if i.kind == KIND_DIM and (not isinstance(sizes[i.name], int) or sizes[i.name] < 0):
                raise ValueError(f"{self._display}: the size {i.name} is {sizes[i.name]!r}, expected an int >= 0")
        arrays = {i.name: full[k] for k, i in enumerate(self._infos) if i.kind == KIND_ARRAY}
        for k, i in enumerate(self._infos):
            if i.kind == KIND_ARRAY:
                self._check_array(i, kind, full[k], sizes)
        queue, buffers = kind.handles(arrays, self._display)
        values = [ctypes.c_void_p(queue)]
        for i, a in zip(self._infos, full):
            values.append(ctypes.c_void_p(buffers[i.name]) if i.kind == KIND_ARRAY else self._scalar(i, a))
        if entry(*values) != 0:
            message = last_error()
            raise KernelError(f"{self._display}: {message.decode(errors='replace') if message else 'failed'}")

    def _entry(self, kind) -> tuple:
        """(the device entry for `kind`'s runtime, the package's last_error) from the loaded library;
        TypeError saying why there is none."""
        record = self._entries.get(kind.runtime)
        if record is None:
            have = ", ".join(sorted(self._entries)) or "none"
            raise TypeError(f"{self._display}: the arrays given are {kind.what}, and this function has no "
                            f"{kind.runtime} device entry (its device entries: {have})")
        if record["file"] != self._library_file:
            loaded = [r for r, e in self._entries.items() if e["file"] == self._library_file]
            raise TypeError(f"{self._display}: the arrays given are {kind.what}; its {kind.runtime} device entry "
                            f"{record['symbol']} is in {record['file']}, which accpy does not load (the library "
                            f"loaded here, {self._library_file}, runs on {', '.join(loaded) or 'no device'}): "
                            f"compile that file and call the entry from it, or pass numpy arrays")
        if kind.runtime not in self._loaded:
            lib = ctypes.CDLL(self._library)  # (the library the binder loaded: one copy of its state)
            entry = getattr(lib, record["symbol"])
            entry.restype = ctypes.c_int
            last_error = getattr(lib, f"{self._pkg_name}_last_error")
            last_error.restype = ctypes.c_char_p
            self._loaded[kind.runtime] = (entry, last_error)
        return self._loaded[kind.runtime]

    def _check_array(self, info: ArgInfo, kind, value, sizes: dict) -> None:
        """ValueError naming the argument when `value`'s element type, shape, strides or offset is not
        what the function was built for."""
        import numpy as np

        shape, strides, dtype, offset = kind.layout(value)
        want_dtype = np.dtype("uint16") if info.dtype is ScalarType.bfloat16 else np.dtype(info.dtype.dtype)
        where = f"{self._display}: argument {info.name}"
        if dtype != want_dtype:
            raise ValueError(f"{where} has element type {dtype}, expected {want_dtype}")
        want = tuple(s if isinstance(s, int) else sizes[s] for s in info.shape)
        if tuple(shape) != want:
            raise ValueError(f"{where} has shape {tuple(shape)}, expected {want}")
        want_strides = element_strides(info, want)
        for d, (n, have, elems) in enumerate(zip(want, strides, want_strides)):
            if n > 1 and have != elems * dtype.itemsize:
                raise ValueError(f"{where} has strides {tuple(strides)} (bytes), expected "
                                 f"{tuple(s * dtype.itemsize for s in want_strides)} (its layout {info.layout}); "
                                 f"pass a copy in that layout")
        if offset:
            raise ValueError(f"{where} starts {offset} bytes into its buffer; the device entry takes whole "
                             f"buffers: pass an array that starts at its buffer's start (a copy)")

    def _scalar(self, info: ArgInfo, value):
        """The ctypes value of a size or scalar argument."""
        name = "index" if info.kind == KIND_DIM else info.dtype.name
        if name not in _CTYPES:
            raise TypeError(f"{self._display}: argument {info.name} is a {name} scalar, which the device path of "
                            f"the call cannot pass yet; pass numpy arrays")
        return getattr(ctypes, _CTYPES[name])(value)

    def __getattr__(self, item):
        return getattr(self._kernel, item)

    def __repr__(self):
        return repr(self._kernel)


def element_strides(info: ArgInfo, shape: tuple) -> tuple:
    """The element strides of an array argument of `shape` in its layout (explicit, first-major "C" or
    last-major "F")."""
    if info.layout == "S" or (info.strides and all(isinstance(s, int) for s in info.shape)):
        return tuple(info.strides)
    out, step = [0] * len(shape), 1
    order = range(len(shape) - 1, -1, -1) if info.layout == "C" else range(len(shape))
    for d in order:
        out[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(out)


class BuiltPackage:
    """A built package: each function is an attribute (full name and base-name alias).

    Functions take numpy arrays, validate every argument, release the GIL while running
    and raise `acc.KernelError` if the kernel reports a problem.
    """

    def __init__(self, name: str, output_dir: Path, library: Path, functions: list, files: dict,
                 module_build=None):
        """`functions`: (full name, base name, [ArgInfo], parameters) of each function of `library`."""
        self.name = name
        self.output_dir = Path(output_dir)
        self.files = files
        self._module_build = module_build
        self._functions = {}
        #: {full name: parameter values} of every function (the variants of a parameter grid)
        self.variants = {full: dict(params) for full, _, _, params in functions}
        binder = get_binder()
        lib = str(stable_library_path(library))
        self._library_path = lib
        groups: dict = {}
        entries, library_file = _device_entries(files.get("hat"))
        for full, base, infos, _ in functions:
            pos = position_map(infos)
            k = binder.load_kernel(lib, full, f"{name}_last_error", [i.binder_tuple(pos) for i in infos], base or "")
            self._functions[full] = SizesFromShapes.wrap(k, infos)
            if entries.get(full):
                self._functions[full] = DeviceCall(self._functions[full], infos, entries[full], lib, library_file,
                                                   name, base or full)
            if base and base != full:
                groups.setdefault(base, []).append(full)
        for base, fulls in groups.items():
            if base in self._functions:
                continue
            if len(fulls) == 1:
                self._functions[base] = self._functions[fulls[0]]
            else:
                self._functions[base] = AmbiguousAlias(base, alias_error_text(
                    base, [(f, self.variants[f]) for f in fulls]), fulls)

    def __getattr__(self, item):
        fns = self.__dict__.get("_functions", {})
        if item in fns:
            return fns[item]
        if not item.startswith("_"):
            for lib in libraries():  # what a target library adds (e.g. a model's counters)
                method = lib.runtime_methods().get(item)
                if method is not None:
                    return functools.partial(method, self)
        raise AttributeError(f"package {self.__dict__.get('name')!r} has no function {item!r}; "
                             f"it has {sorted(fns)}")

    def __getitem__(self, item):
        return self._functions[item]

    @property
    def function_names(self) -> list:
        """Names of the package's functions: full names, then the unambiguous base-name aliases."""
        return list(self._functions)

    def python_module(self, wait: bool = True):
        """Import the package's own pybind11 module (waiting for its build if needed)."""
        import sysconfig

        path = None
        if self._module_build is not None:
            if not (wait or self._module_build.done):
                raise RuntimeError(f"the Python module of {self.name} is still being built; "
                                   f"call python_module() (wait=True) to wait for it")
            path = self._module_build.wait()  # this build's module (output_dir may hold a newer build's)
        else:
            path = self.files.get("python_module")
        if path is None or not Path(path).exists():
            raise FileNotFoundError(f"the Python module of {self.name} was not built "
                                    f"(build with python_module='sync' or 'async')")
        # After a rebuild (or for another package of the same name) the dynamic loader,
        # Python's extension cache and pybind11's module cache (keyed by the spec's name)
        # would all return the old module: load a content-addressed copy, under a name
        # that carries the content's digest (the init function is found by the last part)
        path = stable_library_path(Path(path), f"{self.name}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}")
        spec_name = f"_accpy_{path.parent.name}.{self.name}"
        loader = importlib.machinery.ExtensionFileLoader(spec_name, str(path))
        spec = importlib.util.spec_from_file_location(spec_name, str(path), loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        return mod

    def __repr__(self):
        return f"<accpy package {self.name} at {self.output_dir}: {', '.join(self._functions)}>"


def _device_entries(hat) -> tuple:
    """({function's full name: its device entries}, the library's file name) from the .hat at `hat`
    (({}, "") without one)."""
    if hat is None or not Path(hat).exists():
        return {}, ""
    text = Path(hat).read_text()
    if "device_entries" not in text:  # (most packages: no TOML to parse)
        return {}, ""
    meta = tomllib.loads(text)
    entries = {full: table.get("device_entries", []) for full, table in meta.get("functions", {}).items()}
    return entries, meta.get("dependencies", {}).get("link_target", "")


def _infos_from_hat(fn_table: dict) -> list:
    infos = []
    for a in fn_table["arguments"]:
        kind = {"array": KIND_ARRAY, "scalar": KIND_SCALAR, "dimension": KIND_DIM}[a["accpy_kind"]]
        et = a["element_type"]
        dtype = {"float": ScalarType.float32, "double": ScalarType.float64, "float16_t": ScalarType.float16,
                 "bfloat16_t": ScalarType.bfloat16}.get(et)
        if dtype is None:
            dtype = ScalarType.index if kind == KIND_DIM else ScalarType(et.replace("_t", ""))
        infos.append(ArgInfo(a["name"], kind, dtype, tuple(a["accpy_shape"]), a["accpy_layout"],
                             tuple(a["accpy_strides"]), a["accpy_role"]))
    return infos


def load(path, name: Optional[str] = None) -> BuiltPackage:
    """Load a built package: a `.hat` path, or a directory (with `name`)."""
    p = Path(path)
    if p.is_dir():
        if name is None:
            hats = sorted(p.glob("*.hat"))
            if len(hats) != 1:
                raise ValueError(f"path: {p} holds {len(hats)} .hat files; pass name=")
            p = hats[0]
        else:
            p = p / f"{name}.hat"
    elif p.suffix != ".hat":
        p = p.with_suffix(".hat")
    if not p.exists():
        raise FileNotFoundError(f"no package at {p}")
    import sysconfig

    pkg_name = p.stem
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    # Under the package's lock, a build cannot replace files between the reads: the .hat,
    # the library and the module (snapshotted by content) all come from one build.
    with output_lock(p.parent, pkg_name):
        meta = tomllib.loads(p.read_text())
        machine = meta.get("target", {}).get("required", {}).get("CPU", {}).get("architecture")
        if machine and machine != host_machine():
            raise ForeignArchitectureError(f"load: {p} is built for {machine}, and this machine is {host_machine()}: "
                                           f"its code cannot be loaded into this Python process; run its functions "
                                           f"under an emulator or on a machine of that architecture")
        lib = p.parent / meta["dependencies"]["link_target"]
        if not lib.exists():
            raise FileNotFoundError(f"{p}: its library {lib} does not exist (built with Format.HAT_SOURCE?)")
        rec = meta["dependencies"].get("auxiliary", {})
        if "accpy_dynamic_sha256" in rec:  # (checked before the loader maps the file)
            check_recorded(lib, rec.get("accpy_dynamic_size"), rec["accpy_dynamic_sha256"], "the library")
        lib_copy = stable_library_path(lib)
        mod = p.parent / f"{pkg_name}{suffix}"  # the module built for this interpreter
        mod_copy = stable_library_path(mod, mod.name) if mod.exists() else None
    functions = []
    for full, table in meta.get("functions", {}).items():
        if any("accpy_kind" not in a for a in table.get("arguments", [])):
            raise ValueError(f"{p}: function {full} was not built by accpy (its arguments lack accpy's "
                             f"metadata); load foreign HAT packages with hatlib")
        aux = table.get("auxiliary", {}).get("accpy", {})
        functions.append((full, aux.get("base_name", ""), _infos_from_hat(table), aux.get("parameters", {})))
    files = {"hat": p, "shared": lib}
    if mod_copy is not None:
        files["python_module"] = mod_copy
    return BuiltPackage(pkg_name, p.parent, lib_copy, functions, files)

