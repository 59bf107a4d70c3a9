"""hello_matmul: define a matmul, schedule it, build a native package, call it, check it.

    python samples/hello_matmul.py [--output-dir DIR]

Steps:
  1. a Nest says *what* to compute: C[i, j] += A[i, k] * B[k, j] (float32);
  2. a Schedule says *in which order*: tiles of 16 x 48 x 64, and 320 is not a multiple
     of 48, so the j loop ends with a partial tile (lowering runs it as a separate,
     guard-free piece);
  3. a Package builds it into output_dir: the C source, a header, a HAT file, a shared
     and a static library, and a Python extension module (pybind11, built in the
     background so the package is callable as soon as gcc is done);
  4. the function is called through the object `build` returns and through the
     package's own Python module, and both results are checked against numpy.

Exit status 0 when both results match numpy, 1 otherwise.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sample_support import OUTPUT_HELP, output_dir  # first: numpy's BLAS on one thread

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402

M, N, K = 256, 320, 192          # C[M, N] += A[M, K] @ B[K, N]
TILE = {"i": 16, "j": 48, "k": 64}  # 320 = 6 * 48 + 32: the last j tile is partial
PACKAGE = "hello_matmul"


def define_schedule():
    """The nest, its schedule and the function's arguments (also used by benchmarks/)."""
    A = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(M, K))
    B = acc.Array(role=acc.Role.INPUT, element_type=acc.ScalarType.float32, shape=(K, N))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=acc.ScalarType.float32, shape=(M, N))

    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    schedule = nest.create_schedule()
    ii, jj, kk = schedule.tile({i: TILE["i"], j: TILE["j"], k: TILE["k"]})
    schedule.reorder(i, j, k, ii, kk, jj)  # jj innermost: unit stride in B and C
    return schedule, (A, B, C)


def build(schedule, args, output_dir, python_module="async"):
    package = acc.Package()
    package.add(schedule, args=args, base_name="matmul")
    return package.build(PACKAGE, output_dir=output_dir, python_module=python_module)


def _rel(path) -> str:
    """`path` relative to the current directory when it is inside it, else absolute."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _check(name, c, expected) -> bool:
    err = float(np.max(np.abs(c.astype(np.float64) - expected)))
    try:
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)
    except AssertionError as e:
        print(f"  {name:<44} max |error| {err:.1e}  MISMATCH")
        print("    " + str(e).strip().replace("\n", "\n    "))
        return False
    print(f"  {name:<44} max |error| {err:.1e}  OK")
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    ap.add_argument("--seed", type=int, default=0)
    opts = ap.parse_args(argv)

    print(f"accpy {acc.__version__}: C[{M}, {N}] += A[{M}, {K}] @ B[{K}, {N}], float32")
    schedule, args = define_schedule()
    print(f"\nschedule {schedule!r}:")
    print("\n".join("    " + line for line in str(schedule).splitlines()))

    lib = build(schedule, args, output_dir(PACKAGE, opts.output_dir))
    t = lib.timings
    fn = lib.matmul
    print(f"\nbuilt {lib.name} in {t['total']:.3f} s (gcc {t['gcc']:.3f} s, "
          f"build cache {'hit' if t['cache_hit'] else 'miss'}); function {fn.name}")

    rng = np.random.default_rng(opts.seed)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    c0 = rng.random((M, N), dtype=np.float32)
    expected = c0.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)

    ok = True
    c = c0.copy()
    t0 = time.perf_counter()
    fn(a, b, c)
    seconds = time.perf_counter() - t0
    ok &= _check("lib.matmul (object returned by build)", c, expected)

    t0 = time.perf_counter()
    module = lib.python_module()  # waits for the background pybind11 build
    waited = time.perf_counter() - t0
    c = c0.copy()
    module.matmul(a, b, c)
    ok &= _check(f"{lib.name}.matmul (pybind11 module)", c, expected)

    flops = 2.0 * M * N * K
    print(f"  first call {seconds * 1e3:.2f} ms ({flops / seconds / 1e9:.1f} GFLOP/s)")

    f = lib.files
    print(f"\nfiles in {_rel(lib.output_dir)}/:")
    for label, key in ((".c", "c"), (".h", "h"), (".hat", "hat"), (".so", "shared"), (".a", "static"),
                       ("python module", "python_module")):
        if key in f:
            print(f"  {label:<14} {Path(f[key]).name}")
    t = lib.timings
    print("\ntimings (s): " + ", ".join(
        f"{k} {t[k]:.3f}" for k in ("emit", "gcc", "compile_total", "total") if k in t)
        + f", cache_hit {t['cache_hit']}")
    if "pybind11" in t:
        print(f"python module (background): pybind11 {t['pybind11']:.3f} s, cache_hit {t['pybind11_cache_hit']}"
              f" (waited {waited:.3f} s for it)")
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
