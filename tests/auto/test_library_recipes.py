"""The target libraries' recipes (TargetLibrary.schedule_recipes): x86 dot products, the x86 tile
unit, Gemmini. `acc.autoschedule(..., measure=False)` on a small int8 / bf16 matmul picks the
library's family; the plan's C has the unit's instruction; where the unit runs here (the tile
unit's and Gemmini's functional models) the plan is checked against numpy; AVX-512 code runs only
under the avx512 marker. The samples' block rules are the libraries' (one source of truth)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import accpy as acc
from accpy.auto.kernel import Kernel
from accpy.auto.library_recipes import library_recipes
from accpy.targets import x86tile
from accpy.targets.gemmini.auto import gemmini_recipes, matmul_blocks
from accpy.targets.x86_auto import dot_block_sizes, dot_recipes
from accpy.targets.x86tile.auto import tile_block_sizes, tile_recipes

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "samples"))
import gemmini_matmul  # noqa: E402
import int8_matmul  # noqa: E402
from int8_matmul import matmul_nest  # noqa: E402

S = acc.ScalarType
VNNI_CPU, BF16_CPU, AMX_CPU = "Intel Xeon Platinum 8380", "AMD EPYC 9654", "Intel Xeon Platinum 8480+"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test decides afresh (autoschedule's result cache in a folder of its own)."""
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))


def family(plan) -> str:
    """The chosen recipe's family, from the first line of `plan.explain()`."""
    return plan.explain().splitlines()[0].split(": ", 1)[1].split(", ")[0]


def build(plan, args, tmp_path, name):
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    return pkg.build(name, output_dir=str(tmp_path / name), python_module=False, progress=False)


def int8_data(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (M, K), dtype=np.uint8), rng.integers(-128, 128, (K, N), dtype=np.int8)


def bf16_data(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    return (acc.bfloat16_bits(rng.standard_normal((M, K)).astype(np.float32)),
            acc.bfloat16_bits(rng.standard_normal((K, N)).astype(np.float32)))


def bf16_close(c, x, y):
    want = acc.bfloat16_values(x).astype(np.float64) @ acc.bfloat16_values(y).astype(np.float64)
    tol = 1e-5 * np.sqrt(x.shape[1]) * (float(np.max(np.abs(want))) + 1)
    assert float(np.max(np.abs(c - want))) <= tol


# -- x86 dot products ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,cpu,instruction,threads", [("int8", VNNI_CPU, "accpy_dpbusd(", 1),
                                                            ("bf16", BF16_CPU, "accpy_dpbf16ps(", 2)])
def test_a_dot_product_contraction_is_chosen_where_the_target_has_the_instruction(dtype, cpu, instruction, threads):
    # large enough that a second thread pays for entering a parallel loop (the model counts it)
    nest, args = matmul_nest(400, 700, 640, dtype)
    plan = acc.autoschedule(nest, args, target=acc.Target(cpu), measure=False, threads=threads)
    assert family(plan) == "dot-product contraction"
    text = plan.explain()
    assert "layout=grouped" in text and "plan.vectorize(j" in text
    assert ("plan.parallelize" in text) == (threads > 1)
    assert instruction in plan.emit_c("mm", args)


def test_no_dot_product_recipe_without_the_instruction():
    nest, args = matmul_nest(40, 70, 64, "bf16")  # the Ice Lake Xeon has VNNI, not AVX512-BF16
    kernel = Kernel.of(nest.create_schedule(), args)
    assert dot_recipes(kernel, acc.Target(VNNI_CPU), 1) == []
    nest, args = matmul_nest(40, 70, 64, "int8")
    kernel = Kernel.of(nest.create_schedule(), args)
    assert len(dot_recipes(kernel, acc.Target(VNNI_CPU), 1)) == 1


def test_the_dot_product_recipe_has_the_samples_blocks_and_peak():
    M, N, K = 300, 500, 700
    nest, args = matmul_nest(M, N, K, "int8")
    (r,) = dot_recipes(Kernel.of(nest.create_schedule(), args), acc.Target(VNNI_CPU), 2)
    p = r["params"]
    assert {k: p[k] for k in ("MR", "NR", "KC", "NC", "MC")} == int8_matmul.vector_block_sizes(M, N, K, "int8", 2)
    assert p["ops_per_cycle"] == 2 * 16 * 4 * 2 and p["group"] == 4 and 0 < p["rate"] <= 1
    b = dot_block_sizes(M, N, K, 2, 2, 1)
    assert b["KC"] % 2 == 0 and b["NC"] % b["NR"] == 0 and b["NC"] <= -(-N // b["NR"]) * b["NR"]


@pytest.mark.avx512
def test_the_dot_product_plan_runs_exact(tmp_path):
    host = acc.Target.HOST
    if not host.has("avx512_vnni"):
        pytest.skip("this CPU has AVX-512 but not VNNI")
    M, N, K = 37, 70, 66
    nest, args = matmul_nest(M, N, K, "int8")
    plan = acc.autoschedule(nest, args, target=host, measure=False, threads=1)
    assert family(plan) == "dot-product contraction"
    x, y = int8_data(M, N, K)
    c = np.zeros((M, N), np.int32)
    build(plan, args, tmp_path, "dot_int8").mm(x, y, c)
    np.testing.assert_array_equal(c, x.astype(np.int32) @ y.astype(np.int32))


# -- the x86 tile unit ------------------------------------------------------------------------------

def test_the_tile_unit_schedule_is_chosen_and_exact_on_the_model(tmp_path):
    M, N, K = 40, 48, 130
    target = x86tile.emulating(acc.Target.HOST)
    nest, args = matmul_nest(M, N, K, "int8")
    plan = acc.autoschedule(nest, args, target=target, measure=False, threads=1)
    assert family(plan) == "tile-unit contraction"
    text = plan.explain()
    assert "location=AMX_TILE" in text and "plan.tensorize(" in text and "panel_width=16" in text
    assert "amx_emu_dpbusd" in plan.emit_c("mm", args)
    x, y = int8_data(M, N, K)
    c = np.zeros((M, N), np.int32)
    build(plan, args, tmp_path, "tile_int8").mm(x, y, c)
    np.testing.assert_array_equal(c, x.astype(np.int32) @ y.astype(np.int32))


def test_the_tile_unit_schedule_for_bf16_on_two_threads(tmp_path):
    M, N, K = 33, 40, 70
    target = x86tile.emulating(acc.Target.HOST)
    nest, args = matmul_nest(M, N, K, "bf16")
    plan = acc.autoschedule(nest, args, target=target, measure=False, threads=2)
    assert family(plan) == "tile-unit contraction"
    assert "amx_emu_dpbf16ps" in plan.emit_c("mm", args)
    x, y = bf16_data(M, N, K)
    c = np.zeros((M, N), np.float32)
    build(plan, args, tmp_path, "tile_bf16").mm(x, y, c)
    bf16_close(c, x, y)


@pytest.mark.parametrize("dtype,shape,threads", [("int8", (1024, 1024, 1024), 1), ("bf16", (2000, 2000, 2000), 2),
                                                 ("int8", (3000, 3000, 3000), 2)])
def test_the_tile_recipe_has_the_samples_block_sizes(dtype, shape, threads):
    nest, args = matmul_nest(*shape, dtype)
    kernel = Kernel.of(nest.create_schedule(), args)
    (r,) = tile_recipes(kernel, acc.Target(AMX_CPU), threads)
    want = int8_matmul.tile_block_sizes(*shape, dtype, threads)
    assert {k: r["params"][k] for k in want} == want
    assert r["params"]["ops_per_cycle"] == (2048 if dtype == "int8" else 1024)


def test_a_cpu_with_the_tile_unit_gets_its_instructions():
    nest, args = matmul_nest(64, 64, 128, "int8")
    plan = acc.autoschedule(nest, args, target=acc.Target(AMX_CPU), measure=False, threads=2)
    assert family(plan) == "tile-unit contraction"
    c = plan.emit_c("mm", args)
    assert "accpy_amx_dpbusd(" in c and "amx_emu" not in c
    # the dot products are proposed too, and lose to the tile unit in the estimate
    kernel = Kernel.of(nest.create_schedule(), args)
    families = {r.family for r in library_recipes(kernel, acc.Target(AMX_CPU), 2)}
    assert families == {"dot-product contraction", "tile-unit contraction"}


def test_no_tile_recipe_for_float32_or_a_transposed_a():
    A = acc.Array(role=acc.Role.INPUT, element_type=S.uint8, shape=(64, 32), name="A")  # A[k, i]
    B = acc.Array(role=acc.Role.INPUT, element_type=S.int8, shape=(64, 48), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int32, shape=(32, 48), name="C")
    nest = acc.Nest(shape=(32, 48, 64))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(A[k, i], S.int32) * acc.cast(B[k, j], S.int32)

    assert tile_recipes(Kernel.of(nest.create_schedule(), (A, B, C)), acc.Target(AMX_CPU), 1) == []
    f = acc.Nest(shape=(32, 48, 64))
    X = acc.Array(role=acc.Role.INPUT, element_type=S.float32, shape=(32, 64), name="X")
    Y = acc.Array(role=acc.Role.INPUT, element_type=S.float32, shape=(64, 48), name="Y")
    Z = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.float32, shape=(32, 48), name="Z")
    i, j, k = f.get_indices()

    @f.iteration_logic
    def _():
        Z[i, j] += X[i, k] * Y[k, j]

    assert tile_recipes(Kernel.of(f.create_schedule(), (X, Y, Z)), acc.Target(AMX_CPU), 1) == []


# -- Gemmini --------------------------------------------------------------------------------------------

def gemmini_nest(M, N, K):
    I8, I32 = S.int8, S.int32
    A = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=I8, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(A[i, k], I32) * acc.cast(B[k, j], I32)

    return nest, (A, B, C)


def test_the_gemmini_recipe_is_exact_on_the_model(tmp_path):
    M, N, K = 40, 72, 50
    gemmini = acc.Target(acc.Target.Model.GEMMINI)
    nest, args = gemmini_nest(M, N, K)
    (r,) = library_recipes(Kernel.of(nest.create_schedule(), args), gemmini, 1)
    assert r.family == "Gemmini tiled matmul" and (r.params["Mb"], r.params["Nb"], r.params["Kb"]) == matmul_blocks(M, N, K)
    plan = r.apply(nest.create_schedule(), args, gemmini)
    assert "gemmini_extended_compute_" in plan.emit_c("mm", args)
    rng = np.random.default_rng(1)
    a, b = rng.integers(-128, 128, (M, K), dtype=np.int8), rng.integers(-128, 128, (K, N), dtype=np.int8)
    c = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    want = c + a.astype(np.int32) @ b.astype(np.int32)
    lib = build(plan, args, tmp_path, "gemmini")
    lib.gemmini_reset_counters()
    lib.mm(a, b, c)
    np.testing.assert_array_equal(c, want)
    assert lib.gemmini_counters()["macs"] == M * N * K


def test_autoschedule_picks_the_gemmini_recipe():
    nest, args = gemmini_nest(40, 72, 50)
    plan = acc.autoschedule(nest, args, target=acc.Target(acc.Target.Model.GEMMINI), measure=False)
    assert family(plan) == "Gemmini tiled matmul"
    assert "location=ACCUMULATOR" in plan.explain() and "gemmini_extended_mvin" in plan.emit_c("mm", args)


def test_no_gemmini_recipe_for_uint8_operands():
    nest, args = matmul_nest(32, 32, 32, "int8")  # uint8 A
    assert gemmini_recipes(Kernel.of(nest.create_schedule(), args), acc.Target(acc.Target.Model.GEMMINI), 1) == []


# -- the samples use the libraries' rules; recipes say what they do ---------------------------------

def test_the_samples_block_rules_are_the_libraries():
    assert int8_matmul.tile_block_sizes is tile_block_sizes
    assert gemmini_matmul.blocks_for(256, 256, 128) == matmul_blocks(256, 256, 128) == (256, 64, 128)
    plan, _ = int8_matmul.auto_matmul_plan(40, 48, 130, "int8", target=x86tile.emulating(acc.Target.HOST))
    assert family(plan) == "tile-unit contraction"


def test_a_recipes_lines_name_caches_of_caches_and_prefetch_options():
    nest, args = matmul_nest(1024, 1024, 1024, "int8")
    (r,) = library_recipes(Kernel.of(nest.create_schedule(), args), acc.Target(AMX_CPU), 1)[1:]
    lines = r.lines()
    assert any(x.startswith("cache2 = plan.cache(A, index=") for x in lines)  # A's rows of tiles copied (PA)
    assert any(x.startswith("plan.cache(cache2, ") and "location=AMX_TILE" in x for x in lines)
    assert any(x.startswith("plan.prefetch(C, ") and "locality=1" in x and "spread=" in x for x in lines)  # PF
