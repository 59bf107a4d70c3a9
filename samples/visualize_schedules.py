"""Pictures of the schedules chapter's examples: each point numbered in its scheduled order.

    python samples/visualize_schedules.py [--output-dir DIR] [--text]

Writes PNG files (matplotlib: pip install 'accpy[viz]'): a 12-element loop split by 3 and by
5 (the last block padded), a 6 x 4 space tiled 3 x 2, the skewed 10-element 3-tap convolution,
a padded loop, a fused pair of nests, and a plan's cache block. `--text` prints the grids of
order numbers instead (no matplotlib needed).
"""
from __future__ import annotations

import argparse
import os
import sys

from sample_support import OUTPUT_HELP, output_dir

import accpy as acc  # noqa: E402


def one_d(n=12):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(n,), name="A")
    nest = acc.Nest(shape=(n,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1.0

    return nest, i, A


def two_d(m=6, n=4):
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(m, n), name="B")
    nest = acc.Nest(shape=(m, n))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i, j] += 1.0

    return nest, (i, j), B


def examples() -> list:
    """(file stem, schedule or plan) of each picture."""
    out = []
    nest, i, _ = one_d()
    s = nest.create_schedule()
    s.split(i, 3)
    out.append(("split_by_3", s))
    nest, i, _ = one_d()
    s = nest.create_schedule()
    s.split(i, 5)
    out.append(("split_by_5_padded", s))
    nest, (i, j), B = two_d()
    s = nest.create_schedule()
    ii, jj = s.tile({i: 3, j: 2})
    s.reorder(i, j, ii, jj)
    out.append(("tile_3x2", s))
    plan = s.create_plan()
    plan.cache(B, index=ii)
    out.append(("tile_3x2_cache", plan))
    N, K = 10, 3
    X = acc.Array(role=acc.Role.INPUT, shape=(N + K - 1,), name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N,), name="Y")
    conv = acc.Nest(shape=(N, K))
    n_, k_ = conv.get_indices()

    @conv.iteration_logic
    def _():
        Y[n_] += X[n_ + k_]

    s = conv.create_schedule()
    s.skew(n_, k_)
    out.append(("skew_conv1d", s))
    nest, i, _ = one_d()
    s = nest.create_schedule()
    s.pad(i, 2)
    out.append(("pad_2", s))
    n0, i0, _ = one_d(6)
    n1, i1, _ = one_d(6)
    out.append(("fused_pair", acc.fuse((n0.create_schedule(), n1.create_schedule()))))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    ap.add_argument("--text", action="store_true", help="print grids of order numbers (no matplotlib)")
    a = ap.parse_args(argv)
    for stem, x in examples():
        if a.text:
            print(f"{stem}:\n{x.visualize(format='text')}\n")
            continue
        path = os.path.join(output_dir("visualize_schedules", a.output_dir), stem + ".png")
        x.visualize(path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
