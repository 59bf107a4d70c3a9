"""schedules_tour: every example of Accera's "Schedules" chapter, built and checked.

    python samples/schedules_tour.py [--output-dir DIR] [--quiet]

The chapter works on a 3 x 12 x 15 matmul nest (C[i, j] += A[i, k] * B[k, j]) and on a
1-D convolution of a 10-element input with a 3-tap filter (C[i] += A[i + j] * B[j]).
For each example this script runs the transformation's code, checks the iteration-space
shape the chapter gives for it, prints the schedule as Python pseudo-code (`print(schedule)`,
with the guards that skip empty elements) and the lowered loops
(`schedule.to_python(unswitched=True)`: guards turned into separate loop pieces). Then all
the examples are built into ONE package (one function each, one gcc run), each function
is run on random int32 data and compared with numpy (exact equality), and a one-line
verdict per example is printed.

Exit status 0 when every example has the expected shape and matches numpy, 1 otherwise.
"""
from __future__ import annotations

import argparse
import math
import sys
import textwrap
from dataclasses import dataclass
from typing import Optional

from sample_support import OUTPUT_HELP, output_dir  # first: numpy's BLAS on one thread

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402

I32 = acc.ScalarType.int32


@dataclass
class Example:
    base_name: str       # the package function's base name
    title: str
    kernel: str          # "matmul" or "conv"
    code: str            # run with `schedule` and the nest's indices in scope
    shape: tuple         # the iteration-space shape the chapter gives
    note: str = ""
    schedule: Optional[acc.Schedule] = None


EXAMPLES = [
    Example("default_order", "the default schedule", "matmul",
            "", (3, 12, 15), "one loop per logical loop of the nest"),
    Example("reorder_jki", "reorder(j, k, i)", "matmul",
            "schedule.reorder(j, k, i)", (12, 15, 3), "a pivot of the iteration space"),
    Example("reorder_kij", "reorder with the order= keyword", "matmul",
            "schedule.reorder(order=(k, i, j))", (15, 3, 12), "the form used with parameters"),
    Example("split_j_3", "split(j, 3)", "matmul",
            "jj = schedule.split(j, 3)", (3, 4, 3, 15), "j keeps its name and becomes a strided loop"),
    Example("split_j_5", "split(j, 5): 5 does not divide 12", "matmul",
            "jj = schedule.split(j, 5)", (3, 3, 5, 15), "empty elements pad the last part; unswitching peels it"),
    Example("split_j_12", "split(j, 12): the full extent", "matmul",
            "jj = schedule.split(j, 12)", (3, 1, 12, 15), "meaningless: only renames j"),
    Example("split_j_13", "split(j, 13): more than the extent", "matmul",
            "jj = schedule.split(j, 13)", (3, 1, 13, 15), "empty elements, removed by code generation"),
    Example("split_j_1", "split(j, 1)", "matmul",
            "jj = schedule.split(j, 1)", (3, 12, 1, 15), "adds a meaningless dimension of size 1"),
    Example("split_j_3_2", "split(j, 3), then split the outer j by 2", "matmul",
            "jj = schedule.split(j, 3)\njjj = schedule.split(j, 2)", (3, 2, 2, 3, 15),
            "both the outer and the inner index can be split again"),
    Example("tile_j2_k3", "tile({j: 2, k: 3})", "matmul",
            "jj, kk = schedule.tile({j: 2, k: 3})", (3, 6, 2, 5, 3),
            "shorthand for split(j, 2); split(k, 3): order (i, j, jj, k, kk)"),
    Example("pad_i_2", "pad(i, 2)", "matmul",
            "schedule.pad(i, 2)", (5, 12, 15), "two empty elements at the front of i"),
    Example("pad_j_4_split_8", "pad(j, 4), then split(j, 8)", "matmul",
            "schedule.pad(j, 4)\njj = schedule.split(j, 8)", (3, 2, 8, 15),
            "padding moves the partial tile of j to the front"),
    Example("conv_default", "1-D convolution: the default schedule", "conv",
            "", (8, 3), "computes the outputs C[0], C[1], ... one by one"),
    Example("conv_skew", "skew(i, j)", "conv",
            "schedule.skew(i, j)", (10, 3),
            "reads the inputs A[0], A[1], ... one by one: triangle / rectangle / triangle"),
    Example("conv_skew_unroll", "skew(i, j, unroll_loops_smaller_than=3)", "conv",
            "schedule.skew(i, j, unroll_loops_smaller_than=3)", (10, 3),
            "the small loops of the triangles are unrolled"),
]


def matmul_nest():
    """The chapter's matmul nest: C[3, 12] += A[3, 15] @ B[15, 12]."""
    A = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(3, 15))
    B = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(15, 12))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(3, 12))
    nest = acc.Nest(shape=(3, 12, 15))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    return nest, (A, B, C), {"i": i, "j": j, "k": k}


def conv_nest(n=10, taps=3):
    """The chapter's convolution: a 10-element input, a 3-tap filter, 8 outputs."""
    m = n - taps + 1
    A = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(n,))
    B = acc.Array(role=acc.Role.INPUT, element_type=I32, shape=(taps,))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(m,))
    nest = acc.Nest(shape=(m, taps))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[i + j] * B[j]

    return nest, (A, B, C), {"i": i, "j": j}


def indent(text: str, by: str = "    ") -> str:
    return textwrap.indent(text, by)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    ap.add_argument("--quiet", action="store_true", help="print only the verdicts")
    ap.add_argument("--seed", type=int, default=0)
    opts = ap.parse_args(argv)
    say = (lambda *a: None) if opts.quiet else print

    kernels = {"matmul": matmul_nest(), "conv": conv_nest()}
    package = acc.Package()
    problems = {}
    for n, ex in enumerate(EXAMPLES, 1):
        nest, args, indices = kernels[ex.kernel]
        schedule = nest.create_schedule()
        exec(ex.code, {"schedule": schedule, **indices})
        ex.schedule = schedule
        shape = tuple(schedule.get_shape())
        iterations = math.prod(kernels[ex.kernel][0].create_schedule().get_shape())
        empty = math.prod(shape) - iterations
        if shape != ex.shape:
            problems[ex.base_name] = f"shape {shape}, but the chapter says {ex.shape}"

        say(f"\n{'=' * 78}\n{n}. {ex.title} -- {ex.note}")
        if ex.code:
            say(indent(ex.code, "    >>> "))
        order = ", ".join(ix.name for ix in schedule.get_indices())
        say(f"order ({order}), shape {shape}: {iterations} iterations"
            + (f" + {empty} empty elements" if empty else ""))
        say("print(schedule):")
        say(indent(str(schedule)))
        say("schedule.to_python(unswitched=True):")
        say(indent(schedule.to_python(unswitched=True)))
        package.add(schedule, args=args, base_name=ex.base_name)

    # one package, one gcc run; the pybind11 module is not needed here
    out = output_dir("schedules_tour", opts.output_dir)
    lib = package.build("schedules_tour", output_dir=out, python_module=False)
    t = lib.timings
    print(f"\nbuilt {len(EXAMPLES)} functions into one package in {t['total']:.2f} s "
          f"(one gcc run: {t['gcc']:.2f} s, build cache {'hit' if t['cache_hit'] else 'miss'}) "
          f"in {out}")

    rng = np.random.default_rng(opts.seed)
    failed = 0
    for ex in EXAMPLES:
        _, args, _ = kernels[ex.kernel]
        a, b, c = (rng.integers(-50, 50, size=arr.shape, dtype=np.int32) for arr in args)
        if ex.kernel == "matmul":
            expected = c + a @ b
        else:
            expected = c + np.correlate(a, b, mode="valid")
        getattr(lib, ex.base_name)(a, b, c)
        problem = problems.get(ex.base_name)
        if problem is None and not np.array_equal(c, expected):
            bad = np.argwhere(c != expected)
            first = tuple(int(x) for x in bad[0])
            problem = (f"C differs from numpy at {len(bad)} elements, first C{list(first)} = {c[first]}, "
                       f"numpy {expected[first]}")
        shape = tuple(ex.schedule.get_shape())
        if problem is None:
            print(f"ok    {ex.base_name:<18} shape {str(shape):<18} C == numpy")
        else:
            failed += 1
            print(f"FAIL  {ex.base_name:<18} shape {str(shape):<18} {problem}")
    print(f"\n{len(EXAMPLES) - failed} of {len(EXAMPLES)} examples match numpy"
          + ("" if not failed else f"; {failed} FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
