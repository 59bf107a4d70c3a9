/* accpy_x86tile_ops.h: what kernels that use the x86 tile unit call (accpy/targets/x86tile).
 *
 * Two forms of every operation, chosen by the intrinsic the compiler emits:
 *  - accpy_amx_*: the real instructions (the kernel function is compiled with the target's
 *    amx-tile / amx-int8 / amx-bf16 features); accpy_amx_begin() asks the OS for the tile state
 *    once per process and, where the CPU or the kernel refuses, reports why as the kernel's
 *    error and returns 0 so that no tile instruction runs (never SIGILL);
 *  - accpy_amx_emu_*: the functional model of accpy_x86tile.h, one tile state per thread, bit
 *    for bit the same results on any x86-64; a refused instruction (shapes that do not agree,
 *    a tile used before configuration) becomes the kernel's error at accpy_amx_emu_end().
 */
#ifndef ACCPY_X86TILE_OPS_H
#define ACCPY_X86TILE_OPS_H

#include <stdint.h>
#include <string.h>

#include "accpy_x86tile.h"

/* The 64-byte LDTILECFG image of palette 1 with tile k of rows r_k and colsb c_k. */
static inline void accpy_amx_config_image(uint8_t image[64], const int rows[8], const int colsb[8]) {
    accpy_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int k = 0; k < ACCPY_TILES; ++k) {
        c.rows[k] = (uint8_t)rows[k];
        c.colsb[k] = (uint16_t)colsb[k];
    }
    accpy_tilecfg_image(&c, image);
}

#define ACCPY_AMX_SHAPES(r0, c0, r1, c1, r2, c2, r3, c3, r4, c4, r5, c5, r6, c6, r7, c7) \
    const int accpy_amx_rows_[8] = {r0, r1, r2, r3, r4, r5, r6, r7};                     \
    const int accpy_amx_colsb_[8] = {c0, c1, c2, c3, c4, c5, c6, c7}

/* ---- the model --------------------------------------------------------------------------------- */
static __thread accpy_tile_state accpy_amx_emu_state;

static inline int accpy_amx_emu_begin(void) {
    memset(&accpy_amx_emu_state, 0, sizeof accpy_amx_emu_state);
    return 1;
}

static inline void accpy_amx_emu_config(int r0, int c0, int r1, int c1, int r2, int c2, int r3, int c3, int r4,
                                        int c4, int r5, int c5, int r6, int c6, int r7, int c7) {
    accpy_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int rows[8] = {r0, r1, r2, r3, r4, r5, r6, r7}, colsb[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
    for (int k = 0; k < ACCPY_TILES; ++k) {
        c.rows[k] = (uint8_t)rows[k];
        c.colsb[k] = (uint16_t)colsb[k];
    }
    accpy_tile_config(&accpy_amx_emu_state, &c);
}

#define accpy_amx_emu_loadd(t, base, stride) accpy_tile_loadd(&accpy_amx_emu_state, (t), (base), (stride))
#define accpy_amx_emu_loaddt1(t, base, stride) accpy_tile_loadd(&accpy_amx_emu_state, (t), (base), (stride))
#define accpy_amx_emu_stored(t, base, stride) accpy_tile_stored(&accpy_amx_emu_state, (t), (base), (stride))
#define accpy_amx_emu_zero(t) accpy_tile_zero(&accpy_amx_emu_state, (t))
#define accpy_amx_emu_dpbssd(d, a, b) accpy_tile_dpb(&accpy_amx_emu_state, (d), (a), (b), 1, 1)
#define accpy_amx_emu_dpbsud(d, a, b) accpy_tile_dpb(&accpy_amx_emu_state, (d), (a), (b), 1, 0)
#define accpy_amx_emu_dpbusd(d, a, b) accpy_tile_dpb(&accpy_amx_emu_state, (d), (a), (b), 0, 1)
#define accpy_amx_emu_dpbuud(d, a, b) accpy_tile_dpb(&accpy_amx_emu_state, (d), (a), (b), 0, 0)
#define accpy_amx_emu_dpbf16ps(d, a, b) accpy_tile_dpbf16ps(&accpy_amx_emu_state, (d), (a), (b))

static inline void accpy_amx_emu_end(void) {
    const char* err = accpy_amx_emu_state.error;
    accpy_tile_release(&accpy_amx_emu_state);
    if (err) accpy_set_error("x86 tile unit (functional model): %s", err);
}

/* VPDPBUSD[S] / VDPBF16PS on 16 lanes in memory (acc updated in place). */
static inline void accpy_vnni_emu_dpbusd(int32_t* acc, const uint8_t* a, const int8_t* b) {
    accpy_vpdpbusd(acc, a, b, 0);
}
static inline void accpy_vnni_emu_dpbusds(int32_t* acc, const uint8_t* a, const int8_t* b) {
    accpy_vpdpbusd(acc, a, b, 1);
}
static inline void accpy_vnni_emu_dpbf16ps(float* acc, const uint16_t* a, const uint16_t* b) {
    accpy_vdpbf16ps(acc, a, b);
}

/* ---- the instructions ---------------------------------------------------------------------------- */
#if defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>

static inline int accpy_amx_begin(void) {
    const char* why = 0;
    if (!accpy_amx_request(&why)) {
        accpy_set_error("this kernel uses the x86 tile unit (AMX), which is not available: %s; build it for "
                        "the functional model instead (acc.Target.HOST(extra=((\"x86tile\", \"emulate\"),)))",
                        why);
        return 0;
    }
    return 1;
}

/* (macros: the tile numbers must be immediates, and the kernel function carries the features) */
#define accpy_amx_config(r0, c0, r1, c1, r2, c2, r3, c3, r4, c4, r5, c5, r6, c6, r7, c7)             \
    do {                                                                                              \
        uint8_t accpy_amx_image_[64] __attribute__((aligned(64)));                                   \
        ACCPY_AMX_SHAPES(r0, c0, r1, c1, r2, c2, r3, c3, r4, c4, r5, c5, r6, c6, r7, c7);             \
        accpy_amx_config_image(accpy_amx_image_, accpy_amx_rows_, accpy_amx_colsb_);                  \
        /* the compiler does not see LDTILECFG read the image: keep its stores */                     \
        __asm__ __volatile__("" : : "m"(accpy_amx_image_) : "memory");                                 \
        _tile_loadconfig(accpy_amx_image_);                                                           \
    } while (0)
/* gcc's tile load / store are asm statements that do not tell the compiler they read / write
   memory: a compiler barrier before a load (the stores filling a scratch block stay, in order) and
   after a store (the reads of the stored block come after it) */
#define accpy_amx_loadd(t, base, stride)                  \
    do {                                                   \
        __asm__ __volatile__("" : : : "memory");           \
        _tile_loadd(t, (base), (stride));                  \
    } while (0)
#define accpy_amx_loaddt1(t, base, stride)                \
    do {                                                   \
        __asm__ __volatile__("" : : : "memory");           \
        _tile_stream_loadd(t, (base), (stride));           \
    } while (0)
#define accpy_amx_stored(t, base, stride)                 \
    do {                                                   \
        _tile_stored(t, (base), (stride));                 \
        __asm__ __volatile__("" : : : "memory");           \
    } while (0)
#define accpy_amx_zero(t) _tile_zero(t)
#define accpy_amx_dpbssd(d, a, b) _tile_dpbssd(d, a, b)
#define accpy_amx_dpbsud(d, a, b) _tile_dpbsud(d, a, b)
#define accpy_amx_dpbusd(d, a, b) _tile_dpbusd(d, a, b)
#define accpy_amx_dpbuud(d, a, b) _tile_dpbuud(d, a, b)
#define accpy_amx_dpbf16ps(d, a, b) _tile_dpbf16ps(d, a, b)
#define accpy_amx_end() _tile_release()

#define accpy_vnni_dpbusd(acc, a, b) \
    _mm512_storeu_si512((acc), _mm512_dpbusd_epi32(_mm512_loadu_si512(acc), _mm512_loadu_si512(a), _mm512_loadu_si512(b)))
#define accpy_vnni_dpbusds(acc, a, b) \
    _mm512_storeu_si512((acc), _mm512_dpbusds_epi32(_mm512_loadu_si512(acc), _mm512_loadu_si512(a), _mm512_loadu_si512(b)))
#define accpy_vnni_dpbf16ps(acc, a, b)                                                                            \
    _mm512_storeu_ps((acc), _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a),               \
                                             (__m512bh)_mm512_loadu_si512(b)))
#endif

#endif /* ACCPY_X86TILE_OPS_H */
