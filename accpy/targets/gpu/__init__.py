"""GPU targets: Accera's GPU enumerations (enums.py: GridUnit, MMAShape, MMASchedulingPolicy,
MMAFragmentOp, the MMA_FRAGMENT memory space) and GPU devices as data (models.py: Accera's CUDA and
ROCm models, NVIDIA's H100, a generic OpenCL device, tensor-core tables, the installed OpenCL
runtime's devices)."""
from .enums import MMA_FRAGMENT, GridUnit, MMAFragmentOp, MMASchedulingPolicy, MMAShape
from .models import (GPU_FACTS, GPU_MODELS, NO_TENSOR_CORES, GPUModel, OpenCLDeviceError, TensorCoreEntry,
                     TensorCoreInfo, read_opencl_device)

__all__ = ["GPU_FACTS", "GPU_MODELS", "GPUModel", "GridUnit", "MMAFragmentOp", "MMASchedulingPolicy", "MMAShape",
           "MMA_FRAGMENT", "NO_TENSOR_CORES", "OpenCLDeviceError", "TensorCoreEntry", "TensorCoreInfo",
           "read_opencl_device"]
