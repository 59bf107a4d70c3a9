"""Running functions of a package built for AArch64 on another machine: a small C driver reads each
argument from a file, calls the functions, writes the arrays back; it is linked statically with the
package's archive by the cross compiler and run under qemu (one run for a whole batch of calls)."""
from __future__ import annotations

import subprocess
import tempfile
import tomllib
from pathlib import Path

import numpy as np

from .toolchain import AARCH64_TOOLCHAIN

# the .hat's element types -> (numpy type, C type)
_TYPES = {"float": (np.float32, "float"), "double": (np.float64, "double"), "bool": (np.bool_, "bool"),
          "float16_t": (np.float16, "_Float16"),
          "bfloat16_t": (np.uint16, "uint16_t"),  # (bfloat16 travels as its 16-bit patterns, as in accpy)
          **{f"{k}int{b}_t": (np.dtype(f"{k}int{b}").type, f"{k}int{b}_t") for k in ("", "u") for b in (8, 16, 32, 64)}}


class EmulationError(RuntimeError):
    """A function run under emulation reported an error, or the program could not be built or run."""


def _hat(package) -> Path:
    p = Path(package).resolve()  # (the driver is compiled in a directory of its own)
    if p.is_dir():
        hats = sorted(p.glob("*.hat"))
        if len(hats) != 1:
            raise ValueError(f"package: {p} holds {len(hats)} .hat files; give the path of one")
        return hats[0]
    p = p if p.suffix == ".hat" else p.with_suffix(".hat")
    if not p.exists():
        raise FileNotFoundError(f"package: no package at {p}")
    return p


def _function(meta: dict, name: str, hat: Path):
    fns = meta.get("functions", {})
    if name in fns:
        return name, fns[name]
    found = [(full, t) for full, t in fns.items() if t.get("auxiliary", {}).get("accpy", {}).get("base_name") == name]
    if len(found) != 1:
        raise ValueError(f"function: {hat.name} has {'no' if not found else 'several'} function(s) named {name!r}; "
                         f"it has {sorted(fns)}")
    return found[0]


def _prepare(k: int, args_meta: list, values: list, work: Path):
    """C lines of call k (declarations, the call's arguments, write-backs) and the arrays to read back."""
    if len(values) != len(args_meta):
        raise ValueError(f"call {k}: expected {len(args_meta)} arguments "
                         f"({', '.join(a['name'] for a in args_meta)}), got {len(values)}")
    decls, names, backs, outs = [], [], [], []
    for j, (a, v) in enumerate(zip(args_meta, values)):
        if a["element_type"] not in _TYPES:
            raise ValueError(f"call {k}: argument {a['name']} of type {a['element_type']} is not supported here")
        nptype, ctype = _TYPES[a["element_type"]]
        var = f"a{k}_{j}"
        if a["accpy_kind"] == "array":
            if a["accpy_layout"] not in ("C", "F"):
                raise ValueError(f"call {k}: argument {a['name']} has strides of its own; give C or F order arrays")
            order = a["accpy_layout"]
            arr = np.array(v, dtype=nptype, order=order, copy=True)
            data = arr.tobytes(order=order)
            (work / f"{var}.bin").write_bytes(data)
            decls.append(f'    {ctype}* {var} = ({ctype}*)accpy_drv_read(dir, "{var}.bin", {len(data)});')
            backs.append(f'    accpy_drv_write(dir, "{var}.out", {var}, {len(data)});')
            outs.append((j, var, arr))
        else:
            decls.append(f"    {ctype} {var} = ({ctype}){np.array(v, dtype=nptype).item()!r};"
                         if ctype != "bool" else f"    bool {var} = {int(bool(v))};")
        names.append(var)
    return decls, names, backs, outs


_DRIVER_HEAD = r"""#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "%(header)s"
static void* accpy_drv_read(const char* dir, const char* name, size_t n) {
    char path[4096]; snprintf(path, sizeof path, "%%s/%%s", dir, name);
    FILE* f = fopen(path, "rb"); void* p = malloc(n ? n : 1);
    if (!f || !p || (n && fread(p, 1, n, f) != n)) { fprintf(stderr, "cannot read %%s\n", path); exit(3); }
    fclose(f); return p;
}
static void accpy_drv_write(const char* dir, const char* name, const void* p, size_t n) {
    char path[4096]; snprintf(path, sizeof path, "%%s/%%s", dir, name);
    FILE* f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) { fprintf(stderr, "cannot write %%s\n", path); exit(3); }
    fclose(f);
}
int main(int argc, char** argv) {
    const char* dir = argc > 1 ? argv[1] : ".";
    const char* err;
"""


def run_calls(package, calls, toolchain=AARCH64_TOOLCHAIN, timeout: float = 600.0) -> list:
    """Run calls [(function name, [arguments])] of a built package (its directory or .hat) in one
    program under emulation; returns, per call, its arguments after the call (arrays as numpy
    arrays: the outputs; scalars as given). Raises EmulationError when a call reports an error."""
    hat = _hat(package)
    meta = tomllib.loads(hat.read_text())
    static = hat.parent / meta["dependencies"]["auxiliary"]["static"]
    if not static.exists():
        raise FileNotFoundError(f"package: {static} does not exist; build with Format.HAT_STATIC (the default)")
    why = toolchain.missing() or toolchain.cannot_run()
    if why is not None:
        raise EmulationError(f"cannot run {hat.stem} under emulation: {why}")
    pkg = hat.stem
    openmp = any(d.get("name") == "gomp" for d in meta["dependencies"].get("dynamic", []))
    with tempfile.TemporaryDirectory(prefix="accpy-emu-") as tmp:
        work = Path(tmp)
        body, results = [], []
        for k, (name, values) in enumerate(calls):
            full, table = _function(meta, name, hat)
            decls, names, backs, outs = _prepare(k, table["arguments"], list(values), work)
            body += ["    {", *decls, f"    {full}({', '.join(names)});",
                     f"    if ((err = {pkg}_last_error()) != NULL) {{ fprintf(stderr, \"call {k} ({name}): %s\\n\", err); return 2; }}",
                     *backs, "    }"]
            results.append((list(values), outs))
        src = work / "driver.c"
        src.write_text(_DRIVER_HEAD % {"header": str(hat.with_suffix(".h"))} + "\n".join(body) + "\n    return 0;\n}\n")
        exe = work / "driver"
        cmd = [toolchain.cc, "-O1", "-static", str(src), str(static), "-o", str(exe), "-lm", "-lpthread"]
        if openmp:
            cmd.insert(1, "-fopenmp")
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise EmulationError(f"linking the driver of {pkg} failed:\n{p.stderr}\ncommand: {' '.join(cmd)}")
        flags = meta.get("compiled_with", {}).get("flags", "").split()
        p = subprocess.run(toolchain.run_command(str(exe), flags) + [str(work)], capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise EmulationError(f"{pkg} under emulation: exit status {p.returncode}: {p.stderr.strip()}")
        out = []
        for values, outs in results:
            got = list(values)
            for j, var, arr in outs:
                data = (work / f"{var}.out").read_bytes()
                order = "F" if arr.flags.f_contiguous and not arr.flags.c_contiguous else "C"
                got[j] = np.frombuffer(data, dtype=arr.dtype).reshape(arr.shape, order=order).copy(order=order)
            out.append(got)
        return out


def run_under_emulation(package, function: str, args, **kw) -> list:
    """Call `function` of a built AArch64 package (its directory or .hat) once under emulation with
    `args` (numpy arrays and numbers, in the function's order); returns the arguments after the call."""
    return run_calls(package, [(function, args)], **kw)[0]
