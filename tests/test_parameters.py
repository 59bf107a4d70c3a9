"""Parameters (SPEC §1.7): in shapes, split sizes, orders, cache levels and scalar logic;
grids; one function per parameter dict, with the values recorded in the .hat."""
import tomllib

import numpy as np
import pytest

import accpy as acc
from accpy.nest.parameters import UnresolvedParameter
from support.cpu import cpu_flags

ST = acc.ScalarType


def test_create_parameters_names_them_after_the_variables():
    P0, Pfoo = acc.create_parameters()
    assert (P0.name, Pfoo.name) == ("P0", "Pfoo")
    with pytest.raises(RuntimeError):
        acc.create_parameters()  # not assigned to names


def test_grid_is_the_product_with_order_permutations_filter_and_sample():
    P0, P1 = acc.create_parameters()
    nest = acc.Nest((4, 5))
    i, j = nest.get_indices()
    grid = acc.create_parameter_grid({P0: [1, 2, 3], P1: (i, j)})
    assert len(grid) == 3 * 2
    assert {tuple(x.name for x in g[P1]) for g in grid} == {("i", "j"), ("j", "i")}
    seen = []
    kept = acc.create_parameter_grid({P0: [1, 2, 3], P1: [10, 20]}, filter_func=lambda t: seen.append(t) or t[0] != 2)
    assert all(isinstance(t, tuple) and len(t) == 2 for t in seen) and len(seen) == 6
    assert len(kept) == 4 and all(g[P0] != 2 for g in kept)
    a = acc.create_parameter_grid({P0: list(range(10)), P1: [0, 1]}, sample=5, seed=7)
    b = acc.create_parameter_grid({P0: list(range(10)), P1: [0, 1]}, sample=5, seed=7)
    assert len(a) == 5 and [sorted(g.items(), key=lambda kv: kv[0].name) for g in a] == \
        [sorted(g.items(), key=lambda kv: kv[0].name) for g in b]
    assert len(acc.create_parameter_grid({P0: [1, 2]}, sample=10)) == 2  # sample >= size: everything
    with pytest.raises(ValueError):
        acc.create_parameter_grid({})


def _matmul(P_M, P_N, K=8):
    A = acc.Array(role=acc.Role.INPUT, shape=(P_M, K), element_type=ST.int32, name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, P_N), element_type=ST.int32, name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(P_M, P_N), element_type=ST.int32, name="C")
    nest = acc.Nest(shape=(P_M, P_N, K))
    i, j, k = nest.get_indices()
    return nest, (A, B, C), (i, j, k)


def test_parameters_in_shapes_splits_orders_cache_levels_and_logic(tmp_path):
    PM, PN, PS, PO, PL, PF = acc.create_parameters()
    nest, (A, B, C), (i, j, k) = _matmul(PM, PN)

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j] * PF

    s = nest.create_schedule()
    jj = s.split(j, PS)
    s.reorder(order=PO)
    plan = s.create_plan()
    plan.cache(C, level=PL)
    plan.unroll(jj)
    grid = acc.create_parameter_grid(
        {PM: [3, 6], PN: [5, 9], PS: [2, 4], PO: (i, j, jj, k), PL: [1, 2], PF: [1, -2]},
        filter_func=lambda t: s.is_valid_loop_order(t[3]), sample=12, seed=3)
    pkg = acc.Package()
    fns = pkg.add(plan, args=(A, B, C), base_name="mm", parameters=grid)
    assert len(fns) == len(grid) == 12 and len({f.name for f in fns}) == 12
    lib = pkg.build("params", output_dir=tmp_path, python_module=False)
    rng = np.random.default_rng(0)
    meta = tomllib.loads((tmp_path / "params.hat").read_text())
    for f, g in zip(fns, grid):
        M, N = g[PM], g[PN]
        a = rng.integers(-9, 9, (M, 8), dtype=np.int32)
        b = rng.integers(-9, 9, (8, N), dtype=np.int32)
        c = rng.integers(-9, 9, (M, N), dtype=np.int32)
        want = c + g[PF] * (a @ b)
        getattr(lib, f.name)(a, b, c)
        assert (c == want).all(), g
        rec = meta["functions"][f.name]["auxiliary"]["accpy"]["parameters"]
        assert rec["PM"] == M and rec["PS"] == g[PS] and rec["PL"] == g[PL]
        assert rec["PO"] == "(" + ", ".join(x.name for x in g[PO]) + ")"
        assert [a["shape"] for a in meta["functions"][f.name]["arguments"]] == [[M, 8], [8, N], [M, N]]


def test_a_parameterized_function_needs_its_values():
    P, = (acc.create_parameters(),)
    nest, (A, B, C), (i, j, k) = _matmul(P, 4)

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    with pytest.raises(UnresolvedParameter, match=r"parameter P has no value"):
        acc.Package().add(nest, args=(A, B, C), base_name="mm")
    assert issubclass(UnresolvedParameter, ValueError)


def test_errors_of_a_parameterized_schedule_show_when_the_values_are_known():
    P, = (acc.create_parameters(),)
    nest, (A, B, C), (i, j, k) = _matmul(4, 4)

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    s.split(j, P)
    with pytest.raises(ValueError, match="Split sizes must be integers >= 1"):
        acc.Package().add(s, args=(A, B, C), base_name="mm", parameters={P: 0})
    # the same schedule is fine with a good value
    acc.Package().add(s, args=(A, B, C), base_name="mm", parameters={P: 3})


def test_out_of_bounds_logic_is_caught_for_the_values_that_make_it_so():
    P, = (acc.create_parameters(),)
    A = acc.Array(role=acc.Role.INPUT, shape=(10,), element_type=ST.int32, name="A")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(P,), element_type=ST.int32, name="C")
    nest = acc.Nest(shape=(P,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[i + 2]

    acc.Package().add(nest, args=(A, C), base_name="ok", parameters={P: 8})
    with pytest.raises(acc.LogicError, match="out of bounds"):
        acc.Package().add(nest, args=(A, C), base_name="bad", parameters={P: 9})


def test_grid_builds_compile_units_in_parallel_and_share_the_error_channel(tmp_path, capfd, monkeypatch):
    import os

    import accpy.package.compile as comp

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    seen_units = []
    real = comp.compile_c

    def spy(source, flags, display_path, units=None, **options):
        seen_units.append(len(units) if units else 1)
        return real(source, flags, display_path, units=units, **options)

    monkeypatch.setattr("accpy.package.package.compile_c", spy)
    PS, = (acc.create_parameters(),)
    nest, (A, B, C), (i, j, k) = _matmul(6, 10)

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    s.split(j, PS)
    pkg = acc.Package()
    fns = pkg.add(s, args=(A, B, C), base_name="mm", parameters=[{PS: n} for n in (1, 2, 3)])  # + 1 below: units [0, 2] and [1, 3]
    # a function whose target needs an instruction set this CPU lacks: its error is raised in a
    # translation unit other than the one defining the package's error state
    lacking = acc.Target.HOST(extensions=acc.Target.HOST.extensions + ("avx512_fp16", "amx_tile"))
    if {"avx512_fp16", "amx_tile"} <= cpu_flags():
        pytest.skip("this CPU has avx512_fp16 and AMX: no missing feature to provoke an error with")
    pkg.add(nest.create_schedule().create_plan(lacking), args=(A, B, C), base_name="needs_more")
    lib = pkg.build("grid", output_dir=tmp_path, python_module=False, progress=True)
    assert seen_units == [2]
    err = capfd.readouterr().err
    assert "building grid: [" in err and "2/2 units" in err
    rng = np.random.default_rng(1)
    a = rng.integers(-9, 9, (6, 8), dtype=np.int32)
    b = rng.integers(-9, 9, (8, 10), dtype=np.int32)
    for f in fns:
        c = np.zeros((6, 10), np.int32)
        getattr(lib, f.name)(a, b, c)
        assert (c == a @ b).all()
    with pytest.raises(acc.KernelError, match="lacks"):
        lib.needs_more(a, b, np.zeros((6, 10), np.int32))
