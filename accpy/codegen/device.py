"""Device code: a lowered function as one kernel of a grid target, in the target's dialect
(`Dialect`, accpy/targets/grid.py: OpenCL C, CUDA C, ...), from the same loop IR and the same
scalar semantics as host C (the dialect's prelude inlines native/accpy_scalar.h).

A loop bound to a unit of the grid (`For` of kind BOUND, attrs `unit`, `stride`, `count`,
`units`: see accpy/lower/bind.py) becomes the unit's index, `(id / stride) % count` (a
schedule's dimensions start at 0), guarded by the loop's range `[lo, hi)` (units outside it,
e.g. past a split's last tile, do nothing). Every
other loop runs inside each unit as written. Arrays a kernel allocates live in its private
memory (a fixed size, at most 64 KiB); a temporary the device cannot hold is refused.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Buffer, Call, Load
from ..ir.kinds import BufferRole, HostMemory, LoopKind
from ..ir.stmt import Alloc, For, Function, Store
from ..ir.visitor import buffers_of, nodes_of
from ..targets.grid import ATOMIC, BARRIER, UNIT_ID
from ..paths import native_text
from .c import CEmitter, Names, c_type, called_intrinsics


@dataclass(frozen=True)
class Kernel:
    """A kernel's text: `source` (the whole device source), `name`, and `launch`: unit name ->
    the number of its units (an IR index expression over the function's sizes)."""

    source: str
    name: str
    launch: dict


class DeviceEmitter(CEmitter):
    """CEmitter for device code in `dialect`."""

    dialect = None
    gcc_loop_fence = False  # (no gcc asm in device code)

    def s_For(self, s: For, depth):
        if s.kind != LoopKind.BOUND:
            return super().s_For(s, depth)
        unit, stride, count = s.attr("unit"), s.attr("stride"), s.attr("count")
        ix = f"(int64_t){self.dialect.unit_id(unit)}"
        if stride is not None and not (getattr(stride, "value", None) == 1):
            ix = f"({ix} / {self.expr(stride)})"
        if count is not None and s.attr("wraps", False):
            ix = f"({ix} % {self.expr(count)})"
        v = self.var(s.var)
        self.emit("{", depth)
        # the unit's index is the iteration (a schedule's dimensions start at 0); the loop's own range
        # (which unswitching may have made a hull of pieces) guards it
        self.emit(f"const int64_t {v} = {ix};", depth + 1)
        if s.attr("guard", True):
            low = "" if getattr(s.lo, "value", None) == 0 else f"{v} >= {self.expr(s.lo)} && "
            self.emit(f"if ({low}{v} < {self.expr(s.hi)}) {{", depth + 1)
            self.stmt(s.body, depth + 2)
            self.emit("}", depth + 1)
        else:  # (the guard is inside, around the statements between barriers)
            self.stmt(s.body, depth + 1)
        self.emit("}", depth)

    def e_Call(self, e: Call) -> str:
        if e.fn == BARRIER:
            return self.dialect.barrier
        if e.fn.startswith(UNIT_ID):
            return f"((int64_t){self.dialect.unit_id(e.fn[len(UNIT_ID):])})"
        if e.fn.startswith(ATOMIC):
            target, value = e.args
            template = self.dialect.atomic(e.fn[len(ATOMIC):], target.buffer.dtype.name)
            if template is None:
                raise ValueError(f"{self.dialect.name} has no atomic {e.fn[len(ATOMIC):]} of "
                                 f"{target.buffer.dtype.name} (array {target.buffer.name})")
            return template.format(ptr=self._addr(target.buffer, target.indices), value=self.expr(value))
        return super().e_Call(e)

    def s_Alloc(self, s: Alloc, depth):
        if s.buffer.memory == HostMemory.SHARED:
            # declared at the kernel's top (OpenCL C allows __local arrays only there): emit_kernel
            self.stmt(s.body, depth)
            return
        if not self._on_stack(s.buffer):
            n = self._elements(s.buffer)
            size = f"{n} elements of {s.buffer.dtype.name}" if n is not None else "a size known only at run time"
            raise ValueError(f"array {s.buffer.name} ({size}) cannot be allocated in device code (a kernel's "
                             f"arrays have a fixed size of at most 64 KiB); cache a smaller block")
        super().s_Alloc(s, depth)


def kernel_params(fn: Function, names: Names, dialect) -> str:
    """The kernel's parameter list: arrays as pointers to global memory, sizes and scalars by value."""
    out = []
    for a in fn.args:
        if isinstance(a, Buffer):
            q = dialect.const_global_ptr if a.role in (BufferRole.INPUT, BufferRole.CONST) else dialect.global_ptr
            out.append(f"{q}{c_type(a.dtype)}* {dialect.restrict} {names.get(a, a.name)}")
        else:
            out.append(f"{c_type(a.dtype)} {names.get(a, a.name)}")
    return ", ".join(out) or "void"


def launch_of(fn: Function) -> dict:
    """Unit name -> the number of its units, from the function's bound loops."""
    out = {}
    for f in nodes_of(fn.body, For):
        if f.kind == LoopKind.BOUND:
            out.setdefault(f.attr("unit"), f.attr("units"))
    return out


def emit_kernel(fn: Function, dialect, prelude: str) -> Kernel:
    """`fn` as a kernel named `<fn.name>__kernel` in `dialect`, with `prelude` (the dialect's,
    native files inlined) first."""
    names = Names()
    em = DeviceEmitter(names, const_prefix=fn.name + "_")
    em.dialect = dialect
    em.target = fn.attrs.get("target")
    consts = [b for b in buffers_of(fn.body) if b.role == BufferRole.CONST and b not in fn.args]
    if consts:
        raise ValueError(f"constant array {consts[0].name}: constant data in device code is not supported; pass "
                         f"it as an argument")
    name = f"{fn.name}__kernel"
    em.stmt(fn.body, 1)
    body, em.lines = em.lines, []
    used = {id(x.buffer) for x in nodes_of(fn.body, Load)} | {id(x.buffer) for x in nodes_of(fn.body, Store)}
    for b in [b for b in buffers_of(fn.body) if b.memory == HostMemory.SHARED and id(b) in used]:
        em.emit(f"{dialect.shared_array} {c_type(b.dtype)} {em.buf(b)}[{em._elements(b)}];", 1)
    lines = [f"{dialect.kernel} {name}({kernel_params(fn, names, dialect)}) {{"] + em.lines + body + ["}"]
    source = prelude + "\n" + kernel_headers(fn, dialect) + "\n".join(lines) + "\n"
    return Kernel(source, name, launch_of(fn))


def kernel_headers(fn: Function, dialect) -> str:
    """What the intrinsics `fn` calls need (their #include lines), only those used: the native file
    `dialect` has for a line inlined (a kernel's source stands alone), any other line as it is."""
    lines = dict.fromkeys(i.header for i in called_intrinsics(fn.body) if i.header)
    return "".join((native_text(f) if (f := dialect.header(h)) is not None else h) + "\n" for h in lines)
