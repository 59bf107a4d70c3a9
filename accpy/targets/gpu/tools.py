"""The GPU target's tools: whether an OpenCL runtime can be used here, where nvcc is, and
compiling OpenCL C (through the runtime) and CUDA C (through nvcc) to check emitted kernels.

Guarantees: nothing here needs OpenCL or CUDA at import time; a missing tool is a reason
(a string), never an exception, from `opencl_available` / `nvcc_available`; a kernel the
compiler rejects raises a `CompileError` subclass carrying the compiler's messages with the
kernel source's line numbers. The OpenCL device is the one ACCPY_OPENCL_DEVICE names
("<platform>:<device>", default "0:0"), as in the host runtime native/gpu/accpy_opencl.h.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading

# PoCL 3.1's default work-group method ("loopvec") crashes on kernels with barriers in nested
# uniform branches; "loops" runs them (native/gpu/accpy_opencl.h chooses it the same way). Set
# before any OpenCL call of this process, unless the user chose.
os.environ.setdefault("POCL_WORK_GROUP_METHOD", "loops")
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

from ...errors import CompileError

#: The pip wheels that together give nvcc a working CUDA compiler (the `cuda` extra).
NVCC_WHEELS = ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime",
               "nvidia-cuda-cccl")


class OpenCLCompileError(CompileError):
    """The OpenCL C compiler rejected a program: `log` is its build log, `lines` the kernel
    source's (line, column, message) of each diagnostic it names."""

    def __init__(self, message: str, log: str = "", options: str = ""):
        super().__init__(message)
        self.log, self.options = log, options
        self.lines = _diagnostic_lines(log, r":(\d+):(\d+): ")


class CudaCompileError(CompileError):
    """nvcc (or ptxas) rejected a CUDA C source: `messages` is what it printed, `lines` the
    source's (line, column, message) of each error it names (column 0: nvcc gives none)."""

    def __init__(self, message: str, messages: str = "", arch: str = "", mode: str = ""):
        super().__init__(message)
        self.messages, self.arch, self.mode = messages, arch, mode
        self.lines = _diagnostic_lines(messages, r"\((\d+)\)()(?:: )")


def _diagnostic_lines(text: str, position: str) -> list:
    """(line, column, message) of each compiler diagnostic in `text` whose position matches."""
    found = []
    for m in re.finditer(position + r"(.*)", text):
        found.append((int(m.group(1)), int(m.group(2) or 0), m.group(3).strip()))
    return found


def _quote_source_lines(source: str, lines: Sequence[int]) -> str:
    """The source lines `lines` (1-based), numbered, to show under a compiler's messages."""
    text = source.splitlines()
    shown = [f"  {n:4d} | {text[n - 1]}" for n in sorted(set(lines)) if 0 < n <= len(text)]
    return ("\nthe source at those lines:\n" + "\n".join(shown)) if shown else ""


# ---- OpenCL through ctypes ----------------------------------------------------------------------
_CL_SUCCESS, _CL_DEVICE_NOT_FOUND, _CL_PLATFORM_NOT_FOUND_KHR = 0, -1, -1001
_CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
_CL_PLATFORM_NAME, _CL_DEVICE_NAME, _CL_PROGRAM_BUILD_LOG = 0x0902, 0x102B, 0x1183
_CL_BUILD_PROGRAM_FAILURE = -11
_p = ctypes.c_void_p


def _device_choice() -> Tuple[int, int]:
    """(platform, device) that ACCPY_OPENCL_DEVICE names; ValueError naming the variable."""
    text = os.environ.get("ACCPY_OPENCL_DEVICE", "") or "0:0"
    m = re.fullmatch(r"(\d+):(\d+)", text.strip())
    if not m:
        raise ValueError(f"ACCPY_OPENCL_DEVICE={text!r} is not '<platform>:<device>' (two indices, e.g. '0:0')")
    return int(m.group(1)), int(m.group(2))


class _OpenCL:
    """The OpenCL runtime loaded with ctypes: platforms, devices, and program builds on one device."""

    def __init__(self):
        lib = None
        for name in ("libOpenCL.so.1", "libOpenCL.so"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as e:
                error = e
        if lib is None:
            raise OSError(f"no OpenCL runtime: libOpenCL.so.1 could not be loaded ({error}); install an OpenCL "
                          f"ICD loader and a driver, e.g. `apt-get install ocl-icd-libopencl1 pocl-opencl-icd`")
        self.lib = lib
        self._declare()
        self._contexts: Dict[int, int] = {}
        self._lock = threading.Lock()

    def _declare(self):
        """Argument and result types of the entry points used."""
        sz, u32, i32, u64 = ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64
        pi32, psz = ctypes.POINTER(i32), ctypes.POINTER(sz)
        table = {
            "clGetPlatformIDs": (i32, [u32, _p, ctypes.POINTER(u32)]),
            "clGetPlatformInfo": (i32, [_p, u32, sz, _p, psz]),
            "clGetDeviceIDs": (i32, [_p, u64, u32, _p, ctypes.POINTER(u32)]),
            "clGetDeviceInfo": (i32, [_p, u32, sz, _p, psz]),
            "clCreateContext": (_p, [_p, u32, _p, _p, _p, pi32]),
            "clCreateProgramWithSource": (_p, [_p, u32, ctypes.POINTER(ctypes.c_char_p), psz, pi32]),
            "clBuildProgram": (i32, [_p, u32, _p, ctypes.c_char_p, _p, _p]),
            "clGetProgramBuildInfo": (i32, [_p, _p, u32, sz, _p, psz]),
            "clReleaseProgram": (i32, [_p]),
        }
        for name, (restype, argtypes) in table.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = restype, argtypes

    def _text(self, fn, handle, param) -> str:
        """A string-valued info query (platform or device name)."""
        buf = ctypes.create_string_buffer(512)
        fn(handle, param, len(buf) - 1, buf, None)
        return buf.value.decode(errors="replace")

    def platforms(self) -> list:
        """[(handle, name)] of every platform; empty when the loader found no driver."""
        ids, n = (_p * 16)(), ctypes.c_uint32(0)
        err = self.lib.clGetPlatformIDs(16, ids, ctypes.byref(n))
        if err in (_CL_PLATFORM_NOT_FOUND_KHR,) or (err == _CL_SUCCESS and n.value == 0):
            return []
        if err != _CL_SUCCESS:
            raise OSError(f"clGetPlatformIDs failed with OpenCL error {err}")
        return [(ids[i], self._text(self.lib.clGetPlatformInfo, ids[i], _CL_PLATFORM_NAME))
                for i in range(min(n.value, 16))]

    def devices(self, platform) -> list:
        """[(handle, name)] of every device of `platform`."""
        ids, n = (_p * 64)(), ctypes.c_uint32(0)
        err = self.lib.clGetDeviceIDs(platform, _CL_DEVICE_TYPE_ALL, 64, ids, ctypes.byref(n))
        if err == _CL_DEVICE_NOT_FOUND:
            return []
        if err != _CL_SUCCESS:
            raise OSError(f"clGetDeviceIDs failed with OpenCL error {err}")
        return [(ids[i], self._text(self.lib.clGetDeviceInfo, ids[i], _CL_DEVICE_NAME))
                for i in range(min(n.value, 64))]

    def chosen_device(self) -> Tuple[int, str]:
        """(handle, "platform name: device name") of the device ACCPY_OPENCL_DEVICE names; OSError why not."""
        p, d = _device_choice()
        platforms = self.platforms()
        if not platforms:
            raise OSError("no OpenCL platform: the OpenCL loader found no driver (install one, e.g. "
                          "`apt-get install pocl-opencl-icd`; `clinfo -l` lists what is found)")
        if p >= len(platforms):
            raise OSError(f"ACCPY_OPENCL_DEVICE={p}:{d} names OpenCL platform {p}, but this machine has "
                          f"{len(platforms)} platform(s)")
        devices = self.devices(platforms[p][0])
        if d >= len(devices):
            raise OSError(f"ACCPY_OPENCL_DEVICE={p}:{d} names device {d} of OpenCL platform {p} "
                          f"({platforms[p][1]}), which has {len(devices)} device(s)")
        return devices[d][0], f"{platforms[p][1]}: {devices[d][1]}"

    def context(self, device) -> int:
        """A context on `device`, created once and kept for the process."""
        with self._lock:
            if device not in self._contexts:
                err, dev = ctypes.c_int32(0), _p(device)
                ctx = self.lib.clCreateContext(None, 1, ctypes.byref(dev), None, None, ctypes.byref(err))
                if not ctx or err.value != _CL_SUCCESS:
                    raise OSError(f"clCreateContext failed with OpenCL error {err.value}")
                self._contexts[device] = ctx
            return self._contexts[device]

    def build(self, source: str, options: str) -> Tuple[int, str]:
        """Build `source` with `options` on the chosen device: (OpenCL status, build log)."""
        device, _ = self.chosen_device()
        ctx, err = self.context(device), ctypes.c_int32(0)
        text = ctypes.c_char_p(source.encode())
        program = self.lib.clCreateProgramWithSource(ctx, 1, ctypes.byref(text), None, ctypes.byref(err))
        if not program or err.value != _CL_SUCCESS:
            raise OSError(f"clCreateProgramWithSource failed with OpenCL error {err.value}")
        try:
            dev = _p(device)
            status = self.lib.clBuildProgram(program, 1, ctypes.byref(dev), options.encode(), None, None)
            size = ctypes.c_size_t(0)
            self.lib.clGetProgramBuildInfo(program, device, _CL_PROGRAM_BUILD_LOG, 0, None, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value + 1)
            self.lib.clGetProgramBuildInfo(program, device, _CL_PROGRAM_BUILD_LOG, size.value, log, None)
            return status, log.value.decode(errors="replace")
        finally:
            self.lib.clReleaseProgram(program)


@functools.lru_cache(maxsize=1)
def _opencl_runtime() -> _OpenCL:
    """The process's ctypes OpenCL runtime (loaded once; OSError when there is none)."""
    return _OpenCL()


def opencl_available() -> Optional[str]:
    """None when an OpenCL runtime with the device ACCPY_OPENCL_DEVICE names (default the first
    device of the first platform) can be used here, else why not."""
    try:
        _opencl_runtime().chosen_device()
        return None
    except (OSError, ValueError) as e:
        return str(e)


def opencl_device() -> str:
    """"<platform name>: <device name>" of the chosen OpenCL device; OSError when there is none."""
    return _opencl_runtime().chosen_device()[1]


def compile_opencl(source: str, options: str = "") -> None:
    """Build the OpenCL C program `source` with the build `options` on the chosen device (nothing
    is run). OpenCLCompileError, with the build log, when the compiler rejects it; OSError when
    there is no OpenCL runtime or device (see `opencl_available`)."""
    status, log = _opencl_runtime().build(source, options)
    if status == _CL_SUCCESS:
        return
    what = "CL_BUILD_PROGRAM_FAILURE" if status == _CL_BUILD_PROGRAM_FAILURE else f"OpenCL error {status}"
    error = OpenCLCompileError("", log, options)
    quoted = _quote_source_lines(source, [line for line, _, _ in error.lines])
    error.args = (f"the OpenCL C compiler rejected the program ({what}, options {options!r}); its build log:\n"
                  f"{log.strip() or '(empty)'}{quoted}",)
    raise error


# ---- nvcc -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NvccTools:
    """A CUDA compiler: nvcc, the directories it needs, and the environment to run it in."""

    nvcc: Path
    bin_dir: Path
    include_dirs: Tuple[Path, ...]
    version: str
    #: the environment for nvcc: this process's, with the CUDA bin dir (ptxas, fatbinary) and
    #: NVVM's bin dir (cicc) first on PATH
    env: Dict[str, str] = field(repr=False, compare=False, default_factory=dict)

    def include_flags(self) -> list:
        """-I flags for the CUDA headers (cuda_runtime.h, mma.h, and CCCL's <nv/target>)."""
        return [f"-I{d}" for d in self.include_dirs]

    def tool(self, name: str) -> Path:
        """Path of a tool beside nvcc (ptxas, fatbinary...)."""
        return self.bin_dir / name


def _wheel_roots() -> list:
    """CUDA roots installed by the nvidia-* pip wheels (site-packages/nvidia/cu13 and similar)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    roots = []
    for base in map(Path, spec.submodule_search_locations):
        roots += sorted((p.parent.parent for p in base.glob("*/bin/nvcc")), reverse=True)
    return roots


def _candidates() -> list:
    """(where it came from, nvcc path) in the order of preference: $ACCPY_NVCC (alone when set: a
    named compiler is not silently replaced by another), PATH, the wheels."""
    found = []
    if os.environ.get("ACCPY_NVCC"):
        return [("ACCPY_NVCC", Path(os.environ["ACCPY_NVCC"]))]
    on_path = shutil.which("nvcc")
    if on_path:
        found.append(("PATH", Path(on_path)))
    found += [("the nvidia-cuda-nvcc wheel", root / "bin" / "nvcc") for root in _wheel_roots()]
    return found


def _missing_parts(root: Path) -> list:
    """What a CUDA root lacks for compiling .cu files, as 'file (pip install wheel)'."""
    needs = [("nvvm/bin/cicc", "nvidia-nvvm"), ("include/cuda_runtime.h", "nvidia-cuda-runtime"),
             ("include/crt/host_config.h", "nvidia-cuda-crt"), ("bin/ptxas", "nvidia-cuda-nvcc")]
    missing = [f"{rel} (pip install {wheel})" for rel, wheel in needs if not (root / rel).exists()]
    if not (root / "include" / "nv" / "target").exists() and not (root / "include" / "cccl" / "nv" / "target").exists():
        missing.append("include/cccl/nv/target (pip install nvidia-cuda-cccl)")
    return missing


def _nvcc_tools(nvcc: Path) -> NvccTools:
    """NvccTools for the nvcc at `nvcc` (a wrapper script is followed to the real one); OSError why not."""
    version, real = _nvcc_version(nvcc)
    root = real.parent.parent
    missing = _missing_parts(root)
    if missing:
        raise OSError(f"nvcc at {real} lacks: {', '.join(missing)}")
    includes = tuple(d for d in (root / "include", root / "include" / "cccl") if d.is_dir())
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(real.parent), str(root / "nvvm" / "bin"), env.get("PATH", "")])
    return NvccTools(nvcc=real, bin_dir=real.parent, include_dirs=includes, version=version, env=env)


def _nvcc_version(nvcc: Path) -> Tuple[str, Path]:
    """(release, e.g. "13.0", the real nvcc's path) from running `nvcc --version`; OSError why not."""
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise OSError(f"nvcc at {nvcc} cannot be run: {e}") from None
    m = re.search(r"release (\d+\.\d+)", out.stdout)
    if out.returncode != 0 or not m:
        raise OSError(f"nvcc at {nvcc} did not report a version: {(out.stdout + out.stderr).strip()[:300]}")
    return m.group(1), _real_nvcc(nvcc)


def _real_nvcc(nvcc: Path) -> Path:
    """The nvcc binary behind `nvcc` (symlinks resolved; a one-line `exec` wrapper script followed)."""
    path = nvcc.resolve()
    try:
        head = path.read_bytes()[:400]
    except OSError:
        return path
    m = re.search(rb"exec\s+(\S+/nvcc)\b", head) if head.startswith(b"#!") else None
    return Path(m.group(1).decode()).resolve() if m else path


@functools.lru_cache(maxsize=1)
def _find_nvcc_cached(key: tuple) -> Tuple[Optional[NvccTools], str]:
    """(tools, "") for the first usable nvcc, else (None, why none is usable)."""
    reasons = []
    for origin, path in _candidates():
        if not path.exists():
            reasons.append(f"{origin}: {path} does not exist")
            continue
        try:
            return _nvcc_tools(path), ""
        except OSError as e:
            reasons.append(f"{origin}: {e}")
    if not reasons:
        return None, ("no nvcc: none in $ACCPY_NVCC, on PATH or from pip; install it with "
                      f"`pip install {' '.join(NVCC_WHEELS)}` (or accpy's `cuda` extra)")
    return None, "no usable nvcc: " + "; ".join(reasons)


def find_nvcc() -> Optional[NvccTools]:
    """nvcc from $ACCPY_NVCC (only there when it is set), else PATH, else the nvidia-* pip wheels;
    None when none is usable (`nvcc_available` says why). Found once per ($ACCPY_NVCC, PATH)."""
    return _find_nvcc_cached((os.environ.get("ACCPY_NVCC"), os.environ.get("PATH")))[0]


def nvcc_available() -> Optional[str]:
    """None when `find_nvcc` finds a usable nvcc, else why not."""
    tools, why = _find_nvcc_cached((os.environ.get("ACCPY_NVCC"), os.environ.get("PATH")))
    return None if tools else why


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel (`-v`): registers per thread, static shared memory,
    spills, named barriers, stack frame."""

    name: str
    registers: int
    shared_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int
    stack_bytes: int

    @property
    def spill_bytes(self) -> int:
        """Bytes spilled, stores and loads together (0 when everything fits in registers)."""
        return self.spill_store_bytes + self.spill_load_bytes


@dataclass(frozen=True)
class CudaBuild:
    """The result of `compile_cuda`: PTX text (mode "ptx") or cubin / object bytes, and per kernel
    (by its symbol as ptxas prints it: extern "C" names as written, C++ ones mangled) its resources."""

    arch: str
    mode: str
    output: Union[str, bytes]
    kernels: Dict[str, KernelResources]
    messages: str
    seconds: float

    def kernel(self, name: str) -> KernelResources:
        """The resources of kernel `name`: its symbol, or its source name when C++-mangled."""
        if name in self.kernels:
            return self.kernels[name]
        mangled = [k for k in self.kernels if k.startswith(f"_Z{len(name)}{name}")]
        if len(mangled) == 1:
            return self.kernels[mangled[0]]
        raise KeyError(f"no kernel {name!r} in the build (it has {sorted(self.kernels)})")


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")


def parse_ptxas_report(text: str) -> Dict[str, KernelResources]:
    """Per-kernel resources from ptxas's `-v` report (ptxas info lines, one block per entry)."""
    kernels: Dict[str, KernelResources] = {}
    starts = [(m.start(), m.group(1)) for m in _ENTRY.finditer(text)] + [(len(text), "")]
    for (begin, name), (end, _) in zip(starts, starts[1:]):
        block = text[begin:end]

        def number(pattern: str) -> int:
            m = re.search(pattern, block)
            return int(m.group(1)) if m else 0

        kernels[name] = KernelResources(
            name=name, registers=number(r"Used (\d+) registers"), shared_bytes=number(r"(\d+) bytes smem"),
            spill_store_bytes=number(r"(\d+) bytes spill stores"), spill_load_bytes=number(r"(\d+) bytes spill loads"),
            barriers=number(r"used (\d+) barriers"), stack_bytes=number(r"(\d+) bytes stack frame"))
    return kernels


_MODES = {"ptx": ("-ptx", "kernel.ptx"), "cubin": ("-cubin", "kernel.cubin"), "object": ("-c", "kernel.o")}


def compile_cuda(source: str, arch: str = "sm_80", mode: str = "ptx", extra: Sequence[str] = (),
                 tools: Optional[NvccTools] = None) -> CudaBuild:
    """Compile the CUDA C++ `source` for `arch` ("sm_80", "sm_90", ...) with nvcc: to PTX (mode
    "ptx", then assembled by ptxas for the resource report), to a cubin ("cubin"), or to a host
    object with the device code embedded ("object": the host side compiled too). `extra` are
    more nvcc flags (e.g. "-I<dir>"). CudaCompileError with nvcc's messages, and the source
    lines they name, when it is rejected; OSError when no nvcc is usable."""
    if mode not in _MODES:
        raise ValueError(f"compile_cuda: mode={mode!r}, expected one of {sorted(_MODES)}")
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise ValueError(f"compile_cuda: arch={arch!r}, expected a GPU architecture such as 'sm_80' or 'sm_90'")
    tools = tools or find_nvcc()
    if tools is None:
        raise OSError(nvcc_available())
    flag, out_name = _MODES[mode]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="accpy-cuda-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / out_name
        src.write_text(source)
        verbose = [] if mode == "ptx" else ["-Xptxas", "-v"]
        cmd = [str(tools.nvcc), f"-arch={arch}", flag, *verbose, *tools.include_flags(), *extra, str(src),
               "-o", str(out)]
        messages = _run_nvcc(cmd, tools, source, arch, mode, cwd=tmp)
        if mode == "ptx":
            cmd = [str(tools.tool("ptxas")), f"-arch={arch}", "-v", str(out), "-o", os.devnull]
            messages += _run_nvcc(cmd, tools, source, arch, mode, cwd=tmp)
        output = out.read_text() if mode == "ptx" else out.read_bytes()
    return CudaBuild(arch=arch, mode=mode, output=output, kernels=parse_ptxas_report(messages),
                     messages=messages, seconds=time.perf_counter() - start)


def _run_nvcc(cmd: list, tools: NvccTools, source: str, arch: str, mode: str, cwd: str) -> str:
    """Run one CUDA tool: its combined output; CudaCompileError (with the source lines) on failure."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=tools.env, cwd=cwd, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        raise OSError(f"{Path(cmd[0]).name} could not be run: {e}") from None
    text = (done.stdout + done.stderr).replace(str(Path(cwd) / "kernel.cu"), "kernel.cu")
    if done.returncode == 0:
        return text
    error = CudaCompileError("", text, arch, mode)
    errors = [line for line, _, msg in error.lines if msg.startswith("error")] or [line for line, _, _ in error.lines]
    error.args = (f"{Path(cmd[0]).name} rejected the CUDA source (arch {arch}, mode {mode}; exit status "
                  f"{done.returncode}):\n{text.strip()}{_quote_source_lines(source, errors)}",)
    raise error


def describe() -> str:
    """One line per GPU tool: the OpenCL device or why there is none, nvcc or why there is none."""
    why = opencl_available()
    lines = [f"OpenCL device: {opencl_device()}" if why is None else f"OpenCL device: none ({why})"]
    tools = find_nvcc()
    lines.append(f"nvcc: {tools.nvcc} (CUDA {tools.version})" if tools else f"nvcc: none ({nvcc_available()})")
    return "\n".join(lines)
