"""GPU devices as data: Accera's table of known GPUs (CUDA and ROCm devices), NVIDIA's H100, a
generic OpenCL device, their tensor cores, and the installed OpenCL runtime's devices, read through
ctypes (`read_opencl_device`).

Units: memory in bytes (shared memory per block: `max_static_shared_memory_per_block` is what a
kernel may declare statically, `max_shared_memory_per_block` what it may use with the device's
dynamic opt-in); `max_registers_per_block` counts 32-bit registers; `max_block_size` is threads
per block along (x, y, z); `warp_size` is threads; `frequency_GHz` the base clock; `num_cores`
the streaming multiprocessors (NVIDIA), compute units (AMD) or OpenCL compute units.

Guarantees: a `GPUModel` is immutable and hashable, and `facts()` gives the (key, value) pairs a
`Target` keeps in its `extra` (GPU_FACTS, validated by `gpu_extra`); `TensorCoreInfo.supports`
answers Accera's question (input type, output type, shape, passes) from the table alone."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace
from typing import Optional

from ...ir.types import ScalarType
from ..features import GPU_RUNTIMES, Runtime
from .enums import MMAShape

KiB = 1 << 10
f16, bf16, f32, i8, u8, i16, i32 = (ScalarType.float16, ScalarType.bfloat16, ScalarType.float32, ScalarType.int8,
                                    ScalarType.uint8, ScalarType.int16, ScalarType.int32)


# -- tensor cores --------------------------------------------------------------------------------

def _scalar(value, what: str) -> ScalarType:
    """An acc.ScalarType from one, its name ("float16") or a numpy dtype; TypeError else."""
    if isinstance(value, ScalarType):
        return value
    if isinstance(value, str) and value in ScalarType.__members__:
        return ScalarType[value]
    try:
        return ScalarType.from_dtype(value)
    except TypeError:
        raise TypeError(f"{what}: expected an acc.ScalarType (e.g. acc.ScalarType.float16), got {value!r}") from None


@dataclass(frozen=True)
class TensorCoreEntry:
    """One tensor-core operation: `shape` with `input_type` operands accumulating in `output_type`."""

    shape: MMAShape
    input_type: ScalarType
    output_type: ScalarType

    @property
    def inType(self) -> ScalarType:  # noqa: N802  (Accera's name)
        """Accera's name of `input_type`."""
        return self.input_type

    @property
    def outType(self) -> ScalarType:  # noqa: N802  (Accera's name)
        """Accera's name of `output_type`."""
        return self.output_type


@dataclass(frozen=True)
class TensorCoreInfo:
    """The tensor-core operations a device has (Accera's TensorCoreInformation): `entries`, a tuple of
    TensorCoreEntry; empty (falsy) for a device without tensor cores."""

    entries: tuple = ()

    def __post_init__(self):
        for e in self.entries:
            if not isinstance(e, TensorCoreEntry):
                raise TypeError(f"TensorCoreInfo: expected TensorCoreEntry entries, got {e!r}")

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __repr__(self) -> str:
        rows = ", ".join(f"{e.shape.name}: {e.input_type.name}->{e.output_type.name}" for e in self.entries)
        return f"TensorCoreInfo({rows})"

    def supports(self, input_type, output_type, shape: MMAShape, num_total_passes: int = 1,
                 num_fused_passes: Optional[int] = None) -> bool:
        """Whether the device multiplies `input_type` tiles of `shape` into `output_type`, in
        `num_total_passes` passes (>= 1) fused `num_fused_passes` at a time (None or -1: all; it must
        divide the passes), as Accera's check."""
        if not isinstance(shape, MMAShape):
            raise TypeError(f"shape: expected an acc.MMAShape (e.g. acc.MMAShape.M16xN16xK16_B1), got {shape!r}")
        fused = -1 if num_fused_passes is None else num_fused_passes
        if not (isinstance(num_total_passes, int) and num_total_passes >= 1):
            return False
        if fused != -1 and (fused < 1 or num_total_passes % fused):
            return False
        key = (shape, _scalar(input_type, "input_type"), _scalar(output_type, "output_type"))
        return any((e.shape, e.input_type, e.output_type) == key for e in self.entries)

    def shapes(self, input_type, output_type) -> tuple:
        """The shapes the device has for `input_type` -> `output_type`, in the table's order."""
        i, o = _scalar(input_type, "input_type"), _scalar(output_type, "output_type")
        return tuple(dict.fromkeys(e.shape for e in self.entries if (e.input_type, e.output_type) == (i, o)))

    def types(self, shape: MMAShape) -> tuple:
        """The (input type, output type) pairs the device has for `shape`."""
        return tuple((e.input_type, e.output_type) for e in self.entries if e.shape is shape)

    @staticmethod
    def mma_shape_to_tuple(shape: MMAShape) -> tuple:
        """(m, n, k) of a shape (Accera's method)."""
        return shape.shape

    @staticmethod
    def compute_tensor_splits(shape: MMAShape, num_total_passes: int = 1) -> tuple:
        """(m, n, k * passes): the extents of the i, j, k loops one tensorized call covers (Accera's method)."""
        return shape.m, shape.n, shape.k * num_total_passes


def _table(*rows) -> TensorCoreInfo:
    """A table from rows (shapes, [(input, output), ...]): every shape with every type pair."""
    return TensorCoreInfo(tuple(TensorCoreEntry(s, i, o) for shapes, pairs in rows for s in shapes for i, o in pairs))


S = MMAShape
_WMMA = (S.M16xN16xK16_B1, S.M32xN8xK16_B1, S.M8xN32xK16_B1)  # CUDA's wmma shapes for 16- and 8-bit inputs
# Volta (sm_70): half inputs with half or float accumulators, in the three wmma shapes (CUDA C++
# Programming Guide, "Warp Matrix Functions", element types and matrix sizes).
NV_VOLTA_TENSOR_CORES = _table((_WMMA, [(f16, f16), (f16, f32)]))
# Ampere and later (sm_80+): Accera's NV_AMPERE_TENSORCORE_INFO (after NVIDIA's Ampere tuning guide,
# "Tensor operations"): fp16 -> fp16/fp32, bf16 -> fp32, int8/uint8 -> int32 in the three wmma
# shapes, and fp32 (computed as TF32) -> fp32 in M16xN16xK8.
NV_AMPERE_TENSOR_CORES = _table((_WMMA, [(f16, f16), (f16, f32), (bf16, f32), (i8, i32), (u8, i32)]),
                                ((S.M16xN16xK8_B1,), [(f32, f32)]))
# AMD CDNA1 (gfx908): Accera's MI100_TENSORCORE_INFO, one row per MFMA instruction (AMD, "CDNA1
# Instruction Set Architecture", matrix arithmetic instructions).
MI100_TENSOR_CORES = _table(
    ((S.M16xN16xK4_B1, S.M32xN32xK2_B1, S.M64xN64xK1_B2, S.M64xN64xK1_B4), [(f32, f32)]),
    ((S.M16xN16xK16_B1, S.M32xN32xK8_B1, S.M64xN64xK4_B2, S.M64xN64xK4_B4),
     [(f16, f16), (f16, f32), (i8, i32), (i8, i16), (i8, i8)]),
    ((S.M16xN16xK8_B1, S.M32xN32xK4_B1, S.M64xN64xK2_B2, S.M64xN64xK2_B4), [(bf16, f32), (bf16, bf16)]),
)
NO_TENSOR_CORES = TensorCoreInfo()


# -- devices --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GPUModel:
    """One GPU (or OpenCL device) as data; units in the module docstring."""

    name: str  # display name, the Target's `name`
    runtime: Runtime
    family: str  # microarchitecture ("Ampere", "CDNA"); "" unknown
    device_arch: str  # what compilers call it: "sm_80" (NVIDIA), "gfx908" (AMD); "" unknown
    num_cores: int
    max_threads_per_block: int
    max_block_size: tuple
    max_static_shared_memory_per_block: int
    max_shared_memory_per_block: int
    warp_size: int
    frequency_GHz: Optional[float]
    max_registers_per_block: Optional[int]  # None: unknown (OpenCL does not tell)
    vector_bytes: int = 0  # widest load or store per instruction and thread (Accera's "Vector Bytes")
    tensor_core_info: TensorCoreInfo = NO_TENSOR_CORES
    aliases: tuple = ()  # other names that select it exactly
    accera: bool = False  # from Accera's table of known GPUs
    opencl_device: Optional[tuple] = None  # (platform, device) indices, for a device read from the runtime

    def facts(self) -> tuple:
        """The (key, value) pairs a Target of this device keeps in `extra` (GPU_FACTS, in order)."""
        out = tuple((k, getattr(self, k)) for k in GPU_FACTS)
        return out + ((("opencl_device", self.opencl_device),) if self.opencl_device is not None else ())


#: the keys of a GPU target's facts in `Target.extra`
GPU_FACTS = ("device_arch", "warp_size", "max_threads_per_block", "max_block_size",
             "max_static_shared_memory_per_block", "max_shared_memory_per_block", "max_registers_per_block",
             "tensor_core_info")


def _accera(runtime, name, family, arch, cores, threads, block, static, shared, warp, ghz, regs, vbytes, tc,
            aliases=()):
    """A row of Accera's KNOWN_GPUS (its column order), with accpy's spelling of the architecture."""
    return GPUModel(name, Runtime[runtime], family, arch, cores, threads, tuple(block), static, shared, warp, ghz,
                    regs, vbytes, tc, aliases, accera=True)


GPU_MODELS = [
    # Accera's KNOWN_GPUS (accera/python/accera/Targets.py), after NVIDIA's Pascal, Volta and Ampere
    # tuning guides ("shared memory capacity", "L1 cache") and AMD's CDNA ISA documents. Accera lists
    # no tensor cores for the V100; it has them (sm_70 wmma, fp16 only: NV_VOLTA_TENSOR_CORES).
    _accera("CUDA", "NVidia P100", "Pascal", "sm_60", 56, 1024, (1024, 1024, 64), 48 * KiB, 48 * KiB, 32, 1.3285,
            65536, 0, NO_TENSOR_CORES, ("Tesla P100",)),
    _accera("CUDA", "NVidia V100", "Volta", "sm_70", 80, 1024, (1024, 1024, 64), 48 * KiB, 96 * KiB, 32, 1.38,
            65536, 0, NV_VOLTA_TENSOR_CORES, ("Tesla V100",)),
    _accera("CUDA", "NVidia A100", "Ampere", "sm_80", 108, 1024, (1024, 1024, 64), 48 * KiB, 163 * KiB, 32, 1.41,
            65536, 0, NV_AMPERE_TENSOR_CORES),
    _accera("CUDA", "NVidia RTX A6000", "Ampere", "sm_86", 108, 1024, (1024, 1024, 64), 48 * KiB, 99 * KiB, 32,
            1.41, 65536, 0, NV_AMPERE_TENSOR_CORES),
    _accera("ROCM", "AMD Radeon7", "Vega20", "gfx906", 60, 1024, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 64, 1.801,
            65536, 0, NO_TENSOR_CORES, ("Radeon VII",)),
    _accera("ROCM", "AMD MI50", "Vega20", "gfx906", 60, 1024, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 64, 1.725,
            65536, 0, NO_TENSOR_CORES, ("AMD Instinct MI50",)),
    # the MI100 moves up to 4 dwords per load instruction: 16 vector bytes (Accera's note)
    _accera("ROCM", "AMD MI100", "Arcturus", "gfx908", 120, 1024, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 64, 1.502,
            65536, 16, MI100_TENSOR_CORES, ("AMD Instinct MI100",)),
    _accera("ROCM", "AMD MI200", "Aldebaran", "gfx90a", 220, 1024, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 64, 1.7,
            65536, 0, NO_TENSOR_CORES, ("AMD Instinct MI200",)),
    # NVIDIA H100 SXM5 (Hopper, compute capability 9.0): 132 SMs (NVIDIA H100 Tensor Core GPU
    # Architecture whitepaper); per block 1024 threads, (1024, 1024, 64), 48 KiB static and up to
    # 227 KiB shared memory with the opt-in, 64 K 32-bit registers, warps of 32 (NVIDIA Hopper
    # Tuning Guide, "Increased L1 capacity", and the CUDA C++ Programming Guide's table of
    # compute capabilities). Base clock not recorded here (None). Tensor cores: Ampere's wmma set.
    GPUModel("NVidia H100", Runtime.CUDA, "Hopper", "sm_90", 132, 1024, (1024, 1024, 64), 48 * KiB, 227 * KiB, 32,
             None, 65536, 0, NV_AMPERE_TENSOR_CORES),
    # Any OpenCL device, as the OpenCL specification guarantees at least ("clGetDeviceInfo", minimum
    # values for devices that are not custom devices): one compute unit, work-groups of one work-item
    # ((1, 1, 1)), 32 KiB of local memory. Registers are not reported by OpenCL (None), nor a warp
    # (1). `read_opencl_device()` reads the real limits of an installed device.
    GPUModel("OpenCL", Runtime.OPENCL, "OpenCL", "", 1, 1, (1, 1, 1), 32 * KiB, 32 * KiB, 1, None, None),
]
_OPENCL = GPU_MODELS[-1]


def generic_gpu(runtime: Runtime) -> GPUModel:
    """A GPU of `runtime` with nothing known beyond what every OpenCL device guarantees (Accera's
    `Target(category=GPU, runtime=...)`): the generic OpenCL device's limits, named "custom"."""
    return replace(_OPENCL, name="custom", family="", runtime=runtime)


# -- validating a GPU target's facts --------------------------------------------------------------

def _positive(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what}: expected an integer >= 1, got {value!r}")
    return value


def _fact(key: str, value):
    """A GPU fact `extra[key]` checked (ValueError/TypeError naming the key and what is expected)."""
    if key == "device_arch":
        if not isinstance(value, str):
            raise TypeError(f"device_arch: expected a string such as 'sm_80' or 'gfx908', got {value!r}")
        return value
    if key == "max_block_size":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__") or len(tuple(value)) != 3:
            raise ValueError(f"max_block_size: expected the threads per block along (x, y, z), got {value!r}")
        return tuple(_positive(v, "max_block_size") for v in value)
    if key == "tensor_core_info":
        if not isinstance(value, TensorCoreInfo):
            raise TypeError(f"tensor_core_info: expected an accpy TensorCoreInfo (accpy.targets.gpu), got {value!r}")
        return value
    if key == "max_registers_per_block" and value is None:
        return None
    return _positive(value, key)


def gpu_extra(base: tuple, given: tuple) -> tuple:
    """A GPU target's `extra`: `base` with the pairs of `given` in place of those of the same key (a
    GPU keeps the facts not given; equal facts give an equal tuple), the GPU facts validated."""
    by_key: dict = {}
    for k, v in given:
        by_key.setdefault(k, []).append((k, _fact(k, v) if k in GPU_FACTS else v))
    out, done = [], set()
    for k, v in base:
        if k not in by_key:
            out.append((k, v))
        elif k not in done:
            out += by_key[k]
            done.add(k)
    out += [p for k, pairs in by_key.items() if k not in done for p in pairs]
    facts = dict(out)
    static, shared = facts.get("max_static_shared_memory_per_block"), facts.get("max_shared_memory_per_block")
    if static is not None and shared is not None and static > shared:
        raise ValueError(f"max_static_shared_memory_per_block: {static} bytes is more than "
                         f"max_shared_memory_per_block ({shared} bytes): static shared memory is part of it")
    return tuple(out)


def check_runtime(runtime: Runtime, device_arch: str, name: str) -> None:
    """ValueError unless `runtime` can launch kernels on a GPU of `device_arch` (CUDA on NVIDIA's sm_*,
    ROCM on AMD's gfx*; VULKAN and OPENCL on any; "" an unknown device: any GPU runtime)."""
    if runtime not in GPU_RUNTIMES:
        raise ValueError(f"runtime: {runtime.name} is not a GPU runtime, and {name!r} is a GPU: its kernels are "
                         f"launched through {', '.join(r.name for r in GPU_RUNTIMES)}")
    vendor = {"sm_": Runtime.CUDA, "gfx": Runtime.ROCM}
    for prefix, own in vendor.items():
        other = [r for r in vendor.values() if r is not own]
        if device_arch.startswith(prefix) and runtime in other:
            raise ValueError(f"runtime: {runtime.name} does not run on {name!r} ({device_arch}); its vendor's "
                             f"runtime is {own.name} (OPENCL and VULKAN run too)")


# -- the installed OpenCL runtime (ctypes) -----------------------------------------------------------

class OpenCLDeviceError(RuntimeError):
    """No OpenCL runtime (libOpenCL.so.1), platform or device to read a target from."""


# constants of the OpenCL API (CL/cl.h, CL/cl_ext.h)
CL_SUCCESS, CL_DEVICE_NOT_FOUND, CL_PLATFORM_NOT_FOUND_KHR = 0, -1, -1001
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
CL_DEVICE_MAX_COMPUTE_UNITS, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS = 0x1002, 0x1003
CL_DEVICE_MAX_WORK_GROUP_SIZE, CL_DEVICE_MAX_WORK_ITEM_SIZES = 0x1004, 0x1005
CL_DEVICE_MAX_CLOCK_FREQUENCY, CL_DEVICE_LOCAL_MEM_SIZE, CL_DEVICE_NAME = 0x100C, 0x1023, 0x102B
OPENCL_LIBRARY = "libOpenCL.so.1"


def _opencl_library() -> ctypes.CDLL:
    """The OpenCL ICD loader, with the signatures used here."""
    try:
        lib = ctypes.CDLL(OPENCL_LIBRARY)
    except OSError as e:
        raise OpenCLDeviceError(f"no OpenCL runtime: {OPENCL_LIBRARY} cannot be loaded ({e}); install an ICD "
                                f"loader and a driver, e.g. Debian's ocl-icd-libopencl1 and pocl-opencl-icd") from None
    lib.clGetPlatformIDs.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint32)]
    lib.clGetDeviceIDs.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(ctypes.c_uint32)]
    lib.clGetDeviceInfo.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_size_t)]
    for f in (lib.clGetPlatformIDs, lib.clGetDeviceIDs, lib.clGetDeviceInfo):
        f.restype = ctypes.c_int32
    return lib


def _pick(ids: list, index, what: str, where: str) -> ctypes.c_void_p:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(ids):
        raise OpenCLDeviceError(f"{what}: {where} has {len(ids)} {what}(s) (indices 0..{len(ids) - 1}), "
                                f"got {index!r}")
    return ids[index]


def _ids(call, what: str, *args) -> list:
    """The ids an OpenCL list query gives ([] when it finds none)."""
    count = ctypes.c_uint32(0)
    err = call(*args, 0, None, ctypes.byref(count))
    if err in (CL_DEVICE_NOT_FOUND, CL_PLATFORM_NOT_FOUND_KHR) or (err == CL_SUCCESS and count.value == 0):
        return []
    if err != CL_SUCCESS:
        raise OpenCLDeviceError(f"listing OpenCL {what}s failed with error {err}")
    ids = (ctypes.c_void_p * count.value)()
    err = call(*args, count.value, ids, None)
    if err != CL_SUCCESS:
        raise OpenCLDeviceError(f"listing OpenCL {what}s failed with error {err}")
    return list(ids)


def _info(lib, device, param: int, ctype):
    """One clGetDeviceInfo value of a fixed-size C type."""
    value = ctype()
    err = lib.clGetDeviceInfo(device, param, ctypes.sizeof(value), ctypes.byref(value), None)
    if err != CL_SUCCESS:
        raise OpenCLDeviceError(f"clGetDeviceInfo(0x{param:04X}) failed with error {err}")
    return value


def _info_bytes(lib, device, param: int) -> bytes:
    size = ctypes.c_size_t(0)
    err = lib.clGetDeviceInfo(device, param, 0, None, ctypes.byref(size))
    buf = ctypes.create_string_buffer(max(size.value, 1))
    if err == CL_SUCCESS:
        err = lib.clGetDeviceInfo(device, param, size.value, buf, None)
    if err != CL_SUCCESS:
        raise OpenCLDeviceError(f"clGetDeviceInfo(0x{param:04X}) failed with error {err}")
    return buf.raw[:size.value]


def read_opencl_device(platform: int = 0, device: int = 0) -> GPUModel:
    """The device `device` of OpenCL platform `platform` of the installed runtime, with the limits it
    reports (name, compute units, work-group size and sizes per dimension, local memory, clock).
    OpenCLDeviceError when no runtime, platform or such device exists."""
    lib = _opencl_library()
    platforms = _ids(lib.clGetPlatformIDs, "platform")
    if not platforms:
        raise OpenCLDeviceError("no OpenCL platform is installed (the ICD loader found no driver; e.g. install "
                                "Debian's pocl-opencl-icd)")
    pid = _pick(platforms, platform, "platform", "the OpenCL runtime")
    did = _pick(_ids(lib.clGetDeviceIDs, "device", pid, CL_DEVICE_TYPE_ALL), device, "device",
                f"OpenCL platform {platform}")
    name = _info_bytes(lib, did, CL_DEVICE_NAME).split(b"\0")[0].decode(errors="replace").strip()
    dims = _info(lib, did, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, ctypes.c_uint32).value
    sizes = _info(lib, did, CL_DEVICE_MAX_WORK_ITEM_SIZES, ctypes.c_size_t * dims)
    block = (tuple(int(s) for s in sizes) + (1, 1, 1))[:3]
    local = _info(lib, did, CL_DEVICE_LOCAL_MEM_SIZE, ctypes.c_uint64).value
    mhz = _info(lib, did, CL_DEVICE_MAX_CLOCK_FREQUENCY, ctypes.c_uint32).value
    return replace(_OPENCL, name=name or f"OpenCL device {platform}.{device}",
                   num_cores=_info(lib, did, CL_DEVICE_MAX_COMPUTE_UNITS, ctypes.c_uint32).value,
                   max_threads_per_block=_info(lib, did, CL_DEVICE_MAX_WORK_GROUP_SIZE, ctypes.c_size_t).value,
                   max_block_size=block, max_static_shared_memory_per_block=local,
                   max_shared_memory_per_block=local, frequency_GHz=mhz / 1000 if mhz else None,
                   opencl_device=(platform, device))
