"""Tests marked `@pytest.mark.avx512` execute AVX-512 code: skipped, with the reason, where
`acc.Target.HOST` has no avx512f (a CPU without it, or ACCPY_HOST_MODEL posing as a smaller host;
the code is still emitted and compiled)."""
from __future__ import annotations

import functools

import pytest


def pytest_report_header(config):
    import accpy as acc
    from accpy.targets.host import HOST_MODEL_VARIABLE, host_cpu_name

    posed = acc.Target.HOST.get("posing_as")
    pose = f", posing as {posed} ({HOST_MODEL_VARIABLE})" if posed else ""
    return (f"accpy host: {host_cpu_name()}{pose}; vector_bytes={acc.Target.HOST.vector_bytes}, "
            f"features beyond SSE2: {' '.join(acc.Target.HOST.required_features())}")


def pytest_collection_modifyitems(config, items):
    import accpy as acc

    if acc.Target.HOST.has("avx512f"):
        return
    posed = acc.Target.HOST.get("posing_as")
    why = f"the host poses as {posed} (ACCPY_HOST_MODEL)" if posed else "this CPU lacks avx512f (/proc/cpuinfo)"
    skip = pytest.mark.skip(reason=f"executes AVX-512 code: {why}")
    for item in items:
        if "avx512" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _python_modules_only_where_asked(request, monkeypatch):
    """`Package.build` compiles a pybind11 module in the background unless told not to (about 12 s
    of a core each): in tests it is made only where a test asks for it (`python_module=` given) or
    is marked `python_module` (it imports the module or reads its files)."""
    if "python_module" in request.keywords:
        return
    import accpy as acc

    original = acc.Package.build

    @functools.wraps(original)
    def build(self, *args, **kwargs):
        kwargs.setdefault("python_module", False)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(acc.Package, "build", build)
