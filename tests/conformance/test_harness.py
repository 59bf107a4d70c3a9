"""The conformance harness itself (no download needed): the shim's translations and placeholders,
the scope rules, the verifier's comparison, the grouping of causes."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from accera_programs import classify, collect_docs, collect_tests  # noqa: E402
from accera_report import cause  # noqa: E402


def _shim(code: str) -> subprocess.CompletedProcess:
    """Run `code` with the shim importable as `accera` (a separate process: the shim's module
    names must not enter this one)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(HERE / "accera_shim")})


def test_names_accpy_has_are_accpys_and_missing_ones_fail_when_used():
    r = _shim("""
        import accpy, accera
        from accera import Nest, Array, Role, ScalarType
        assert Nest is accpy.Nest and Array is accpy.Array and Role is accpy.Role
        from accera._lang_python._lang import Dimension, Array as NativeArray
        assert Dimension is accpy.Dimension and NativeArray is not accpy.Array
        from accera import NoSuchAcceraName            # importing a name accpy lacks works ...
        x = NoSuchAcceraName.SOME_MEMBER                # ... so does naming its members
        try:
            x(1)
        except accera.NotInAccpyError as e:           # ... using one says what is missing
            print(e)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "accpy has no equivalent of Accera's NoSuchAcceraName.SOME_MEMBER"


@pytest.mark.slow
def test_package_formats_translate_to_their_hat_part(tmp_path):
    r = _shim(f"""
        import numpy as np, accera as acc
        from accera._package import accpy_format
        F = acc.Package.Format
        assert accpy_format(F.MLIR_DYNAMIC) == acc.Format.HAT_DYNAMIC
        assert accpy_format(F.MLIR_STATIC | F.MLIR_VERBOSE) == acc.Format.HAT_STATIC
        assert accpy_format(F.HAT_SOURCE) == acc.Format.HAT_SOURCE
        assert accpy_format(F.DEFAULT) == acc.Format.DEFAULT
        try:
            accpy_format(F.MLIR)
        except acc.NotInAccpyError as e:
            print("refused:", e)
        A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,))
        nest = acc.Nest((4,))
        i = nest.get_indices()

        @nest.iteration_logic
        def _():
            A[i] += 1.0

        pkg = acc.Package()
        fn = pkg.add(nest, args=(A,), base_name="inc")
        import unittest
        from accera.test.verifiers import VerifyPackage, WrongResult
        with VerifyPackage(unittest.TestCase(), "inc", {str(tmp_path)!r}) as v:
            pkg.build("inc", format=F.MLIR_DYNAMIC, mode=acc.Package.Mode.DEBUG, output_dir={str(tmp_path)!r},
                      _quiet=False)
        a = np.arange(4, dtype="f4")
        v.check_correctness(fn.name, before=[a], after=[a + 1])
        try:
            v.check_correctness(fn.name, before=[a], after=[a + 2])
        except WrongResult as e:
            print("wrong:", str(e)[:60])
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("refused: accpy has no equivalent of Accera's Package.Format")
    assert lines[1].startswith("wrong: inc_") and "argument 0 differs" in lines[1]


@pytest.mark.parametrize("text, scope", [
    ("target = Target(Target.Model.NVIDIA_RTX_A6000)", "gpu"),
    ("plan.bind(mapping={i: GridUnits.BLOCK_X})", "gpu"),
    ("v.file_checker('*.mlir').check('affine.for')", "ir_text"),
    ("layout = _MemoryLayout([4])", "internals"),
    ("from accera._lang_python._lang import _If\n_If(i < 3, body)", "in"),
    ("plan.vectorize(ii); pkg.build('x', format=Package.Format.MLIR_DYNAMIC)", "in"),
])
def test_scope_rules_read_the_text(text, scope):
    assert classify(text)[0] == scope


@pytest.mark.parametrize("text, scope", [
    ("target = Target(Target.Model.NVIDIA_RTX_A6000)", "in"),
    ("target = Target(Target.Model.AMD_MI100)\nv.file_checker('*.cu').check('mma')", "ir_text"),
    ("target = Target(Target.Runtime.VULKAN)", "vulkan"),
    ("plan.vectorize(ii)", "cpu"),
])
def test_a_gpu_run_measures_the_gpu_programs_only(text, scope):
    assert classify(text, gpu=True)[0] == scope
    assert classify("", "mfma_tests.py", gpu=True)[0] == "in"


@pytest.fixture
def needs_opencl():
    """Skip (or fail where ACCPY_REQUIRE_OPENCL=1) without an OpenCL device."""
    from accpy.targets.gpu import tools

    why = tools.opencl_available()
    if why is not None:
        if __import__("os").environ.get("ACCPY_REQUIRE_OPENCL") == "1":
            pytest.fail(f"an OpenCL device is required here (ACCPY_REQUIRE_OPENCL=1) but: {why}")
        pytest.skip(f"an OpenCL device is missing: {why}")


def test_a_gpu_package_is_run_and_checked_on_the_device(tmp_path, needs_opencl):
    # the shim builds a GPU function's package again in DEBUG mode and runs it on random inputs:
    # a kernel computing other values than its nest raises
    r = _shim("""
        import os; os.chdir(TMP)
        import accera as acc
        A = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(64, 64))
        nest = acc.Nest(shape=(64, 64)); i, j = nest.get_indices()
        @nest.iteration_logic
        def _():
            A[i, j] += 1.0
        s = nest.create_schedule(); ii = s.split(i, 16); jj = s.split(j, 16); s.reorder(i, j, ii, jj)
        target = acc.Target(acc.Target.Model.NVIDIA_A100); plan = s.create_plan(target)
        plan.bind({i: target.GridUnit.BLOCK_Y, j: target.GridUnit.BLOCK_X, ii: target.GridUnit.THREAD_Y,
                   jj: target.GridUnit.THREAD_X})
        pkg = acc.Package(); pkg.add(plan, args=(A,), base_name="inc")
        pkg.build("inc", format=acc.Package.Format.HAT_SOURCE)
        print(sorted(os.listdir("inc_run")))
    """.replace("TMP", repr(str(tmp_path))))
    assert r.returncode == 0, r.stderr
    assert "'inc_run.hat'" in r.stdout


def test_tests_take_the_scope_of_the_helpers_they_call(tmp_path):
    (tmp_path / "smoke_tests.py").write_text(textwrap.dedent("""
        import unittest
        class T(unittest.TestCase):
            def _helper(self):
                target = Target(Target.Runtime.ROCM)
            def test_a(self):
                self._helper()
            def test_b(self):
                pass
            @expectedFailure(FailedReason.BUG, "why")
            def test_c(self):
                pass
    """))
    got = {p.method: p for p in collect_tests(tmp_path)}
    assert got["test_a"].scope == "gpu" and got["test_b"].scope == "in"
    assert got["test_c"].decorators == ['expectedFailure(FailedReason.BUG, "why")']


def test_a_documentation_page_is_one_program_and_fragments_are_not_programs(tmp_path):
    page = tmp_path / "docs" / "Manual" / "p.md"
    page.parent.mkdir(parents=True)
    page.write_text("Text\n```python\nimport accera as acc\nA = acc.Array()\n```\nmore\n```python\nprint(A)\n```\n")
    (page.parent / "q.md").write_text("```python\nschedule.split(i, 4)\n```\n")
    (page.parent / "r.md").write_text("```python\nfor i in range(3):\n    C[i] +=\n```\n")
    got = {p.file.split("/")[-1]: p for p in collect_docs(tmp_path)}
    assert got["p.md"].scope == "in" and got["p.md"].source == "import accera as acc\nA = acc.Array()\n\nprint(A)\n"
    assert got["q.md"].scope == "fragment" and got["q.md"].scope_detail.endswith("i, schedule")
    assert got["r.md"].scope == "not_python"


def test_causes_group_errors_that_differ_only_in_details():
    a = cause("LogicError: statement 1 (`A[i] = 1.0`, smoke_tests.py:120): writes to A, an INPUT array")
    b = cause("LogicError: statement 2 (`B[j, k] = 3`, smoke_tests.py:5120): writes to A, an INPUT array")
    assert a == b
    assert cause("KeyError: 'test_foo_1a2b3c4d5e6f7a8b'") == cause("KeyError: 'test_bar_0123456789abcdef'")
    assert cause("NotInAccpyError: accpy has no equivalent of Accera's fast_exp") != \
        cause("NotInAccpyError: accpy has no equivalent of Accera's _If")


def test_the_verifier_compares_as_accera_does():
    """float64 casts, relative tolerance: 1 + 1e-6 passes at the default 1e-5, 1 + 1e-4 does not."""
    ok = np.array([1.0 + 1e-6], "f4")
    np.testing.assert_allclose(ok.astype(np.double), np.array([1.0]), rtol=1e-5)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(np.array([1.0 + 1e-4]), np.array([1.0]), rtol=1e-5)
