"""The toolchain interface: how code for a target is compiled, guarded, loaded and run.

A target resolves one `Toolchain` (`Target.toolchain`): the C compiler command and archiver, the
flags its translation units need, the attribute a kernel function carries, the C that refuses to
run a kernel on a CPU without the target's features, whether a built package can be loaded into
this Python process (not for a foreign architecture), and how to run a program built for it (an
emulator for a foreign architecture). `package/` takes everything target-specific from here.

The base class is the host's C compiler with no target features (a generic CPU, an accelerator
whose functional model runs on the host); a target library gives its own (`TargetLibrary.toolchain`):
the x86 one in targets/x86_toolchain.py, AArch64's in targets/arm/.
"""
from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from typing import Optional

from ..errors import CompileError

from .library import libraries


class ForeignArchitectureError(RuntimeError):
    """Code built for another architecture than this machine's was asked to run in this process
    (a kernel called from Python, a pybind11 module): it runs under an emulator, or on its machine."""


def host_machine() -> str:
    """This machine's architecture as `platform.machine()` spells it, normalized ("x86_64", "aarch64")."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


@functools.lru_cache(maxsize=None)
def compiler_identity(cc: str) -> str:
    """The first line of `cc --version` (part of every cache key)."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else cc
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"the C compiler `{cc}` cannot be run: {e}") from None


class Toolchain:
    """How a target's code is built and run: the host's C compiler, no target features (the base)."""

    name = "host C compiler"
    #: the architecture the code is for, as `platform.machine()` spells it (recorded in the .hat)
    machine: str = ""

    def __init__(self, machine: Optional[str] = None):
        self.machine = machine or host_machine()

    # -- compiling ----------------------------------------------------------------------------------
    @property
    def cc(self) -> str:
        """The C compiler command ($ACCPY_CC, else gcc)."""
        return os.environ.get("ACCPY_CC", "gcc")

    @property
    def ar(self) -> str:
        """The archiver for static libraries."""
        return "ar"

    def required_features(self, target) -> list:
        """Instruction-set features of `target` beyond its architecture's baseline that the code may use."""
        return []

    def compiler_flags(self, target) -> list:
        """The compiler flags that enable exactly `target`'s features (`Target.compiler_flags`)."""
        return []

    def unit_flags(self, targets) -> list:
        """Flags for compiling a package whose functions are for `targets` (the whole translation
        units; per-function features go into `function_attribute`)."""
        return []

    def precompiles(self, flags) -> bool:
        """Whether a package's prelude may be compiled once into a precompiled header with `flags`."""
        return True

    def function_attribute(self, target) -> str:
        """The attribute text (with a trailing space) before a kernel for `target`, or ""."""
        return ""

    def feature_guard(self, target, function: str, c_string) -> list:
        """C lines at the start of a public entry that refuse to run it (setting the package's error
        with accpy_set_error and returning) on a CPU without `target`'s features; [] for none.
        `function`: the name in the message; `c_string(text)`: a C string literal of text."""
        return []

    # -- running ------------------------------------------------------------------------------------
    @property
    def native(self) -> bool:
        """Whether code built by this toolchain runs on this machine (a package can be loaded)."""
        return self.machine == host_machine()

    def run_command(self, executable: str, flags=()) -> list:
        """The command running a program built (statically linked) by this toolchain with `flags`."""
        return [executable]

    def missing(self) -> Optional[str]:
        """Why this toolchain cannot build here (a tool not found), or None."""
        if shutil.which(self.cc) is None:
            return f"the C compiler `{self.cc}` was not found"
        return None

    def cannot_run(self) -> Optional[str]:
        """Why programs built by this toolchain cannot run here, or None."""
        return None

    def how_to_run(self) -> str:
        """A sentence telling where code built by this toolchain can run (for messages)."""
        return f"Run it on a {self.machine} machine."

    def describe(self) -> str:
        """What the toolchain is, for messages: its name, compiler and architecture."""
        return f"{self.name} ({self.cc}, {self.machine})"

    def __repr__(self) -> str:
        return f"<accpy toolchain: {self.describe()}>"


HOST_TOOLCHAIN = Toolchain()


def toolchain_for(target) -> Toolchain:
    """The toolchain of `target`: the first registered library that gives one, else the host's."""
    for lib in libraries():
        tc = lib.toolchain(target)
        if tc is not None:
            return tc
    return HOST_TOOLCHAIN


def package_toolchain(targets, what: str = "the package") -> Toolchain:
    """The toolchain that builds a package with functions for all of `targets`: theirs when they agree
    on the compiler and architecture (a library's own before the host's plain one, e.g. x86's beside
    an accelerator whose functional model runs on the host); ValueError if they need several."""
    found: dict = {}
    for t in targets:
        tc = toolchain_for(t)
        key = (tc.machine, tc.cc)
        if key not in found or found[key][0] is HOST_TOOLCHAIN:
            found[key] = (tc, t)
    if len(found) > 1:
        names = "; ".join(f"{t.name}: {tc.describe()}" for tc, t in found.values())
        raise ValueError(f"{what}: its functions are for targets built by different toolchains ({names}); "
                         f"build a package per architecture")
    return next(iter(found.values()))[0] if found else HOST_TOOLCHAIN
