"""Nests and targets the GPU tests share (tests/targets/gpu/)."""
from __future__ import annotations

import accpy as acc

A100 = acc.Target(acc.Target.Model.NVIDIA_A100)
MI100 = acc.Target(acc.Target.Model.AMD_MI100)
F32 = acc.ScalarType.float32


def matmul(M, N, K, dtype=F32):
    """C[i, j] += A[i, k] * B[k, j]: (nest, (A, B, C))."""
    A = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=dtype, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=dtype, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C)
