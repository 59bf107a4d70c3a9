"""This machine as a target: features, caches, cores and frequencies read from /proc and sysfs
(with a known model's published values where the machine does not tell)."""
from __future__ import annotations

import functools
import os
import platform
import re
from typing import Optional

from .features import (_BASELINE, _CPUINFO_NAMES, ARM_BASELINE, FEATURES, Architecture, Category, Runtime, _kib,
                       _sorted_features, widest_vector)
from .models import UnknownTargetError, lookup, model_for_brand


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
    # x86 machines list their features as "flags", Arm ones as "Features" (asimd, asimddp, sve, ...)
    flags = set((info.get("flags") or info.get("Features") or "").split())
    flags |= {v for k, v in _CPUINFO_NAMES.items() if k in flags}
    if not flags:  # no /proc/cpuinfo: what every CPU of this architecture has
        flags = set(ARM_BASELINE if _architecture() is Architecture.AARCH64 else _BASELINE)
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


    model = model_for_brand(brand)
    if model is not None:
        base = base if base is not None else model.frequency_GHz
        turbo = turbo if turbo is not None else model.turbo_frequency_GHz
    family = _microarchitecture(info) or (model.family if model is not None else brand)
    extra = ()
    posed = posed_model()
    if posed is not None:  # this machine with only the features it shares with that model
        exts = _sorted_features(f for f in exts if f in set(posed.extensions))
        vb, vr = widest_vector(exts)
        family, extra = posed.family, (("posing_as", posed.name),)
    return (("name", "HOST"), ("category", Category.CPU), ("architecture", _architecture()), ("family", family),
            ("extensions", exts), ("num_threads", threads), ("num_cores", _host_cores(threads)),
            ("vector_bytes", vb), ("vector_registers", vr), ("frequency_GHz", base),
            ("turbo_frequency_GHz", turbo), ("cache_sizes", sizes), ("cache_lines", lines),
            ("runtime", Runtime.OPENMP), ("extra", extra))


HOST_MODEL_VARIABLE = "ACCPY_HOST_MODEL"


def posed_model():
    """The known model `ACCPY_HOST_MODEL` names, or None when it is unset or empty.

    With it set (e.g. "Intel Core i7-4770", "Haswell"), `Target.HOST` is this machine posing as a
    smaller one: its instruction-set features are those it shares with that model (so an AVX-512 or
    AMX machine builds, runs and tests the AVX2 code paths, and the tile unit runs on its functional
    model); cores, caches and frequencies stay this machine's. Posing as a larger model adds
    nothing: code must run here."""
    name = os.environ.get(HOST_MODEL_VARIABLE, "").strip()
    if not name:
        return None
    try:
        spec = lookup(name)
    except UnknownTargetError as e:
        raise UnknownTargetError(f"{HOST_MODEL_VARIABLE}={name!r}: {e}") from None
    if spec.category is not Category.CPU or spec.architecture is not _architecture():
        raise ValueError(f"{HOST_MODEL_VARIABLE}={name!r}: expected a CPU model of this machine's architecture "
                         f"({_architecture().value}), got {spec.name} ({spec.category.value}, "
                         f"{spec.architecture.value})")
    return spec


def host_cpu_name() -> str:
    """This machine's processor as /proc/cpuinfo names it."""
    return _cpuinfo_fields().get("model name", "") or "unknown CPU"
