"""Accera's run-time packing of an array (`Plan.emit_runtime_init_pack`): not built in accpy;
the error says what to use instead."""
from __future__ import annotations


class RuntimePacking:
    """`Plan.emit_runtime_init_pack` (Accera's name), refused with the alternatives accpy builds."""

    def emit_runtime_init_pack(self, target, packing_func_name, packed_buf_size_func_name, indexing=None) -> None:
        """Accera emits a packing function, a packed-size function and a kernel that reads the packed
        array in place of `target`. accpy does not build that: NotImplementedError, naming the two
        ways accpy packs an array (a cache at run time, a DEFERRED constant at build time)."""
        name = getattr(target, "name", repr(target))
        for what, v in (("packing_func_name", packing_func_name), ("packed_buf_size_func_name",
                                                                   packed_buf_size_func_name)):
            if not isinstance(v, str) or not v:
                raise ValueError(f"{what}: expected the name of the function to emit, got {v!r}")
        raise NotImplementedError(
            f"emit_runtime_init_pack({name}, {packing_func_name!r}, {packed_buf_size_func_name!r}): accpy does "
            f"not emit separate packing functions. To pack {name} at run time inside the kernel, cache it: "
            f"plan.cache({name}, index=...) copies each block into the cache's layout (once per block, or for "
            f"the whole array at the outermost index); for constant data, make it "
            f"acc.Array(role=acc.Role.CONST, data=..., layout=acc.Array.Layout.DEFERRED) and call "
            f"{name}.deferred_layout(cache), which packs it when the package is built")
