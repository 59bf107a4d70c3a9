"""conv1d_skew: a 1-D convolution scheduled with skew, split and reorder.

    python samples/conv1d_skew.py [--output-dir DIR] [--n 1000] [--taps 9] [--split 8]

The nest computes C[i] += A[i + j] * B[j] for i < N - K + 1, j < K (numpy's
`np.correlate(a, b, "valid")`, i.e. `np.convolve(a, b[::-1], "valid")`).

  1. skew(i, j): the element (i, j) moves to (i + j, j), so the outer loop walks the
     *inputs* A[0], A[1], ... (the skewed space is N x K, with empty elements in two
     corners). Lowering splits it into a triangle (the first K - 1 inputs feed fewer than
     K outputs), a rectangle (full work) and an upside-down triangle;
  2. split the skewed index by S and reorder to (i, j, ii): for each block of S inputs,
     each tap j runs over S consecutive inputs and outputs (unit stride, vectorizable).
     With S dividing K - 1 and N, the triangles are whole blocks, and the lowered loops
     are again triangle / rectangle / triangle, without a single guard.

Both schedules (and the default one) are built into one package and checked against
numpy. Exit status 0 when every result matches, 1 otherwise.
"""
from __future__ import annotations

import argparse
import re
import sys
import textwrap
import time

from sample_support import OUTPUT_HELP, output_dir  # first: numpy's BLAS on one thread

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402


def define(n: int, taps: int):
    m = n - taps + 1
    A = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(n,))
    B = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(taps,))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(m,))
    nest = acc.Nest(shape=(m, taps))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += A[i + j] * B[j]

    return nest, (A, B, C), (i, j)


def top_level_pieces(code: str) -> list:
    """Split lowered code into its top-level statements (the pieces unswitching made)."""
    pieces = []
    for line in code.splitlines():
        if not line.startswith(" ") or not pieces:
            pieces.append([line])
        else:
            pieces[-1].append(line)
    return ["\n".join(p) for p in pieces]


def describe_piece(piece: str) -> str:
    """'rectangle' when every loop bound is a constant, 'triangle' when one follows an outer index."""
    bounds = re.findall(r"range\(([^)]*)\)", piece)
    if not bounds:
        return "statements"
    varying = any(re.search(r"[A-Za-z_]", b) for b in bounds)
    return "triangle" if varying else "rectangle"


def show_lowered(schedule) -> int:
    """Print the lowered loops, each top-level piece labelled; returns the number of guards."""
    code = schedule.to_python(unswitched=True)
    for piece in top_level_pieces(code):
        print(f"    # {describe_piece(piece)}")
        print(textwrap.indent(piece, "    "))
    return len(re.findall(r"^\s*if ", code, flags=re.M))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    ap.add_argument("--n", type=int, default=1000, help="input length N")
    ap.add_argument("--taps", type=int, default=9, help="filter length K")
    ap.add_argument("--split", type=int, default=8, help="split size S of the skewed index")
    ap.add_argument("--seed", type=int, default=0)
    opts = ap.parse_args(argv)
    n, taps, split = opts.n, opts.taps, opts.split
    m = n - taps + 1
    if m < 1:
        ap.error("--taps must not exceed --n")

    nest, args, (i, j) = define(n, taps)
    print(f"1-D convolution: C[{m}] += A[{n}] (*) B[{taps}], float32")

    skewed = nest.create_schedule()
    skewed.skew(i, j)
    print(f"\n== skew(i, j): {skewed!r}")
    print(textwrap.indent(str(skewed), "    "))
    print("lowered (to_python(unswitched=True)):")
    guards_skew = show_lowered(skewed)

    blocked = nest.create_schedule()
    blocked.skew(i, j)
    ii = blocked.split(i, split)
    blocked.reorder(i, j, ii)
    print(f"\n== skew(i, j); ii = split(i, {split}); reorder(i, j, ii): {blocked!r}")
    print(textwrap.indent(str(blocked), "    "))
    print("lowered (to_python(unswitched=True)):")
    guards_blocked = show_lowered(blocked)
    print(f"\nguards left in the lowered loops: skew {guards_skew}, skew + split + reorder {guards_blocked}")

    package = acc.Package()
    package.add(nest.create_schedule(), args=args, base_name="conv_default")
    package.add(skewed, args=args, base_name="conv_skew")
    package.add(blocked, args=args, base_name="conv_skew_blocked")
    out = output_dir("conv1d_skew", opts.output_dir)
    lib = package.build("conv1d_skew", output_dir=out, python_module=False)
    print(f"built {lib.name} (3 functions) in {lib.timings['total']:.2f} s "
          f"(gcc {lib.timings['gcc']:.2f} s) in {out}")

    rng = np.random.default_rng(opts.seed)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(taps, dtype=np.float32)
    expected = np.correlate(a.astype(np.float64), b.astype(np.float64), mode="valid")
    assert np.allclose(expected, np.convolve(a.astype(np.float64), b[::-1].astype(np.float64), mode="valid"))

    t0 = time.perf_counter()
    reps = 100
    for _ in range(reps):
        np.correlate(a, b, mode="valid")
    numpy_us = (time.perf_counter() - t0) / reps * 1e6

    ok = True
    for name in ("conv_default", "conv_skew", "conv_skew_blocked"):
        fn = getattr(lib, name)
        c = np.zeros(m, dtype=np.float32)
        fn(a, b, c)
        err = float(np.max(np.abs(c - expected)))
        good = np.allclose(c, expected, rtol=1e-5, atol=1e-5)
        ok &= bool(good)
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(a, b, c)
        us = (time.perf_counter() - t0) / reps * 1e6
        print(f"{'ok  ' if good else 'FAIL'}  {name:<18} max |error| vs np.correlate {err:.1e}   {us:8.1f} us/call")
    print(f"      {'np.correlate':<18} {'':<31} {numpy_us:8.1f} us/call")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
