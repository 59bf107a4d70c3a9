"""The target interface: everything `lower/`, `codegen/`, `plan/` and `package/` know of a target.

A target library describes one piece of hardware as data plus a few hooks, in six groups:

* memories and intrinsics (`memories`, `intrinsics`): a `Memory` says how big a target memory is
  and whether host code may touch it; an `Intrinsic` is a C template plus a reference body
  (numpy), and may write or read *configuration state* (hoisted by lower/config.py);
* the vector ISA `vectorize` emits (`vector_shape`, `vector_shape_of`, `supports_vector_op`);
* the tensor unit (`tensor_unit`: a `TensorUnit`, tensor_unit.py): its memories, placement and
  copies, tensor instructions, operand layouts and tile matching, which the generic passes
  lower/target_memory.py and lower/tensorize.py call;
* lowering passes of its own (`lowering_passes`: e.g. the call bracket around a kernel),
  inserted after a named generic pass;
* plan-time checks (`check_cache_location`);
* packaging: native units linked into a package that calls the library (`native_units`), C
  symbols it exports there (`package_exports`, `package_symbols`) and methods a loaded package
  gains (`runtime_methods`, e.g. a model's counters);
* the toolchain (`toolchain`): how code for a target is compiled, guarded and run (toolchain.py).

The vector ISA's dot products are data (`dot_products`: `DotProduct` rows, neutral operation x
element types -> the template of the instruction, in the library's own file).

A library is registered once (`register_library`); `Target.libraries` lists those that apply to
a target (`applies_to`). Every hook has a default meaning "this library does not do that", so a
library implements only its groups. accpy's libraries: the x86 vector ISA (targets/x86.py) and
Gemmini (targets/gemmini/). Adding a target: README "Adding a target".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..ir.expr import as_int
from ..ir.types import ScalarType


@dataclass(frozen=True)
class VectorISA:
    """One vector register shape (`lanes` x `dtype`) and the C templates of its operations.

    Templates use `{a}`, `{b}`, `{c}` (operands), `{p}` (address), `{m}` (lane mask), `{n}` (lane
    count), `{s}` (stride in elements). A dot product's operand of which every group holds only
    its first elements (the tail of a reduction that is no multiple of the group) is loaded with
    `mload` and the mask `group_mask` gives, or, for a shape without such masks, with the template
    `mload_groups` ({p}; {g} the group, {k} the elements read of each, {n} the active elements or
    -1 for all of them)."""

    name: str  # "avx512" | "avx2" | "neon" ...
    dtype: ScalarType
    lanes: int
    ctype: str
    ops: dict = field(hash=False, compare=False)
    features: tuple = ()  # cpu features the templates need
    extra: dict = field(default_factory=dict, hash=False, compare=False)  # gathers, scatters, products

    def template(self, op: str) -> Optional[str]:
        """The C template of `op`, or None when this shape has no instruction for it."""
        t = self.ops.get(op)
        return t if t is not None else self.extra.get(op)

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


@dataclass(frozen=True)
class Memory:
    """A target memory: `rows` rows of `row_elems` elements of `dtype` (addresses count rows)."""

    name: str  # the acc.MemorySpace value it implements (e.g. "scratchpad")
    rows: int
    row_elems: int
    dtype: ScalarType
    readable: bool = False  # CPU code may load/store it directly
    description: str = ""
    owner: str = ""  # the hardware it belongs to, for messages ("Gemmini")

    @property
    def bytes(self) -> int:
        """Size of the memory in bytes."""
        return self.rows * self.row_elems * self.dtype.bits // 8


@dataclass(frozen=True)
class Intrinsic:
    """One instruction: its parameters, C template, numpy reference body and effects.

    The loop IR calls it as `Evaluate(Call(name, args))`; the C emitter fills `template` with the
    arguments (`{name}` per parameter; a *pointer* parameter given as a `Load` is emitted as the
    element's address, a constant 0 as NULL). `config` names the configuration state a call
    writes (a format string over the parameters, e.g. "ld{id}")."""

    name: str
    params: tuple
    template: str
    reference: Optional[Callable] = field(default=None, compare=False)
    pointer_params: tuple = ()
    read_only: tuple = ()  # pointer parameters the call only reads through (the others may be written)
    config: Optional[str] = None  # configuration state written (format string over params)
    uses_config: tuple = ()  # configuration states read
    header: str = ""  # what the C needs (#include)
    doc: str = ""
    # the memory a call touches through a pointer parameter, for software prefetch: a function of
    # {param: IR argument} -> [(pointer param, rows, bytes between rows (IR expression), bytes per row)]
    footprint: Optional[Callable] = field(default=None, compare=False)

    def config_state(self, args) -> Optional[str]:
        """The configuration state a call with `args` writes (None: not a config write)."""
        if self.config is None:
            return None
        vals = {}
        for p, a in zip(self.params, args):
            v = as_int(a)
            vals[p] = v if v is not None else "?"
        return self.config.format(**vals)

    def c_call(self, arg_texts: dict) -> str:
        """The C text of one call, the template filled with the arguments' C texts."""
        return self.template.format(**arg_texts)


@dataclass(frozen=True)
class NativeUnit:
    """A C file of native/ compiled into every package that calls the library (e.g. a
    functional model): `source` and `headers` relative to native/ (`source` None: headers only),
    `include` the directory (relative to native/) kernels need on their include path, `defines`
    extra -D flags."""

    source: Optional[str]
    headers: tuple = ()
    include: str = ""
    defines: tuple = ()
    what: str = ""  # shown while compiling


@dataclass(frozen=True)
class LibraryPass:
    """A lowering pass a library adds: `run(stmt, request) -> stmt` (request: the LoweringRequest),
    placed right after the generic pass called `after` (accpy/lower/__init__.py), run only for
    functions that use the library."""

    name: str
    after: str
    run: Callable


class TargetLibrary:
    """Base of every target library; each hook's default says "not this library's business"."""

    name: str = ""
    memories: tuple = ()  # Memory
    intrinsics: tuple = ()  # Intrinsic

    def applies_to(self, target) -> bool:
        """Whether code for `target` may use this library."""
        return False

    # -- vector ISA ----------------------------------------------------------------------------------
    def vector_shape(self, target, dtype: ScalarType):
        """The widest vector register shape (an object with `name`, `dtype`, `lanes`, `ctype`,
        `template(op)`) `target` offers for `dtype`, or None."""
        return None

    def vector_shape_of(self, dtype: ScalarType, lanes: int, target=None):
        """The shape of `lanes` x `dtype` (operand-only shapes included) for codegen, or None;
        `target` (when known) picks among shapes of that many lanes (e.g. 16 x int16 in a 256-bit
        register, or widened to 32-bit lanes in a 512-bit one)."""
        return None

    def lane_shape(self, target, dtype: ScalarType, lanes: int):
        """The shape holding `lanes` values of `dtype` on `target` in one vector loop with another
        shape of that many lanes (its own, or a narrow type widened to wider lanes), or None."""
        return None

    def supports_vector_op(self, target, dtype: ScalarType, op: str) -> bool:
        """Whether `target` has the vector operation `op` (e.g. "madd16") on `dtype` lanes."""
        return False

    def dot_products(self, target=None) -> tuple:
        """The dot-product instructions (`DotProduct`) `target` has in this library (None: all of them)."""
        return ()

    def operand_group(self, target, dtype: ScalarType) -> Optional[int]:
        """Bytes per group of consecutive reduction values that this library's instructions read
        from an operand of `dtype` kept in the grouped layout (`Array.Layout.grouped()`), or None
        (none reads such groups). By default the largest group of its dot products (all of them,
        whatever `target` has, so that one plan lays a cache out alike on every model of the ISA)
        with a factor of `dtype`, and of its tensor unit's B operand (`TensorUnit.operand_layout`)."""
        sizes = [p.group * max(1, f.bits // 8) for p in self.dot_products(None) for f in p.factors if f is dtype]
        unit = self.tensor_unit(target)
        lay = unit.operand_layout("B", dtype) if unit is not None else None
        if lay is not None:
            sizes.append(lay.group_bytes)
        return max(sizes) if sizes else None

    def precompiled_header(self) -> Optional[str]:
        """C text worth precompiling for kernels with vector code (e.g. a large system header)."""
        return None

    def vector_prelude(self, target) -> str:
        """C a package with vector code for `target` needs before its kernels (headers, helpers), or ""."""
        return ""

    # -- tensor unit ---------------------------------------------------------------------------------
    def tensor_unit(self, target):
        """This library's `TensorUnit` (tensor_unit.py) on `target`: its memories, tensor instructions
        and tile matching, or None (it has neither)."""
        return None

    # -- lowering --------------------------------------------------------------------------------------
    def lowering_passes(self) -> tuple:
        """Passes of this library (LibraryPass), run for functions that use its tensor unit (a cache in
        its memories, or a tensorize request its unit matches)."""
        return ()

    # -- plan checks -----------------------------------------------------------------------------------
    def check_cache_location(self, target, location) -> None:
        """ValueError when `plan.cache(location=...)` names one of this library's memories that
        `target` lacks."""

    # -- packaging -------------------------------------------------------------------------------------
    def native_units(self) -> tuple:
        """NativeUnit files linked into a package that calls this library's intrinsics."""
        return ()

    def package_exports(self, pkg: str) -> str:
        """C definitions added to such a package (e.g. accessors of a model's counters)."""
        return ""

    def package_symbols(self, pkg: str) -> dict:
        """The global C symbols `package_exports` defines: {symbol: what it is}."""
        return {}

    def runtime_methods(self) -> dict:
        """Methods a loaded package gains: {name: function(loaded package) -> result}."""
        return {}

    # -- toolchain -------------------------------------------------------------------------------------
    def toolchain(self, target):
        """The `Toolchain` (toolchain.py) that builds code for `target`, when this library gives it, else None."""
        return None


# -- the registry --------------------------------------------------------------------------------------
_LIBRARIES: list = []
_INTRINSICS: dict = {}
_MEMORIES: dict = {}
_OWNER: dict = {}  # intrinsic name -> library


def register_library(lib: TargetLibrary) -> TargetLibrary:
    """Make a library, its memories and intrinsics known to lowering, codegen and packaging."""
    if not isinstance(lib, TargetLibrary):
        raise TypeError(f"register_library: expected a TargetLibrary, got {lib!r}")
    if lib not in _LIBRARIES:
        _LIBRARIES.append(lib)
    for m in lib.memories:
        _MEMORIES[m.name] = m
    for it in lib.intrinsics:
        _INTRINSICS[it.name] = it
        _OWNER[it.name] = lib
    return lib


def libraries() -> tuple:
    """Every registered library (the built-in ones register when accpy.targets is imported)."""
    return tuple(_LIBRARIES)


def libraries_for(target) -> tuple:
    """The libraries code for `target` may use, in registration order."""
    return tuple(lib for lib in _LIBRARIES if target is not None and lib.applies_to(target))


def intrinsic(name: str) -> Optional[Intrinsic]:
    """The registered intrinsic called `name`, or None."""
    return _INTRINSICS.get(name)


def library_of(name: str) -> Optional[TargetLibrary]:
    """The library that registered the intrinsic called `name`, or None."""
    return _OWNER.get(name)


def memory(name: str) -> Optional[Memory]:
    """The registered memory `name` (e.g. "scratchpad"), or None (host memory)."""
    return _MEMORIES.get(name)


def vector_shape(target, dtype: ScalarType):
    """The widest vector shape any of `target`'s libraries offers for `dtype`, or None."""
    for lib in libraries_for(target):
        s = lib.vector_shape(target, dtype)
        if s is not None:
            return s
    return None


def grouped_block(target, dtype: ScalarType) -> tuple:
    """(rows, columns) of the whole blocks grouped caches of `dtype` take on `target`: the largest
    B-operand block (`TensorUnit.operand_layout`) of its tensor units ((1, 1): none). The cache
    pads its rows with zeros up to whole blocks."""
    rows, cols = 1, 1
    for lib in libraries_for(target):
        unit = lib.tensor_unit(target)
        lay = unit.operand_layout("B", dtype) if unit is not None else None
        if lay is not None:
            rows, cols = max(rows, lay.block[0]), max(cols, lay.block[1])
    return rows, cols


def lane_shape(target, dtype: ScalarType, lanes: int):
    """The shape of `lanes` x `dtype` a vector loop of that many lanes uses on `target`, or None."""
    for lib in libraries_for(target):
        s = lib.lane_shape(target, dtype, lanes)
        if s is not None:
            return s
    return None


def has_vectors(target) -> bool:
    """Whether `target` has a vector ISA `vectorize` can emit (for some element type)."""
    return any(vector_shape(target, t) is not None for t in (ScalarType.float32, ScalarType.int32))


def supports_vector_op(target, dtype: ScalarType, op: str) -> bool:
    """Whether one of `target`'s libraries has the vector operation `op` on `dtype`."""
    return any(lib.supports_vector_op(target, dtype, op) for lib in libraries_for(target))


def vector_shape_of(dtype: ScalarType, lanes: int, target=None):
    """The registered vector shape of `lanes` x `dtype` (codegen's lookup), the one code for
    `target` uses when it is given; KeyError if none."""
    for lib in (libraries_for(target) if target is not None else ()) + tuple(_LIBRARIES):
        s = lib.vector_shape_of(dtype, lanes, target)
        if s is not None:
            return s
    raise KeyError(f"no vector instructions for {lanes} x {dtype.name}")


def dot_products(target) -> tuple:
    """The dot-product instructions of `target`'s libraries (`DotProduct`), in registration order."""
    out = []
    for lib in libraries_for(target):
        out.extend(lib.dot_products(target))
    return tuple(out)


def vector_prelude(target) -> str:
    """The C every library of `target` needs before kernels with vector code ("" for none)."""
    return "".join(lib.vector_prelude(target) for lib in libraries_for(target))


def all_dot_products() -> tuple:
    """Every registered library's dot-product instructions (whatever the target)."""
    return tuple(p for lib in _LIBRARIES for p in lib.dot_products(None))
