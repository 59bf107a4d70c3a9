"""Instruction-set features by their /proc/cpuinfo names, the enums of a target (category,
architecture, runtime), and how names users give map onto them (see target.py)."""
from __future__ import annotations

import difflib
import enum
import re


class _NamedEnum(enum.Enum):
    """An enum whose members also equal their names as strings, in any case and spelling that
    `_key` reads alike (`Architecture.X86_64 == "x86_64" == "X86-64"`): Accera's Target keeps the
    strings users give (`Target(architecture="x86_64").architecture == "x86_64"`), accpy keeps the
    member, and both comparisons hold. Hashing stays the member's own (a member and a string are
    not interchangeable as dict keys)."""

    def __eq__(self, other):
        if isinstance(other, str):
            return _key(other) == self.name
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = enum.Enum.__hash__


class Category(_NamedEnum):
    """The kind of device: CPU, an ACCELERATOR such as Gemmini, or a GPU: a device whose kernels are
    launched through a GPU runtime (CUDA, ROCM, VULKAN, OPENCL), an OpenCL CPU device included."""

    CPU = "CPU"
    ACCELERATOR = "ACCELERATOR"
    GPU = "GPU"


class Architecture(_NamedEnum):
    """The instruction-set architecture of a target (HOST: this machine's)."""

    HOST = "HOST"
    X86 = "X86"
    X86_64 = "X86_64"
    ARM = "ARM"
    AARCH64 = "AARCH64"
    RISCV64 = "RISCV64"


class Runtime(_NamedEnum):
    """How parallel loops run: OPENMP threads, or NONE, on a CPU; on a GPU, the runtime that launches
    its kernels: CUDA, ROCM, VULKAN (Accera's) or OPENCL (accpy's). A CPU target with a GPU runtime,
    or a GPU target with a CPU one, raises ValueError (target.py)."""

    NONE = "NONE"
    DEFAULT = "DEFAULT"
    OPENMP = "OPENMP"
    CUDA = "CUDA"
    ROCM = "ROCM"
    VULKAN = "VULKAN"
    OPENCL = "OPENCL"


GPU_RUNTIMES = (Runtime.CUDA, Runtime.ROCM, Runtime.VULKAN, Runtime.OPENCL)


class Platform(enum.Enum):
    """Accera's platforms (`acc.Package.Platform`); accpy builds for HOST: this machine, or, for a
    target of another architecture, that architecture's Linux through its toolchain's cross compiler."""

    HOST = "host"
    WINDOWS = "windows"
    LINUX = "linux"
    MACOS = "macos"
    MACOS_ARM64 = "macos_arm64"
    ANDROID = "android"
    IOS = "ios"
    RASPBIAN = "raspbian"


# -- instruction-set features ---------------------------------------------------------------
# (feature, gcc option, name in __builtin_cpu_supports() and __attribute__((target)),
#  features GCC's option implies). Order: the canonical order of `Target.extensions`.
# mmx/sse/sse2 are the x86-64 baseline: kept in `extensions`, never required or checked.
_FEATURES = [
    ("mmx", "-mmmx", "mmx", ()),
    ("sse", "-msse", "sse", ()),
    ("sse2", "-msse2", "sse2", ("sse",)),
    ("sse3", "-msse3", "sse3", ("sse2",)),
    ("ssse3", "-mssse3", "ssse3", ("sse3",)),
    ("sse4_1", "-msse4.1", "sse4.1", ("ssse3",)),
    ("sse4_2", "-msse4.2", "sse4.2", ("sse4_1",)),
    ("avx", "-mavx", "avx", ("sse4_2",)),
    ("avx2", "-mavx2", "avx2", ("avx",)),
    ("fma", "-mfma", "fma", ("avx",)),
    ("f16c", "-mf16c", "f16c", ("avx",)),
    ("avx512f", "-mavx512f", "avx512f", ("avx2", "fma", "f16c")),
    ("avx512cd", "-mavx512cd", "avx512cd", ("avx512f",)),
    ("avx512bw", "-mavx512bw", "avx512bw", ("avx512f",)),
    ("avx512dq", "-mavx512dq", "avx512dq", ("avx512f",)),
    ("avx512vl", "-mavx512vl", "avx512vl", ("avx512f",)),
    ("avx512_vnni", "-mavx512vnni", "avx512vnni", ("avx512f",)),
    ("avx512_bf16", "-mavx512bf16", "avx512bf16", ("avx512bw",)),
    ("avx512_fp16", "-mavx512fp16", "avx512fp16", ("avx512bw",)),
    ("amx_tile", "-mamx-tile", "amx-tile", ()),
    ("amx_int8", "-mamx-int8", "amx-int8", ("amx_tile",)),
    ("amx_bf16", "-mamx-bf16", "amx-bf16", ("amx_tile",)),
]
# AArch64 features by their /proc/cpuinfo names (the "Features" line of an Arm machine), with the
# -march extension gcc spells them with ("" for the Armv8-A baseline: FP and Advanced SIMD (Neon)
# are mandatory in AArch64) and the features each implies. Kept after x86's in the canonical order.
_ARM_FEATURES = [
    ("fp", "", ()),
    ("asimd", "", ("fp",)),
    ("fphp", "fp16", ("fp",)),
    ("asimdhp", "fp16", ("asimd", "fphp")),
    ("asimddp", "dotprod", ("asimd",)),
    ("i8mm", "i8mm", ("asimd",)),
    ("bf16", "bf16", ("asimd",)),
    ("sve", "sve", ("asimd", "fphp", "asimdhp")),
    ("sve2", "sve2", ("sve",)),
]
ARM_FEATURES = tuple(f for f, _, _ in _ARM_FEATURES)
ARM_BASELINE = frozenset({"fp", "asimd"})
ARM_MARCH_EXTENSION = {f: ext for f, ext, _ in _ARM_FEATURES}
FEATURES = tuple(f for f, _, _, _ in _FEATURES) + ARM_FEATURES
_BASELINE = frozenset({"mmx", "sse", "sse2"})
_ORDER = {f: k for k, f in enumerate(FEATURES)}
_GCC_OPTION = {f: opt for f, opt, _, _ in _FEATURES}
_IMPLIES = {**{f: imp for f, _, _, imp in _FEATURES}, **{f: imp for f, _, imp in _ARM_FEATURES}}
# what __builtin_cpu_supports() and __attribute__((target(...))) call them
BUILTIN_NAMES = {f: b for f, _, b, _ in _FEATURES if f not in _BASELINE}
# cpuinfo calls SSE3 "pni" (Prescott New Instructions)
_CPUINFO_NAMES = {"pni": "sse3"}


def _key(name: str) -> str:
    """A name as a lookup key: upper case, runs of anything but letters and digits -> "_"."""
    s = str(name).upper().replace("(R)", " ").replace("(TM)", " ").replace("+", "PLUS")
    return "_".join(t for t in re.split(r"[^A-Z0-9]+", s) if t)


# names users may give in `extensions` (keys as _key() makes them) -> features
_NAMES = {_key(f): (f,) for f in FEATURES}
_NAMES.update({_key(b): (f,) for f, b in BUILTIN_NAMES.items()})  # "avx512vnni", "sse4.1", "amx-tile"
_NAMES.update({
    "PNI": ("sse3",), "SSE4": ("sse4_1", "sse4_2"), "FMA3": ("fma",),
    "AVX2": ("avx2", "fma"),  # see the module docstring
    "AVX512": ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"),  # Accera: skylake-avx512
    "AVX512VNNI": ("avx512_vnni",), "AVX512BF16": ("avx512_bf16",), "AVX512FP16": ("avx512_fp16",),
    "VNNI": ("avx512_vnni",), "AMX": ("amx_tile",), "AMXTILE": ("amx_tile",), "AMXINT8": ("amx_int8",),
    "AMXBF16": ("amx_bf16",),
    # Arm's names (the architecture's and gcc's): Neon is Advanced SIMD
    "NEON": ("asimd",), "ADVSIMD": ("asimd",), "DOTPROD": ("asimddp",), "FP16": ("fphp", "asimdhp"),
    "SVE": ("sve",), "SVE2": ("sve2",), "I8MM": ("i8mm",), "BF16": ("bf16",),
})
# `has()`: one feature per name (has("AVX512") asks for AVX-512 F, has("AVX2") for AVX2)
_HAS = {k: v[0] for k, v in _NAMES.items()}
_HAS.update({"AVX512": "avx512f", "AVX2": "avx2", "SSE4": "sse4_2", "FP16": "asimdhp"})


def _feature_closure(features) -> set:
    out, todo = set(), list(features)
    while todo:
        f = todo.pop()
        if f not in out:
            out.add(f)
            todo.extend(_IMPLIES[f])
    return out


def _sorted_features(features) -> tuple:
    return tuple(sorted(set(features), key=_ORDER.__getitem__))


def normalize_extensions(extensions) -> tuple:
    """User-given extension names (Accera's or cpuinfo's) -> canonical, closed under implication."""
    if extensions is None:
        return ()
    if isinstance(extensions, str):
        extensions = [extensions]
    got = []
    for e in extensions:
        if not isinstance(e, str):
            raise TypeError(f"extensions: expected names such as 'AVX2' or 'avx512f', got {e!r}")
        k = _key(e)
        if k not in _NAMES:
            close = difflib.get_close_matches(k, list(_NAMES), n=3, cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"extensions: unknown instruction-set extension {e!r}{hint}; "
                             f"known: {', '.join(FEATURES)}")
        got.extend(_NAMES[k])
    return _sorted_features(_feature_closure(got))


class Extensions(tuple):
    """`Target.extensions`: feature names as /proc/cpuinfo writes them, in a fixed order (a tuple,
    equal to the plain tuple). Membership also reads Accera's names: `"SSE3" in t.extensions` and
    `"AVX512" in t.extensions` ask for the feature the name stands for (as `Target.has` does)."""

    def __contains__(self, name) -> bool:
        if tuple.__contains__(self, name):
            return True
        if not isinstance(name, str):
            return False
        k = _key(name)
        return k in _HAS and tuple.__contains__(self, _HAS[k])

    def __reduce__(self):
        return (Extensions, (tuple(self),))


def widest_vector(extensions) -> tuple:
    """(vector_bytes, vector_registers) of the widest SIMD registers the extensions give."""
    ext = set(extensions)
    if "avx512f" in ext:
        return 64, 32  # zmm0-31
    if "avx" in ext:
        return 32, 16  # ymm0-15
    if "sse" in ext:
        return 16, 16  # xmm0-15
    if "asimd" in ext:
        return 16, 32  # AArch64's v0-v31 (SVE's z registers are as wide at least)
    return 0, 0


def _kib(n_bytes: int):
    """Bytes -> KiB (an int when whole, as every real cache is)."""
    return n_bytes // 1024 if n_bytes % 1024 == 0 else n_bytes / 1024
