"""Caches in a block's shared memory (location=SHARED) and in each thread's registers (PRIVATE) on
GPU targets: the threads of a block fill a shared cache together (coalesced, dealt out by element),
with barriers where the block must be complete and before it is refilled, and the results match
the reference on an OpenCL device (PoCL). PoCL runs a work-group's items one after another between
barriers, so a missing barrier gives a wrong answer here (a test below removes them to show it)."""
from __future__ import annotations

import pytest

import accpy as acc
from accpy.errors import LimitError
from accpy.testing import assert_matches_reference

from support.gpu import A100, conv3x3, matmul

SHARED = acc.MemorySpace.SHARED


def shared_matmul(M, N, K, b=16, bk=16, cache_c=None, target=A100, double_buffer=False, staging=None):
    nest, (A, B, C) = matmul(M, N, K)
    i, j, k = nest.get_indices()
    s = nest.create_schedule()
    ii, jj, kk = s.split(i, b), s.split(j, b), s.split(k, bk)
    s.reorder(i, j, ii, jj, k, kk)
    plan = s.create_plan(target)
    plan.bind({i: target.GridUnit.BLOCK_Y, j: target.GridUnit.BLOCK_X, ii: target.GridUnit.THREAD_Y,
               jj: target.GridUnit.THREAD_X})
    plan.cache(A, index=kk, location=target.MemorySpace.SHARED, double_buffer=double_buffer,
               double_buffer_location=staging)
    plan.cache(B, index=kk, location=target.MemorySpace.SHARED, double_buffer=double_buffer,
               double_buffer_location=staging)
    if cache_c is not None:
        plan.cache(C, index=cache_c(locals()), location=target.MemorySpace.PRIVATE)
    return plan, (A, B, C)


@pytest.mark.parametrize("shape", [(64, 48, 64), (40, 24, 20), (33, 17, 50)])
def test_shared_tiles_of_a_and_b(needs_opencl, shape):
    plan, args = shared_matmul(*shape)
    assert_matches_reference(plan, args)


@pytest.mark.parametrize("shape", [(64, 48, 64), (40, 24, 20), (33, 17, 50), (16, 16, 16)])
def test_double_buffered_shared_tiles(needs_opencl, shape):
    # the next k block is filled into the other buffer while this one is used: one barrier a step
    plan, args = shared_matmul(*shape, double_buffer=True)
    assert_matches_reference(plan, args)


def test_double_buffering_takes_one_barrier_per_step_and_two_buffers():
    from accpy.codegen.device import emit_kernel
    from accpy.targets.gpu.dialects import OPENCL_C

    one = emit_kernel(shared_matmul(64, 64, 256)[0].lower("k", shared_matmul(64, 64, 256)[1]), OPENCL_C, "").source
    plan, args = shared_matmul(64, 64, 256, double_buffer=True)
    two = emit_kernel(plan.lower("k", args), OPENCL_C, "").source
    assert "__local float A_cache[256];" in one and "__local float A_cache_2[512];" in two
    loop = lambda src: src[src.index("for (int64_t k = 0"):]  # noqa: E731
    assert loop(one).count("barrier(") == 2 and loop(two).count("barrier(") == 1


@pytest.mark.parametrize("shape", [(64, 48, 64), (33, 17, 50), (16, 16, 16)])
def test_double_buffering_through_registers(needs_opencl, shape):
    # double_buffer_location=PRIVATE: each thread loads its share of the next k block into registers
    # while the block computes, then stores it into the one shared buffer
    plan, args = shared_matmul(*shape, double_buffer=True, staging=acc.MemorySpace.PRIVATE)
    assert_matches_reference(plan, args)


def test_double_buffering_through_registers_keeps_one_shared_buffer():
    from accpy.codegen.device import emit_kernel
    from accpy.targets.gpu.dialects import OPENCL_C

    plan, args = shared_matmul(64, 64, 256, double_buffer=True, staging=acc.MemorySpace.PRIVATE)
    src = emit_kernel(plan.lower("k", args), OPENCL_C, "").source
    assert "__local float A_cache[256];" in src and "A_cache_2" not in src
    # 256 elements dealt to 256 threads: one register each, loaded a step ahead
    assert "float A_cache_next0[1]" in src
    assert "double_buffer_location=PRIVATE" in repr(plan)
    loop = src[src.index("for (int64_t k = 0"):]
    assert loop.count("barrier(") == 2


@pytest.mark.parametrize("strategy", [acc.CacheStrategy.BLOCKED, acc.CacheStrategy.STRIPED])
def test_cache_strategies_divide_the_copy(needs_opencl, strategy):
    # BLOCKED: each thread one contiguous run of the block; STRIPED: consecutive threads on
    # consecutive elements (with a tail: 33 x 17 x 50)
    for shape in ((64, 48, 64), (33, 17, 50)):
        nest, (A, B, C) = matmul(*shape)
        i, j, k = nest.get_indices()
        s = nest.create_schedule()
        ii, jj, kk = s.split(i, 16), s.split(j, 16), s.split(k, 16)
        s.reorder(i, j, ii, jj, k, kk)
        plan = s.create_plan(A100)
        plan.bind({i: A100.GridUnit.BLOCK_Y, j: A100.GridUnit.BLOCK_X, ii: A100.GridUnit.THREAD_Y,
                   jj: A100.GridUnit.THREAD_X})
        plan.cache(A, index=kk, location=SHARED, strategy=strategy, double_buffer=True)
        plan.cache(B, index=kk, location=SHARED, strategy=strategy)
        assert_matches_reference(plan, (A, B, C))


def test_a_cache_strategy_needs_a_shared_cache_on_a_gpu():
    plan, (A, B, C) = shared_matmul(32, 32, 32)
    k = plan.schedule.get_indices()[0]
    with pytest.raises(ValueError, match="divides the copy of a SHARED cache"):
        plan.cache(A, index=k, location=acc.MemorySpace.PRIVATE, strategy=acc.CacheStrategy.BLOCKED)


def test_double_buffer_location_is_checked():
    plan, (A, B, C) = shared_matmul(32, 32, 32)
    with pytest.raises(ValueError, match="double_buffer_location requires double_buffer=True"):
        plan.cache(A, index=plan.schedule.get_indices()[0], location=SHARED,
                   double_buffer_location=acc.MemorySpace.PRIVATE)
    with pytest.raises(ValueError, match="double_buffer_location: expected acc.AUTO"):
        plan.cache(A, index=plan.schedule.get_indices()[0], location=SHARED, double_buffer=True,
                   double_buffer_location=acc.MemorySpace.GLOBAL)
    with pytest.raises(TypeError, match="double_buffer_location: expected an acc.MemorySpace"):
        plan.cache(A, index=plan.schedule.get_indices()[0], location=SHARED, double_buffer=True,
                   double_buffer_location="private")


def test_shared_tiles_with_a_private_accumulator(needs_opencl):
    # C's element of each thread in a register across the k loop (PRIVATE: per-thread memory)
    plan, args = shared_matmul(48, 32, 40, cache_c=lambda v: v["k"])
    assert_matches_reference(plan, args)


def test_a_shared_output_tile_is_written_back_by_the_block(needs_opencl):
    nest, (A, B, C) = matmul(40, 36, 24)
    i, j, k = nest.get_indices()
    s = nest.create_schedule()
    ii, jj = s.split(i, 8), s.split(j, 16)
    s.reorder(i, j, k, ii, jj)
    plan = s.create_plan(A100)
    plan.bind({i: A100.GridUnit.BLOCK_Y, j: A100.GridUnit.BLOCK_X, ii: A100.GridUnit.THREAD_Y,
               jj: A100.GridUnit.THREAD_X})
    plan.cache(C, index=k, location=SHARED)
    plan.cache(A, index=ii, location=SHARED)
    assert_matches_reference(plan, (A, B, C))


def test_a_conv_with_a_shared_input_tile(needs_opencl):
    H, W, CI, CO = 12, 16, 2, 3
    nest, (I, Wt, O) = conv3x3(H, W, CI, CO)
    y, x, co, ky, kx, ci = nest.get_indices()

    s = nest.create_schedule()
    yy, xx = s.split(y, 4), s.split(x, 8)
    s.reorder(y, x, yy, xx, co, ky, kx, ci)
    plan = s.create_plan(A100)
    plan.bind({y: A100.GridUnit.BLOCK_Y, x: A100.GridUnit.BLOCK_X, yy: A100.GridUnit.THREAD_Y,
               xx: A100.GridUnit.THREAD_X})
    plan.cache(I, index=co, location=SHARED)  # the (4 + 2) x (8 + 2) x CI halo tile of the block
    plan.cache(Wt, index=co, location=SHARED)
    assert_matches_reference(plan, (I, Wt, O))


def test_without_barriers_the_answer_is_wrong(needs_opencl, monkeypatch):
    # proof that the barriers are where the answer depends on them (PoCL runs a work-group's items
    # in turn between barriers: without them, a thread reads tiles the others have not filled)
    import accpy.targets.gpu.shared as shared

    monkeypatch.setattr(shared, "_barrier", lambda: None)
    monkeypatch.setattr(shared, "_merge_barriers", lambda stmts: [s for s in stmts if s is not None])
    plan, args = shared_matmul(32, 32, 32)
    with pytest.raises(AssertionError):
        assert_matches_reference(plan, args)


def test_shared_memory_overflow_is_refused_naming_the_limit():
    plan, args = shared_matmul(256, 256, 4096, b=16, bk=2048)  # A: 16 x 2048 floats = 128 KiB
    with pytest.raises(LimitError, match=r"shared memory: the caches of one block .*A_cache: 131072 bytes.*"
                                         r"more than the 49152 NVidia A100 allows"):
        plan.lower("k", args)


def test_a_global_cache_is_refused():
    nest, (A, B, C) = matmul(8, 8, 8)
    i, j, k = nest.get_indices()
    plan = nest.create_schedule().create_plan(A100)
    with pytest.raises(ValueError, match="GLOBAL-memory cache is not supported"):
        plan.cache(A, index=k, location=acc.MemorySpace.GLOBAL)
