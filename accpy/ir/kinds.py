"""The closed vocabularies of the loop IR: loop kinds, buffer roles and host memories (string
enums: each member equals its name in lower case, so printed IR and C read as before)."""
from __future__ import annotations

import enum


class LoopKind(enum.StrEnum):
    """How a `For` runs."""

    SERIAL = "serial"
    UNROLLED = "unrolled"  # one copy of the body per iteration
    VECTORIZED = "vectorized"  # lanes of vector registers (the vectorize pass rewrites it)
    SIMD = "simd"  # a vectorized loop the vectorizer left scalar: `#pragma omp simd`
    PARALLEL = "parallel"  # iterations shared between threads
    PARALLEL_INNER = "parallel_inner"  # a loop collapsed into the parallel loop around it
    BOUND = "bound"  # iterations run at once, one per unit of the target's grid (`plan.bind`)


class BufferRole(enum.StrEnum):
    """What a `Buffer` is to the function."""

    INPUT = "input"
    INPUT_OUTPUT = "input_output"
    OUTPUT = "output"
    CONST = "const"  # data known at build time
    TEMP = "temp"  # a temporary array of the logic, zeroed when allocated
    CACHE = "cache"  # a cache's local copy


class HostMemory(enum.StrEnum):
    """Where a host buffer lives (a target library's memories have names of their own)."""

    GLOBAL = "global"  # arguments and constants
    LOCAL = "local"  # on the stack
    HEAP = "heap"  # allocated when its scope starts
    SHARED = "shared"  # shared by the units of a grid's block (device code), filled by them together


# an unrolled loop nest may emit at most this many copies of its body
MAX_UNROLLED_COPIES = 4096
