"""`Target`: what a kernel is compiled for (Accera's `Target` API).

    acc.Target.HOST                          this machine, detected once at import
    acc.Target()                             the same (known_name defaults to "HOST")
    acc.Target(acc.Target.Model.AMD_EPYC_9654)   a known model (see models.py)
    acc.Target("Intel Xeon Platinum 8380", num_threads=8)   by name, with overrides
    acc.Target.HOST(vector_bytes=32)         a copy of a target with overrides

Keyword arguments override the model's values (None keeps the model's value). A name
that is neither "HOST" nor one known model raises `RuntimeError` naming the close ones.
Targets are frozen dataclasses: equal when every field is equal, hashable.

Units (Accera's): `cache_sizes` in KiB and `cache_lines` in bytes, one entry per level (L1
data, L2, L3, ...), each the size one core sees (L1d/L2 private, L3 the slice its core
complex shares); `cache_bytes` gives the sizes in bytes, the unit accpy computes with. `vector_bytes` is the width of one SIMD register (64 with AVX-512, 32 with
AVX/AVX2, 16 with SSE); `vector_registers` their number (32 zmm with AVX-512, else 16).

`extensions` holds instruction-set features by their /proc/cpuinfo names ("avx2",
"avx512_vnni", "amx_tile", ...), in a fixed order. When given by the user, Accera's
names ("AVX2", "AVX512", "SSE4.1", "FMA3", ...) are accepted too, case-insensitively,
and a feature brings the features GCC's option for it implies (e.g. "avx512f" brings
"avx2", "fma" and "f16c"). Accera's "AVX512" means the Skylake-SP set (F, CD, BW, DQ,
VL), as in Accera; "AVX2" brings FMA, which every AVX2 processor of Intel (Haswell on)
and AMD (Excavator / Zen on) has and which accpy's AVX2 code uses. Overriding
`extensions` of a CPU target also sets `vector_bytes` and `vector_registers` to the
widest registers those extensions give, unless they are given too.
"""
from __future__ import annotations

import difflib
import enum
import functools
import os
import re
from dataclasses import dataclass, fields
from typing import Optional


class Category(enum.Enum):
    """The kind of device: CPU, or an ACCELERATOR such as Gemmini."""

    CPU = "CPU"
    ACCELERATOR = "ACCELERATOR"


class Architecture(enum.Enum):
    """The instruction-set architecture of a target (HOST: this machine's)."""

    HOST = "HOST"
    X86 = "X86"
    X86_64 = "X86_64"
    ARM = "ARM"
    AARCH64 = "AARCH64"
    RISCV64 = "RISCV64"


class Runtime(enum.Enum):
    """How parallel loops run: OPENMP threads, or NONE."""

    NONE = "NONE"
    DEFAULT = "DEFAULT"
    OPENMP = "OPENMP"


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
FEATURES = tuple(f for f, _, _, _ in _FEATURES)
_BASELINE = frozenset({"mmx", "sse", "sse2"})
_ORDER = {f: k for k, f in enumerate(FEATURES)}
_GCC_OPTION = {f: opt for f, opt, _, _ in _FEATURES}
_IMPLIES = {f: imp for f, _, _, imp in _FEATURES}
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
})
# `has()`: one feature per name (has("AVX512") asks for AVX-512 F, has("AVX2") for AVX2)
_HAS = {k: v[0] for k, v in _NAMES.items()}
_HAS.update({"AVX512": "avx512f", "AVX2": "avx2", "SSE4": "sse4_2"})


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


def widest_vector(extensions) -> tuple:
    """(vector_bytes, vector_registers) of the widest SIMD registers the extensions give."""
    ext = set(extensions)
    if "avx512f" in ext:
        return 64, 32  # zmm0-31
    if "avx" in ext:
        return 32, 16  # ymm0-15
    if "sse" in ext:
        return 16, 16  # xmm0-15
    return 0, 0


# -- host detection -----------------------------------------------------------------------

def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _cpuinfo_fields() -> dict:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    out = {}
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if not line.strip():
            if out:
                break
            continue
        k, _, v = line.partition(":")
        out.setdefault(k.strip(), v.strip())
    return out


def _host_features(info: dict) -> tuple:
    flags = set(info.get("flags", "").split())
    flags |= {v for k, v in _CPUINFO_NAMES.items() if k in flags}
    if not flags:  # no /proc/cpuinfo: what every x86-64 CPU has
        flags = set(_BASELINE)
    # as the CPU reports them (no implied features added: the kernel hides a feature the OS
    # does not enable, and a feature added here would be checked at every call)
    return _sorted_features(f for f in FEATURES if f in flags)


def _size_bytes(text: str) -> Optional[int]:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text or "", re.IGNORECASE)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def _host_caches() -> tuple:
    """((L1d, L2, L3, ...) sizes, line sizes), bytes, as cpu0 sees them (sysfs, else sysconf)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    levels = {}
    try:
        entries = sorted(e for e in os.listdir(base) if e.startswith("index"))
    except OSError:
        entries = []
    for e in entries:
        level, kind = _read(f"{base}/{e}/level"), _read(f"{base}/{e}/type")
        size = _size_bytes(_read(f"{base}/{e}/size") or "")
        line = _read(f"{base}/{e}/coherency_line_size")
        if not level or not level.isdigit() or not size or kind == "Instruction":
            continue
        levels[int(level)] = (size, int(line) if line and line.isdigit() and int(line) > 0 else 64)
    if not levels:
        names = [("SC_LEVEL1_DCACHE_SIZE", "SC_LEVEL1_DCACHE_LINESIZE"),
                 ("SC_LEVEL2_CACHE_SIZE", "SC_LEVEL2_CACHE_LINESIZE"),
                 ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL3_CACHE_LINESIZE")]
        for lvl, (s, l) in enumerate(names, 1):
            try:
                size, line = os.sysconf(s), os.sysconf(l)
            except (ValueError, OSError, AttributeError):
                continue
            if size and size > 0:
                levels[lvl] = (size, line if line and line > 0 else 64)
    sizes, lines = [], []
    for lvl in range(1, max(levels, default=0) + 1):
        if lvl not in levels:
            break
        sizes.append(levels[lvl][0])
        lines.append(levels[lvl][1])
    return tuple(sizes), tuple(lines)


def _host_cores(threads: int) -> int:
    """Physical cores: distinct (package, core) pairs of the online CPUs (sysfs)."""
    base = "/sys/devices/system/cpu"
    cores = set()
    try:
        cpus = [e for e in os.listdir(base) if re.fullmatch(r"cpu\d+", e)]
    except OSError:
        cpus = []
    for c in cpus:
        if _read(f"{base}/{c}/online") == "0":
            continue
        core = _read(f"{base}/{c}/topology/core_id")
        pkg = _read(f"{base}/{c}/topology/physical_package_id")
        if core is None:
            return threads
        cores.add((pkg, core))
    return min(len(cores), threads) if cores else threads


# (cpuinfo "cpu family", models) -> microarchitecture, for `Target.HOST.family`.
# Sources: Intel SDM vol. 4 table 2-1 (DisplayFamily_DisplayModel signatures); AMD processor
# programming references (family 17h: Zen/Zen 2, 19h: Zen 3/Zen 4, 1Ah: Zen 5).
_INTEL_FAMILY6 = {
    0x3C: "Haswell", 0x3F: "Haswell", 0x45: "Haswell", 0x46: "Haswell",
    0x3D: "Broadwell", 0x47: "Broadwell", 0x4F: "Broadwell", 0x56: "Broadwell",
    0x4E: "Skylake", 0x5E: "Skylake", 0x55: "Skylake-SP",  # also Cascade/Cooper Lake (by stepping)
    0x8E: "Kaby Lake", 0x9E: "Coffee Lake", 0xA5: "Comet Lake", 0x66: "Cannon Lake",
    0x7D: "Ice Lake", 0x7E: "Ice Lake", 0x6A: "Ice Lake-SP", 0x6C: "Ice Lake-SP",
    0x8C: "Tiger Lake", 0x8D: "Tiger Lake", 0xA7: "Rocket Lake",
    0x97: "Alder Lake", 0x9A: "Alder Lake", 0xB7: "Raptor Lake", 0xBA: "Raptor Lake", 0xBF: "Raptor Lake",
    0x8F: "Sapphire Rapids", 0xCF: "Emerald Rapids", 0xAD: "Granite Rapids", 0xAE: "Granite Rapids",
    0xAA: "Meteor Lake", 0xAC: "Meteor Lake",
}


def _microarchitecture(info: dict) -> Optional[str]:
    try:
        family, model = int(info.get("cpu family", "")), int(info.get("model", ""))
    except ValueError:
        return None
    vendor = info.get("vendor_id", "")
    if vendor == "GenuineIntel" and family == 6:
        name = _INTEL_FAMILY6.get(model)
        if name == "Skylake-SP":
            stepping = info.get("stepping", "")
            stepping = int(stepping) if stepping.isdigit() else 0
            name = "Cooper Lake" if stepping >= 10 else "Cascade Lake" if stepping >= 5 else name
        return name
    if vendor == "AuthenticAMD":
        if family == 0x17:
            return "Zen 2" if model >= 0x30 else "Zen"
        if family == 0x19:
            return "Zen 4" if (0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF) else "Zen 3"
        if family == 0x1A:
            return "Zen 5"
    return None


def _host_frequencies(brand: str) -> tuple:
    """(base, turbo) GHz: base from the brand string ("@ 2.30GHz") or sysfs; None when unknown."""
    base = turbo = None
    m = re.search(r"@\s*([\d.]+)\s*GHz", brand, re.IGNORECASE)
    if m:
        base = float(m.group(1))
    cpufreq = "/sys/devices/system/cpu/cpu0/cpufreq"
    if base is None:
        khz = _read(f"{cpufreq}/base_frequency")
        if khz and khz.isdigit():
            base = int(khz) / 1e6
    khz = _read(f"{cpufreq}/cpuinfo_max_freq")
    if khz and khz.isdigit():
        turbo = int(khz) / 1e6
    return base, turbo


def _architecture() -> Architecture:
    import platform

    m = platform.machine().lower()
    return {"x86_64": Architecture.X86_64, "amd64": Architecture.X86_64, "i386": Architecture.X86,
            "i686": Architecture.X86, "aarch64": Architecture.AARCH64, "arm64": Architecture.AARCH64,
            "riscv64": Architecture.RISCV64}.get(m, Architecture.X86_64 if m.startswith("x86") else Architecture.ARM
                                                  if m.startswith("arm") else Architecture.HOST)


@functools.lru_cache(maxsize=None)
def _host_values() -> tuple:
    """Field values of this machine (read once per process)."""
    info = _cpuinfo_fields()
    brand = info.get("model name", "") or "unknown CPU"
    exts = _host_features(info)
    vb, vr = widest_vector(exts)
    threads = os.cpu_count() or 1
    sizes, lines = _host_caches()
    sizes = tuple(_kib(b) for b in sizes)  # sysfs gives bytes; targets hold KiB as Accera's do
    base, turbo = _host_frequencies(brand)
    # a known model the brand string names (every word of the model's name in it): its
    # published frequencies where this machine does not tell (as Accera does for HOST)
    from .models import model_for_brand

    model = model_for_brand(brand)
    if model is not None:
        base = base if base is not None else model.frequency_GHz
        turbo = turbo if turbo is not None else model.turbo_frequency_GHz
    family = _microarchitecture(info) or (model.family if model is not None else brand)
    return (("name", "HOST"), ("category", Category.CPU), ("architecture", _architecture()), ("family", family),
            ("extensions", exts), ("num_threads", threads), ("num_cores", _host_cores(threads)),
            ("vector_bytes", vb), ("vector_registers", vr), ("frequency_GHz", base),
            ("turbo_frequency_GHz", turbo), ("cache_sizes", sizes), ("cache_lines", lines),
            ("runtime", Runtime.OPENMP), ("extra", ()))


def host_cpu_name() -> str:
    """This machine's processor as /proc/cpuinfo names it."""
    return _cpuinfo_fields().get("model name", "") or "unknown CPU"


# -- the Target class -----------------------------------------------------------------------

def _enum(value, cls, what):
    if isinstance(value, cls):
        return value
    if isinstance(value, str) and _key(value) in cls.__members__:
        return cls[_key(value)]
    raise TypeError(f"{what}: expected an acc.Target.{cls.__name__} "
                    f"({', '.join(cls.__members__)}), got {value!r}")


def _count(value, what, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what}: expected an integer >= {minimum}, got {value!r}")
    return value


def _ghz(value, what):
    if isinstance(value, dict):  # Accera's turbo table {active cores: GHz}: the highest
        value = max(value.values()) if value else None
        if value is None:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{what}: expected a frequency in GHz > 0, got {value!r}")
    return float(value)


def _kib(n_bytes: int):
    """Bytes -> KiB (an int when whole, as every real cache is)."""
    return n_bytes // 1024 if n_bytes % 1024 == 0 else n_bytes / 1024


def _cache_sizes(value):
    """`cache_sizes` in KiB (Accera's unit), L1 data first; ints, or floats such as 19.25 * 1024."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"cache_sizes: expected a list of sizes in KiB (L1, L2, ...), got {value!r}")
    out = []
    for v in value:
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"cache_sizes: expected positive sizes in KiB, got {v!r}")
        out.append(v)
    if out and out[0] > 4096:  # no processor has a 4 MiB L1 data cache: these are bytes
        raise ValueError(f"cache_sizes: an L1 data cache of {out[0]} KiB is not plausible: cache sizes are in KiB, "
                         f"as in Accera ({out[0]} bytes = {out[0] / 1024:g} KiB)")
    return tuple(out)


def _sizes(value, what, minimum):
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{what}: expected a list of sizes in bytes (L1, L2, ...), got {value!r}")
    out = []
    for v in value:
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{what}: expected positive integers (bytes), got {v!r}")
        if v < minimum:
            raise ValueError(f"{what}: {v} bytes is not a plausible cache line size (bytes, e.g. 64)")
        out.append(v)
    return tuple(out)


def _extra(value):
    items = value.items() if isinstance(value, dict) else value
    out = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"extra: expected (name, value) pairs, got {item!r}")
        hash(item[1])
        out.append(item)
    return tuple(out)


_OVERRIDABLE = ("category", "architecture", "runtime", "name", "family", "extensions", "num_threads", "num_cores",
                "vector_bytes", "vector_registers", "frequency_GHz", "tensor_core_info", "turbo_frequency_GHz",
                "cache_sizes", "cache_lines", "extra")


def _apply(values: dict, overrides: dict) -> dict:
    """`values` (a target's fields) with the given overrides (None keeps a value), validated."""
    unknown = [k for k in overrides if k not in _OVERRIDABLE]
    if unknown:
        raise TypeError(f"Target: unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"accepted: {', '.join(_OVERRIDABLE)}")
    o = {k: v for k, v in overrides.items() if v is not None}
    if "tensor_core_info" in o:
        raise ValueError("tensor_core_info: GPU tensor cores are not supported by accpy")
    out = dict(values)
    if "category" in o:
        out["category"] = _enum(o["category"], Category, "category")
    if "architecture" in o:
        out["architecture"] = _enum(o["architecture"], Architecture, "architecture")
    if "runtime" in o:
        out["runtime"] = _enum(o["runtime"], Runtime, "runtime")
    for k in ("name", "family"):
        if k in o:
            if not isinstance(o[k], str):
                raise TypeError(f"{k}: expected a string, got {o[k]!r}")
            out[k] = o[k]
    if "extensions" in o:
        out["extensions"] = normalize_extensions(o["extensions"])
        # the register shape follows the new extensions, where not given too
        if out["category"] is Category.CPU:
            vb, vr = widest_vector(out["extensions"])
            out["vector_bytes"] = vb if "vector_bytes" not in o else out["vector_bytes"]
            out["vector_registers"] = vr if "vector_registers" not in o else out["vector_registers"]
    for k in ("num_threads", "num_cores"):
        if k in o:
            out[k] = _count(o[k], k)
    for k in ("vector_bytes", "vector_registers"):
        if k in o:
            out[k] = _count(o[k], k, minimum=0)
    for k in ("frequency_GHz", "turbo_frequency_GHz"):
        if k in o:
            out[k] = _ghz(o[k], k)
    if "cache_sizes" in o:
        out["cache_sizes"] = _cache_sizes(o["cache_sizes"])
    if "cache_lines" in o:
        out["cache_lines"] = _sizes(o["cache_lines"], "cache_lines", 8)
    if "extra" in o:
        out["extra"] = _extra(o["extra"])
    return out


_GENERIC = (("name", "custom"), ("category", Category.CPU), ("architecture", Architecture.X86_64), ("family", ""),
            ("extensions", ("mmx", "sse", "sse2")), ("num_threads", 1), ("num_cores", 1), ("vector_bytes", 16),
            ("vector_registers", 16), ("frequency_GHz", None), ("turbo_frequency_GHz", None), ("cache_sizes", ()),
            ("cache_lines", ()), ("runtime", Runtime.OPENMP), ("extra", ()))


@dataclass(frozen=True, init=False)
class Target:
    """A compilation target: the host, a known model, or a custom processor.

    `Target(known_name="HOST", category=None, architecture=None, runtime=None, name=None,
    family=None, extensions=None, num_threads=None, num_cores=None, vector_bytes=None,
    vector_registers=None, frequency_GHz=None, tensor_core_info=None,
    turbo_frequency_GHz=None, cache_sizes=None, cache_lines=None, *, model=None, extra=None)`

    `known_name`: "HOST" (this machine), an `acc.Target.Model`, a model's name (matched
    ignoring case, spaces, dashes and dots; the words of one model's name are enough, e.g.
    "i7-8700" or "8380"), or None for a generic x86-64 CPU. `model=` is a synonym.
    """

    name: str
    category: Category
    architecture: Architecture
    family: str
    extensions: tuple
    num_threads: int
    num_cores: int
    vector_bytes: int
    vector_registers: int
    frequency_GHz: Optional[float]
    turbo_frequency_GHz: Optional[float]
    cache_sizes: tuple
    cache_lines: tuple
    runtime: Runtime
    extra: tuple  # (key, value) pairs for targets with more facts, e.g. ("memory", "scratchpad")

    def __init__(self, known_name="HOST", category=None, architecture=None, runtime=None, name=None, family=None,
                 extensions=None, num_threads=None, num_cores=None, vector_bytes=None, vector_registers=None,
                 frequency_GHz=None, tensor_core_info=None, turbo_frequency_GHz=None, cache_sizes=None,
                 cache_lines=None, *, model=None, extra=None):
        if model is not None:
            if known_name not in ("HOST", None, model):
                raise ValueError(f"Target: known_name={known_name!r} and model={model!r} name different targets")
            known_name = model
        if known_name is None or known_name == "":
            base = dict(_GENERIC)
        elif isinstance(known_name, str) and _key(known_name) == "HOST":
            base = dict(_host_values())
        else:
            from .models import lookup

            base = lookup(known_name).values()
        overrides = dict(category=category, architecture=architecture, runtime=runtime, name=name, family=family,
                         extensions=extensions, num_threads=num_threads, num_cores=num_cores,
                         vector_bytes=vector_bytes, vector_registers=vector_registers, frequency_GHz=frequency_GHz,
                         tensor_core_info=tensor_core_info, turbo_frequency_GHz=turbo_frequency_GHz,
                         cache_sizes=cache_sizes, cache_lines=cache_lines, extra=extra)
        self._set(_apply(base, overrides))

    def _set(self, values: dict) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, values[f.name])

    def _values(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __call__(self, **overrides) -> "Target":
        """A copy of this target with some values overridden (same keywords as `Target(...)`)."""
        new = object.__new__(type(self))
        new._set(_apply(self._values(), overrides))
        return new

    # -- features -------------------------------------------------------------------------
    def has(self, feature: str) -> bool:
        """Whether the target has an instruction-set feature ("AVX2", "avx512f", "AMX", ...)."""
        k = _key(feature)
        f = _HAS.get(k, str(feature).lower())
        return f in self.extensions

    def has_memory(self, space) -> bool:
        """Whether the target has a named memory (e.g. Gemmini's SCRATCHPAD, an acc.MemorySpace)."""
        v = getattr(space, "value", space)
        v = v.lower() if isinstance(v, str) else v
        return any(k == "memory" and val == v for k, val in self.extra)

    @property
    def memories(self) -> tuple:
        """Names of the target's own memories (e.g. ("scratchpad", "accumulator") for Gemmini)."""
        return tuple(v for k, v in self.extra if k == "memory")

    def get(self, key: str, default=None):
        """The first value of `key` in `extra` (e.g. Gemmini's "dim"), or `default`."""
        for k, v in self.extra:
            if k == key:
                return v
        return default

    @property
    def cache_bytes(self) -> tuple:
        """`cache_sizes` (KiB, Accera's unit) in bytes, per level."""
        return tuple(int(round(s * 1024)) for s in self.cache_sizes)

    @property
    def is_cpu(self) -> bool:
        """Whether the target is a CPU (not an accelerator)."""
        return self.category is Category.CPU

    def required_features(self) -> list:
        """Features the emitted code may use beyond x86-64's baseline: checked at call time (no SIGILL)."""
        if not self.is_cpu or self.architecture not in (Architecture.X86_64, Architecture.X86):
            return []  # the features named here are x86 ones (an ARM model's "fpu" is not)
        return [f for f in self.extensions if f not in _BASELINE]

    def compiler_flags(self) -> list:
        """gcc flags that enable exactly this target's instruction-set extensions."""
        flags = [_GCC_OPTION[f] for f in self.required_features()]
        if self.has("avx512f"):
            flags.append("-mprefer-vector-width=512" if self.vector_bytes >= 64 else
                         f"-mprefer-vector-width={max(self.vector_bytes, 16) * 8}")
        return flags

    def describe(self) -> str:
        """A stable description of what code generation may depend on (function-name hashes)."""
        return "|".join([self.name, self.category.value, self.architecture.value, ",".join(self.extensions),
                         str(self.vector_bytes), str(self.vector_registers), str(self.num_threads),
                         str(self.num_cores), ",".join(map(str, self.cache_sizes)),
                         ",".join(map(str, self.cache_lines)), repr(self.extra)])


def host_target() -> Target:
    """This machine (equal to `acc.Target.HOST`)."""
    return Target("HOST")
