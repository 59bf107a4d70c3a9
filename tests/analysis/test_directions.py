"""Exact dependence directions (accpy/analysis/directions.py) against hand-derived facts and a
brute-force oracle that enumerates every pair of instances of small nests (random schedules:
splits, skews, pads, reorders), plus runtime sizes, ring buffers (`%`) and fused schedules."""
from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import accpy as acc
import accpy.testing as at
from accpy.analysis.dependence import accesses, original_before  # noqa: F401  (the meaning the oracle mirrors)
from accpy.analysis.directions import Dependence, combined_signs, dependences, refine
from accpy.ir.affine import Affine, to_affine
from accpy.nest.reference import evaluate_expr

I32 = acc.ScalarType.int32
FAST = settings(deadline=None, max_examples=12, database=None, suppress_health_check=list(HealthCheck))


# -- nests ----------------------------------------------------------------------------------------

def matmul(M=3, N=3, K=3):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A", element_type=I32)
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B", element_type=I32)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C", element_type=I32)
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest


def jacobi_1d(T=4, N=7):
    """A[(t + 1) % 2, i + 1] = A[t % 2, i] + A[t % 2, i + 1] + A[t % 2, i + 2]: a ring buffer."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, N), name="A", element_type=I32)
    nest = acc.Nest(shape=(T, N - 2))
    t, i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[(t + 1) % 2, i + 1] = A[t % 2, i] + A[t % 2, i + 1] + A[t % 2, i + 2]

    return nest


def gauss_seidel(N=4, M=5):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N + 1, M + 1), name="A", element_type=I32)
    nest = acc.Nest(shape=(N, M))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i + 1, j + 1] = A[i, j + 1] + A[i + 1, j] + A[i + 1, j + 1] * 3

    return nest


def flat_prefix(M=3, N=4):
    """S[i*N + j + 1] = S[i*N + j] + X[i, j]: a running sum through the rows, distance (1, -(N-1))."""
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M * N + 1,), name="S", element_type=I32)
    X = acc.Array(role=acc.Role.INPUT, shape=(M, N), name="X", element_type=I32)
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        S[i * N + j + 1] = S[i * N + j] + X[i, j]

    return nest


def transpose_in_place(N=4):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, N), name="A", element_type=I32)
    nest = acc.Nest(shape=(N, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i, j] = A[j, i] + 1

    return nest


# -- the oracle: every pair of instances, enumerated ----------------------------------------------

def _value(e, env: dict) -> int:
    a = e if isinstance(e, Affine) else to_affine(e)
    if a is not None:
        return a.const + sum(c * env[v] for v, c in a.terms)
    return int(evaluate_expr(e, env))


def brute_force(space) -> dict:
    """{(source, sink): (signs, distance)} by enumerating the box (constant sizes, no conditions)."""
    accs = accesses(space)
    extents = [int(_value(d.extent, {})) for d in space.dims]
    by_element: dict = {}
    for point in itertools.product(*(range(e) for e in extents)):
        env = {d.var: v for d, v in zip(space.dims, point)}
        for p, part in enumerate(space.parts):
            if any(_value(c, env) < 0 for c in space.part_constraints(p)):
                continue
            nest = {ix.var: _value(part.index_map[ix.var], env) for ix in part.nest.indices}
            key = (p,) + tuple(nest[ix.var] for ix in part.nest.indices)
            for a in accs:
                if a.part == p:
                    element = (id(a.buffer),) + tuple(_value(e, nest) for e in a.indices)
                    by_element.setdefault(element, []).append((key + (a.stmt,), point, a))
    diffs: dict = {}
    for insts in by_element.values():
        for (ka, pa, a), (kb, pb, b) in itertools.permutations(insts, 2):
            if (a.writes or b.writes) and ka < kb:
                diffs.setdefault((accs.index(a), accs.index(b)), set()).add(tuple(y - x for x, y in zip(pa, pb)))
    out = {}
    for pair, vs in diffs.items():
        signs = tuple(frozenset("-" if v[k] < 0 else "+" if v[k] > 0 else "0" for v in vs)
                      for k in range(len(extents)))
        dist = tuple(next(iter({v[k] for v in vs})) if len({v[k] for v in vs}) == 1 else None
                     for k in range(len(extents)))
        out[pair] = (signs, dist)
    return out


def _key(space, a) -> int:
    """An access as its position among the space's accesses (Access is not hashable)."""
    return accesses(space).index(a)


def exact(space) -> dict:
    return {(_key(space, d.source), _key(space, d.sink)): (d.signs, d.distance) for d in dependences(space)}


# -- facts ----------------------------------------------------------------------------------------

def test_matmul_has_one_commuting_dependence_along_k():
    s = matmul(5, 6, 7).create_schedule()
    (d,) = dependences(s.space)
    assert isinstance(d, Dependence) and d.commuting and d.kind == "output"
    assert d.signs == (frozenset("0"), frozenset("0"), frozenset("+"))
    assert d.distance == (0, 0, None)
    assert d.describe(s.space) == "C: output S0 -> S0, distance (0, 0, +) (commuting)"
    assert dependences(s.space, include_commuting=False) == []


def test_ring_buffer_stencil_distances():
    s = jacobi_1d(6, 10).create_schedule()
    deps = dependences(s.space)
    found = {(d.kind, d.distance[1]) for d in deps}
    assert found == {("flow", -1), ("flow", 0), ("flow", 1), ("anti", -1), ("anti", 0), ("anti", 1), ("output", 0)}
    for d in deps:  # the ring buffer's slots come back every second step: t's distance is 1, 3, ... (or 2, 4, ...)
        assert d.signs[0] == frozenset("+") and d.distance[0] is None and not d.commuting
    lines = {d.describe(s.space) for d in deps}
    assert "A: flow S0 -> S0, distance (+, -1)" in lines and "A: output S0 -> S0, distance (+, 0)" in lines


def test_runtime_sizes_are_unknowns():
    M, N, K = acc.create_dimensions()
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    (d,) = dependences(nest.create_schedule().space)
    assert d.signs == (frozenset("0"), frozenset("0"), frozenset("+")) and d.commuting

    T, N = acc.create_dimensions()
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, N), name="X")
    n2 = acc.Nest(shape=(T, N))
    t, n = n2.get_indices()

    @n2.iteration_logic
    def _():
        X[(t + 1) % 2, n] = X[t % 2, n] * 0.5

    kinds = {(d.kind, d.distance[1]) for d in dependences(n2.create_schedule().space)}
    assert kinds == {("flow", 0), ("anti", 0), ("output", 0)}


def test_split_and_skewed_schedules_have_their_own_dims():
    s = gauss_seidel(6, 7).create_schedule()
    i, j = s.get_indices()
    ii = s.split(i, 2)
    dist = {d.distance for d in dependences(s.space)}
    assert (0, 0, 1) in dist  # (0, 1) inside a tile of i
    assert all(len(x) == 3 for x in dist)
    s2 = gauss_seidel(6, 7).create_schedule()
    a, b = s2.get_indices()
    s2.skew(a, b)
    assert {d.distance for d in dependences(s2.space)} == {(1, 0), (1, 1)}  # (1, 0), (0, 1) -> (1, 0), (1, 1)


def test_fused_nests_with_one_index_name_are_told_apart():
    """Both nests name their unfused index j: the conflict needs part 0's j = 2, part 1's j = 0."""
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 5), name="A", element_type=I32)
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 5), name="B", element_type=I32)
    n0, n1 = acc.Nest(shape=(4, 5)), acc.Nest(shape=(4, 5))
    i, j = n0.get_indices()

    @n0.iteration_logic
    def _():
        A[i, j] = A[i, j] * 2

    i, j = n1.get_indices()

    @n1.iteration_logic
    def _():
        B[i, j] = A[i, 2]

    s = acc.fuse((n0.create_schedule(), n1.create_schedule()), partial=1)
    assert [d.name for d in s.space.dims] == ["i", "f", "j", "j"]
    got = exact(s.space)
    assert got == brute_force(s.space)
    accs = accesses(s.space)
    (signs, dist), = [v for (a, b), v in got.items() if accs[a].part != accs[b].part]
    assert dist == (0, 1, -2, None)


def test_refine_keeps_the_pairs_inside_one_iteration():
    s = flat_prefix(3, 4).create_schedule()
    (d,) = dependences(s.space)
    assert d.signs == (frozenset("0+"), frozenset("-+"))
    (r,) = refine(s.space, [d], [0])  # within one i: only (0, 1) is left
    assert r.signs == (frozenset("0"), frozenset("+")) and r.distance == (0, 1)
    assert refine(s.space, [d], [0, 1]) == []
    j1 = jacobi_1d().create_schedule()
    assert refine(j1.space, dependences(j1.space), [0]) == []  # every dependence crosses t


def test_combined_signs_predict_a_skew():
    s = jacobi_1d().create_schedule()
    deps = dependences(s.space)
    assert any("-" in sg for sg in combined_signs(s.space, deps, {1: 1}))
    assert all(sg <= frozenset("0+") for sg in combined_signs(s.space, deps, {1: 1, 0: 1}))


def test_a_stencil_with_ten_accesses_is_fast():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, 20, 20), name="A")
    nest = acc.Nest(shape=(5, 18, 18))
    t, i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[(t + 1) % 2, i + 1, j + 1] = (A[t % 2, i + 1, j + 1] + A[t % 2, i, j + 1] + A[t % 2, i + 2, j + 1]
                                        + A[t % 2, i + 1, j] + A[t % 2, i + 1, j + 2]) * 0.2

    space = nest.create_schedule().space
    start = time.perf_counter()
    deps = dependences(space)
    assert len(deps) == 11
    assert time.perf_counter() - start < 2.0  # ~0.05 s measured; generous for a loaded machine


# -- the oracle on random schedules ---------------------------------------------------------------

NESTS = [matmul(), jacobi_1d(), gauss_seidel(), flat_prefix(), transpose_in_place()]


@given(data=st.data(), which=st.integers(0, len(NESTS) - 1))
@FAST
def test_directions_match_enumeration_on_random_schedules(data, which):
    s = data.draw(at.schedules(NESTS[which], max_transforms=3, max_split=3))
    assert exact(s.space) == brute_force(s.space)


@pytest.mark.parametrize("which", range(len(NESTS)))
def test_directions_match_enumeration_in_default_order(which):
    s = NESTS[which].create_schedule()
    assert exact(s.space) == brute_force(s.space)
