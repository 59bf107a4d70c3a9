"""GPU targets as data: Accera's GPU models, NVIDIA's H100 and the generic OpenCL device (their
limits and tensor cores), lookups by member and name, overrides, refusals (CPU models made GPUs,
runtimes of the wrong kind or vendor, bad facts), pickling and equality, Accera's GPU enums, and a
target read from the installed OpenCL runtime (PoCL here)."""
import copy
import pickle

import pytest

import accpy as acc
from accpy.targets import OpenCLDeviceError, opencl_device_target
from accpy.targets.gpu import models as gm
from accpy.targets.gpu import GridUnit, MMAFragmentOp, MMASchedulingPolicy, MMAShape, TensorCoreInfo

T, M, S, ST = acc.Target, acc.Target.Model, acc.MMAShape, acc.ScalarType
KiB = 1024


# -- models --------------------------------------------------------------------------------------

@pytest.mark.parametrize("model, runtime, arch, sms, warp, block, static, shared, ghz", [
    (M.NVIDIA_P100, "CUDA", "sm_60", 56, 32, (1024, 1024, 64), 48 * KiB, 48 * KiB, 1.3285),
    (M.NVIDIA_V100, "CUDA", "sm_70", 80, 32, (1024, 1024, 64), 48 * KiB, 96 * KiB, 1.38),
    (M.NVIDIA_A100, "CUDA", "sm_80", 108, 32, (1024, 1024, 64), 48 * KiB, 166912, 1.41),
    (M.NVIDIA_RTX_A6000, "CUDA", "sm_86", 108, 32, (1024, 1024, 64), 48 * KiB, 101376, 1.41),
    (M.NVIDIA_H100, "CUDA", "sm_90", 132, 32, (1024, 1024, 64), 48 * KiB, 227 * KiB, None),
    (M.AMD_RADEON7, "ROCM", "gfx906", 60, 64, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 1.801),
    (M.AMD_MI50, "ROCM", "gfx906", 60, 64, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 1.725),
    (M.AMD_MI100, "ROCM", "gfx908", 120, 64, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 1.502),
    (M.AMD_MI200, "ROCM", "gfx90a", 220, 64, (1024, 1024, 1024), 64 * KiB, 64 * KiB, 1.7),
])
def test_gpu_model_facts(model, runtime, arch, sms, warp, block, static, shared, ghz):
    t = T(model)
    assert t.category is T.Category.GPU and t.is_gpu and not t.is_cpu and t.runtime is T.Runtime[runtime]
    assert (t.device_arch, t.num_cores, t.warp_size, t.max_block_size) == (arch, sms, warp, block)
    assert (t.max_static_shared_memory_per_block, t.max_shared_memory_per_block) == (static, shared)
    assert t.max_threads_per_block == 1024 and t.max_registers_per_block == 65536 and t.frequency_GHz == ghz
    assert t.extensions == () and t.name == str(model)
    if runtime == "CUDA":
        assert t.compute_capability == (int(arch[3]), int(arch[4])) and t.gfx is None
    else:
        assert t.gfx == arch and t.compute_capability is None


def test_tensor_cores_per_model():
    a100, v100, mi100 = T(M.NVIDIA_A100), T(M.NVIDIA_V100), T(M.AMD_MI100)
    wmma = (S.M16xN16xK16_B1, S.M32xN8xK16_B1, S.M8xN32xK16_B1)
    for shape in wmma:  # what accpy's CUDA code emits, on sm_80 and later
        for i, o in ((ST.float16, ST.float32), (ST.float16, ST.float16), (ST.bfloat16, ST.float32),
                     (ST.int8, ST.int32), (ST.uint8, ST.int32)):
            for t in (a100, T(M.NVIDIA_RTX_A6000), T(M.NVIDIA_H100)):
                assert t.tensor_core_info.supports(i, o, shape), (t.name, i, o, shape)
        assert v100.tensor_core_info.supports(ST.float16, ST.float32, shape)  # Volta: fp16 only
        assert not v100.tensor_core_info.supports(ST.int8, ST.int32, shape)
        assert not v100.tensor_core_info.supports(ST.bfloat16, ST.float32, shape)
    assert a100.tensor_core_info.shapes(ST.int8, ST.int32) == wmma
    assert a100.tensor_core_info.supports(ST.float32, ST.float32, S.M16xN16xK8_B1)  # TF32, Accera's table
    assert not a100.tensor_core_info.supports(ST.int8, ST.int32, S.M32xN32xK8_B1)
    # the MI100's MFMA shapes (Accera's table), not NVIDIA's
    assert mi100.tensor_core_info.supports("float16", "float32", S.M32xN32xK8_B1)
    assert mi100.tensor_core_info.supports(ST.bfloat16, ST.bfloat16, S.M64xN64xK2_B4)
    assert not mi100.tensor_core_info.supports(ST.float16, ST.float32, S.M32xN8xK16_B1)
    assert len(mi100.tensor_core_info.entries) == 32
    # none on the others, nor on CPUs
    for t in (T(M.NVIDIA_P100), T(M.AMD_MI50), T(M.OPENCL), T.HOST, T(M.GEMMINI)):
        assert not t.tensor_core_info and t.tensor_core_info.entries == ()
        assert not t.tensor_core_info.supports(ST.float16, ST.float32, S.M16xN16xK16_B1)


def test_tensor_core_passes_and_arguments():
    info = T(M.NVIDIA_A100).tensor_core_info
    shape = S.M16xN16xK16_B1
    assert info.supports(ST.float16, ST.float32, shape, num_total_passes=4, num_fused_passes=2)
    assert not info.supports(ST.float16, ST.float32, shape, num_total_passes=4, num_fused_passes=3)
    assert not info.supports(ST.float16, ST.float32, shape, num_total_passes=0)
    assert info.compute_tensor_splits(shape, 4) == (16, 16, 64)
    assert info.mma_shape_to_tuple(S.M8xN32xK16_B1) == (8, 32, 16)
    assert info.types(S.M16xN16xK8_B1) == ((ST.float32, ST.float32),)
    assert info.entries[0].inType is info.entries[0].input_type  # Accera's names
    with pytest.raises(TypeError, match="shape: expected an acc.MMAShape"):
        info.supports(ST.float16, ST.float32, (16, 16, 16))
    with pytest.raises(TypeError, match="input_type: expected an acc.ScalarType"):
        info.supports("float17", ST.float32, shape)
    with pytest.raises(TypeError, match="expected TensorCoreEntry entries"):
        TensorCoreInfo(((S.M16xN16xK16_B1, ST.float16, ST.float32),))


def test_generic_opencl_model_has_the_specification_minimums():
    t = T(M.OPENCL)
    assert t.name == "OpenCL" and t.runtime is T.Runtime.OPENCL and t.is_gpu and t.device_arch == ""
    assert (t.num_cores, t.max_threads_per_block, t.max_block_size, t.warp_size) == (1, 1, (1, 1, 1), 1)
    assert t.max_shared_memory_per_block == t.max_static_shared_memory_per_block == 32 * KiB
    assert t.max_registers_per_block is None and t.opencl_device is None


def test_cpu_targets_have_no_gpu_facts_but_the_enums():
    for t in (T.HOST, T(M.AMD_EPYC_9654), T(M.GEMMINI)):
        assert not t.is_gpu and t.warp_size is None and t.max_threads_per_block is None
        assert t.max_block_size is None and t.device_arch is None and t.compute_capability is None
        assert t.GridUnit is GridUnit and t.MemorySpace is acc.MemorySpace


# -- lookups, overrides, equality -----------------------------------------------------------------

@pytest.mark.parametrize("name, model", [
    ("NVidia V100", M.NVIDIA_V100), ("nvidia-v100", M.NVIDIA_V100), ("V100", M.NVIDIA_V100),
    ("Tesla V100", M.NVIDIA_V100), ("A100", M.NVIDIA_A100), ("NVIDIA RTX A6000", M.NVIDIA_RTX_A6000),
    ("H100", M.NVIDIA_H100), ("AMD MI100", M.AMD_MI100), ("AMD Instinct MI100", M.AMD_MI100),
    ("mi200", M.AMD_MI200), ("Radeon VII", M.AMD_RADEON7), ("OpenCL", M.OPENCL),
])
def test_lookup_by_name(name, model):
    assert T(name) == T(model) == T(model=model) == T(model.name)


def test_model_members_are_accera_names():
    names = {m.name for m in M}
    assert {"NVIDIA_P100", "NVIDIA_V100", "NVIDIA_A100", "NVIDIA_RTX_A6000", "AMD_RADEON7", "AMD_MI50", "AMD_MI100",
            "AMD_MI200", "NVIDIA_H100", "OPENCL"} <= names
    assert M["NVidia A100"] is M.NVIDIA_A100 and str(M.AMD_MI100) == "AMD MI100"


def test_bad_names_are_refused_with_close_names():
    with pytest.raises(RuntimeError, match=r"no known device matches 'NVidia Z100'.*Close names: .*NVidia"):
        T("NVidia Z100")
    with pytest.raises(ValueError, match="ambiguous: it matches 'NVidia P100', 'NVidia V100'"):
        T("NVidia")


def test_overrides_keep_the_facts():
    a100 = T(M.NVIDIA_A100)
    x = T(M.NVIDIA_A100, name="x", num_threads=16)
    assert (x.name, x.num_threads, x.warp_size, x.device_arch) == ("x", 16, 32, "sm_80") and x != a100
    assert a100(name="x", num_threads=16) == x
    # extra= on a GPU replaces the facts it names, keeps the others
    small = T(M.NVIDIA_A100, extra={"max_shared_memory_per_block": 64 * KiB})
    assert small.max_shared_memory_per_block == 64 * KiB and small.warp_size == 32 and small != a100
    assert T(M.NVIDIA_A100, extra={"warp_size": 32}) == a100  # the same facts: the same target
    assert a100(extra={"note": "mine"}).get("note") == "mine" and a100(extra={"note": "mine"}).warp_size == 32
    # a device without tensor cores given a table
    p100 = T(M.NVIDIA_P100, tensor_core_info=a100.tensor_core_info)
    assert p100.tensor_core_info == a100.tensor_core_info and not T(M.NVIDIA_P100).tensor_core_info
    # another runtime the device has: OpenCL or Vulkan
    assert T(M.NVIDIA_A100, runtime=T.Runtime.OPENCL).runtime is T.Runtime.OPENCL
    assert T(M.AMD_MI100, runtime="VULKAN").runtime is T.Runtime.VULKAN


def test_generic_gpu_of_a_runtime():
    rocm = T(category=T.Category.GPU, runtime=T.Runtime.ROCM)  # Accera's tests write this
    assert rocm.is_gpu and rocm.runtime is T.Runtime.ROCM and rocm.max_threads_per_block == 1
    assert T(type=T.Category.GPU).runtime is T.Runtime.OPENCL
    named = T(name="Custom GPU processor", category=T.Category.GPU)  # Accera's reference page
    assert named.name == "Custom GPU processor" and named.is_gpu


def test_assignment_of_a_gpu_target():
    t = T(M.NVIDIA_V100)
    t.num_cores = 40
    assert t.num_cores == 40 and t.warp_size == 32
    with pytest.raises(ValueError, match="runtime: ROCM does not run on 'NVidia V100'"):
        t.runtime = "ROCM"
    with pytest.raises(AttributeError, match="no field 'warp_size'"):
        t.warp_size = 64


def test_refusals_name_what_is_wrong():
    with pytest.raises(ValueError, match=r"runtime: CUDA is a GPU runtime, and 'AMD EPYC 9654' is a CPU target.*"
                                         r"OPENMP"):
        T(M.AMD_EPYC_9654, runtime=T.Runtime.CUDA)  # a CPU model's facts are not a device's limits
    for rt in (T.Runtime.CUDA, T.Runtime.ROCM, T.Runtime.VULKAN, T.Runtime.OPENCL):
        with pytest.raises(ValueError, match=f"runtime: {rt.name} is a GPU runtime"):
            T(runtime=rt)
    with pytest.raises(ValueError, match="category: GPU targets are made from a GPU model; 'AMD EPYC 9654' is a CPU"):
        T(M.AMD_EPYC_9654, category=T.Category.GPU)
    with pytest.raises(ValueError, match="category: GPU targets are made from a GPU model"):
        T.HOST(category="GPU")
    with pytest.raises(ValueError, match="category: 'NVidia A100' is a GPU model, not a CPU"):
        T(M.NVIDIA_A100, category=T.Category.CPU)
    with pytest.raises(ValueError, match="runtime: OPENMP is not a GPU runtime, and 'NVidia A100' is a GPU"):
        T(M.NVIDIA_A100, runtime=T.Runtime.OPENMP)
    with pytest.raises(ValueError, match=r"runtime: CUDA does not run on 'AMD MI100' \(gfx908\)"):
        T(M.AMD_MI100, runtime=T.Runtime.CUDA)
    with pytest.raises(ValueError, match="extensions: 'NVidia A100' is a GPU"):
        T(M.NVIDIA_A100, extensions=["AVX2"])
    with pytest.raises(ValueError, match="tensor_core_info: only GPU targets have tensor cores"):
        T(M.AMD_EPYC_9654, tensor_core_info=T(M.NVIDIA_A100).tensor_core_info)
    with pytest.raises(TypeError, match="tensor_core_info: expected an accpy TensorCoreInfo"):
        T(M.NVIDIA_A100, tensor_core_info=object())
    with pytest.raises(ValueError, match=r"max_block_size: expected the threads per block along \(x, y, z\)"):
        T(M.NVIDIA_A100, extra={"max_block_size": (1024, 1024)})
    with pytest.raises(ValueError, match="warp_size: expected an integer >= 1, got 0"):
        T(M.NVIDIA_A100, extra={"warp_size": 0})
    with pytest.raises(ValueError, match="max_static_shared_memory_per_block: 98304 bytes is more than"):
        T(M.NVIDIA_A100, extra={"max_static_shared_memory_per_block": 96 * KiB,
                                "max_shared_memory_per_block": 64 * KiB})


def test_pickling_copies_and_hashing():
    for t in (T(M.NVIDIA_A100), T(M.AMD_MI100, name="mine"), T(M.OPENCL), T(category="GPU", runtime="CUDA")):
        back = pickle.loads(pickle.dumps(t))
        assert not back.sealed and copy.copy(t) == t  # a copy starts unsealed
        assert back == t and hash(back) == hash(t) and back.tensor_core_info == t.tensor_core_info
    assert len({T(M.NVIDIA_A100), T("A100"), T(M.NVIDIA_V100)}) == 2
    assert T(M.NVIDIA_A100).describe() == T("a100").describe() != T(M.NVIDIA_H100).describe()


# -- enums ---------------------------------------------------------------------------------------

def test_mma_shapes():
    assert [s.name for s in S] == ["M64xN64xK1_B4", "M64xN64xK1_B2", "M32xN32xK2_B1", "M16xN16xK4_B1", "M64xN64xK2_B4",
                                   "M64xN64xK2_B2", "M32xN32xK4_B1", "M16xN16xK8_B1", "M64xN64xK4_B4", "M64xN64xK4_B2",
                                   "M32xN32xK8_B1", "M16xN16xK16_B1", "M32xN8xK16_B1", "M8xN32xK16_B1"]
    assert (S.M64xN64xK1_B4.m, S.M64xN64xK1_B4.n, S.M64xN64xK1_B4.k, S.M64xN64xK1_B4.blocks) == (64, 64, 1, 4)
    assert S.M32xN8xK16_B1.shape == (32, 8, 16) and S.M8xN32xK16_B1.blocks == 1
    assert acc.MMAShape is MMAShape and pickle.loads(pickle.dumps(S.M16xN16xK16_B1)) is S.M16xN16xK16_B1


def test_grid_units_and_policies():
    assert [u.name for u in GridUnit] == ["BLOCK_X", "BLOCK_Y", "BLOCK_Z", "THREAD_X", "THREAD_Y", "THREAD_Z",
                                          "WARP_X", "WARP_Y"]
    u = T(M.NVIDIA_A100).GridUnit
    assert u.THREAD_Y.kind == "thread" and u.THREAD_Y.axis == 1 and u.THREAD_Y.is_thread
    assert u.BLOCK_Z.is_block and u.BLOCK_Z.axis == 2 and u.WARP_X.is_warp and u.WARP_X.axis == 0
    assert [p.name for p in acc.MMASchedulingPolicy] == ["PASS_ORDER", "BLOCK_ORDER"]
    assert acc.MMASchedulingPolicy is MMASchedulingPolicy
    assert T(M.NVIDIA_A100).MemorySpace.MMA_FRAGMENT is acc.MemorySpace.MMA_FRAGMENT
    assert {m.name for m in acc.MemorySpace} >= {"NONE", "GLOBAL", "SHARED", "PRIVATE", "MMA_FRAGMENT"}


def test_fragment_ops():
    import numpy as np

    assert acc.MMAFragmentOp is MMAFragmentOp
    assert [o.name for o in MMAFragmentOp] == ["NONE", "ReLU", "ReLU_NoConditional", "SET", "SCALE"]
    x = np.array([-2.0, 0.0, 3.0], dtype=np.float32)
    assert MMAFragmentOp.NONE.apply(x) is x
    np.testing.assert_array_equal(MMAFragmentOp.ReLU.apply(x), [0, 0, 3])
    np.testing.assert_array_equal(MMAFragmentOp.ReLU_NoConditional.apply(x), [0, 0, 3])
    np.testing.assert_array_equal(MMAFragmentOp.SET.apply(x, 0), [0, 0, 0])
    np.testing.assert_array_equal(MMAFragmentOp.SCALE.apply(x, 2), [-4, 0, 6])
    i8 = np.array([-5, 7], dtype=np.int8)
    assert MMAFragmentOp.ReLU.apply(i8).dtype == np.int8
    assert MMAFragmentOp.SCALE.needs_scalar and not MMAFragmentOp.ReLU.needs_scalar
    with pytest.raises(ValueError, match=r"MMAFragmentOp.SCALE: needs the scalar C \(f\(x\) = C \* x\)"):
        MMAFragmentOp.SCALE.apply(x)


# -- the installed OpenCL runtime ------------------------------------------------------------------

@pytest.mark.needs_opencl
def test_opencl_device_target_reads_the_device():
    t = opencl_device_target()
    facts = gm.read_opencl_device(0, 0)
    assert t == T(facts) and t.name == facts.name and t.name  # the device's own name
    assert t.is_gpu and t.runtime is T.Runtime.OPENCL and t.opencl_device == (0, 0)
    assert t.num_cores >= 1 and t.max_threads_per_block >= 1 and len(t.max_block_size) == 3
    assert t.max_shared_memory_per_block >= 32 * KiB  # the OpenCL specification's minimum
    assert all(1 <= s for s in t.max_block_size) and t.warp_size == 1
    assert pickle.loads(pickle.dumps(t)) == t
    with pytest.raises(OpenCLDeviceError, match=r"device: OpenCL platform 0 has \d+ device\(s\).*got 99"):
        opencl_device_target(device=99)
    with pytest.raises(OpenCLDeviceError, match=r"platform: the OpenCL runtime has \d+ platform\(s\).*got 7"):
        opencl_device_target(platform=7)


def test_opencl_device_target_without_a_runtime(monkeypatch):
    monkeypatch.setattr(gm, "OPENCL_LIBRARY", "libOpenCL-not-here.so.9")
    with pytest.raises(OpenCLDeviceError, match="no OpenCL runtime: libOpenCL-not-here.so.9 cannot be loaded"):
        opencl_device_target()
    assert issubclass(OpenCLDeviceError, RuntimeError)
