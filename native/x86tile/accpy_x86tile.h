/* accpy_x86tile.h: a functional model of the x86 tile unit (AMX) and of the AVX-512 VNNI / BF16
 * dot products, and the runtime's request for AMX state.
 *
 * The model runs the same operations as the instructions, bit for bit, on machines without
 * them (it is checked against the real instructions where the CPU has them:
 * tests/test_x86tile_model.py). Emitted code calls either the intrinsics or these functions.
 *
 * Semantics modelled (the ISA's, as the tests confirm on hardware):
 *  - the tile configuration (palette 1): 8 tiles, each `rows` (<= 16) rows of `colsb` (<= 64)
 *    bytes; instructions whose operand shapes do not agree are refused (the hardware raises
 *    #UD; the model records an error and leaves the tiles unchanged);
 *  - TDPB[SU][SU]D: dst.i32[m][n] += sum over k, i < 4 of a.x8[m][4k+i] * b.x8[k][4n+i], each
 *    byte signed or unsigned as the mnemonic says, the sum wrapping modulo 2^32;
 *  - TDPBF16PS and VDPBF16PS: bf16 products summed in float32, denormal inputs read as zero,
 *    denormal results flushed to zero, round-to-nearest-even whatever MXCSR says; the order of
 *    the additions differs between the two (see accpy_tile_dpbf16ps and accpy_bf16_dot2);
 *  - VPDPBUSD[S] and VDPBF16PS are the same dot products on one 512-bit register (16 lanes).
 */
#ifndef ACCPY_X86TILE_H
#define ACCPY_X86TILE_H

#include <fenv.h>
#include <stdint.h>
#include <string.h>

#define ACCPY_TILES 8
#define ACCPY_TILE_ROWS 16
#define ACCPY_TILE_COLSB 64

typedef struct {
    uint8_t palette, start_row;
    uint16_t colsb[ACCPY_TILES];
    uint8_t rows[ACCPY_TILES];
} accpy_tilecfg;

typedef struct {
    accpy_tilecfg cfg;
    int configured;
    uint8_t t[ACCPY_TILES][ACCPY_TILE_ROWS][ACCPY_TILE_COLSB];
    const char* error; /* the first refused instruction, or NULL */
} accpy_tile_state;

/* The 64-byte LDTILECFG memory image of a configuration (palette 1). */
static inline void accpy_tilecfg_image(const accpy_tilecfg* c, uint8_t out[64]) {
    memset(out, 0, 64);
    out[0] = c->palette;
    out[1] = c->start_row;
    for (int k = 0; k < ACCPY_TILES; ++k) {
        out[16 + 2 * k] = (uint8_t)(c->colsb[k] & 0xff);
        out[17 + 2 * k] = (uint8_t)(c->colsb[k] >> 8);
        out[48 + k] = c->rows[k];
    }
}

static inline int accpy_tile_fail(accpy_tile_state* s, const char* what) {
    if (!s->error) s->error = what;
    return 0;
}

/* LDTILECFG: palette 1, every tile within 16 rows x 64 bytes, colsb a multiple of 4. */
static inline int accpy_tile_config(accpy_tile_state* s, const accpy_tilecfg* c) {
    if (c->palette != 1) return accpy_tile_fail(s, "ldtilecfg: only palette 1 is modelled");
    for (int k = 0; k < ACCPY_TILES; ++k) {
        if (c->rows[k] > ACCPY_TILE_ROWS || c->colsb[k] > ACCPY_TILE_COLSB || (c->colsb[k] & 3))
            return accpy_tile_fail(s, "ldtilecfg: a tile exceeds 16 rows x 64 bytes (or colsb % 4 != 0)");
        if ((c->rows[k] == 0) != (c->colsb[k] == 0))
            return accpy_tile_fail(s, "ldtilecfg: a tile has rows but no columns (or the reverse)");
    }
    s->cfg = *c;
    s->configured = 1;
    memset(s->t, 0, sizeof s->t); /* LDTILECFG zeroes the tile data */
    return 1;
}

static inline void accpy_tile_release(accpy_tile_state* s) {
    memset(s, 0, sizeof *s);
}

static inline int accpy_tile_ok(accpy_tile_state* s, int t, const char* what) {
    if (!s->configured) return accpy_tile_fail(s, what);
    if (t < 0 || t >= ACCPY_TILES || s->cfg.rows[t] == 0) return accpy_tile_fail(s, what);
    return 1;
}

/* TILELOADD: row r of tile t from base + r * stride (bytes). */
static inline int accpy_tile_loadd(accpy_tile_state* s, int t, const void* base, int64_t stride) {
    if (!accpy_tile_ok(s, t, "tileloadd: tile not configured")) return 0;
    for (int r = 0; r < s->cfg.rows[t]; ++r)
        memcpy(s->t[t][r], (const uint8_t*)base + r * stride, s->cfg.colsb[t]);
    /* bytes past colsb read as zero */
    for (int r = 0; r < ACCPY_TILE_ROWS; ++r)
        if (r >= s->cfg.rows[t]) memset(s->t[t][r], 0, ACCPY_TILE_COLSB);
        else memset(s->t[t][r] + s->cfg.colsb[t], 0, ACCPY_TILE_COLSB - s->cfg.colsb[t]);
    return 1;
}

/* TILESTORED: row r of tile t to base + r * stride (bytes). */
static inline int accpy_tile_stored(accpy_tile_state* s, int t, void* base, int64_t stride) {
    if (!accpy_tile_ok(s, t, "tilestored: tile not configured")) return 0;
    for (int r = 0; r < s->cfg.rows[t]; ++r)
        memcpy((uint8_t*)base + r * stride, s->t[t][r], s->cfg.colsb[t]);
    return 1;
}

static inline int accpy_tile_zero(accpy_tile_state* s, int t) {
    if (!accpy_tile_ok(s, t, "tilezero: tile not configured")) return 0;
    memset(s->t[t], 0, sizeof s->t[t]);
    return 1;
}

/* The shapes a tile dot product needs: dst M x N (colsb 4N), a M x K (colsb 4K), b K x 4N bytes. */
static inline int accpy_tile_shapes(accpy_tile_state* s, int d, int a, int b, const char* what) {
    if (!accpy_tile_ok(s, d, what) || !accpy_tile_ok(s, a, what) || !accpy_tile_ok(s, b, what)) return 0;
    if (d == a || d == b || a == b) return accpy_tile_fail(s, what);
    const accpy_tilecfg* c = &s->cfg;
    if (c->rows[d] != c->rows[a] || c->colsb[d] != c->colsb[b] || c->colsb[a] / 4 != c->rows[b])
        return accpy_tile_fail(s, what);
    return 1;
}

static inline int32_t accpy_rd_i32(const uint8_t* p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline void accpy_wr_i32(uint8_t* p, int32_t v) { memcpy(p, &v, 4); }

/* TDPBSSD / TDPBSUD / TDPBUSD / TDPBUUD: a_signed, b_signed pick the mnemonic. */
static inline int accpy_tile_dpb(accpy_tile_state* s, int d, int a, int b, int a_signed, int b_signed) {
    if (!accpy_tile_shapes(s, d, a, b, "tdpb*d: tile shapes do not agree")) return 0;
    int M = s->cfg.rows[d], N = s->cfg.colsb[d] / 4, K = s->cfg.colsb[a] / 4;
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            uint32_t acc = (uint32_t)accpy_rd_i32(&s->t[d][m][4 * n]);
            for (int k = 0; k < K; ++k)
                for (int i = 0; i < 4; ++i) {
                    uint8_t x = s->t[a][m][4 * k + i], y = s->t[b][k][4 * n + i];
                    int32_t xv = a_signed ? (int32_t)(int8_t)x : (int32_t)x;
                    int32_t yv = b_signed ? (int32_t)(int8_t)y : (int32_t)y;
                    acc += (uint32_t)(xv * yv);
                }
            accpy_wr_i32(&s->t[d][m][4 * n], (int32_t)acc);
        }
    return 1;
}

/* ---- bfloat16 --------------------------------------------------------------------------------- */
static inline float accpy_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* VCVTNEPS2BF16 / VCVTNE2PS2BF16: round to nearest even; NaN stays a (quiet) NaN; a denormal
 * input converts to a zero of its sign (measured on hardware). */
static inline uint16_t accpy_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);         /* denormal, zero */
    uint32_t lsb = (u >> 16) & 1u;
    return (uint16_t)((u + 0x7fffu + lsb) >> 16);
}

static inline float accpy_daz(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0) u &= 0x80000000u;
    memcpy(&x, &u, 4);
    return x;
}

static inline float accpy_ftz(float x) { return accpy_daz(x); }

/* One lane of VDPBF16PS: acc + a1*b1, then + a0*b0 (the odd element first), each addition rounded
 * to nearest even; denormal inputs read as zero, denormal results flushed to zero. The products
 * are exact in float32 (8-bit by 8-bit significands). Measured bit-exact on hardware. */
static inline float accpy_bf16_dot2(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1) {
    float p0 = accpy_daz(accpy_bf16_to_f32(a0)) * accpy_daz(accpy_bf16_to_f32(b0));
    float p1 = accpy_daz(accpy_bf16_to_f32(a1)) * accpy_daz(accpy_bf16_to_f32(b1));
    acc = accpy_ftz(accpy_daz(acc) + p1);
    return accpy_ftz(acc + p0);
}

static inline uint16_t accpy_rd_u16(const uint8_t* p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline float accpy_rd_f32(const uint8_t* p) { float v; memcpy(&v, p, 4); return v; }
static inline void accpy_wr_f32(uint8_t* p, float v) { memcpy(p, &v, 4); }

/* TDPBF16PS: dst.f32[m][n] += sum over k of a.bf16[m][2k] * b.bf16[k][2n] + a.bf16[m][2k+1] * b.bf16[k][2n+1],
 * computed as the tile unit does (measured bit-exact on hardware): the products of the even
 * elements summed in k order from 0, those of the odd elements likewise, each addition in float32
 * rounded to nearest even; then even sum + odd sum, then the accumulator + that. Denormal inputs
 * read as zero, denormal results flushed to zero. (Not VDPBF16PS's order: see accpy_bf16_dot2.) */
static inline int accpy_tile_dpbf16ps(accpy_tile_state* s, int d, int a, int b) {
    if (!accpy_tile_shapes(s, d, a, b, "tdpbf16ps: tile shapes do not agree")) return 0;
    int M = s->cfg.rows[d], N = s->cfg.colsb[d] / 4, K = s->cfg.colsb[a] / 4;
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            float even = 0.0f, odd = 0.0f;
            for (int k = 0; k < K; ++k) {
                float a0 = accpy_daz(accpy_bf16_to_f32(accpy_rd_u16(&s->t[a][m][4 * k])));
                float a1 = accpy_daz(accpy_bf16_to_f32(accpy_rd_u16(&s->t[a][m][4 * k + 2])));
                float b0 = accpy_daz(accpy_bf16_to_f32(accpy_rd_u16(&s->t[b][k][4 * n])));
                float b1 = accpy_daz(accpy_bf16_to_f32(accpy_rd_u16(&s->t[b][k][4 * n + 2])));
                even = accpy_ftz(even + a0 * b0);
                odd = accpy_ftz(odd + a1 * b1);
            }
            float acc = accpy_daz(accpy_rd_f32(&s->t[d][m][4 * n]));
            accpy_wr_f32(&s->t[d][m][4 * n], accpy_ftz(acc + accpy_ftz(even + odd)));
        }
    return 1;
}

/* ---- one 512-bit register: VPDPBUSD[S], VDPBF16PS ------------------------------------------ */
/* VPDPBUSD: acc.i32[j] += sum over i < 4 of u8(a[4j+i]) * s8(b[4j+i]) (wrapping); the S form
 * saturates the final sum to int32. */
static inline void accpy_vpdpbusd(int32_t acc[16], const uint8_t a[64], const int8_t b[64], int saturate) {
    for (int j = 0; j < 16; ++j) {
        int64_t sum = 0;
        for (int i = 0; i < 4; ++i) sum += (int32_t)a[4 * j + i] * (int32_t)b[4 * j + i];
        int64_t r = (int64_t)acc[j] + sum;
        if (saturate) r = r > INT32_MAX ? INT32_MAX : r < INT32_MIN ? INT32_MIN : r;
        acc[j] = (int32_t)(uint32_t)(uint64_t)r;
    }
}

static inline void accpy_vdpbf16ps(float acc[16], const uint16_t a[32], const uint16_t b[32]) {
    for (int j = 0; j < 16; ++j) acc[j] = accpy_bf16_dot2(acc[j], a[2 * j], a[2 * j + 1], b[2 * j], b[2 * j + 1]);
}

/* ---- the runtime's request for AMX state (Linux) ------------------------------------------------ */
#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ACCPY_ARCH_REQ_XCOMP_PERM 0x1023
#define ACCPY_XFEATURE_XTILEDATA 18
/* 1 when this CPU and kernel let the process use the tile registers (asked once), else 0 with
 * `why` set. Never executes a tile instruction, so never SIGILL. */
static inline int accpy_amx_request(const char** why) {
    static int state = -1; /* -1 not asked, 0 refused, 1 granted */
    static const char* reason = 0;
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s < 0) {
        unsigned a, b, c, d;
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) {
            reason = "this CPU has no AMX tile unit (CPUID.7.0:EDX AMX-TILE / AMX-INT8)";
            s = 0;
        } else if (syscall(SYS_arch_prctl, ACCPY_ARCH_REQ_XCOMP_PERM, ACCPY_XFEATURE_XTILEDATA) != 0) {
            reason = "the kernel refused AMX state to this process (arch_prctl ARCH_REQ_XCOMP_PERM)";
            s = 0;
        } else {
            s = 1;
        }
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    if (why) *why = s ? 0 : reason;
    return s;
}
#endif

#endif /* ACCPY_X86TILE_H */
