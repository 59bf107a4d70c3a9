"""plan.bind on GPU targets: bound plans match the reference evaluator when their OpenCL C kernels
run on an OpenCL device (PoCL on this machine's CPU), and binds a device could not run, or that
would change the result, are refused by the `bind` call, naming what failed."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc
from accpy.errors import LimitError, ScheduleError
from accpy.testing import assert_matches_reference
from support.gpu import A100, F32, MI100, axpy_plan, conv3x3, matmul


def tiled_plan(M, N, K, target=A100, bm=16, bn=16, dtype=F32):
    nest, args = matmul(M, N, K, dtype)
    i, j, k = nest.get_indices()
    s = nest.create_schedule()
    ii, jj = s.split(i, bm), s.split(j, bn)
    s.reorder(i, j, ii, jj, k)
    plan = s.create_plan(target)
    plan.bind({i: target.GridUnit.BLOCK_Y, j: target.GridUnit.BLOCK_X, ii: target.GridUnit.THREAD_Y,
               jj: target.GridUnit.THREAD_X})
    return plan, args, (i, j, k, ii, jj)


@pytest.mark.parametrize("shape", [(64, 64, 32), (70, 45, 33), (1, 17, 5)])
def test_a_tiled_matmul_bound_to_blocks_and_threads_matches(needs_opencl, shape):
    plan, args, _ = tiled_plan(*shape)
    assert_matches_reference(plan, args)


def test_the_tutorial_target_and_int32(needs_opencl):
    # Accera's GPU tutorial binds for AMD's MI100; int32 wraps as the reference does
    plan, args, _ = tiled_plan(40, 36, 20, target=MI100, bm=8, bn=32, dtype=acc.ScalarType.int32)
    assert_matches_reference(plan, args)


def test_a_tuple_of_loops_shares_one_unit(needs_opencl):
    nest, args = matmul(24, 20, 7)
    i, j, k = nest.get_indices()
    s = nest.create_schedule()
    ii = s.split(i, 4)
    s.reorder(i, ii, j, k)
    plan = s.create_plan(A100)
    plan.bind({i: A100.GridUnit.BLOCK_X, (ii, j): A100.GridUnit.THREAD_X})
    assert_matches_reference(plan, args)


def test_unbound_outer_loops_run_inside_each_thread(needs_opencl):
    # k outermost, unbound: every thread runs its own k loop (no other thread touches its C[i, j])
    nest, args = matmul(12, 10, 9)
    i, j, k = nest.get_indices()
    s = nest.create_schedule()
    s.reorder(k, i, j)
    plan = s.create_plan(A100)
    plan.bind({i: A100.GridUnit.THREAD_Y, j: A100.GridUnit.THREAD_X})
    assert_matches_reference(plan, args)


def test_runtime_sizes_size_the_grid(needs_opencl, tmp_path):
    plan, (M, N, X, Y) = axpy_plan(split=32)
    pkg = acc.Package()
    pkg.add(plan, args=(M, N, X, Y), base_name="axpy")
    lib = pkg.build("gpu_axpy", output_dir=str(tmp_path), python_module=False)
    rng = np.random.default_rng(1)
    for m, n in ((5, 70), (33, 1), (0, 9)):
        x = rng.random((m, n), dtype=np.float32)
        y = rng.random((m, n), dtype=np.float32)
        want = y * 2 + x
        lib.axpy(m, n, x, y)
        np.testing.assert_allclose(y, want, rtol=1e-6)


def test_a_3x3_convolution_bound_over_output_pixels(needs_opencl):
    H, W, CI, CO = 10, 12, 3, 4
    nest, (I, Wt, O) = conv3x3(H, W, CI, CO)
    y, x, co, ky, kx, ci = nest.get_indices()

    s = nest.create_schedule()
    xx = s.split(x, 4)
    s.reorder(y, x, xx, co, ky, kx, ci)
    plan = s.create_plan(A100)
    plan.bind({y: A100.GridUnit.BLOCK_Y, x: A100.GridUnit.BLOCK_X, xx: A100.GridUnit.THREAD_Y,
               co: A100.GridUnit.THREAD_X})
    assert_matches_reference(plan, (I, Wt, O))


# -- refusals ------------------------------------------------------------------------------------

def test_bind_on_a_cpu_target_is_refused():
    nest, _ = matmul(8, 8, 8)
    i, j, k = nest.get_indices()
    plan = nest.create_schedule().create_plan(acc.Target.HOST)
    with pytest.raises(ValueError, match="has no grid of blocks and threads"):
        plan.bind({i: A100.GridUnit.THREAD_X})


def test_a_bound_loop_carrying_a_dependence_is_refused_naming_the_race():
    X = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(8,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(9,), name="Y")
    nest = acc.Nest(shape=(8,))
    (i,) = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i + 1] = Y[i] * 2.0 + X[i]  # each iteration reads what the one before wrote

    plan = nest.create_schedule().create_plan(A100)
    with pytest.raises(ScheduleError, match=r"bind\(i: THREAD_X\): two units of the grid would race on Y"):
        plan.bind({i: A100.GridUnit.THREAD_X})
    assert plan.bindings == ()  # (nothing was recorded by the refused call)


def test_binding_matmuls_reduction_loop_makes_its_updates_atomic(needs_opencl):
    nest, args = matmul(8, 6, 40)
    i, j, k = nest.get_indices()
    plan = nest.create_schedule().create_plan(A100)
    plan.bind({i: A100.GridUnit.BLOCK_Y, j: A100.GridUnit.BLOCK_X, k: A100.GridUnit.THREAD_X})
    assert [b.name for b in plan.atomic_reductions] == ["C"]
    assert_matches_reference(plan, args)


def test_a_block_too_large_for_the_target_is_refused():
    nest, _ = matmul(64, 64, 8)
    i, j, k = nest.get_indices()
    plan = nest.create_schedule().create_plan(A100)
    with pytest.raises(LimitError, match=r"one block would have threads: 4096, more than the 1024 NVidia A100 allows "
                                        r"\(max_threads_per_block\)"):
        plan.bind({i: A100.GridUnit.THREAD_Y, j: A100.GridUnit.THREAD_X})
    nest, _ = matmul(8, 128, 8)
    i, j, k = nest.get_indices()
    plan = nest.create_schedule().create_plan(A100)
    with pytest.raises(LimitError, match=r"THREAD_Z would take 128, more than the 64 .* allows \(max_block_size\[2\]"):
        plan.bind({j: A100.GridUnit.THREAD_Z})


def test_blocks_inside_threads_and_bad_units_are_refused():
    nest, _ = matmul(16, 16, 8)
    i, j, k = nest.get_indices()
    plan = nest.create_schedule().create_plan(A100)
    with pytest.raises(ScheduleError, match="j .bound to BLOCK_X. is inside i .bound to THREAD_Y."):
        plan.bind({i: A100.GridUnit.THREAD_Y, j: A100.GridUnit.BLOCK_X})
    with pytest.raises(ValueError, match="THREAD_X is bound twice"):
        plan.bind({i: A100.GridUnit.THREAD_X, (j,): "THREAD_X"})
    with pytest.raises(ValueError, match="is not a unit of this target's grid"):
        plan.bind({i: "LANE_X"})
    with pytest.raises(TypeError, match="mapping: expected a non-empty dict"):
        plan.bind([i])
    plan.bind({i: A100.GridUnit.BLOCK_X})
    with pytest.raises(ValueError, match="i is already bound"):
        plan.bind({i: A100.GridUnit.BLOCK_Y})
    with pytest.raises(ValueError, match="i is already bound"):
        plan.unroll(i)


# -- reductions across units: atomic updates ------------------------------------------------------

def row_reduction(dtype, op="add", M=12, N=37):
    X = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(M, N), name="X")
    S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(M,), name="S")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        if op == "max":
            S[i] = acc.max(S[i], X[i, j])
        elif op == "mul":
            S[i] *= X[i, j]
        else:
            S[i] += X[i, j]

    s = nest.create_schedule()
    jj = s.split(j, 16)
    return s, (X, S), (i, j, jj)


@pytest.mark.parametrize("dtype,op", [(acc.ScalarType.int32, "add"), (acc.ScalarType.float32, "add"),
                                      (acc.ScalarType.int32, "max"), (acc.ScalarType.uint32, "add")])
def test_a_reduction_bound_across_threads_updates_atomically(needs_opencl, dtype, op):
    s, args, (i, j, jj) = row_reduction(dtype, op)
    plan = s.create_plan(A100)
    plan.bind({i: A100.GridUnit.BLOCK_X, j: A100.GridUnit.THREAD_Y, jj: A100.GridUnit.THREAD_X})
    assert {b.name: o for b, (o, _) in plan.atomic_reductions.items()} == {"S": op}
    assert_matches_reference(plan, args)  # (float sums in another order: within tolerance)


def test_reductions_without_an_atomic_are_refused():
    for dtype, op in ((acc.ScalarType.float32, "max"), (acc.ScalarType.int32, "mul")):
        s, args, (i, j, jj) = row_reduction(dtype, op)
        plan = s.create_plan(A100)
        with pytest.raises(ScheduleError, match=rf"elements of S together .*{op}.* no atomic|race on S"):
            plan.bind({i: A100.GridUnit.BLOCK_X, jj: A100.GridUnit.THREAD_X})


def test_the_hat_records_the_launch_and_the_device_function(tmp_path):
    import tomllib

    plan, args, _ = tiled_plan(70, 45, 33, bm=16, bn=8)
    pkg = acc.Package()
    pkg.add(plan, args=args, base_name="mm")
    pkg.build("hat_gpu", output_dir=str(tmp_path), format=acc.Package.Format.HAT_SOURCE)
    toml = (tmp_path / "hat_gpu.hat").read_text().split("#ifdef TOML")[1].split("[declaration]")[0]
    hat = tomllib.loads(toml)
    (fn,) = hat["functions"].values()
    # 45 columns in blocks of 8 (x), 70 rows in blocks of 16 (y): [gx, gy, gz, bx, by, bz]
    assert fn["runtime"] == "CUDA" and fn["launch_parameters"] == [6, 5, 1, 8, 16, 1]
    kernel = hat["device_functions"][fn["launches"]]
    assert kernel["launch_parameters"] == [6, 5, 1, 8, 16, 1] and kernel["dialect"] == "OpenCL C"
    assert hat["target"]["required"]["GPU"] == {"runtime": "CUDA", "model": "NVidia A100"}


def test_launch_sizes_count_a_warps_lanes():
    from accpy.targets.library import grid_for

    grid = grid_for(A100)
    # two warps along x (32 lanes each) in each of 3 blocks; 4 warps along y; a runtime block count
    assert grid.launch_dims({"BLOCK_X": 3, "WARP_X": 2, "WARP_Y": 4}) == ((3, 1, 1), (64, 4, 1))
    assert grid.launch_dims({"BLOCK_X": None, "THREAD_X": 16}) == ((None, 1, 1), (16, 1, 1))
    assert grid.launch_sizes({"BLOCK_X": "n", "WARP_X": "2"}) == (("(n) * 32 * (2)", "1", "1"),
                                                                  ("32 * (2)", "1", "1"))
