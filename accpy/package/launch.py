"""The host side of a function whose target runs it on a grid (a device): the kernel's source,
kept in the package as a string, and `<fn>__impl`, a host launcher with the kernel's parameters
that copies each array to the device, runs the kernel over the grid the bound loops ask for, and
copies the arrays back (written arrays only), through the target's host runtime (`DeviceRuntime`,
accpy/targets/grid.py). Every runtime failure sets the package's error and returns, freeing what
it allocated; a grid with no units along an axis (a size 0) runs nothing."""
from __future__ import annotations

from ..codegen.c import CEmitter, Names, c_type, function_params
from ..codegen.device import emit_kernel
from ..ir.expr import Buffer
from ..ir.kinds import BufferRole
from ..ir.names import c_string
from ..ir.stmt import Function
from ..paths import native_text


def device_prelude(dialect) -> str:
    """The dialect's prelude with the native files it includes inlined."""
    out = []
    for line in dialect.prelude.splitlines(keepends=True):
        s = line.strip()
        out.append(native_text(s[len('#include "'):-1]) if s.startswith('#include "') else line)
    return "".join(out)


def _elements(em: CEmitter, b: Buffer) -> str:
    """C: the number of elements the array `b` spans (0 when a dimension is 0)."""
    if not b.shape:
        return "1"
    dims = [em.expr(d) for d in b.shape]
    span = " + ".join(f"((int64_t)({d}) - 1) * (int64_t)({em.expr(s)})" for d, s in zip(dims, b.strides))
    nonempty = " && ".join(f"(int64_t)({d}) > 0" for d in dims)
    return f"(({nonempty}) ? (size_t)(1 + {span}) : (size_t)0)"


def launcher_source(fn: Function, grid, linkage: str) -> str:
    """The kernel source constant and the host launcher `fn.name` (with `linkage`) of `fn`."""
    dialect, rt = grid.dialect, grid.runtime
    kernel = emit_kernel(fn, dialect, device_prelude(dialect))
    names = Names()
    em = CEmitter(names)
    params = function_params(fn, names)
    src = f"{fn.name}__device_source"
    out = [f"static const char {src}[] = {c_string(kernel.source)};", "",
           f"{linkage}void {fn.name}({params}) {{"]
    body = []
    bufs = [a for a in fn.args if isinstance(a, Buffer)]
    for k, b in enumerate(bufs):
        body.append(f"void* accpy_d{k} = NULL;")
        body.append(f"size_t accpy_n{k} = {_elements(em, b)} * sizeof({c_type(b.dtype)});")
    glob, local = grid.launch_sizes({u: em.expr(e) for u, e in kernel.launch.items()})
    body.append(f"size_t accpy_global[3] = {{{', '.join(f'(size_t)({g})' for g in glob)}}};")
    body.append(f"size_t accpy_local[3] = {{{', '.join(f'(size_t)({x})' for x in local)}}};")
    body.append("if (accpy_global[0] == 0 || accpy_global[1] == 0 || accpy_global[2] == 0) return;")
    body.append(f"{rt.handle_type}* accpy_k = {rt.kernel_get}({src}, {c_string(kernel.name)}, \"\");")
    body.append("if (!accpy_k) return;")
    for k, b in enumerate(bufs):
        # (an array of no elements still gets a buffer of one byte: a kernel argument must be one)
        body.append(f"accpy_d{k} = {rt.alloc}(accpy_n{k} ? accpy_n{k} : 1);")
        body.append(f"if (!accpy_d{k}) goto accpy_done;")
        body.append(f"if (accpy_n{k} && {rt.write}(accpy_d{k}, {names.get(b, b.name)}, accpy_n{k})) goto accpy_done;")
    k_buf = {id(b): k for k, b in enumerate(bufs)}
    for pos, a in enumerate(fn.args):
        if isinstance(a, Buffer):
            value, size = f"&accpy_d{k_buf[id(a)]}", "sizeof(void*)"
        else:
            value, size = f"&{names.get(a, a.name)}", f"sizeof({c_type(a.dtype)})"
        body.append(f"if ({rt.set_arg}(accpy_k, {pos}, {size}, {value})) goto accpy_done;")
    body.append(f"if ({rt.launch}(accpy_k, 3, accpy_global, accpy_local)) goto accpy_done;")
    for k, b in enumerate(bufs):
        if b.role not in (BufferRole.INPUT, BufferRole.CONST):
            body.append(f"if (accpy_n{k} && {rt.read}(accpy_d{k}, {names.get(b, b.name)}, accpy_n{k})) "
                        f"goto accpy_done;")
    body.append("accpy_done:")
    body += [f"if (accpy_d{k}) {rt.free}(accpy_d{k});" for k in range(len(bufs))]
    body.append("return;")
    out += ["    " + line if not line.endswith(":") else line for line in body]
    out.append("}")
    return "\n".join(out) + "\n"
