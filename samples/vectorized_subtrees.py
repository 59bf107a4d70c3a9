"""Vectorizing a loop together with the loops inside it (Accera's `vectorize` / `kernelize`).

Three recipes, each built, run and compared with numpy, with the vector instructions the
compiled kernel contains (from objdump):

  matmul    C[i, j] += A[i, k] * B[k, j]; order (i, j, k, kk, jj, ii), C cached at k,
            kernelize(unroll_indices=(kk,), vectorize_indices=(jj, ii)): lanes along jj, the
            4 x 16 tile of C in four zmm registers (eight ymm with AVX2), FMAs with A broadcast
  transpose B[j, i] = A[i, j]; a tile (j, i, jj) vectorized along i with jj unrolled inside:
            a gather of A per row of B (AVX2 or AVX-512), contiguous stores
  int16     C[i] += int32(A[i, k]) * int32(B[i, k]), k of extent 2, vectorized over (i, k):
            one VPMADDWD per 16 outputs with AVX-512BW; without it accpy has no vector form of
            this loop and leaves it to the C compiler's vectorizer (the sample says so)

An instruction is required only where the target has the extensions that provide it; the
results are compared with numpy on every target.

    python samples/vectorized_subtrees.py [--output-dir DIR]
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import warnings

from sample_support import OUTPUT_HELP, output_dir  # first: numpy's BLAS on one thread

import numpy as np  # noqa: E402

import accpy as acc  # noqa: E402

F32, I16, I32 = acc.ScalarType.float32, acc.ScalarType.int16, acc.ScalarType.int32


def matmul(target, M=48, N=64, K=96):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(M, K), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(K, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 4), s.split(j, 16), s.split(k, 4)
    s.reorder(i, j, k, kk, jj, ii)
    plan = s.create_plan(target)
    plan.cache(C, index=k)
    plan.kernelize(unroll_indices=(kk,), vectorize_indices=(jj, ii))
    return plan, (A, B, C), lambda a, b, c: c + a @ b


def transpose(target, M=40, N=32):
    A = acc.Array(role=acc.Role.INPUT, element_type=F32, shape=(M, N), name="A")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=F32, shape=(N, M), name="B")
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[j, i] = A[i, j]

    s = nest.create_schedule()
    jj = s.split(j, 4)
    s.reorder(j, i, jj)
    plan = s.create_plan(target)
    plan.vectorize(i)
    return plan, (A, B), lambda a, b: a.T.copy()


def int16_pairs(target, M=64):
    A = acc.Array(role=acc.Role.INPUT, element_type=I16, shape=(M, 2), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=I16, shape=(M, 2), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=I32, shape=(M,), name="C")
    nest = acc.Nest(shape=(M, 2))
    i, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] += acc.cast(A[i, k], I32) * acc.cast(B[i, k], I32)

    plan = nest.create_plan(target)
    plan.vectorize(i)
    return plan, (A, B, C), lambda a, b, c: c + (a.astype(np.int32) * b.astype(np.int32)).sum(axis=1)


# name: (recipe, instructions the kernel must contain, the target extensions accpy emits them with)
RECIPES = {"matmul": (matmul, ("vfmadd",), ("fma",)), "transpose": (transpose, ("vgatherdps",), ("avx2",)),
           "int16": (int16_pairs, ("vpmaddwd",), ("avx512f", "avx512bw"))}


def random_inputs(args, rng):
    out = []
    for a in args:
        if a.element_type is F32:
            out.append(rng.uniform(-1, 1, a.shape).astype(np.float32))
        else:
            out.append(rng.integers(-(1 << 14), 1 << 14, a.shape).astype(a.element_type.dtype))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output-dir", help=OUTPUT_HELP)
    opts = ap.parse_args(argv)
    target = acc.Target.HOST
    out = output_dir("vectorized_subtrees", opts.output_dir)
    ok = True
    rng = np.random.default_rng(0)
    for name, (make, wanted, features) in RECIPES.items():
        plan, args, expected = make(target)
        print(f"{name}: {plan!r}")
        pkg = acc.Package()
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            pkg.add(plan, args=args, base_name=name)
            lib = pkg.build(name, output_dir=str(out / name), python_module=False)
        for w in notes:
            print(f"  note: {w.message}")
        missing = [f for f in features if not target.has(f)]
        if missing:
            print(f"  (the target lacks {', '.join(missing)}: {', '.join(wanted)} not required)")
            wanted = ()
        data = random_inputs(args, rng)
        want = expected(*data)
        getattr(lib, name)(*data)
        got = data[-1]
        exact = np.issubdtype(got.dtype, np.integer)
        good = np.array_equal(got, want) if exact else np.allclose(got, want, rtol=1e-4, atol=1e-4)
        asm = ""
        if shutil.which("objdump"):
            so = next((out / name).glob(f"lib{name}.so"))
            asm = subprocess.run(["objdump", "-d", str(so)], capture_output=True, text=True).stdout
        found = [w for w in RECIPES[name][1] if re.search(rf"\b{w}", asm)]
        ok = ok and good and (not asm or all(w in found for w in wanted))
        print(f"  {'ok' if good else 'FAIL'}  {name}: {'C == numpy' if good else 'C != numpy'}"
              f"{' (exact)' if exact else ''}; instructions: {', '.join(found) or '-'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
