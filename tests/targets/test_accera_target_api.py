"""Accera's Target API beyond accpy's own models: every name of Accera's table of known processors,
the names users write for them (with the brand: "Intel Core i7-6700"), `Target.Model` members by
display name, `Target(type=...)`, GPU categories (generic GPUs) and runtimes (refused on a CPU), and
`acc.CacheStrategy` / `acc.AUTO` in `plan.cache(..., strategy=...)`."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate
from accpy.targets.devices import KNOWN_CPUS
from accpy.targets.models import model_for_brand, spec_of

T = acc.Target
M = T.Model


# ------------------------------------------------------------------------------------------
# Accera's table: every row by its name, with its facts
# ------------------------------------------------------------------------------------------


def test_accera_table_has_every_published_row():
    # Accera v1.2's table (accera/Targets.py, KNOWN_CPUS): 575 processors, names unique
    names = [r[0] for r in KNOWN_CPUS]
    assert len(names) == 575 and len(set(names)) == 575
    for name in ("Intel 6700", "Intel 6400", "Intel 8351N", "Intel 9221", "Intel 7700T", "Intel 7960X",
                 "Intel E5-2620 v3", "Intel W-2123", "AMD 7763", "Apple M1 Max", "Raspberry Pi 4B", "ARM Cortex-M4F"):
        assert name in names, name


@pytest.mark.parametrize("row", KNOWN_CPUS, ids=[r[0] for r in KNOWN_CPUS])
def test_every_accera_name_resolves_to_its_row(row):
    name, family, branding, base, turbo, cores, threads, sizes, lines, vbytes, vregs = row[:11]
    t = T(name)
    assert t.name == name and spec_of(M(name)).accera
    assert (t.family, t.frequency_GHz, t.num_cores, t.num_threads) == (family, float(base), cores, threads)
    assert (t.cache_sizes, t.cache_lines, t.vector_bytes, t.vector_registers) == (tuple(sizes), tuple(lines),
                                                                                  vbytes, vregs)
    assert t.get("branding") == (branding or None)
    # the same model through the enum: its key, its display name (Accera's two member names), its value
    key = M(name)
    assert M[name] is key and T(key) == t and T(known_name=name) == t and str(key) == name


def test_accera_known_targets_test():
    """Accera's dsl_tests.py test_known_targets: an override and the row's defaults."""
    intel = T(known_name="Intel 6400", num_threads=44)
    assert intel.name == "Intel 6400" and intel.num_threads == 44
    assert (intel.vector_bytes, intel.vector_registers) == (32, 16)
    assert T("Intel 8351N").has("avx512f") and T("Intel 6700").has("avx2") and not T("Intel 6700").has("avx512f")


def test_model_members_by_key_and_by_display_name():
    assert M.INTEL_6700 is M["Intel 6700"] is M("Intel 6700") and M.INTEL_6700.name == "INTEL_6700"
    assert M["Intel Xeon Platinum 8480+"] is M.INTEL_XEON_PLATINUM_8480PLUS
    assert len(list(M)) == len(M) == len({m.value for m in M})  # aliases are not extra members
    assert "INTEL_7700T" in dir(acc.Targets.Model)  # the manual's dir(acc.Targets.Model)


# ------------------------------------------------------------------------------------------
# names as users write them
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("written, model", [
    ("Intel Core i7-6700", "Intel 6700"), ("i7-6700", "Intel 6700"), ("Intel Core i5 6400", "Intel 6400"),
    ("Intel Xeon E5-2620 v3", "Intel E5-2620 v3"), ("Intel Xeon Platinum 8351N", "Intel 8351N"),
    ("AMD Ryzen 3 1200", "AMD 1200"), ("AMD Ryzen 3 PRO 1200", "AMD PRO 1200"),
    ("Intel Xeon E5-2630 v3", "Intel Xeon E5-2630 v3"), ("E5-2630 v3", "Intel Xeon E5-2630 v3"),
])
def test_names_with_their_brand_resolve(written, model):
    assert T(written).name == model


@pytest.mark.slow
def test_every_accera_row_resolves_with_its_brand_too():
    for row in KNOWN_CPUS:
        name, branding = row[0], row[2]
        if not branding or " " not in name:
            continue
        vendor, rest = name.split(" ", 1)
        t = T(f"{vendor} {branding} {rest}")
        assert t.name == name or not spec_of(M(t.name)).accera, (name, t.name)


def test_xeon_e5_2630_v3():
    t = T("Intel Xeon E5-2630 v3")
    assert (t.family, t.num_cores, t.num_threads, t.frequency_GHz, t.turbo_frequency_GHz) == \
        ("Haswell-EP", 8, 16, 2.4, 3.2)
    assert t.cache_sizes == (32, 256, 20 * 1024) and (t.vector_bytes, t.vector_registers) == (32, 16)
    assert t.has("avx2") and t.has("fma") and not t.has("avx512f")
    assert model_for_brand("Intel(R) Xeon(R) CPU E5-2630 v3 @ 2.40GHz").name == "Intel Xeon E5-2630 v3"


def test_unknown_and_ambiguous_names_still_fail_clearly():
    with pytest.raises(RuntimeError, match="no known device matches 'Intel Xeon E5-2699 v9'"):
        T("Intel Xeon E5-2699 v9")
    with pytest.raises(ValueError, match="ambiguous"):
        T("xeon")


# ------------------------------------------------------------------------------------------
# Target(type=...), GPU categories and runtimes
# ------------------------------------------------------------------------------------------


def test_type_is_accera_manuals_name_for_the_category():
    t = T(type=T.Category.CPU)  # Accera's manual, "Plans - Vectorization and Parallelization"
    assert t == T() and t.category is T.Category.CPU
    assert T(type="CPU") == t and T.HOST(type=T.Category.CPU) == T.HOST
    assert T(None, type=T.Category.CPU).name == "custom"
    with pytest.raises(ValueError, match="type=Category.CPU and category=Category.ACCELERATOR disagree"):
        T(type=T.Category.CPU, category=T.Category.ACCELERATOR)
    with pytest.raises(TypeError, match=r"type: expected an acc.Target.Category \(CPU, ACCELERATOR, GPU\), got 3"):
        T(type=3)


def test_gpu_categories_give_generic_gpus_and_gpu_runtimes_need_one():
    # Accera's tests write Target(type=GPU) and Target(category=GPU, runtime=ROCM): a generic GPU
    for kw in (dict(type=T.Category.GPU), dict(category=T.Category.GPU, runtime=T.Runtime.ROCM)):
        t = T(**kw)
        assert t.category is T.Category.GPU and t.max_threads_per_block >= 1
    # the host (a CPU) given a GPU runtime: refused, naming it
    for rt in (T.Runtime.CUDA, T.Runtime.ROCM, T.Runtime.VULKAN):
        with pytest.raises(ValueError, match=f"runtime: {rt.name} is a GPU runtime"):
            T(runtime=rt)


# ------------------------------------------------------------------------------------------
# acc.CacheStrategy and acc.AUTO
# ------------------------------------------------------------------------------------------


def _scaled_copy():
    A = acc.Array(role=acc.Role.INPUT, shape=(8, 8), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 8), name="B")
    nest = acc.Nest(shape=(8, 8))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] += A[i, j] * 2.0

    return nest, (A, B), (i, j)


def test_cache_strategy_members():
    assert [m.name for m in acc.CacheStrategy] == ["BLOCKED", "STRIPED"]
    assert repr(acc.AUTO) == "AUTO" and acc.AUTO is type(acc.AUTO)()
    import pickle

    assert pickle.loads(pickle.dumps(acc.AUTO)) is acc.AUTO


def test_cache_takes_auto_on_a_cpu(tmp_path):
    nest, (A, B), (i, j) = _scaled_copy()
    plan = nest.create_plan()
    plan.cache(A, index=j, strategy=acc.AUTO)  # Accera's default, spelled out
    pkg = acc.Package()
    pkg.add(plan, args=(A, B), base_name="f")
    fn = pkg.build("f", output_dir=str(tmp_path), python_module=False).f
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 8), dtype=np.float32), rng.random((8, 8), dtype=np.float32)
    want = b.copy()
    evaluate([nest], {A: a.copy(), B: want})
    fn(a, b)
    np.testing.assert_allclose(b, want, rtol=1e-6)


@pytest.mark.parametrize("strategy", list(acc.CacheStrategy))
def test_cache_strategies_are_for_gpus(strategy):
    """Accera: "Only AUTO strategy is supported on the CPU" (a ValueError)."""
    nest, (A, B), (i, j) = _scaled_copy()
    plan = nest.create_plan()
    with pytest.raises(ValueError, match=rf"cache: strategy=<CacheStrategy.{strategy.name}: .*> is for GPU "
                                         r"targets; a CPU cache takes only acc.AUTO"):
        plan.cache(A, index=j, strategy=strategy)
