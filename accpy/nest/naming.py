"""Names for user objects, read from the assignment that receives them (`A = acc.Array(...)`).

Accera names parameters and dimensions after the variables they are assigned to; we do
the same for arrays and indices so that printed loops and C code read like the script.
Anything we cannot read falls back to a generated name.
"""
from __future__ import annotations

import dis
import itertools
import os
import sys

from ..ir.names import argument_name_problem, ascii_identifier

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_STORE_OPS = {"STORE_NAME", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF"}

# one counter for the whole process: generated names never repeat (ids modulo a number did)
_generated = itertools.count(1)


def generated_name(prefix: str) -> str:
    """A fresh name `prefix<n>` for an object the user did not name; never the same twice."""
    return f"{prefix}{next(_generated)}"


def inferred_or_generated(prefix: str) -> str:
    """The variable the current call's result is assigned to, spelled as a C name (`c_name_of_variable`),
    else a generated name `prefix<n>`."""
    names = assigned_names()
    name = c_name_of_variable(names[0]) if len(names) == 1 else None
    return name or generated_name(prefix)


def c_name_of_variable(variable: str):
    """A C identifier for an object named after the Python variable `variable`, or None.

    Deterministic and readable: non-ASCII letters are spelled in ASCII (`Bébé` -> `Bebe`,
    `你` -> `u4f60`, see `accpy.ir.names.ascii_identifier`); a name C or accpy reserves loses its
    leading underscores (`__x` -> `x`) or gains a trailing one (`int` -> `int_`, `exp` -> `exp_`).
    None when neither gives a usable name (the caller generates one). Such names are hints, not the
    user's choice: `argument_names` adds suffixes where two of them meet.
    """
    if not isinstance(variable, str) or not variable:
        return None
    base = ascii_identifier(variable)
    for cand in (base, base.lstrip("_"), base + "_"):
        if cand and not cand[0].isdigit() and argument_name_problem(cand) is None:
            return cand
    return None


def argument_names(args) -> list:
    """The C/Python names of a function's arguments, in order.

    Names the user gave explicitly (`name=`) are kept as they are (two equal ones are
    refused by the caller). Names accpy inferred from an assignment or generated are
    only hints: one that clashes with an earlier argument's name gets a suffix (X, X_1).
    """
    explicit = {a.name for a in args if getattr(a, "name_given", True)}
    taken: set = set()
    out = []
    for a in args:
        name = a.name
        if not getattr(a, "name_given", True):
            cand, n = name, 1
            while cand in taken or cand in explicit:
                cand = f"{name}_{n}"
                n += 1
            name = cand
        taken.add(name)
        out.append(name)
    return out


def user_frame():
    """The innermost stack frame that is not inside the accpy package."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG_DIR + os.sep):
        f = f.f_back
    return f


def user_location() -> tuple[str, int, str]:
    """(file, line, source text) of the user code currently running."""
    f = user_frame()
    if f is None:
        return ("<unknown>", 0, "")
    import linecache

    text = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return (f.f_code.co_filename, f.f_lineno, text)


def traceback_location(tb) -> tuple[str, int, str]:
    """(file, line, source text) of the innermost user-code frame of a traceback."""
    import linecache

    found = ("<unknown>", 0, "")
    while tb is not None:
        code = tb.tb_frame.f_code
        if not os.path.abspath(code.co_filename).startswith(_PKG_DIR + os.sep):
            found = (code.co_filename, tb.tb_lineno, linecache.getline(code.co_filename, tb.tb_lineno).strip())
        tb = tb.tb_next
    return found


def assigned_names(with_kind: bool = False):
    """Names the caller's caller assigns the result of the current call to.

    Returns [] when the result is not stored directly in plain names. With `with_kind`,
    returns (names, unpacked) where `unpacked` says the result is tuple-unpacked.
    """
    names, unpacked = _assignment()
    return (names, unpacked) if with_kind else names


def _assignment():
    f = user_frame()
    if f is None:
        return [], False
    try:
        instrs = list(dis.get_instructions(f.f_code))
    except Exception:  # pragma: no cover - exotic code objects
        return [], False
    # the instruction after the call currently executing
    pos = None
    for k, ins in enumerate(instrs):
        if ins.offset > f.f_lasti:
            pos = k
            break
    if pos is None:
        return [], False
    # skip cache/no-op entries between the call and the store
    while pos < len(instrs) and instrs[pos].opname in ("CACHE", "PRECALL", "NOP", "EXTENDED_ARG"):
        pos += 1
    if pos >= len(instrs):
        return [], False
    ins = instrs[pos]
    if ins.opname in _STORE_OPS:
        return [ins.argval], False
    if ins.opname == "UNPACK_SEQUENCE":
        n = ins.argval
        names = []
        for ins2 in instrs[pos + 1:pos + 1 + n]:
            if ins2.opname not in _STORE_OPS:
                return [], False
            names.append(ins2.argval)
        return names, True
    return [], False
