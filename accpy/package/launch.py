"""The host side of a function whose target runs it on a grid (a device): `<fn>`, a host launcher
with the kernel's parameters that copies each array to the device, runs the kernel over the grid
the bound loops ask for, and copies the arrays back (written arrays only), through a host runtime
(`DeviceRuntime`, accpy/targets/grid.py). One generator writes the launcher for either kind of
runtime, from the runtime's data:

* a runtime that builds kernels from source at run time (`kernel_get`, `set_arg`, `launch`): the
  kernel's source is kept in the package as a string constant (`launcher_source`); where the
  runtime builds one program per package (`register`, `package_kernel`), each kernel's source is
  registered with it when the library is loaded (a constructor), so that the first launch builds
  every kernel of the package at once;
* a runtime whose kernels are compiled with the launcher, in one translation unit of their own
  (`launch_template`, checked by `launched`): `device_unit_source` writes that unit, every
  function's kernel in the grid's dialect and its launcher, for the runtime's compiler.

A target may ask its packages for such units besides their own C (a target library's
`companion_grids`: e.g. the kernels in a second dialect, for a device the package's library does
not run on here): `companion_units` writes them, and each grid checks its unit with its compiler
(`check_unit`) when the package is built.

Where the runtime has one (`DeviceRuntime.has_device_entry`), each function also gets a device
entry, `<fn>_device(queue, buffers..., sizes and scalars...)` (`device_entry_name`): the kernel
launched on the caller's queue with the caller's device buffers, no copies and no wait (the
queue's order makes the caller's next commands see the results); its C declaration is
`device_declaration`. It returns 0, or nonzero with the package's error set.

Every runtime failure sets the package's error and returns, freeing what the launcher allocated;
a grid with no units along an axis (a size 0) runs nothing.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..codegen.c import CEmitter, Names, c_type, function_params
from ..codegen.device import Kernel, emit_kernel
from ..ir.expr import Buffer
from ..ir.kinds import BufferRole
from ..ir.names import c_string
from ..ir.stmt import Function
from ..paths import inline_native_includes, native_text
from ..targets.library import grid_for


def device_prelude(dialect) -> str:
    """The dialect's prelude with the native files it includes inlined."""
    return inline_native_includes(dialect.prelude)


#: the suffix of a function's device entry (`<fn>_device`)
DEVICE_ENTRY_SUFFIX = "_device"
#: the suffix of the name sources.py gives a function's launcher (`<fn>__impl`)
LAUNCHER_SUFFIX = "__impl"


def device_entry_name(function_name: str) -> str:
    """The C name of the device entry of the package function `function_name` (its public name,
    or its launcher's, `<fn>__impl`)."""
    if function_name.endswith(LAUNCHER_SUFFIX):
        function_name = function_name[:-len(LAUNCHER_SUFFIX)]
    return function_name + DEVICE_ENTRY_SUFFIX


def one_program(runtime) -> bool:
    """Whether `runtime` builds a package's kernels as one program (registered sources)."""
    return bool(getattr(runtime, "register", "") and getattr(runtime, "package_kernel", ""))


def compiled_with_launcher(runtime) -> bool:
    """Whether `runtime`'s kernels are compiled with their launchers (launched by a template), not
    built from a source string at run time."""
    return bool(getattr(runtime, "launch_template", None))


def _elements(em: CEmitter, b: Buffer) -> str:
    """C: the number of elements the array `b` spans (0 when a dimension is 0)."""
    if not b.shape:
        return "1"
    dims = [em.expr(d) for d in b.shape]
    span = " + ".join(f"((int64_t)({d}) - 1) * (int64_t)({em.expr(s)})" for d, s in zip(dims, b.strides))
    nonempty = " && ".join(f"(int64_t)({d}) > 0" for d in dims)
    return f"(({nonempty}) ? (size_t)(1 + {span}) : (size_t)0)"


def _launch(fn: Function, kernel: Kernel, rt, names: Names, bufs: list) -> list:
    """The statements that pass the arguments and launch `kernel` (its device buffers accpy_d<k>),
    jumping to accpy_done on an error."""
    k_buf = {id(b): k for k, b in enumerate(bufs)}
    if compiled_with_launcher(rt):
        args = ", ".join(f"({c_type(a.dtype)}*)accpy_d{k_buf[id(a)]}" if isinstance(a, Buffer)
                         else names.get(a, a.name) for a in fn.args)
        sizes = {f"{w}{x}": f"accpy_{'global' if w == 'g' else 'local'}[{k}]"
                 for w in "gl" for k, x in enumerate("xyz")}
        return [rt.launch_template.format(kernel=kernel.name, args=args, **sizes) + ";",
                f"if ({rt.launched.format(name=c_string(kernel.name), **sizes)}) goto accpy_done;"]
    out = []
    for pos, a in enumerate(fn.args):
        if isinstance(a, Buffer):
            value, size = f"&accpy_d{k_buf[id(a)]}", "sizeof(void*)"
        else:
            value, size = f"&{names.get(a, a.name)}", f"sizeof({c_type(a.dtype)})"
        out.append(f"if ({rt.set_arg}(accpy_k, {pos}, {size}, {value})) goto accpy_done;")
    out.append(f"if ({rt.launch}(accpy_k, 3, accpy_global, accpy_local)) goto accpy_done;")
    return out


def _sizes(grid, kernel: Kernel, em: CEmitter) -> list:
    """The C lines declaring a launch's sizes, accpy_global[3] and accpy_local[3]."""
    glob, local = grid.launch_sizes({u: em.expr(e) for u, e in kernel.launch.items()})
    return [f"size_t accpy_global[3] = {{{', '.join(f'(size_t)({g})' for g in glob)}}};",
            f"size_t accpy_local[3] = {{{', '.join(f'(size_t)({x})' for x in local)}}};"]


def host_launcher(fn: Function, kernel: Kernel, grid, linkage: str, source: Optional[str] = None) -> str:
    """The host launcher `fn.name` (with `linkage`) of `kernel` (emitted from `fn` in the grid's
    dialect), through the grid's runtime; `source` names the C constant holding the kernel's source
    for a runtime that builds it at run time."""
    rt = grid.runtime
    names = Names()
    em = CEmitter(names)
    body = []
    bufs = [a for a in fn.args if isinstance(a, Buffer)]
    for k, b in enumerate(bufs):
        body.append(f"void* accpy_d{k} = NULL;")
        body.append(f"size_t accpy_n{k} = {_elements(em, b)} * sizeof({c_type(b.dtype)});")
    body += _sizes(grid, kernel, em)
    body.append("if (accpy_global[0] == 0 || accpy_global[1] == 0 || accpy_global[2] == 0) return;")
    if not compiled_with_launcher(rt):
        get = f"{rt.package_kernel}({c_string(kernel.name)})" if one_program(rt) else \
            f"{rt.kernel_get}({source}, {c_string(kernel.name)}, \"\")"
        body.append(f"{rt.handle_type}* accpy_k = {get};")
        body.append("if (!accpy_k) return;")
    for k, b in enumerate(bufs):
        # (an array of no elements still gets a buffer of one byte: a kernel argument must be one)
        body.append(f"accpy_d{k} = {rt.alloc}(accpy_n{k} ? accpy_n{k} : 1);")
        body.append(f"if (!accpy_d{k}) goto accpy_done;")
        body.append(f"if (accpy_n{k} && {rt.write}(accpy_d{k}, {names.get(b, b.name)}, accpy_n{k})) goto accpy_done;")
    body += _launch(fn, kernel, rt, names, bufs)
    for k, b in enumerate(bufs):
        if b.role not in (BufferRole.INPUT, BufferRole.CONST):
            body.append(f"if (accpy_n{k} && {rt.read}(accpy_d{k}, {names.get(b, b.name)}, accpy_n{k})) "
                        f"goto accpy_done;")
    body.append("accpy_done:")
    body += [f"if (accpy_d{k}) {rt.free}(accpy_d{k});" for k in range(len(bufs))]
    body.append("return;")
    out = [f"{linkage}void {fn.name}({function_params(fn, names)}) {{"]
    out += ["    " + line if not line.endswith(":") else line for line in body]
    out.append("}")
    return "\n".join(out) + "\n"


def _device_params(fn: Function, rt, names: Names) -> str:
    """The device entry's parameters: the caller's queue, then the function's arguments, arrays as
    the runtime's buffers (`buffer_type`; typed device pointers when it has none)."""
    out = [f"{rt.queue_type} accpy_queue"]
    for a in fn.args:
        if isinstance(a, Buffer) and rt.buffer_type:
            out.append(f"{rt.buffer_type} {names.get(a, a.name)}")
        elif isinstance(a, Buffer):
            out.append(f"{c_type(a.dtype)}* {names.get(a, a.name)}")
        else:
            out.append(f"{c_type(a.dtype)} {names.get(a, a.name)}")
    return ", ".join(out)


def device_declaration(fn: Function, grid, linkage: str = "") -> str:
    """The C declaration of `fn`'s device entry (`fn`: the lowered function, named as the package
    function or its launcher), or "" when the grid's runtime has none."""
    rt = grid.runtime
    if not rt.has_device_entry:
        return ""
    return f"{linkage}int {device_entry_name(fn.name)}({_device_params(fn, rt, Names())});"


def device_entry(fn: Function, kernel: Kernel, grid, linkage: str = "") -> str:
    """The device entry of `fn` (see the module doc): "" when the grid's runtime has none."""
    rt = grid.runtime
    if not rt.has_device_entry:
        return ""
    names = Names()
    em = CEmitter(names)
    name = device_entry_name(fn.name)
    head = f"{linkage}int {name}({_device_params(fn, rt, names)}) {{"
    body = _sizes(grid, kernel, em)
    empty = "if (accpy_global[0] == 0 || accpy_global[1] == 0 || accpy_global[2] == 0) return 0;"
    if compiled_with_launcher(rt):
        args = ", ".join(names.get(a, a.name) for a in fn.args)
        sizes = {f"{w}{x}": f"accpy_{'global' if w == 'g' else 'local'}[{k}]"
                 for w in "gl" for k, x in enumerate("xyz")}
        body += [empty, rt.device_launch_template.format(kernel=kernel.name, args=args, queue="accpy_queue",
                                                         **sizes) + ";",
                 f"return {rt.device_launched.format(name=c_string(kernel.name), queue='accpy_queue', **sizes)} "
                 f"? 1 : 0;"]
    else:
        body.append(f"{rt.handle_type}* accpy_k = {rt.queue_kernel}(accpy_queue, {c_string(kernel.name)});")
        body.append("if (!accpy_k) return 1;")
        for a in fn.args:
            if isinstance(a, Buffer):
                bytes_ = f"{_elements(em, a)} * sizeof({c_type(a.dtype)})"
                body.append(f"if ({rt.check_buffer}(accpy_queue, (void*){names.get(a, a.name)}, {bytes_}, "
                            f"{c_string(name)}, {c_string(a.name)})) return 1;")
        body.append(empty)
        for pos, a in enumerate(fn.args):
            value = f"&{names.get(a, a.name)}"
            size = f"sizeof({rt.buffer_type})" if isinstance(a, Buffer) else f"sizeof({c_type(a.dtype)})"
            body.append(f"if ({rt.set_arg}(accpy_k, {pos}, {size}, {value})) return 1;")
        body.append(f"return {rt.queue_launch}(accpy_k, accpy_queue, 3, accpy_global, accpy_local) ? 1 : 0;")
    return "\n".join([head] + ["    " + line for line in body] + ["}"]) + "\n"


def _registered_source(fn: Function, kernel: Kernel, grid) -> str:
    """The C that registers `kernel`'s source with the package's program when the library is
    loaded: the device prelude as a constant (once per unit), the kernel's source record and the
    constructor that registers it."""
    rt = grid.runtime
    prelude = device_prelude(grid.dialect)
    tag = hashlib.sha256(prelude.encode()).hexdigest()[:12]
    const = f"accpy_device_prelude_{tag}"
    record = f"{fn.name}__device_source"
    return "\n".join([
        f"#ifndef ACCPY_DEVICE_PRELUDE_{tag}", f"#define ACCPY_DEVICE_PRELUDE_{tag}",
        f"static const char {const}[] = {c_string(prelude)};", "#endif",
        f"static {rt.source_type} {record} = {{{const}, {c_string(kernel.source)}, {c_string(kernel.name)}}};",
        f"__attribute__((constructor)) static void {fn.name}__device_register(void) {{ {rt.register}(&{record}); }}",
        ""])


def launcher_source(fn: Function, grid, linkage: str) -> str:
    """The kernel's source (a constant, or a registered record where the runtime builds one program
    per package), the host launcher `fn.name` (with `linkage`) of `fn` and its device entry
    (public), for a grid whose runtime builds kernels from source at run time."""
    rt = grid.runtime
    if one_program(rt):
        kernel = emit_kernel(fn, grid.dialect, "")  # (the prelude: once in the program)
        head = _registered_source(fn, kernel, grid)
        src = None
    else:
        kernel = emit_kernel(fn, grid.dialect, device_prelude(grid.dialect))
        src = f"{fn.name}__device_source"
        head = f"static const char {src}[] = {c_string(kernel.source)};\n"
    entry = device_entry(fn, kernel, grid)
    return head + "\n" + host_launcher(fn, kernel, grid, linkage, src) + ("\n" + entry if entry else "")


def device_unit_source(pkg_name: str, functions, grid) -> str:
    """One translation unit for the compiler of `grid`'s runtime (a runtime whose kernels are
    compiled with their launchers): the runtime's `unit_head`, the host runtime
    (native/accpy_runtime.h: the error channel), the runtime's header, the device prelude and
    every function's kernel (between the runtime's `unit_open` and `unit_close`), a launcher per
    function (with the runtime's `linkage`), its device entry where the runtime has them, and
    `<pkg_name>_last_error`. `functions` are lowered IR functions, each named as its launcher."""
    rt, dialect = grid.runtime, grid.dialect
    if not compiled_with_launcher(rt):
        raise ValueError(f"device_unit_source: the runtime of {type(grid).__name__} builds its kernels at run time "
                         f"(no launch_template); its launchers are written by launcher_source")
    kernels = [emit_kernel(fn, dialect, "") for fn in functions]
    device = [device_prelude(dialect)] + [k.source for k in kernels]
    # system headers the device code includes come first, outside `unit_open` (e.g. a namespace)
    system = dict.fromkeys(line.strip() for text in device for line in text.splitlines()
                           if line.strip().startswith("#include <"))
    out = [f"/* {pkg_name}{dialect.suffix}: generated by accpy ({dialect.name} kernels and their host launchers). "
           f"Do not edit: rebuild the package instead. */",
           rt.unit_head, *system, "#define ACCPY_NO_VECTORS", native_text("accpy_runtime.h"), native_text(rt.header),
           rt.unit_open, *device]
    out.append(rt.unit_close)
    out += [host_launcher(fn, k, grid, rt.linkage) for fn, k in zip(functions, kernels)]
    out += [device_entry(fn, k, grid, rt.linkage) for fn, k in zip(functions, kernels) if rt.has_device_entry]
    out.append(f"{rt.linkage}const char* {pkg_name}_last_error(void) {{ return accpy_take_error(); }}\n")
    return "\n".join(out)


@dataclass(frozen=True)
class CompanionUnit:
    """A unit a package writes beside its C: `key` (its entry in the package's `files`, the file's
    suffix), `text`, the `grid` whose compiler checks it and the `targets` of its functions."""

    key: str
    text: str
    grid: object
    targets: tuple

    def check(self, path: Path) -> str:
        """Compile the unit (written at `path`) for each of its targets to check it: a note saying
        what was done; CompileError naming `path`'s lines the compiler rejected."""
        return "; ".join(self.grid.check_unit(self.text, path, t) for t in self.targets)


def companion_grids_of(target) -> tuple:
    """The grids whose units a package for `target` writes beside its C (its libraries' choice)."""
    out = []
    for lib in target.libraries:
        hook = getattr(lib, "companion_grids", None)  # (a library without companions has no hook)
        out += list(hook(target)) if hook is not None else []
    return tuple(out)


def companion_units(pkg_name: str, functions) -> list:
    """The companion units (CompanionUnit) of a package's functions (package.PackageFunction): one
    per grid their targets ask for, holding the kernels and launchers of the functions whose
    targets ask for it, each launcher named as the function; [] for most packages."""
    groups: dict = {}
    for pf in functions:
        if hasattr(pf, "impl_source"):  # (a function calling others: host code, no kernel of its own)
            continue
        for grid in companion_grids_of(pf.target):
            groups.setdefault(id(grid), (grid, []))[1].append(pf)
    out = []
    for grid, fns in groups.values():
        text = device_unit_source(pkg_name, [pf.lowered(pf.name) for pf in fns], grid)
        targets = tuple({pf.target.name: pf.target for pf in fns}.values())
        out.append(CompanionUnit(grid.dialect.suffix.lstrip("."), text, grid, targets))
    return out


def device_declarations(functions) -> list:
    """The C declarations of the device entries of a package's functions (package.PackageFunction),
    for its header: [] when none runs through a runtime with device entries. Their queue and buffer
    types are the runtime's own (`DeviceRuntime.queue_type`, `buffer_type`)."""
    out = []
    for pf in functions:
        grid = grid_for(pf.target)
        if hasattr(pf, "impl_source") or grid is None or grid.dialect is None or grid.runtime is None:
            continue  # (host code: a function of calls, or a target without a device)
        decl = device_declaration(pf.lowered(pf.name), grid)
        if decl:
            out.append(f"/* {pf.base_name or pf.name} on the caller's {grid.runtime.name} queue and buffers (no "
                       f"copies, no wait): 0, or nonzero with the error set */")
            out.append(decl)
    return out
