"""CUDA C from the same lowered IR as the OpenCL kernels (accpy/targets/gpu/cuda.py): the .cu unit of
a bound matmul, a matmul with SHARED caches (barriers -> __syncthreads), double-buffered ones, one
with a PRIVATE accumulator, a row sum bound across threads (atomicAdd), a 3x3 conv and a float16
(__half) update compile with nvcc for sm_80 and sm_90 (PTX with ptxas's report, and
objects, host launchers included), the shared memory ptxas reports is the caches' size; a package
for a CUDA target writes its .cu (checked by nvcc) while its OpenCL function runs on PoCL."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import accpy as acc
from accpy.errors import CompileError
from accpy.targets.gpu import cuda, tools

from support.gpu import A100, F32, MI100, conv3x3, matmul
from test_bind import tiled_plan
from test_shared_caches import shared_matmul

ARCHES = ("sm_80", "sm_90")


def conv_plan():
    """A 3x3 conv bound over output pixels (blocks of 4 x 8 pixels, a thread per output channel)."""
    H, W, CI, CO = 10, 16, 3, 4
    nest, (I, Wt, O) = conv3x3(H, W, CI, CO)
    y, x, co, ky, kx, ci = nest.get_indices()

    s = nest.create_schedule()
    xx = s.split(x, 4)
    s.reorder(y, x, xx, co, ky, kx, ci)
    plan = s.create_plan(A100)
    plan.bind({y: A100.GridUnit.BLOCK_Y, x: A100.GridUnit.BLOCK_X, xx: A100.GridUnit.THREAD_Y,
               co: A100.GridUnit.THREAD_X})
    return plan, (I, Wt, O)


def half_plan():
    """Y = Y * 2 + X on float16 elements (CUDA's __half in the unit), a thread per element."""
    F16 = acc.ScalarType.float16
    X = acc.Array(role=acc.Role.INPUT, element_type=F16, shape=(100,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F16, shape=(100,), name="Y")
    nest = acc.Nest(shape=(100,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] = Y[i] * 2.0 + X[i]

    s = nest.create_schedule()
    ii = s.split(i, 32)
    plan = s.create_plan(A100)
    plan.bind({i: A100.GridUnit.BLOCK_X, ii: A100.GridUnit.THREAD_X})
    return plan, (X, Y)


def reduction_plan():
    """A row sum whose reduction loop is bound across threads: atomic adds (atomicAdd in CUDA C)."""
    from test_bind import row_reduction

    s, args, (i, j, jj) = row_reduction(F32, "add")
    plan = s.create_plan(A100)
    plan.bind({i: A100.GridUnit.BLOCK_X, j: A100.GridUnit.THREAD_Y, jj: A100.GridUnit.THREAD_X})
    return plan, args


PLANS = {
    "bound": lambda: tiled_plan(40, 36, 20)[:2],
    "dbuf": lambda: shared_matmul(64, 48, 64, double_buffer=True),
    "atomic": reduction_plan,
    "shared": lambda: shared_matmul(64, 48, 64),
    "priv": lambda: shared_matmul(48, 32, 40, cache_c=lambda v: v["k"]),
    "conv": conv_plan,
    "f16": half_plan,
}
# the bytes of shared memory each plan's caches take: A and B tiles of 16 x 16 floats
SHARED_BYTES = {"bound": 0, "shared": 2 * 16 * 16 * 4, "priv": 2 * 16 * 16 * 4, "conv": 0, "f16": 0,
                "dbuf": 2 * 2 * 16 * 16 * 4, "atomic": 0}


@functools.lru_cache(maxsize=None)
def source_of(kind: str) -> str:
    plan, args = PLANS[kind]()
    return cuda.cuda_source(plan, args, name=kind)


def test_the_unit_holds_cuda_kernels_and_their_launchers():
    text = source_of("bound")
    kernel = text[text.index('extern "C" __global__ void bound__kernel('):]
    assert "blockIdx.x" in kernel and "threadIdx.y" in kernel
    assert "get_group_id" not in kernel and "__global " not in kernel
    launcher = text[text.index('extern "C" void bound('):]
    # blocks (40 and 36 rows / columns in tiles of 16: 3 x 3) and threads per block, as CUDA counts them
    assert "size_t accpy_global[3] = {(size_t)((3)), (size_t)((3)), (size_t)(1)};" in launcher
    assert "size_t accpy_local[3] = {(size_t)((16)), (size_t)((16)), (size_t)(1)};" in launcher
    assert ("accpy_device::bound__kernel<<<dim3(accpy_global[0], accpy_global[1], accpy_global[2]), "
            "dim3(accpy_local[0], accpy_local[1], accpy_local[2])>>>((float*)accpy_d0, (float*)accpy_d1, "
            "(float*)accpy_d2);") in launcher
    assert 'accpy_cuda_launched("bound__kernel"' in launcher
    # C is copied back, A and B (inputs) are not; everything allocated is freed
    assert "accpy_cuda_read(accpy_d2, C" in launcher and "accpy_cuda_read(accpy_d0" not in launcher
    assert all(f"accpy_cuda_free(accpy_d{k})" in launcher for k in range(3))
    assert 'extern "C" const char* bound_last_error(void)' in text
    # the device code is in its namespace, after the host runtime (the error channel) and accpy_cuda.h
    assert text.index("accpy_set_error") < text.index("accpy_cuda_alloc") < text.index("namespace accpy_device {")


def test_barriers_are_syncthreads_and_caches_are_shared_arrays():
    text = source_of("shared")
    kernel = text[text.index("__global__ void shared__kernel("):text.index("}  // namespace accpy_device")]
    assert kernel.count("__shared__ float") == 2 and "__syncthreads()" in kernel
    assert "barrier(" not in kernel and "__local" not in kernel


def test_atomic_updates_are_atomic_add():
    text = source_of("atomic")
    kernel = text[text.index("__global__ void atomic__kernel("):text.index("}  // namespace accpy_device")]
    assert "atomicAdd(&S[" in kernel


def test_a_cpu_target_has_no_cuda_source():
    nest, args = matmul(8, 8, 8)
    with pytest.raises(ValueError, match="is not a GPU target"):
        cuda.cuda_source(nest.create_schedule().create_plan(acc.Target.HOST), args)
    with pytest.raises(ValueError, match="name"):  # (a C++ keyword: the unit is C++)
        cuda.cuda_source(tiled_plan(8, 8, 8)[0], args, name="private")


@pytest.mark.needs_nvcc
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("kind", sorted(PLANS))
def test_the_kernels_compile_to_ptx_with_their_shared_memory(kind, arch):
    build = tools.compile_cuda(source_of(kind), arch=arch, mode="ptx")
    assert f".target {arch}" in build.output
    res = build.kernel(f"{kind}__kernel")
    assert 0 < res.registers <= 255 and res.spill_bytes == 0
    assert res.shared_bytes == SHARED_BYTES[kind]
    assert (res.barriers > 0) == (SHARED_BYTES[kind] > 0)


@pytest.mark.needs_nvcc
@pytest.mark.parametrize("kind,arch", [("bound", "sm_90"), ("shared", "sm_80"), ("priv", "sm_90"),
                                       ("conv", "sm_80"), ("f16", "sm_90")])
def test_the_units_compile_to_objects_with_their_launchers(kind, arch):
    # (an object compiles the host side too: the launchers, accpy_cuda.h and the runtime, by gcc)
    build = tools.compile_cuda(source_of(kind), arch=arch, mode="object")
    assert build.output[:4] == b"\x7fELF"
    assert kind.encode() + b"_last_error" in build.output and f"{kind}__kernel".encode() in build.output
    assert "warning" not in build.messages


def _package(target, tmp_path, fmt=acc.Package.Format.HAT_DYNAMIC):
    if target is acc.Target.HOST:  # (no grid to bind to)
        nest, args = matmul(40, 36, 20)
        plan = nest.create_schedule().create_plan(target)
    else:
        plan, args = tiled_plan(40, 36, 20, target=target)[:2]
    pkg = acc.Package()
    fn = pkg.add(plan, args=args, base_name="mm")
    lib = pkg.build("cuda_mm", format=fmt, output_dir=str(tmp_path), python_module=False)
    return lib, fn


@pytest.mark.needs_nvcc
def test_a_cuda_package_writes_and_checks_its_unit_and_runs_on_opencl(needs_opencl, tmp_path, monkeypatch):
    monkeypatch.setenv(cuda.CHECK_VARIABLE, "1")
    lib, fn = _package(A100, tmp_path)
    unit = lib.files["cu"]
    assert unit == tmp_path / "cuda_mm.cu" and unit.exists()
    text = unit.read_text()
    assert f'extern "C" void {fn.name}(const float* ACCPY_RESTRICT A' in text
    assert 'extern "C" const char* cuda_mm_last_error(void)' in text
    assert lib.timings["cu_check"].startswith("cuda_mm.cu: compiled by nvcc for sm_80")
    # the Python-callable library is the OpenCL one: it runs here
    rng = np.random.default_rng(3)
    a, b, c = (rng.random(s, dtype=np.float32) for s in ((40, 20), (20, 36), (40, 36)))
    want = c + a @ b
    lib.mm(a, b, c)
    np.testing.assert_allclose(c, want, rtol=1e-5)


def test_packages_of_other_targets_write_no_unit(tmp_path, monkeypatch):
    # (sources only: nothing is compiled) an AMD target's runtime is ROCm, the host is a CPU
    monkeypatch.setenv(cuda.CHECK_VARIABLE, "0")
    for target in (MI100, acc.Target.HOST):
        _package(target, tmp_path / target.name.replace(" ", "_"), acc.Package.Format.HAT_SOURCE)
    assert not list(tmp_path.rglob("*.cu")) and len(list(tmp_path.rglob("*.c"))) == 2
    _package(A100, tmp_path / "a100", acc.Package.Format.HAT_SOURCE)
    assert (tmp_path / "a100" / "cuda_mm.cu").exists()


def test_the_check_is_skipped_with_a_note(tmp_path, monkeypatch):
    path = tmp_path / "p.cu"
    monkeypatch.setenv(cuda.CHECK_VARIABLE, "0")
    assert cuda.check_unit("not C at all", path, "sm_80") == "p.cu: not compiled (set ACCPY_CUDA_CHECK=1 to check it with nvcc)"
    monkeypatch.setenv(cuda.CHECK_VARIABLE, "1")
    assert "no CUDA architecture" in cuda.check_unit("not C at all", path, None)
    monkeypatch.setenv("ACCPY_NVCC", str(tmp_path / "nvcc"))  # (an nvcc that does not exist: none usable)
    note = cuda.check_unit("not C at all", path, "sm_80")
    assert note.startswith("p.cu: not compiled: ") and "ACCPY_NVCC" in note


@pytest.mark.needs_nvcc
def test_a_rejected_unit_is_a_compile_error_naming_its_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv(cuda.CHECK_VARIABLE, "1")
    text = source_of("bound").replace('(accpy_cuda_launched("bound__kernel"', '(accpy_no_such_check("bound__kernel"')
    line = text[:text.index("accpy_no_such_check(")].count("\n") + 1
    with pytest.raises(CompileError, match=rf"(?s)nvcc rejected {tmp_path / 'p.cu'} at line {line} .*"
                                           rf"p.cu\({line}\): error: identifier \"accpy_no_such_check\" is undefined"):
        cuda.check_unit(text, tmp_path / "p.cu", "sm_80")
