"""The x86 tile unit (AMX) and the AVX-512 VNNI / BF16 dot products as numpy: what each
instruction computes, bit for bit (the functional model native/x86tile/accpy_x86tile.h computes
the same and is checked against the hardware). `RefTiles` is the machine the intrinsics'
reference bodies run on: eight tiles of 16 rows x 64 bytes and the configuration."""
from __future__ import annotations

import numpy as np

TILES, ROWS, COLSB = 8, 16, 64
_TINY = np.float32(2.0 ** -126)  # the smallest normal float32


def flush(x) -> np.ndarray:
    """float32 denormals to zeros of their sign (DAZ on inputs, FTZ on results)."""
    x = np.asarray(x, np.float32).copy()
    tiny = (np.abs(x) < _TINY) & (x != 0)
    x[tiny] = np.copysign(np.float32(0), x[tiny])
    return x


def bf16_to_f32(h) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as float32."""
    return (np.asarray(h, np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f) -> np.ndarray:
    """VCVTNEPS2BF16: round to nearest even; NaN stays a quiet NaN; a denormal becomes a signed zero."""
    u = np.asarray(f, np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    den = (u & 0x7F800000) == 0
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    out = np.where(nan, ((u >> 16) | 0x40) & 0xFFFF, out)
    out = np.where(den, (u >> 16) & 0x8000, out)
    return out.astype(np.uint16)


def tile_dp_int8(c: np.ndarray, a: np.ndarray, b: np.ndarray, a_signed: bool, b_signed: bool) -> np.ndarray:
    """TDPB[SU][SU]D: c (M x N int32) + sum over k, i < 4 of a[m, 4k+i] * b[k, 4n+i] (bytes as signed or
    unsigned), wrapping modulo 2^32. `a`: M x 4K bytes, `b`: K x 4N bytes."""
    M, N = c.shape
    K = a.shape[1] // 4
    av = a.view(np.int8 if a_signed else np.uint8).astype(np.int64).reshape(M, K, 4)
    bv = b.view(np.int8 if b_signed else np.uint8).astype(np.int64).reshape(K, N, 4)
    s = np.einsum("mki,kni->mn", av, bv)
    return ((c.astype(np.int64) + s) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def tile_dpbf16ps(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TDPBF16PS: c (M x N float32) += the bf16 pair products of a (M x 2K bf16) and b (K x 2N bf16):
    the even products summed in k order, the odd ones likewise, then even + odd, then c + that,
    each addition in float32 (nearest even), denormal inputs read as zero, results flushed."""
    M, N = c.shape
    K = a.shape[1] // 2
    af = flush(bf16_to_f32(a)).reshape(M, K, 2)
    bf = flush(bf16_to_f32(b)).reshape(K, N, 2)
    even = np.zeros((M, N), np.float32)
    odd = np.zeros((M, N), np.float32)
    for k in range(K):
        even = flush(even + af[:, k, 0][:, None] * bf[k, :, 0][None, :])
        odd = flush(odd + af[:, k, 1][:, None] * bf[k, :, 1][None, :])
    return flush(flush(c) + flush(even + odd))


def vpdpbusd(acc: np.ndarray, a: np.ndarray, b: np.ndarray, saturate: bool = False) -> np.ndarray:
    """VPDPBUSD[S] on 16 lanes: acc[j] + sum over i < 4 of u8(a[4j+i]) * s8(b[4j+i]) (wrapping, or
    saturated to int32 with `saturate`)."""
    s = (a.view(np.uint8).astype(np.int64).reshape(16, 4) * b.view(np.int8).astype(np.int64).reshape(16, 4)).sum(1)
    r = acc.astype(np.int64) + s
    if saturate:
        return np.clip(r, -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    return (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def vdpbf16ps(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """VDPBF16PS on 16 lanes: acc + a[2j+1] * b[2j+1], then + a[2j] * b[2j] (the odd element first),
    denormal inputs read as zero, results flushed."""
    af = flush(bf16_to_f32(a)).reshape(16, 2)
    bf = flush(bf16_to_f32(b)).reshape(16, 2)
    r = flush(flush(acc) + af[:, 1] * bf[:, 1])
    return flush(r + af[:, 0] * bf[:, 0])


class RefTiles:
    """Eight tiles (bytes) and their shapes: the machine the reference bodies run on."""

    def __init__(self):
        self.t = np.zeros((TILES, ROWS, COLSB), np.uint8)
        self.rows = [0] * TILES
        self.colsb = [0] * TILES
        self.configured = False

    def config(self, shapes) -> None:
        """LDTILECFG: shapes[k] = (rows, colsb) of tile k; the tile data become zeros."""
        for k, (r, c) in enumerate(shapes):
            if r > ROWS or c > COLSB or c % 4 or (r == 0) != (c == 0):
                raise ValueError(f"ldtilecfg: tile {k} of {r} rows x {c} bytes")
            self.rows[k], self.colsb[k] = r, c
        self.t[...] = 0
        self.configured = True

    def tile(self, k: int) -> np.ndarray:
        """Tile k's configured part (rows x colsb bytes), a view."""
        if not self.configured or not self.rows[k]:
            raise ValueError(f"tile {k} is not configured")
        return self.t[k, :self.rows[k], :self.colsb[k]]
