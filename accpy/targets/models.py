"""Known target models (`acc.Target.Model`): public facts about a few processors, as data.

Each entry gives what a model's `Target` starts from; keyword arguments of `acc.Target`
override any of it. Three sources: accpy's own entries below (SPECS, each citing its source),
Accera's published table of known processors (devices.py, ACCERA_SPECS), so that
Accera's names work unchanged (`acc.Target("Intel 7900X")`, `Target.Model.INTEL_7960X`), and the
GPUs of gpu/models.py (GPU_SPECS: Accera's CUDA and ROCm models, NVIDIA's H100, a generic OpenCL
device; their limits kept in `extra`, see gpu/models.py). A name matches exactly first; words of
a name (e.g. "8700") are looked up among accpy's own entries first, then Accera's, then the
GPUs'. `cache_sizes` are in KiB (Accera's unit; the constants below are written in bytes and
converted) and list L1 data, L2 and L3 as one core sees them (L1d and L2 are per core; L3 is the
cache the core's complex shares: the whole socket's on Intel's mesh parts, one CCD's 32 MiB on AMD EPYC). Frequencies are base and
maximum turbo/boost in GHz. `extensions` use the cpuinfo names of accpy/targets/target.py
and are written out in full (no implied features added). Every entry names its source.

Enum members are the names upper-cased with runs of other characters turned into "_"
("+" spelled "PLUS"), as Accera names its models: `Model.INTEL_XEON_PLATINUM_8380`;
`str(member)` is the model's display name.
"""
from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass
from typing import Optional

from .devices import KNOWN_CPUS
from .features import Architecture, Category, Runtime, _key, normalize_extensions
from .gemmini import machine as _gm  # Gemmini's dimensions: defined once, in native/gemmini/gemmini.h
from .gpu.models import GPU_MODELS, GPUModel

KiB, MiB = 1 << 10, 1 << 20

_SSE = ("mmx", "sse", "sse2", "sse3", "ssse3", "sse4_1", "sse4_2")
_AVX2 = _SSE + ("avx", "avx2", "fma", "f16c")
_AVX512 = _AVX2 + ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")  # Skylake-SP's set


@dataclass(frozen=True)
class ModelSpec:
    name: str  # display name, also the Target's `name`
    family: str  # microarchitecture
    aliases: tuple  # other names that select this model exactly (codenames)
    category: Category
    architecture: Architecture
    extensions: tuple
    num_cores: int
    num_threads: int
    frequency_GHz: Optional[float]
    turbo_frequency_GHz: Optional[float]
    cache_sizes: tuple
    cache_lines: tuple
    vector_bytes: int
    vector_registers: int
    runtime: Runtime = Runtime.OPENMP
    extra: tuple = ()
    accera: bool = False  # from Accera's table of known devices (devices.py)

    @property
    def key(self) -> str:
        """The model's lookup key and `Target.Model` member name (e.g. "INTEL_7900X")."""
        return _key(self.name)

    def values(self) -> dict:
        """Field values of a `Target` of this model."""
        return dict(name=self.name, category=self.category, architecture=self.architecture, family=self.family,
                    extensions=self.extensions, num_threads=self.num_threads, num_cores=self.num_cores,
                    vector_bytes=self.vector_bytes, vector_registers=self.vector_registers,
                    frequency_GHz=self.frequency_GHz, turbo_frequency_GHz=self.turbo_frequency_GHz,
                    cache_sizes=self.cache_sizes, cache_lines=self.cache_lines, runtime=self.runtime,
                    extra=self.extra)


def _cpu(name, family, aliases, extensions, cores, threads, base, turbo, l1d, l2, l3, vector_bytes, registers):
    return ModelSpec(name, family, aliases, Category.CPU, Architecture.X86_64, extensions, cores, threads, base, turbo,
                     (l1d // KiB, l2 // KiB, l3 // KiB), (64, 64, 64), vector_bytes, registers)


def _arm(name, family, aliases, extensions, cores, l1d, l2, l3):
    sizes = tuple(x // KiB for x in (l1d, l2, l3) if x)
    return ModelSpec(name, family, aliases, Category.CPU, Architecture.AARCH64, extensions, cores, cores, None,
                     None, sizes, (64,) * len(sizes), 16, 32)


SPECS = [
    # Intel Core i7-4770 (Haswell, 2013). Intel ARK, "Intel Core i7-4770 Processor, 8M Cache,
    # up to 3.90 GHz": 4 cores, 8 threads, 3.40 GHz base, 3.90 GHz turbo, 8 MB L3; Haswell
    # cores: 32 KiB L1d, 256 KiB L2 each; AVX2, FMA3, F16C; 16 ymm registers.
    _cpu("Intel Core i7-4770", "Haswell", ("Haswell",), _AVX2, 4, 8, 3.4, 3.9, 32 * KiB, 256 * KiB, 8 * MiB,
         32, 16),
    # Intel Core i7-8700 (Coffee Lake, 2017). Intel ARK, "Intel Core i7-8700 Processor, 12M
    # Cache, up to 4.60 GHz": 6 cores, 12 threads, 3.20 GHz base, 4.60 GHz turbo, 12 MB L3;
    # Skylake-family client cores: 32 KiB L1d, 256 KiB L2 each; AVX2, FMA3, F16C, no AVX-512.
    _cpu("Intel Core i7-8700", "Coffee Lake", ("Coffee Lake",), _AVX2, 6, 12, 3.2, 4.6, 32 * KiB, 256 * KiB,
         12 * MiB, 32, 16),
    # Intel Xeon Gold 6148 (Skylake-SP, 2017). Intel ARK, "Intel Xeon Gold 6148 Processor,
    # 27.5M Cache, 2.40 GHz": 20 cores, 40 threads, 2.40 GHz base, 3.70 GHz turbo, 27.5 MB
    # L3; Skylake-SP cores: 32 KiB L1d, 1 MiB L2 each; AVX-512 F/CD/BW/DQ/VL, 32 zmm registers.
    _cpu("Intel Xeon Gold 6148", "Skylake-SP", ("Skylake-SP", "Skylake-AVX512"), _AVX512, 20, 40, 2.4, 3.7,
         32 * KiB, 1 * MiB, 27 * MiB + 512 * KiB, 64, 32),
    # Intel Xeon Platinum 8380 (Ice Lake-SP, 2021). Intel ARK, "Intel Xeon Platinum 8380
    # Processor, 60M Cache, 2.30 GHz": 40 cores, 80 threads, 2.30 GHz base, 3.40 GHz turbo,
    # 60 MB L3; Sunny Cove cores: 48 KiB L1d, 1.25 MiB L2 each; AVX-512 with VNNI.
    _cpu("Intel Xeon Platinum 8380", "Ice Lake-SP", ("Ice Lake-SP",), _AVX512 + ("avx512_vnni",), 40, 80, 2.3,
         3.4, 48 * KiB, 1 * MiB + 256 * KiB, 60 * MiB, 64, 32),
    # Intel Xeon Platinum 8480+ (Sapphire Rapids, 2023). Intel ARK, "Intel Xeon Platinum
    # 8480+ Processor, 105M Cache, 2.00 GHz": 56 cores, 112 threads, 2.00 GHz base, 3.80 GHz
    # turbo, 105 MB L3; Golden Cove cores: 48 KiB L1d, 2 MiB L2 each; AVX-512 with VNNI,
    # BF16 and FP16; AMX (TILE, INT8, BF16).
    _cpu("Intel Xeon Platinum 8480+", "Sapphire Rapids", ("Sapphire Rapids",),
         _AVX512 + ("avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"),
         56, 112, 2.0, 3.8, 48 * KiB, 2 * MiB, 105 * MiB, 64, 32),
    # AMD EPYC 9654 (Zen 4 "Genoa", 2022). AMD product page "AMD EPYC 9654": 96 cores, 192
    # threads, 2.4 GHz base, up to 3.7 GHz boost, 384 MB L3 = 12 CCDs x 32 MB; Zen 4 cores:
    # 32 KiB L1d, 1 MiB L2 each; AVX-512 (F/CD/BW/DQ/VL, VNNI, BF16) on 512-bit registers
    # executed in two 256-bit halves; 32 zmm registers; no FP16, no AMX.
    _cpu("AMD EPYC 9654", "Zen 4", ("Zen 4", "Genoa"), _AVX512 + ("avx512_vnni", "avx512_bf16"), 96, 192, 2.4,
         3.7, 32 * KiB, 1 * MiB, 32 * MiB, 64, 32),
    # AMD EPYC 9755 (Zen 5 "Turin", 2024). AMD product page "AMD EPYC 9755": 128 cores, 256
    # threads, 2.7 GHz base, up to 4.1 GHz boost, 512 MB L3 = 16 CCDs x 32 MB; Zen 5 cores:
    # 48 KiB L1d, 1 MiB L2 each; AVX-512 (F/CD/BW/DQ/VL, VNNI, BF16) with a full 512-bit
    # datapath; 32 zmm registers; no FP16, no AMX.
    _cpu("AMD EPYC 9755", "Zen 5", ("Zen 5", "Turin"), _AVX512 + ("avx512_vnni", "avx512_bf16"), 128, 256, 2.7,
         4.1, 48 * KiB, 1 * MiB, 32 * MiB, 64, 32),
    # Intel Xeon E5-2630 v3 (Haswell-EP, 2014). Intel ARK, "Intel Xeon Processor E5-2630 v3 (20M
    # Cache, 2.40 GHz)": 8 cores, 16 threads, 2.40 GHz base, 3.20 GHz turbo, 20 MB L3; Haswell
    # cores: 32 KiB L1d, 256 KiB L2 each; AVX2, FMA3, F16C; 16 ymm registers. (Not in Accera's
    # table, which has its sibling "Intel E5-2620 v3"; named in Accera conformance reports.)
    _cpu("Intel Xeon E5-2630 v3", "Haswell-EP", (), _AVX2, 8, 16, 2.4, 3.2, 32 * KiB, 256 * KiB, 20 * MiB, 32, 16),
    # Generic AArch64 cores (the architecture's versions, for cross compilation; SPEC of issue 29).
    # Armv8-A: FP and Advanced SIMD (Neon) only, as the Cortex-A53 / Cortex-A72 of the Raspberry
    # Pi 3B / 4B (Arm Cortex-A72 MPCore TRM: 32 KiB L1 data, 1 MiB L2 shared by 4 cores), 32
    # 128-bit registers (v0-v31).
    _arm("ARMv8-A", "Armv8-A", ("AArch64",), ("fp", "asimd"), 4, 32 * KiB, 1 * MiB, 0),
    # Armv8.2-A with the dot product (SDOT / UDOT) and half-precision extensions, sized as Arm's
    # Neoverse N1 (Arm Neoverse N1 Core TRM: 64 KiB L1 data, 1 MiB private L2 per core; AWS
    # Graviton2's cores, 32 MiB system-level cache).
    _arm("ARMv8.2-A", "Armv8.2-A", ("Neoverse N1", "Graviton2"),
         ("fp", "asimd", "fphp", "asimdhp", "asimddp"), 4, 64 * KiB, 1 * MiB, 32 * MiB),
    # Arm Neoverse V1 (Armv8.4-A with SVE at 256 bits, the dot product, fp16, i8mm and BF16; AWS
    # Graviton3's cores). Arm Neoverse V1 Core TRM: 64 KiB L1 data, 1 MiB private L2; SVE vector
    # length 256 bits (`vector_bytes` 32: accpy emits SVE at that fixed length).
    ModelSpec("Neoverse V1", "Neoverse V1", ("Graviton3",), Category.CPU, Architecture.AARCH64,
              ("fp", "asimd", "fphp", "asimdhp", "asimddp", "i8mm", "bf16", "sve"), 4, 4, None, None,
              (64, 1024, 32768), (64, 64, 64), 32, 32),
    # Armv9-A with SVE2, the int8 matrix multiply (SMMLA) and BF16, sized as Arm's Neoverse N2
    # (Arm Neoverse N2 Core TRM: 64 KiB L1 data, up to 1 MiB private L2). Its Neon half is what
    # accpy emits today; SVE's scalable vectors are not used yet.
    _arm("ARMv9-A", "Armv9-A", ("Neoverse N2",),
         ("fp", "asimd", "fphp", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2"), 4, 64 * KiB, 1 * MiB,
         32 * MiB),
    # Gemmini (UC Berkeley's systolic-array accelerator, github.com/ucb-bar/gemmini, default
    # configuration; SPEC §3): a 16 x 16 array (DIM 16) of int8 inputs with int32
    # accumulation; scratchpad 256 KiB = 4 banks x 4096 rows x 16 int8; accumulator 64 KiB =
    # 1024 rows x 16 int32. Attached to a RISC-V (RV64) core; no x86 extensions. Its own
    # memories are listed in `extra` ("memory", name), so Target.has_memory(MemorySpace.SCRATCHPAD).
    ModelSpec("Gemmini", "Gemmini", (), Category.ACCELERATOR, Architecture.RISCV64, (), 1, 1, None, None, (), (),
              0, 0, Runtime.NONE,
              (("memory", "scratchpad"), ("memory", "accumulator"), ("dim", _gm.DIM), ("input_type", "int8"),
               ("accumulator_type", "int32"), ("scratchpad_bytes", _gm.SPAD_ROWS * _gm.DIM),
               ("scratchpad_banks", _gm.BANK_NUM), ("scratchpad_bank_rows", _gm.BANK_ROWS),
               ("accumulator_bytes", _gm.ACC_ROWS * _gm.DIM * 4), ("accumulator_rows", _gm.ACC_ROWS))),
]



def _accera_extensions(names: str, architecture: Architecture) -> tuple:
    if architecture not in (Architecture.X86_64, Architecture.X86):
        return tuple(n.lower() for n in names.split())  # e.g. "fpu" on a Cortex-M4F, as listed
    # Accera's "AVX-VNNI" on its AVX-512 rows (Cascade Lake, Ice Lake) is AVX512-VNNI
    return normalize_extensions(["AVX512VNNI" if n == "AVX-VNNI" else n for n in names.split()])


def _accera_spec(row) -> ModelSpec:
    name, family, branding, base, turbo, cores, threads, sizes, lines, vbytes, vregs, exts = row[:12]
    architecture = Architecture[row[12]] if len(row) > 12 else Architecture.X86_64
    runtime = Runtime[row[13]] if len(row) > 13 else Runtime.OPENMP
    return ModelSpec(name, family, (), Category.CPU, architecture, _accera_extensions(exts, architecture), cores,
                     threads, float(base), None if turbo is None else float(turbo), tuple(sizes), tuple(lines),
                     vbytes, vregs, runtime, (("branding", branding),) if branding else (), accera=True)


def _accera_specs() -> list:
    own = {s.key for s in SPECS}
    return [sp for sp in map(_accera_spec, KNOWN_CPUS) if sp.key not in own]


ACCERA_SPECS = _accera_specs()


def gpu_spec(gpu: GPUModel) -> ModelSpec:
    """The model of a GPU: category GPU, its runtime, its limits in `extra` (GPUModel.facts). The host
    architecture is the launcher's (HOST: the machine that builds it); `num_cores` counts SMs / compute
    units; `num_threads` 1 (the host threads a launch takes; the device's parallelism is in its facts)."""
    return ModelSpec(gpu.name, gpu.family, gpu.aliases, Category.GPU, Architecture.HOST, (), gpu.num_cores, 1,
                     gpu.frequency_GHz, None, (), (), gpu.vector_bytes, 0, gpu.runtime, gpu.facts(),
                     accera=gpu.accera)


GPU_SPECS = [gpu_spec(g) for g in GPU_MODELS]
ALL_SPECS = SPECS + ACCERA_SPECS + GPU_SPECS
_BY_KEY = {s.key: s for s in ALL_SPECS}


class _ModelName:
    def __str__(self) -> str:
        return self.value


def _model_members() -> list:
    """(member name, display name): each model's key, then its display name as an alias, as Accera's
    enum has them (`Model.INTEL_6700` and `Model["Intel 6700"]` are one member)."""
    out = [(s.key, s.name) for s in ALL_SPECS]
    return out + [(s.name, s.name) for s in ALL_SPECS if s.name != s.key]


# Known target models, one member per entry of SPECS; str(member) is the display name
Model = enum.Enum("Model", _model_members(), type=_ModelName, module=__name__, qualname="Model")
Model.__doc__ = "Known target models: accpy's own entries, then Accera's table; str(member) is the display name."


def spec_of(model) -> ModelSpec:
    """The facts of a `Target.Model` member."""
    return _BY_KEY[model.name]


def _tokens(text: str) -> list:
    return [t for t in _key(text).split("_") if t]


def _name_words(spec: ModelSpec) -> set:
    return set(_tokens(spec.name))


def _branded_words(spec: ModelSpec) -> set:
    """The words of a model's name and of its branding (Accera's column: "Core i7", "Xeon E5")."""
    branding = dict(spec.extra).get("branding", "") if spec.accera else ""
    return set(_tokens(spec.name)) | set(_tokens(branding))


class UnknownTargetError(ValueError, RuntimeError):
    """A target name that names no known device, or several (a ValueError; a RuntimeError as in Accera)."""


def lookup(known_name) -> ModelSpec:
    """The model `known_name` names: a Model, its display name or enum name (case, spaces,
    dashes and dots ignored), a codename alias, or words that occur in one model's name only
    (accpy's own entries are searched first, then Accera's table). Raises UnknownTargetError
    (a ValueError and a RuntimeError) for an unknown or ambiguous name, listing close names."""
    if isinstance(known_name, Model):
        return spec_of(known_name)
    if not isinstance(known_name, str):
        raise TypeError(f"known_name: expected \"HOST\", an acc.Target.Model or a model's name, got {known_name!r}")
    k = _key(known_name)
    if k in _BY_KEY:
        return _BY_KEY[k]
    compact = k.replace("_", "")  # "zen4", "i78700": spaces and dashes may be left out altogether
    words = set(_tokens(known_name))
    # accpy's entries, Accera's by name, then Accera's by name and branding: its rows name a processor
    # without its brand ("Intel 6700", branding "Core i7"), which users write ("Intel Core i7-6700")
    for specs, named in ((SPECS, _name_words), (ACCERA_SPECS, _name_words), (ACCERA_SPECS, _branded_words),
                         (GPU_SPECS, _name_words)):
        exact = [s for s in specs if compact in {_key(n).replace("_", "") for n in (s.name,) + s.aliases}]
        if len(exact) == 1:
            return exact[0]
        matches = exact or ([s for s in specs if words <= named(s)] if words else [])
        if len(matches) > 1 and named is _branded_words:
            # "AMD Ryzen 3 1200": the row every word of whose name was given, not "AMD PRO 1200"
            matches = [s for s in matches if _name_words(s) <= words] or matches
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            shown = ", ".join(repr(s.name) for s in matches[:12]) + (", ..." if len(matches) > 12 else "")
            raise UnknownTargetError(f"Target: the name {known_name!r} is ambiguous: it matches {shown}; "
                                     f"give the full name or an acc.Target.Model")
    names = {s.key: s.name for s in ALL_SPECS}
    for s in ALL_SPECS:
        for a in s.aliases:
            names.setdefault(_key(a), s.name)
    close = difflib.get_close_matches(k, list(names), n=5, cutoff=0.5)
    close_names = list(dict.fromkeys(names[c] for c in close))
    hint = f" Close names: {', '.join(repr(c) for c in close_names)}." if close_names else ""
    raise UnknownTargetError(f"Target: no known device matches {known_name!r}.{hint} Known: \"HOST\", "
                             f"{', '.join(repr(s.name) for s in SPECS + GPU_SPECS)} and the {len(ACCERA_SPECS)} "
                             f"processors of Accera's table (acc.Target.Model lists them all).")


def model_for_brand(brand: str) -> Optional[ModelSpec]:
    """The model whose every name word occurs in a processor brand string, if exactly one does."""
    words = set(_tokens(brand))
    for specs in (SPECS, ACCERA_SPECS):
        found = [s for s in specs if s.category is Category.CPU and set(_tokens(s.name)) <= words]
        if found:
            return found[0] if len(found) == 1 else None
    return None
