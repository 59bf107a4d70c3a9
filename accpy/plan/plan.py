"""`Plan`: how a schedule runs on a target. Annotations only; lowering applies them."""
from __future__ import annotations

from ..nest.logic import Index


class Plan:
    def __init__(self, schedule, target=None):
        from ..targets import Target

        if target is None:
            target = Target.HOST
        self._schedule = schedule
        self._target = target
        self._unrolled: list = []  # index handles to unroll fully

    @property
    def schedule(self):
        return self._schedule

    @property
    def target(self):
        return self._target

    @property
    def unrolled(self) -> tuple:
        return tuple(self._unrolled)

    def _dim_var(self, index, what="index"):
        if not isinstance(index, Index):
            raise TypeError(f"{what}: expected an index of the schedule, got {type(index).__name__} {index!r}")
        k = self._schedule.space.position(index)
        if k is None:
            raise ValueError("Unknown index!")
        return self._schedule.space.dims[k].var

    def unroll(self, index) -> None:
        """Fully unroll the loop of `index` (its trip counts must be compile-time constants)."""
        self._dim_var(index)
        if not any(index is u for u in self._unrolled):
            self._unrolled.append(index)

    def loop_annotations(self) -> dict:
        """Loop var -> kind, for the lowering passes."""
        return {self._dim_var(ix): "unrolled" for ix in self._unrolled}

    def emit_c(self, name: str = "kernel", args=None) -> str:
        """The C code this plan lowers to (for reading, not for building)."""
        from ..codegen.c import emit_function
        from ..lower import lower_function

        return emit_function(lower_function(self, name, args))
