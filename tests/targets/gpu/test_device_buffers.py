"""A GPU package's functions called with device buffers (pyopencl arrays) run through their device
entry (`<fn>_device`) on the caller's queue, without copies; one OpenCL program per package; build
errors name the kernel's line. Runs on PoCL (this machine's CPU)."""
from __future__ import annotations

import ctypes
import subprocess
import tomllib

import numpy as np
import pytest

import accpy as acc
from accpy import paths
from accpy.errors import KernelError
from accpy.package import launch
from support.gpu import A100, axpy_plan, matmul

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

pytestmark = pytest.mark.needs_opencl

SHAPES = [(32, 40, 16, 8), (20, 24, 12, 4), (48, 16, 8, 16)]  # M, N, K, tile


def bound_matmul(M, N, K, b):
    """A matmul tiled by b x b, bound to blocks and threads: (plan, args)."""
    nest, args = matmul(M, N, K)
    i, j, k = nest.get_indices()
    s = nest.create_schedule()
    ii, jj = s.split(i, b), s.split(j, b)
    s.reorder(i, j, ii, jj, k)
    plan = s.create_plan(A100)
    plan.bind({i: A100.GridUnit.BLOCK_Y, j: A100.GridUnit.BLOCK_X, ii: A100.GridUnit.THREAD_Y,
               jj: A100.GridUnit.THREAD_X})
    return plan, args


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Three matmuls and an axpy with runtime sizes, in one package: (Package, the built package)."""
    pkg = acc.Package()
    for n, shape in enumerate(SHAPES):
        plan, args = bound_matmul(*shape)
        pkg.add(plan, args=args, base_name=f"mm{n}")
    plan, args = axpy_plan()
    pkg.add(plan, args=args, base_name="axpy")
    out = tmp_path_factory.mktemp("device_buffers")
    return pkg, pkg.build("device_buffers", output_dir=str(out), python_module=False)


@pytest.fixture(scope="module")
def package(built):
    return built[1]


@pytest.fixture(scope="module")
def queue():
    ctx = cl.Context(cl.get_platforms()[0].get_devices())
    return cl.CommandQueue(ctx)


def operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.integers(-4, 4, (M, K)).astype(np.float32)
    B = rng.integers(-4, 4, (K, N)).astype(np.float32)
    C = rng.integers(-4, 4, (M, N)).astype(np.float32)
    return A, B, C


@pytest.mark.parametrize("n", range(len(SHAPES)))
def test_pyopencl_arrays_give_the_numpy_call_s_result(package, queue, n):
    M, N, K, _ = SHAPES[n]
    A, B, C = operands(M, N, K, n)
    want = C.copy()
    getattr(package, f"mm{n}")(A, B, want)  # the numpy call: copies in and out
    dA, dB, dC = (cla.to_device(queue, x) for x in (A, B, C))
    getattr(package, f"mm{n}")(dA, dB, dC)
    np.testing.assert_array_equal(dC.get(), want)
    np.testing.assert_array_equal(want, C + A @ B)  # small integers: exact


def test_runtime_sizes_given_or_read_from_the_shapes(package, queue):
    rng = np.random.default_rng(3)
    X, Y = rng.random((5, 37), np.float32), rng.random((5, 37), np.float32)
    dX, dY = cla.to_device(queue, X), cla.to_device(queue, Y)
    package.axpy(5, 37, dX, dY)
    package.axpy(dX, dY)  # M and N from X's shape
    np.testing.assert_allclose(dY.get(), (Y * 2 + X) * 2 + X, rtol=1e-6)


def host_no_access(queue, values: np.ndarray):
    """A pyopencl array holding `values` in a buffer the host may not read or write
    (CL_MEM_HOST_NO_ACCESS): filled by a device-side copy."""
    ctx = queue.context
    flags = cl.mem_flags
    buf = cl.Buffer(ctx, flags.READ_WRITE | flags.HOST_NO_ACCESS, values.nbytes)
    staging = cl.Buffer(ctx, flags.READ_WRITE | flags.COPY_HOST_PTR, hostbuf=values)
    cl.enqueue_copy(queue, buf, staging)
    return cla.Array(queue, values.shape, values.dtype, data=buf)


def device_read(queue, array) -> np.ndarray:
    """The values of `array` (in a host-no-access buffer) through a device-side copy."""
    out = cla.empty(queue, array.shape, array.dtype)
    cl.enqueue_copy(queue, out.data, array.data)
    return out.get()


def test_the_device_entry_copies_nothing(package, queue):
    # The runtime refuses any host read or write of a CL_MEM_HOST_NO_ACCESS buffer (checked first):
    # calls that succeed on such buffers moved no data between host and device; the second call
    # sees the first one's C, written on the device, with no host round trip in between.
    M, N, K, _ = SHAPES[0]
    A, B, C = operands(M, N, K, 9)
    dA, dB, dC = (host_no_access(queue, x) for x in (A, B, C))
    with pytest.raises(cl.Error, match="INVALID_OPERATION"):
        cl.enqueue_copy(queue, np.empty_like(C), dC.data).wait()
    package.mm0(dA, dB, dC)
    package.mm0(dA, dB, dC)
    np.testing.assert_array_equal(device_read(queue, dC), C + 2 * (A @ B))


def test_the_launch_is_ordered_on_the_caller_s_queue(package, queue):
    # no wait inside the call: a command the caller enqueues next (here a pyopencl kernel that reads
    # C) runs after it, as on any in-order queue
    M, N, K, _ = SHAPES[1]
    A, B, C = operands(M, N, K, 4)
    dA, dB, dC = (cla.to_device(queue, x) for x in (A, B, C))
    package.mm1(dA, dB, dC)
    doubled = 2 * dC  # enqueued after the call, on the same queue
    np.testing.assert_array_equal(doubled.get(), 2 * (C + A @ B))


def test_wrong_dtype_shape_strides_offset_are_refused_naming_the_argument(package, queue):
    M, N, K, _ = SHAPES[0]
    A, B, C = operands(M, N, K)
    dA, dB, dC = (cla.to_device(queue, x) for x in (A, B, C))
    with pytest.raises(ValueError, match=r"argument B has element type float64, expected float32"):
        package.mm0(dA, cla.to_device(queue, B.astype(np.float64)), dC)
    with pytest.raises(ValueError, match=r"argument A has shape \(16, 32\), expected \(32, 16\)"):
        package.mm0(cla.to_device(queue, A.T.copy()), dB, dC)
    wide = cla.to_device(queue, np.zeros((M, 2 * N), np.float32))
    with pytest.raises(ValueError, match=r"argument C has strides \(320, 8\) \(bytes\), expected \(160, 4\)"):
        package.mm0(dA, dB, wide[:, ::2])
    longer = cla.to_device(queue, np.zeros((M + 1, N), np.float32))
    with pytest.raises(ValueError, match=r"argument C starts 160 bytes into its buffer"):
        package.mm0(dA, dB, longer[1:])


def test_mixing_contexts_queues_or_numpy_is_refused(package, queue):
    M, N, K, _ = SHAPES[0]
    A, B, C = operands(M, N, K)
    dA, dB, dC = (cla.to_device(queue, x) for x in (A, B, C))
    other = cl.CommandQueue(cl.Context(cl.get_platforms()[0].get_devices()))
    with pytest.raises(ValueError, match="argument B belongs to another OpenCL context than argument A"):
        package.mm0(dA, cla.to_device(other, B), dC)
    with pytest.raises(ValueError, match="argument C has another queue than argument A"):
        package.mm0(dA, dB, dC.with_queue(cl.CommandQueue(queue.context)))
    with pytest.raises(TypeError, match="argument B is not a pyopencl array and argument A is"):
        package.mm0(dA, B, dC)


def test_another_context_gets_its_own_program(package):
    # the device entry builds the package's program for the queue's context: a second context works
    M, N, K, _ = SHAPES[2]
    A, B, C = operands(M, N, K, 2)
    q2 = cl.CommandQueue(cl.Context(cl.get_platforms()[0].get_devices()))
    dA, dB, dC = (cla.to_device(q2, x) for x in (A, B, C))
    package.mm2(dA, dB, dC)
    np.testing.assert_array_equal(dC.get(), C + A @ B)


class FakeCudaArray:
    """An object with __cuda_array_interface__ (as cupy's arrays have), pointing nowhere."""

    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (0, False), "version": 3,
                                         "strides": None}


def test_cuda_arrays_are_refused_saying_why(package, queue):
    M, N, K, _ = SHAPES[0]
    # (an A100 package: its CUDA device entry is in the .cu unit, which accpy writes but does not load)
    with pytest.raises(TypeError, match=r"__cuda_array_interface__.*CUDA device entry \w+_device is in "
                                        r"device_buffers.cu, which accpy does not load"):
        package.mm0(FakeCudaArray((M, K)), FakeCudaArray((K, N)), FakeCudaArray((M, N)))


def test_the_hat_records_the_device_entry(package):
    meta = tomllib.loads(package.files["hat"].read_text())
    table = meta["functions"][next(f for f in meta["functions"] if f.startswith("mm0_"))]
    entries = {e["runtime"]: e for e in table["device_entries"]}
    assert entries["OpenCL"]["file"] == "libdevice_buffers.so" and entries["CUDA"]["file"] == "device_buffers.cu"
    for entry in entries.values():
        assert entry["symbol"] == launch.device_entry_name(table["name"]) == table["name"] + "_device"


def test_the_header_declares_the_device_entry(package):
    header = package.files["h"].read_text()
    name = next(f for f in package.function_names if f.startswith("mm0_"))
    assert "struct _cl_command_queue;" in header
    assert f"int {name}_device(struct _cl_command_queue*" in header


def test_the_c_device_entry_checks_its_buffers(package, queue):
    # from C (here through ctypes): the caller's queue and cl_mem; a buffer too small, a NULL queue
    lib = ctypes.CDLL(str(package._library_path))
    name = next(f for f in package.function_names if f.startswith("mm0_"))
    entry = getattr(lib, launch.device_entry_name(name))
    entry.restype = ctypes.c_int
    last_error = lib.device_buffers_last_error
    last_error.restype = ctypes.c_char_p
    M, N, K, _ = SHAPES[0]
    A, B, C = operands(M, N, K)
    dA, dB, dC = (cla.to_device(queue, x) for x in (A, B, C))
    small = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 64)
    ptr = ctypes.c_void_p
    assert entry(ptr(queue.int_ptr), ptr(dA.data.int_ptr), ptr(small.int_ptr), ptr(dC.data.int_ptr)) == 1
    message = last_error().decode()
    assert "argument B is a buffer of 64 bytes" in message and "2560" in message, message
    assert entry(None, ptr(dA.data.int_ptr), ptr(dB.data.int_ptr), ptr(dC.data.int_ptr)) == 1
    assert "the command queue is NULL" in last_error().decode()
    assert entry(ptr(queue.int_ptr), ptr(dA.data.int_ptr), ptr(dB.data.int_ptr), ptr(dC.data.int_ptr)) == 0
    queue.finish()
    np.testing.assert_array_equal(dC.get(), C + A @ B)


def test_the_c_header_entry_from_a_c_program(built, tmp_path):
    # a C program with its own OpenCL context, queue and buffers calls the device entry (declared
    # as launch.device_declarations writes it) and reads the result back itself
    pkg, package = built
    name = next(f for f in package.function_names if f.startswith("axpy_"))
    decl = launch.device_declarations([f for f in pkg._functions if f.name == name])[-1]
    src = tmp_path / "caller.c"
    src.write_text(CALLER.replace("DECLARATION", decl).replace("ENTRY", launch.device_entry_name(name))
                   .replace("PKG", "device_buffers"))
    exe = tmp_path / "caller"
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", str(src), "-o", str(exe), str(package._library_path),
                    "-lOpenCL"], check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "ok 0 errors", run.stdout


CALLER = r"""
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
DECLARATION
const char* PKG_last_error(void);
int main(void) {
    enum { M = 3, N = 45 };
    float x[M * N], y[M * N];
    int i, errors = 0;
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    for (i = 0; i < M * N; ++i) x[i] = (float)i, y[i] = (float)(i % 7);
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    cl_mem X = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, x, &err);
    cl_mem Y = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof y, y, &err);
    if (ENTRY(q, M, N, X, Y)) { printf("failed: %s\n", PKG_last_error()); return 1; }
    clEnqueueReadBuffer(q, Y, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL);
    for (i = 0; i < M * N; ++i) errors += y[i] != 2.0f * (float)(i % 7) + (float)i;
    printf("ok %d errors\n", errors);
    return 0;
}
"""


def test_every_launcher_takes_its_kernel_from_the_package_s_program(package):
    # the package's C registers each kernel's source and each launcher (host and device entry) gets
    # its kernel of the package's program (test_opencl_runtime.py: one build for all of them)
    code = package.files["c"].read_text().split("end of the prelude")[1]
    assert code.count("accpy_cl_register(&") == 4
    assert code.count("accpy_cl_package_kernel(") == 4 and code.count("accpy_cl_queue_kernel(") == 4
    assert "accpy_cl_kernel_get(" not in code


def test_a_build_error_names_the_kernel_s_line(tmp_path, monkeypatch):
    # a test hook: the kernel emitter's output gets a broken line; calling the function reports
    # the line in that kernel's source, the line itself and the compiler's message
    real, emitted = launch.emit_kernel, []

    def broken(fn, dialect, prelude):
        k = real(fn, dialect, prelude)
        emitted.append(k.source.replace("{\n", "{\n    int accpy_broken = undeclared_in_kernel;\n", 1))
        return launch.Kernel(emitted[-1], k.name, k.launch)

    monkeypatch.setattr(launch, "emit_kernel", broken)
    plan, args = bound_matmul(8, 8, 4, 4)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="broken_mm")
    lib = pkg.build("broken_kernel", output_dir=str(tmp_path), python_module=False)
    A, B, C = operands(8, 8, 4)
    with pytest.raises(KernelError) as info:
        lib.broken_mm(A, B, C)
    message = str(info.value)
    kernel = next(f for f in lib.function_names if f.startswith("broken_mm_")) + "__impl__kernel"
    line = next(n for n, text in enumerate(emitted[-1].splitlines(), 1) if "accpy_broken" in text)
    assert f"line {line} of kernel '{kernel}'" in message, message
    assert "int accpy_broken = undeclared_in_kernel;" in message and "undeclared_in_kernel" in message.split(
        "the compiler's log")[1], message


def test_the_c_compiles_without_opencl_headers(package):
    # the package's C (device entries included) needs none of OpenCL's headers
    deps = subprocess.run(["gcc", "-std=gnu11", "-M", f"-I{paths.native_dir()}", str(package.files["c"])],
                          check=True, capture_output=True, text=True).stdout
    assert "CL/" not in deps


@pytest.mark.needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_cuda_device_entry_compiles_with_nvcc(arch):
    # <fn>_device(cudaStream_t, device pointers..., sizes...) in the .cu unit, launched on the stream
    from accpy.targets.gpu import tools

    plan, args = axpy_plan()
    fn = plan.lower("axpy", args)
    from accpy.targets.gpu.cuda import CudaGrid

    text = launch.device_unit_source("axpy_pkg", [fn], CudaGrid())
    assert 'extern "C" int axpy_device(cudaStream_t accpy_queue, int64_t M, int64_t N, float* X, float* Y)' in text
    assert "<<<dim3(" in text and ", 0, accpy_queue>>>(M, N, X, Y);" in text
    tools.compile_cuda(text, arch=arch, mode="object")
