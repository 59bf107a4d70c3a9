"""Intel MKL's CBLAS through ctypes, for benchmarks: `libmkl_rt` from the `mkl` wheel on PyPI.

    pip install 'accpy[bench]'      # or: pip install mkl

The wheel has no Python module: it puts its libraries into the interpreter prefix's lib
directory. `Mkl()` finds `libmkl_rt.so*` among the files of the installed `mkl` distribution,
selects MKL's GNU OpenMP threading layer (the libgomp that accpy's kernels use, so the two
runtimes do not compete in one process) and binds the entry points benchmarks need; the
int8 and bf16 GEMMs are bound too, for benchmarks that compare against them.
"""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Optional

import numpy as np

ROW_MAJOR, NO_TRANS = 101, 111
OFFSET_FIXED = 173  # CblasFixOffset (171 and 172 are per-row and per-column offsets)
THREADING_GNU = 3  # MKL_THREADING_GNU


class MklUnavailable(RuntimeError):
    """MKL could not be loaded; the message says why."""


def find_library() -> Path:
    """The path of libmkl_rt inside the installed `mkl` wheel (MklUnavailable if none)."""
    import importlib.metadata as md

    try:
        dist = md.distribution("mkl")
    except md.PackageNotFoundError:
        raise MklUnavailable("the mkl wheel is not installed (pip install 'accpy[bench]' or pip install mkl)") from None
    libs = sorted((Path(dist.locate_file(f)).resolve() for f in dist.files or [] if "libmkl_rt.so" in f.name),
                  key=lambda p: len(p.name))
    for p in libs:
        if p.exists():
            return p
    raise MklUnavailable(f"mkl {dist.version} is installed but its libmkl_rt.so was not found among its files")


def _c_array(a: np.ndarray, dtype, name: str, writable: bool = False):
    if a.dtype != np.dtype(dtype) or not a.flags.c_contiguous or (writable and not a.flags.writeable):
        raise ValueError(f"{name}: expected a C-contiguous{' writable' if writable else ''} {np.dtype(dtype)} array, "
                         f"got {a.dtype} with strides {a.strides}")
    return a.ctypes.data_as(ctypes.c_void_p)


class Mkl:
    """MKL's CBLAS GEMMs on numpy arrays (row-major, no transposes): C += A @ B."""

    def __init__(self, path: Optional[Path] = None):
        self.path = Path(path) if path is not None else find_library()
        try:
            lib = ctypes.CDLL(str(self.path), mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise MklUnavailable(f"{self.path}: {e}") from None
        self.lib = lib
        lib.MKL_Set_Threading_Layer.argtypes = [ctypes.c_int]
        lib.MKL_Set_Threading_Layer(THREADING_GNU)  # before any other call: it picks the layer once
        lib.MKL_Set_Num_Threads.argtypes = [ctypes.c_int]
        lib.MKL_Get_Version_String.argtypes = [ctypes.c_char_p, ctypes.c_int]
        i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
        lib.cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
        lib.cblas_sgemm.restype = None
        # (layout, transa, transb, offsetc, m, n, k, alpha, a, lda, ao, b, ldb, bo, beta, c, ldc, co)
        lib.cblas_gemm_s8u8s32.argtypes = [i, i, i, i, i, i, i, f, p, i, ctypes.c_int8, p, i, ctypes.c_int8,
                                           f, p, i, p]
        lib.cblas_gemm_s8u8s32.restype = None
        lib.cblas_gemm_bf16bf16f32.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
        lib.cblas_gemm_bf16bf16f32.restype = None

    def version(self) -> str:
        buf = ctypes.create_string_buffer(256)
        self.lib.MKL_Get_Version_String(buf, len(buf))
        return buf.value.decode().strip()

    def set_threads(self, n: int) -> None:
        self.lib.MKL_Set_Num_Threads(int(n))

    @staticmethod
    def _shapes(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple:
        (M, K), (K2, N) = a.shape, b.shape
        if K2 != K or c.shape != (M, N):
            raise ValueError(f"shapes: A {a.shape} @ B {b.shape} does not give C {c.shape}")
        return M, N, K

    def sgemm(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        """C += A @ B in float32 (cblas_sgemm, alpha = beta = 1)."""
        M, N, K = self._shapes(a, b, c)
        self.lib.cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, M, N, K, 1.0, _c_array(a, np.float32, "a"), K,
                             _c_array(b, np.float32, "b"), N, 1.0, _c_array(c, np.float32, "c", True), N)

    def gemm_s8u8s32(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        """C += A @ B with A uint8, B int8, C int32 (cblas_gemm_s8u8s32, no offsets).

        MKL's name describes column-major operands; in row-major (computed as the transposed
        product) the first operand is the unsigned one, as measured against numpy.
        """
        M, N, K = self._shapes(a, b, c)
        co = ctypes.c_int32(0)
        self.lib.cblas_gemm_s8u8s32(ROW_MAJOR, NO_TRANS, NO_TRANS, OFFSET_FIXED, M, N, K, 1.0,
                                    _c_array(a, np.uint8, "a"), K, 0, _c_array(b, np.int8, "b"), N, 0, 1.0,
                                    _c_array(c, np.int32, "c", True), N, ctypes.byref(co))

    def gemm_bf16bf16f32(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        """C += A @ B with A, B bfloat16 (as uint16 bit patterns) and C float32."""
        M, N, K = self._shapes(a, b, c)
        self.lib.cblas_gemm_bf16bf16f32(ROW_MAJOR, NO_TRANS, NO_TRANS, M, N, K, 1.0, _c_array(a, np.uint16, "a"), K,
                                        _c_array(b, np.uint16, "b"), N, 1.0, _c_array(c, np.float32, "c", True), N)


def load() -> tuple:
    """(Mkl, "") when MKL loads, else (None, the reason)."""
    try:
        return Mkl(), ""
    except MklUnavailable as e:
        return None, str(e)
