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
from support.gpu import A100

F16, BF16, F32 = acc.ScalarType.float16, acc.ScalarType.bfloat16, acc.ScalarType.float32
I8, U8, I32 = acc.ScalarType.int8, acc.ScalarType.uint8, acc.ScalarType.int32
S16, S32x8 = acc.MMAShape.M16xN16xK16_B1, acc.MMAShape.M32xN8xK16_B1
SHARED = acc.MemorySpace.SHARED


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
        dt = a.element_type.numpy_dtype if hasattr(a.element_type, "numpy_dtype") else None
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
