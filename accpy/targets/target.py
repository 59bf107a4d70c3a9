"""`Target`: what a kernel is compiled for. `Target.HOST` reads this machine's CPU."""
from __future__ import annotations

import dataclasses
import enum
import os
from dataclasses import dataclass, field
from typing import Optional


class Category(enum.Enum):
    CPU = "CPU"
    ACCELERATOR = "ACCELERATOR"


class Architecture(enum.Enum):
    HOST = "HOST"
    X86_64 = "X86_64"
    RISCV64 = "RISCV64"


# cpuinfo flag -> the gcc option enabling it (in a sensible order)
_GCC_FLAGS = [("avx", "-mavx"), ("avx2", "-mavx2"), ("fma", "-mfma"), ("f16c", "-mf16c"),
              ("avx512f", "-mavx512f"), ("avx512bw", "-mavx512bw"), ("avx512vl", "-mavx512vl"),
              ("avx512dq", "-mavx512dq"), ("avx512_vnni", "-mavx512vnni"), ("avx512_bf16", "-mavx512bf16"),
              ("avx512_fp16", "-mavx512fp16"), ("amx_tile", "-mamx-tile"), ("amx_int8", "-mamx-int8"),
              ("amx_bf16", "-mamx-bf16")]
# names users may give in `extensions`, mapped to cpuinfo flags
_ALIASES = {"AVX": "avx", "AVX2": "avx2", "FMA": "fma", "FMA3": "fma", "F16C": "f16c",
            "AVX512": "avx512f", "AVX512F": "avx512f", "AVX512BW": "avx512bw", "AVX512VL": "avx512vl",
            "AVX512DQ": "avx512dq", "AVX512VNNI": "avx512_vnni", "AVX512BF16": "avx512_bf16",
            "AVX512FP16": "avx512_fp16", "AMX": "amx_tile", "AMX-TILE": "amx_tile",
            "AMX-INT8": "amx_int8", "AMX-BF16": "amx_bf16"}
# what __builtin_cpu_supports() calls them (for the run-time feature check)
BUILTIN_NAMES = {"avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "avx512f": "avx512f",
                 "avx512bw": "avx512bw", "avx512vl": "avx512vl", "avx512dq": "avx512dq",
                 "avx512_vnni": "avx512vnni", "avx512_bf16": "avx512bf16", "avx512_fp16": "avx512fp16",
                 "amx_tile": "amx-tile", "amx_int8": "amx-int8", "amx_bf16": "amx-bf16"}


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cpu_flags() -> set:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _cpu_name() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def _cache_sizes() -> tuple:
    """(L1d, L2, L3) in bytes per core / shared, from sysfs."""
    sizes = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return (32 * 1024, 1024 * 1024, 8 * 1024 * 1024)
    for e in entries:
        if not e.startswith("index"):
            continue
        level = _read(f"{base}/{e}/level")
        kind = _read(f"{base}/{e}/type")
        size = _read(f"{base}/{e}/size")
        if not level or not size or kind == "Instruction":
            continue
        mult = 1024 if size.endswith("K") else 1024 * 1024 if size.endswith("M") else 1
        sizes[int(level)] = int(size.rstrip("KM")) * mult
    return (sizes.get(1, 32 * 1024), sizes.get(2, 1024 * 1024), sizes.get(3, 8 * 1024 * 1024))


@dataclass(frozen=True)
class Target:
    """A compilation target. Keyword arguments override the known model's values."""

    name: str = "HOST"
    category: Category = Category.CPU
    architecture: Architecture = Architecture.X86_64
    family: str = ""
    extensions: tuple = ()
    num_threads: int = 1
    num_cores: int = 1
    vector_bytes: int = 16
    vector_registers: int = 16
    frequency_GHz: Optional[float] = None
    cache_sizes: tuple = (32 * 1024, 1024 * 1024, 8 * 1024 * 1024)
    cache_lines: tuple = (64, 64, 64)
    extra: tuple = field(default=())  # (key, value) pairs for targets with more facts

    # -- features -------------------------------------------------------------------------
    def has(self, feature: str) -> bool:
        f = _ALIASES.get(feature.upper(), feature.lower())
        return f in self.extensions

    def has_memory(self, space) -> bool:
        """Whether the target has a named memory (e.g. Gemmini's SCRATCHPAD)."""
        return any(k == "memory" and v == space.value for k, v in self.extra)

    @property
    def is_cpu(self) -> bool:
        return self.category is Category.CPU

    def compiler_flags(self) -> list:
        """gcc flags that enable exactly this target's instruction-set extensions."""
        flags = [opt for flag, opt in _GCC_FLAGS if flag in self.extensions]
        if self.has("avx512f"):
            flags.append("-mprefer-vector-width=512")
        return flags

    def required_features(self) -> list:
        """Features the emitted code may use: checked at call time (no SIGILL)."""
        return [f for f, _ in _GCC_FLAGS if f in self.extensions]

    def describe(self) -> str:
        """A stable description used in function-name hashes."""
        return f"{self.name}|{self.architecture.value}|{','.join(sorted(self.extensions))}|{self.vector_bytes}"

    def __call__(self, **overrides) -> "Target":
        return dataclasses.replace(self, **overrides)


def host_target() -> Target:
    flags = _cpu_flags()
    exts = tuple(f for f, _ in _GCC_FLAGS if f in flags)
    vb = 64 if "avx512f" in flags else 32 if "avx2" in flags else 16
    n = os.cpu_count() or 1
    return Target(name="HOST", family=_cpu_name(), extensions=exts, num_threads=n, num_cores=n,
                  vector_bytes=vb, vector_registers=32 if vb == 64 else 16, cache_sizes=_cache_sizes())
