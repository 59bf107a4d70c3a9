"""Device arrays a Python caller passes to a GPU package's functions, for their device entries
(`<fn>_device`, package/launch.py): pyopencl arrays for the OpenCL entry (the package's library
runs on OpenCL), and objects with `__cuda_array_interface__` (cupy, numba, torch) for a CUDA
entry (the `.cu` unit's, which accpy does not load: the package loader refuses them, saying so).

Neither pyopencl nor a CUDA library is imported here: an array is recognised by its type's module
being loaded already (whoever made the array imported it) or by its interface attribute.
"""
from __future__ import annotations

import sys

import numpy as np

from ..grid import DeviceArrays, register_device_arrays


class OpenCLArrays(DeviceArrays):
    """pyopencl.array.Array: its buffer (`base_data`), offset, shape, byte strides, dtype, queue."""

    runtime = "OpenCL"
    what = "a pyopencl array"

    def owns(self, value) -> bool:
        module = sys.modules.get("pyopencl.array")
        return module is not None and isinstance(value, module.Array)

    def layout(self, value) -> tuple:
        return tuple(value.shape), tuple(value.strides), np.dtype(value.dtype), int(value.offset)

    def handles(self, arrays: dict, display: str) -> tuple:
        first_name, first = next(iter(arrays.items()))
        queue = first.queue
        for name, a in arrays.items():
            if a.queue is None:
                raise ValueError(f"{display}: argument {name} (a pyopencl array) has no queue to run the call on; "
                                 f"give it one (array.with_queue(queue))")
            if a.context.int_ptr != first.context.int_ptr:
                raise ValueError(f"{display}: argument {name} belongs to another OpenCL context than argument "
                                 f"{first_name}; the arrays of one call must share a context (and a queue)")
            if a.queue.int_ptr != queue.int_ptr:
                raise ValueError(f"{display}: argument {name} has another queue than argument {first_name}; the "
                                 f"call runs on one queue: give the arrays the same one (array.with_queue(queue))")
        buffers = {name: (a.base_data.int_ptr if a.base_data is not None else 0) for name, a in arrays.items()}
        return queue.int_ptr, buffers


class CudaArrays(DeviceArrays):
    """Objects with `__cuda_array_interface__` (version 2 or 3): shape, strides, typestr, data."""

    runtime = "CUDA"
    what = "a CUDA device array (__cuda_array_interface__)"

    def owns(self, value) -> bool:
        return hasattr(type(value), "__cuda_array_interface__") or hasattr(value, "__cuda_array_interface__")

    def layout(self, value) -> tuple:
        face = value.__cuda_array_interface__
        dtype = np.dtype(face["typestr"])
        shape = tuple(face["shape"])
        strides = face.get("strides")
        if strides is None:  # C-contiguous
            strides, step = [], dtype.itemsize
            for n in reversed(shape):
                strides.insert(0, step)
                step *= max(int(n), 1)
        return shape, tuple(strides), dtype, 0

    def handles(self, arrays: dict, display: str) -> tuple:
        streams = {a.__cuda_array_interface__.get("stream") for a in arrays.values()}
        streams.discard(None)
        if len(streams) > 1:
            raise ValueError(f"{display}: the CUDA arrays given name {len(streams)} different streams; the call "
                             f"runs on one")
        # (the interface's stream is the handle itself: 1 and 2 are CUDA's legacy and per-thread default streams)
        stream = streams.pop() if streams else 0
        return stream, {name: a.__cuda_array_interface__["data"][0] for name, a in arrays.items()}


OPENCL_ARRAYS = register_device_arrays(OpenCLArrays())
CUDA_ARRAYS = register_device_arrays(CudaArrays())
