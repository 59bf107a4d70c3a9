"""The HAT file: valid C (the declarations) and valid TOML (the metadata) at once.

Lines starting with `#` are TOML comments, so the C preprocessor and a TOML parser each
see only their own part. Loadable by the `hatlib` package.
"""
from __future__ import annotations

import platform
import re

from ..codegen.device import launch_of
from ..ir.expr import as_int
from .launch import companion_grids_of, device_entry_name
from .signature import KIND_ARRAY, KIND_DIM
from .sources import declarations, device_grid, recorded_parameters


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _s(v: str) -> str:
    """A TOML basic string.

    Quotes, backslashes and control characters are escaped; every other character is
    written as itself (UTF-8). Not JSON: JSON escapes characters beyond the BMP as
    surrogate pairs, which TOML rejects.
    """
    out = []
    for ch in v:
        if ch in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            raise ValueError(f"{v!r}: a lone surrogate cannot be written to a .hat file")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    return _s(str(v))


def _key(k) -> str:
    """A TOML key: bare when it can be, else quoted."""
    k = str(k)
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _s(k)


def _arg_table(info) -> dict:
    t = {"name": info.name, "description": "", }
    if info.kind == KIND_ARRAY:
        runtime = any(isinstance(s, str) for s in info.shape)
        t["logical_type"] = "runtime_array" if runtime else "affine_array"
        t["declared_type"] = info.hat_declared_type()
        t["element_type"] = info.dtype.hat_name
        t["usage"] = info.role
        if runtime:
            t["size"] = "*".join(str(s) for s in info.shape)
        else:
            t["shape"] = list(info.shape)
            t["affine_map"] = list(info.strides)
            t["affine_offset"] = 0
    else:
        t["logical_type"] = "element"
        t["declared_type"] = info.hat_declared_type()
        t["element_type"] = info.dtype.hat_name
        t["usage"] = "input"
    # accpy's own keys (ignored by other readers): enough to rebuild the signature exactly
    t["accpy_kind"] = {0: "array", 1: "scalar", 2: "dimension"}[info.kind]
    t["accpy_role"] = info.role
    t["accpy_shape"] = [s if isinstance(s, int) else str(s) for s in info.shape]
    t["accpy_layout"] = info.layout
    t["accpy_strides"] = list(info.strides)
    return t


def _launch_entries(pf, pkg_name: str, library_file: str) -> list:
    """For a function that runs on a device: its runtime, the kernel it launches and the launch's
    parameters [gx, gy, gz, bx, by, bz] (blocks, then threads per block; a string where runtime
    sizes decide), its device entries (`device_entries`: runtime, C symbol and the file that holds
    it: the package's library, or a companion unit), and the kernel's own table (Accera's
    `device_functions`)."""
    grid = device_grid(pf.target)
    if grid is None:
        return []
    fn = pf.lowered(f"{pf.name}__impl")
    blocks, threads = grid.launch_dims({u: as_int(e) for u, e in launch_of(fn).items()})
    params = [x if x is not None else "runtime" for x in blocks + threads]
    kernel = f"{fn.name}__kernel"
    runtime = getattr(pf.target.runtime, "name", str(pf.target.runtime))
    files = [(grid, library_file)] + [(c, f"{pkg_name}{c.dialect.suffix}") for c in companion_grids_of(pf.target)]
    entries = [{"runtime": g.runtime.name, "symbol": device_entry_name(pf.name), "file": f}
               for g, f in files if g.runtime.has_device_entry]
    return [f"runtime = {_s(runtime)}", f"launches = {_s(kernel)}", f"launch_parameters = {_value(params)}",
            f"device_entries = {_value(entries)}",
            "", f"[device_functions.{kernel}]", f"name = {_s(kernel)}", f"dialect = {_s(grid.dialect.name)}",
            f"launch_parameters = {_value(params)}"]


def hat_text(pkg_name: str, functions, description: dict, library_file: str, static_file: str,
             compiler: str, flags: list, openmp: bool, target, library_record: dict = None,
             allocating=()) -> str:
    """The package's .hat text; `library_record` ({size, sha256} of the library) is recorded for acc.load."""
    guard = pkg_name.replace(".", "_")
    out = [f"#ifndef __{guard}__", f"#define __{guard}__", "", "#ifdef TOML", ""]
    desc = {"comment": description.get("comment", ""), "author": description.get("author", ""),
            "version": description.get("version", ""), "license_url": description.get("license", "")}
    out.append("[description]")
    for k, v in desc.items():
        out.append(f"{k} = {_value(v)}")
    aux = description.get("auxiliary") or {}
    if aux:
        out.append("")
        out.append("[description.auxiliary]")
        for k, v in aux.items():
            out.append(f"{_key(k)} = {_value(v)}")
    for pf in functions:
        out.append("")
        out.append(f"[functions.{pf.name}]")
        out.append(f"name = {_s(pf.name)}")
        out.append(f"description = {_s(pf.description or '')}")
        out.append('calling_convention = "cdecl"')
        out.append("arguments = [")
        for info in pf.infos:
            out.append(f"    {_value(_arg_table(info))},")
        out.append("]")
        out.append('return = {name = "", description = "", logical_type = "void", declared_type = "void", '
                   'element_type = "void", usage = "output"}')
        out += _launch_entries(pf, pkg_name, library_file)
        out.append("")
        out.append(f"[functions.{pf.name}.auxiliary.accpy]")
        out.append(f"base_name = {_s(pf.base_name)}")
        out.append(f"parameters = {_value(recorded_parameters(pf.parameters))}")
        dims = [i.name for i in pf.infos if i.kind == KIND_DIM]
        out.append(f"dimensions = {_value(dims)}")
    out.append("")
    out.append("[target.required]")
    out.append(f"os = {_s(platform.system().lower())}")
    out.append("")
    out.append("[target.required.CPU]")
    out.append(f"architecture = {_s(target.toolchain.machine)}")
    out.append(f"extensions = {_value(['+' + e for e in target.required_features()])}")
    if device_grid(target) is not None:
        out.append("")
        out.append("[target.required.GPU]")
        out.append(f"runtime = {_s(getattr(target.runtime, 'name', str(target.runtime)))}")
        out.append(f"model = {_s(target.name)}")
    out.append("")
    out.append("[target.optimized_for]")
    out.append(f"name = {_s(target.name)}")
    out.append(f"family = {_s(target.family)}")
    out.append("")
    out.append("[dependencies]")
    out.append(f"link_target = {_s(library_file)}")
    out.append("deploy_files = []")
    dyn = [{"name": "gomp", "version": "", "target_file": "libgomp.so.1"}] if openmp else []
    out.append(f"dynamic = {_value(dyn)}")
    out.append("")
    out.append("[dependencies.auxiliary]")
    out.append(f"dynamic = {_s(library_file)}")
    out.append(f"static = {_s(static_file)}")
    if library_record:
        out.append(f"accpy_dynamic_size = {int(library_record['size'])}")
        out.append(f"accpy_dynamic_sha256 = {_s(library_record['sha256'])}")
    out.append("")
    out.append("[compiled_with]")
    out.append(f"compiler = {_s(compiler)}")
    out.append(f"flags = {_s(' '.join(flags))}")
    out.append('crt = ""')
    out.append("libraries = []")
    out.append("")
    out.append("[declaration]")
    # The C preprocessor tokenizes even the skipped `#ifdef TOML` groups, and a line with a
    # lone `'''` is an unterminated character constant to it (a warning, an error under
    # -Werror). Each delimiter line therefore sits inside a C comment, opened and closed on
    # lines that TOML reads as comments: `# /*` ... `# */`.
    out.append("# /*")
    out.append("code = '''")
    out.append("# */")
    out.append("#endif // TOML")
    out.append(declarations(pkg_name, functions, allocating))
    out.append("#ifdef TOML")
    out.append("# /*")
    out.append("'''")
    out.append("# */")
    out.append("")
    out.append("#endif // TOML")
    out.append("")
    out.append(f"#endif // __{guard}__")
    return "\n".join(out) + "\n"
