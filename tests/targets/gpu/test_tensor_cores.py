"""Tensor cores on GPU targets (`plan.tensorize(indices, mma_shape=...)`, accpy/targets/gpu/tensor.py):
tensorized matmuls, blocks and warps bound as in Accera's tutorial, run their OpenCL C kernels on
PoCL, where native/gpu/accpy_mma.cl.h emulates each warp's mma.sync with its 32 lanes holding
exactly the fragment elements the hardware gives them (a wrong layout gives a wrong answer); int8
results are bit-exact with the reference, float16 ones within a float32 tolerance. The same plans'
CUDA C compiles with nvcc to mma.sync for sm_80 and sm_90. Requests a target cannot run, or that
would change the result, are refused naming the shape, type, loop or option."""
from __future__ import annotations

import re

import numpy as np
import pytest

import accpy as acc
from accpy.testing import assert_matches_reference
from accpy.testing.asserts import run
from support.gpu import A100

F16, BF16, F32 = acc.ScalarType.float16, acc.ScalarType.bfloat16, acc.ScalarType.float32
I8, U8, I32 = acc.ScalarType.int8, acc.ScalarType.uint8, acc.ScalarType.int32
S16, S32x8 = acc.MMAShape.M16xN16xK16_B1, acc.MMAShape.M32xN8xK16_B1
SHARED = acc.MemorySpace.SHARED
# (tests/targets/gpu/conftest.py runs PoCL on one thread: with several, PoCL 3.1 sometimes gives a
# wrong tile for these kernels, whose fragments live across the emulation's barriers)


def tc_matmul(M, N, K, ti=F16, to=F32, shape=S16, passes=1, bm=32, bn=32, target=A100, cast=True, order=None,
              shared=False, **options):
    """C[i, j] += cast(A[i, k]) * cast(B[k, j]) in blocks of bm x bn, warps of one MMA block each:
    (plan, (A, B, C), indices)."""
    A = acc.Array(role=acc.Role.INPUT, element_type=ti, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=ti, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=to, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        if cast:
            C[i, j] += acc.cast(A[i, k], to) * acc.cast(B[k, j], to)
        else:
            C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    m, n, kp = target.tensor_core_info.compute_tensor_splits(shape, passes)
    ii, jj = s.split(i, bm), s.split(j, bn)
    iii, jjj, kk = s.tile({ii: m, jj: n, k: kp})
    ix = dict(i=i, j=j, k=k, ii=ii, jj=jj, iii=iii, jjj=jjj, kk=kk)
    s.reorder(*[ix[x] for x in (order or ("i", "j", "k", "ii", "jj", "iii", "jjj", "kk"))])
    plan = s.create_plan(target)
    plan.bind({i: target.GridUnit.BLOCK_Y, j: target.GridUnit.BLOCK_X, ii: target.GridUnit.WARP_Y,
               jj: target.GridUnit.WARP_X})
    if shared:
        plan.cache(A, index=ii, location=SHARED)
        plan.cache(B, index=ii, location=SHARED)
    plan.tensorize(indices=(iii, jjj, kk), mma_shape=shape, num_total_passes=passes, **options)
    return plan, (A, B, C), ix


def _data(args, seed=0):
    """Inputs of the operands' types: small integers (exact in every type), C random."""
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        lo, hi = (0, 6) if a.element_type is U8 else (-4, 5)
        out.append(rng.integers(lo, hi, size=a.shape).astype(np.dtype(_numpy(a.element_type))))
    return out


def _numpy(t):
    return {F16: np.float16, F32: np.float32, I8: np.int8, U8: np.uint8, I32: np.int32}[t]


# -- results on PoCL --------------------------------------------------------------------------------
@pytest.mark.parametrize("ti, to", [(F16, F32), (I8, I32)], ids=["f16-f32", "s8-s32"])
@pytest.mark.parametrize("shape", [S16, S32x8], ids=["M16xN16xK16", "M32xN8xK16"])
def test_tensorized_matmul_matches_the_reference(needs_opencl, ti, to, shape):
    plan, args, _ = tc_matmul(64, 64, 64, ti, to, shape)
    exact = ti is I8
    assert_matches_reference(plan, args, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-3)


def test_operands_from_shared_caches(needs_opencl):
    # A and B blocks of each block of C in shared memory (filled by the block's warps), read by the tiles
    plan, args, _ = tc_matmul(64, 64, 64, I8, I32, shared=True)
    assert_matches_reference(plan, args, rtol=0, atol=0)


def test_two_passes_per_tile(needs_opencl):
    # the k loop of a tile spans 2 x 16: two m16n8k16 steps per 16x8 tile of C, in pass order
    plan, args, ix = tc_matmul(32, 32, 64, F16, F32, passes=2)
    assert plan.schedule.space.dim(ix["kk"]).extent.value == 32
    assert_matches_reference(plan, args, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("policy, fused", [("BLOCK_ORDER", None), ("PASS_ORDER", 1)])
def test_scheduling_policies_give_the_same_result(needs_opencl, policy, fused):
    plan, args, _ = tc_matmul(32, 32, 64, I8, I32, S32x8, passes=2,
                              scheduling_policy=getattr(acc.MMASchedulingPolicy, policy), num_fused_passes=fused)
    assert_matches_reference(plan, args, rtol=0, atol=0)


def _run_plan(plan, args, values):
    return run(plan, args, values)


@pytest.mark.parametrize("op, arg, expect", [
    ("ReLU", None, lambda x: np.maximum(x, 0)),
    ("SCALE", 3, lambda x: 3 * x),
])
def test_epilogue_ops_on_the_c_fragment(needs_opencl, op, arg, expect):
    # the whole reduction in one tile (K = 16 x 2 passes): C = f(A @ B + C), applied once per element
    plan, args, _ = tc_matmul(32, 32, 32, I8, I32, passes=2, epilogue_op=getattr(acc.MMAFragmentOp, op),
                              epilogue_arg=arg)
    a, b, c = _data(args)
    got = _run_plan(plan, args, [a, b, c.copy()])[2]
    want = expect(a.astype(np.int32) @ b.astype(np.int32) + c)
    np.testing.assert_array_equal(got, want)


def test_prologue_set_clears_c_before_the_product(needs_opencl):
    plan, args, _ = tc_matmul(32, 32, 16, F16, F32, prologue_op=acc.MMAFragmentOp.SET, prologue_arg=0.0)
    a, b, c = _data(args)
    got = _run_plan(plan, args, [a, b, c + 100])[2]
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-6)


# -- refusals ---------------------------------------------------------------------------------------
def _refused(match, build=False, **kw):
    with pytest.raises(ValueError, match=match):
        plan, args, _ = tc_matmul(**{"M": 64, "N": 64, "K": 64, **kw})
        if build:
            plan.lower("k", args)


def test_types_the_table_lacks_are_refused():
    v100 = acc.Target(acc.Target.Model.NVIDIA_V100)
    _refused(r"NVidia V100's tensor cores have no int8 -> int32 in MMAShape.M16xN16xK16_B1; they take "
             r"float16->float16, float16->float32", ti=I8, to=I32, target=v100)
    _refused(r"NVidia A100's tensor cores have no float32 -> float32 in MMAShape.M16xN16xK16_B1", ti=F32, to=F32)
    mi100 = acc.Target(acc.Target.Model.AMD_MI100)
    _refused(r"AMD MI100's tensor cores have no uint8 -> int32", ti=U8, to=I32, target=mi100)


def test_products_in_the_narrow_type_are_refused():
    _refused(r"product is computed in int8.*acc.cast", ti=I8, to=I32, cast=False)


def test_shapes_accpy_does_not_emit_and_devices_without_tensor_cores_are_refused():
    _refused(r"M8xN32xK16_B1.*accpy emits M16xN16xK16_B1 and M32xN8xK16_B1", shape=acc.MMAShape.M8xN32xK16_B1)
    p100 = acc.Target(acc.Target.Model.NVIDIA_P100)
    _refused(r"NVidia P100 has no tensor instructions", target=p100)
    mi100 = acc.Target(acc.Target.Model.AMD_MI100)
    _refused(r"M32xN8xK16_B1: AMD matrix cores \(64-lane wavefronts\) take M16xN16xK16_B1", target=mi100, ti=I8,
             to=I32, shape=S32x8)


def test_extents_must_match_the_shape_exactly():
    plan, args, ix = tc_matmul(64, 64, 64)
    with pytest.raises(ValueError, match=r"iii runs 16 iterations; .* covers exactly 32"):
        plan2, _, ix2 = tc_matmul(64, 64, 64)
        plan2.tensorize(indices=(ix2["iii"], ix2["jjj"], ix2["kk"]), mma_shape=S32x8)


def test_bad_options_are_refused():
    _refused(r"num_fused_passes: expected None or an int >= 1 dividing num_total_passes \(2\)", passes=2,
             num_fused_passes=3)
    _refused(r"epilogue_op=MMAFragmentOp.SCALE needs its scalar", epilogue_op=acc.MMAFragmentOp.SCALE)
    _refused(r"unknown option\(s\) colour", colour=1)


def test_warps_need_a_tensorized_plan_and_threads_do_not_mix_with_them():
    nest_plan, args, ix = tc_matmul(64, 64, 64)
    A, B, C = args
    nest = acc.Nest(shape=(64, 64, 64))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(A[i, k], F32) * acc.cast(B[k, j], F32)

    s = nest.create_schedule()
    ii, jj = s.split(i, 32), s.split(j, 32)
    s.reorder(i, j, k, ii, jj)
    plan = s.create_plan(A100)
    with pytest.raises(ValueError, match="not both"):
        plan.bind({ii: A100.GridUnit.WARP_Y, jj: A100.GridUnit.THREAD_X})
    plan.bind({i: A100.GridUnit.BLOCK_Y, ii: A100.GridUnit.WARP_Y})
    with pytest.raises(ValueError, match="tensorizes nothing"):
        plan.lower("k", args)


def test_a_warp_loop_with_a_tail_is_refused():
    # 80 rows in blocks of 48: the last block has 2 of the 3 warps' rows
    with pytest.raises(ValueError, match="warp-bound loop ii runs 2 iterations where its warps number 3"):
        plan, args, _ = tc_matmul(80, 32, 32, bm=48, bn=32)
        plan.lower("k", args)


# -- CUDA C -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_text_compiles_to_mma_sync(needs_nvcc, arch):
    from accpy.targets.gpu import tools
    from accpy.targets.gpu.cuda import cuda_source
    plan, args, _ = tc_matmul(64, 64, 64, I8, I32, passes=2, epilogue_op=acc.MMAFragmentOp.ReLU)
    text = cuda_source(plan, args, "tc_matmul")
    assert "accpy_mma_tile_sync_s8" in text and "accpy_mma_lane()" in text
    ptx = tools.compile_cuda(text, arch=arch, mode="ptx").output
    assert re.search(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.s32\.s8\.s8\.s32", ptx)
