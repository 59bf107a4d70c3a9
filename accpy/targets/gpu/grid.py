"""A GPU's grid: blocks (BLOCK_X/Y/Z) of threads (THREAD_X/Y/Z) or of warps (WARP_X/Y: 32 threads
each, for tensorized plans), checked against the target's
limits (threads per block, block dimensions, grid dimensions), its kernels written in OpenCL C and
launched through the OpenCL runtime (accpy/targets/gpu/dialects.py)."""
from __future__ import annotations

from ..grid import Grid, Unit, check_limit
from .dialects import OPENCL_C, OPENCL_RUNTIME

WARP_LANES = 32  # threads of a warp (the tensor-core fragments' lanes)
# CUDA's grid dimensions (x: 2^31 - 1 blocks, y and z: 65535), also within OpenCL's
_GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)


class GpuGrid(Grid):
    """The grid of a GPU target `target`."""

    # a warp (WARP_X, WARP_Y: tensorized plans, accpy/targets/gpu/tensor.py) is WARP_LANES threads
    # along x: a block of Wx x Wy warps has 32 * Wx x Wy threads
    units = {**{f"{lv}_{ax}": Unit(f"{lv}_{ax}", lv.lower(), k)
                for lv in ("BLOCK", "THREAD") for k, ax in enumerate("XYZ")},
             "WARP_X": Unit("WARP_X", "thread", 0), "WARP_Y": Unit("WARP_Y", "thread", 1)}
    levels = ("block", "thread")
    dialect = OPENCL_C
    runtime = OPENCL_RUNTIME

    def check(self, target, bound: dict) -> None:
        limits = self.launch_limits(target)
        kinds = {name.split("_")[0] for name in bound} & {"THREAD", "WARP"}
        if len(kinds) > 1:
            raise ValueError(f"bind: {', '.join(n for n in bound if not n.startswith('BLOCK'))}: a block's threads "
                             f"are bound loops (THREAD_*) or warps of a tensorized plan (WARP_*), not both")
        per_block = 1
        for name, n in bound.items():
            u = self.units[name]
            if u.level == "thread":
                n = WARP_LANES * n if name == "WARP_X" and n is not None else n
                check_limit(f"bind: {name} would take", n, limits["max_block_size"][u.axis], target,
                            f"max_block_size[{u.axis}]: threads along {name[-1]}")
                per_block = None if per_block is None or n is None else per_block * n
            else:
                check_limit(f"bind: {name} would take", n, _GRID_LIMITS[u.axis], target,
                            f"blocks along {name[-1]}")
        check_limit("bind: one block would have threads:", per_block, limits["max_threads_per_block"], target,
                    "max_threads_per_block")

    def has_atomic(self, op: str, dtype) -> bool:
        # OpenCL C 1.2 and CUDA: 32-bit integer add / max / min, and float add (CUDA's atomicAdd; in
        # OpenCL a compare-and-swap loop, native/gpu/accpy_device.h)
        name = getattr(dtype, "name", dtype)
        return (op == "add" and name in ("int32", "uint32", "float32")) or \
            (op in ("max", "min") and name in ("int32", "uint32"))

    def unit_threads(self, name: str) -> int:
        return WARP_LANES if name == "WARP_X" else 1  # a warp along x is WARP_LANES threads

    def check_shared_memory(self, target, arrays: dict) -> None:
        total = sum(arrays.values())
        what = ", ".join(f"{n}: {b} bytes" for n, b in arrays.items())
        check_limit(f"shared memory: the caches of one block ({what}) take", total,
                    self.launch_limits(target)["max_shared_memory_per_block"], target,
                    "static shared memory per block; cache smaller blocks")

    def launch_limits(self, target) -> dict:
        return {"max_threads_per_block": getattr(target, "max_threads_per_block", None) or 1024,
                "max_block_size": tuple(getattr(target, "max_block_size", None) or (1024, 1024, 64)),
                # kernels declare their shared arrays statically: the static limit applies
                "max_shared_memory_per_block": getattr(target, "max_static_shared_memory_per_block", None)
                or getattr(target, "max_shared_memory_per_block", None),
                "warp_size": getattr(target, "warp_size", None)}
