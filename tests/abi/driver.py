"""A C driver for built kernels: exact-size heap buffers, data through files, results back.

`write_driver` emits `driver.c`, whose main() allocates, for every array argument, a
buffer of exactly the bytes the argument spans (so AddressSanitizer sees any access past
either end), fills it from a file written here, calls the function by its full name
through the package header, checks `<package>_last_error()`, and writes the written
arrays back to files that `read_results` turns into numpy arrays again.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def span_bytes(a: np.ndarray) -> bytes:
    """The bytes an array with non-negative strides spans, from its first element to its last."""
    assert a.size > 0 and all(s >= 0 for s in a.strides), "only non-empty arrays with strides >= 0"
    nbytes = a.itemsize + sum((n - 1) * s for n, s in zip(a.shape, a.strides))
    first = np.lib.stride_tricks.as_strided(a, shape=(1,), strides=(a.itemsize,)).view(np.uint8)
    return np.lib.stride_tricks.as_strided(first, shape=(nbytes,), strides=(1,)).tobytes()


def _c_scalar(value, c_type: str) -> str:
    if c_type in ("float", "double", "_Float16"):
        return f"({c_type}){float(value)!r}"
    if c_type == "bool":
        return "1" if value else "0"
    return f"({c_type}){int(value)}LL"


def write_driver(work: Path, pkg_name: str, cases: list) -> Path:
    """`cases`: (full function name, [ArgInfo], {arg name: value}) per call, in order."""
    work = Path(work)
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <stdint.h>", "#include <stdbool.h>",
             f'#include "{pkg_name}.h"', "",
             "static void* load(const char* path, size_t bytes) {",
             "    void* p = malloc(bytes);",
             "    FILE* f = fopen(path, \"rb\");",
             "    if (!p || !f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, \"driver: cannot read %s\\n\", path); exit(3); }",
             "    fclose(f);",
             "    return p;",
             "}",
             "static void save(const char* path, const void* p, size_t bytes) {",
             "    FILE* f = fopen(path, \"wb\");",
             "    if (!f || fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, \"driver: cannot write %s\\n\", path); exit(3); }",
             "    fclose(f);",
             "}", "", "int main(void) {"]
    for n, (full, infos, values) in enumerate(cases):
        lines.append(f"    {{ /* case {n}: {full} */")
        call = []
        saves = []
        for info in infos:
            v = values[info.name]
            ctype = info.dtype.c_name
            var = f"c{n}_{info.name}"
            if info.is_array:
                raw = span_bytes(v)
                path = work / f"{var}.in"
                path.write_bytes(raw)
                lines.append(f"        {ctype}* {var} = ({ctype}*)load(\"{path}\", {len(raw)});")
                call.append(var)
                if info.written:
                    saves.append((var, work / f"{var}.out", len(raw)))
            else:
                lines.append(f"        {ctype} {var} = {_c_scalar(v, ctype)};")
                call.append(var)
        lines.append(f"        {full}({', '.join(call)});")
        lines.append(f"        const char* err = {pkg_name}_last_error();")
        lines.append(f"        if (err) {{ fprintf(stderr, \"driver: {full}: %s\\n\", err); return 2; }}")
        for var, path, size in saves:
            lines.append(f"        save(\"{path}\", {var}, {size});")
        for info in infos:
            if info.is_array:
                lines.append(f"        free(c{n}_{info.name});")
        lines.append("    }")
    lines += ["    return 0;", "}", ""]
    src = work / "driver.c"
    src.write_text("\n".join(lines))
    return src


def read_results(work: Path, cases: list) -> list:
    """The written arrays of each case after the driver ran, with the inputs' shapes and strides."""
    out = []
    for n, (full, infos, values) in enumerate(cases):
        res = {}
        for info in infos:
            if info.is_array and info.written:
                v = values[info.name]
                raw = (Path(work) / f"c{n}_{info.name}.out").read_bytes()
                flat = np.frombuffer(raw, dtype=v.dtype).copy()  # the span is a whole number of elements
                res[info.name] = np.lib.stride_tricks.as_strided(flat, shape=v.shape, strides=v.strides).copy()
        out.append(res)
    return out
