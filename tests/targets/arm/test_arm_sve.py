"""SVE at a fixed vector length (256 bits: acc.Target("Neoverse V1")): FMLA and SDOT / UDOT / USDOT
on SVE registers, predicated tails (svwhilelt), gathers and reductions; cross-compiled, run under
qemu with that vector length, compared with the reference; the guard that refuses another length."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.targets.arm import AARCH64_TOOLCHAIN, run_calls
from accpy.targets.arm.emulate import EmulationError

from test_arm_emulation import _data, _expected, _row_reductions, _transpose
from test_arm_target import int8_plan, sgemm_plan

S = acc.ScalarType
V1 = acc.Target("Neoverse V1")


def test_sve_model_and_c_text():
    assert V1.vector_bytes == 32 and V1.has("sve") and V1.toolchain is AARCH64_TOOLCHAIN
    assert V1.compiler_flags() == ["-march=armv8.2-a+fp16+dotprod+i8mm+bf16+sve", "-msve-vector-bits=256",
                                   "-fno-ipa-pure-const", "-fno-ipa-modref"]
    _, plan, args = sgemm_plan(V1)
    c = plan.emit_c("sg", args)
    assert "svmla_f32_x(" in c and "svwhilelt_b32(" in c and "vfmaq_f32" not in c  # 37 = 4 * 8 + 5: predicated
    _, plan, args = int8_plan(V1)
    assert "svdot_s32(" in plan.emit_c("s8", args)
    # 16-byte vectors on the same core: Neon
    _, plan, args = sgemm_plan(V1(vector_bytes=16))
    assert "vfmaq_f32(" in plan.emit_c("sg", args)


_why = AARCH64_TOOLCHAIN.missing() or AARCH64_TOOLCHAIN.cannot_run()


@pytest.mark.skipif(_why is not None, reason=f"AArch64 tools missing: {_why}")
def test_sve_kernels_under_qemu(tmp_path, monkeypatch):
    kernels = {"sgemm": sgemm_plan(V1), "s8": int8_plan(V1), "u8": int8_plan(V1, a_type=S.uint8, b_type=S.uint8),
               "us": int8_plan(V1, a_type=S.uint8, b_type=S.int8), "red": _row_reductions(S.float32),
               "ired": _row_reductions(S.int32), "tr": _transpose()}
    for name in ("red", "ired", "tr"):  # (built for Armv8-A by the helpers: here for the SVE core)
        nest, _, args = kernels[name]
        plan = nest.create_schedule().create_plan(V1)
        plan.vectorize(nest.get_indices()[-1])
        kernels[name] = (nest, plan, args)
    pkg = acc.Package()
    for name, (_, plan, args) in kernels.items():
        pkg.add(plan, args=args, base_name=name)
    pkg.build("sve", output_dir=tmp_path, progress=False)
    c = (tmp_path / "sve.c").read_text()
    for word in ("svmla_f32_x(", "svdot_u32(", "svusdot_s32(", "svaddv_f32(", "svld1_gather_s32index_f32(", "rdvl"):
        assert word in c, word
    rng = np.random.default_rng(2)
    calls = [(name, _data(args, rng)) for name, (_, _, args) in kernels.items()]
    wants = [_expected(kernels[name][0], kernels[name][2], values) for name, values in calls]
    for (name, _), got, want in zip(calls, run_calls(tmp_path, calls), wants):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
    # on a CPU with 512-bit SVE vectors the functions refuse to run (the code assumes 256 bits)
    qemu = AARCH64_TOOLCHAIN.emulator()
    monkeypatch.setattr(AARCH64_TOOLCHAIN, "run_command", lambda exe, flags=(): [qemu, "-cpu", "max,sve512=on", exe])
    with pytest.raises(EmulationError, match=r"sgemm: built for target Neoverse V1 with 32-byte SVE vectors, but "
                                             r"this CPU's are 64 bytes \(under qemu: -cpu max,sve256=on\)"):
        run_calls(tmp_path, calls[:1])
