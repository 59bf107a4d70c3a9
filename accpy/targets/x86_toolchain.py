"""The x86 toolchain: the host's C compiler, each kernel compiled for its target's instruction-set
extensions by a function attribute (`__attribute__((target(...)))`, the rest of the package stays
baseline x86-64), and a `__builtin_cpu_supports` guard that refuses to run a kernel on a CPU without
them (no SIGILL)."""
from __future__ import annotations

import os

from .features import _BASELINE, _GCC_OPTION, BUILTIN_NAMES, Architecture
from .toolchain import Toolchain


class X86Toolchain(Toolchain):
    """gcc (or $ACCPY_CC) for x86-64 CPUs; features per function, checked at call time."""

    name = "x86-64 C compiler"

    def __init__(self):
        super().__init__("x86_64")

    @property
    def cc(self) -> str:
        """The C compiler command: the native one on a machine of this architecture, else the cross compiler."""
        if self.native:
            return super().cc
        # on another machine (e.g. an AArch64 host): the cross compiler
        return os.environ.get("ACCPY_X86_64_CC", "x86_64-linux-gnu-gcc")

    @property
    def ar(self) -> str:
        """The archiver (the cross binutils' on a machine of another architecture)."""
        return "ar" if self.native else "x86_64-linux-gnu-ar"

    def required_features(self, target) -> list:
        return [f for f in target.extensions if f not in _BASELINE and f in _GCC_OPTION]

    def compiler_flags(self, target) -> list:
        flags = [_GCC_OPTION[f] for f in self.required_features(target)]
        if target.has("avx512f"):
            flags.append("-mprefer-vector-width=512" if target.vector_bytes >= 64 else
                         f"-mprefer-vector-width={max(target.vector_bytes, 16) * 8}")
        return flags

    def unit_flags(self, targets) -> list:
        # the vector width gcc's own vectorizer prefers (features are per function: attributes)
        flags = []
        for t in targets:
            flags += [f for f in self.compiler_flags(t) if f.startswith("-mprefer")]
        return sorted(set(flags))

    def function_attribute(self, target) -> str:
        names = [BUILTIN_NAMES[f] for f in self.required_features(target) if f in BUILTIN_NAMES]
        if not names:
            return ""
        return f'__attribute__((target("{",".join(names)}"))) '

    def feature_guard(self, target, function: str, c_string) -> list:
        # The message names the missing features only: one `%s` per feature, " name" when it is
        # missing, "" otherwise (no helper that a user's parameter name could shadow is called).
        names = [BUILTIN_NAMES[f] for f in self.required_features(target) if f in BUILTIN_NAMES]
        if not names:
            return []
        cond = " && ".join(f'__builtin_cpu_supports({c_string(n)})' for n in names)
        args = ", ".join(f'__builtin_cpu_supports({c_string(n)}) ? "" : {c_string(" " + n)}' for n in names)
        fmt = c_string("%s: built for target %s, but this CPU lacks" + "%s" * len(names) +
                       " (rebuild it for acc.Target.HOST to run it here)")
        return [
            "    __builtin_cpu_init();",
            f"    if (!({cond})) {{",
            f"        accpy_set_error({fmt}, {c_string(function)}, {c_string(str(target.name))}, {args});",
            "        return;",
            "    }",
        ]


X86_TOOLCHAIN = X86Toolchain()


def x86_toolchain(target):
    """The x86 toolchain for x86 CPU targets, else None."""
    if target.is_cpu and target.architecture in (Architecture.X86_64, Architecture.X86):
        return X86_TOOLCHAIN
    return None
