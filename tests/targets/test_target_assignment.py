"""Targets changed by assignment (Accera's unit_tests TargetsTest.test_equivalence_check) and the
target enums equal to Accera's strings (dsl_tests test_custom_targets), with accpy's guarantees:
acc.Target.HOST never changes, a target in use (by a plan, as a dict key) cannot change, values
are checked as the constructor checks them."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

import accpy as acc

T = acc.Target


def test_accera_equivalence_check():
    t1, t2 = T(), T()
    assert t1 == t2
    t2.num_threads = 64
    assert t1 != t2 and t2.num_threads == 64
    assert t2 == T(num_threads=64)
    assert t1 != T(T.Model.RASPBERRY_PI_3B, category=T.Category.CPU)


def test_accera_custom_target_strings():
    t = T(name="Custom processor", category=T.Category.CPU, architecture="x86_64", family="Broadwell",
          extensions=["MMX", "SSE", "SSE2", "SSE3", "SSSE3", "SSE4", "SSE4.1", "SSE4.2", "AVX", "AVX2", "FMA3"],
          num_cores=22, num_threads=44, frequency_GHz=3.2, turbo_frequency_GHz=3.8,
          cache_sizes=[32, 256, 56320], cache_lines=[64, 64, 64])
    assert t.architecture == "x86_64" and "x86_64" == t.architecture and t.architecture == "X86-64"
    assert t.architecture is T.Architecture.X86_64 and t.architecture != "arm"
    assert t.category == "cpu" and t.category == T.Category.CPU and t.runtime == "OpenMP"
    assert T.Architecture.X86_64 != T.Architecture.X86 and T.Category.CPU != 1
    assert {T.Architecture.X86_64: 1}[T.Architecture.X86_64] == 1  # members still hash as members
    # extensions hold cpuinfo's names; membership reads Accera's too
    assert "sse3" in t.extensions and "SSE3" in t.extensions and "FMA3" in t.extensions
    assert "AVX512" not in t.extensions and 3 not in t.extensions
    assert t.extensions == tuple(t.extensions) and isinstance(t.extensions, tuple)


def test_assignment_is_validated_and_normalized():
    t = T()
    with pytest.raises(ValueError, match=r"num_threads: expected an integer >= 1, got 0"):
        t.num_threads = 0
    with pytest.raises(ValueError, match="category: GPU targets"):
        t.category = "GPU"
    with pytest.raises(ValueError, match="num_cores: a target's num_cores cannot be None"):
        t.num_cores = None
    with pytest.raises(AttributeError, match="acc.Target has no field 'warp_size'"):
        t.warp_size = 32
    assert t == T()  # nothing changed by the refused assignments
    t.architecture = "aarch64"
    assert t.architecture is T.Architecture.AARCH64
    with pytest.raises(ValueError, match="extensions: .*avx512f.* are not AARCH64 instruction-set extensions"):
        t.extensions = ["AVX512"]  # (x86's extensions on an AArch64 target)
    t.architecture = "x86_64"
    t.extensions = ["AVX512"]  # the register shape follows, as with the keyword
    assert t.has("avx512f") and (t.vector_bytes, t.vector_registers) == (64, 32)
    t.frequency_GHz = None  # an optional value may be cleared
    assert t.frequency_GHz is None
    t.cache_sizes = [48, 2048]
    assert t.cache_sizes == (48, 2048) and t.cache_bytes == (48 << 10, 2 << 20)


def test_host_never_changes():
    before = T.HOST.num_threads
    with pytest.raises(dataclasses.FrozenInstanceError, match="make a changed copy instead: target\\(num_threads=...\\)"):
        T.HOST.num_threads = before + 1
    assert T.HOST.num_threads == before and T.HOST.sealed
    c = copy.copy(T.HOST)  # a copy is the user's own
    c.num_threads = before + 1
    assert T.HOST.num_threads == before and c.num_threads == before + 1
    p = pickle.loads(pickle.dumps(T.HOST))
    assert p == T.HOST and not p.sealed
    assert T.HOST(num_threads=3).num_threads == 3 and T.HOST.num_threads == before


def test_a_target_in_use_is_sealed():
    t = T(num_threads=2)
    nest = acc.Nest((4,))
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1.0

    plan = nest.create_schedule().create_plan(t)
    assert plan.target is t and t.sealed
    with pytest.raises(dataclasses.FrozenInstanceError, match="a plan"):
        t.num_threads = 4
    u = t(num_threads=4)  # the way to change it: a copy
    assert not u.sealed and u.num_threads == 4 and plan.target.num_threads == 2
    k = T(num_threads=3)
    keys = {k: "x"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.num_threads = 5
    assert keys[T(num_threads=3)] == "x"


def test_plan_refuses_what_is_not_a_target():
    nest = acc.Nest((4,))
    with pytest.raises(TypeError, match=r"target: expected an acc.Target \(e.g. acc.Target.HOST\), got str 'HOST'"):
        nest.create_schedule().create_plan("HOST")
