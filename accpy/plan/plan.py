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
        self._kinds: list = []  # (index handle, "unrolled" | "vectorized"), in request order

    @property
    def schedule(self):
        return self._schedule

    @property
    def target(self):
        return self._target

    def _kind_of(self, index):
        for ix, k in self._kinds:
            if ix is index:
                return k
        return None

    def _mark(self, index, kind):
        self._kinds = [(ix, k) for ix, k in self._kinds if ix is not index] + [(index, kind)]

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
        self._mark(index, "unrolled")

    def vectorize(self, index) -> None:
        """Run the loop of `index` on vector registers (AVX-512 16 x f32, AVX2 8 x f32, ...).

        Accesses must be contiguous along the index or not depend on it; the extent need
        not be a multiple of the vector width (the tail is masked). Inner loops must be
        unrolled. Checked when the package is built.
        """
        self._dim_var(index)
        if not self._target.has("avx2") and not self._target.has("avx512f"):
            raise RuntimeError(f"vectorize: target {self._target.name} has no vector instructions accpy can use")
        self._mark(index, "vectorized")

    def kernelize(self, unroll_indices, vectorize_indices=None) -> None:
        """Unroll each of `unroll_indices`, then vectorize `vectorize_indices` (default: the innermost index)."""
        if not isinstance(unroll_indices, (list, tuple)):
            raise TypeError("unroll_indices: expected a sequence of indices")
        if vectorize_indices is None:
            vectorize_indices = [self._schedule.space.dims[-1].index]
        elif not isinstance(vectorize_indices, (list, tuple)):
            vectorize_indices = [vectorize_indices]
        for v in vectorize_indices:
            if any(v is u for u in unroll_indices):
                raise ValueError(f"kernelize: {v.name} is both unrolled and vectorized")
        for u in unroll_indices:
            self._dim_var(u)
        for v in vectorize_indices:
            self._dim_var(v)
        for u in unroll_indices:
            self.unroll(u)
        for v in vectorize_indices:
            self.vectorize(v)

    def loop_annotations(self) -> dict:
        """Loop var -> kind, for the lowering passes."""
        return {self._dim_var(ix): k for ix, k in self._kinds}

    def emit_c(self, name: str = "kernel", args=None) -> str:
        """The C code this plan lowers to (for reading, not for building)."""
        from ..codegen.c import emit_function
        from ..lower import lower_function

        return emit_function(lower_function(self, name, args))
