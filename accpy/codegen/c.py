"""Loop IR -> C source text.

Scalar semantics come from `native/accpy_runtime.h`; arithmetic on types narrower than
`int` (and float16) is cast back after every operation so results match numpy's.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..ir.kinds import BufferRole, HostMemory, LoopKind
from ..ir.affine import element_offset, to_affine
from ..ir.names import argument_name_problem, ascii_identifier, c_comment, c_string
from ..ir.expr import BinOp, Buffer, Call, Cast, Const, Load, Select, UnOp, Var, as_int, idx_op
from ..ir.stmt import Alloc, Block, Comment, Evaluate, For, Function, If, Prefetch, Store
from ..ir.types import ScalarType
from ..ir.vector import VAssign, VDecl, VStore
from ..ir.visitor import Visitor, buffers_of, free_vars, nodes_of
from ..targets.library import intrinsic, memory
from .vector import VectorEmitter

_SFX = {ScalarType.int8: "i8", ScalarType.int16: "i16", ScalarType.int32: "i32", ScalarType.int64: "i64",
        ScalarType.uint8: "u8", ScalarType.uint16: "u16", ScalarType.uint32: "u32", ScalarType.uint64: "u64",
        ScalarType.index: "i64", ScalarType.float32: "f32", ScalarType.float64: "f64",
        ScalarType.bool: "u8"}

_MATH_F32 = {"sqrt": "sqrtf", "exp": "expf", "log": "logf", "log2": "log2f", "log10": "log10f",
             "tanh": "tanhf", "sin": "sinf", "cos": "cosf", "tan": "tanf", "sinh": "sinhf",
             "cosh": "coshf", "floor": "floorf", "ceil": "ceilf", "round": "rintf", "abs": "fabsf",
             "pow": "powf", "fast_exp": "expf", "fast_exp_mlas": "expf", "remainder": "remainderf"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}


def _intrinsic(name: str):
    return intrinsic(name) if "." in name else None


def _intrinsic_memory(name: str):
    return memory(name) if name not in ("global", "local", "heap") else None


def called_intrinsics(stmt) -> list:
    """The target intrinsics `stmt` calls (Intrinsic objects, in first-use order)."""
    out: dict = {}
    for n in nodes_of(stmt, Call):
        intr = _intrinsic(n.fn)
        if intr is not None:
            out.setdefault(intr, None)
    return list(out)


def intrinsic_headers(stmt) -> list:
    """The #include lines the intrinsics called in `stmt` need (in first-use order)."""
    return list(dict.fromkeys(i.header for i in called_intrinsics(stmt) if i.header))


def has_vector_code(stmt) -> bool:
    """Whether `stmt` holds vector statements (whose C needs the vector ISA's header)."""
    return bool(nodes_of(stmt, (VStore, VAssign, VDecl)))


def c_type(t: ScalarType) -> str:
    """The C type that stores values of `t` (bfloat16: its 16-bit pattern, uint16_t; its values
    are computed with as float, each operation rounded: see accpy_runtime.h)."""
    return t.c_name


def bf16_round(v: float) -> float:
    """`v` (through float32) rounded to bfloat16 as accpy_float_to_bf16 does, as a float."""
    u = int(np.float32(v).view(np.uint32))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        bits = (u >> 16) | 0x40
    else:
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    return float(np.uint32(bits << 16).view(np.float32))


def _bf16(t: ScalarType, s: str) -> str:
    """A float-valued C expression of type `t` rounded to bfloat16 when `t` is bfloat16."""
    return f"accpy_bf16_round({s})" if t is ScalarType.bfloat16 else s


def _narrow(t: ScalarType) -> bool:
    """Types whose C arithmetic is done in a wider type and must be cast back."""
    return (t.is_int and t.bits < 32) or t is ScalarType.float16 or t is ScalarType.bool


def float_literal(v: float, t: ScalarType) -> str:
    if math.isnan(v):
        s = "NAN"
    elif math.isinf(v):
        s = "INFINITY" if v > 0 else "(-INFINITY)"
    else:
        s = repr(float(v))
        if "e" not in s and "." not in s:
            s += ".0"
    if t is ScalarType.float32 and s[0].isdigit() or t is ScalarType.float32 and s.startswith("-"):
        return s + "f" if "N" not in s else f"((float){s})"
    if t is ScalarType.float16:
        return f"((_Float16){s})"
    return s


class Names:
    """Unique C identifiers for IR variables and buffers.

    A name that C or the runtime already gives a meaning (a keyword, a math function, a
    type, an accpy_ helper) gets a suffix: locals (temporaries, caches, loop indices) may
    be named anything by the user. Function parameters never need one (their names were
    checked when the function was added to a package), so they keep the user's name.
    """

    def __init__(self):
        self.taken: set = set()
        self.by_obj: dict = {}

    def get(self, obj, base: str) -> str:
        key = id(obj) if isinstance(obj, Buffer) else obj
        if key in self.by_obj:
            return self.by_obj[key]
        name = ascii_identifier(base)  # (ASCII only: str.isalnum accepts 'ï', which no suffix makes a C name)
        if argument_name_problem(name):
            name = "u_" + name  # (a prefix: a reserved prefix such as accpy_ stays reserved with any suffix)
        cand, n = name, 1
        while cand in self.taken or argument_name_problem(cand):
            cand = f"{name}_{n}"
            n += 1
        self.taken.add(cand)
        self.by_obj[key] = cand
        return cand


class CEmitter(VectorEmitter):
    gcc_loop_fence = True  # the empty asm that keeps gcc 12's vectorizer off some loops (below)
    def __init__(self, names: Optional[Names] = None, const_prefix: str = ""):
        self.names = names or Names()
        self.const_prefix = const_prefix
        self.lines: list = []
        self._declared: set = set()  # buffers declared on the stack so far
        self.ranges: dict = {}  # {loop Var: (first, last)} of the enclosing loops with constant bounds

    # -- names ------------------------------------------------------------------------------
    def var(self, v: Var) -> str:
        return self.names.get(v, v.name)

    def buf(self, b: Buffer) -> str:
        base = (self.const_prefix + b.name) if b.role == BufferRole.CONST else b.name
        return self.names.get(b, base)

    # -- expressions --------------------------------------------------------------------------
    def offset(self, b: Buffer, indices) -> str:
        """Linear element offset of `b[indices]`."""
        if not indices:
            return "0"
        total = element_offset(b, indices, self.ranges)  # (the loops' ranges fold the groups' divisions)
        a = to_affine(total)
        return self.affine(a) if a is not None else self.expr(total)

    def affine(self, a) -> str:
        """An affine index as a flat sum: `384*i + 16*j + jj - 3`."""
        parts = []
        for v, c in a.terms:
            t = self.var(v) if abs(c) == 1 else f"{abs(c)}*{self.var(v)}"
            parts.append(("- " if c < 0 else "+ ") + t)
        if a.const or not parts:
            parts.append(("- " if a.const < 0 else "+ ") + str(abs(a.const)))
        s = " ".join(parts)
        return s[2:] if s.startswith("+ ") else "-" + s[2:]

    def expr(self, e) -> str:
        m = getattr(self, "e_" + type(e).__name__)
        return m(e)

    def e_Const(self, e: Const) -> str:
        t = e.dtype
        if t is ScalarType.bfloat16:
            return float_literal(bf16_round(e.value), ScalarType.float32)
        if t.is_float:
            return float_literal(e.value, t)
        if t is ScalarType.bool:
            return "true" if e.value else "false"
        v = int(e.value)
        if t is ScalarType.index or t is ScalarType.int64:
            if v == -(1 << 63):
                return "INT64_MIN"
            return f"{v}" if -(1 << 31) <= v < (1 << 31) else f"INT64_C({v})"
        if t is ScalarType.uint64:
            return f"UINT64_C({v})"
        if t is ScalarType.uint32:
            return f"{v}u"
        if t is ScalarType.int32:
            return f"{v}" if v != -(1 << 31) else "INT32_MIN"
        return f"(({c_type(t)}){v})"

    def e_Var(self, v: Var) -> str:
        return self.var(v) if v.dtype is not ScalarType.bfloat16 else f"accpy_bf16_to_float({self.var(v)})"

    def e_Load(self, e: Load) -> str:
        s = f"{self.buf(e.buffer)}[{self.offset(e.buffer, e.indices)}]"
        return s if e.buffer.dtype is not ScalarType.bfloat16 else f"accpy_bf16_to_float({s})"

    def e_BinOp(self, e: BinOp) -> str:
        t = e.dtype
        a, b = self.expr(e.a), self.expr(e.b)
        op = e.op
        if op in _CMP:
            return f"({a} {_CMP[op]} {b})"
        if op == "land":
            return f"({a} && {b})"
        if op == "lor":
            return f"({a} || {b})"
        if t is ScalarType.index and op in ("floordiv", "mod") and not (isinstance(e.b, Const) and e.b.value != 0):
            # a divisor that may be 0 (a value in the logic, not a loop bound): runtime semantics
            return f"accpy_{op}_i64({a}, {b})"
        if t is ScalarType.index:
            aff = to_affine(e)
            if aff is not None:
                return f"({self.affine(aff)})"
            if op in ("add", "sub", "mul"):
                return f"({a} {_ARITH[op]} {b})"
            if op == "floordiv":
                return f"accpy_floordiv_index({a}, {b})"
            if op in ("min", "max"):
                return f"accpy_{op}_index({a}, {b})"
            if op == "mod":
                return f"({a} - {b} * accpy_floordiv_index({a}, {b}))"
        sfx = _SFX.get(t)
        if t.is_float:
            fsfx = "f32" if t is not ScalarType.float64 else "f64"
            if op in ("add", "sub", "mul", "div"):
                s = f"({a} {'/' if op == 'div' else _ARITH[op]} {b})"
            elif op == "pow":
                s = f"{'pow' if t is ScalarType.float64 else 'powf'}({a}, {b})"
            elif op in ("min", "max", "mod", "floordiv"):
                s = f"accpy_{op}_{fsfx}({a}, {b})"
            else:
                raise NotImplementedError(f"float op {op}")
            return f"(({c_type(t)}){s})" if _narrow(t) else _bf16(t, s)
        # integers (and bool)
        if op in _ARITH:
            s = f"({a} {_ARITH[op]} {b})"
        elif op in ("div", "floordiv", "mod", "shl", "shr", "min", "max", "pow"):
            s = f"accpy_{op}_{sfx}({a}, {b})"
        else:
            raise NotImplementedError(f"int op {op}")
        return f"(({c_type(t)}){s})" if _narrow(t) else s

    def e_UnOp(self, e: UnOp) -> str:
        a = self.expr(e.a)
        if e.op == "not":
            return f"(!{a})"
        s = f"(-{a})" if e.op == "neg" else f"(~{a})"
        return f"(({c_type(e.dtype)}){s})" if _narrow(e.dtype) or not e.dtype.is_signed else s

    def e_Select(self, e: Select) -> str:
        return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"

    def e_Cast(self, e: Cast) -> str:
        src, dst = e.value.dtype, e.dtype
        v = self.expr(e.value)
        if dst is ScalarType.bool:
            return f"({v} != 0)"
        if src.is_float and dst.is_int:
            return f"accpy_from_f64_{_SFX[dst] if dst is not ScalarType.index else 'i64'}((double)({v}))"
        if dst is ScalarType.bfloat16:
            return f"accpy_bf16_round((float)({v}))"  # (from float64: through float32)
        if src is ScalarType.bfloat16 and dst is ScalarType.float32:
            return v  # already the float it stands for
        return f"(({c_type(dst)})({v}))"

    def e_Call(self, e: Call) -> str:
        intr = _intrinsic(e.fn)
        if intr is not None:
            return self._intrinsic_call(intr, e.args)
        t = e.dtype
        args = [self.expr(a) for a in e.args]
        if e.fn == "abs" and t.is_int:
            return f"accpy_abs_{_SFX[t]}({args[0]})"
        if t.is_float:
            if t is ScalarType.float64:
                fn = _MATH_F32[e.fn][:-1] if e.fn != "abs" else "fabs"
                if e.fn == "round":
                    fn = "rint"
                return f"{fn}({', '.join(args)})"
            fn = _MATH_F32[e.fn]
            if t is ScalarType.bfloat16:
                return f"accpy_bf16_round({fn}({', '.join(args)}))"
            if t is ScalarType.float16:
                return f"((_Float16){fn}({', '.join('(float)' + a for a in args)}))"
            return f"{fn}({', '.join(args)})"
        raise NotImplementedError(f"call {e.fn} on {t.name}")

    def _intrinsic_call(self, intr, args) -> str:
        """A target intrinsic's C template filled with its arguments (pointers as addresses)."""
        texts = {}
        for name, a in zip(intr.params, args):
            if name in intr.pointer_params:
                if isinstance(a, Load):
                    texts[name] = self._addr(a.buffer, a.indices)
                elif isinstance(a, Const) and a.value == 0:
                    texts[name] = "NULL"
                else:
                    raise ValueError(f"{intr.name}: argument {name} must be an array element or 0, got {a!r}")
            else:
                texts[name] = self.expr(a)
        return intr.c_call(texts)

    def emit(self, line: str, depth: int):
        self.lines.append("    " * depth + line)

    def stmt(self, s, depth: int):
        m = getattr(self, "s_" + type(s).__name__)
        m(s, depth)

    def s_Block(self, s: Block, depth):
        for x in s.stmts:
            self.stmt(x, depth)

    def s_Comment(self, s: Comment, depth):
        self.emit(c_comment(s.text), depth)

    def s_For(self, s: For, depth):
        if s.kind == LoopKind.PARALLEL:
            hoisted, s = _hoist_thread_buffers(s, self._on_stack)
            if hoisted:
                self._parallel_region(s, hoisted, depth)
                return
        v = self.var(s.var)
        lo, hi = self.expr(s.lo), self.expr(s.hi)
        if s.kind == LoopKind.PARALLEL:
            clauses = f"schedule({s.attr('policy', 'static')}) num_threads(accpy_threads({s.attr('threads', 1)}))"
            if s.attr("collapse", 1) > 1:
                clauses += f" collapse({s.attr('collapse')})"
            self.emit(f"#pragma omp parallel for {clauses}", 0)
        elif s.kind == LoopKind.UNROLLED:
            self.emit("#pragma GCC unroll 64", 0)
        elif s.kind == LoopKind.SIMD:
            self.emit("#pragma omp simd", 0)
        self.emit(f"for (int64_t {v} = {lo}; {v} < {hi}; ++{v}) {{", depth)
        if self.gcc_loop_fence and s.kind in (LoopKind.SERIAL, LoopKind.UNROLLED) and carries_array_dependence(s):
            # gcc 12's loop vectorizer miscompiles some loops whose iterations write overlapping
            # elements (e.g. C[2i] += ..; C[2i-1] += ..): an empty asm with a memory clobber keeps
            # it off this loop only (gcc 12 has no per-loop "novector" pragma).
            self.emit('__asm__ __volatile__("" ::: "memory");', depth + 1)
        lo, hi = as_int(s.lo), as_int(s.hi)
        self.ranges.update({s.var: (lo, hi - 1)} if None not in (lo, hi) and lo < hi else {})
        self.stmt(s.body, depth + 1)
        self.ranges.pop(s.var, None)
        self.emit("}", depth)

    def s_If(self, s: If, depth):
        self.emit(f"if ({self.expr(s.cond)}) {{", depth)
        self.stmt(s.then, depth + 1)
        if s.orelse is not None:
            self.emit("} else {", depth)
            self.stmt(s.orelse, depth + 1)
        self.emit("}", depth)

    def s_Store(self, s: Store, depth):
        t = s.buffer.dtype
        target = f"{self.buf(s.buffer)}[{self.offset(s.buffer, s.indices)}]"
        if t is ScalarType.bfloat16:
            v = s.value
            if s.reduce is None and isinstance(v, Load) and v.buffer.dtype is ScalarType.bfloat16:
                # a copy (e.g. into a cache): the bits as they are (NaN payloads included)
                self.emit(f"{target} = {self.buf(v.buffer)}[{self.offset(v.buffer, v.indices)}];", depth)
                return
            value = self.expr(v if s.reduce is None else BinOp(s.reduce, Load(s.buffer, s.indices), v, t))
            self.emit(f"{target} = accpy_float_to_bf16({value});", depth)
            return
        if s.reduce is None:
            self.emit(f"{target} = {self.expr(s.value)};", depth)
            return
        current = Load(s.buffer, s.indices)
        combined = self.expr(BinOp(s.reduce, current, s.value, t))
        if not _narrow(t) and s.reduce in ("add", "sub", "mul", "div") and t.is_float:
            op = {"add": "+=", "sub": "-=", "mul": "*=", "div": "/="}[s.reduce]
            self.emit(f"{target} {op} {self.expr(s.value)};", depth)
        else:
            self.emit(f"{target} = {combined};", depth)

    @staticmethod
    def _elements(b: Buffer):
        total = Const(1)
        for d in b.shape:
            total = idx_op("mul", total, d)
        a = to_affine(total)
        return a.const if a is not None and a.is_const else None

    def _on_stack(self, b: Buffer) -> bool:
        """Is `b` a fixed-size local array (at most 64 KiB), rather than allocated on the heap?"""
        n = self._elements(b)
        return n is not None and n * b.dtype.bits // 8 <= 64 * 1024 and b.memory != HostMemory.HEAP

    def _heap_alloc(self, b: Buffer, zero: bool, depth) -> str:
        """Emit the heap allocation of `b` (NULL, with the error set, on failure); returns its C name."""
        # runtime-sized (or large): every size is checked at run time by the runtime
        # (negative dimensions, size_t overflow), the array named in the error
        n = self._elements(b)
        if n is not None and n * max(b.dtype.bits // 8, 1) >= 1 << 62:
            raise ValueError(f"array {b.name}: {n} elements of {b.dtype.name} cannot be allocated "
                             f"(the size in bytes does not fit in memory)")
        name, ct = self.buf(b), c_type(b.dtype)
        dims = ", ".join(f"(int64_t)({self.expr(d)})" for d in b.shape) or "1"
        what = c_string(f"the temporary {b.name}")
        self.emit(f"{ct}* {name} = ({ct}*)accpy_alloc_array({what}, sizeof({ct}), {1 if zero else 0}, "
                  f"{max(len(b.shape), 1)}, (const int64_t[]){{{dims}}});", depth)
        return name

    def _parallel_region(self, s: For, hoisted: list, depth):
        """A parallel loop whose per-thread heap buffers are allocated once per thread:
        `omp parallel` { allocate; `omp for` loop; free }. Every thread meets the `omp for`
        (a thread whose allocation failed skips its iterations' bodies; the error is set)."""
        self.emit(f"#pragma omp parallel num_threads(accpy_threads({s.attr('threads', 1)}))", 0)
        self.emit("{", depth)
        names = [self._heap_alloc(a.buffer, a.zero, depth + 1) for a in hoisted]
        clauses = f"schedule({s.attr('policy', 'static')})"
        if s.attr("collapse", 1) > 1:
            clauses += f" collapse({s.attr('collapse')})"
        self.emit(f"#pragma omp for {clauses}", 0)

        def loops(f: For, d):
            self.emit(f"for (int64_t {self.var(f.var)} = {self.expr(f.lo)}; {self.var(f.var)} < "
                      f"{self.expr(f.hi)}; ++{self.var(f.var)}) {{", d)
            if isinstance(f.body, For) and f.body.kind == LoopKind.PARALLEL_INNER:
                loops(f.body, d + 1)
            else:
                self.emit(f"if ({' && '.join(names)}) {{", d + 1)
                self.stmt(f.body, d + 2)
                self.emit("}", d + 1)
            self.emit("}", d)

        loops(s, depth + 1)
        for name in names:
            self.emit(f"accpy_free({name});", depth + 1)
        self.emit("}", depth)

    def s_Alloc(self, s: Alloc, depth):
        b = s.buffer
        if _intrinsic_memory(b.memory) is not None:
            # a target memory (e.g. Gemmini's scratchpad): addressed by the intrinsics, never allocated here
            self.stmt(s.body, depth)
            return
        if self._on_stack(b):
            name, ct = self.buf(b), c_type(b.dtype)
            again = b in self._declared  # (a copy made by unrolling: a scope of its own)
            self._declared.add(b)
            if again:
                self.emit("{", depth)
                depth += 1
            self.emit(f"{ct} {name}[{self._elements(b)}] __attribute__((aligned(64)));", depth)
            if s.zero:
                self.emit(f"memset({name}, 0, sizeof({name}));", depth)
            self.stmt(s.body, depth)
            if again:
                self.emit("}", depth - 1)
        else:
            name = self._heap_alloc(b, s.zero, depth)
            self.emit(f"if ({name}) {{", depth)
            self.stmt(s.body, depth + 1)
            self.emit(f"accpy_free({name});", depth + 1)
            self.emit("}", depth)

    def s_Evaluate(self, s: Evaluate, depth):
        self.emit(self.expr(s.value) + ";", depth)

    def s_Prefetch(self, s: Prefetch, depth):
        # integer arithmetic: the address may lie past the buffer (a prefetch never faults)
        off = self.affine(a) if (a := to_affine(s.offset)) is not None else self.expr(s.offset)
        self.emit(f"__builtin_prefetch((const void*)((uintptr_t){self.buf(s.buffer)} + "
                  f"(uintptr_t)({s.buffer.dtype.bits // 8}*({off}))), {int(s.write)}, {s.locality});", depth)


def _hoist_thread_buffers(f: For, on_stack) -> tuple:
    """(heap Allocs at the top of a parallel loop's body (under its collapsed loops), the loop
    without them). Such a buffer is private to each iteration; allocated once per thread
    instead, it is reused by the thread's iterations (it is filled before it is read in each
    one: never zero-initialised ones, whose zeros each iteration needs)."""
    import dataclasses

    hoisted = []

    def strip(s):
        if isinstance(s, For) and s.kind == LoopKind.PARALLEL_INNER:
            body = strip(s.body)
            return s if body is s.body else dataclasses.replace(s, body=body)
        if isinstance(s, Alloc):
            body = strip(s.body)
            if not s.zero and not on_stack(s.buffer) and _intrinsic_memory(s.buffer.memory) is None:
                hoisted.append(s)
                return body
            return s if body is s.body else dataclasses.replace(s, body=body)
        return s

    body = strip(f.body)
    return hoisted, (f if body is f.body else dataclasses.replace(f, body=body))


# -- whole functions ----------------------------------------------------------------------------

def param_decl(arg, names: Names, restrict: bool = True) -> str:
    if isinstance(arg, Buffer):
        q = " ACCPY_RESTRICT" if restrict else ""
        # (a CONST array among the arguments is read from the caller's array: an input)
        const = "const " if arg.role in (BufferRole.INPUT, BufferRole.CONST) and restrict else ""
        return f"{const}{c_type(arg.dtype)}*{q} {names.get(arg, arg.name)}"
    return f"{c_type(arg.dtype)} {names.get(arg, arg.name)}"


def function_params(fn: Function, names: Names, restrict: bool = True) -> str:
    return ", ".join(param_decl(a, names, restrict) for a in fn.args) or "void"


def const_data(b: Buffer, cname: str) -> str:
    # `data` is indexed logically (numpy order); the C array holds it at the buffer's strides
    strides = [int(to_affine(st).const) for st in b.strides]
    flat = np.zeros(1 + sum((n - 1) * st for n, st in zip(b.data.shape, strides)), b.data.dtype)
    np.lib.stride_tricks.as_strided(flat, b.data.shape, [st * flat.itemsize for st in strides])[...] = b.data
    if b.dtype is ScalarType.bfloat16:
        vals = ", ".join(str(int(x)) for x in flat.view(np.uint16))  # the 16-bit patterns
    elif b.dtype.is_float:
        vals = ", ".join(float_literal(float(x), b.dtype) for x in flat)
    elif b.dtype is ScalarType.bool:
        vals = ", ".join("1" if x else "0" for x in flat)
    else:
        vals = ", ".join(str(int(x)) for x in flat)
    return f"static const {c_type(b.dtype)} {cname}[{flat.size}] __attribute__((aligned(64))) = {{{vals}}};"


def emit_function(fn: Function, linkage: str = "", emitter=None) -> str:
    """The C definition of `fn` (preceded by its constant data); `emitter`: a CEmitter subclass."""
    names = Names()
    em = (emitter or CEmitter)(names, const_prefix=fn.name + "_")
    em.target = fn.attrs.get("target")  # the vector shapes of its lanes (16 x int16: 256 bits, or widened)
    params = function_params(fn, names)
    body_consts = [b for b in buffers_of(fn.body) if b.role == BufferRole.CONST and b not in fn.args]
    pre = []
    for b in body_consts:
        if b.data is None:
            raise ValueError(f"constant array {b.name} has no data")
        pre.append(const_data(b, em.buf(b)))
    em.emit(f"{linkage}void {fn.name}({params}) {{", 0)
    em.stmt(fn.body, 1)
    em.emit("}", 0)
    return "\n".join(pre + em.lines) + "\n"


def carries_array_dependence(f: For) -> bool:
    """May iterations of `f` touch the same array element (one of them writing)?

    True when an array written in the body is accessed at two different subscripts that
    move with `f`, or when a written subscript combines `f`'s variable with the variable
    of a loop inside it in one dimension (e.g. C[2*i - j + ii] in the loop over j).
    """
    accesses: dict = {}
    inner_vars = set()

    class V(Visitor):
        def visit_For(self, n):
            inner_vars.add(n.var)
            self.generic_visit(n)

        def visit_Load(self, n):
            accesses.setdefault(n.buffer, []).append((n.indices, False))
            self.generic_visit(n)

        def visit_Store(self, n):
            accesses.setdefault(n.buffer, []).append((n.indices, True))
            self.generic_visit(n)

    V().visit(f.body)
    for buf, acc in accesses.items():
        if not any(w for _, w in acc):
            continue
        moving = {ix for ix, _ in acc if any(f.var in free_vars(e) for e in ix)}
        if len(moving) >= 2 or (moving and len({ix for ix, _ in acc}) >= 2):
            return True
        for ix, w in acc:
            if w and any(f.var in (fv := free_vars(e)) and not fv.isdisjoint(inner_vars) for e in ix):
                return True
    return False


class _HasKind(Visitor):
    def __init__(self, kind):
        self.kind, self.found = kind, False

    def visit_For(self, f):
        if f.kind == self.kind:
            self.found = True
        self.generic_visit(f)


def uses_openmp(stmt) -> bool:
    v = _HasKind("parallel")
    v.visit(stmt)
    return v.found
