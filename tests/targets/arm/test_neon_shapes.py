"""Every Neon lane type run under qemu against the reference evaluator: elementwise arithmetic,
minimum / maximum, absolute values, selects on comparisons and sums across the vector loop, with a
tail (37 = 2 * 16 + 5 = 4 * 8 + 5 = 9 * 4 + 1 = 18 * 2 + 1 lanes). One package, one qemu run."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.targets.arm import AARCH64_TOOLCHAIN, run_calls
from accpy.testing.strategies import value_for

S = acc.ScalarType
N = 37
TYPES = (S.float64, S.float32, S.float16, S.int32, S.int16, S.uint16, S.int8, S.uint8)
_why = AARCH64_TOOLCHAIN.missing() or AARCH64_TOOLCHAIN.cannot_run()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"AArch64 tools missing: {_why}")


def _kernel(t, target):
    X, Y, Z, W, M, A, R = (acc.Array(role=acc.Role.INPUT if n in "XY" else acc.Role.INPUT_OUTPUT, element_type=t,
                                     shape=(1,) if n == "R" else (N,), name=n) for n in "XYZWMAR")
    nest = acc.Nest(shape=(N,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        Z[i] = X[i] + Y[i]
        W[i] = X[i] * Y[i] - Z[i]
        M[i] = acc.max(X[i], Y[i]) - acc.min(X[i], Y[i])
        A[i] = acc.select(X[i] < Y[i], acc.abs(X[i]), Y[i])
        R[0] += X[i]

    plan = nest.create_schedule().create_plan(target)
    plan.vectorize(i)
    return nest, plan, (X, Y, Z, W, M, A, R)


def _values(args, rng):
    return [value_for(a, {}, rng, int_range=(-2**31, 2**31 - 1), float_range=(-4.0, 4.0)) for a in args]  # (ints: their type's range)


def test_every_lane_type_matches_the_reference_under_qemu(tmp_path):
    target = acc.Target("ARMv8.2-A")  # (float16 lanes need its half-precision extension)
    kernels = {t.name: _kernel(t, target) for t in TYPES}
    pkg = acc.Package()
    for name, (_, plan, args) in kernels.items():
        pkg.add(plan, args=args, base_name=name)
    pkg.build("shapes", output_dir=tmp_path)
    c = (tmp_path / "shapes.c").read_text()
    for vt in ("float64x2_t", "float32x4_t", "float16x8_t", "int32x4_t", "int16x8_t", "uint16x8_t", "int8x16_t",
               "uint8x16_t"):
        assert f"{vt} R_" in c or f"{vt} " in c, vt  # (the sum's accumulator)
    assert "vaddq_s8(" in c and "vaddvq_u16(" in c and "vmulq_f16(" in c and "vbslq_f64(" in c
    rng = np.random.default_rng(11)
    calls, wants = [], []
    for name, (nest, _, args) in kernels.items():
        values = _values(args, rng)
        want = [v.copy() for v in values]
        evaluate(nest, dict(zip(args, want)))
        calls.append((name, values))
        wants.append(want)
    for (name, _), got, want in zip(calls, run_calls(tmp_path, calls), wants):
        for arg, g, w in zip("XYZWMAR", got, want):
            if w.dtype.kind == "f":
                tol = 1e-2 if w.dtype == np.float16 else 1e-5
                # (R: a sum reassociated across lanes)
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol * (20 if arg == "R" else 1),
                                           err_msg=f"{name} {arg}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{name} {arg}")
