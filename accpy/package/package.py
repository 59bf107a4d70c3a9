"""`Package`: functions added from nests, schedules or plans, built into a native library.

Outputs of `build(name)` in `output_dir`: `name.c` (always kept), `name.h`, `name.hat`,
`libname.so`, `name.a`, and the pybind11 module `name.cpython-*.so`.
"""
from __future__ import annotations

import enum
import os
import time
from pathlib import Path
from typing import Optional

from ..analysis.logic_check import accesses_of
from ..codegen.c import uses_openmp
from ..errors import CompileError
from ..ir.kinds import BufferRole
from ..ir.names import check_name, check_symbol_name, reserved_reason
from ..ir.visitor import free_vars
from ..nest.functions import record_call
from ..nest.logic import Index
from ..nest.nest import Nest
from ..nest.parameters import Parameter, parameter_values
from ..plan.lowering import argument_objects, with_fused_ops
from ..plan.plan import Plan
from ..schedule.schedule import Schedule
from ..targets.features import Platform
from ..targets.library import libraries
from ..targets.toolchain import package_toolchain
from .allocating import runtime_free, split_allocating
from .calls import calling_function
from .compile import (ProgressBar, compile_c, compile_cxx_module, copy_atomic, file_digest, output_lock,
                      remove_file, write_atomic)
from .foreign import ForeignPackage, foreign_error
from .hat import hat_text
from .launch import companion_units
from .loader import BuiltPackage
from .pymodule import ModuleBuild, module_source
from .signature import describe_arguments, function_hash
from .sources import c_source, header, libraries_called, recorded_parameters


class Format(enum.Flag):
    """What `Package.build` writes: HAT_DYNAMIC (libname.so), HAT_STATIC (name.a), HAT_SOURCE
    (sources and headers only). The MLIR formats are Accera's; accpy emits C and refuses them."""

    HAT_DYNAMIC = enum.auto()
    HAT_STATIC = enum.auto()
    HAT_SOURCE = enum.auto()
    MLIR_DYNAMIC = enum.auto()
    MLIR_STATIC = enum.auto()
    MLIR_SOURCE = enum.auto()
    MLIR_VERBOSE = enum.auto()
    DEFAULT = HAT_DYNAMIC | HAT_STATIC
    MLIR = MLIR_SOURCE


class Mode(enum.Enum):
    """RELEASE builds the scheduled code; DEBUG also runs the unscheduled nest and compares."""

    RELEASE = "release"
    DEBUG = "debug"


def _plan_of(source):
    if isinstance(source, Plan):
        return source
    if isinstance(source, Schedule):
        return source.create_plan()
    if isinstance(source, Nest):
        return source.create_schedule().create_plan()
    raise ValueError(f"source: expected an acc.Nest, Schedule or Plan, got {type(source).__name__}")


def _parameter_name(p) -> str:
    return p.name if isinstance(p, Parameter) else str(p)


def _check_parameter_names(parameters: dict) -> None:
    """Two parameters of one name would be one entry of the .hat's record (and of the name hash)."""
    seen: dict = {}
    for p in parameters:
        name = _parameter_name(p)
        if name in seen and seen[name] is not p:
            raise ValueError(f"parameters: two different parameters are named {name!r}; the package records "
                             f"values by name, so give them different names")
        seen[name] = p


def _parameter_value(v):
    """Values as recorded in the .hat and the name hash: indices by name."""
    if isinstance(v, Index):
        return v.name
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(str(_parameter_value(x)) for x in v) + ")"
    return v


class PackageFunction:
    """One function of a package: a plan bound to an argument list, with a stable name."""

    def __init__(self, plan, args, base_name: str, parameters: dict, description: str = "", auxiliary=None):
        self.plan = plan
        self.args = tuple(args)
        self.requested_args = self.args  # Accera's name: the arguments as given to Package.add
        self.arg_objs = argument_objects(self.args)  # buffers of these parameter values
        self.base_name = base_name
        self.parameters = {_parameter_name(k): _parameter_value(v) for k, v in (parameters or {}).items()}
        self.description = description
        self.auxiliary = auxiliary or {}
        self.infos = describe_arguments(self.args)
        self._check_arguments_cover_logic()
        h = function_hash(base_name, self.target.describe(), self.parameters, self.infos)
        self.name = f"{base_name}_{h}" if base_name else f"_{h}"

    def __call__(self, *args):
        """A call of this function inside iteration logic or inside a Python function given to
        Package.add (accpy/package/calls.py builds it)."""

        record_call(self, self.args, args)

    @property
    def target(self):
        """The target the function is built for (its plan's)."""
        return self.plan.target

    def _check_arguments_cover_logic(self):
        given = {id(i.obj) for i in self.infos}
        for part in self.plan.schedule.space.parts:
            for st in part.statements:
                loop_vars = set(part.nest.index_vars)
                for v in free_vars(st.store):
                    if v not in loop_vars and id(v) not in given:
                        raise ValueError(f"args: {v.name} is used by the logic ({st.describe()}) but is not among "
                                         f"the arguments; pass it in args (or give an acc.Scalar a value to "
                                         f"make it a constant)")
                for buf, _, _ in accesses_of(st.store):
                    if buf.role in (BufferRole.TEMP, BufferRole.CONST):
                        continue
                    if id(buf) not in given:
                        raise ValueError(f"args: the array {buf.name} is used by the logic "
                                         f"({st.describe()}) but is not among the arguments")
            for ext in part.nest.extents:

                for v in free_vars(ext):
                    if id(v) not in given:
                        raise ValueError(f"args: the runtime dimension {v.name} sizes the nest but is not "
                                         f"among the arguments")

    def lowered(self, name: str):
        """The scheduled function named `name` (lowered once, then reused)."""
        import dataclasses

        if getattr(self, "_lowered", None) is None:
            self._lowered = self.plan.lower(name, self.arg_objs)
        return dataclasses.replace(self._lowered, name=name)

    def lowered_reference(self, name: str):
        """The unscheduled nest (default order, no plan), with the element-wise ops the plan's
        tensorize requests fuse into their outputs: DEBUG mode's oracle."""
        default = self.plan.schedule.default_schedule()
        return with_fused_ops(self.plan, Plan(default, self.plan.target).lower(name, self.arg_objs))


# Attributes of a loaded package (BuiltPackage, and the Python module): a function alias
# of the same name would be hidden behind them.
_ATTRIBUTE_NAMES = {n: "attribute (lib." + n + ")" for n in (
    "name", "output_dir", "files", "timings", "target_libraries", "function_names", "python_module", "variants",
    "Kernel", *(m for lib in libraries() for m in lib.runtime_methods()))}


#: The longest package name `Package.build` accepts. The name is spelled into file names
#: (`lib<name>.so`, `<name>.cpython-311-x86_64-linux-gnu.so` and their temporaries, `.<name>...tmp`),
#: and file systems limit a file name to 255 bytes: a longer package name is refused with a
#: ValueError rather than shortened (the files would no longer say which package they hold).
MAX_PACKAGE_NAME_LENGTH = 128


def check_package_name(name) -> str:
    """`name` if it can name a package (its files, C symbols and Python module), else ValueError."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a package name (a C identifier), got {name!r}")
    check_name(name, "name")
    if len(name) > MAX_PACKAGE_NAME_LENGTH:
        raise ValueError(f"name: a package name is at most {MAX_PACKAGE_NAME_LENGTH} characters (it names the "
                         f"package's files), got {len(name)}: {name[:20]!r}...")
    why = reserved_reason(name)
    if why:
        raise ValueError(f"name: {name!r} cannot name a package ({why})")
    return name


def package_symbols(pkg_name: str, functions) -> dict:
    """The global C symbols a package defines besides its aliases, mapped to what each is."""
    out = {f"{pkg_name}_last_error": f"error function ({pkg_name}_last_error)"}
    for lib in libraries():
        out.update(lib.package_symbols(pkg_name))
    for f in functions:
        out[f.name] = f"function {f.name}"
    return out


def _check_symbols(pkg_name: str, functions) -> None:
    """Every function alias can be declared beside the package's own symbols."""
    taken = package_symbols(pkg_name, functions)
    for f in functions:
        if f.base_name and f.base_name != f.name:
            check_symbol_name(f.base_name, "base_name", taken)


def _output_directory(output_dir) -> Path:
    """`output_dir` (default: the current directory), created if needed; an error naming it if unusable."""
    out = Path(output_dir if output_dir is not None else os.getcwd())
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"output_dir: {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise type(e)(f"output_dir: cannot create {out}: {e.strerror or e}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise PermissionError(f"output_dir: {out} is not writable")
    return out


def _remove_stale_temporaries(out: Path, file_names) -> None:
    """Temporary files of the package's outputs left by a build that was killed.

    (Called under the package's lock: every writer of these files holds it, so none is live.)
    """
    for fn in file_names:
        for p in out.glob(f".{fn}.*.tmp"):
            remove_file(p)


def _has_text(path: Path, text: str) -> bool:
    try:
        return path.read_text() == text
    except OSError:
        return False


class Package:
    """Functions added from nests, schedules or plans, built together into one native package.

    `add` each function (with its arguments, a base name and optionally parameter values),
    then `build` writes and compiles the package and returns it loaded.
    """

    Format = Format
    Mode = Mode
    Platform = Platform

    def __init__(self):
        self._functions: list = []
        self._allocating: list = []  # functions that allocate their OUTPUT arrays (allocating.py)
        self._description: dict = {}

    def add(self, source, args=None, base_name: str = "", parameters=None, function_opts=None, auxiliary=None):
        """Add a function; returns it (its `.name` is `base_name_<16 hex digits>`). `source`: a nest,
        schedule or plan, or a Python function calling functions of the package (package/calls.py)."""
        if args is None or not isinstance(args, (tuple, list)):
            raise ValueError("args: give the function's arguments as a tuple, e.g. args=(A, B, C)")
        if base_name:
            check_symbol_name(base_name, "base_name", _ATTRIBUTE_NAMES)

        grid = source.auto_grid(parameters) if hasattr(source, "auto_grid") and isinstance(
            parameters, (dict, type(None))) else None
        if grid is not None:  # Plan.auto's open choices: one function each
            return self.add(source, args, base_name, grid, function_opts, auxiliary)
        fn = calling_function(source, args, base_name, parameters, auxiliary)
        if fn is not None:
            if any(f.name == fn.name for f in self._functions + self._allocating):
                raise ValueError(f"a function named {fn.name} is already in the package")
            self._functions.append(fn)
            return fn
        plan = _plan_of(source)
        if parameters is not None and not isinstance(parameters, (dict, list)):
            raise TypeError("parameters: expected a dict (or a list of dicts)")
        if isinstance(parameters, list):
            return [self.add(source, args, base_name, p, function_opts, auxiliary) for p in parameters]
        _check_parameter_names(parameters or {})


        with parameter_values(parameters or {}):
            # the plan, its schedule and nest, and the arrays' shapes, with these values
            parts = split_allocating(PackageFunction, plan.realize(), args, base_name, parameters or {}, auxiliary)
            fns = parts[:2] if parts else (PackageFunction(plan.realize(), args, base_name, parameters or {},
                                                           auxiliary=auxiliary),)
        for fn in fns + ((parts[2],) if parts else ()):
            if any(f.name == fn.name for f in self._functions + self._allocating):
                raise ValueError(f"a function named {fn.name} is already in the package (same base name, "
                                 f"arguments and parameters)")
        self._functions.extend(fns)
        if parts:
            self._allocating.append(parts[2])
            return parts[2]
        return fns[0]

    def add_description(self, author: Optional[str] = None, license: Optional[str] = None,
                        other: Optional[dict] = None, version: Optional[str] = None, comment: Optional[str] = None):
        """Package metadata for the .hat file; `other` entries set to None are removed."""
        for k, v in (("author", author), ("license", license), ("version", version), ("comment", comment)):
            if v is not None:
                self._description[k] = v
        if other:
            aux = dict(self._description.get("auxiliary", {}))
            for k, v in other.items():
                if v is None:
                    aux.pop(k, None)
                else:
                    aux[k] = v
            self._description["auxiliary"] = aux

    @property
    def functions(self) -> list:
        """The functions added so far (PackageFunction: `.name`, `.base_name`, `.parameters`)."""
        return list(self._functions)

    def __repr__(self) -> str:
        if not self._functions:
            return "<accpy.Package: no functions yet (add some with Package.add)>"
        rows = []
        for f in self._functions:
            sig = ", ".join(i.name for i in f.infos)
            params = ", ".join(f"{k}={v}" for k, v in f.parameters.items())
            rows.append(f"  {f.base_name or '(no base name)'}({sig}) -> {f.name}"
                        f"{'  [' + params + ']' if params else ''}  target {f.target.name}")
        n = len(self._functions)
        return f"<accpy.Package: {n} function{'s' if n != 1 else ''}\n" + "\n".join(rows) + ">"

    def build(self, name: str, format: Format = Format.DEFAULT, mode: Mode = Mode.RELEASE,
              platform: Platform = Platform.HOST, tolerance: float = 1e-5, output_dir=None,
              fail_on_error: bool = False, profile: bool = False, python_module="async",
              progress: bool = True) -> BuiltPackage:
        """Emit and compile the package; returns it loaded (callable from Python).

        `fail_on_error` and `profile` are accepted for Accera compatibility: a compiler
        error always raises `acc.CompileError` (it would be an accpy bug), and profiling
        is done with the benchmarks in benchmarks/.
        """
        t0 = time.perf_counter()
        if not self._functions:
            raise RuntimeError("build: the package has no functions; add some with Package.add")
        check_package_name(name)
        _check_symbols(name, self._functions)
        if platform is not Platform.HOST:
            raise ValueError(f"platform: accpy builds for the host only, got {platform}")
        if not isinstance(format, Format):
            raise TypeError(f"format: expected an acc.Package.Format, got {format!r}")
        if format & (Format.MLIR_DYNAMIC | Format.MLIR_STATIC | Format.MLIR_SOURCE | Format.MLIR_VERBOSE):
            raise ValueError("format: accpy emits C, not MLIR; use Format.HAT_DYNAMIC / HAT_STATIC / HAT_SOURCE")
        if not isinstance(mode, Mode):
            raise TypeError(f"mode: expected acc.Package.Mode.RELEASE or DEBUG, got {mode!r}")
        if python_module not in ("async", "sync", False, None):
            raise ValueError(f"python_module: expected 'async', 'sync' or False, got {python_module!r}")
        if not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise ValueError(f"tolerance: expected a number >= 0, got {tolerance!r}")
        out = _output_directory(output_dir)
        timings = {}
        fns = self._functions
        # several functions (e.g. a parameter grid): one translation unit per core, compiled in parallel
        # (one unit when a function calls others: their implementations are static)
        calling = [f for f in fns if hasattr(f, "check_callees")]
        for f in calling:
            f.check_callees(fns)
        n_units = min(len(fns), os.cpu_count() or 1) if len(fns) >= 2 and not calling else 1
        source = c_source(name, fns, mode is Mode.DEBUG, float(tolerance), units=n_units)
        source, units = source if isinstance(source, tuple) else (source, None)
        if self._allocating:

            extra = "".join(f.definition() for f in self._allocating) + runtime_free(name)
            source += extra
            if units is not None:
                units = [units[0] + extra] + units[1:]
        companions = companion_units(name, fns)  # (units in other dialects some targets ask for; most: none)
        timings["emit"] = time.perf_counter() - t0
        files = {"c": out / f"{name}.c", "h": out / f"{name}.h", "hat": out / f"{name}.hat"}
        targets = {f.target for f in fns}
        toolchain = package_toolchain(targets, f"build({name!r})")
        flags = toolchain.unit_flags(targets)
        if not toolchain.native and python_module == "sync":
            raise foreign_error(name, fns[0].target.name, toolchain, "build(python_module='sync')")
        if not toolchain.native:
            python_module = False  # (a pybind11 module of another architecture's code cannot be imported here)

        openmp = False
        for f in fns:
            openmp = openmp or uses_openmp(f.lowered("probe").body)
        import sysconfig

        lib_file = f"lib{name}.so"
        static_file = f"{name}.a"
        module_file = out / f"{name}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
        module_cpp = out / f"{name}_module.cpp"
        h_text = header(name, fns, self._allocating)
        outputs = (files["c"].name, files["h"].name, files["hat"].name, lib_file, static_file, module_file.name,
                   module_cpp.name) + tuple(f"{name}.{c.key}" for c in companions)
        files.update({c.key: out / f"{name}.{c.key}" for c in companions})
        if format == Format.HAT_SOURCE:
            hat = hat_text(name, fns, self._description, lib_file, static_file, toolchain.cc, flags, openmp,
                           fns[0].target, allocating=self._allocating)
            with output_lock(out, name):
                _remove_stale_temporaries(out, outputs)
                write_atomic(files["c"], source)
                write_atomic(files["h"], h_text)
                write_atomic(files["hat"], hat)
                for c in companions:
                    write_atomic(files[c.key], c.text)
                for stale in (out / lib_file, out / static_file, module_file, module_cpp):
                    remove_file(stale)  # binaries of an earlier build would not match these sources
            return None  # type: ignore[return-value]
        t1 = time.perf_counter()
        bar = ProgressBar(name) if units is not None and len(units) > 1 and progress else None

        called = libraries_called(fns)
        units_of = tuple(u for lib_ in called for u in lib_.native_units())
        pch = next((t for t in (lib_.precompiled_header() for f in fns for lib_ in f.target.libraries)
                    if t is not None), None)
        why = toolchain.missing()
        if why is not None:
            raise CompileError(f"build({name!r}): cannot compile for target {fns[0].target.name}: {why}")
        try:
            lib = compile_c(source, flags, str(files["c"]), openmp=openmp, units=units, progress=bar,
                            native_units=units_of, precompile=pch,
                            archive=bool(format & Format.HAT_STATIC) or bool(python_module),
                            cc=toolchain.cc, ar=toolchain.ar, precompile_prelude=toolchain.precompiles(flags))
        except CompileError as e:
            # the failed source is kept where the compiler's messages point
            with output_lock(out, name):
                _remove_stale_temporaries(out, outputs)
                write_atomic(files["c"], source)
            raise CompileError(f"{e}\n(output_dir: {out}; the emitted source is kept at {files['c']})") from None
        # the .hat records the library's size and hash: acc.load checks them before loading it
        hat = hat_text(name, fns, self._description, lib_file, static_file, toolchain.cc, flags, openmp,
                       fns[0].target, library_record={"size": lib.shared.stat().st_size, "sha256": file_digest(lib.shared)},
                       allocating=self._allocating)
        timings["gcc"] = lib.seconds
        timings["cache_hit"] = lib.cached
        files["shared"] = out / lib_file
        msrc = module_source(name, fns) if python_module else None
        # The whole set of outputs lands under one lock (concurrent builds of the same package
        # leave one build's files, not a mix); an earlier build's module is removed until this
        # build's module is ready, so that nothing loads a module that does not match the .hat.
        with output_lock(out, name):
            _remove_stale_temporaries(out, outputs)
            write_atomic(files["c"], source)
            write_atomic(files["h"], h_text)
            write_atomic(files["hat"], hat)
            for c in companions:
                write_atomic(files[c.key], c.text)
            copy_atomic(lib.shared, files["shared"])
            if format & Format.HAT_STATIC:
                files["static"] = out / static_file
                copy_atomic(lib.static, files["static"], executable=False)
            else:
                remove_file(out / static_file)
            remove_file(module_file)
            if msrc is not None:
                write_atomic(module_cpp, msrc)
            else:
                remove_file(module_cpp)
        timings["compile_total"] = time.perf_counter() - t1
        module_build = None
        if python_module:
            files["python_module"] = module_file
            files["python_module_source"] = module_cpp

            def job():
                """Build the Python module and publish it in output_dir (if still this build's)."""
                # the kernels are linked in from the cache's archive (immutable once published),
                # not from output_dir, which a concurrent build may be rewriting
                path, seconds, cached = compile_cxx_module(msrc, ["-fopenmp"] if openmp else [], lib.static, lib.key,
                                                           str(module_cpp))
                with output_lock(out, name):
                    # publish only if the directory still holds this build (a later build owns it
                    # otherwise); the .hat alone does not tell (it does not show the logic), the .c does
                    if _has_text(files["c"], source) and _has_text(files["hat"], hat):
                        copy_atomic(path, module_file)
                timings["pybind11"] = seconds
                timings["pybind11_cache_hit"] = cached
                return path  # this build's module, wherever the directory stands

            module_build = ModuleBuild(job)
            if python_module == "sync":
                module_build.wait()
        for c in companions:  # checked by their compiler (while the Python module builds): a note, or CompileError
            timings[f"{c.key}_check"] = c.check(files[c.key])
        fn_desc = [(f.name, f.base_name, f.infos, recorded_parameters(f.parameters)) for f in fns]
        if not toolchain.native:  # written, not loaded: its code is for another architecture
            built = ForeignPackage(name, out, files, fn_desc, fns[0].target.name, toolchain)
            timings["total"] = time.perf_counter() - t0
            built.timings = timings
            return built
        # load the cache's copy: output_dir/lib<name>.so may be replaced by a concurrent build
        built = BuiltPackage(name, out, lib.shared, fn_desc, files, module_build)
        built.target_libraries = tuple(lib_.name for lib_ in called)
        for f in self._allocating:
            built._functions[f.name] = built._functions[f.base_name] = f.python_callable(built)
        timings["total"] = time.perf_counter() - t0
        built.timings = timings
        return built
