"""Nests and targets the GPU tests share (tests/targets/gpu/)."""
from __future__ import annotations

import accpy as acc
from abi.kernels import mixed_matmul_nest

A100 = acc.Target(acc.Target.Model.NVIDIA_A100)
MI100 = acc.Target(acc.Target.Model.AMD_MI100)
F32 = acc.ScalarType.float32


def matmul(M, N, K, dtype=F32):
    """C[i, j] += A[i, k] * B[k, j]: (nest, (A, B, C)) (the project's matmul nest; its casts to the
    arrays' own type are no-ops)."""
    nest, args, _ = mixed_matmul_nest(M, N, K, dtype, dtype, dtype)
    return nest, args


def conv3x3(H, W, CI, CO, dtype=F32):
    """O[y, x, co] += I[y + ky, x + kx, ci] * Wt[ky, kx, ci, co] (NHWC, no padding):
    (nest, (I, Wt, O))."""
    I = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(H + 2, W + 2, CI), name="I")
    Wt = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(3, 3, CI, CO), name="Wt")
    O = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(H, W, CO), name="O")
    nest = acc.Nest(shape=(H, W, CO, 3, 3, CI))
    y, x, co, ky, kx, ci = nest.get_indices()

    @nest.iteration_logic
    def _():
        O[y, x, co] += I[y + ky, x + kx, ci] * Wt[ky, kx, ci, co]

    return nest, (I, Wt, O)


def axpy_plan(split=16, target=A100):
    """Y = 2 Y + X over runtime sizes (M, N), rows bound to BLOCK_Y, columns in blocks of `split`
    threads: (plan, (M, N, X, Y))."""
    M, N = acc.create_dimensions()
    X = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(M, N), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(M, N), name="Y")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i, j] = Y[i, j] * 2.0 + X[i, j]

    s = nest.create_schedule()
    jj = s.split(j, split)
    s.reorder(i, j, jj)
    plan = s.create_plan(target)
    plan.bind({i: target.GridUnit.BLOCK_Y, j: target.GridUnit.BLOCK_X, jj: target.GridUnit.THREAD_X})
    return plan, (M, N, X, Y)
