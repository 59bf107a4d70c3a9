"""CUDA C through `tools.compile_cuda` (nvcc from the nvidia-* wheels or the machine, no GPU needed):
a kernel with native/gpu/accpy_cuda.h's host helpers, tensor-core kernels (`wmma` fragments and
inline-PTX `mma.sync`) for sm_80 and sm_90 to PTX and cubin with ptxas's resources, and the
typed error of a rejected source."""
import importlib.util
import os

import pytest

from accpy import paths
from accpy.errors import CompileError
from accpy.targets.gpu import tools

HOST_HELPERS = r"""
#include "accpy_runtime.h"
#include "gpu/accpy_cuda.h"

extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" int run_add(const float* a, const float* b, float* c, int n) {
    size_t bytes = (size_t)n * sizeof(float);
    float* da = (float*)accpy_cuda_alloc(bytes);
    float* db = (float*)accpy_cuda_alloc(bytes);
    float* dc = (float*)accpy_cuda_alloc(bytes);
    int status = !da || !db || !dc || accpy_cuda_write(da, a, bytes) || accpy_cuda_write(db, b, bytes);
    if (!status) {
        dim3 grid((n + 127) / 128), block(128);
        add<<<grid, block, 0>>>(da, db, dc, n);
        status = accpy_cuda_launched("add", grid, block, 0) || accpy_cuda_read(dc, c, bytes);
    }
    accpy_cuda_free(da);
    accpy_cuda_free(db);
    accpy_cuda_free(dc);
    return status;
}

extern "C" int limits(size_t* threads, size_t* shared) { return accpy_cuda_device_limits(threads, shared); }
"""

TENSOR_CORES = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

// one warp: C (16 x 16, float) = A (16 x 16, half, row-major) @ B (16 x 16, half, column-major)
extern "C" __global__ void wmma_16x16x16(const half* a, const half* b, float* c) {
    __shared__ float tile[16 * 16];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(tile, fc, 16, wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * 16; i += 32) c[i] = tile[i];
}

// one warp, the m16n8k16 instruction: each lane holds 4 registers of A, 2 of B (half pairs), 4 floats of C
extern "C" __global__ void mma_m16n8k16(const unsigned* a, const unsigned* b, float* d) {
    int lane = threadIdx.x & 31;
    unsigned a0 = a[lane * 4], a1 = a[lane * 4 + 1], a2 = a[lane * 4 + 2], a3 = a[lane * 4 + 3];
    unsigned b0 = b[lane * 2], b1 = b[lane * 2 + 1];
    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    d[lane * 4] = c0;
    d[lane * 4 + 1] = c1;
    d[lane * 4 + 2] = c2;
    d[lane * 4 + 3] = c3;
}
"""

SYNTAX_ERROR = """__global__ void broken(int* x) {
    x[0] = 1;
    x[1] = undeclared_name;
}
"""

ARCHES = ("sm_80", "sm_90")


@pytest.mark.needs_nvcc
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("mode", ["ptx", "cubin"])
def test_tensor_core_kernels_compile_with_their_resources(arch, mode):
    build = tools.compile_cuda(TENSOR_CORES, arch=arch, mode=mode)
    assert build.arch == arch and build.mode == mode
    if mode == "ptx":
        assert f".target {arch}" in build.output
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in build.output
        assert "wmma.mma.sync.aligned" in build.output
    else:
        assert build.output[:4] == b"\x7fELF"
    wmma, mma = build.kernel("wmma_16x16x16"), build.kernel("mma_m16n8k16")
    assert wmma.shared_bytes == 16 * 16 * 4 and wmma.barriers == 1
    assert mma.shared_bytes == 0 and mma.barriers == 0
    for k in (wmma, mma):
        assert 8 <= k.registers <= 255 and k.spill_bytes == 0


@pytest.mark.needs_nvcc
@pytest.mark.parametrize("arch,mode", [("sm_80", "object"), ("sm_90", "ptx")])
def test_a_kernel_with_the_host_helpers_compiles(arch, mode):
    build = tools.compile_cuda(HOST_HELPERS, arch=arch, mode=mode, extra=[f"-I{paths.native_dir()}"])
    assert build.kernel("add").registers > 0
    if mode == "object":  # the host side (accpy_cuda.h with the C runtime header) went through gcc
        assert build.output[:4] == b"\x7fELF" and b"run_add" in build.output


@pytest.mark.needs_nvcc
def test_a_rejected_source_raises_the_typed_error_with_its_line():
    with pytest.raises(tools.CudaCompileError) as info:
        tools.compile_cuda(SYNTAX_ERROR, arch="sm_80")
    error = info.value
    assert isinstance(error, CompileError) and error.arch == "sm_80"
    assert any(line == 3 and "undeclared_name" in text for line, _, text in error.lines), error.lines
    assert "kernel.cu(3)" in str(error) and "   3 |     x[1] = undeclared_name;" in str(error)


def test_bad_arguments_are_refused_before_compiling():
    with pytest.raises(ValueError, match="mode='sass'"):
        tools.compile_cuda(TENSOR_CORES, mode="sass")
    with pytest.raises(ValueError, match="arch='80'"):
        tools.compile_cuda(TENSOR_CORES, arch="80")


@pytest.mark.skipif(importlib.util.find_spec("nvidia") is None, reason="the nvidia-* wheels are not installed")
def test_nvcc_is_found_in_the_wheels_without_path_or_variable(monkeypatch):
    monkeypatch.delenv("ACCPY_NVCC", raising=False)
    path = [d for d in os.environ["PATH"].split(os.pathsep) if d and not os.path.exists(os.path.join(d, "nvcc"))]
    monkeypatch.setenv("PATH", os.pathsep.join(path))  # no nvcc on it; gcc, nvcc's host compiler, still
    found = tools.find_nvcc()
    if found is None:
        pytest.fail(f"nvidia wheels installed but: {tools.nvcc_available()}")
    assert "site-packages" in str(found.nvcc) and found.nvcc.name == "nvcc"
    assert any(d.name == "cccl" for d in found.include_dirs)
    assert str(found.bin_dir) in found.env["PATH"]
    build = tools.compile_cuda(TENSOR_CORES, arch="sm_90", mode="ptx", tools=found)
    assert build.kernel("wmma_16x16x16").barriers == 1


def test_a_named_nvcc_that_does_not_exist_is_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCPY_NVCC", str(tmp_path / "nvcc"))
    assert tools.find_nvcc() is None
    why = tools.nvcc_available()
    assert "ACCPY_NVCC" in why and str(tmp_path / "nvcc") in why
    with pytest.raises(OSError, match="ACCPY_NVCC"):
        tools.compile_cuda(TENSOR_CORES)


def test_the_ptxas_report_is_parsed_per_kernel():
    report = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4tiledPKfS0_Pf' for 'sm_80'
ptxas info    : Function properties for _Z4tiledPKfS0_Pf
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'plain' for 'sm_80'
ptxas info    : Function properties for plain
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 360 bytes cmem[0]
"""
    kernels = tools.parse_ptxas_report(report)
    assert set(kernels) == {"_Z4tiledPKfS0_Pf", "plain"}
    tiled = kernels["_Z4tiledPKfS0_Pf"]
    assert (tiled.registers, tiled.barriers, tiled.shared_bytes, tiled.stack_bytes) == (64, 1, 8192, 16)
    assert tiled.spill_bytes == 20
    plain = kernels["plain"]
    assert (plain.registers, plain.barriers, plain.shared_bytes, plain.spill_bytes) == (10, 0, 0, 0)
