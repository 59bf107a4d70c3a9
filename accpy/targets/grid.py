"""The grid interface: how a target runs loops at once, one iteration per unit of hardware
(`plan.bind`). A target library that has a grid gives a `Grid` (`TargetLibrary.grid`); a target
without one (a CPU: its parallel loops are `parallelize`'s) refuses `bind`.

A grid has units at levels (outermost first, e.g. blocks, then threads within a block), each
unit along an axis; a binding maps one loop, or several flattened into one, to a unit. The grid
checks what a plan binds against the target's limits (`check`), so that `plan.bind` and the
build refuse, naming the limit, what the device could not launch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import LimitError


# calls in device code that the device emitter prints in the target's dialect
BARRIER = "grid.barrier"  # wait for the block's threads; their shared-memory writes are seen
UNIT_ID = "grid.unit."  # + a unit's name (e.g. "THREAD_X"): this thread's index along that unit
ATOMIC = "grid.atomic_"  # + an operator ("add"): update the element (a Load: its address) atomically


@dataclass(frozen=True)
class Unit:
    """One unit of a grid: `name` (as the target's enum spells it, e.g. "THREAD_X"), its `level`
    (e.g. "block", "thread"), and `axis` (0: x, 1: y, 2: z)."""

    name: str
    level: str
    axis: int


class Grid:
    """A target's grid: its units and limits, the dialect its device code is written in and the
    host runtime that launches it. A library's grid adds its limits (`check`)."""

    #: the grid's units by name
    units: dict = {}
    #: the device code's dialect (Dialect) and the host runtime that runs it (DeviceRuntime)
    dialect = None
    runtime = None
    #: the levels, outermost first (a loop bound to an outer level may not sit inside one bound
    #: to an inner level)
    levels: tuple = ()

    def unit(self, value) -> Unit:
        """The unit `value` names (a member of the target's unit enum, or its name); ValueError
        naming the units otherwise."""
        name = getattr(value, "name", value)
        if not isinstance(name, str) or name not in self.units:
            raise ValueError(f"bind: {value!r} is not a unit of this target's grid; expected one of "
                             f"{', '.join(self.units)} (target.GridUnit.<name>)")
        return self.units[name]

    def check(self, target, bound: dict) -> None:
        """LimitError when the units bound (`bound`: unit name -> the number of its units the
        plan needs, an int, or None when it depends on runtime sizes) exceed `target`'s limits."""

    def unit_threads(self, name: str) -> int:
        """Threads of the launch one unit `name` takes (e.g. a warp along x: its lanes); 1 by default."""
        return 1

    def _by_axis(self, counts: dict) -> tuple:
        """(outer, inner): per axis, [(threads per unit, count)] of the bound units at the outer levels
        (blocks) and at the innermost one (threads)."""
        outer, inner = [[], [], []], [[], [], []]
        for name, n in counts.items():
            u = self.units[name]
            (inner if u.level == self.levels[-1] else outer)[u.axis].append((self.unit_threads(name), n))
        return outer, inner

    def launch_sizes(self, counts: dict) -> tuple:
        """(global[3], local[3]) C texts of a launch: `counts` maps each bound unit to the C text of
        the number of its units; per axis, `local` is the product over the innermost level's units
        (threads per block), `global` the product over all levels when the runtime counts threads
        (`DeviceRuntime.grid_total`), else over the outer levels (blocks)."""
        outer, inner = self._by_axis(counts)
        total = self.runtime is None or self.runtime.grid_total

        def text(parts):
            return " * ".join(f"{k} * ({c})" if k > 1 else f"({c})" for k, c in parts) or "1"

        return (tuple(text(o + (i if total else [])) for o, i in zip(outer, inner)),
                tuple(text(i) for i in inner))

    def has_atomic(self, op: str, dtype) -> bool:
        """Whether the grid's units can update one element together with reduction `op` ("add",
        "max", ...) on `dtype` (atomically)."""
        return False

    def check_shared_memory(self, target, arrays: dict) -> None:
        """LimitError when the shared arrays of one kernel (`arrays`: name -> bytes) do not fit in
        a block's shared memory on `target`."""

    def launch_dims(self, counts: dict) -> tuple:
        """(blocks per axis, threads per block per axis) of a launch, as Accera's HAT records them
        ([gx, gy, gz], [bx, by, bz]); `counts` maps each bound unit to the number of its units (an
        int, or None when it depends on runtime sizes: then that axis is None)."""
        def product(parts):
            out = 1
            for k, n in parts:
                out = None if n is None or out is None else out * k * n
            return out

        outer, inner = self._by_axis(counts)
        return tuple(map(product, outer)), tuple(map(product, inner))

    def launch_limits(self, target) -> Optional[dict]:
        """The limits `check` applies, for messages and the package's record (None: no limits)."""
        return None


def check_limit(what: str, need: Optional[int], limit: Optional[int], target, name: str) -> None:
    """LimitError when `need` (known) exceeds `limit` (known): "`what` `need`, more than the `limit`
    <target> allows (`name`)", `what` saying what asked for it."""
    if need is not None and limit is not None and need > limit:
        raise LimitError(f"{what} {need}, more than the {limit} {target.name} allows ({name})")


@dataclass(frozen=True)
class Dialect:
    """How device code for a grid is written (data the device emitter, codegen/device.py, reads):
    `prelude` starts every device source (native files are inlined); `kernel` is the text before a
    kernel's name; `global_ptr` / `const_global_ptr` qualify pointer parameters; `unit_ids` gives
    the C expression of each unit's index (e.g. "THREAD_X" -> the thread's x index);
    `shared_array` qualifies an array every thread of a block shares; `barrier` waits for the
    block's threads (and makes their shared-memory writes seen); `suffix` names the source file."""

    name: str
    prelude: str
    kernel: str
    global_ptr: str
    const_global_ptr: str
    restrict: str
    unit_ids: tuple  # (unit name, C expression)
    shared_array: str
    barrier: str
    suffix: str
    atomics: tuple = ()  # ((operator, element type name), C template over {ptr} and {value})
    headers: tuple = ()  # ((an intrinsic's #include line, this dialect's native file), ...)

    def unit_id(self, unit: str) -> str:
        """The C expression of `unit`'s index."""
        return dict(self.unit_ids)[unit]

    def header(self, include: str):
        """The native file (relative to native/) that this dialect's kernels inline for the #include
        line an intrinsic needs (`Intrinsic.header`), or None: the line stays as it is."""
        return dict(self.headers).get(include)

    def atomic(self, op: str, dtype_name: str):
        """The C template of an atomic `op` on `dtype_name` elements, or None."""
        return dict(self.atomics).get((op, dtype_name))


@dataclass(frozen=True)
class DeviceRuntime:
    """The host calls that run a kernel (names of C functions in the runtime `header`, a file of
    native/ inlined into the package): `kernel_get(source, name, options) -> handle` (NULL: error
    set), `alloc(bytes)`, `write(buf, host, bytes)`, `read(buf, host, bytes)`, `free(buf)`,
    `set_arg(handle, index, size, value*)` and `launch(handle, dims, global[3], local[3])`
    (nonzero: error set); `handle_type` is the C type of a kernel handle; `grid_total`: whether
    the launch takes the total number of threads per axis (True) or of blocks (False).

    A runtime that builds kernels at run time may build a package's kernels as one program:
    `source_type` is the C struct of one kernel's registered source ({prelude, text, kernel
    name}), `register(&source)` adds it to the package's program (from a constructor, when the
    library is loaded), `package_kernel(name) -> handle` gets a kernel of that program (built once
    per process for all the package's kernels). Without them each kernel is its own program
    (`kernel_get`).

    The device entry `<fn>_device(queue, buffers..., sizes and scalars...)` runs a function on
    the caller's queue and device buffers, without copies: `name` names the runtime (the .hat
    records it, and Python finds the `DeviceArrays` of the same name), `queue_type` and
    `buffer_type` are the C types of the caller's queue and buffers. A runtime building at run
    time gives `queue_kernel(queue, name) -> handle` (the program built for the queue's context and
    device), `check_buffer(queue, buf, bytes, fn, what)` and `queue_launch(handle, queue, dims,
    global[3], local[3])` (nonzero: error set); a runtime compiled with its launchers gives
    `device_launch_template` and `device_launched` (as its launch_template and launched, with one
    more key: `queue`). A runtime without them has no device entry."""

    header: str
    handle_type: str
    kernel_get: str
    alloc: str
    write: str
    read: str
    free: str
    set_arg: str
    launch: str
    grid_total: bool = True
    source_type: str = ""
    register: str = ""
    package_kernel: str = ""
    name: str = ""
    queue_type: str = ""
    buffer_type: str = ""
    header_types: str = ""  # C a header needs before declaring device entries (e.g. incomplete structs)
    queue_kernel: str = ""
    check_buffer: str = ""
    queue_launch: str = ""
    device_launch_template: str = ""
    device_launched: str = ""

    @property
    def has_device_entry(self) -> bool:
        """Whether functions launched through this runtime get a device entry."""
        return bool(self.name and self.queue_type and (self.queue_kernel or self.device_launch_template))


class DeviceArrays:
    """How Python hands one kind of device array (a library's array type) to the device entries of
    the runtime named `runtime` (DeviceRuntime.name): `owns` recognises such an array; `layout`
    gives its (shape, strides in bytes, numpy dtype, byte offset); `handles` checks that the arrays
    of one call can be used together and gives the C values of the queue and of each buffer.
    `what` says what the arrays are, in messages."""

    runtime: str = ""
    what: str = ""

    def owns(self, value) -> bool:
        """Whether `value` is an array of this kind."""
        return False

    def layout(self, value) -> tuple:
        """(shape, strides in bytes, numpy dtype, byte offset from its buffer's start) of `value`."""
        raise NotImplementedError

    def handles(self, arrays: dict, display: str) -> tuple:
        """(queue, {argument name: buffer}) as integers (C pointers) for `arrays` ({argument name:
        array}); TypeError or ValueError naming the argument when they cannot be used together."""
        raise NotImplementedError


_DEVICE_ARRAYS: list = []


def register_device_arrays(kind: DeviceArrays) -> DeviceArrays:
    """Make a kind of device array known to the package loader (once)."""
    if not isinstance(kind, DeviceArrays):
        raise TypeError(f"register_device_arrays: expected a DeviceArrays, got {kind!r}")
    if kind not in _DEVICE_ARRAYS:
        _DEVICE_ARRAYS.append(kind)
    return kind


def device_arrays() -> tuple:
    """Every registered kind of device array."""
    return tuple(_DEVICE_ARRAYS)
