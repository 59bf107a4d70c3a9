"""AArch64 packages built by the cross compiler and run under qemu, compared with the reference
evaluator: an sgemm (FMLA), int8 / uint8 matmuls on SDOT / UDOT with B grouped by 4 k, tails that
are no multiple of the lanes or of the group, reductions and strided accesses; several kernels per
package and one qemu run per package. Skipped, saying why, without the tools (.ci/run installs them)."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.targets.arm import AARCH64_TOOLCHAIN, run_calls, run_under_emulation
from accpy.targets.toolchain import ForeignArchitectureError
from accpy.testing.strategies import value_for

from test_arm_target import int8_plan, sgemm_plan

T = acc.Target
S = acc.ScalarType
_why = AARCH64_TOOLCHAIN.missing() or AARCH64_TOOLCHAIN.cannot_run()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"AArch64 tools missing: {_why}")


def _data(args, rng):
    return [value_for(a, {}, rng, int_range=(-1000, 1000), float_range=(-3.0, 3.0)) for a in args]


def _expected(nest, args, values):
    want = [v.copy() for v in values]
    evaluate(nest, dict(zip(args, want)))
    return want


def _build(tmp_path, name, kernels):
    pkg = acc.Package()
    for base, (_, plan, args) in kernels.items():
        pkg.add(plan, args=args, base_name=base)
    return pkg.build(name, output_dir=tmp_path)


@pytest.mark.slow
def test_sgemm_and_int8_matmuls_match_the_reference_under_qemu(tmp_path):
    v82 = T("ARMv8.2-A")
    kernels = {
        "sgemm": sgemm_plan(v82),                                    # 37 columns: a tail of 5 on 8 lanes
        "sgemm_v8": sgemm_plan(T("ARMv8-A"), M=8, N=16, K=4, tile=(2, 4, 2)),  # no tail
        "s8": int8_plan(v82),                                        # K = 30: a partial group of 2 k
        "u8": int8_plan(v82, M=5, N=13, K=9, a_type=S.uint8, b_type=S.uint8),
        "s8_v8": int8_plan(T("ARMv8-A"), M=4, N=8, K=8),             # no SDOT: int32 lanes
    }
    with pytest.warns(UserWarning):  # (s8_v8's loop is left to the C compiler's vectorizer)
        lib = _build(tmp_path, "mm", kernels)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == \
        ["libmm.so", "mm.a", "mm.c", "mm.h", "mm.hat"]
    c = (tmp_path / "mm.c").read_text()
    assert "vfmaq_f32(" in c and "vdotq_s32(" in c and "vdotq_u32(" in c
    rng = np.random.default_rng(7)
    calls, wants = [], []
    for base, (nest, _, args) in kernels.items():
        values = _data(args, rng)
        calls.append((base, values))
        wants.append(_expected(nest, args, values))
    results = run_calls(tmp_path, calls)  # one program, one qemu run
    for (base, _), got, want in zip(calls, results, wants):
        if want[-1].dtype.kind == "f":
            np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5, atol=1e-5, err_msg=base)
        else:
            np.testing.assert_array_equal(got[-1], want[-1], err_msg=base)
        np.testing.assert_array_equal(got[0], want[0])  # inputs unchanged
    # the package cannot run in this process, and says where it can
    with pytest.raises(ForeignArchitectureError, match=r"sgemm\(...\): package 'mm' is built for target ARMv8.2-A "
                                                       r"\(aarch64\).*run_under_emulation"):
        lib.sgemm(*calls[0][1])
    with pytest.raises(ForeignArchitectureError, match=r"python_module\(\): package 'mm'.*aarch64"):
        lib.python_module()


def _row_reductions(dtype):
    """Row sums and maxima of a 7 x 22 array (22 = 5 * 4 + 2: a tail on 4 lanes)."""
    M, N = 7, 22
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(M, N), name="A")
    R = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(M,), name="R")
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(M,), name="X")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        R[i] += A[i, j]
        X[i] = acc.max(X[i], A[i, j])

    plan = nest.create_schedule().create_plan(T("ARMv8-A"))
    plan.vectorize(j)
    return nest, plan, (A, R, X)


def _transpose():
    """T[j, i] = 2 * A[i, j] with i vectorized: A's read strides by 22 elements (a gather)."""
    M, N = 7, 22
    A = acc.Array(role=acc.Role.INPUT, shape=(M, N), name="A")
    Tr = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, M), name="Tr")
    nest = acc.Nest(shape=(N, M))
    j, i = nest.get_indices()

    @nest.iteration_logic
    def _():
        Tr[j, i] = A[i, j] * 2.0

    plan = nest.create_schedule().create_plan(T("ARMv8-A"))
    plan.vectorize(i)
    return nest, plan, (A, Tr)


def test_reductions_and_strided_reads_under_qemu(tmp_path):
    kernels = {"fred": _row_reductions(S.float32), "ired": _row_reductions(S.int32), "tr": _transpose()}
    _build(tmp_path, "red", kernels)
    c = (tmp_path / "red.c").read_text()
    assert "vaddvq_f32(" in c and "vaddvq_s32(" in c and "accpy_neon_mgather_f32" in c
    rng = np.random.default_rng(3)
    calls, wants = [], []
    for base, (nest, _, args) in kernels.items():
        values = _data(args, rng)
        calls.append((base, values))
        wants.append(_expected(nest, args, values))
    for (base, _), got, want in zip(calls, run_calls(tmp_path, calls), wants):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=base)


def test_errors_of_an_aarch64_package(tmp_path, monkeypatch):
    _, plan, args = sgemm_plan(T("ARMv8-A"), M=4, N=8, K=4, tile=(2, 4, 2))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="sg")
    with pytest.raises(ForeignArchitectureError, match=r"build\(python_module='sync'\): package 'sg' is built "
                                                       r"for target ARMv8-A \(aarch64\)"):
        pkg.build("sg", output_dir=tmp_path, python_module="sync")
    pkg.build("sg", output_dir=tmp_path)
    with pytest.raises(ForeignArchitectureError, match=r"load: .*sg.hat is built for aarch64, and this machine is "):
        acc.load(tmp_path / "sg.hat")
    a, b, c = (np.ones(x.shape, np.float32) for x in args)
    with pytest.raises(ValueError, match=r"call 0: expected 3 arguments \(A, B, C\), got 2"):
        run_under_emulation(tmp_path, "sg", [a, b])
    with pytest.raises(ValueError, match=r"function: sg.hat has no function\(s\) named 'nope'"):
        run_under_emulation(tmp_path, "nope", [a, b, c])
    monkeypatch.chdir(tmp_path)  # a relative path names the package as well
    out = run_under_emulation("sg.hat", "sg", [a, b, c])
    np.testing.assert_array_equal(out[2], c + a @ b)
