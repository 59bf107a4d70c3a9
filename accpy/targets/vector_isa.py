"""The vector-ISA interface: what `vectorize` and the C emitter know of a target's vector instructions.

A target resolves one `VectorISA` (`Target.vector_isa`, from the first of its libraries whose
`TargetLibrary.vector_isa(target)` gives one; a target without any gets `VectorISA(target)`, which
has no vectors). It answers, for an element type:

* `shape(dtype)`: the widest register shape (`VectorShape`: lanes, C type, the C template of every
  operation: loads and stores, masks or predicates and the masked forms, arithmetic, FMA,
  compares and selects, horizontal reductions, conversions, gathers and scatters);
* `lane_shape(dtype, lanes)`: a shape of as many lanes as another one, for loops mixing types
  (e.g. a narrow integer widened to 32-bit lanes next to int32 ones);
* `shape_of(dtype, lanes)`: the C emitter's lookup, operand-only shapes included (e.g. the
  bfloat16 pairs of a dot product);
* `supports(dtype, op)`: whether an operation has an instruction;
* `dot_products()`: its dot-product instructions as data (`DotProduct` rows, kept in the
  library's own file), those this target has;
* `prelude()`: C a package with its vector code needs before the kernels.

Lanes are counted for the register length the code is compiled for. A scalable ISA (SVE) says so
in its shapes (`VectorShape.scalable`: the C expression of the lane count at run time, e.g.
`svcntw()`); lowering uses the compiled length today, and the toolchain guards it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..ir.types import ScalarType


@dataclass(frozen=True)
class VectorShape:
    """One vector register shape (`lanes` x `dtype`) and the C templates of its operations.

    Templates use `{a}`, `{b}`, `{c}` (operands), `{p}` (address), `{m}` (lane mask or predicate),
    `{n}` (lane count), `{s}` (stride in elements). A dot product's operand of which every group
    holds only its first elements (the tail of a reduction that is no multiple of the group) is
    loaded with `mload` and the mask `group_mask` gives, or, for a shape without such masks, with
    the template `mload_groups` ({p}; {g} the group, {k} the elements read of each, {n} the active
    elements or -1 for all of them). `scalable`: for a register whose length is known only at run
    time, the C expression of its lane count there (SVE's `svcntw()`), else ""; `lanes` is then
    the count at the length the code is compiled for."""

    name: str  # "avx512" | "avx2" | "neon" | "sve" ...
    dtype: ScalarType
    lanes: int
    ctype: str
    ops: dict = field(hash=False, compare=False)
    features: tuple = ()  # cpu features the templates need
    extra: dict = field(default_factory=dict, hash=False, compare=False)  # gathers, scatters, products
    scalable: str = ""

    def template(self, op: str) -> Optional[str]:
        """The C template of `op`, or None when this shape has no instruction for it."""
        t = self.ops.get(op)
        return t if t is not None else self.extra.get(op)

    def has(self, op: str) -> bool:
        """Whether this shape has an instruction (a template) for `op`."""
        return self.template(op) is not None

    @property
    def mask_expr(self) -> str:
        """C for the mask of the first {n} lanes (n in 0..lanes)."""
        return self.ops["mask"]

    def group_mask(self, lanes: int, group: int, part: int, count_mask: Optional[str]) -> Optional[str]:
        """C of the `mload` mask of the first `part` elements of every `group` of `lanes` (and of the
        active elements only, `count_mask` being their mask, when not None); None: this shape has
        no such masks (`mload_groups` instead)."""
        return None


@dataclass(frozen=True)
class DotProduct:
    """A dot-product instruction of a vector ISA, as data: per lane of the `acc` shape, the sum of
    `group` products of adjacent elements of the two operands (element types `factors`, in the
    instruction's operand order), added into the accumulator by the instruction itself
    (`accumulates`) or by a separate add. `op` names the template of the accumulator's shape
    ({c} + dot({a}, {b}) when accumulating, else dot({a}, {b})); `moves`: how many elements an
    operand may move per lane (`group`: a group per lane; 0: one group repeated in every lane)."""

    op: str
    group: int
    acc: ScalarType
    factors: tuple
    accumulates: bool
    moves: tuple


class VectorISA:
    """The vector instructions code for one target may use; this base has none (a target without
    vectors). A library's ISA overrides `shape`, and where it has them `lane_shape`, `shape_of`,
    `supports`, `dot_products` and `prelude`. `target` is the target it was resolved for."""

    name: str = ""  # for messages ("x86 vector", "AArch64 Neon")

    def __init__(self, target=None):
        self.target = target

    def shape(self, dtype: ScalarType) -> Optional[VectorShape]:
        """The widest register shape of `dtype` lanes, or None."""
        return None

    def lane_shape(self, dtype: ScalarType, lanes: int) -> Optional[VectorShape]:
        """The shape holding `lanes` values of `dtype` in one vector loop with another shape of that
        many lanes (by default the widest one, when it has that many lanes), or None."""
        s = self.shape(dtype)
        return s if s is not None and s.lanes == lanes else None

    def shape_of(self, dtype: ScalarType, lanes: int) -> Optional[VectorShape]:
        """The shape of `lanes` x `dtype` the C emitter fills templates of (operand-only shapes
        included), or None."""
        return self.lane_shape(dtype, lanes)

    def supports(self, dtype: ScalarType, op: str) -> bool:
        """Whether the operation `op` (an IR vector operation, or a dot product's) has an
        instruction for `dtype` lanes."""
        s = self.shape(dtype)
        return s is not None and s.has(op)

    def dot_products(self) -> tuple:
        """The dot-product instructions (`DotProduct`) this target has."""
        return ()

    def prelude(self) -> str:
        """C a package with vector code for this target needs before its kernels (headers, helpers)."""
        return ""

    # -- derived ---------------------------------------------------------------------------------------
    def lanes(self, dtype: ScalarType) -> int:
        """Lanes of the widest shape of `dtype` (0: no vectors of it)."""
        s = self.shape(dtype)
        return s.lanes if s is not None else 0

    def scalable(self, dtype: ScalarType) -> bool:
        """Whether the registers of `dtype` lanes have a length known only at run time (SVE)."""
        s = self.shape(dtype)
        return s is not None and bool(s.scalable)

    def has_fma(self, dtype: ScalarType) -> bool:
        """Whether a product added to an accumulator is one fused instruction on `dtype` lanes."""
        return self.supports(dtype, "fma")

    @property
    def has_vectors(self) -> bool:
        """Whether `vectorize` can emit code for this ISA (it has float32 or int32 lanes)."""
        return any(self.shape(t) is not None for t in (ScalarType.float32, ScalarType.int32))

    def __repr__(self) -> str:
        return f"<accpy vector ISA: {self.name or 'none'}>"
