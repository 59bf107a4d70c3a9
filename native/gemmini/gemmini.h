/* gemmini.h: Gemmini's instruction intrinsics, backed by accpy's software model of the
 * accelerator (gemmini_model.c), so that C emitted for Gemmini compiles and runs on x86.
 *
 * The macros below have the names and argument orders of Gemmini's public C header
 * (gemmini.h of gemmini-rocc-tests, the int8/int32 default configuration): code written
 * against that header compiles against this one. Instead of RoCC instructions they call
 * the model's functions (accpy_gemmini_*), which execute the instruction at once on a
 * software machine and check it strictly (see gemmini_model.c for the full semantics).
 *
 * Supported intrinsics (and their limits in this model):
 *   gemmini_extended3_config_ex(dataflow, act, sys_shift, sys_acc_scale, C_stride, A_stride,
 *                               A_transpose, B_transpose, set_only_strides)
 *   gemmini_extended2_config_ex / gemmini_extended_config_ex(dataflow, act, sys_shift,
 *                               A_stride, A_transpose, B_transpose)
 *   gemmini_config_ex(dataflow, act, sys_shift)
 *       weight-stationary only (OUTPUT_STATIONARY is an error); act NO_ACTIVATION or RELU
 *       (it only affects results written to the scratchpad, which this model rejects);
 *       sys_shift is ignored (it only matters for output-stationary); A_transpose and
 *       B_transpose are supported, not both at once (Gemmini forbids that in WS).
 *   gemmini_extended4_config_ld(stride, scale, shrunk, block_mvin_stride, id)
 *   gemmini_extended3_config_ld(stride, scale, shrunk, id)     (block stride DIM)
 *   gemmini_extended2_config_ld(stride, scale, shrunk)         (id 0)
 *   gemmini_extended_config_ld(stride, scale)                  (not shrunk, id 0)
 *   gemmini_config_ld(stride)                                  (scale MVIN_SCALE_IDENTITY)
 *   gemmini_extended2_config_st(stride, acc_act, acc_scale, pool_stride, ...)  (no pooling)
 *   gemmini_extended_config_st(stride, acc_act, acc_scale)
 *   gemmini_config_st(stride)
 *   gemmini_extended_mvin / mvin2 / mvin3(dram_addr, spad_addr, cols, rows)  (queues 0/1/2)
 *   gemmini_mvin(dram_addr, spad_addr), gemmini_block_mvin(dram_addr, spad_addr, len)
 *   gemmini_extended_mvout(dram_addr, spad_addr, cols, rows), gemmini_mvout(dram, spad)
 *   gemmini_extended_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows)
 *   gemmini_preload(BD, C), gemmini_preload_zeros(C)
 *   gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows)
 *   gemmini_extended_compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows)
 *   gemmini_compute_preloaded(A, BD), gemmini_compute_accumulated(A, BD)
 *   gemmini_fence(), gemmini_flush(skip)
 * Strides are in bytes (DRAM); scratchpad/accumulator addresses count rows (bit 31:
 * accumulator, bit 30: accumulate, bit 29: raw int32 on mvout; GARBAGE_ADDR: no operand).
 *
 * Using the model from a package (one machine per shared library):
 *   - emitted code includes this header and calls the intrinsics;
 *   - native/gemmini/gemmini_model.c is compiled ONCE, as one extra translation unit of
 *     the package's library, with -DACCPY_SPLIT_UNIT (the package's own units are then
 *     split units too: exactly one of them defines ACCPY_DEFINE_ERROR_STATE). The model
 *     reports its first error through accpy_set_error() as well as in its own state;
 *   - alternatively gemmini_model.c may be #included (once) into one generated unit after
 *     accpy_runtime.h: it then uses that unit's error state, whatever its storage;
 *   - in a package every accpy_gemmini_* symbol is hidden (ACCPY_GEMMINI_API defaults to
 *     hidden visibility under ACCPY_SPLIT_UNIT): the package exports its own wrappers, e.g.
 *     `void <pkg>_gemmini_counters(accpy_gemmini_counters_t* c) { accpy_gemmini_read_counters(c); }`,
 *     so two packages loaded in one process never share or interpose each other's machine.
 *     Define ACCPY_GEMMINI_API yourself (e.g. to the default visibility) to change this;
 *   - each kernel invocation is bracketed by accpy_gemmini_begin_call() and
 *     accpy_gemmini_end_call() (they also serialize threads: one accelerator).
 * Standalone (the Python handle accpy/targets/gemmini_model.py): compile gemmini_model.c
 * alone with -shared -fPIC; every accpy_gemmini_* function is then exported.
 */
#ifndef ACCPY_GEMMINI_H
#define ACCPY_GEMMINI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parameters of the modelled configuration (Gemmini's int8 default) ---------------- */
#define DIM 16
#define ADDR_LEN 32
#define BANK_NUM 4
#define BANK_ROWS 4096
#define ACC_ROWS 1024
#define MAX_BYTES 64
#define MAX_BLOCK_LEN (MAX_BYTES / (DIM * 1))
#define MAX_BLOCK_LEN_ACC (MAX_BYTES / (DIM * 4))

typedef int8_t elem_t;
typedef int32_t acc_t;
typedef int64_t full_t;
typedef float scale_t;
typedef uint32_t scale_t_bits;
typedef int32_t scale_acc_t;
typedef uint32_t scale_acc_t_bits;
typedef float acc_scale_t;
typedef uint32_t acc_scale_t_bits;

static const elem_t elem_t_max __attribute__((unused)) = 127;
static const elem_t elem_t_min __attribute__((unused)) = -128;

#define HAS_MVIN_SCALE
#define HAS_MVIN_ACC_SCALE
#define MVIN_SCALE_IDENTITY 1.0
#define ACC_SCALE_IDENTITY 1.0

#define GARBAGE_ADDR ((uint32_t)(-1))
#define OUTPUT_STATIONARY 0
#define WEIGHT_STATIONARY 1
#define NO_ACTIVATION 0
#define RELU 1

#define row_align(blocks) __attribute__((aligned(blocks * DIM * sizeof(elem_t))))
#define row_align_acc(blocks) __attribute__((aligned(blocks * DIM * sizeof(acc_t))))

/* Address bits (rows are counted; the low 29 bits of an accumulator address are its row). */
#define ACCPY_GEMMINI_ACC_BIT 0x80000000u
#define ACCPY_GEMMINI_ACCUMULATE_BIT 0x40000000u
#define ACCPY_GEMMINI_FULL_BIT 0x20000000u
#define ACCPY_GEMMINI_SPAD_ROWS (BANK_NUM * BANK_ROWS)

/* ---- the scalar arithmetic of the data paths (shared by the model and by CPU code) ------ */
/* Round half to even (numpy.rint), independent of the FPU rounding mode. */
static inline __attribute__((unused)) float accpy_gemmini_round_even_f32(float y) {
    float f = floorf(y), d = y - f;
    if (d > 0.5f) return f + 1.0f;
    if (d < 0.5f) return f;
    return fmodf(f, 2.0f) == 0.0f ? f : f + 1.0f;
}
static inline __attribute__((unused)) double accpy_gemmini_round_even_f64(double y) {
    double f = floor(y), d = y - f;
    if (d > 0.5) return f + 1.0;
    if (d < 0.5) return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}
/* ACC_SCALE: float32(x) * scale in float32, rounded half to even, saturated to int8. */
static inline __attribute__((unused)) int32_t accpy_gemmini_acc_scale(int32_t x, float scale) {
    float y = accpy_gemmini_round_even_f32((float)x * scale);
    return y > 127.0f ? 127 : (y < -128.0f ? -128 : (int32_t)y);
}
/* MVIN_SCALE (int8 data): the same float32 arithmetic, saturated to int8. */
static inline __attribute__((unused)) int8_t accpy_gemmini_mvin_scale(int8_t x, float scale) {
    return (int8_t)accpy_gemmini_acc_scale(x, scale);
}
/* MVIN_SCALE_ACC (int32 data into the accumulator): x * scale computed exactly (double),
 * rounded half to even, saturated to int32; the identity scale leaves every int32 intact. */
static inline __attribute__((unused)) int32_t accpy_gemmini_mvin_scale_acc(int32_t x, float scale) {
    double y = accpy_gemmini_round_even_f64((double)x * (double)scale);
    return y > 2147483647.0 ? INT32_MAX : (y < -2147483648.0 ? INT32_MIN : (int32_t)y);
}
#define ROUND_NEAR_EVEN(x) accpy_gemmini_round_even_f64((double)(x))
#define ACC_SCALE(x, scale) accpy_gemmini_acc_scale((int32_t)(x), (float)(scale))
#define MVIN_SCALE(x, scale) accpy_gemmini_mvin_scale((int8_t)(x), (float)(scale))
#define MVIN_SCALE_ACC(x, scale) accpy_gemmini_mvin_scale_acc((int32_t)(x), (float)(scale))

/* ---- the model's functions ---------------------------------------------------------------- */
#ifndef ACCPY_GEMMINI_API
#if defined(ACCPY_SPLIT_UNIT)
#define ACCPY_GEMMINI_API __attribute__((visibility("hidden")))
#else
#define ACCPY_GEMMINI_API __attribute__((visibility("default")))
#endif
#endif

/* Counters since the last reset (or accpy_gemmini_reset_counters). */
typedef struct accpy_gemmini_counters {
    /* instructions executed, by kind (an instruction that reported an error is not counted) */
    uint64_t config_ex, config_ld, config_st, mvin, mvout, preload, compute_preloaded,
        compute_accumulated, fence, flush;
    uint64_t bytes_in;  /* bytes read from DRAM by mvin (a zero-fill from NULL reads none) */
    uint64_t bytes_out; /* bytes written to DRAM by mvout */
    uint64_t macs;      /* multiply-accumulates issued: A rows x weight cols x min(A cols, weight rows) */
    uint64_t load_cycles, execute_cycles, store_cycles; /* busy cycles of each unit, all calls */
    uint64_t cycles;    /* sum over calls of max(load, execute, store) of that call */
    uint64_t calls;     /* calls closed by accpy_gemmini_end_call */
} accpy_gemmini_counters_t;

/* instructions (the macros below call these) */
ACCPY_GEMMINI_API void accpy_gemmini_config_ex(uint64_t dataflow, uint64_t act, uint64_t sys_shift, float sys_acc_scale,
                                               uint64_t c_stride, uint64_t a_stride, uint64_t a_transpose,
                                               uint64_t b_transpose, uint64_t set_only_strides);
ACCPY_GEMMINI_API void accpy_gemmini_config_ld(uint64_t stride, float scale, uint64_t shrunk, uint64_t block_stride,
                                               uint64_t id);
ACCPY_GEMMINI_API void accpy_gemmini_config_st(uint64_t stride, uint64_t act, float scale, uint64_t pool_stride);
ACCPY_GEMMINI_API void accpy_gemmini_mvin(int queue, const void* dram_addr, uint64_t spad_addr, uint64_t cols,
                                          uint64_t rows);
ACCPY_GEMMINI_API void accpy_gemmini_mvout(void* dram_addr, uint64_t spad_addr, uint64_t cols, uint64_t rows);
ACCPY_GEMMINI_API void accpy_gemmini_preload(uint64_t bd, uint64_t c, uint64_t bd_cols, uint64_t bd_rows,
                                             uint64_t c_cols, uint64_t c_rows);
ACCPY_GEMMINI_API void accpy_gemmini_compute(int accumulated, uint64_t a, uint64_t bd, uint64_t a_cols,
                                             uint64_t a_rows, uint64_t bd_cols, uint64_t bd_rows);
ACCPY_GEMMINI_API void accpy_gemmini_fence(void);
ACCPY_GEMMINI_API void accpy_gemmini_flush(uint64_t skip);

/* control: calls, reset, counters, errors */
ACCPY_GEMMINI_API void accpy_gemmini_begin_call(void);
ACCPY_GEMMINI_API void accpy_gemmini_end_call(void);
ACCPY_GEMMINI_API void accpy_gemmini_reset(void);
ACCPY_GEMMINI_API void accpy_gemmini_reset_counters(void);
ACCPY_GEMMINI_API void accpy_gemmini_read_counters(accpy_gemmini_counters_t* out);
ACCPY_GEMMINI_API const char* accpy_gemmini_error(void); /* the first error, or NULL */
ACCPY_GEMMINI_API void accpy_gemmini_clear_error(void);
/* The DRAM row stride (bytes) a mvin on `queue` (0..2) or, for queue -1, a mvout would use;
 * `shrunk` (may be NULL) receives the queue's shrunk flag. 1 if configured, else 0 (for callers
 * that check DRAM extents before issuing, such as the Python handle). */
ACCPY_GEMMINI_API int accpy_gemmini_dram_stride(int queue, int64_t* stride, int* shrunk);
/* raw rows, for tests: memory 0 = scratchpad (int8 rows), 1 = accumulator (int32 rows);
 * `valid` (optional) receives one 16-bit mask of written columns per row. 0 or -1 (range). */
ACCPY_GEMMINI_API int accpy_gemmini_read_rows(int memory, uint32_t row, uint32_t count, void* out, uint16_t* valid);
ACCPY_GEMMINI_API int accpy_gemmini_write_rows(int memory, uint32_t row, uint32_t count, const void* data);

/* ---- Gemmini's intrinsics ------------------------------------------------------------------ */
#define ACCPY_GEMMINI_DRAM(p) ((const void*)(uintptr_t)(p))

#define gemmini_extended3_config_ex(dataflow, act, sys_shift, sys_acc_scale, C_stride, A_stride, A_transpose, \
                                    B_transpose, set_only_strides)                                            \
    accpy_gemmini_config_ex((uint64_t)(dataflow), (uint64_t)(act), (uint64_t)(sys_shift), (float)(sys_acc_scale), \
                            (uint64_t)(C_stride), (uint64_t)(A_stride), (uint64_t)(A_transpose),                 \
                            (uint64_t)(B_transpose), (uint64_t)(set_only_strides))
#define gemmini_extended2_config_ex(dataflow, act, sys_shift, A_stride, A_transpose, B_transpose) \
    gemmini_extended3_config_ex(dataflow, act, sys_shift, ACC_SCALE_IDENTITY, 1, A_stride, A_transpose, B_transpose, 0)
#define gemmini_extended_config_ex(dataflow, act, sys_shift, A_stride, A_transpose, B_transpose) \
    gemmini_extended2_config_ex(dataflow, act, sys_shift, A_stride, A_transpose, B_transpose)
#define gemmini_config_ex(dataflow, act, sys_shift) gemmini_extended_config_ex(dataflow, act, sys_shift, 1, 0, 0)

#define gemmini_extended4_config_ld(stride, scale, shrunk, block_mvin_stride, id)                      \
    accpy_gemmini_config_ld((uint64_t)(stride), (float)(scale), (uint64_t)(shrunk), (uint64_t)(block_mvin_stride), \
                            (uint64_t)(id))
#define gemmini_extended3_config_ld(stride, scale, shrunk, id) gemmini_extended4_config_ld(stride, scale, shrunk, DIM, id)
#define gemmini_extended2_config_ld(stride, scale, shrunk) gemmini_extended3_config_ld(stride, scale, shrunk, 0)
#define gemmini_extended_config_ld(stride, scale) gemmini_extended2_config_ld(stride, scale, false)
#define gemmini_config_ld(stride) gemmini_extended_config_ld(stride, MVIN_SCALE_IDENTITY)

#define gemmini_extended2_config_st(stride, acc_act, acc_scale, pool_stride, pool_size, pool_out_dim, porows, pocols, \
                                    orows, ocols, upad, lpad)                                                      \
    accpy_gemmini_config_st((uint64_t)(stride), (uint64_t)(acc_act), (float)(acc_scale), (uint64_t)(pool_stride))
#define gemmini_extended_config_st(stride, acc_act, acc_scale) \
    gemmini_extended2_config_st(stride, acc_act, acc_scale, 0, 0, 0, 0, 0, 0, 0, 0, 0)
#define gemmini_config_st(stride) gemmini_extended_config_st(stride, NO_ACTIVATION, ACC_SCALE_IDENTITY)

#define gemmini_extended_mvin(dram_addr, spad_addr, cols, rows) \
    accpy_gemmini_mvin(0, ACCPY_GEMMINI_DRAM(dram_addr), (uint64_t)(spad_addr), (uint64_t)(cols), (uint64_t)(rows))
#define gemmini_extended_mvin2(dram_addr, spad_addr, cols, rows) \
    accpy_gemmini_mvin(1, ACCPY_GEMMINI_DRAM(dram_addr), (uint64_t)(spad_addr), (uint64_t)(cols), (uint64_t)(rows))
#define gemmini_extended_mvin3(dram_addr, spad_addr, cols, rows) \
    accpy_gemmini_mvin(2, ACCPY_GEMMINI_DRAM(dram_addr), (uint64_t)(spad_addr), (uint64_t)(cols), (uint64_t)(rows))
#define gemmini_block_mvin(dram_addr, spad_addr, len) gemmini_extended_mvin(dram_addr, spad_addr, (len) * DIM, DIM)
#define gemmini_mvin(dram_addr, spad_addr) gemmini_extended_mvin(dram_addr, spad_addr, DIM, DIM)

#define gemmini_extended_mvout(dram_addr, spad_addr, cols, rows) \
    accpy_gemmini_mvout((void*)(uintptr_t)(dram_addr), (uint64_t)(spad_addr), (uint64_t)(cols), (uint64_t)(rows))
#define gemmini_mvout(dram_addr, spad_addr) gemmini_extended_mvout(dram_addr, spad_addr, DIM, DIM)

#define gemmini_extended_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows)                                  \
    accpy_gemmini_preload((uint64_t)(BD), (uint64_t)(C), (uint64_t)(BD_cols), (uint64_t)(BD_rows), \
                          (uint64_t)(C_cols), (uint64_t)(C_rows))
#define gemmini_preload(BD, C) gemmini_extended_preload(BD, C, DIM, DIM, DIM, DIM)
#define gemmini_preload_zeros(C) gemmini_preload(GARBAGE_ADDR, C)

#define gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows)                           \
    accpy_gemmini_compute(0, (uint64_t)(A), (uint64_t)(BD), (uint64_t)(A_cols), (uint64_t)(A_rows), \
                          (uint64_t)(BD_cols), (uint64_t)(BD_rows))
#define gemmini_extended_compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows)                         \
    accpy_gemmini_compute(1, (uint64_t)(A), (uint64_t)(BD), (uint64_t)(A_cols), (uint64_t)(A_rows), \
                          (uint64_t)(BD_cols), (uint64_t)(BD_rows))
#define gemmini_compute_preloaded(A, BD) gemmini_extended_compute_preloaded(A, BD, DIM, DIM, DIM, DIM)
#define gemmini_compute_accumulated(A, BD) gemmini_extended_compute_accumulated(A, BD, DIM, DIM, DIM, DIM)

#define gemmini_fence() accpy_gemmini_fence()
#define gemmini_flush(skip) accpy_gemmini_flush((uint64_t)(skip))

#ifdef __cplusplus
}
#endif

#endif /* ACCPY_GEMMINI_H */
