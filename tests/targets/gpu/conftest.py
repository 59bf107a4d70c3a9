"""Gating of the GPU tests on their tools: the `needs_opencl` and `needs_nvcc` fixtures (and
markers of the same names) skip a test, saying why, when this machine has no OpenCL device or
no usable nvcc, and fail it instead where CI expects the tool (ACCPY_REQUIRE_OPENCL=1,
ACCPY_REQUIRE_NVCC=1, set by .ci/run where it can install them)."""
import os

import pytest

# PoCL runs work-groups on several threads at once, and PoCL 3.1 then sometimes gives a wrong tile
# for kernels whose private arrays live across barriers and are passed to functions (the tensor-core
# emulation's fragments): with one thread its results are exact and deterministic. Set before any
# OpenCL call of the test process; the kernels' work-items and work-groups are unchanged.
os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", "1")

from accpy.targets.gpu import tools


def _require(why, variable: str, what: str):
    """Skip (or fail, when `variable` is "1") a test whose tool is missing for reason `why`."""
    if why is None:
        return
    if os.environ.get(variable) == "1":
        pytest.fail(f"{what} is required here ({variable}=1) but: {why}")
    pytest.skip(f"{what} is missing: {why}")


@pytest.fixture
def needs_opencl() -> str:
    """The OpenCL device the test runs on ("<platform>: <device>"); skips or fails without one."""
    _require(tools.opencl_available(), "ACCPY_REQUIRE_OPENCL", "an OpenCL device")
    return tools.opencl_device()


@pytest.fixture
def needs_nvcc() -> tools.NvccTools:
    """The nvcc the test compiles with; skips or fails without one."""
    _require(tools.nvcc_available(), "ACCPY_REQUIRE_NVCC", "nvcc")
    return tools.find_nvcc()


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_opencl: runs kernels on an OpenCL device (PoCL on a CPU will do)")
    config.addinivalue_line("markers", "needs_nvcc: compiles CUDA C with nvcc (no GPU needed)")


def pytest_runtest_setup(item):
    """The markers act as the fixtures do."""
    if item.get_closest_marker("needs_opencl"):
        _require(tools.opencl_available(), "ACCPY_REQUIRE_OPENCL", "an OpenCL device")
    if item.get_closest_marker("needs_nvcc"):
        _require(tools.nvcc_available(), "ACCPY_REQUIRE_NVCC", "nvcc")
