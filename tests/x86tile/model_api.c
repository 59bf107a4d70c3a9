/* A thin C API over the tile model for tests/test_x86tile_model.py (loaded with ctypes). */
#include "accpy_x86tile.h"

/* One tile dot product: C (M x N int32 / float32, row stride sc bytes) op= A (M x 4*K4 bytes, stride
 * sa) . B (K4 x 4*N bytes, stride sb); kind 0..3: TDPBSSD, TDPBSUD, TDPBUSD, TDPBUUD; 4: TDPBF16PS.
 * Returns NULL, or the model's error (shapes refused). */
const char* tile_dp(int kind, int M, int K4, int N, const uint8_t* A, long sa, const uint8_t* B, long sb,
                    uint8_t* C, long sc) {
    accpy_tile_state s = {0};
    accpy_tilecfg cfg = {1, 0, {0}, {0}};
    cfg.rows[0] = (uint8_t)M; cfg.colsb[0] = (uint16_t)(4 * N);
    cfg.rows[1] = (uint8_t)M; cfg.colsb[1] = (uint16_t)(4 * K4);
    cfg.rows[2] = (uint8_t)K4; cfg.colsb[2] = (uint16_t)(4 * N);
    if (!accpy_tile_config(&s, &cfg)) return s.error;
    accpy_tile_loadd(&s, 0, C, sc);
    accpy_tile_loadd(&s, 1, A, sa);
    accpy_tile_loadd(&s, 2, B, sb);
    if (kind < 4) accpy_tile_dpb(&s, 0, 1, 2, kind == 0 || kind == 1, kind == 0 || kind == 2);
    else accpy_tile_dpbf16ps(&s, 0, 1, 2);
    if (s.error) return s.error;
    accpy_tile_stored(&s, 0, C, sc);
    return 0;
}

/* A dot product on tiles configured as given (rows, colsb per tile 0..2): the shape checks. */
const char* tile_shapes(const int rows[3], const int colsb[3]) {
    accpy_tile_state s = {0};
    accpy_tilecfg cfg = {1, 0, {0}, {0}};
    for (int k = 0; k < 3; ++k) { cfg.rows[k] = (uint8_t)rows[k]; cfg.colsb[k] = (uint16_t)colsb[k]; }
    if (!accpy_tile_config(&s, &cfg)) return s.error;
    accpy_tile_dpb(&s, 0, 1, 2, 1, 1);
    return s.error;
}

void f32_to_bf16(const float* x, uint16_t* out, long n) {
    for (long k = 0; k < n; ++k) out[k] = accpy_f32_to_bf16(x[k]);
}

void vpdpbusd(int32_t acc[16], const uint8_t a[64], const int8_t b[64], int saturate) {
    accpy_vpdpbusd(acc, a, b, saturate);
}

void vdpbf16ps(float acc[16], const uint16_t a[32], const uint16_t b[32]) { accpy_vdpbf16ps(acc, a, b); }
