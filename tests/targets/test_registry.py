"""The registry of target libraries (accpy/targets/registry.py) and the vector ISA a target resolves
once (`Target.vector_isa`, accpy/targets/vector_isa.py)."""
from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import accpy as acc
from accpy.ir.types import ScalarType
from accpy.targets import library, registry, x86
from accpy.targets.library import TargetLibrary, libraries, register_library
from accpy.targets.vector_isa import VectorISA, VectorShape

S = ScalarType
BUILTIN = ["x86 vector", "x86 tile", "x86 tile (model)", "gemmini", "AArch64 Neon", "gpu"]
TARGETS = Path(acc.__file__).parent / "targets"


def test_the_built_in_libraries_in_the_registry_order():
    assert [lib.name for lib in registry.BUILTIN_LIBRARIES] == BUILTIN
    # (tests may register libraries of their own: they come after the built-in ones)
    assert [lib.name for lib in libraries()][:len(BUILTIN)] == BUILTIN


def test_only_the_registry_registers_built_in_libraries():
    """No library module registers anything when imported: registry.py is the one place."""
    calls = [p.relative_to(TARGETS).as_posix() for p in TARGETS.rglob("*.py")
             if re.search(r"\bregister_library\(", p.read_text())]
    assert sorted(calls) == ["library.py", "registry.py"]


@pytest.mark.parametrize("first", ["accpy.targets.x86", "accpy.targets.x86sse", "accpy.targets.x86narrow",
                                   "accpy.targets.arm", "accpy.targets.gemmini", "accpy.targets.x86tile",
                                   "accpy.targets.library", "accpy"])
def test_import_order_does_not_matter(first):
    """Whichever module a program imports first, the registry holds each built-in library once, in
    its order, and x86's SSE and narrow shapes are joined once."""
    code = (f"import {first}\n"
            "from accpy.targets import library, x86\n"
            "import accpy.targets.x86sse, accpy.targets.x86narrow, accpy.targets.arm, accpy.targets.gemmini\n"
            "print([lib.name for lib in library.libraries()], len(x86.LIBRARY), len(x86.NARROW))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"{BUILTIN!r} {len(x86.LIBRARY)} {len(x86.NARROW)}"


def test_registering_again_changes_nothing():
    before, shapes = libraries(), (dict(x86.LIBRARY), dict(x86.NARROW))
    register_library(x86.X86_VECTOR)
    registry.register_builtin_libraries()
    assert libraries() == before and (x86.LIBRARY, x86.NARROW) == shapes
    assert ("sse", S.float32) in x86.LIBRARY and ("avx2", S.int8) in x86.NARROW


def test_register_library_refuses_other_objects():
    with pytest.raises(TypeError, match=r"register_library: expected a TargetLibrary, got 'x86'"):
        register_library("x86")


# -- the vector ISA ------------------------------------------------------------------------------------
def test_a_target_resolves_its_vector_isa_once():
    t = acc.Target("Intel Xeon Platinum 8380")
    isa = t.vector_isa
    assert t.vector_isa is isa and isa.name == "x86 vector" and isa.target == t
    assert (isa.shape(S.float32).name, isa.lanes(S.float32)) == ("avx512", 16)
    assert [p.op for p in isa.dot_products()] == ["madd16", "dot4"]  # (no avx512_bf16 on Ice Lake)
    assert isa.has_fma(S.float32) and isa.has_vectors and not isa.scalable(S.float32)
    # a changed target resolves again: Accera's SSE-width HOST target
    t2 = acc.Target("HOST", vector_bytes=16)
    assert t2.vector_isa.shape(S.float32).name == "sse" and not t2.vector_isa.has_fma(S.float32)


def test_an_assigned_target_resolves_again():
    t = acc.Target("Intel Core i7-4770")
    assert t.vector_isa.shape(S.float32).name == "avx2"
    t.vector_bytes = 16
    assert t.vector_isa.shape(S.float32).name == "sse" and t.vector_isa.target.vector_bytes == 16


def test_copies_and_pickles_resolve_their_own():
    t = acc.Target("Intel Core i7-4770")
    isa = t.vector_isa
    u = pickle.loads(pickle.dumps(t))
    assert u == t and "_vector_isa" not in u.__dict__ and u.vector_isa is not isa
    assert u.vector_isa.shape(S.int32) is isa.shape(S.int32)


def test_a_target_without_vectors():
    t = acc.Target(None)  # a generic x86-64 CPU: SSE2 only
    isa = t.vector_isa
    assert type(isa) is VectorISA and not isa.has_vectors and isa.shape(S.float32) is None
    assert isa.lanes(S.float32) == 0 and isa.dot_products() == () and isa.prelude() == ""
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8,), name="X")
    nest = acc.Nest(shape=(8,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[i] += 1.0

    plan = nest.create_schedule().create_plan(t)
    with pytest.raises(RuntimeError, match="^vectorize: target custom has no vector instructions accpy can use$"):
        plan.vectorize(i)


def test_arm_vector_isas():
    v82, nv1 = acc.Target("ARMv8.2-A"), acc.Target("Neoverse V1")
    neon, sve = v82.vector_isa, nv1.vector_isa
    assert (neon.name, neon.shape(S.float32).ctype, neon.lanes(S.int8)) == ("AArch64 Neon", "float32x4_t", 16)
    assert [p.op for p in neon.dot_products()] == ["sdot4", "udot4"]
    assert neon.has_fma(S.float32) and not neon.scalable(S.float32)
    # SVE is scalable: lanes counted at the length compiled for (256 bits), and at run time by svcnt*
    assert sve.name == "AArch64 SVE" and sve.scalable(S.float32)
    assert [(t.name, sve.shape(t).lanes, sve.shape(t).scalable) for t in (S.float64, S.float32, S.int8)] == \
        [("float64", 4, "svcntd()"), ("float32", 8, "svcntw()"), ("int8", 32, "svcntb()")]
    assert sve.shape_of(S.bfloat16, 16).scalable == "svcnth()"
    assert "arm_sve.h" in sve.prelude() and "arm_sve.h" not in neon.prelude()


def test_a_registered_library_is_seen_by_resolved_targets():
    """A target resolved before a library is registered resolves again after (and after removal)."""

    class Eight(VectorISA):
        name = "eight"

        def shape(self, dtype):
            return VectorShape("eight", dtype, 8, "v8", {"load": "ld({p})"}) if dtype is S.float32 else None

    class EightLibrary(TargetLibrary):
        name = "eight lanes"

        def applies_to(self, target):
            return target.name == "Eight"

        def vector_isa(self, target):
            return Eight(target)

    t = acc.Target(None, name="Eight", architecture="RISCV64")
    assert not t.vector_isa.has_vectors
    before = list(library._LIBRARIES)
    register_library(EightLibrary())
    try:
        assert t.vector_isa.name == "eight" and t.vector_isa.lanes(S.float32) == 8
        assert t.vector_isa.supports(S.float32, "load") and not t.vector_isa.supports(S.float32, "fma")
    finally:
        library._LIBRARIES[:] = before
    assert not t.vector_isa.has_vectors
