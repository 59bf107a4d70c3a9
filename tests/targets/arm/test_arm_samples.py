"""The samples' plans, unchanged, for AArch64: optimized_matmul's sgemm (B packed in panels, C's
micro-tile in registers, prefetches, two OpenMP threads) on Armv8.2-A, int8_matmul's uint8 x int8
kernel (B grouped by 4 k) on Armv9-A, where USDOT (i8mm) computes it, and its bfloat16 kernel on
BFDOT (Neon on Armv9-A, SVE on Neoverse V1); cross-compiled, run under qemu (one run) and compared
with numpy."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.targets.arm import AARCH64_TOOLCHAIN, run_calls
from accpy.testing.strategies import value_for

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "samples"))
import int8_matmul  # noqa: E402
import optimized_matmul  # noqa: E402

_why = AARCH64_TOOLCHAIN.missing() or AARCH64_TOOLCHAIN.cannot_run()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"AArch64 tools missing: {_why}")


def _values(args, rng):
    return [value_for(a, {}, rng, int_range=(-2**31, 2**31 - 1), float_range=(-3.0, 3.0)) for a in args]  # (ints: their type's range)


def _float(x):
    """An array's values as float64 (bfloat16 patterns widened)."""
    if x.dtype == np.uint16:
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


@pytest.mark.slow
def test_sample_plans_for_aarch64_under_qemu(tmp_path):
    v82, v9 = acc.Target("ARMv8.2-A"), acc.Target("ARMv9-A")
    pkg = acc.Package()
    plans = {"sgemm": optimized_matmul.matmul_plan(67, 45, 33, threads=1, target=v82),
             "sgemm2": optimized_matmul.matmul_plan(64, 48, 40, threads=2, target=v82),
             "u8s8": int8_matmul.vector_matmul_plan(30, 50, 70, target=v9),
             # bfloat16 pairs into float32: BFDOT on Neon (Armv9-A) and on 256-bit SVE (Neoverse V1)
             "bf16": int8_matmul.vector_matmul_plan(20, 37, 45, dtype="bf16", target=v9),
             "bf16_sve": int8_matmul.vector_matmul_plan(20, 37, 45, dtype="bf16", target=acc.Target("Neoverse V1"))}
    for name, (plan, args) in plans.items():
        pkg.add(plan, args=args, base_name=name)
    pkg.build("samples", output_dir=tmp_path, progress=False)
    c = (tmp_path / "samples.c").read_text()
    assert "vfmaq_f32(" in c and "vusdotq_s32(" in c and "#pragma omp parallel" in c
    assert "vbfdotq_f32(" in c and "svbfdot_f32(" in c
    rng = np.random.default_rng(5)
    calls = [(name, _values(args, rng)) for name, (_, args) in plans.items()]
    for (name, (a, b, c0)), got in zip(calls, run_calls(tmp_path, calls)):
        if c0.dtype.kind == "f":
            np.testing.assert_allclose(got[2], c0 + _float(a) @ _float(b), rtol=1e-4, atol=1e-4, err_msg=name)
        else:
            np.testing.assert_array_equal(got[2], c0 + a.astype(np.int32) @ b.astype(np.int32), err_msg=name)
