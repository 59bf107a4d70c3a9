"""Random schedules and plans (accpy.testing's strategies) for AArch64 (Neon, or SVE at 256 bits),
cross-compiled and run under qemu against the reference evaluator: each example draws a plan of
three nests (a float32 matmul, an int8 matmul into int32, an int16 elementwise nest with a
reduction) for one target and runs the package once."""
from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import accpy as acc  # noqa: E402
import accpy.testing as at  # noqa: E402
from accpy.nest.reference import evaluate  # noqa: E402
from accpy.targets.arm import AARCH64_TOOLCHAIN, run_calls  # noqa: E402
from accpy.testing.strategies import value_for  # noqa: E402
from abi.kernels import mixed_matmul_nest  # noqa: E402

S = acc.ScalarType
_why = AARCH64_TOOLCHAIN.missing() or AARCH64_TOOLCHAIN.cannot_run()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(_why is not None, reason=f"AArch64 tools missing: {_why}")]
TARGETS = (acc.Target("ARMv8.2-A"), acc.Target("Neoverse V1"))  # Neon; SVE at 256 bits


def _rows():
    X = acc.Array(role=acc.Role.INPUT, element_type=S.int16, shape=(6, 19), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int16, shape=(6, 19), name="Y")
    R = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int16, shape=(6,), name="R")
    nest = acc.Nest(shape=(6, 19))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i, j] = acc.max(Y[i, j], X[i, j]) - X[i, j] * 3
        R[i] += Y[i, j]

    return nest, (X, Y, R)


NESTS = {"f32": mixed_matmul_nest(7, 9, 10, S.float32, S.float32, S.float32)[:2],
         "s8": mixed_matmul_nest(7, 9, 10, S.int8, S.int8, S.int32)[:2], "rows": _rows()}


def _values(args, rng):
    return [value_for(a, {}, rng, int_range=(-100, 100), float_range=(-2.0, 2.0)) for a in args]


@st.composite
def _plans(draw):
    target = draw(st.sampled_from(TARGETS))
    return {name: draw(at.plans(at.schedules(nest, max_transforms=3), target=target))
            for name, (nest, _) in NESTS.items()}


@given(plans=_plans(), seed=st.integers(0, 2 ** 16))
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
def test_random_plans_for_aarch64_match_the_reference_under_qemu(tmp_path_factory, plans, seed):
    out = tmp_path_factory.mktemp("arm_plans")
    pkg = acc.Package()
    for name, plan in plans.items():
        pkg.add(plan, args=NESTS[name][1], base_name=name)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (loops left to the C compiler's vectorizer say so)
        pkg.build("plans", output_dir=out, progress=False)
    rng = np.random.default_rng(seed)
    calls, wants = [], []
    for name, (nest, args) in NESTS.items():
        values = _values(args, rng)
        want = [v.copy() for v in values]
        evaluate(nest, dict(zip(args, want)))
        calls.append((name, values))
        wants.append(want)
    for (name, _), got, want in zip(calls, run_calls(out, calls), wants):
        for g, w in zip(got, want):
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4,
                                           err_msg=f"{name}: {at.replay_code(plans[name])}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{name}: {at.replay_code(plans[name])}")
