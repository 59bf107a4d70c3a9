"""The C source and header of a package.

Layout of `name.c`: the runtime (inlined, so the file stands alone), then per function
  - `<fn>__impl`: the scheduled kernel, compiled for the target's ISA extensions (the target's
    toolchain's function attribute, e.g. x86's `__attribute__((target(...)))`, while the rest of
    the file stays baseline x86-64; or flags for the whole file);
  - in DEBUG mode `<fn>__reference` (the unscheduled nest) and a comparison;
  - `<fn>`: the public entry (checks the CPU has the features where the toolchain can, so no SIGILL);
  - `<fn>__packed(void**)`: the uniform entry the Python binders call.
and `<package>_last_error()`, the error channel.
"""
from __future__ import annotations


from ..codegen.c import (Names, c_type, called_intrinsics, emit_function, function_params, has_vector_code,
                         intrinsic_headers)
from ..ir.names import c_comment, c_string
from ..ir.types import ScalarType
from ..paths import native_text
from ..targets.library import grid_for, library_of
from .calls import precondition_checks
from .launch import device_declarations, launcher_source
from .signature import KIND_ARRAY


# Ends the part of a package's C that is the same for every package of its kind (the runtime,
# intrinsic headers): the compiler precompiles that part once (see compile.split_prelude).
PRELUDE_END = "/* ---- end of the prelude: the package's own code follows ---- */"


def runtime_text() -> str:
    """native/accpy_runtime.h, inlined at the top of every package's C (with the scalar helpers it
    includes, native/accpy_scalar.h, inlined in their place: the file stands alone)."""
    return native_text("accpy_runtime.h")


def device_grid(target):
    """The grid of `target` when its functions run on a device (their code is a kernel launched
    from the host), else None."""
    grid = grid_for(target)
    return grid if grid is not None and grid.dialect is not None else None


def display_name(pf) -> str:
    """The name users know a function by in messages: its base name (alias), else its full name."""
    return pf.base_name or pf.name


def _feature_check(pf, target) -> list:
    """C that refuses to run the kernel on a CPU without one of the target's features (no SIGILL):
    the target's toolchain's guard (none where the toolchain has no runtime check)."""
    return target.toolchain.feature_guard(target, display_name(pf), c_string)


def _call_args(infos) -> str:
    return ", ".join(i.name for i in infos)


def _dim(s) -> str:
    return str(s)


def _strides_exprs(info) -> list:
    if info.layout == "S":
        return [str(s) for s in info.strides]
    n = len(info.shape)
    out = [""] * n
    acc = "1"
    order = range(n - 1, -1, -1) if info.layout == "C" else range(n)
    for d in order:
        out[d] = acc
        acc = f"{acc} * (int64_t)({_dim(info.shape[d])})"
    return out


def _debug_compare(display: str, infos, tolerance: float) -> list:
    """C that compares each written array against the reference copy, reporting the first difference."""
    lines = []
    for info in infos:
        if info.kind != KIND_ARRAY or not info.written:
            continue
        t = info.dtype
        n = len(info.shape)
        strides = _strides_exprs(info)
        idx = [f"accpy_i{d}" for d in range(n)]
        depth = 1
        for d in range(n):
            lines.append("    " * depth + f"for (int64_t {idx[d]} = 0; {idx[d]} < (int64_t)({_dim(info.shape[d])}) && !accpy_mismatch; ++{idx[d]}) {{")
            depth += 1
        off = " + ".join(f"{i} * {s}" for i, s in zip(idx, strides)) or "0"
        pad = "    " * depth
        lines.append(f"{pad}int64_t accpy_off = {off};")
        if t.is_float:
            lines.append(f"{pad}double accpy_want = (double)accpy_ref_{info.name}[accpy_off], accpy_got = (double){info.name}[accpy_off];")
            lines.append(f"{pad}double accpy_diff = accpy_debug_fabs(accpy_got - accpy_want), "
                         f"accpy_scale = accpy_debug_fabs(accpy_want) > 1.0 ? accpy_debug_fabs(accpy_want) : 1.0;")
            lines.append(f"{pad}if (!(accpy_diff <= {float(tolerance)!r} * accpy_scale) && !(accpy_want != accpy_want && accpy_got != accpy_got)) {{")
            fmt_val, args_val = "expected %.9g, got %.9g", "accpy_want, accpy_got"
        else:
            lines.append(f"{pad}long long accpy_want = (long long)accpy_ref_{info.name}[accpy_off], accpy_got = (long long){info.name}[accpy_off];")
            lines.append(f"{pad}if (accpy_want != accpy_got) {{")
            fmt_val, args_val = "expected %lld, got %lld", "accpy_want, accpy_got"
        where = ", ".join("%lld" for _ in idx)
        where_args = "".join(f", (long long){i}" for i in idx)
        fmt = c_string(f"%s: DEBUG mode: %s[{where}] differs from the reference (unscheduled) result: {fmt_val}")
        lines.append(f"{pad}    accpy_set_error({fmt}, {c_string(display)}, {c_string(info.name)}{where_args}, {args_val});")
        lines.append(f"{pad}    accpy_debug_report();")
        lines.append(f"{pad}    accpy_mismatch = 1;")
        lines.append(f"{pad}}}")
        for d in range(n):
            depth -= 1
            lines.append("    " * depth + "}")
    return lines


DEBUG_HELPERS = """/* DEBUG mode: copies of the written arrays for the reference run, and the report. */
__attribute__((unused)) static void* accpy_debug_copy(const char* what, const void* src, size_t elem, int n,
                                                      const int64_t* dims, const int64_t* strides) {
    size_t bytes;
    if (!accpy_array_bytes(what, elem, n, dims, strides, &bytes)) return NULL;
    void* p = malloc(bytes ? bytes : 1);
    if (!p) {
        accpy_set_error("out of memory in DEBUG mode copying %s (%zu bytes)", what, bytes);
        return NULL;
    }
    if (bytes) memcpy(p, src, bytes);
    return p;
}
__attribute__((unused)) static void accpy_debug_free(void* p) { free(p); }
__attribute__((unused)) static double accpy_debug_fabs(double x) { return fabs(x); }
__attribute__((unused)) static void accpy_debug_report(void) { fprintf(stderr, "accpy: %s\\n", accpy_error_text); }
"""


def function_source(pf, debug: bool, tolerance: float) -> str:
    """All C for one package function (`pf` is a package.PackageFunction)."""
    infos = pf.infos
    names = Names()
    impl = pf.lowered(f"{pf.name}__impl")
    attr = pf.target.toolchain.function_attribute(pf.target)
    grid = device_grid(pf.target)
    if grid is not None:  # runs on a device: the kernel's source and its host launcher
        out = [launcher_source(impl, grid, "static ")]
    else:
        out = [pf.impl_source(impl.name, f"static {attr}") if hasattr(pf, "impl_source") else
               emit_function(impl, linkage=f"static {attr}")]  # (a function of calls: package/calls.py)
    params = function_params(impl, names)
    body = _feature_check(pf, pf.target) + precondition_checks(pf, display_name(pf))
    if debug:
        ref = pf.lowered_reference(f"{pf.name}__reference")
        out.append(pf.impl_source(ref.name, "static ") if hasattr(pf, "impl_source") else
                   emit_function(ref, linkage="static "))
        # Only accpy_-prefixed helpers are called here: a parameter (named by the user)
        # could shadow malloc, free, fabs, ... (argument names never start with accpy_).
        copies = [i for i in infos if i.kind == KIND_ARRAY and i.written]
        for i in copies:
            ct = c_type(i.dtype)
            # sizes from a C caller are checked (negative, overflow) before the copy
            dims = ", ".join(f"(int64_t)({_dim(s)})" for s in i.shape) or "1"
            strides = f"(const int64_t[]){{{', '.join(str(int(x)) for x in i.strides)}}}" \
                if i.layout == "S" and i.strides else "NULL"
            what = c_string(f"the DEBUG-mode copy of {i.name}")
            body.append(f"    {ct}* accpy_ref_{i.name} = ({ct}*)accpy_debug_copy({what}, {i.name}, sizeof({ct}), "
                        f"{max(len(i.shape), 1)}, (const int64_t[]){{{dims}}}, {strides});")
        if copies:
            failed = " || ".join(f"!accpy_ref_{i.name}" for i in copies)
            frees = " ".join(f"accpy_debug_free(accpy_ref_{i.name});" for i in copies)
            body.append(f"    if ({failed}) {{ {frees} return; }}")
        ref_args = ", ".join(f"accpy_ref_{i.name}" if (i.kind == KIND_ARRAY and i.written) else i.name for i in infos)
        body.append(f"    {pf.name}__reference({ref_args});")
        body.append(f"    {pf.name}__impl({_call_args(infos)});")
        body.append("    int accpy_mismatch = 0;")
        body.extend(_debug_compare(display_name(pf), infos, tolerance))
        for i in copies:
            body.append(f"    accpy_debug_free(accpy_ref_{i.name});")
    else:
        body.append(f"    {pf.name}__impl({_call_args(infos)});")
    # The public entry runs the body, then moves an error raised on an OpenMP worker thread to
    # the caller's thread (what `<package>_last_error()` reads); collecting also clears the
    # process-wide slot when the caller's own call failed, so no error outlives its call there.
    out.append(f"static void {pf.name}__body({params}) {{\n" + "\n".join(body) + "\n}\n")
    out.append(f"void {pf.name}({params}) {{\n"
               f"    {pf.name}__body({_call_args(infos)});\n"
               f"    (void)accpy_collect_error();\n}}\n")
    # packed entry (the Python binders): the status of this call only, so an error a C caller
    # left untaken on this thread is not reported again
    unpack = []
    for k, i in enumerate(infos):
        if i.kind == KIND_ARRAY:
            unpack.append(f"({c_type(i.dtype)}*)args[{k}]")
        else:
            unpack.append(f"*({c_type(i.dtype)}*)args[{k}]")
    out.append(f"int {pf.name}__packed(void** args) {{\n"
               f"    accpy_error_flag = 0;\n"
               f"    {pf.name}({', '.join(unpack)});\n"
               f"    return accpy_error_flag ? 1 : 0;\n}}\n")
    return "\n".join(out)


def intrinsic_includes(functions) -> list:
    """The #include lines of the target intrinsics the functions call (e.g. gemmini.h)."""
    out: dict = {}
    for pf in functions:
        if device_grid(pf.target) is not None:
            continue  # (a kernel's: its device source has them, codegen/device.py)
        for h in intrinsic_headers(pf.lowered("probe").body):
            out.setdefault(h, None)
    return list(out)


def libraries_called(functions) -> list:
    """The target libraries whose intrinsics the functions call (in first-use order): their
    native units are linked into the package and their exports added to its C."""
    out: dict = {}
    for pf in functions:
        for intr in called_intrinsics(pf.lowered("probe").body):
            lib = library_of(intr.name)
            if lib is not None:
                out.setdefault(lib, None)
    return list(out)


def uses_vector_code(functions) -> bool:
    """Whether any function holds vector statements (the C then needs the vector ISA's header)."""
    return any(has_vector_code(pf.lowered("probe").body) for pf in functions)


def c_source(pkg_name: str, functions, debug: bool, tolerance: float, units: int = 1):
    """The package's C: one standalone text (name.c), and with `units` > 1 also that many
    translation units holding the same code, to compile in parallel. A package calling a
    target library's intrinsics is always split (e.g. a functional model is one more unit).

    Returns the text, or (text, [unit texts]) when units > 1.
    """
    bodies = [function_source(pf, debug, tolerance) for pf in functions]
    includes = intrinsic_includes(functions)
    tail = f"const char* {pkg_name}_last_error(void) {{ return accpy_take_error(); }}\n"
    for lib in libraries_called(functions):
        tail += lib.package_exports(pkg_name)
    vectors = uses_vector_code(functions)
    no_vectors = [] if vectors else ["#define ACCPY_NO_VECTORS"]
    # what the vector ISAs of the functions' targets need first (x86's header comes with the runtime)
    preludes = list(dict.fromkeys(pf.target.vector_isa.prelude() for pf in functions)) if vectors else []
    runtimes = list(dict.fromkeys(g.runtime.header for g in map(device_grid, (pf.target for pf in functions))
                                  if g is not None))
    head = [f"/* {pkg_name}.c: generated by accpy. Do not edit: rebuild the package instead. */",
            *no_vectors, runtime_text(), *[native_text(h) for h in runtimes],
            *[p for p in preludes if p], *includes, ""] + \
        ([DEBUG_HELPERS] if debug else []) + [PRELUDE_END]
    text = "\n".join(head + bodies + [tail])
    if units <= 1 and not includes:
        return text
    groups = [bodies[k::units] for k in range(units)]
    out = []
    for k, group in enumerate(groups):
        defs = "#define ACCPY_SPLIT_UNIT\n" + ("#define ACCPY_DEFINE_ERROR_STATE\n" if k == 0 else "")
        out.append("\n".join([defs] + head + group + ([tail] if k == 0 else [])))
    return text, out


def variants_by_base_name(functions) -> dict:
    """{base name: [functions with it]} (in the order added); functions without one are left out."""
    out: dict = {}
    for pf in functions:
        if pf.base_name and pf.base_name != pf.name:
            out.setdefault(pf.base_name, []).append(pf)
    return out


def describe_parameters(parameters: dict) -> str:
    """`P0=8, P1=2`, or `no parameters`."""
    return ", ".join(f"{k}={v}" for k, v in parameters.items()) or "no parameters"


def recorded_parameters(parameters: dict) -> dict:
    """Parameter values as the .hat records them (and `lib.variants` shows): numbers, else text."""
    return {k: (v if isinstance(v, (int, float, bool)) else str(v)) for k, v in (parameters or {}).items()}


def alias_error_text(base: str, variants: list) -> str:
    """Why calling the alias `base` of several variants [(full name, parameters)] is refused."""
    rows = "\n".join(f"  {full}: {describe_parameters(params)}" for full, params in variants)
    return (f"{base} names {len(variants)} variants of the function (one per parameter set); "
            f"call one by its full name (the mapping lib.variants gives each one's parameters):\n{rows}")


def _decl_type(info) -> str:
    """An argument's type in the public declarations (float16 through a pedantic-clean typedef)."""
    if info.dtype is ScalarType.float16:
        t = "accpy_float16_t"
        return f"{t}*" if info.is_array else t
    return info.c_decl_type()


def _decl_params(pf) -> str:
    return ", ".join(f"{'const ' if i.is_array and i.role == 'input' else ''}{_decl_type(i)} {i.name}"
                     for i in pf.infos) or "void"


def declarations(pkg_name: str, functions, allocating=()) -> str:
    """C declarations (inside extern "C"), with each base name as an inline alias."""
    lines = ["#include <stdint.h>", "#include <stdbool.h>", ""]
    if any(i.dtype is ScalarType.float16 for pf in functions for i in pf.infos):
        # _Float16 is a GCC/Clang extension (ISO C has none): `__extension__` keeps -pedantic quiet
        lines += ["#ifndef ACCPY_FLOAT16_T_DEFINED", "#define ACCPY_FLOAT16_T_DEFINED",
                  "__extension__ typedef _Float16 accpy_float16_t;", "#endif", ""]
    lines += ["#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
    for pf in functions:
        params = _decl_params(pf)
        if pf.description:
            lines.append(c_comment(pf.description))
        lines.append(f"void {pf.name}({params});")
    lines.append("")
    device = device_declarations(functions)
    if device:
        types = dict.fromkeys(t for pf in functions if (g := grid_for(pf.target)) is not None and g.runtime is not None
                              and (t := getattr(g.runtime, "header_types", "")))
        lines += ["/* Device entries: the kernels on the caller's own queue and device buffers. */", *types]
        lines += device + [""]
    lines.append(f"/* The last error reported by a function of this package on this thread, or NULL. */")
    lines.append(f"const char* {pkg_name}_last_error(void);")
    lines.append("")
    for base, group in variants_by_base_name(functions).items():
        if len(group) > 1:
            # several variants (a parameter grid): an alias would silently pick one of them
            lines.append(c_comment(f"{base}: {len(group)} variants, called by their full names: " +
                                   "; ".join(f"{pf.name} ({describe_parameters(pf.parameters)})" for pf in group)))
            lines.append("")
            continue
        pf = group[0]
        params = _decl_params(pf)
        lines.append(f"#ifndef __{base}_DEFINED__")
        lines.append(f"#define __{base}_DEFINED__")
        lines.append(f"static inline void {base}({params}) {{ {pf.name}({_call_args(pf.infos)}); }}")
        lines.append("#endif")
        lines.append("")
    if allocating:  # functions that allocate their OUTPUT arrays (allocating.py), and their `free`
        lines += [f.declaration(pkg_name) for f in allocating] + [
            f"/* Gives back an OUTPUT array a function of this package allocated (NULL: nothing). */",
            f"void {pkg_name}_free(void* p);", ""]
    lines += ["#ifdef __cplusplus", "}", "#endif"]
    return "\n".join(lines)


def header(pkg_name: str, functions, allocating=()) -> str:
    """`name.h`: the declarations behind an include guard."""
    guard = f"__{pkg_name}_H__"
    return (f"#ifndef {guard}\n#define {guard}\n\n{declarations(pkg_name, functions, allocating)}\n\n"
            f"#endif /* {guard} */\n")

