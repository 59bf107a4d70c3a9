"""native/gpu/accpy_opencl.h on a real OpenCL runtime (PoCL on this CPU): hand-written kernels
launched through the header's API (built into a small shared library, called with ctypes) match
numpy, and its errors name what went wrong; `tools.compile_opencl` checks OpenCL C without running it."""
import ctypes
import os
import re
import subprocess
import threading

import numpy as np
import pytest

from accpy import paths
from accpy.errors import CompileError
from accpy.targets.gpu import tools

pytestmark = pytest.mark.needs_opencl

# The header's API, exported under plain names for ctypes (the launcher a package emits does the same calls).
HARNESS = r"""
#include "accpy_runtime.h"
#include "gpu/accpy_opencl.h"
const char* t_error(void) { const char* e = accpy_take_error(); return e ? e : ""; }
void* t_kernel(const char* src, const char* name, const char* options) { return accpy_cl_kernel_get(src, name, options); }
void* t_alloc(size_t bytes) { return accpy_cl_alloc(bytes); }
int t_write(void* buf, const void* host, size_t bytes) { return accpy_cl_write(buf, host, bytes); }
int t_read(void* buf, void* host, size_t bytes) { return accpy_cl_read(buf, host, bytes); }
void t_free(void* buf) { accpy_cl_free(buf); }
int t_set_arg(void* k, unsigned i, size_t size, const void* value) {
    return accpy_cl_set_arg((accpy_cl_kernel*)k, i, size, value);
}
int t_launch(void* k, unsigned dims, const size_t* global, const size_t* local) {
    return accpy_cl_launch((accpy_cl_kernel*)k, dims, global, local);
}
long t_builds(void) { return accpy_cl_build_count(); }
int t_limits(size_t* max_group, size_t* local_mem) { return accpy_cl_device_limits(max_group, local_mem); }
void t_register(const char* prelude, const char* text, const char* kernel) {
    struct accpy_cl_source* s = (struct accpy_cl_source*)calloc(1, sizeof *s);
    s->prelude = prelude, s->text = text, s->kernel = kernel;
    accpy_cl_register(s);
}
void* t_package_kernel(const char* name) { return accpy_cl_package_kernel(name); }
"""

ADD = """
__kernel void add(__global const float* a, __global const float* b, __global float* c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
"""

# C[M][N] = A[M][K] @ B[K][N], 16 x 16 tiles of A and B in __local memory, guarded at the edges.
MATMUL = """
#define T 16
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int M, int N, int K) {
    __local float As[T][T];
    __local float Bs[T][T];
    int tx = get_local_id(0), ty = get_local_id(1);
    int col = get_group_id(0) * T + tx, row = get_group_id(1) * T + ty;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""

# Per work-group sums through a __local scratch argument (its size given at launch, value NULL).
GROUP_SUM = """
__kernel void group_sum(__global const int* x, __global int* sums, __local int* scratch, int n) {
    int l = get_local_id(0), size = get_local_size(0), i = get_global_id(0);
    scratch[l] = i < n ? x[i] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = size / 2; stride > 0; stride /= 2) {
        if (l < stride) scratch[l] += scratch[l + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) sums[get_group_id(0)] = scratch[0];
}
"""

SYNTAX_ERROR = """__kernel void broken(__global int* x) {
    x[0] = 1;
    x[1] = undeclared_name;
}
"""


class Runtime:
    """The harness library: run kernels with numpy arrays in and out."""

    def __init__(self, path):
        lib = self.lib = ctypes.CDLL(str(path))
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        lib.t_error.restype = ctypes.c_char_p
        lib.t_kernel.restype, lib.t_kernel.argtypes = vp, [ctypes.c_char_p] * 3
        lib.t_alloc.restype, lib.t_alloc.argtypes = vp, [sz]
        lib.t_write.argtypes = lib.t_read.argtypes = [vp, vp, sz]
        lib.t_free.argtypes = [vp]
        lib.t_set_arg.argtypes = [vp, ctypes.c_uint, sz, vp]
        lib.t_launch.argtypes = [vp, ctypes.c_uint, ctypes.POINTER(sz), ctypes.POINTER(sz)]
        lib.t_builds.restype = ctypes.c_long
        lib.t_limits.argtypes = [ctypes.POINTER(sz), ctypes.POINTER(sz)]
        lib.t_register.argtypes = [ctypes.c_char_p] * 3
        lib.t_package_kernel.restype, lib.t_package_kernel.argtypes = vp, [ctypes.c_char_p]
        self.kept = []  # (the registered texts stay alive: the runtime keeps pointers to them)

    def register(self, prelude: str, text: str, kernel: str) -> None:
        """Register a kernel's source with the library's package program."""
        parts = [ctypes.c_char_p(x.encode()) for x in (prelude, text, kernel)]
        self.kept += parts
        self.lib.t_register(*parts)

    def error(self) -> str:
        return self.lib.t_error().decode()

    def kernel(self, source: str, name: str, options: str = "") -> int:
        k = self.lib.t_kernel(source.encode(), name.encode(), options.encode())
        assert k, self.error()
        return k

    def run(self, source, name, args, global_size, local_size, options=""):
        """Launch kernel `name` on `args` (numpy arrays: buffers copied in and back; numpy scalars;
        ("local", bytes): __local scratch); 0 or the error message."""
        k = self.kernel(source, name, options)
        buffers = []
        try:
            for i, arg in enumerate(args):
                if isinstance(arg, np.ndarray):
                    buf = ctypes.c_void_p(self.lib.t_alloc(arg.nbytes))
                    assert buf.value, self.error()
                    buffers.append((buf, arg))
                    assert self.lib.t_write(buf, arg.ctypes.data, arg.nbytes) == 0, self.error()
                    status = self.lib.t_set_arg(k, i, ctypes.sizeof(ctypes.c_void_p), ctypes.byref(buf))
                elif isinstance(arg, tuple) and arg[0] == "local":
                    status = self.lib.t_set_arg(k, i, arg[1], None)
                else:
                    scalar = np.asarray(arg)
                    status = self.lib.t_set_arg(k, i, scalar.nbytes, scalar.ctypes.data)
                assert status == 0, self.error()
            dims = len(global_size)
            g = (ctypes.c_size_t * 3)(*global_size, *[1] * (3 - dims))
            loc = (ctypes.c_size_t * 3)(*local_size, *[1] * (3 - dims))
            if self.lib.t_launch(k, dims, g, loc):
                return self.error()
            for buf, arg in buffers:
                assert self.lib.t_read(buf, arg.ctypes.data, arg.nbytes) == 0, self.error()
            return 0
        finally:
            for buf, _ in buffers:
                self.lib.t_free(buf)


def build_harness(tmp_path, name="harness.so"):
    """The harness compiled as a package's C file is: gcc -O2 -shared -fPIC -I native."""
    src = tmp_path / "harness.c"
    src.write_text(HARNESS)
    out = tmp_path / name
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-std=gnu11", "-Wall", "-Werror", f"-I{paths.native_dir()}",
                    str(src), "-o", str(out), "-ldl", "-lpthread"], check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    return Runtime(build_harness(tmp_path_factory.mktemp("opencl")))


def test_elementwise_add(runtime):
    n = 1000
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    assert runtime.run(ADD, "add", [a, b, c, np.int32(n)], [1024], [64]) == 0
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("m,n,k", [(37, 45, 29), (16, 16, 16), (1, 70, 3)])
def test_tiled_matmul_with_local_tiles_and_barriers(runtime, m, n, k):
    rng = np.random.default_rng(7)
    A = rng.integers(-8, 8, (m, k)).astype(np.float32)
    B = rng.integers(-8, 8, (k, n)).astype(np.float32)
    C = np.full((m, n), np.nan, np.float32)
    up = lambda x: -(-x // 16) * 16  # noqa: E731
    assert runtime.run(MATMUL, "matmul", [A, B, C, np.int32(m), np.int32(n), np.int32(k)],
                       [up(n), up(m)], [16, 16]) == 0
    np.testing.assert_array_equal(C, A @ B)  # small integers: exact in float32


def test_local_scratch_argument(runtime):
    n, group = 1000, 128
    x = np.arange(n, dtype=np.int32) * 3 - 700
    groups = -(-n // group)
    sums = np.zeros(groups, np.int32)
    assert runtime.run(GROUP_SUM, "group_sum", [x, sums, ("local", group * 4), np.int32(n)],
                       [groups * group], [group]) == 0
    padded = np.concatenate([x, np.zeros(groups * group - n, np.int32)])
    np.testing.assert_array_equal(sums, padded.reshape(groups, group).sum(axis=1))


def test_a_second_get_of_the_same_source_does_not_rebuild(runtime):
    source = ADD + "\n// cache test\n"
    before = runtime.lib.t_builds()
    first = runtime.kernel(source, "add")
    assert runtime.lib.t_builds() == before + 1
    assert runtime.kernel(source, "add") == first  # same thread: the same kernel object
    assert runtime.lib.t_builds() == before + 1
    runtime.kernel(source, "add", "-cl-fast-relaxed-math")  # other options: another program
    assert runtime.lib.t_builds() == before + 2


def test_another_thread_gets_its_own_kernel_of_the_cached_program(runtime):
    source = ADD + "\n// thread test\n"
    mine = runtime.kernel(source, "add")
    builds = runtime.lib.t_builds()
    theirs = []
    worker = threading.Thread(target=lambda: theirs.append(runtime.kernel(source, "add")))
    worker.start()
    worker.join()
    assert theirs[0] and theirs[0] != mine
    assert runtime.lib.t_builds() == builds


def test_a_build_error_carries_the_log_and_the_line(runtime):
    assert not runtime.lib.t_kernel(SYNTAX_ERROR.encode(), b"broken", b"")
    message = runtime.error()
    assert "CL_BUILD_PROGRAM_FAILURE" in message and "'broken'" in message
    assert re.search(r":3:\d+: .*undeclared_name", message), message


def test_an_unknown_kernel_name_is_named(runtime):
    assert not runtime.lib.t_kernel(ADD.encode(), b"no_such_kernel", b"")
    message = runtime.error()
    assert "CL_INVALID_KERNEL_NAME" in message and "no_such_kernel" in message


def test_a_bad_work_group_size_is_named_with_the_sizes(runtime):
    n = 100
    a, b, c = (np.zeros(n, np.float32) for _ in range(3))
    message = runtime.run(ADD, "add", [a, b, c, np.int32(n)], [100], [64])  # 64 does not divide 100
    assert "CL_INVALID_WORK_GROUP_SIZE" in message
    assert "global size 100" in message and "work-group (local) size 64" in message
    max_group, _ = device_limits(runtime)
    too_big = runtime.run(ADD, "add", [a, b, c, np.int32(n)], [2 * max_group], [2 * max_group])
    assert "CL_INVALID_WORK_GROUP_SIZE" in too_big and f"at most {max_group}" in too_big


def device_limits(runtime):
    max_group, local_mem = ctypes.c_size_t(), ctypes.c_size_t()
    assert runtime.lib.t_limits(ctypes.byref(max_group), ctypes.byref(local_mem)) == 0, runtime.error()
    return max_group.value, local_mem.value


def test_device_limits(runtime):
    max_group, local_mem = device_limits(runtime)
    assert max_group >= 1 and local_mem >= 1024


def test_a_missing_device_is_a_clear_error(tmp_path, monkeypatch):
    # a fresh copy of the library: its OpenCL state starts unchosen
    fresh = Runtime(build_harness(tmp_path, "fresh.so"))
    monkeypatch.setenv("ACCPY_OPENCL_DEVICE", "9:9")
    assert not fresh.lib.t_alloc(16)
    message = fresh.error()
    assert "ACCPY_OPENCL_DEVICE=9:9" in message and "platform 9" in message
    monkeypatch.setenv("ACCPY_OPENCL_DEVICE", "first")
    assert not fresh.lib.t_alloc(16)
    assert "'<platform>:<device>'" in fresh.error()
    monkeypatch.setenv("ACCPY_OPENCL_DEVICE", "0:0")  # corrected: the failure was not remembered
    buf = fresh.lib.t_alloc(16)
    assert buf, fresh.error()
    fresh.lib.t_free(buf)


def test_changing_the_device_after_the_first_use_is_refused(runtime, monkeypatch):
    runtime.kernel(ADD, "add")
    monkeypatch.setenv("ACCPY_OPENCL_DEVICE", "0:1")
    assert not runtime.lib.t_alloc(16)
    assert "chosen once per process" in runtime.error()


def test_the_header_needs_no_opencl_headers(tmp_path):
    # packages build on machines without OpenCL headers: the header includes none, in C99 and GNU C
    src = tmp_path / "t.c"
    src.write_text(HARNESS)
    for std in ("c99", "gnu11"):
        deps = subprocess.run(["gcc", f"-std={std}", "-M", f"-I{paths.native_dir()}", str(src)], check=True,
                              capture_output=True, text=True).stdout
        assert "gpu/accpy_opencl.h" in deps and "CL/" not in deps, deps


def test_compile_opencl_accepts_valid_source():
    tools.compile_opencl(MATMUL)
    tools.compile_opencl(ADD, "-cl-std=CL1.2")


def test_compile_opencl_raises_the_build_log_with_lines():
    with pytest.raises(tools.OpenCLCompileError) as info:
        tools.compile_opencl(SYNTAX_ERROR)
    error = info.value
    assert isinstance(error, CompileError)
    assert any(line == 3 and "undeclared_name" in text for line, _, text in error.lines), error.lines
    assert "undeclared_name" in str(error) and "   3 |" in str(error)


def test_opencl_available_names_a_missing_device(monkeypatch):
    assert tools.opencl_available() is None
    monkeypatch.setenv("ACCPY_OPENCL_DEVICE", "9:9")
    assert "ACCPY_OPENCL_DEVICE=9:9" in tools.opencl_available()


PRELUDE = "#define SCALE(x) ((x) * 2)\n"
SCALE = "__kernel void scale{n}(__global float* x) {{ int i = get_global_id(0); x[i] = SCALE(x[i]) + {n}; }}\n"


def test_the_package_program_is_built_once_for_all_its_kernels(tmp_path):
    # three registered kernels (one prelude, given by each: kept once): one build, three kernels
    fresh = Runtime(build_harness(tmp_path, "package.so"))
    for n in range(3):
        fresh.register(PRELUDE, f"// kernel {n}\n" + SCALE.format(n=n), f"scale{n}")
    before = fresh.lib.t_builds()
    kernels = [fresh.lib.t_package_kernel(f"scale{n}".encode()) for n in range(3)]
    assert all(kernels), fresh.error()
    assert fresh.lib.t_builds() == before + 1
    x = np.arange(64, dtype=np.float32)
    buf = ctypes.c_void_p(fresh.lib.t_alloc(x.nbytes))
    assert fresh.lib.t_write(buf, x.ctypes.data, x.nbytes) == 0
    assert fresh.lib.t_set_arg(kernels[2], 0, ctypes.sizeof(buf), ctypes.byref(buf)) == 0
    g, loc = (ctypes.c_size_t * 3)(64, 1, 1), (ctypes.c_size_t * 3)(16, 1, 1)
    assert fresh.lib.t_launch(kernels[2], 1, g, loc) == 0, fresh.error()
    out = np.empty_like(x)
    assert fresh.lib.t_read(buf, out.ctypes.data, out.nbytes) == 0
    fresh.lib.t_free(buf)
    np.testing.assert_array_equal(out, x * 2 + 2)


def test_a_package_program_build_error_names_the_kernel_and_its_line(tmp_path):
    fresh = Runtime(build_harness(tmp_path, "broken.so"))
    fresh.register(PRELUDE, SCALE.format(n=0), "scale0")
    fresh.register(PRELUDE, "__kernel void bad(__global int* x) {\n    x[0] = 1;\n    x[1] = undeclared_name;\n}\n",
                   "bad")
    assert not fresh.lib.t_package_kernel(b"scale0")
    message = fresh.error()
    assert "line 3 of kernel 'bad' (program line 7): x[1] = undeclared_name;" in message, message
    assert re.search(r":7:\d+: .*undeclared_name", message), message
