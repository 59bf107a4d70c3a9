"""Targets: `acc.Target.HOST` detection, known models (`acc.Target.Model`), overrides and
equality, compiler flags; code for a feature this CPU lacks fails with `acc.KernelError`
(from Python, the pybind11 module and C), never SIGILL; the AVX2 fallback (8-wide
`__m256` code, correct results with masked tails).
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.targets import MemorySpace
from accpy.targets.models import model_for_brand, spec_of
from accpy.targets.features import BUILTIN_NAMES
from accpy.targets.host import _microarchitecture
from support.cpu import cpu_flags, host_flags

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
T = acc.Target
M = acc.Target.Model
HOST = acc.Target.HOST
F32, I32 = acc.ScalarType.float32, acc.ScalarType.int32


FLAGS = cpu_flags()  # what this CPU executes
HOST_FLAGS = host_flags()  # what HOST may use (fewer when ACCPY_HOST_MODEL poses as a smaller host)
POSED = HOST.get("posing_as")
needs_cpuinfo = pytest.mark.skipif(not FLAGS, reason="no /proc/cpuinfo on this system")
needs_avx2 = pytest.mark.skipif(not {"avx2", "fma"} <= FLAGS, reason="executes AVX2/FMA code: this CPU lacks it")
needs_avx512 = [pytest.mark.avx512,
                pytest.mark.skipif("avx512f" not in FLAGS, reason="executes AVX-512 code: this CPU lacks AVX-512F")]


@pytest.fixture(scope="module", autouse=True)
def shared_cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("accpy_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACCPY_CACHE_DIR", str(d))
        yield d


# -- 1. HOST ----------------------------------------------------------------------------------

def test_host_basics():
    assert HOST.name == "HOST" and HOST.is_cpu and HOST.category is T.Category.CPU
    assert HOST.num_threads == os.cpu_count()
    assert 1 <= HOST.num_cores <= HOST.num_threads
    assert HOST.family and isinstance(HOST.family, str)
    assert HOST.runtime is T.Runtime.OPENMP
    assert HOST.extra == ((("posing_as", POSED),) if POSED else ()) and not HOST.has_memory(MemorySpace.SCRATCHPAD)


def test_host_is_target_default_and_by_name():
    assert T() == HOST and T("HOST") == HOST and T("host") == HOST
    assert hash(T()) == hash(HOST)
    assert T("HOST") is not HOST  # a new, equal object


def test_host_cores_match_lscpu():
    if not shutil.which("lscpu"):
        pytest.skip("lscpu is not installed")
    out = subprocess.run(["lscpu", "-p=CORE,SOCKET,ONLINE"], capture_output=True, text=True).stdout
    cores = {tuple(line.split(",")[:2]) for line in out.splitlines()
             if line and not line.startswith("#") and line.split(",")[2].strip().upper() != "N"}
    assert HOST.num_cores == len(cores)
    if len(cores) == os.cpu_count():  # no SMT (as on the CI machine): one thread per core
        assert HOST.num_cores == os.cpu_count()


@needs_cpuinfo
def test_host_extensions_match_cpuinfo():
    for f in ("avx", "avx2", "fma", "f16c", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
              "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16"):
        assert HOST.has(f) == (f in HOST_FLAGS), f
    # Accera's names ask the same questions
    assert HOST.has("AVX2") == ("avx2" in HOST_FLAGS)
    assert HOST.has("AVX512") == HOST.has("AVX512F") == ("avx512f" in HOST_FLAGS)
    assert HOST.has("AVX512VNNI") == ("avx512_vnni" in HOST_FLAGS)
    assert HOST.has("AMX") == HOST.has("amx-tile") == ("amx_tile" in HOST_FLAGS)
    assert HOST.has("SSE3") == ("pni" in HOST_FLAGS)
    assert not HOST.has("no-such-feature")
    # canonical order, no duplicates
    from accpy.targets.features import FEATURES

    assert list(HOST.extensions) == [f for f in FEATURES if f in HOST.extensions]


@needs_cpuinfo
def test_host_vector_shape():
    if "avx512f" in HOST_FLAGS:
        assert (HOST.vector_bytes, HOST.vector_registers) == (64, 32)
    elif "avx" in HOST_FLAGS:
        assert (HOST.vector_bytes, HOST.vector_registers) == (32, 16)
    else:
        assert (HOST.vector_bytes, HOST.vector_registers) == (16, 16)


def test_this_machine_has_avx512_and_64_byte_vectors():
    """The CI machine has AVX-512F (and no AVX512-FP16 / AMX): its HOST uses 64-byte vectors."""
    if "avx512f" not in FLAGS:
        pytest.skip("this CPU has no AVX-512F")
    assert HOST.vector_bytes == 64 and HOST.vector_registers == 32
    assert "-mavx512f" in HOST.compiler_flags() and "-mprefer-vector-width=512" in HOST.compiler_flags()


def test_host_caches_plausible():
    sizes, lines = HOST.cache_bytes, HOST.cache_lines
    assert len(sizes) >= 2 and len(lines) == len(sizes)
    assert all(isinstance(s, int) and s > 0 for s in sizes)
    assert HOST.cache_sizes == tuple(s // 1024 for s in sizes)  # KiB, as Accera's
    assert 8 << 10 <= sizes[0] <= 256 << 10  # L1 data
    assert sizes[0] < sizes[1]  # L2 above L1
    if len(sizes) > 2:
        assert sizes[2] >= sizes[1]
    assert all(line in (32, 64, 128, 256) for line in lines)


def test_host_caches_match_sysfs():
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    if not base.is_dir():
        pytest.skip("no sysfs cache information")
    want = {}
    for d in base.glob("index*"):
        if (d / "type").read_text().strip() == "Instruction":
            continue
        size = (d / "size").read_text().strip()
        n = int(size.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(size[-1], 0)
        want[int((d / "level").read_text())] = (n, int((d / "coherency_line_size").read_text()))
    assert HOST.cache_bytes == tuple(want[k][0] for k in sorted(want))
    assert HOST.cache_lines == tuple(want[k][1] for k in sorted(want))


def test_microarchitecture_names():
    intel = {"vendor_id": "GenuineIntel", "cpu family": "6"}
    assert _microarchitecture({**intel, "model": str(0x8F)}) == "Sapphire Rapids"
    assert _microarchitecture({**intel, "model": str(0x6A)}) == "Ice Lake-SP"
    assert _microarchitecture({**intel, "model": str(0x55), "stepping": "4"}) == "Skylake-SP"
    assert _microarchitecture({**intel, "model": str(0x55), "stepping": "7"}) == "Cascade Lake"
    assert _microarchitecture({**intel, "model": str(0x9E)}) == "Coffee Lake"
    amd = {"vendor_id": "AuthenticAMD"}
    assert _microarchitecture({**amd, "cpu family": "25", "model": "17"}) == "Zen 4"
    assert _microarchitecture({**amd, "cpu family": "25", "model": "1"}) == "Zen 3"
    assert _microarchitecture({**amd, "cpu family": "26", "model": "2"}) == "Zen 5"
    assert _microarchitecture({**amd, "cpu family": "23", "model": "49"}) == "Zen 2"
    assert _microarchitecture({"vendor_id": "Other", "cpu family": "6", "model": "1"}) is None
    assert _microarchitecture({}) is None


def test_brand_strings_name_models():
    assert model_for_brand("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz").name == "Intel Xeon Platinum 8380"
    assert model_for_brand("Intel(R) Xeon(R) Platinum 8480+").name == "Intel Xeon Platinum 8480+"
    assert model_for_brand("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz").name == "Intel Core i7-8700"
    assert model_for_brand("AMD EPYC 9654 96-Core Processor").name == "AMD EPYC 9654"
    assert model_for_brand("AMD EPYC") is None
    assert model_for_brand("Intel(R) Xeon(R) Platinum 8480C") is None


# -- 2. overrides, equality ------------------------------------------------------------------

def test_overrides_replace_only_what_is_given():
    t = HOST(num_threads=1)
    assert t.num_threads == 1 and t != HOST
    assert {f.name: getattr(t, f.name) for f in dataclasses.fields(t) if f.name != "num_threads"} == \
        {f.name: getattr(HOST, f.name) for f in dataclasses.fields(HOST) if f.name != "num_threads"}
    assert HOST.num_threads == os.cpu_count()  # the original is unchanged
    assert HOST(num_threads=None) == HOST  # None keeps a value (as Accera's defaults)
    assert T("HOST", num_threads=1) == t == T(num_threads=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        HOST.num_threads = 3  # type: ignore[misc]


def test_model_overrides():
    t = T(M.INTEL_XEON_GOLD_6148, num_cores=4, num_threads=8, cache_sizes=[32, 1 << 10, 8 << 10],
          frequency_GHz=3.0, name="my xeon", family="Skylake-SP (4 cores)")
    assert (t.num_cores, t.num_threads, t.cache_sizes, t.frequency_GHz) == (4, 8, (32, 1 << 10, 8 << 10), 3.0)
    assert t.cache_bytes == (32 << 10, 1 << 20, 8 << 20)
    assert (t.name, t.family) == ("my xeon", "Skylake-SP (4 cores)")
    base = T(M.INTEL_XEON_GOLD_6148)
    assert t.extensions == base.extensions and t.vector_bytes == base.vector_bytes
    # Accera's own example: a known CPU with AVX-512 removed from its extensions
    no512 = T("Intel Xeon Gold 6148", category=T.Category.CPU, extensions=["SSE4.1", "SSE4.2", "AVX2"])
    assert no512.has("avx2") and no512.has("fma") and not no512.has("avx512f")
    assert (no512.vector_bytes, no512.vector_registers) == (32, 16)  # follows the extensions
    t = T(M.INTEL_XEON_GOLD_6148, extensions=["AVX2"], vector_bytes=16)  # unless given
    assert (t.vector_bytes, t.vector_registers) == (16, 16)
    t = HOST(extensions=[e for e in HOST.extensions if not e.startswith("avx512")], vector_bytes=32)
    assert (t.vector_bytes, t.vector_registers) == (32, 16) and not t.has("avx512f")
    assert T(M.INTEL_CORE_I7_8700, vector_registers=8).vector_registers == 8


def test_extension_names_and_implications():
    t = HOST(extensions=["AVX512"])
    skx = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx2", "avx", "fma", "f16c"}
    assert skx <= set(t.extensions)
    assert not t.has("avx512_vnni")
    assert (t.vector_bytes, t.vector_registers) == (64, 32)
    assert HOST(extensions=["avx512_bf16"]).has("avx512bw")  # as gcc's -mavx512bf16
    assert HOST(extensions=["AMX-INT8"]).extensions[-2:] == ("amx_tile", "amx_int8")
    assert HOST(extensions=["sse4.1", "FMA3"]).has("SSE4_1") and HOST(extensions=["FMA3"]).has("avx")
    assert HOST(extensions=("avx2", "avx512f")) == HOST(extensions=("AVX512F", "AVX2"))  # order-free
    assert HOST(extensions="AVX2") == HOST(extensions=["AVX2"])
    with pytest.raises(ValueError, match=r"unknown instruction-set extension 'AVX1024'"):
        HOST(extensions=["AVX1024"])
    with pytest.raises(ValueError, match=r"did you mean AVX512VL"):
        HOST(extensions=["AVX512VK"])


def test_override_validation():
    with pytest.raises(ValueError, match="num_threads"):
        HOST(num_threads=0)
    with pytest.raises(ValueError, match="num_cores"):
        T(num_cores=True)
    with pytest.raises(ValueError, match=r"cache sizes are in KiB, as in Accera \(32768 bytes = 32 KiB\)"):
        HOST(cache_sizes=[32768, 262144, 8388608])  # bytes where KiB are expected
    with pytest.raises(ValueError, match="cache line size"):
        HOST(cache_lines=[1, 64, 64])
    assert HOST(cache_sizes=(48, 2 << 10), cache_lines=(64, 64)).cache_sizes == (48, 2 << 10)
    assert HOST(cache_sizes=[32, 256, 8192]).cache_bytes == (32 << 10, 256 << 10, 8 << 20)  # Accera's unit
    with pytest.raises(TypeError, match="vectorbytes"):
        HOST(vectorbytes=32)
    with pytest.raises(TypeError):
        T(vectorbytes=32)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="category: GPU targets"):  # Accera's GPU category: named, refused
        HOST(category="GPU")
    with pytest.raises(TypeError, match="category"):
        HOST(category="TPU")
    assert HOST(category="cpu") == HOST
    with pytest.raises(ValueError, match="tensor_core_info"):
        T(tensor_core_info=object())
    with pytest.raises(ValueError, match="frequency_GHz"):
        HOST(frequency_GHz=-1)
    assert HOST(turbo_frequency_GHz={1: 4.0, 4: 3.6}).turbo_frequency_GHz == 4.0  # Accera's turbo table


def test_equality_and_hashing():
    a, b = T(M.AMD_EPYC_9654), T("AMD EPYC 9654")
    assert a == b and hash(a) == hash(b) and len({a, b, HOST, HOST(num_threads=1)}) == 3
    assert a(num_threads=4) == b(num_threads=4) != a
    assert T(M.AMD_EPYC_9654) != T(M.AMD_EPYC_9755)
    assert dataclasses.replace(a, num_threads=3) == a(num_threads=3)
    assert {a: 1}[b] == 1
    # function names differ between targets (the hash uses describe())
    narrower = HOST(vector_bytes=HOST.vector_bytes // 2)  # differs from HOST on every host
    assert len({t.describe() for t in (a, a(num_threads=4), HOST, narrower, T(M.AMD_EPYC_9755))}) == 5


def test_targets_pickle_and_copy():
    import copy
    import pickle

    for t in (HOST, HOST(num_threads=1), T(M.GEMMINI), T(M.INTEL_XEON_PLATINUM_8480PLUS)):
        assert pickle.loads(pickle.dumps(t)) == t and copy.deepcopy(t) == t
    assert pickle.loads(pickle.dumps(M.AMD_EPYC_9654)) is M.AMD_EPYC_9654


def test_generic_target():
    t = T(None, name="Custom processor", architecture=T.Architecture.X86_64, num_cores=10)
    assert t.name == "Custom processor" and t.num_cores == 10 and t.is_cpu
    assert t.required_features() == [] and not t.has("avx2") and t.vector_bytes == 16


# -- 3. known models -------------------------------------------------------------------------

def test_model_enum():
    names = {m.name for m in M}
    assert {"INTEL_CORE_I7_8700", "INTEL_CORE_I7_4770", "INTEL_XEON_GOLD_6148", "INTEL_XEON_PLATINUM_8380",
            "INTEL_XEON_PLATINUM_8480PLUS", "AMD_EPYC_9654", "AMD_EPYC_9755", "GEMMINI"} <= names
    assert str(M.INTEL_XEON_PLATINUM_8380) == "Intel Xeon Platinum 8380"
    for m in M:
        t = T(m)
        assert t.name == str(m) and T(str(m)) == t and T(m.name) == t


@pytest.mark.parametrize("name", ["Intel Core i7-8700", "intel core i7 8700", "INTEL_CORE_I7_8700",
                                  "intel-core-i7-8700", "Intel.Core.i7.8700", "i7-8700", "8700", "Coffee Lake",
                                  "coffee-lake"])
def test_lookup_by_name_ignores_case_spaces_dashes(name):
    assert T(name) == T(M.INTEL_CORE_I7_8700)


def test_lookup_aliases():
    assert T("Zen 4") == T("zen4") == T("Genoa") == T(M.AMD_EPYC_9654)
    assert T("Zen 5") == T("TURIN") == T(M.AMD_EPYC_9755)
    assert T("Sapphire Rapids") == T("intel xeon platinum 8480+") == T(M.INTEL_XEON_PLATINUM_8480PLUS)
    assert T("skylake-avx512") == T(M.INTEL_XEON_GOLD_6148)
    assert T("gemmini") == T("GEMMINI") == T(M.GEMMINI)
    assert T(model=M.AMD_EPYC_9654) == T(M.AMD_EPYC_9654)
    with pytest.raises(ValueError, match="name different targets"):
        T("Zen 5", model=M.AMD_EPYC_9654)


def test_unknown_and_ambiguous_names_raise_runtime_error():
    with pytest.raises(RuntimeError, match=r"no known device matches 'Intel Xeon Platinum 8381'.*Close names: "
                                           r"'Intel Xeon Platinum 8380'"):
        T("Intel Xeon Platinum 8381")
    with pytest.raises(RuntimeError, match=r"no known device matches 'Raspberry Pi 9Z'.*Known: \"HOST\""):
        T("Raspberry Pi 9Z")
    with pytest.raises(RuntimeError, match=r"'xeon' is ambiguous: it matches 'Intel Xeon Gold 6148', "
                                           r"'Intel Xeon Platinum 8380', 'Intel Xeon Platinum 8480\+'"):
        T("xeon")
    with pytest.raises(RuntimeError, match="ambiguous"):
        T("AMD EPYC")
    with pytest.raises(TypeError, match="known_name"):
        T(42)


def test_model_facts():
    # accpy's own x86 entries (its AArch64 ones: tests/targets/arm/test_arm_target.py)
    cpus = [T(m) for m in M if T(m).is_cpu and not spec_of(m).accera and T(m).architecture is not T.Architecture.AARCH64]
    assert len(cpus) >= 7
    for t in cpus:
        assert t.architecture is T.Architecture.X86_64 and t.runtime is T.Runtime.OPENMP
        assert t.num_threads == 2 * t.num_cores  # all are 2-way SMT parts
        assert t.cache_lines == (64, 64, 64) and t.cache_sizes[0] < t.cache_sizes[1] < t.cache_sizes[2]
        assert t.frequency_GHz < t.turbo_frequency_GHz
        assert t.has("avx2") and t.has("fma")
        assert (t.vector_bytes, t.vector_registers) == ((64, 32) if t.has("avx512f") else (32, 16))
        assert t.family and t.describe().startswith(t.name + "|")
    i7 = T(M.INTEL_CORE_I7_8700)
    assert (i7.num_cores, i7.num_threads, i7.cache_sizes[2], i7.frequency_GHz) == (6, 12, 12 << 10, 3.2)
    assert not i7.has("avx512f")
    skx = T(M.INTEL_XEON_GOLD_6148)
    assert (skx.num_cores, skx.cache_sizes) == (20, (32, 1 << 10, int(27.5 * (1 << 10))))
    assert skx.has("avx512bw") and skx.has("avx512vl") and not skx.has("avx512_vnni")
    icx = T(M.INTEL_XEON_PLATINUM_8380)
    assert (icx.num_cores, icx.cache_sizes[1], icx.cache_sizes[2]) == (40, 1280, 60 << 10)
    assert icx.has("AVX512VNNI") and not icx.has("avx512_bf16")
    spr = T(M.INTEL_XEON_PLATINUM_8480PLUS)
    assert spr.num_cores == 56 and all(spr.has(f) for f in ("avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8",
                                                             "amx_bf16"))
    genoa, turin = T(M.AMD_EPYC_9654), T(M.AMD_EPYC_9755)
    assert (genoa.num_cores, turin.num_cores) == (96, 128)
    assert genoa.cache_sizes[0] == 32 and turin.cache_sizes[0] == 48
    for t in (genoa, turin):
        assert t.has("avx512_bf16") and t.has("avx512_vnni") and not t.has("avx512_fp16") and not t.has("amx")


def test_gemmini_model():
    g = T(M.GEMMINI)
    assert g.category is T.Category.ACCELERATOR and not g.is_cpu
    assert g.architecture is T.Architecture.RISCV64
    assert g.extensions == () and g.required_features() == [] and g.compiler_flags() == []
    assert g.has_memory(MemorySpace.SCRATCHPAD) and g.has_memory(MemorySpace.ACCUMULATOR)
    assert g.has_memory("scratchpad") and not g.has_memory(MemorySpace.SHARED)
    assert g.memories == ("scratchpad", "accumulator")
    assert g.get("dim") == 16 and g.get("scratchpad_bytes") == 256 << 10 and g.get("accumulator_bytes") == 64 << 10
    assert g.get("scratchpad_banks") * g.get("scratchpad_bank_rows") * g.get("dim") == g.get("scratchpad_bytes")
    assert g.get("accumulator_rows") * g.get("dim") * 4 == g.get("accumulator_bytes")
    assert g.get("nothing", 7) == 7
    assert g(extra={"memory": "scratchpad"}).memories == ("scratchpad",)
    for t in (HOST, T(M.AMD_EPYC_9654)):
        assert not t.has_memory(MemorySpace.SCRATCHPAD)


def test_gemmini_plan_refuses_cpu_vectorization():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(16,), element_type=acc.ScalarType.int8)
    nest = acc.Nest(shape=(16,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += A[i]

    plan = nest.create_schedule().create_plan(T(M.GEMMINI))
    assert plan.target.has_memory(MemorySpace.SCRATCHPAD)
    with pytest.raises(RuntimeError, match="Gemmini"):
        plan.vectorize(i)


def test_memory_space_exported():
    if not hasattr(acc, "MemorySpace"):
        pytest.skip("acc.MemorySpace: accpy/__init__.py does not export it yet")
    assert acc.MemorySpace is MemorySpace
    assert T.MemorySpace is MemorySpace


def test_compiler_flags_per_model():
    for m in (M.INTEL_CORE_I7_4770, M.INTEL_CORE_I7_8700):
        f = T(m).compiler_flags()
        assert {"-mavx2", "-mfma", "-mavx", "-mf16c", "-msse4.2"} <= set(f)
        assert not any("avx512" in x or "amx" in x or "prefer" in x for x in f)
    f = T(M.INTEL_XEON_GOLD_6148).compiler_flags()
    assert {"-mavx512f", "-mavx512cd", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mprefer-vector-width=512"} <= set(f)
    assert "-mavx512vnni" not in f
    assert "-mavx512vnni" in T(M.INTEL_XEON_PLATINUM_8380).compiler_flags()
    f = T(M.INTEL_XEON_PLATINUM_8480PLUS).compiler_flags()
    assert {"-mavx512bf16", "-mavx512fp16", "-mamx-tile", "-mamx-int8", "-mamx-bf16"} <= set(f)
    for m in (M.AMD_EPYC_9654, M.AMD_EPYC_9755):
        f = T(m).compiler_flags()
        assert "-mavx512bf16" in f and "-mavx512fp16" not in f and not any("amx" in x for x in f)
    assert T(M.GEMMINI).compiler_flags() == []
    # 256-bit vectors on an AVX-512 part
    assert "-mprefer-vector-width=256" in T(M.INTEL_XEON_GOLD_6148, vector_bytes=32).compiler_flags()
    # the baseline of x86-64 is neither a flag nor a feature checked at run time (AArch64's toolchain
    # compiles for its models' features: tests/targets/arm)
    for t in [T(m) for m in M if T(m).architecture is not T.Architecture.AARCH64] + [HOST]:
        assert not {"mmx", "sse", "sse2"} & set(t.required_features())
        assert all(f in BUILTIN_NAMES for f in t.required_features())
        assert len(t.compiler_flags()) == len(t.required_features()) + (1 if t.has("avx512f") else 0)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
def test_compiler_flags_are_accepted_by_gcc(tmp_path):
    src = tmp_path / "empty.c"
    src.write_text("int accpy_probe(void) { return 0; }\n")
    for t in [T(m) for m in M] + [HOST]:
        if t.toolchain.missing() is not None:  # (e.g. AArch64's cross compiler, where not installed)
            continue
        cc = "gcc" if t.toolchain.native else t.toolchain.cc
        p = subprocess.run([cc, *t.compiler_flags(), "-c", str(src), "-o", str(tmp_path / "empty.o")],
                           capture_output=True, text=True)
        assert p.returncode == 0, (t.name, p.stderr)


# -- 4. a feature this CPU lacks: an error, not SIGILL --------------------------------------

def _missing_feature():
    """A feature accpy can target that this CPU lacks, or None."""
    for f in ("avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni", "avx512f"):
        if f not in FLAGS:
            return f
    return None


MISSING = _missing_feature() if FLAGS else None
needs_missing = pytest.mark.skipif(MISSING is None, reason="this CPU has every feature accpy can target")


def _axpy(n, target, split=16):
    """y[i] += 2 * x[i] (float32), vectorized along i; args (x, y)."""
    x = acc.Array(role=acc.Role.INPUT, shape=(n,), name="x")
    y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n,), name="y")
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        y[i] += x[i] * 2.0

    s = nest.create_schedule()
    ii = s.split(i, split)
    plan = s.create_plan(target)
    if target.has("avx2"):
        plan.vectorize(ii)
    return plan, (x, y)


@pytest.fixture(scope="module")
def lacking_pkg(tmp_path_factory):
    """Three functions: for HOST plus a feature this CPU lacks, for the Sapphire Rapids model
    (AMX, AVX512-FP16), and for HOST itself."""
    if MISSING is None:
        pytest.skip("this CPU has every feature accpy can target")
    out = tmp_path_factory.mktemp("lacking")
    pkg = acc.Package()
    lacking = HOST(extensions=HOST.extensions + (MISSING,))
    pkg.add(*_axpy(37, lacking), base_name="needs_more")
    pkg.add(*_axpy(37, T(M.INTEL_XEON_PLATINUM_8480PLUS)), base_name="needs_spr")
    pkg.add(*_axpy(37, HOST), base_name="runs_here")
    lib = pkg.build("lacking", output_dir=out, python_module="async")
    return {"lib": lib, "out": out, "missing": BUILTIN_NAMES[MISSING]}


def _spr_missing():
    spr = T(M.INTEL_XEON_PLATINUM_8480PLUS)
    lack = [f for f in spr.required_features() if f not in FLAGS and not (f == "sse3" and "pni" in FLAGS)]
    assert lack, "this CPU has every feature of a Sapphire Rapids Xeon"
    return [BUILTIN_NAMES[f] for f in lack]


def _check_lacking_calls(fns, missing):
    x = np.arange(37, dtype=np.float32)
    y = np.ones(37, dtype=np.float32)
    with pytest.raises(acc.KernelError, match=re.escape(missing)) as e:
        fns.needs_more(x, y)
    assert str(e.value).startswith("needs_more: built for target") and "lacks" in str(e.value)  # the alias
    np.testing.assert_array_equal(y, 1)  # nothing ran
    with pytest.raises(acc.KernelError, match="lacks") as e:
        fns.needs_spr(x, y)
    assert any(n in str(e.value) for n in _spr_missing())
    np.testing.assert_array_equal(y, 1)
    fns.runs_here(x, y)  # no error left behind by the failed calls
    np.testing.assert_allclose(y, 1 + 2 * x)
    fns.runs_here(x, y)
    np.testing.assert_allclose(y, 1 + 4 * x)


@pytest.mark.slow
@needs_missing
def test_lacking_feature_compiles_and_raises_from_python(lacking_pkg):
    c = (lacking_pkg["out"] / "lacking.c").read_text()
    missing = lacking_pkg["missing"]
    # compiled for the feature (the kernel is built with it enabled), checked before running
    assert re.search(r'__attribute__\(\(target\("[^"]*\b' + re.escape(missing) + r'\b', c)
    assert f'__builtin_cpu_supports("{missing}")' in c
    assert '__builtin_cpu_supports("amx-tile")' in c
    _check_lacking_calls(lacking_pkg["lib"], missing)


@pytest.mark.slow
@needs_missing
def test_lacking_feature_raises_from_pybind11_module(lacking_pkg):
    _check_lacking_calls(lacking_pkg["lib"].python_module(), lacking_pkg["missing"])


C_PROGRAM = r"""
#include <stdio.h>
#include "lacking.h"

int main(void) {
    float x[37], y[37];
    for (int i = 0; i < 37; ++i) { x[i] = (float)i; y[i] = 1.0f; }
    needs_more(x, y);
    const char* e = lacking_last_error();
    printf("needs_more: %s\n", e ? e : "(no error)");
    if (!e) return 2;
    for (int i = 0; i < 37; ++i) if (y[i] != 1.0f) return 3;
    needs_spr(x, y);
    e = lacking_last_error();
    printf("needs_spr: %s\n", e ? e : "(no error)");
    if (!e) return 4;
    runs_here(x, y);
    if (lacking_last_error() != NULL) return 5;
    for (int i = 0; i < 37; ++i) if (y[i] != 1.0f + 2.0f * (float)i) return 6;
    return 0;
}
"""


@needs_missing
@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
def test_lacking_feature_reports_through_c_error_channel(lacking_pkg, tmp_path):
    out = lacking_pkg["out"]
    (tmp_path / "main.c").write_text(C_PROGRAM)
    exe = tmp_path / "main"
    build = subprocess.run(["gcc", "-std=c11", "-O1", f"-I{out}", str(tmp_path / "main.c"), f"-L{out}", "-llacking",
                            f"-Wl,-rpath,{out}", "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr)  # not SIGILL (-4)
    lines = run.stdout.splitlines()
    assert lines[0].startswith("needs_more: needs_more: built for target") and lacking_pkg["missing"] in lines[0]
    assert "lacks" in lines[1] and any(n in lines[1] for n in _spr_missing())


# -- 5. the AVX2 fallback --------------------------------------------------------------------

def _avx2_targets():
    no512 = HOST(extensions=[e for e in HOST.extensions if not e.startswith("avx512")], vector_bytes=32)
    return [pytest.param(no512, id="host-without-avx512"), pytest.param(T(M.INTEL_CORE_I7_8700), id="i7-8700")]


def _kernel_text(c_source: str) -> str:
    """The emitted functions (after the inlined runtime)."""
    return c_source[c_source.index("__impl("):]


@pytest.mark.slow
@needs_avx2
@pytest.mark.parametrize("target", _avx2_targets())
def test_avx2_matmul_micro_kernel(target, tmp_path):
    sys.path.insert(0, str(ROOT / "samples"))
    try:
        from optimized_matmul import matmul_plan
    finally:
        sys.path.remove(str(ROOT / "samples"))
    assert not target.has("avx512f") and target.vector_bytes == 32
    Mm, N, K = 37, 53, 29  # none divides the AVX2 micro-tile (4 x 24) or the blocks
    plan, args = matmul_plan(Mm, N, K, target=target)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="sgemm")
    lib = pkg.build("avx2mm", output_dir=tmp_path, python_module=False)
    c = (tmp_path / "avx2mm.c").read_text()
    assert "_mm512_" not in c and "avx512" not in _kernel_text(c)
    assert "_mm256_fmadd_ps" in c and "__m256 " in c
    rng = np.random.default_rng(1)
    a = rng.standard_normal((Mm, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    cc = rng.standard_normal((Mm, N), dtype=np.float32)
    want = cc + a @ b
    lib.sgemm(a, b, cc)
    np.testing.assert_allclose(cc, want, rtol=1e-4, atol=1e-4)


@needs_avx2
@pytest.mark.parametrize("target", _avx2_targets())
@pytest.mark.parametrize("dtype", [F32, I32], ids=["float32", "int32"])
def test_avx2_elementwise_masked_tail(target, dtype, tmp_path):
    n = 45  # 5 full vectors of 8 and a tail of 5
    npt = np.float32 if dtype is F32 else np.int32
    X = acc.Array(role=acc.Role.INPUT, shape=(n,), name="X", element_type=dtype)
    Y = acc.Array(role=acc.Role.INPUT, shape=(n,), name="Y", element_type=dtype)
    Z = acc.Array(role=acc.Role.OUTPUT, shape=(n,), name="Z", element_type=dtype)
    nest = acc.Nest(shape=(n,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        Z[i] = acc.max(X[i] * Y[i] + X[i], Y[i])

    s = nest.create_schedule()
    ii = s.split(i, 8)
    plan = s.create_plan(target)
    plan.vectorize(ii)
    pkg = acc.Package()
    pkg.add(plan, args=(X, Y, Z), base_name="ew")
    lib = pkg.build("avx2ew", output_dir=tmp_path, python_module=False)
    c = (tmp_path / "avx2ew.c").read_text()
    assert "_mm512_" not in c and "avx512" not in _kernel_text(c)
    assert "_mm256_" in c and "_mm256_maskstore_" in c  # the tail of 5 lanes is masked
    rng = np.random.default_rng(2)
    if dtype is F32:
        x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    else:
        x, y = rng.integers(-1000, 1000, n, dtype=np.int32), rng.integers(-1000, 1000, n, dtype=np.int32)
    z = np.full(n, 12345, dtype=npt)
    lib.ew(x, y, z)
    if dtype is F32:  # x * y + x may be one fused multiply-add
        np.testing.assert_allclose(z, np.maximum(x * y + x, y), rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(z, np.maximum(x * y + x, y))


@pytest.mark.parametrize("target", [pytest.param(HOST, marks=needs_avx512, id="host")])
def test_host_vectorizes_with_avx512(target, tmp_path):
    """The other side of the fallback: on an AVX-512 host, the same kernel uses 16-wide zmm code."""
    plan, args = _axpy(45, target)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="axpy")
    lib = pkg.build("avx512ew", output_dir=tmp_path, python_module=False)
    c = (tmp_path / "avx512ew.c").read_text()
    assert "_mm512_" in c
    x, y = np.arange(45, dtype=np.float32), np.ones(45, dtype=np.float32)
    lib.axpy(x, y)
    np.testing.assert_allclose(y, 1 + 2 * x)


@needs_avx2
def test_vector_bytes_32_on_avx512_host_gives_256_bit_code(tmp_path):
    t = HOST(vector_bytes=32)
    plan, args = _axpy(45, t, split=8)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="axpy")
    lib = pkg.build("vb32", output_dir=tmp_path, python_module=False)
    x, y = np.arange(45, dtype=np.float32), np.ones(45, dtype=np.float32)
    lib.axpy(x, y)
    np.testing.assert_allclose(y, 1 + 2 * x)
    c = (tmp_path / "vb32.c").read_text()
    assert "_mm256_" in c and "_mm512_" not in c
