"""A property test of your own kernel's schedules, written with accpy.testing (run it with pytest).

    python -m pytest samples/property_test_example.py -q

hypothesis draws schedules of the nest (split, tile, reorder, skew, pad; only legal ones)
and plans of them (unroll, vectorize, parallelize, caches), and input data; each example
is built and compared with the reference evaluator. When an example fails, the message
names the first wrong element and prints the schedule as accpy code to paste and debug.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import accpy as acc
import accpy.testing as at

# the kernel under test: a matmul with a ReLU, written once
M, N, K = 24, 20, 16
A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
nest = acc.Nest(shape=(M, N, K))
i, j, k = nest.get_indices()


@nest.iteration_logic
def _():
    C[i, j] += acc.max(A[i, k] * B[k, j], 0.0)


ARGS = (A, B, C)
EXAMPLES = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@given(schedule=at.schedules(nest), data=at.arrays(ARGS))
@EXAMPLES
def test_every_schedule_computes_the_nest(schedule, data):
    at.assert_matches_reference(schedule, ARGS, data=data)


@given(plan=at.plans(at.schedules(nest, max_transforms=3)), data=at.arrays(ARGS))
@EXAMPLES
def test_every_plan_computes_the_nest(plan, data):
    at.assert_matches_reference(plan, ARGS, data=data)


def test_my_tuned_schedule_equals_the_default_order():
    s = nest.create_schedule()
    jj = s.split(j, 8)
    s.reorder(i, j, k, jj)
    plan = s.create_plan()
    plan.vectorize(jj)
    at.assert_equivalent(plan, nest, ARGS)  # random data; or data=[a, b, c]
