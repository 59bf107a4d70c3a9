/* The x86 tile model (native/x86tile/accpy_x86tile.h) against the real instructions, on random data.
 *
 *   check_model CASES SEED      -> one line per operation: "<op> <cases> <mismatches> <first mismatch>"
 *
 * Built with -mamx-tile -mamx-int8 -mamx-bf16 -mavx512f -mavx512vnni -mavx512bf16; each real
 * instruction runs only when the CPU (and the kernel, for AMX) allows it; a skipped operation
 * prints "<op> skipped <reason>". */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accpy_x86tile.h"

static uint64_t rng_state;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static uint8_t rnd_byte(void) {
    static const uint8_t edge[] = {0x00, 0x01, 0x7f, 0x80, 0x81, 0xff};
    return (rnd() % 4 == 0) ? edge[rnd() % 6] : (uint8_t)rnd();
}
static uint16_t rnd_bf16(void) {
    uint32_t k = rnd() % 8;
    if (k == 0) return (uint16_t)rnd();                       /* any pattern: NaN, inf, denormals */
    if (k == 1) return (uint16_t)((rnd() & 0x807f) | 0x0000); /* denormals and zeros */
    float f = ((float)(int32_t)(rnd() % 2001) - 1000.0f) / (float)(1 + rnd() % 64);
    return accpy_f32_to_bf16(f);
}

/* equal bits, or both NaN (which NaN's payload an operation propagates depends on operand order,
 * which C compilers may swap for commutative operations: payloads are not part of the model) */
static int same_f32(float a, float b) {
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y || (a != a && b != b);
}

typedef struct { int cases, bad; char first[256]; } tally;

static void report(const char* op, tally* t) { printf("%s %d %d %s\n", op, t->cases, t->bad, t->bad ? t->first : "-"); }

/* one tile dot product on random shapes: kind 0..3 the int8 signedness pairs, 4 bf16 */
static void tile_case(int kind, tally* t) {
    int M = 1 + rnd() % 16, K4 = 1 + rnd() % 16, N = 1 + rnd() % 16;
    int sa = 4 * K4 + 4 * (rnd() % 3), sb = 4 * N + 4 * (rnd() % 3), sc = 4 * N + 4 * (rnd() % 3);
    static uint8_t A[16 * 80], B[16 * 80], C[16 * 80], R[16 * 80], Mo[16 * 80];
    for (int k = 0; k < 16 * 80; ++k) { A[k] = rnd_byte(); B[k] = rnd_byte(); C[k] = (uint8_t)rnd(); }
    if (kind == 4) {
        for (int k = 0; k + 1 < 16 * 80; k += 2) {
            uint16_t x = rnd_bf16(), y = rnd_bf16();
            memcpy(A + k, &x, 2);
            memcpy(B + k, &y, 2);
        }
        for (int k = 0; k + 3 < 16 * 80; k += 4) {
            float f = ((float)(int32_t)(rnd() % 2001) - 1000.0f) / 8.0f;
            memcpy(C + k, &f, 4);
        }
    }
    accpy_tilecfg cfg = {1, 0, {0}, {0}};
    cfg.rows[0] = (uint8_t)M; cfg.colsb[0] = (uint16_t)(4 * N);
    cfg.rows[1] = (uint8_t)M; cfg.colsb[1] = (uint16_t)(4 * K4);
    cfg.rows[2] = (uint8_t)K4; cfg.colsb[2] = (uint16_t)(4 * N);
    uint8_t image[64];
    accpy_tilecfg_image(&cfg, image);
    memcpy(R, C, sizeof R);
    memcpy(Mo, C, sizeof Mo);
    _tile_loadconfig(image);
    _tile_loadd(0, R, sc);
    _tile_loadd(1, A, sa);
    _tile_loadd(2, B, sb);
    switch (kind) {
        case 0: _tile_dpbssd(0, 1, 2); break;
        case 1: _tile_dpbsud(0, 1, 2); break;
        case 2: _tile_dpbusd(0, 1, 2); break;
        case 3: _tile_dpbuud(0, 1, 2); break;
        default: _tile_dpbf16ps(0, 1, 2); break;
    }
    _tile_stored(0, R, sc);
    _tile_release();
    accpy_tile_state s;
    memset(&s, 0, sizeof s);
    accpy_tile_config(&s, &cfg);
    accpy_tile_loadd(&s, 0, Mo, sc);
    accpy_tile_loadd(&s, 1, A, sa);
    accpy_tile_loadd(&s, 2, B, sb);
    if (kind < 4) accpy_tile_dpb(&s, 0, 1, 2, kind == 0 || kind == 1, kind == 0 || kind == 2);
    else accpy_tile_dpbf16ps(&s, 0, 1, 2);
    accpy_tile_stored(&s, 0, Mo, sc);
    t->cases++;
    if (s.error) { t->bad++; snprintf(t->first, sizeof t->first, "model error: %s", s.error); return; }
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            uint8_t* r = R + m * sc + 4 * n;
            uint8_t* o = Mo + m * sc + 4 * n;
            float fr, fo;
            memcpy(&fr, r, 4);
            memcpy(&fo, o, 4);
            if (kind == 4 ? !same_f32(fr, fo) : memcmp(r, o, 4) != 0) {
                if (!t->bad) {
                    uint32_t x, y;
                    memcpy(&x, r, 4);
                    memcpy(&y, o, 4);
                    snprintf(t->first, sizeof t->first, "M=%d K4=%d N=%d at [%d][%d]: hardware %08x model %08x", M, K4,
                             N, m, n, x, y);
                }
                t->bad++;
                return;
            }
        }
}

static void vnni_case(int saturate, tally* t) {
    uint8_t a[64]; int8_t b[64]; int32_t acc[16], ref[16];
    for (int k = 0; k < 64; ++k) { a[k] = rnd_byte(); b[k] = (int8_t)rnd_byte(); }
    for (int k = 0; k < 16; ++k) acc[k] = (rnd() % 3 == 0) ? (int32_t)(0x7fffff00u + rnd() % 512) : (int32_t)rnd();
    memcpy(ref, acc, sizeof acc);
    __m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b), vc = _mm512_loadu_si512(acc);
    vc = saturate ? _mm512_dpbusds_epi32(vc, va, vb) : _mm512_dpbusd_epi32(vc, va, vb);
    _mm512_storeu_si512(acc, vc);
    accpy_vpdpbusd(ref, a, b, saturate);
    t->cases++;
    for (int j = 0; j < 16; ++j)
        if (acc[j] != ref[j]) {
            if (!t->bad) snprintf(t->first, sizeof t->first, "lane %d: hardware %d model %d", j, acc[j], ref[j]);
            t->bad++;
            return;
        }
}

static void dpbf16_case(tally* t) {
    uint16_t a[32], b[32]; float acc[16], ref[16];
    for (int k = 0; k < 32; ++k) { a[k] = rnd_bf16(); b[k] = rnd_bf16(); }
    for (int k = 0; k < 16; ++k) acc[k] = ((float)(int32_t)(rnd() % 2001) - 1000.0f) / 16.0f;
    memcpy(ref, acc, sizeof acc);
    __m512 vc = _mm512_loadu_ps(acc);
    __m512bh va, vb;
    memcpy(&va, a, 64);
    memcpy(&vb, b, 64);
    vc = _mm512_dpbf16_ps(vc, va, vb);
    _mm512_storeu_ps(acc, vc);
    accpy_vdpbf16ps(ref, a, b);
    t->cases++;
    for (int j = 0; j < 16; ++j)
        if (!same_f32(acc[j], ref[j])) {
            if (!t->bad) {
                uint32_t x, y;
                memcpy(&x, &acc[j], 4);
                memcpy(&y, &ref[j], 4);
                snprintf(t->first, sizeof t->first, "lane %d: a=%04x,%04x b=%04x,%04x hardware %08x model %08x", j,
                         a[2 * j], a[2 * j + 1], b[2 * j], b[2 * j + 1], x, y);
            }
            t->bad++;
            return;
        }
}

static void cvt_case(tally* t) {
    float f[16]; uint16_t hw[16];
    for (int k = 0; k < 16; ++k) { uint32_t u = rnd(); memcpy(&f[k], &u, 4); }
    __m256bh r = _mm512_cvtneps_pbh(_mm512_loadu_ps(f));
    memcpy(hw, &r, 32);
    t->cases++;
    for (int k = 0; k < 16; ++k)
        if (hw[k] != accpy_f32_to_bf16(f[k])) {
            uint32_t u;
            memcpy(&u, &f[k], 4);
            if (!t->bad) snprintf(t->first, sizeof t->first, "%08x: hardware %04x model %04x", u, hw[k], accpy_f32_to_bf16(f[k]));
            t->bad++;
            return;
        }
}

int main(int argc, char** argv) {
    int cases = argc > 1 ? atoi(argv[1]) : 200;
    rng_state = argc > 2 ? strtoull(argv[2], 0, 10) : 1;
    const char* why = 0;
    static const char* names[] = {"tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud", "tdpbf16ps"};
    if (accpy_amx_request(&why)) {
        for (int kind = 0; kind < 5; ++kind) {
            tally t = {0, 0, ""};
            if (kind == 4 && !__builtin_cpu_supports("amx-bf16")) { printf("%s skipped no AMX-BF16\n", names[kind]); continue; }
            for (int c = 0; c < cases; ++c) tile_case(kind, &t);
            report(names[kind], &t);
        }
    } else {
        for (int kind = 0; kind < 5; ++kind) printf("%s skipped %s\n", names[kind], why);
    }
    if (__builtin_cpu_supports("avx512vnni")) {
        tally t1 = {0, 0, ""}, t2 = {0, 0, ""};
        for (int c = 0; c < cases; ++c) { vnni_case(0, &t1); vnni_case(1, &t2); }
        report("vpdpbusd", &t1);
        report("vpdpbusds", &t2);
    } else {
        printf("vpdpbusd skipped no AVX512-VNNI\nvpdpbusds skipped no AVX512-VNNI\n");
    }
    if (__builtin_cpu_supports("avx512bf16")) {
        tally t1 = {0, 0, ""}, t2 = {0, 0, ""};
        for (int c = 0; c < cases; ++c) { dpbf16_case(&t1); cvt_case(&t2); }
        report("vdpbf16ps", &t1);
        report("vcvtneps2bf16", &t2);
    } else {
        printf("vdpbf16ps skipped no AVX512-BF16\nvcvtneps2bf16 skipped no AVX512-BF16\n");
    }
    return 0;
}
