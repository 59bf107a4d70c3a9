/* One core's peak of the tile unit (TDPBSSD int8, TDPBF16PS bf16) and of AVX512-VNNI (VPDPBUSD):
 * independent accumulators, operands resident in tiles / registers, no memory traffic.
 * Prints "<op> <ops per second>" lines (an op is a multiply or an add: 2 per MAC). */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accpy_x86tile.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

__attribute__((noinline)) static void amx_loop(long n, int bf16) {
    if (bf16)
        for (long k = 0; k < n; ++k) {
            _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
        }
    else
        for (long k = 0; k < n; ++k) {
            _tile_dpbssd(0, 4, 6); _tile_dpbssd(1, 4, 7); _tile_dpbssd(2, 5, 6); _tile_dpbssd(3, 5, 7);
        }
}

static double amx(int bf16, double seconds) {
    accpy_tilecfg cfg = {1, 0, {0}, {0}};
    for (int t = 0; t < 8; ++t) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
    uint8_t image[64];
    accpy_tilecfg_image(&cfg, image);
    static uint8_t buf[16 * 64];
    for (int k = 0; k < (int)sizeof buf; ++k) buf[k] = (uint8_t)(k * 7 + 1) & 0x3f;
    _tile_loadconfig(image);
    for (int t = 0; t < 8; ++t) {
        switch (t) {
            case 0: _tile_zero(0); break; case 1: _tile_zero(1); break; case 2: _tile_zero(2); break;
            case 3: _tile_zero(3); break; case 4: _tile_loadd(4, buf, 64); break; case 5: _tile_loadd(5, buf, 64); break;
            case 6: _tile_loadd(6, buf, 64); break; default: _tile_loadd(7, buf, 64); break;
        }
    }
    long n = 1000;
    double t0 = now(), dt;
    for (;;) {  /* grow n until one run lasts long enough */
        t0 = now();
        amx_loop(n, bf16);
        dt = now() - t0;
        if (dt > seconds) break;
        n *= 2;
    }
    _tile_stored(0, buf, 64);
    _tile_release();
    double macs_per_op = bf16 ? 16.0 * 16 * 32 : 16.0 * 16 * 64;  /* per tile dot product */
    return 2.0 * macs_per_op * 4 * n / dt;
}

__attribute__((noinline)) static __m512i vnni_loop(long n, __m512i a, __m512i b) {
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0;
    for (long k = 0; k < n; ++k) {
        c0 = _mm512_dpbusd_epi32(c0, a, b); c1 = _mm512_dpbusd_epi32(c1, a, b); c2 = _mm512_dpbusd_epi32(c2, a, b);
        c3 = _mm512_dpbusd_epi32(c3, a, b); c4 = _mm512_dpbusd_epi32(c4, a, b); c5 = _mm512_dpbusd_epi32(c5, a, b);
        c6 = _mm512_dpbusd_epi32(c6, a, b); c7 = _mm512_dpbusd_epi32(c7, a, b); c8 = _mm512_dpbusd_epi32(c8, a, b);
        c9 = _mm512_dpbusd_epi32(c9, a, b);
    }
    return _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                            _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(_mm512_add_epi32(c6, c7),
                                                                                        _mm512_add_epi32(c8, c9))));
}

static double vnni(double seconds) {
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
    long n = 1000;
    double dt;
    volatile int sink;
    for (;;) {
        double t0 = now();
        __m512i r = vnni_loop(n, a, b);
        dt = now() - t0;
        sink = _mm512_reduce_add_epi32(r);
        if (dt > seconds) break;
        n *= 2;
    }
    (void)sink;
    return 2.0 * 64 * 10 * n / dt;  /* 64 MACs per instruction */
}

int main(int argc, char** argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    const char* why = 0;
    if (accpy_amx_request(&why)) {
        printf("tdpbssd %.4g\n", amx(0, seconds));
        if (__builtin_cpu_supports("amx-bf16")) printf("tdpbf16ps %.4g\n", amx(1, seconds));
    } else {
        printf("amx skipped %s\n", why);
    }
    if (__builtin_cpu_supports("avx512vnni")) printf("vpdpbusd %.4g\n", vnni(seconds));
    return 0;
}
