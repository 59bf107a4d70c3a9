"""The AArch64 target without its tools: models, features, the toolchain's flags, the C text of
Neon kernels (FMLA, SDOT / UDOT) and what stays as it was (Accera's ARM rows, x86's toolchain)."""
from __future__ import annotations

import pytest

import accpy as acc
from accpy.targets.arm import AARCH64_TOOLCHAIN
from accpy.targets.toolchain import HOST_TOOLCHAIN
from accpy.targets.x86_toolchain import X86_TOOLCHAIN
from abi.kernels import mixed_matmul_nest

T = acc.Target
S = acc.ScalarType


def test_generic_arm_models():
    v8, v82, v9 = T("ARMv8-A"), T("ARMv8.2-A"), T(T.Model.ARMV9_A)
    for t in (v8, v82, v9):
        assert t.architecture is T.Architecture.AARCH64 and t.is_cpu
        assert (t.vector_bytes, t.vector_registers) == (16, 32) and t.has("neon") and t.has("asimd")
        assert t.toolchain is AARCH64_TOOLCHAIN and t.toolchain.machine == "aarch64"
    assert not v8.has("dotprod") and v82.has("dotprod") and v82.has("fp16") and v9.has("sve2")
    assert v8.required_features() == [] and v8.compiler_flags() == ["-march=armv8-a"]
    assert v82.required_features() == ["fphp", "asimdhp", "asimddp"]
    assert v82.compiler_flags() == ["-march=armv8.2-a+fp16+dotprod"]
    assert v9.compiler_flags() == ["-march=armv8.2-a+fp16+dotprod+i8mm+bf16+sve2"]
    assert T("Neoverse N1") == v82 and T("Graviton2") == v82
    # Arm's extension names, closed under implication; the register shape follows
    t = T("ARMv8-A", extensions=["NEON", "dotprod"])
    assert t.extensions == ("fp", "asimd", "asimddp") and t.vector_bytes == 16


def test_extensions_of_another_architecture_are_refused():
    with pytest.raises(ValueError, match=r"extensions: fp, asimd are not X86_64 instruction-set extensions"):
        T("HOST", extensions=["neon"])
    with pytest.raises(ValueError, match=r"extensions: .*avx2.* are not AARCH64 instruction-set extensions"):
        T("ARMv8.2-A", extensions=["AVX2"])
    t = T("HOST", architecture="AARCH64", extensions=["neon"])  # a Neon machine, given in full
    assert t.toolchain is AARCH64_TOOLCHAIN


def test_accera_arm_rows_are_unchanged():
    """Accera's table lists the Raspberry Pis as 32-bit ARM without vector registers: as Accera has
    them, built by the host's compiler as before (a Pi 4B running AArch64: acc.Target("ARMv8-A"))."""
    pi = T("Raspberry Pi 4B")
    assert pi.architecture is T.Architecture.ARM and pi.vector_bytes == 0 and pi.toolchain is HOST_TOOLCHAIN
    assert pi.required_features() == [] and pi.compiler_flags() == []
    assert T("Apple M1 Max").toolchain is AARCH64_TOOLCHAIN  # Accera's AArch64 row (no features listed)
    assert T(T.Model.GEMMINI).toolchain is HOST_TOOLCHAIN  # its functional model runs on the host


def test_x86_toolchain_answers_as_before():
    skx = T("Intel Xeon Gold 6148")
    assert skx.toolchain is X86_TOOLCHAIN
    assert "-mavx512f" in skx.compiler_flags() and "-mprefer-vector-width=512" in skx.compiler_flags()
    assert X86_TOOLCHAIN.function_attribute(skx).startswith('__attribute__((target("sse3,')
    guard = "\n".join(X86_TOOLCHAIN.feature_guard(skx, "f", lambda s: '"' + s + '"'))
    assert '__builtin_cpu_supports("avx512f")' in guard
    assert AARCH64_TOOLCHAIN.feature_guard(T("ARMv8.2-A"), "f", repr) == []
    assert AARCH64_TOOLCHAIN.function_attribute(T("ARMv8.2-A")) == ""


def sgemm_plan(target, M=20, N=37, K=19, tile=(4, 8, 8)):
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    ii, jj, kk = s.tile({i: tile[0], j: tile[1], k: tile[2]})
    s.reorder(i, j, k, ii, kk, jj)  # as hello_matmul: jj innermost, unit stride in B and C
    plan = s.create_plan(target)
    plan.unroll(ii)
    plan.vectorize(jj)
    return nest, plan, (A, B, C)


def int8_plan(target, M=12, N=21, K=30, a_type=S.int8, b_type=S.int8):
    """C += A @ B in int32 with B's block cached in groups of 4 k (the dot products' layout)."""
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(M, N, K, a_type, b_type, S.int32)
    s = nest.create_schedule()
    i2, j2, k2 = s.split(i, 4), s.split(j, 8), s.split(k, 4)
    s.reorder(i, j, k, i2, j2, k2)
    plan = s.create_plan(target)
    plan.cache(B, index=i, layout=acc.Array.Layout.VNNI)
    plan.cache(C, index=k)
    plan.unroll(i2)
    plan.vectorize(j2)
    return nest, plan, (A, B, C)


def test_neon_sgemm_uses_fmla():
    _, plan, args = sgemm_plan(T("ARMv8-A"))
    c = plan.emit_c("sg", args)
    assert "vfmaq_f32(" in c and "vld1q_f32(" in c
    assert "accpy_neon_mload_f32" in c and "accpy_neon_mstore_f32" in c  # 37 = 4 * 8 + 5: masked tails
    assert "_mm" not in c and "__attribute__((target" not in c


def test_int8_matmul_uses_sdot_where_the_model_has_it():
    _, plan, args = int8_plan(T("ARMv8.2-A"))
    c = plan.emit_c("i8", args)
    assert "vdotq_s32(" in c
    assert "accpy_neon_mload_groups_s8" in c or "accpy_load_i32_part" in c  # 30 = 7 * 4 + 2: partial groups
    _, plan, args = int8_plan(T("ARMv8.2-A"), a_type=S.uint8, b_type=S.uint8)
    assert "vdotq_u32(" in plan.emit_c("u8", args)
    # uint8 x int8: USDOT, with the int8 matrix multiply extension (Armv9-A here), not in Armv8.2-A
    _, plan, args = int8_plan(T("ARMv9-A"), a_type=S.uint8, b_type=S.int8)
    assert "vusdotq_s32(" in plan.emit_c("us", args)
    with pytest.warns(UserWarning, match="C compiler's vectorizer"):
        _, plan, args = int8_plan(T("ARMv8.2-A"), a_type=S.uint8, b_type=S.int8)
        assert "vusdotq" not in plan.emit_c("us", args)
    # Armv8.0-A has no dot products: the int32 lanes multiply and add
    with pytest.warns(UserWarning, match="C compiler's vectorizer"):
        _, plan, args = int8_plan(T("ARMv8-A"))
        c = plan.emit_c("i8", args)
    assert "vdotq" not in c


def test_package_source_for_aarch64(tmp_path):
    """HAT_SOURCE writes the package's files without compiling: Neon's header in the prelude, no
    x86 feature guard, the .hat naming the architecture and the cross compiler."""
    _, plan, args = sgemm_plan(T("ARMv8.2-A"))
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="sg")
    pkg.build("sg", format=acc.Package.Format.HAT_SOURCE, output_dir=tmp_path)
    c = (tmp_path / "sg.c").read_text()
    assert "#include <arm_neon.h>" in c and "__builtin_cpu_supports" not in c
    hat = (tmp_path / "sg.hat").read_text()
    assert 'architecture = "aarch64"' in hat and 'extensions = ["+fphp", "+asimdhp", "+asimddp"]' in hat
    assert 'compiler = "aarch64-linux-gnu-gcc"' in hat and "-march=armv8.2-a+fp16+dotprod" in hat


def test_one_package_one_toolchain():
    _, p1, a1 = sgemm_plan(T("ARMv8.2-A"))
    _, p2, a2 = sgemm_plan(T("HOST"))
    pkg = acc.Package()
    pkg.add(p1, args=a1, base_name="arm")
    pkg.add(p2, args=a2, base_name="host")
    with pytest.raises(ValueError, match=r"build\('mixed'\): its functions are for targets built by different "
                                         r"toolchains .*build a package per architecture"):
        pkg.build("mixed", format=acc.Package.Format.HAT_SOURCE)


def test_float16_lanes_need_the_half_precision_extension():
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.float16, shape=(16,), name="X")
    nest = acc.Nest(shape=(16,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        X[i] = X[i] * X[i]

    plan = nest.create_schedule().create_plan(T("ARMv8.2-A"))
    plan.vectorize(i)
    assert "vmulq_f16(" in plan.emit_c("sq", (X,))
    plan = nest.create_schedule().create_plan(T("ARMv8-A"))
    plan.vectorize(i)
    with pytest.warns(UserWarning, match="no vector instructions for float16 on target ARMv8-A"):
        assert "vmulq_f16" not in plan.emit_c("sq", (X,))


def test_arm_host_features_are_read_from_cpuinfo():
    """An Arm machine's /proc/cpuinfo lists "Features" (not x86's "flags")."""
    from accpy.targets.host import _host_features

    info = {"Features": "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm asimddp sve"}
    assert _host_features(info) == ("fp", "asimd", "fphp", "asimdhp", "asimddp", "sve")


def test_host_functions_and_a_functional_model_share_a_package():
    """x86 code and an accelerator whose functional model runs on the host: one compiler, one package."""
    from accpy.targets.toolchain import package_toolchain

    assert package_toolchain([T("HOST"), T(T.Model.GEMMINI)]) is X86_TOOLCHAIN
    assert package_toolchain([T(T.Model.GEMMINI)]) is HOST_TOOLCHAIN
    with pytest.raises(ValueError, match="different toolchains"):
        package_toolchain([T("ARMv8-A"), T(T.Model.GEMMINI)])
