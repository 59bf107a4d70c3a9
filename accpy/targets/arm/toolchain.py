"""AArch64's toolchain: on an AArch64 machine its own C compiler; elsewhere the cross compiler
(Debian's gcc-aarch64-linux-gnu) and user-mode emulation (qemu-aarch64, Debian's qemu-user-static)
to run what it builds. Features are compiled for the whole package (`-march=armv8.2-a+dotprod...`):
the package is for one core type, and Linux on Arm has no `__builtin_cpu_supports`."""
from __future__ import annotations

import os
import shutil
from typing import Optional

from ..features import ARM_BASELINE, ARM_FEATURES, ARM_MARCH_EXTENSION, Architecture
from ..toolchain import Toolchain, host_machine
from .sve import uses_sve

CROSS_PREFIX = "aarch64-linux-gnu-"
#: user-mode emulators, in the order tried (the static one needs no AArch64 libraries to start)
EMULATORS = ("qemu-aarch64-static", "qemu-aarch64")
INSTALL_HINT = "Debian/Ubuntu: apt-get install gcc-aarch64-linux-gnu qemu-user-static"
# gcc 12 can find a function "pure" whose only stores are SVE stores of a value selected by a
# predicate (svwhilelt of a loaded count), and then drops calls to it whose result is unused:
# wrong code (checked with Debian's gcc 12.2 for AArch64; a loop of svst1(ptrue, p, svsel(whilelt(0,
# n[r]), ...)) in a noinline static function). Both analyses off keeps every call.
SVE_WORKAROUND = ("-fno-ipa-pure-const", "-fno-ipa-modref")


class AArch64Toolchain(Toolchain):
    """gcc for AArch64 ($ACCPY_AARCH64_CC, else aarch64-linux-gnu-gcc; on an AArch64 machine
    $ACCPY_CC, else gcc) and, on other machines, qemu to run its programs."""

    name = "AArch64 C compiler"

    def __init__(self):
        super().__init__("aarch64")

    @property
    def cc(self) -> str:
        """The C compiler command: the native one on a machine of this architecture, else the cross compiler."""
        if self.native:
            return os.environ.get("ACCPY_CC", "gcc")
        return os.environ.get("ACCPY_AARCH64_CC", CROSS_PREFIX + "gcc")

    @property
    def ar(self) -> str:
        """The archiver (the cross binutils' on a machine of another architecture)."""
        if self.native:
            return "ar"
        cc = self.cc
        return cc[:-3] + "ar" if cc.endswith("-gcc") else CROSS_PREFIX + "ar"

    def required_features(self, target) -> list:
        return [f for f in target.extensions if f in ARM_FEATURES and f not in ARM_BASELINE]

    def compiler_flags(self, target) -> list:
        return [self._march(self.required_features(target))] + self._sve_bits([target])

    @staticmethod
    def _sve_bits(targets) -> list:
        """`-msve-vector-bits` of targets whose code uses SVE registers (one length per package), and
        SVE_WORKAROUND."""
        bits = sorted({t.vector_bytes * 8 for t in targets if uses_sve(t)})
        if len(bits) > 1:
            raise ValueError(f"a package's functions use SVE vectors of one length; got {bits} bits")
        return [f"-msve-vector-bits={bits[0]}", *SVE_WORKAROUND] if bits else []

    @staticmethod
    def _march(features) -> str:
        exts = list(dict.fromkeys(ARM_MARCH_EXTENSION[f] for f in features if ARM_MARCH_EXTENSION[f]))
        if "sve2" in exts:
            exts.remove("sve")  # (implied)
        return "-march=" + ("armv8.2-a" if exts else "armv8-a") + "".join("+" + e for e in exts)

    def unit_flags(self, targets) -> list:
        # one package, one core type: the features of all its functions' targets
        feats = []
        for t in sorted(targets, key=lambda t: t.describe()):
            feats += [f for f in self.required_features(t) if f not in feats]
        return [self._march(sorted(feats, key=ARM_FEATURES.index))] + self._sve_bits(targets)

    def precompiles(self, flags) -> bool:
        # gcc 12 crashes (an internal compiler error) on SVE code after a precompiled <arm_sve.h>
        return not any(f.startswith("-msve-vector-bits") or "+sve" in f for f in flags)

    def feature_guard(self, target, function: str, c_string) -> list:
        if not uses_sve(target):
            return []  # (features are compiled for; Linux on Arm has no __builtin_cpu_supports)
        # code for one SVE vector length is wrong on another: RDVL reads this CPU's, in bytes
        fmt = c_string("%s: built for target %s with %d-byte SVE vectors, but this CPU's are %d bytes "
                       "(under qemu: -cpu max,sve%d=on)")
        vb = target.vector_bytes
        return [
            "    uint64_t accpy_vl_;",
            '    __asm__ volatile("rdvl %0, #1" : "=r"(accpy_vl_));',
            f"    if (accpy_vl_ != {vb}) {{",
            f"        accpy_set_error({fmt}, {c_string(function)}, {c_string(str(target.name))}, {vb}, "
            f"(int)accpy_vl_, {vb * 8});",
            "        return;",
            "    }",
        ]

    def emulator(self) -> Optional[str]:
        """The qemu user-mode emulator found on PATH, or None."""
        for name in EMULATORS:
            path = shutil.which(name)
            if path is not None:
                return path
        return None

    def run_command(self, executable: str, flags=()) -> list:
        if self.native:
            return [executable]
        qemu = self.emulator()
        if qemu is None:
            raise FileNotFoundError(f"no AArch64 emulator ({' or '.join(EMULATORS)}) on PATH; {INSTALL_HINT}")
        # `-cpu max`: every extension qemu implements (dot products, fp16, SVE, i8mm), with the SVE
        # vector length the code was compiled for (`flags`: the package's)
        cpu = "max" + "".join(f",sve{f.split('=')[1]}=on" for f in flags if f.startswith("-msve-vector-bits="))
        return [qemu, "-cpu", cpu, executable]

    def missing(self) -> Optional[str]:
        if shutil.which(self.cc) is None:
            return f"the AArch64 C compiler `{self.cc}` was not found ({INSTALL_HINT})"
        return None

    def cannot_run(self) -> Optional[str]:
        if self.native or self.emulator() is not None:
            return None
        return f"no AArch64 emulator ({' or '.join(EMULATORS)}) on PATH ({INSTALL_HINT})"

    def how_to_run(self) -> str:
        return ("Run its functions under qemu with accpy.targets.arm.run_under_emulation(output_dir, function, "
                "args), or on an AArch64 machine.")


AARCH64_TOOLCHAIN = AArch64Toolchain()


def aarch64_toolchain(target):
    """AArch64's toolchain for AArch64 targets (CPUs), else None."""
    if target.is_cpu and target.architecture is Architecture.AARCH64:
        return AARCH64_TOOLCHAIN
    return None


__all__ = ["AArch64Toolchain", "AARCH64_TOOLCHAIN", "aarch64_toolchain", "host_machine"]
