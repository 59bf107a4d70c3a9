"""AMD matrix cores (accpy/targets/gpu/mfma.py, the MFMA section of native/gpu/accpy_mma.cl.h) and
MMA_FRAGMENT caches (accpy/targets/gpu/tensor.py, tiles.py).

The ownership maps cover every tile once and agree with facts read from AMD's matrix instruction
calculator (lane, register -> element); a wrong map gives a wrong answer. MI100 float32 matmuls
tensorized with Accera's AMD shapes (both scheduling policies, several passes fused two at a time,
SET / SCALE prologue and epilogue) run on PoCL with 64-lane wavefronts and match numpy; so do
MMA_FRAGMENT caches of C on AMD and NVIDIA targets. Double-buffered fragment caches, fragment caches
without a tensorized plan and on a CPU target are refused."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.errors import LimitError
from accpy.targets.gpu import mfma
from accpy.targets.gpu.mma import FragmentError
from accpy.testing.asserts import run
from support.gpu import A100, MI100

F16, F32 = acc.ScalarType.float16, acc.ScalarType.float32
S = acc.MMAShape
FRAGMENT = acc.MemorySpace.MMA_FRAGMENT
ALL = [(tag, name) for tag, shapes in mfma.SHAPES.items() for name in shapes]


# -- ownership -------------------------------------------------------------------------------------
@pytest.mark.parametrize("tag, shape", ALL)
def test_every_element_of_a_tile_is_owned_once(tag, shape):
    ins = mfma.instruction(shape, tag)
    for role in "ABC":
        table = mfma.owner(role, shape, tag)
        rows, cols = mfma.tile(ins, role)
        seen = np.zeros((rows, cols), dtype=int)
        np.add.at(seen, (table[..., 0], table[..., 1]), 1)
        assert table.shape == (64, ins.slots(role), 2) and (seen == 1).all()
        assert not table.flags.writeable


# (instruction, operand, lane, register column of the calculator's --matrix-layout --csv) -> element,
# read from AMD's calculator (CDNA1): D[i][j].Bb is row i, column R*b + j of an instruction's R x N D;
# A[i][k].Bb row R*b + i of the shape's A; B[k][j].Bb column R*b + j of its B
CALCULATOR = [
    ("v_mfma_f32_16x16x1f32", "D", 16, 0, (4, 0)),       # D[4][0].B0
    ("v_mfma_f32_16x16x1f32", "D", 0, 4, (0, 16)),       # D[0][0].B1
    ("v_mfma_f32_32x32x1f32", "D", 33, 16, (4, 33)),     # D[4][1].B1
    ("v_mfma_f32_32x32x1f32", "D", 33, 17, (5, 33)),     # D[5][1].B1
    ("v_mfma_f32_32x32x2f32", "D", 0, 4, (8, 0)),        # D[8][0]
    ("v_mfma_f32_32x32x2f32", "B", 36, 0, (1, 4)),       # B[1][4]
    ("v_mfma_f32_16x16x4f32", "B", 37, 0, (2, 5)),       # B[2][5]
    ("v_mfma_f32_16x16x1f32", "B", 36, 0, (0, 36)),      # B[0][4].B2
    ("v_mfma_f32_16x16x8bf16", "A", 1, 1, (1, 1)),       # v0.[31:16]: A[1][1]
    ("v_mfma_f32_16x16x16f16", "A", 50, 3, (2, 15)),     # v1.[31:16]: A[2][15]
    ("v_mfma_f32_16x16x4f16", "B", 1, 2, (2, 1)),        # v1.[15:0]: B[2][1].B0
    ("v_mfma_i32_16x16x4i8", "A", 0, 3, (0, 3)),         # v0.[31:24]: A[0][3].B0
]
_BY_NAME = {mfma.instruction(name, tag).name: (name, tag) for tag, name in ALL}


@pytest.mark.parametrize("name, role, lane, column, element", CALCULATOR)
def test_maps_agree_with_amds_calculator(name, role, lane, column, element):
    shape, tag = _BY_NAME[name]
    assert tuple(mfma.owner(role, shape, tag)[lane, column]) == element


def test_instructions_registers_and_errors():
    ins = mfma.instruction(S.M64xN64xK1_B4, F32)
    assert (ins.name, ins.rows, ins.blocks, ins.slots("A"), ins.slots("C")) == ("v_mfma_f32_16x16x1f32", 16, 4, 1, 16)
    assert mfma.instruction("M64xN64xK4_B2", "int8").name == "v_mfma_i32_32x32x4i8"
    f16 = mfma.instruction(S.M16xN16xK16_B1, F16)
    assert [f16.register("A", s) for s in range(4)] == [(0, 0), (0, 16), (1, 0), (1, 16)]
    with pytest.raises(FragmentError, match="AMD matrix cores take M16xN16xK4_B1"):
        mfma.instruction(S.M16xN16xK16_B1, F32)
    with pytest.raises(FragmentError, match="dtype: expected one of float32"):
        mfma.owner("A", S.M16xN16xK4_B1, "uint8")


@pytest.mark.parametrize("tag, shape", [("f32", "M64xN64xK1_B4"), ("f32", "M32xN32xK2_B1"),
                                        ("bf16", "M64xN64xK2_B2"), ("s8", "M16xN16xK16_B1")])
def test_emulation_through_the_maps_matches_numpy_and_a_wrong_map_does_not(tag, shape):
    ins = mfma.instruction(shape, tag)
    rng = np.random.default_rng(3)
    a, b = rng.integers(-4, 5, size=(ins.m, ins.k)), rng.integers(-4, 5, size=(ins.k, ins.m))
    c = rng.integers(-4, 5, size=(ins.m, ins.m))
    if tag == "s8":
        a, b = a.astype(np.int8), b.astype(np.int8)
    np.testing.assert_array_equal(mfma.emulate(shape, tag, a, b, c), a.astype(np.int64) @ b + c)
    for role in "ABC":
        wrong = mfma.owner(role, shape, tag).copy()
        wrong[[0, 17]] = wrong[[17, 0]]  # lanes 0 and 17 swap their slots
        assert not np.array_equal(mfma.emulate(shape, tag, a, b, c, maps={role: wrong}), a.astype(np.int64) @ b + c)


# -- tensorized matmuls on PoCL -------------------------------------------------------------------
def plan_for(shape, target=MI100, M=64, N=64, K=32, block=None, passes=1, dtype=F32, **options):
    """Accera's tutorial plan: C[i, j] += A[i, k] * B[k, j] in blocks (BLOCK_Y, BLOCK_X) of warps
    (WARP_Y, WARP_X), each warp one tile: (plan, (A, B, C), indices by name)."""
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        if dtype is F32:
            C[i, j] += A[i, k] * B[k, j]
        else:
            C[i, j] += acc.cast(A[i, k], F32) * acc.cast(B[k, j], F32)

    s = nest.create_schedule()
    m, n, kp = target.tensor_core_info.compute_tensor_splits(shape, passes)
    bm, bn = block if isinstance(block, tuple) else (block or 2 * m, block or 2 * n)
    ii, jj = s.split(i, bm), s.split(j, bn)
    iii, jjj, kk = s.tile({ii: m, jj: n, k: kp})
    s.reorder(i, j, k, ii, jj, iii, jjj, kk)
    plan = s.create_plan(target)
    plan.bind({i: target.GridUnit.BLOCK_Y, j: target.GridUnit.BLOCK_X, ii: target.GridUnit.WARP_Y,
               jj: target.GridUnit.WARP_X})
    plan.tensorize(indices=(iii, jjj, kk), mma_shape=shape, num_total_passes=passes, **options)
    return plan, (A, B, C), dict(i=i, j=j, k=k, ii=ii, jj=jj)


def _result(plan, args, c_offset=0.0):
    rng = np.random.default_rng(7)
    a, b, c = (rng.integers(-4, 5, size=x.shape).astype(np.float16 if x.element_type is F16 else np.float32)
               for x in args)
    got = run(plan, args, [a, b, c + c_offset])[2]
    return got, a.astype(np.float64) @ b.astype(np.float64), c + c_offset


def test_splits_are_the_tutorials():
    info = MI100.tensor_core_info
    assert info.compute_tensor_splits(S.M16xN16xK4_B1) == (16, 16, 4)
    assert info.compute_tensor_splits(S.M16xN16xK4_B1, 8) == (16, 16, 32)
    assert info.compute_tensor_splits(S.M64xN64xK1_B4) == (64, 64, 1)


@pytest.mark.parametrize("shape, options", [
    (S.M16xN16xK4_B1, {}),
    (S.M32xN32xK2_B1, {}),
    (S.M64xN64xK1_B4, {"scheduling_policy": acc.MMASchedulingPolicy.PASS_ORDER}),
    (S.M64xN64xK1_B4, {"scheduling_policy": acc.MMASchedulingPolicy.BLOCK_ORDER}),
    (S.M64xN64xK1_B2, {}),
    (S.M16xN16xK4_B1, {"num_total_passes": 8, "num_fused_passes": 2}),
], ids=["16x16x4", "32x32x2", "64x64x1_B4-pass", "64x64x1_B4-block", "64x64x1_B2", "8passes-fused2"])
def test_mi100_float32_matmul_matches_numpy(needs_opencl, shape, options):
    passes = options.pop("num_total_passes", 1)
    block = 64 if shape.m == 64 else None
    plan, args, _ = plan_for(shape, block=block, passes=passes, **options)
    got, product, c = _result(plan, args)
    np.testing.assert_array_equal(got, product + c)


def test_mi100_prologue_set_and_epilogue_scale_once_per_reduction(needs_opencl):
    # the tutorial's alpha scaling: C = 5 * (A @ B) over 8 steps of k (SET before the first, SCALE after the last)
    plan, args, _ = plan_for(S.M16xN16xK4_B1, prologue_op=acc.MMAFragmentOp.SET, prologue_arg=0.0,
                             epilogue_op=acc.MMAFragmentOp.SCALE, epilogue_arg=5.0)
    got, product, _ = _result(plan, args, c_offset=100.0)
    np.testing.assert_array_equal(got, 5 * product)


def test_mi100_float16_matmul_matches_numpy(needs_opencl):
    plan, args, _ = plan_for(S.M16xN16xK16_B1, dtype=F16)
    got, product, c = _result(plan, args)
    np.testing.assert_array_equal(got, product + c)


# -- MMA_FRAGMENT caches ---------------------------------------------------------------------------
@pytest.mark.parametrize("target, shape, dtype", [(MI100, S.M16xN16xK4_B1, F32), (A100, S.M16xN16xK16_B1, F16)],
                         ids=["MI100", "A100"])
def test_fragment_cache_of_c_matches_numpy(needs_opencl, target, shape, dtype):
    plan, args, ix = plan_for(shape, target=target, K=64, dtype=dtype)
    plan.cache(args[2], index=ix["k"], location=FRAGMENT)
    got, product, c = _result(plan, args)
    np.testing.assert_array_equal(got, product + c)


def test_fragment_cache_loads_c_once_per_warp():
    from accpy.targets.gpu.cuda import cuda_source
    plan, args, ix = plan_for(S.M16xN16xK16_B1, target=A100, K=64, dtype=F16, epilogue_op=acc.MMAFragmentOp.ReLU)
    plan.cache(args[2], index=ix["k"], location=FRAGMENT)
    text = cuda_source(plan, args, "frag")
    kernel = text[text.index('extern "C" __global__ void'):]
    kernel = kernel[:kernel.index("\n}\n")]
    # the two 16x8 C fragments of each warp's 16x16 tile: loaded before the k loop, ReLU and stored after it
    loads, loop, relu = kernel.count("accpy_mma_tile_load_c_f16"), kernel.index("for (int64_t k"), kernel.index("relu_c")
    assert loads == 2 and kernel.rindex("accpy_mma_tile_load_c_f16") < loop < relu
    assert kernel.count("accpy_mma_tile_sync_f16") == 2 and kernel.index("accpy_mma_tile_store_c") > relu


def _lowered(plan, args):
    plan.lower("f", args)


def test_fragment_cache_refusals():
    plan, args, ix = plan_for(S.M16xN16xK4_B1)
    with pytest.raises(ValueError, match="double_buffer=True on an MMA_FRAGMENT cache"):  # at plan.cache
        plan.cache(args[0], index=ix["k"], location=FRAGMENT, double_buffer=True)
    plan, args, ix = plan_for(S.M16xN16xK4_B1)
    plan.cache(args[0], index=ix["k"], location=FRAGMENT)
    with pytest.raises(ValueError, match="A block of tensorize.* moves with the loop\\(s\\) k"):
        _lowered(plan, args)
    # no tensorize: a plain bound plan
    nest, (A, B, C) = _plain_matmul()
    s = nest.create_schedule()
    i, j, k = s.get_indices()
    ii, jj = s.split(i, 16), s.split(j, 16)
    s.reorder(i, j, k, ii, jj)
    plan = s.create_plan(MI100)
    plan.bind({i: MI100.GridUnit.BLOCK_Y, j: MI100.GridUnit.BLOCK_X, ii: MI100.GridUnit.THREAD_Y,
               jj: MI100.GridUnit.THREAD_X})
    plan.cache(C, index=k, location=FRAGMENT)
    with pytest.raises(ValueError, match="tensorizes nothing"):
        _lowered(plan, (A, B, C))


def test_fragment_cache_on_a_cpu_target_is_refused():
    nest, args = _plain_matmul()
    s = nest.create_schedule()
    plan = s.create_plan()
    with pytest.raises(ValueError, match="target HOST has no MMA_FRAGMENT memory"):  # at plan.cache
        plan.cache(args[2], index=s.get_indices()[2], location=FRAGMENT)


def _plain_matmul():
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(32, 32), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(32, 32), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(32, 32), name="C")
    nest = acc.Nest(shape=(32, 32, 32))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C)


def test_wavefronts_are_64_work_items():
    # 2 x 2 warps of 64 lanes per block: 128 x 2 work-items (the grid counts WARP_X in 32s: two per wavefront)
    from accpy.codegen.device import launch_of
    from accpy.ir.expr import as_int
    from accpy.targets.gpu.grid import GpuGrid
    plan, args, _ = plan_for(S.M16xN16xK4_B1)
    fn = plan.lower("f", args)
    assert GpuGrid().launch_dims({u: as_int(e) for u, e in launch_of(fn).items()}) == ((2, 2, 1), (128, 2, 1))
    # 8 x 4 warps: 1024 threads in the grid's count, 2048 in 64-lane wavefronts
    plan, args, _ = plan_for(S.M16xN16xK4_B1, M=128, N=64, K=4, block=(128, 64))
    with pytest.raises(LimitError, match="32 warps of 64 lanes: one block would have threads: 2048, more than the "
                                         "1024 AMD MI100 allows"):
        plan.lower("f", args)


# -- DEBUG mode's oracle ----------------------------------------------------------------------------
@pytest.mark.parametrize("pro, epi", [((acc.MMAFragmentOp.SET, 0.0), (acc.MMAFragmentOp.SCALE, 5.0)),
                                      ((None, None), (acc.MMAFragmentOp.ReLU, None))])
def test_debug_mode_applies_the_fused_prologue_and_epilogue(needs_opencl, tmp_path, pro, epi):
    # the plan's fragment ops are part of the function it builds: DEBUG mode's oracle (the unscheduled
    # nest) applies them too, so the tutorial's alpha scaling passes the check
    ops = {k: v for k, v in (("prologue_op", pro[0]), ("prologue_arg", pro[1]), ("epilogue_op", epi[0]),
                             ("epilogue_arg", epi[1])) if v is not None}
    plan, args, _ = plan_for(S.M16xN16xK4_B1, **ops)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="fused")
    pkg.build("fused_debug", output_dir=tmp_path, mode=acc.Package.Mode.DEBUG, format=acc.Package.Format.HAT_DYNAMIC,
              python_module=False)
    lib = acc.load(tmp_path / "fused_debug.hat")
    rng = np.random.default_rng(3)
    a, b, c = (rng.integers(-4, 5, size=x.shape).astype(np.float32) for x in args)
    c -= 2  # some negative sums for the ReLU
    want = a @ b + (0 if pro[0] is not None else c)
    want = 5 * want if epi[0] is acc.MMAFragmentOp.SCALE else np.maximum(want, 0)
    lib["fused"](a, b, c)  # (raises on a DEBUG-mode mismatch)
    np.testing.assert_array_equal(c, want)


def test_the_scalar_of_an_op_without_one_may_be_accera_s_default():
    # Accera's tests spell out prologue_arg=0.0 (its default) with prologue_op=NONE
    plan_for(S.M16xN16xK4_B1, prologue_op=acc.MMAFragmentOp.NONE, prologue_arg=0.0)
    with pytest.raises(ValueError, match=r"epilogue_arg=2 is given, but epilogue_op=MMAFragmentOp.ReLU takes no scalar"):
        plan_for(S.M16xN16xK4_B1, epilogue_op=acc.MMAFragmentOp.ReLU, epilogue_arg=2)
