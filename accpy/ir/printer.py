"""IR as Python-like pseudo-code: what `print(schedule)` and the pass debug dumps show."""
from __future__ import annotations

from .expr import BinOp, Call, Cast, Const, Load, Select, UnOp, Var
from .stmt import Alloc, Block, Comment, Evaluate, For, If, Store
from .vector import Broadcast, HReduce, VAssign, VBinOp, VCall, VCast, VDecl, VFma, VLoad, VMask, VSelect, VStore, VVar

_PREC = {"lor": 1, "land": 2, "lt": 4, "le": 4, "gt": 4, "ge": 4, "eq": 4, "ne": 4,
         "or": 5, "xor": 6, "and": 7, "shl": 8, "shr": 8, "add": 9, "sub": 9,
         "mul": 10, "div": 10, "floordiv": 10, "mod": 10, "pow": 12}
_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
        "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "lt": "<", "le": "<=",
        "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "land": "and", "lor": "or"}
_REDUCE_SYM = {"add": "+=", "sub": "-=", "mul": "*=", "div": "/=", "and": "&=", "or": "|=",
               "xor": "^=", "max": "max=", "min": "min="}


def expr_str(e, names=None, prec: int = 0) -> str:
    names = names or {}
    if isinstance(e, Const):
        if e.dtype.is_float:
            return repr(float(e.value))
        return str(e.value)
    if isinstance(e, Var):
        return names.get(e, e.name)
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(expr_str(i, names) for i in e.indices)}]"
    if isinstance(e, BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_str(e.a, names)}, {expr_str(e.b, names)})"
        p = _PREC[e.op]
        # `a - (b + c)`: the right operand of a non-commutative op needs parens at equal precedence
        right_p = p + 1 if e.op in ("sub", "div", "floordiv", "mod", "shl", "shr") else p
        s = f"{expr_str(e.a, names, p)} {_SYM[e.op]} {expr_str(e.b, names, right_p)}"
        return f"({s})" if p < prec else s
    if isinstance(e, UnOp):
        op = {"neg": "-", "not": "not ", "invert": "~"}[e.op]
        return f"{op}{expr_str(e.a, names, 11)}"
    if isinstance(e, Select):
        s = f"{expr_str(e.a, names, 1)} if {expr_str(e.cond, names, 1)} else {expr_str(e.b, names, 1)}"
        return f"({s})" if prec > 0 else s
    if isinstance(e, Cast):
        return f"{e.dtype.name}({expr_str(e.value, names)})"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(expr_str(a, names) for a in e.args)})"
    return _vector_expr_str(e, names)


def _vector_expr_str(e, names) -> str:
    if isinstance(e, VLoad):
        m = f", count={expr_str(e.count, names)}" if e.count is not None else ""
        m += f", stride={e.stride}" if e.stride != 1 else ""
        return f"vload{e.lanes}({e.buffer.name}[{', '.join(expr_str(i, names) for i in e.indices)}]{m})"
    if isinstance(e, Broadcast):
        return f"bcast{e.lanes}({expr_str(e.value, names)})"
    if isinstance(e, VBinOp):
        return f"v{e.op}({expr_str(e.a, names)}, {expr_str(e.b, names)})"
    if isinstance(e, VFma):
        return f"v{e.op}({expr_str(e.a, names)}, {expr_str(e.b, names)}, {expr_str(e.c, names)})"
    if isinstance(e, VCall):
        return f"v{e.fn}({', '.join(expr_str(a, names) for a in e.args)})"
    if isinstance(e, VCast):
        return f"v{e.dtype.name}({expr_str(e.value, names)})"
    if isinstance(e, VSelect):
        return f"vselect({expr_str(e.cond, names)}, {expr_str(e.a, names)}, {expr_str(e.b, names)})"
    if isinstance(e, VMask):
        return f"mask{e.lanes}({expr_str(e.count, names)})"
    if isinstance(e, VVar):
        return names.get(e, e.name)
    if isinstance(e, HReduce):
        return f"{e.op}({expr_str(e.value, names)})"
    return repr(e)


def stmt_lines(s, names=None, indent: int = 0) -> list:
    pad = "    " * indent
    names = names or {}
    if s is None:
        return []
    if isinstance(s, Block):
        out = []
        for x in s.stmts:
            out.extend(stmt_lines(x, names, indent))
        return out or [pad + "pass"]
    if isinstance(s, For):
        lo, hi = expr_str(s.lo, names), expr_str(s.hi, names)
        rng = f"range({hi})" if lo == "0" else f"range({lo}, {hi})"
        note = "" if s.kind == "serial" else f"  # {s.kind}"
        return [f"{pad}for {names.get(s.var, s.var.name)} in {rng}:{note}"] + stmt_lines(s.body, names, indent + 1)
    if isinstance(s, If):
        out = [f"{pad}if {expr_str(s.cond, names)}:"] + stmt_lines(s.then, names, indent + 1)
        if s.orelse is not None:
            out += [f"{pad}else:"] + stmt_lines(s.orelse, names, indent + 1)
        return out
    if isinstance(s, Store):
        target = f"{s.buffer.name}[{', '.join(expr_str(i, names) for i in s.indices)}]"
        op = "=" if s.reduce is None else _REDUCE_SYM[s.reduce]
        return [f"{pad}{target} {op} {expr_str(s.value, names)}"]
    if isinstance(s, Alloc):
        shape = ", ".join(expr_str(x, names) for x in s.buffer.shape)
        return [f"{pad}{s.buffer.name} = alloc({s.buffer.dtype.name}[{shape}], memory={s.buffer.memory})"] + \
            stmt_lines(s.body, names, indent)
    if isinstance(s, Evaluate):
        return [pad + expr_str(s.value, names)]
    if isinstance(s, Comment):
        return [f"{pad}# {s.text}"]

    if isinstance(s, VStore):
        m = f", count={expr_str(s.count, names)}" if s.count is not None else ""
        m += f", stride={s.stride}" if s.stride != 1 else ""
        target = f"{s.buffer.name}[{', '.join(expr_str(i, names) for i in s.indices)}]"
        return [f"{pad}vstore{s.lanes}({target}{m}) = {expr_str(s.value, names)}"]
    if isinstance(s, VAssign):
        return [f"{pad}{expr_str(s.var, names)} = {expr_str(s.value, names)}"]
    if isinstance(s, VDecl):
        decl = ", ".join(f"{expr_str(v, names)}: {v.dtype.name}x{v.lanes}" for v in s.vars)
        return [f"{pad}registers {decl}"] + stmt_lines(s.body, names, indent)
    return [pad + repr(s)]


def stmt_str(s, names=None) -> str:
    return "\n".join(stmt_lines(s, names))
