"""Property tests of bound GPU plans: random schedules (accpy.testing.schedules: splits, tiles,
reorders, skews, pads) of several nests, planned by accpy.testing.plans on GPU targets (loops
bound to blocks and threads, caches in the default memory, unrolls), built in batches -- one
package per batch, many plans each -- and run as OpenCL C kernels on the OpenCL device (PoCL on a
CPU). Every plan must match the reference evaluator.

The nests: a float32 matmul and an int32 matmul with tails, an elementwise nest with two
statements, a row reduction `S[i] += X[i, j]`, a 3x3 stencil, and (in their own test) an
elementwise nest and a row reduction with runtime sizes. Each test counts the plans it ran and
the plans that bound a loop, and asserts a floor on both, so that it cannot pass by testing
nothing. Examples are derandomized and not shrunk: a failing batch names each failing plan with
the accpy code that replays it. Most of the time is the OpenCL compiler's (PoCL builds each
kernel's program when first launched, about 0.5 s, and caches it on disk: a second run is
several times faster)."""
from __future__ import annotations

import itertools
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import accpy as acc  # noqa: E402
import accpy.testing as at  # noqa: E402
from batch import Case, check_batch  # noqa: E402

ST = acc.ScalarType
TARGETS = (acc.Target(acc.Target.Model.NVIDIA_A100), acc.Target(acc.Target.Model.AMD_MI100))
BATCH = 25  # plans per package
_names = itertools.count()


def _array(role, dtype, shape, name):
    """An acc.Array."""
    return acc.Array(role=role, element_type=dtype, shape=shape, name=name)


def matmul(M, N, K, dtype):
    """C[i, j] += A[i, k] * B[k, j]."""
    A = _array(acc.Role.INPUT, dtype, (M, K), "A")
    B = _array(acc.Role.INPUT, dtype, (K, N), "B")
    C = _array(acc.Role.INPUT_OUTPUT, dtype, (M, N), "C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C)


def two_statements(M, N, dtype):
    """Y[i, j] = Y[i, j] * X[i, j] + 3;  Z[i, j] = Y[i, j] - X[i, j] * 2 (the second reads the first's Y)."""
    X = _array(acc.Role.INPUT, dtype, (M, N), "X")
    Y = _array(acc.Role.INPUT_OUTPUT, dtype, (M, N), "Y")
    Z = _array(acc.Role.INPUT_OUTPUT, dtype, (M, N), "Z")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i, j] = Y[i, j] * X[i, j] + 3
        Z[i, j] = Y[i, j] - X[i, j] * 2

    return nest, (X, Y, Z)


def row_sum(M, N, dtype):
    """S[i] += X[i, j]."""
    X = _array(acc.Role.INPUT, dtype, (M, N), "X")
    S = _array(acc.Role.INPUT_OUTPUT, dtype, (M,), "S")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i] += X[i, j]

    return nest, (X, S)


def stencil(H, W, dtype):
    """O[y, x] += I[y + ky, x + kx] * F[ky, kx] over a 3x3 window."""
    I_ = _array(acc.Role.INPUT, dtype, (H + 2, W + 2), "I")
    F = _array(acc.Role.INPUT, dtype, (3, 3), "F")
    O = _array(acc.Role.INPUT_OUTPUT, dtype, (H, W), "O")
    nest = acc.Nest(shape=(H, W, 3, 3))
    y, x, ky, kx = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[y, x] += I_[y + ky, x + kx] * F[ky, kx]

    return nest, (I_, F, O)


def _runtime_nests():
    M, N = acc.create_dimensions()
    nest, (X, Y, Z) = two_statements(M, N, ST.float32)
    P, Q = acc.create_dimensions()
    nest2, (X2, R2) = row_sum(P, Q, ST.int32)
    return {"two statements, runtime sizes": (nest, (M, N, X, Y, Z)),
            "row sum, runtime sizes": (nest2, (P, Q, X2, R2))}


NESTS = {"matmul f32": matmul(13, 10, 7, ST.float32), "matmul i32": matmul(9, 12, 5, ST.int32),
         "two statements f32": two_statements(11, 14, ST.float32), "row sum i32": row_sum(12, 17, ST.int32),
         "3x3 stencil i32": stencil(9, 11, ST.int32)}
RUNTIME = _runtime_nests()


def cases(nests: dict):
    """A strategy of one Case: a nest of `nests`, a schedule of it, a plan on a GPU target."""
    options = [(label, target) for label in nests for target in TARGETS]

    @st.composite
    def draw(d):
        label, target = d(st.sampled_from(options))
        nest, args = nests[label]
        plan = d(at.plans(at.schedules(nest, max_transforms=3), target=target))
        return Case(f"{label} on {target.name}", plan, args, d(st.integers(0, 2 ** 31)))

    return draw()


def _run(tmp_path, nests, batches: int, min_run: int, min_bound: float):
    """Check `batches` hypothesis examples of BATCH plans each: none may fail, at least `min_run`
    must have run and a fraction `min_bound` of those must bind a loop. Returns the counts."""
    stats = dict.fromkeys(("batches", "run", "refused", "bound", "threads", "cached", "unrolled"), 0)
    refusals: set = set()
    seconds = dict.fromkeys(("lower", "build", "run"), 0.0)
    t0 = time.perf_counter()

    # (no shrinking: a batch's failure names each failing plan with code that replays it, and
    # shrinking a batch of BATCH plans would build hundreds of packages)
    @settings(max_examples=batches, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.generate))
    @given(batch=st.lists(cases(nests), min_size=BATCH, max_size=BATCH))
    def check(batch):
        n = next(_names)
        result = check_batch(batch, tmp_path / f"b{n}", f"bound{n}")
        assert not result.failures, f"{len(result.failures)} of {len(batch)} plans failed:\n\n" + \
            "\n\n".join(result.failures)
        _count(stats, result)
        refusals.update(r.splitlines()[0][:160] for r in result.refusals)
        for k, v in result.seconds.items():
            seconds[k] += v

    check()
    print(f"{stats['run']} bound-plan examples run ({stats['bound']} with a bind, {stats['threads']} binding "
          f"threads, {stats['cached']} with a cache, {stats['unrolled']} with an unroll; {stats['refused']} refused "
          f"when built) in {stats['batches']} batches, {time.perf_counter() - t0:.1f} s ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()) + ")")
    print("refused when built:" + "".join(f"\n    {r}" for r in sorted(refusals)))
    assert stats["batches"] == batches and stats["run"] + stats["refused"] == batches * BATCH, stats
    assert stats["run"] >= min_run and stats["bound"] >= min_bound * stats["run"], stats
    return stats


def _count(stats: dict, result) -> None:
    """Add a batch's counts to `stats`."""
    stats["batches"] += 1
    stats["run"] += result.run
    stats["refused"] += result.refused
    for c in result.ran:
        bound = [u for _, u in c.plan.bindings]
        stats["bound"] += bool(bound)
        stats["threads"] += any(u.startswith("THREAD") for u in bound)
        stats["cached"] += bool(c.plan.caches)
        stats["unrolled"] += any(k == "unrolled" for _, k in c.plan._kinds)


# The floors add up to 302 plans run (a few plans, mostly caches whose block has a runtime size,
# are refused when built); each test's counts are printed (-s) and recorded (junit's properties).
def test_bound_plans_of_fixed_size_nests_match_the_reference(needs_opencl, tmp_path, record_property):
    stats = _run(tmp_path, NESTS, batches=11, min_run=262, min_bound=0.6)
    for k, v in stats.items():
        record_property(k, v)


def test_bound_plans_of_runtime_size_nests_match_the_reference(needs_opencl, tmp_path, record_property):
    stats = _run(tmp_path, RUNTIME, batches=2, min_run=40, min_bound=0.6)
    for k, v in stats.items():
        record_property(k, v)


def test_what_plans_draws_on_a_gpu_target():
    """No device needed: binds in level order (some tuples, some of blocks and of threads), caches
    only inside every bound loop, nothing vectorized or parallelized; bind=False binds nothing."""
    drawn, unbound = [], []

    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(c=cases(NESTS))
    def draw(c):
        drawn.append(c.plan)

    draw()
    for plan in drawn:
        order = plan.schedule.get_indices()
        where = [(order.index(ix), u) for ixs, u in plan.bindings for ix in ixs]
        blocks = [k for k, u in where if u.startswith("BLOCK")]
        threads = [k for k, u in where if u.startswith("THREAD")]
        assert len(where) == len(blocks) + len(threads) and max(blocks, default=-1) < min(threads, default=99)
        for c in plan.caches:
            for ix in (c.index, c.trigger_index):
                assert ix is None or order.index(ix) > max((k for k, _ in where), default=-1), plan
        assert plan._parallel is None and all(k != "vectorized" for _, k in plan._kinds)
    units = [u for p in drawn for _, u in p.bindings]
    assert sum(bool(p.bindings) for p in drawn) >= 0.6 * len(drawn)
    assert any(u.startswith("BLOCK") for u in units) and any(u.startswith("THREAD") for u in units)
    assert any(len(ixs) > 1 for p in drawn for ixs, _ in p.bindings)
    assert sum(bool(p.caches) for p in drawn) >= 5

    nest, _ = NESTS["matmul f32"]

    @settings(max_examples=20, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(plan=at.plans(at.schedules(nest), target=TARGETS[0], bind=False))
    def draw_unbound(plan):
        unbound.append(plan)

    draw_unbound()
    assert unbound and not any(p.bindings or p._parallel for p in unbound)
