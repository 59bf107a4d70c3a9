"""A package built for another architecture than this machine's (e.g. AArch64 on x86-64, by a
cross compiler): its files are written, but nothing of it can run in this Python process. Its
functions run under the target's emulator (e.g. `accpy.targets.arm.run_under_emulation`) or on a
machine of that architecture."""
from __future__ import annotations

from pathlib import Path

from ..targets.toolchain import ForeignArchitectureError, host_machine


def foreign_error(package: str, target_name: str, toolchain, what: str) -> ForeignArchitectureError:
    """The error for running `what` of a package built by a foreign `toolchain` in this process."""
    return ForeignArchitectureError(
        f"{what}: package {package!r} is built for target {target_name} ({toolchain.machine}), and this machine "
        f"is {host_machine()}: its code cannot run in this Python process. {toolchain.how_to_run()}")


class _ForeignFunction:
    def __init__(self, package: "ForeignPackage", name: str):
        self._package, self.name = package, name

    def __call__(self, *args, **kwargs):
        p = self._package
        raise foreign_error(p.name, p.target_name, p.toolchain, f"{self.name}(...)")

    def __repr__(self) -> str:
        p = self._package
        return f"<accpy function {self.name} of {p.name}, built for {p.toolchain.machine} (not callable here)>"


class ForeignPackage:
    """A built package whose code is for another architecture: `files`, `timings`, `function_names`;
    calling a function or asking for its Python module raises ForeignArchitectureError."""

    def __init__(self, name: str, output_dir: Path, files: dict, functions: list, target_name: str, toolchain):
        self.name = name
        self.output_dir = Path(output_dir)
        self.files = files
        self.target_name = target_name
        self.toolchain = toolchain
        self.machine = toolchain.machine
        self.timings: dict = {}
        self.target_libraries: tuple = ()
        self.variants = {full: dict(params) for full, _, _, params in functions}
        self._functions = {}
        for full, base, _, _ in functions:
            fn = _ForeignFunction(self, full)
            self._functions[full] = fn
            if base and base != full:
                self._functions.setdefault(base, _ForeignFunction(self, base))

    @property
    def function_names(self) -> list:
        """Names of the package's functions: full names, then base-name aliases."""
        return list(self._functions)

    def __getattr__(self, item):
        fns = self.__dict__.get("_functions", {})
        if item in fns:
            return fns[item]
        raise AttributeError(f"package {self.__dict__.get('name')!r} has no function {item!r}; it has {sorted(fns)}")

    def __getitem__(self, item):
        return self._functions[item]

    def python_module(self, wait: bool = True):
        """Refused: a pybind11 module of code for another architecture cannot be imported here."""
        raise foreign_error(self.name, self.target_name, self.toolchain, "python_module()")

    def __repr__(self) -> str:
        return (f"<accpy package {self.name} at {self.output_dir}, built for {self.target_name} ({self.machine}): "
                f"{', '.join(self._functions)}>")
