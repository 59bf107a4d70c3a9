"""The target interface: everything `lower/`, `codegen/`, `plan/` and `package/` know of a target.

A target library describes one piece of hardware as data plus a few hooks, in six groups:

* memories and intrinsics (`memories`, `intrinsics`): a `Memory` says how big a target memory is
  and whether host code may touch it; an `Intrinsic` is a C template plus a reference body
  (numpy), and may write or read *configuration state* (hoisted by lower/config.py);
* the vector ISA `vectorize` emits (`vector_isa`: a `VectorISA`, vector_isa.py: register shapes
  with their templates, lanes, its dot products as data);
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

A library is registered once (`register_library`): the built-in ones by registry.py, in its order;
`Target.libraries` lists those that apply to a target (`applies_to`), and a target resolves its
vector ISA once (`Target.vector_isa`: the first of them that gives one). Every hook has a default
meaning "this library does not do that", so a library implements only its groups. Adding a
target: README "Adding a target".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..ir.expr import as_int
from ..ir.types import ScalarType
from .vector_isa import DotProduct, VectorISA, VectorShape  # noqa: F401  (the vector interface's types)


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
    functions that use the library (its tensor unit), or, `always`, for every function for a
    target the library applies to."""

    name: str
    after: str
    run: Callable
    always: bool = False


class TargetLibrary:
    """Base of every target library; each hook's default says "not this library's business"."""

    name: str = ""
    memories: tuple = ()  # Memory
    intrinsics: tuple = ()  # Intrinsic

    def applies_to(self, target) -> bool:
        """Whether code for `target` may use this library."""
        return False

    # -- vector ISA ----------------------------------------------------------------------------------
    def vector_isa(self, target) -> Optional[VectorISA]:
        """The `VectorISA` (vector_isa.py) code for `target` uses from this library, or None (no vector
        instructions). Asked once per target (`Target.vector_isa`)."""
        return None

    def dot_products(self, target=None) -> tuple:
        """The dot-product instructions (`DotProduct`) of this library's vector ISA: all of them (None),
        or those `target` has."""
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

    # -- tensor unit ---------------------------------------------------------------------------------
    def tensor_unit(self, target):
        """This library's `TensorUnit` (tensor_unit.py) on `target`: its memories, tensor instructions
        and tile matching, or None (it has neither)."""
        return None

    # -- grid ------------------------------------------------------------------------------------------
    def grid(self, target):
        """This library's `Grid` (grid.py) on `target`: the units loops bind to (`plan.bind`), or None."""
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

    def check_double_buffer(self, target, location) -> None:
        """ValueError when a cache in this library's memory `location` cannot be double-buffered
        (`plan.cache(..., double_buffer=True)`)."""

    # -- packaging -------------------------------------------------------------------------------------
    # -- automatic schedules (accpy/auto) ------------------------------------------------------------
    def schedule_recipes(self, kernel, target, threads: int) -> list:
        """Schedules this library proposes for `kernel` on `target` with up to `threads` threads (the
        cost model's per-target part: accpy/auto/library_recipes.py says the dicts' fields): e.g. a
        tensor unit's blocking for a contraction its instructions compute. `kernel` is read as data
        (its loops, accesses and contraction roles: accpy/auto/kernel.py)."""
        return []

    def native_units(self) -> tuple:
        """NativeUnit files linked into a package that calls this library's intrinsics."""
        return ()

    def package_exports(self, pkg: str) -> str:
        """C definitions added to such a package (e.g. accessors of a model's counters)."""
        return ""

    def package_symbols(self, pkg: str) -> dict:
        """The global C symbols `package_exports` defines: {symbol: what it is}."""
        return {}

    def companion_grids(self, target) -> tuple:
        """Grids whose units a package for `target` writes beside its C (e.g. its kernels in a
        second dialect, package/launch.py's `companion_units`), each checked by its grid's
        `check_unit` when the package is built."""
        return ()

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
    """Every registered library (the built-in ones by registry.py, when accpy.targets is imported)."""
    return tuple(_LIBRARIES)


def vector_isa_for(target) -> VectorISA:
    """The vector ISA of `target`: the first of its libraries' that gives one, else one without
    vectors (`Target.vector_isa` keeps it)."""
    for lib in libraries_for(target):
        isa = lib.vector_isa(target)
        if isa is not None:
            return isa
    return VectorISA(target)


def grid_for(target):
    """The `Grid` of `target`: the first of its libraries' that gives one, else None (no grid: `bind`
    is refused)."""
    for lib in libraries_for(target):
        g = lib.grid(target)
        if g is not None:
            return g
    return None


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


def all_dot_products() -> tuple:
    """Every registered library's dot-product instructions (whatever the target)."""
    return tuple(p for lib in _LIBRARIES for p in lib.dot_products(None))
