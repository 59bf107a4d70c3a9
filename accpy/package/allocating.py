"""Functions that allocate their OUTPUT arrays (Accera's OUTPUT arrays sized by OUTPUT dimensions).

`Package.add` splits such a function in two ordinary ones, `<base>_sizes` (computes the OUTPUT
dimensions from the inputs) and `<base>_kernel` (the user's plan, with those dimensions as
int64 sizes and the arrays as plain pointers), and adds the function itself in C with Accera's
signature: each allocated array an `T**` (allocated with `aligned_alloc`, 64-byte aligned, given
back with `<package>_free`), each OUTPUT dimension an `int64_t*`. From Python the function takes
the other arguments and returns the arrays (numpy owns them; one array, or a tuple in argument
order).
"""
from __future__ import annotations

import numpy as np

from ..codegen.c import Names, function_params
from ..ir.names import c_string
from ..nest.array import Array, Dimension, OutputDimension, Scalar
from ..nest.nest import Nest
from ..nest.output_arrays import allocated_arrays, defined_dimensions, sizes_nest
from .signature import describe_arguments, function_hash
from .sources import _decl_type, c_type


class AllocatingFunction:
    """One function with allocated OUTPUT arrays: its two parts and its own signature."""

    def __init__(self, args, base_name: str, sizes, kernel, dims, arrays, target_desc: str, parameters: dict):
        self.args = tuple(args)
        self.base_name = base_name
        self.sizes, self.kernel = sizes, kernel  # PackageFunctions
        self.dims, self.arrays = dims, arrays
        self.infos = describe_arguments(_kernel_args(args, dims))  # names and types of the user's args
        h = function_hash(base_name + "|allocating", target_desc, parameters, self.infos)
        self.name = f"{base_name}_{h}"
        self._slots = []  # per user argument: ("array"|"dim"|"input", object)
        for a in self.args:
            if isinstance(a, OutputDimension):
                self._slots.append(("dim", a))
            elif isinstance(a, Array) and any(a is x for x in arrays):
                self._slots.append(("array", a))
            else:
                self._slots.append(("input", a))

    # -- C ------------------------------------------------------------------------------------
    def _params(self) -> str:
        out = []
        for (kind, _), info in zip(self._slots, self.infos):
            if kind == "array":
                out.append(f"{_decl_type(info)}* {info.name}")
            elif kind == "dim":
                out.append(f"int64_t* {info.name}")
            else:
                const = "const " if info.is_array and info.role == "input" else ""
                out.append(f"{const}{_decl_type(info)} {info.name}")
        return ", ".join(out) or "void"

    def declaration(self, pkg_name: str) -> str:
        """Its C declaration (and its base-name alias)."""
        params = self._params()
        call = ", ".join(i.name for i in self.infos)
        return (f"/* {self.base_name}: allocates {', '.join(a.name for a in self.arrays)} (free each with "
                f"{pkg_name}_free) and sets {', '.join(d.name for d in self.dims)}. */\n"
                f"void {self.name}({params});\n"
                f"#ifndef __{self.base_name}_DEFINED__\n#define __{self.base_name}_DEFINED__\n"
                f"static inline void {self.base_name}({params}) {{ {self.name}({call}); }}\n#endif\n")

    def definition(self) -> str:
        """Its C definition: compute the sizes, allocate, run the kernel, hand the arrays back."""
        name_of = {id(a): i.name for a, i in zip(self.args, self.infos)}
        # the two parts may sit in another translation unit: declared as they are defined
        lines = [f"void {pf.name}({function_params(pf.lowered(f'{pf.name}__impl'), Names())});"
                 for pf in (self.sizes, self.kernel)]
        lines.append(f"void {self.name}({self._params()}) {{")
        for d in self.dims:
            lines.append(f"    int64_t accpy_n_{d.name} = 0;")
        for a in self.arrays:
            lines.append(f"    {name_of[id(a)]}[0] = NULL;")
        lines.append("    accpy_error_flag = 0;")
        sizes_args = [f"&accpy_n_{a.name}" if any(a is d for d in self.dims) else name_of[id(a)]
                      for a in self.sizes_args]
        lines.append(f"    {self.sizes.name}({', '.join(sizes_args)});")
        lines.append("    if (accpy_error_flag) return;")
        for d in self.dims:
            if any(d is a for a in self.args):
                lines.append(f"    {name_of[id(d)]}[0] = accpy_n_{d.name};")

        ptrs = []
        for a in self.arrays:
            ct = c_type(a.element_type)
            dims = ", ".join(f"accpy_n_{s.name}" if isinstance(s, OutputDimension) else
                             f"(int64_t)({name_of.get(id(s), getattr(s, 'name', s))})" for s in a.shape)
            p = f"accpy_p_{name_of[id(a)]}"
            ptrs.append(p)
            what = c_string(f"the OUTPUT array {a.name}")
            lines.append(f"    size_t accpy_b_{p} = 0;")
            lines.append(f"    if (!accpy_array_bytes({what}, sizeof({ct}), {len(a.shape)}, (const int64_t[]){{{dims}}}, "
                         f"NULL, &accpy_b_{p})) {{ {' '.join(f'free({q});' for q in ptrs[:-1])} return; }}")
            lines.append(f"    {ct}* {p} = ({ct}*)aligned_alloc(64, (accpy_b_{p} + 63) / 64 * 64 + 64);")
            lines.append(f"    if (!{p}) {{ accpy_set_error(\"out of memory allocating %s (%zu bytes)\", {what}, "
                         f"accpy_b_{p}); {' '.join(f'free({q});' for q in ptrs[:-1])} return; }}")
        kernel_args = []
        for a in self.kernel_args:
            if any(a is d.size for d in self.dims):
                kernel_args.append(f"accpy_n_{a.name}")
            elif any(a is x for x in self.arrays):
                kernel_args.append(f"accpy_p_{name_of[id(a)]}")
            else:
                kernel_args.append(name_of[id(a)])
        lines.append(f"    {self.kernel.name}({', '.join(kernel_args)});")
        lines.append(f"    if (accpy_error_flag) {{ {' '.join(f'free({q});' for q in ptrs)} return; }}")
        for a, p in zip(self.arrays, ptrs):
            lines.append(f"    {name_of[id(a)]}[0] = {p};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    # -- Python ---------------------------------------------------------------------------------
    def python_callable(self, lib):
        """`f(inputs...)` -> the allocated array (or a tuple of them), through the two parts."""
        sizes_fn, kernel_fn = lib[self.sizes.name], lib[self.kernel.name]
        inputs = [a for kind, a in self._slots if kind == "input"]
        names = [i.name for (kind, _), i in zip(self._slots, self.infos) if kind == "input"]
        display = self.base_name

        def call(*given):
            if len(given) != len(inputs):
                raise TypeError(f"{display}() takes {len(inputs)} arguments ({', '.join(names)}): the OUTPUT "
                                f"arrays it allocates are returned, not passed; got {len(given)}")
            value = {id(a): v for a, v in zip(inputs, given)}
            cells = {id(d): np.zeros(1, np.int64) for d in self.dims}
            sizes_fn(*(cells[id(a)] if id(a) in cells else value[id(a)] for a in self.sizes_args))
            n = {id(d.size): int(cells[id(d)][0]) for d in self.dims}
            out = {}
            for a in self.arrays:
                shape = tuple(n[id(s.size)] if isinstance(s, OutputDimension) else
                              int(value[id(s)]) if id(s) in value else int(s) for s in a.shape)
                if any(x < 0 for x in shape):
                    raise ValueError(f"{display}: the OUTPUT array {a.name} would have the shape {shape}")
                out[id(a)] = np.zeros(shape, a.element_type.dtype)
            kernel_fn(*(n[id(a)] if id(a) in n else out[id(a)] if id(a) in out else value[id(a)]
                        for a in self.kernel_args))
            arrays = [out[id(a)] for a in self.arrays]
            return arrays[0] if len(arrays) == 1 else tuple(arrays)

        call.__name__ = self.base_name
        call.__doc__ = f"{self.base_name}({', '.join(names)}) -> the allocated OUTPUT array(s)"
        return call


def _kernel_args(args, dims) -> tuple:
    """The user's arguments with each computed OUTPUT dimension as the size it stands for."""
    out = []
    for a in args:
        d = next((d for d in dims if d is a), None)
        out.append(d.size if d is not None else a)
    return tuple(out)


def split_allocating(package_function_cls, plan, args, base_name: str, parameters: dict, auxiliary):
    """(sizes PackageFunction, kernel PackageFunction, AllocatingFunction) for a function whose
    arguments hold OUTPUT dimensions set at definition, or None when they hold none."""
    dims = defined_dimensions(args)
    if not dims:
        return None
    arrays = allocated_arrays(args)
    for a in arrays:
        for s in a.shape:
            if isinstance(s, OutputDimension) and not any(s is x for x in args):
                raise ValueError(f"args: {a.name} is sized by the OUTPUT dimension {s.name}, which is not among "
                                 f"the arguments; pass it too (the function sets it)")
    base = base_name or "function"
    inputs = [a for a in args if isinstance(a, (Dimension, Scalar))]
    sizes_args = tuple(inputs) + tuple(dims)

    sizes = package_function_cls(sizes_nest(dims, Nest).create_schedule().create_plan(plan.target), sizes_args,
                                 f"{base}_sizes", parameters)
    kernel_args = _kernel_args(args, dims)
    kernel = package_function_cls(plan, kernel_args, f"{base}_kernel", parameters, auxiliary=auxiliary)
    fn = AllocatingFunction(args, base, sizes, kernel, dims, arrays, plan.target.describe(),
                            {k: str(v) for k, v in sizes.parameters.items()})
    fn.sizes_args, fn.kernel_args = sizes_args, kernel_args
    return sizes, kernel, fn


def runtime_free(pkg_name: str) -> str:
    """`<package>_free`: gives back an array a function of the package allocated."""
    return f"void {pkg_name}_free(void* p) {{ free(p); }}\n"


