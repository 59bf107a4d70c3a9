"""Shared pieces of the benchmarks: medians, numpy's BLAS threads, the measured FMA peak."""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import time

import numpy as np


def median_seconds(fn, repeat: int = 7, min_time: float = 0.05) -> float:
    """Median over `repeat` samples; each sample runs `fn` enough times to last `min_time`."""
    fn()  # warm up (page faults, caches, thread pools)
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    n = max(1, int(min_time / one))
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t) / n)
    return float(np.median(samples))


def interleaved_best(contenders: dict, repeat: int = 7, rounds: int = 2) -> dict:
    """{name: seconds}: each contender's best `median_seconds` over `rounds` rounds, the
    contenders taking turns in every round, so that drift in the machine's speed (other tenants,
    clocks) hits them alike."""
    best = {name: float("inf") for name in contenders}
    for _ in range(rounds):
        for name, call in contenders.items():
            best[name] = min(best[name], median_seconds(call, repeat))
    return best


class Blas:
    """numpy's OpenBLAS: its thread count can be changed inside one process."""

    def __init__(self):
        self.lib = None
        self.prefix = ""
        paths = sorted({ln.split()[-1] for ln in open("/proc/self/maps").read().splitlines()
                        if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})
        for p in paths:
            lib = ctypes.CDLL(p)
            for pre, suf in (("scipy_openblas_", "64_"), ("openblas_", "64_"), ("openblas_", ""),
                             ("scipy_openblas_", "")):
                if hasattr(lib, f"{pre}set_num_threads{suf}"):
                    self.lib, self.prefix, self.suffix = lib, pre, suf
                    break
            if self.lib is not None:
                break

    def set_threads(self, n: int) -> None:
        if self.lib is None:
            raise RuntimeError("numpy's OpenBLAS was not found: cannot set its thread count in-process")
        getattr(self.lib, f"{self.prefix}set_num_threads{self.suffix}")(ctypes.c_int(n))

    def describe(self) -> str:
        if self.lib is None:
            return "unknown BLAS"
        fn = getattr(self.lib, f"{self.prefix}get_config{self.suffix}", None)
        core = getattr(self.lib, f"{self.prefix}get_corename{self.suffix}", None)
        out = []
        if fn is not None:
            fn.restype = ctypes.c_char_p
            out.append(fn().decode())
        if core is not None:
            core.restype = ctypes.c_char_p
            out.append("core=" + core().decode())
        return " ".join(out)


_PEAK_C = r"""
#include <immintrin.h>
#include <stdint.h>
#include <omp.h>
/* 12 independent FMA chains per thread: enough to cover latency x pipes on current cores */
__attribute__((target("avx512f"))) float fma_loop(int64_t iters) {
    __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
    /* distinct start values: identical chains would be merged by the compiler */
    __m512 c0 = _mm512_set1_ps(0.f), c1 = _mm512_set1_ps(1.f), c2 = _mm512_set1_ps(2.f),
           c3 = _mm512_set1_ps(3.f), c4 = _mm512_set1_ps(4.f), c5 = _mm512_set1_ps(5.f),
           c6 = _mm512_set1_ps(6.f), c7 = _mm512_set1_ps(7.f), c8 = _mm512_set1_ps(8.f),
           c9 = _mm512_set1_ps(9.f), c10 = _mm512_set1_ps(10.f), c11 = _mm512_set1_ps(11.f);
    for (int64_t i = 0; i < iters; ++i) {
        c0 = _mm512_fmadd_ps(a, c0, b); c1 = _mm512_fmadd_ps(a, c1, b); c2 = _mm512_fmadd_ps(a, c2, b);
        c3 = _mm512_fmadd_ps(a, c3, b); c4 = _mm512_fmadd_ps(a, c4, b); c5 = _mm512_fmadd_ps(a, c5, b);
        c6 = _mm512_fmadd_ps(a, c6, b); c7 = _mm512_fmadd_ps(a, c7, b); c8 = _mm512_fmadd_ps(a, c8, b);
        c9 = _mm512_fmadd_ps(a, c9, b); c10 = _mm512_fmadd_ps(a, c10, b); c11 = _mm512_fmadd_ps(a, c11, b);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
    return _mm512_reduce_add_ps(s);
}
float peak(int64_t iters, int threads) {
    float total = 0;
    #pragma omp parallel num_threads(threads) reduction(+:total)
    total += fma_loop(iters);
    return total;
}
"""


def fma_peak_gflops(threads: int) -> float:
    """Measured single-precision AVX-512 FMA peak (GFLOP/s) on `threads` threads (0 if no AVX-512)."""
    flags = open("/proc/cpuinfo").read()
    if " avx512f" not in flags:
        return 0.0
    d = tempfile.mkdtemp(prefix="accpy_peak_")
    src, so = os.path.join(d, "peak.c"), os.path.join(d, "peak.so")
    with open(src, "w") as f:
        f.write(_PEAK_C)
    subprocess.run(["gcc", "-O2", "-fopenmp", "-shared", "-fPIC", src, "-o", so], check=True)
    lib = ctypes.CDLL(so)
    lib.peak.argtypes = [ctypes.c_int64, ctypes.c_int]
    lib.peak.restype = ctypes.c_float
    iters = 20_000_000
    flop = iters * 12 * 16 * 2 * threads
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        lib.peak(iters, threads)
        best = max(best, flop / (time.perf_counter() - t) / 1e9)
    return best
