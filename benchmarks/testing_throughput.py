"""Examples per second of user-style property tests written with accpy.testing.

Two tests, as a user would write them: random schedules of a 32x32x32 matmul, and random
plans of random schedules of a 1-D 3-tap stencil, each example built and checked against
the reference evaluator. Prints one JSON line per test (examples, seconds, examples per
second, also without the one-time precompiled headers of the runtime that a fresh build
cache makes, and where the time went: building, running the reference, the rest).

    python benchmarks/testing_throughput.py [--examples N] [--seed S]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import accpy as acc  # noqa: E402
import accpy.testing as at  # noqa: E402
from accpy.testing import asserts  # noqa: E402


def matmul(n=32):
    A = acc.Array(role=acc.Role.INPUT, shape=(n, n), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(n, n), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n, n), name="C")
    nest = acc.Nest(shape=(n, n, n))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C)


def stencil(n=256):
    X = acc.Array(role=acc.Role.INPUT, shape=(n + 2,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n,), name="Y")
    nest = acc.Nest(shape=(n, 3))
    i, t = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i + t] * 0.25

    return nest, (X, Y)


def measure(name, strategy, args, examples, seed):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    spent = {"build": 0.0, "reference": 0.0, "precompile": 0.0}
    count = [0]
    real_run = asserts.run

    def timed(fn, key):
        """`fn`, adding its time to spent[key]."""
        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[key] += time.perf_counter() - t
        return wrapper

    from accpy.nest import reference
    from accpy.package import compile as compiling

    real_eval = reference.evaluate
    real_pch = compiling.prelude_pch
    timed_run = timed(real_run, "build")  # build + call (the call is microseconds)
    timed_pch = timed(real_pch, "precompile")
    timed_eval = timed(real_eval, "reference")

    @hseed(seed)
    @given(x=strategy, data=at.arrays(args))
    @settings(deadline=None, max_examples=examples, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    def test(x, data):
        count[0] += 1
        at.assert_matches_reference(x, args, data=data)

    asserts.run, reference.evaluate, compiling.prelude_pch = timed_run, timed_eval, timed_pch
    try:
        t0 = time.perf_counter()
        test()
        seconds = time.perf_counter() - t0
    finally:
        asserts.run, reference.evaluate, compiling.prelude_pch = real_run, real_eval, real_pch
    return {"test": name, "examples": count[0], "seconds": round(seconds, 2),
            "examples_per_second": round(count[0] / seconds, 2),
            # without the one-time precompiled headers (what a rerun with the user's cache sees)
            "examples_per_second_warm": round(count[0] / (seconds - spent["precompile"]), 2),
            "build_seconds": round(spent["build"], 2), "reference_seconds": round(spent["reference"], 2),
            # (part of build_seconds: the runtime's precompiled headers, made once per kind of
            # kernel in this fresh cache; a user's cache keeps them between runs)
            "precompile_seconds": round(spent["precompile"], 2),
            "other_seconds": round(seconds - spent["build"] - spent["reference"], 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    # a fresh build cache: every example is really compiled
    os.environ["ACCPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="accpy-throughput-")
    nest, args = matmul()
    print(json.dumps(measure("matmul 32x32x32: schedules", at.schedules(nest), args, a.examples, a.seed)))
    nest, args = stencil()
    print(json.dumps(measure("stencil 1-D: plans of schedules", at.plans(at.schedules(nest)), args,
                             a.examples, a.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
