"""`Target`: what a kernel is compiled for (Accera's `Target` API).

    acc.Target.HOST                          this machine, detected once at import
    acc.Target()                             the same (known_name defaults to "HOST")
    acc.Target(acc.Target.Model.AMD_EPYC_9654)   a known model (see models.py)
    acc.Target("Intel Xeon Platinum 8380", num_threads=8)   by name, with overrides
    acc.Target.HOST(vector_bytes=32)         a copy of a target with overrides
    acc.Target(acc.Target.Model.NVIDIA_A100) a GPU (also "NVidia V100", Model.AMD_MI100, Model.OPENCL)
    acc.Target(category=acc.Target.Category.GPU, runtime=acc.Target.Runtime.ROCM)   a generic GPU
    accpy.targets.opencl_device_target()     the installed OpenCL runtime's device (e.g. PoCL's)

Keyword arguments override the model's values (None keeps the model's value). A name
that is neither "HOST" nor one known model raises `RuntimeError` naming the close ones.
Targets are dataclasses: equal when every field is equal, hashable.

A target the user made can be changed by assignment, as in Accera (`t = acc.Target();
t.num_threads = 64`): the value is checked and normalized as the same keyword would be
(`t.extensions = ["AVX2"]` also resets the vector width). Code, function names and dict keys
depend on a target's values, so a target is *sealed*, and assignment raises
`dataclasses.FrozenInstanceError`, once anything depends on it: `acc.Target.HOST` (shared by
every plan that names no target) from the start, any target once a plan is made for it or once
it is hashed (a dict key, a set member). `t(num_threads=64)` makes a changed copy of any
target; copies (that call, `copy.copy`, pickling) start unsealed.

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

GPU targets (category GPU) are made from a GPU model (gpu/models.py) and keep its limits in
`extra` (properties `warp_size`, `max_threads_per_block`, `max_block_size`, `max_shared_memory_per_block`,
`max_static_shared_memory_per_block`, `max_registers_per_block`, `device_arch`, `tensor_core_info`;
None, or no tensor cores, on other targets); `extra=` on a GPU replaces the facts it names and keeps
the others. Their runtime launches their kernels (CUDA on NVIDIA, ROCM on AMD, OPENCL or VULKAN on
any). A CPU or accelerator model is never made a GPU, nor given a GPU runtime (ValueError): its
facts describe code running on its own cores, not a device's limits. A generic GPU (no model) has
the limits every OpenCL device guarantees.
"""
from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, fields
from typing import Optional

from .features import (_HAS, ARM_FEATURES, GPU_RUNTIMES, Architecture, Category, Extensions, Runtime, _key,
                       normalize_extensions, widest_vector)
from .gpu.enums import GridUnit
from .gpu.models import (NO_TENSOR_CORES, GPUModel, check_runtime, generic_gpu, gpu_extra,
                         read_opencl_device)
from .host import _host_values
from .library import libraries, libraries_for, vector_isa_for
from .tensor_unit import tensor_units
from .models import gpu_spec, lookup
from .toolchain import toolchain_for


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


def _check_architecture(architecture, extensions) -> None:
    """ValueError for extensions of one architecture on a target of another (x86's on Arm or back)."""
    arm = [e for e in extensions if e in ARM_FEATURES]
    if architecture in (Architecture.ARM, Architecture.AARCH64):
        other = [e for e in extensions if e not in ARM_FEATURES]
    elif arm:
        other = arm
    else:
        return
    if other:
        raise ValueError(f"extensions: {', '.join(other)} {'is' if len(other) == 1 else 'are'} not "
                         f"{architecture.value} instruction-set extension{'' if len(other) == 1 else 's'}; give "
                         f"architecture= too (e.g. acc.Target(\"ARMv8.2-A\") for AArch64 with Neon and dot "
                         f"products)")


_OVERRIDABLE = ("category", "type", "architecture", "runtime", "name", "family", "extensions", "num_threads",
                "num_cores", "vector_bytes", "vector_registers", "frequency_GHz", "tensor_core_info",
                "turbo_frequency_GHz", "cache_sizes", "cache_lines", "extra")


def _apply(values: dict, overrides: dict) -> dict:
    """`values` (a target's fields) with the given overrides (None keeps a value), validated."""
    unknown = [k for k in overrides if k not in _OVERRIDABLE]
    if unknown:
        raise TypeError(f"Target: unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"accepted: {', '.join(_OVERRIDABLE)}")
    o = {k: v for k, v in overrides.items() if v is not None}
    out = dict(values)
    if "type" in o:  # Accera's manual writes Target(type=Target.Category.CPU): the category
        t = _enum(o.pop("type"), Category, "type")
        if "category" in o and _enum(o["category"], Category, "category") is not t:
            raise ValueError(f"Target: type={t} and category={o['category']} disagree (type is a synonym of category)")
        o["category"] = t
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
        _check_architecture(out["architecture"], out["extensions"])
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
        given = _extra(o["extra"])
        out["extra"] = gpu_extra(out["extra"], given) if out["category"] is Category.GPU else given
    if "tensor_core_info" in o:
        if out["category"] is not Category.GPU:
            raise ValueError(f"tensor_core_info: only GPU targets have tensor cores; {out['name']!r} is a "
                             f"{out['category'].name} (a CPU's tensor units come with its extensions, e.g. AMX)")
        out["extra"] = gpu_extra(out["extra"], (("tensor_core_info", o["tensor_core_info"]),))
    _check_device(values, out)
    return out


def _check_device(before: dict, out: dict) -> None:
    """ValueError when a target's values mix a CPU's and a GPU's: a CPU or accelerator model made a GPU
    (or back), a GPU runtime on a CPU, a CPU runtime (or another vendor's) on a GPU, extensions on a GPU."""
    name, was, now = out["name"], before["category"], out["category"]
    if now is Category.GPU and was is not Category.GPU:
        # a CPU model's facts (cores, caches, vector registers) are not a GPU's limits (warp size, threads
        # and shared memory per block), which binds and shared caches are checked against
        raise ValueError(f"category: GPU targets are made from a GPU model; {name!r} is a {was.name} model, whose "
                         f"facts are not a GPU's limits: give a GPU model (acc.Target.Model.NVIDIA_A100, AMD_MI100, "
                         f"OPENCL, ...), or acc.Target(category=acc.Target.Category.GPU, runtime=...) for a "
                         f"generic GPU")
    if was is Category.GPU and now is not Category.GPU:
        raise ValueError(f"category: {name!r} is a GPU model, not a {now.name}; a {now.name} target is made from "
                         f"HOST or a {now.name} model")
    if now is Category.GPU:
        check_runtime(out["runtime"], dict(out["extra"]).get("device_arch", ""), name)
        if out["extensions"]:
            raise ValueError(f"extensions: {name!r} is a GPU; instruction-set extensions "
                             f"({', '.join(out['extensions'])}) are a CPU's")
    elif out["runtime"] in GPU_RUNTIMES:
        # code for a CPU runs on its cores: a GPU runtime launches kernels on a device whose limits a CPU
        # model does not describe (OpenCL on this CPU, e.g. PoCL, is a device: opencl_device_target())
        raise ValueError(f"runtime: {out['runtime'].name} is a GPU runtime, and {name!r} is a {now.name} target; a "
                         f"CPU's parallel loops run with OPENMP (or NONE). For a GPU give a GPU model; for an OpenCL "
                         f"device of this machine, accpy.targets.opencl_device_target()")


def _generic_gpu(known_name, category, type) -> bool:
    """Whether `Target(known_name, category=..., type=...)` asks for a generic GPU (no model named)."""
    if not (known_name is None or known_name == "" or (isinstance(known_name, str) and _key(known_name) == "HOST")):
        return False
    return any(c is not None and _enum(c, Category, what) is Category.GPU for c, what in ((category, "category"),
                                                                                            (type, "type")))


_GENERIC = (("name", "custom"), ("category", Category.CPU), ("architecture", Architecture.X86_64), ("family", ""),
            ("extensions", ("mmx", "sse", "sse2")), ("num_threads", 1), ("num_cores", 1), ("vector_bytes", 16),
            ("vector_registers", 16), ("frequency_GHz", None), ("turbo_frequency_GHz", None), ("cache_sizes", ()),
            ("cache_lines", ()), ("runtime", Runtime.OPENMP), ("extra", ()))


_RESOLVED = ("_vector_isa", "_tensor_units", "_toolchain")  # interfaces kept on a target (Target._resolved)


@dataclass(init=False, eq=True)
class Target:
    """A compilation target: the host, a known model, or a custom processor.

    `Target(known_name="HOST", category=None, architecture=None, runtime=None, name=None,
    family=None, extensions=None, num_threads=None, num_cores=None, vector_bytes=None,
    vector_registers=None, frequency_GHz=None, tensor_core_info=None,
    turbo_frequency_GHz=None, cache_sizes=None, cache_lines=None, *, model=None, extra=None, type=None)`

    `known_name`: "HOST" (this machine), an `acc.Target.Model`, a model's name (matched
    ignoring case, spaces, dashes and dots; the words of one model's name are enough, e.g.
    "i7-8700" or "8380"), or None for a generic x86-64 CPU. `model=` is a synonym.
    `type=` is a synonym of `category` (Accera's manual writes `Target(type=Target.Category.CPU)`).
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
                 cache_lines=None, *, model=None, extra=None, type=None):
        if model is not None:
            if known_name not in ("HOST", None, model):
                raise ValueError(f"Target: known_name={known_name!r} and model={model!r} name different targets")
            known_name = model
        if _generic_gpu(known_name, category, type):
            # Accera's Target(category=GPU, runtime=...): a GPU of that runtime with nothing else known
            given = Runtime.OPENCL if runtime is None else _enum(runtime, Runtime, "runtime")
            base = gpu_spec(generic_gpu(given)).values()
        elif known_name is None or known_name == "":
            base = dict(_GENERIC)
        elif isinstance(known_name, str) and _key(known_name) == "HOST":
            base = dict(_host_values())
        elif isinstance(known_name, GPUModel):  # a device's facts, e.g. read from the OpenCL runtime
            base = gpu_spec(known_name).values()
        else:
            base = lookup(known_name).values()
        overrides = dict(category=category, architecture=architecture, runtime=runtime, name=name, family=family,
                         extensions=extensions, num_threads=num_threads, num_cores=num_cores,
                         vector_bytes=vector_bytes, vector_registers=vector_registers, frequency_GHz=frequency_GHz,
                         tensor_core_info=tensor_core_info, turbo_frequency_GHz=turbo_frequency_GHz,
                         cache_sizes=cache_sizes, cache_lines=cache_lines, extra=extra, type=type)
        self._set(_apply(base, overrides))

    def _set(self, values: dict) -> None:
        values = dict(values, extensions=Extensions(values["extensions"]))
        for f in fields(self):
            object.__setattr__(self, f.name, values[f.name])

    # -- assignment, sealing ----------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"acc.Target has no field {name!r}; its fields: {', '.join(_FIELDS)}")
        if self.__dict__.get("_sealed", False):
            raise FrozenInstanceError(
                f"cannot assign to field {name!r}: this target is in use (acc.Target.HOST, or a target a plan "
                f"was made for or that was hashed), and code and function names depend on its values; make a "
                f"changed copy instead: target({name}=...)")
        if value is None and name not in _OPTIONAL:
            raise ValueError(f"{name}: a target's {name} cannot be None")
        values = self._values()
        if value is None:
            values[name] = None
        else:
            values = _apply(values, {name: value})
        self._set(values)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of an acc.Target")

    def __hash__(self) -> int:
        self._seal()  # a dict key or set member must keep its hash
        return hash(tuple(getattr(self, f) for f in _FIELDS))

    def _seal(self) -> "Target":
        """Forbid assignment from now on (something depends on the values); returns the target."""
        object.__setattr__(self, "_sealed", True)
        return self

    @property
    def sealed(self) -> bool:
        """Whether assignment is refused (acc.Target.HOST, or a target in use by a plan or hashed)."""
        return self.__dict__.get("_sealed", False)

    def __getstate__(self) -> dict:
        # a copy (copy.copy, pickle) is a new object nothing depends on yet: unsealed, nothing resolved
        return {k: v for k, v in self.__dict__.items() if k != "_sealed" and k not in _RESOLVED}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

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

    @property
    def libraries(self) -> tuple:
        """The target libraries code for this target may use (accpy/targets/library.py)."""
        return libraries_for(self)

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

    # -- a GPU's facts (gpu/models.py, kept in `extra`; None on other targets) --------------------------
    @property
    def is_gpu(self) -> bool:
        """Whether the target is a GPU (a device whose kernels a GPU runtime launches)."""
        return self.category is Category.GPU

    def _gpu_fact(self, key: str):
        return self.get(key) if self.is_gpu else None

    @property
    def warp_size(self) -> Optional[int]:
        """Threads that run in lockstep (32 on NVIDIA, 64 on AMD's CDNA; 1 on an OpenCL device)."""
        return self._gpu_fact("warp_size")

    @property
    def max_threads_per_block(self) -> Optional[int]:
        """Threads a block may have (the product of a bind's THREAD_X/Y/Z extents)."""
        return self._gpu_fact("max_threads_per_block")

    @property
    def max_block_size(self) -> Optional[tuple]:
        """Threads a block may have along (x, y, z)."""
        return self._gpu_fact("max_block_size")

    @property
    def max_shared_memory_per_block(self) -> Optional[int]:
        """Bytes of shared memory a block may use (with the device's dynamic opt-in)."""
        return self._gpu_fact("max_shared_memory_per_block")

    @property
    def max_static_shared_memory_per_block(self) -> Optional[int]:
        """Bytes of shared memory a kernel may declare statically."""
        return self._gpu_fact("max_static_shared_memory_per_block")

    @property
    def max_registers_per_block(self) -> Optional[int]:
        """32-bit registers the threads of a block share (None where the device does not tell)."""
        return self._gpu_fact("max_registers_per_block")

    @property
    def device_arch(self) -> Optional[str]:
        """The GPU's architecture as its compiler names it: "sm_80", "gfx908"; "" unknown."""
        return self._gpu_fact("device_arch")

    @property
    def compute_capability(self) -> Optional[tuple]:
        """(major, minor) of an NVIDIA GPU ("sm_80" -> (8, 0)), else None."""
        arch = self.device_arch or ""
        if not (arch.startswith("sm_") and arch[3:].isdigit() and len(arch) > 4):
            return None
        return int(arch[3:-1]), int(arch[-1])

    @property
    def gfx(self) -> Optional[str]:
        """An AMD GPU's gfx target ("gfx908"), else None."""
        arch = self.device_arch or ""
        return arch if arch.startswith("gfx") else None

    @property
    def tensor_core_info(self):
        """The tensor-core operations of a GPU (gpu/models.py `TensorCoreInfo`: `supports(input_type,
        output_type, shape)`, `entries`); empty on other targets and GPUs without tensor cores."""
        return self._gpu_fact("tensor_core_info") or NO_TENSOR_CORES

    @property
    def opencl_device(self) -> Optional[tuple]:
        """(platform, device) of an OpenCL device read from the runtime (opencl_device_target), else None."""
        return self._gpu_fact("opencl_device")

    def _resolved(self, name: str, resolve):  # name: one of _RESOLVED
        """`resolve(sealed copy of this target)`, kept on the target and resolved again only when the
        target's values or the registered libraries change (the interfaces a target resolves once)."""
        key = (tuple(getattr(self, f) for f in _FIELDS), libraries())
        got = self.__dict__.get(name)
        if got is None or got[0] != key:
            # resolved for a sealed copy: the answers may not change under it
            got = (key, resolve(self(**{})._seal()))
            object.__setattr__(self, name, got)
        return got[1]

    @property
    def vector_isa(self):
        """The vector instructions code for this target may use (targets/vector_isa.py `VectorISA`:
        register shapes per element type, their templates, dot products), from the first of its
        libraries that gives some; one without vectors else."""
        return self._resolved("_vector_isa", vector_isa_for)

    @property
    def tensor_units(self) -> tuple:
        """((library, TensorUnit), ...) of its libraries with memories or tensor instructions
        (targets/tensor_unit.py): a cache's memory picks the unit placing it, a tensorize request's
        intrinsic the unit matching it."""
        return self._resolved("_tensor_units", tensor_units)

    @property
    def toolchain(self):
        """How code for this target is compiled, guarded and run (targets/toolchain.py): x86's for x86
        CPUs, AArch64's (a cross compiler and an emulator on other machines) for AArch64 ones, else
        the host's C compiler."""
        return self._resolved("_toolchain", toolchain_for)

    def required_features(self) -> list:
        """Features the emitted code may use beyond the architecture's baseline (x86-64's: checked at
        call time, no SIGILL; AArch64's: compiled for)."""
        return self.toolchain.required_features(self)

    def compiler_flags(self) -> list:
        """gcc flags that enable exactly this target's instruction-set extensions."""
        return self.toolchain.compiler_flags(self)

    def describe(self) -> str:
        """A stable description of what code generation may depend on (function-name hashes)."""
        return "|".join([self.name, self.category.value, self.architecture.value, ",".join(self.extensions),
                         str(self.vector_bytes), str(self.vector_registers), str(self.num_threads),
                         str(self.num_cores), ",".join(map(str, self.cache_sizes)),
                         ",".join(map(str, self.cache_lines)), repr(self.extra)])


_FIELDS = tuple(f.name for f in fields(Target))
_OPTIONAL = ("frequency_GHz", "turbo_frequency_GHz")


def host_target() -> Target:
    """This machine (equal to `acc.Target.HOST`)."""
    return Target("HOST")


def opencl_device_target(platform: int = 0, device: int = 0) -> Target:
    """A GPU target of device `device` of platform `platform` of the installed OpenCL runtime, with the
    limits it reports and its name (gpu/models.py `read_opencl_device`; e.g. PoCL's CPU device).
    OpenCLDeviceError (a RuntimeError) when no runtime, platform or such device exists."""
    return Target(read_opencl_device(platform, device))
