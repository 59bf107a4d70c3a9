/* gemmini_model.c: accpy's functional model of Gemmini (one 16x16 int8 systolic array in the
 * weight-stationary dataflow, its scratchpad and accumulator, three load queues, a store unit),
 * behind the intrinsics of gemmini.h. It runs emitted Gemmini code on any host, bit-exactly,
 * strictly (every misuse is an error, never a silent wrong answer or a memory corruption), and
 * counts instructions, bytes, MACs and cycles (a fixed model, below) for utilization figures.
 *
 * BUILDING (see also the header comment of gemmini.h)
 *   package:    cc -c gemmini_model.c -DACCPY_SPLIT_UNIT ...   one extra unit of the package's
 *               library; the state below lives in this unit only (one machine per library), all
 *               accpy_gemmini_* symbols are hidden; errors also go to accpy_set_error().
 *   standalone: cc -shared -fPIC gemmini_model.c -o libaccpy_gemmini.so   (the Python handle)
 *
 * MACHINE
 *   scratchpad  BANK_NUM x BANK_ROWS = 16384 rows of 16 int8     (addresses 0 .. 16383)
 *   accumulator ACC_ROWS = 1024 rows of 16 int32                  (bit 31 set; row = bits 28..0)
 *   An address is a 32-bit row number: bit 31 = accumulator, bit 30 = accumulate into the
 *   accumulator instead of overwriting, bit 29 = read raw int32 on an accumulator mvout (bits
 *   30 and 29 are ignored where Gemmini ignores them: bit 30 on reads, bit 29 on writes).
 *   GARBAGE_ADDR (0xFFFFFFFF; a 64-bit all-ones value too) = no operand. A scratchpad address
 *   with bit 30 or 29 set is out of range (an error). Every row element carries a "written"
 *   bit: reading an element never written since the reset (or since accpy_gemmini_begin_call)
 *   is an error.
 *
 * INSTRUCTIONS (what each does; any violated condition is an error, see ERRORS)
 *   config_ex   dataflow must be WEIGHT_STATIONARY; act NO_ACTIVATION/RELU (kept, no effect:
 *               it applies to results written to the scratchpad, which are rejected);
 *               sys_shift (< 32) ignored (output-stationary only); sys_acc_scale must be
 *               ACC_SCALE_IDENTITY (the output scale is config_st's); A_stride (row step of A
 *               in the scratchpad) and C_stride (row step of C in the accumulator) <= 0xFFFF;
 *               A_transpose / B_transpose supported, not both (Gemmini forbids it in WS);
 *               set_only_strides updates A_stride and C_stride only.
 *   config_ld   queue `id` (0, 1, 2 = mvin, mvin2, mvin3): DRAM row stride in bytes, scale
 *               (finite float), shrunk (accumulator mvins read int8 instead of int32), block
 *               stride (scratchpad rows between the 16-column blocks of a wide mvin, <= 0xFFFF).
 *   config_st   DRAM row stride in bytes, activation (NO_ACTIVATION/RELU), output scale (finite
 *               float); max-pooling (pool_stride != 0) is not modelled: an error.
 *   mvin        rows x cols from DRAM (row r at dram + r*stride) into the scratchpad or the
 *               accumulator; 1 <= rows <= DIM; 1 <= cols <= MAX_BYTES / element size (64 int8,
 *               16 int32); column c goes to row addr + r + (c / DIM) * block_stride, column
 *               c % DIM. A NULL dram address loads zeros. Values are scaled by the queue's
 *               scale: int8 data (scratchpad, or a shrunk accumulator mvin) as MVIN_SCALE
 *               (float32 product, round half to even, saturate to int8); int32 data as
 *               MVIN_SCALE_ACC (exact product, round half to even, saturate to int32; the
 *               identity leaves all int32 values intact). This is the choice of Gemmini
 *               configurations that scale accumulator mvins (HAS_MVIN_ACC_SCALE, as Exo's
 *               build does); with scale 1.0 it equals the unscaled default configuration.
 *               An accumulator address with bit 30 adds the values (wrapping int32) to rows
 *               that must have been written.
 *   mvout       rows x cols to DRAM (row r at dram + r*stride of config_st), 1 <= rows <= DIM;
 *               cols <= 64 (int8 out) or 16 (raw int32), column c read from row
 *               addr + r + (c / DIM) * DIM. From the scratchpad: int8 copied. From the
 *               accumulator: ACC_SCALE (float32(x) * scale in float32, round half to even,
 *               saturate to int8), then ReLU if configured; raw int32 when bit 29 is set.
 *               The DRAM address must not be NULL.
 *   preload     latches the weight operand B (BD, BD_rows x BD_cols <= 16 x 16, scratchpad) and
 *               the output C (an accumulator address, C_rows x C_cols <= 16 x 16, or GARBAGE:
 *               no output). B is read by the next compute_preloaded (a garbage B gives zero
 *               weights, as in Gemmini). Each compute needs its own preload, and a preload
 *               must be consumed by a compute before the next one.
 *   compute_preloaded   loads the latched B into the array (element [i][j] = spad[B + i][j],
 *               transposed: spad[B + j][i]; zero outside BD_rows x BD_cols), then
 *               result = D + A.W, where A (A_rows x A_cols <= 16 x 16, scratchpad, row i at
 *               A + A_stride*i; transposed: a[i][k] = spad[A + A_stride*k][i]) and D (the BD
 *               operand: a scratchpad tile BD_rows x BD_cols, sign-extended, or GARBAGE = 0)
 *               are zero outside their extents; int32 arithmetic. The C_rows x C_cols corner of
 *               the result goes to accumulator rows C + C_stride*i: overwritten, or (bit 30)
 *               added with int32 wrap-around to elements that must have been written.
 *   compute_accumulated the same, with the weights already in the array (the WS way to reuse
 *               them: preload(GARBAGE_ADDR, C) + compute_accumulated). Its preload must have a
 *               garbage B (a B would be ignored, so it is an error), and weights must have been
 *               loaded in this call.
 *   fence, flush        counted; no effect (every instruction completes at once).
 *
 * CALLS. accpy_gemmini_begin_call() / accpy_gemmini_end_call() bracket one kernel invocation.
 *   begin_call takes the machine's lock (threads calling kernels are serialized; nested
 *   begin/end pairs on one thread are allowed), clears a pending error (the previous call
 *   has reported it), marks every scratchpad/accumulator element as never written (contents
 *   are kept: a kernel must not read what an earlier call left), forgets the configuration
 *   (each call must issue config_ex / config_ld per queue / config_st before using them)
 *   and the weights in the array. end_call reports an unconsumed preload, closes the call's
 *   cycle count and releases the lock. Instructions outside calls act on the machine as is.
 *
 * CYCLE MODEL (fixed: utilization figures must stay comparable between versions)
 *   Three units work in parallel: load (mvin), execute (preload, compute), store (mvout).
 *   - every config_ex / config_ld / config_st costs 1 cycle on each of the three units;
 *   - mvin costs ceil(rows * cols * element bytes / 16) load cycles (element bytes: 4 for an
 *     accumulator mvin that is not shrunk, else 1; a zero-fill from NULL costs the same);
 *   - mvout costs ceil(rows * cols * element bytes / 16) store cycles (4 when raw int32, else 1);
 *   - preload costs 16 execute cycles, or 1 when its B operand is GARBAGE_ADDR;
 *   - compute_preloaded / compute_accumulated cost 16 execute cycles, whatever the tile size;
 *   - fence and flush cost nothing.
 *   cycles = sum over calls of max(load, execute, store) accumulated during the call; the
 *   instructions issued outside any call form their own span, closed by the next begin_call,
 *   and counted as open in the reported cycles until then.
 *   utilization = macs / (cycles * DIM * DIM).
 *
 * ERRORS. An instruction checks everything before changing anything: an instruction that
 *   fails has no effect at all. The first error is recorded as text ("gemmini <instruction>:
 *   what, where, what was expected"); after it every instruction is a no-op until
 *   accpy_gemmini_reset, accpy_gemmini_clear_error or the next begin_call. Inside a package
 *   the error also goes to accpy_set_error(), so the kernel's caller sees it.
 *   DRAM pointers cannot be checked here: the caller guarantees they cover the moved rows.
 */
#include "gemmini.h"

#if defined(ACCPY_SPLIT_UNIT) && !defined(ACCPY_RUNTIME_H)
#include "../accpy_runtime.h"
#endif

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SPAD_ROWS ACCPY_GEMMINI_SPAD_ROWS
#define ALL_COLS 0xFFFFu
#define ADDR_MASK_ACC 0x1FFFFFFFu

typedef struct {
    int configured;
    int64_t stride; /* bytes */
    float scale;
    int shrunk;
    uint32_t block_stride;
} load_queue_t;

typedef struct {
    int8_t spad[SPAD_ROWS][DIM];
    int32_t acc[ACC_ROWS][DIM];
    uint16_t spad_valid[SPAD_ROWS]; /* bit c: column c written */
    uint16_t acc_valid[ACC_ROWS];

    /* execute configuration */
    int ex_configured;
    int sys_act;
    uint32_t a_stride, c_stride;
    int a_transpose, b_transpose;
    /* load queues and store configuration */
    load_queue_t ld[3];
    int st_configured;
    int64_t st_stride;
    int st_act;
    float st_scale;

    /* the array's weights */
    int weights_loaded;
    int8_t weights[DIM][DIM];
    uint32_t w_rows, w_cols;
    /* the latched preload */
    int preload_pending;
    uint32_t pre_b, pre_c;
    uint32_t pre_b_rows, pre_b_cols, pre_c_rows, pre_c_cols;

    /* counters; the open span's unit cycles */
    accpy_gemmini_counters_t counters;
    uint64_t span_load, span_execute, span_store;

    /* first error */
    int error;
    char error_text[512];
} machine_t;

/* One machine per library: this unit is compiled once into it. */
static machine_t M = {
    .a_stride = 1,
    .c_stride = 1,
    .ld = {{0, 0, 1.0f, 0, DIM}, {0, 0, 1.0f, 0, DIM}, {0, 0, 1.0f, 0, DIM}},
    .st_scale = 1.0f,
};
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int call_depth; /* this thread's open calls (> 0: it holds call_lock) */

/* ---- errors ------------------------------------------------------------------------------ */
__attribute__((format(printf, 2, 3))) static void fail(const char* instr, const char* fmt, ...) {
    if (M.error) return;
    int n = snprintf(M.error_text, sizeof M.error_text, "gemmini %s: ", instr);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof M.error_text) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(M.error_text + n, sizeof M.error_text - (size_t)n, fmt, ap);
        va_end(ap);
    }
    M.error = 1;
#ifdef ACCPY_RUNTIME_H
    accpy_set_error("%s", M.error_text);
#endif
}

static const char* queue_name(int q) { return q == 0 ? "mvin" : (q == 1 ? "mvin2" : "mvin3"); }

static int is_garbage(uint64_t addr) { return addr == (uint64_t)GARBAGE_ADDR || addr == UINT64_MAX; }

/* An operand address must fit the 32-bit address field. */
static int check_addr_width(const char* instr, const char* what, uint64_t addr) {
    if (addr > 0xFFFFFFFFu) {
        fail(instr, "%s address 0x%llx does not fit in 32 bits (rows count; bit 31 = accumulator)", what,
             (unsigned long long)addr);
        return 0;
    }
    return 1;
}

static int check_count(const char* instr, const char* what, uint64_t n, uint64_t limit, const char* why) {
    if (n < 1 || n > limit) {
        fail(instr, "%s = %llu, expected 1..%llu (%s)", what, (unsigned long long)n, (unsigned long long)limit, why);
        return 0;
    }
    return 1;
}

/* Rows [first, first + step*(count-1)] (+ `extra` rows) of the scratchpad must exist. */
static int check_spad_range(const char* instr, const char* what, uint64_t addr, uint64_t last_row) {
    if (addr >= SPAD_ROWS || last_row >= SPAD_ROWS) {
        fail(instr, "%s: scratchpad rows %llu..%llu (address 0x%llx) are out of range (the scratchpad has rows "
             "0..%d%s)", what, (unsigned long long)addr, (unsigned long long)last_row, (unsigned long long)addr,
             SPAD_ROWS - 1,
             (addr & (ACCPY_GEMMINI_ACCUMULATE_BIT | ACCPY_GEMMINI_FULL_BIT)) && addr < ACCPY_GEMMINI_ACC_BIT
                 ? "; bits 30/29 only have a meaning on accumulator addresses"
                 : "");
        return 0;
    }
    return 1;
}

static int check_acc_range(const char* instr, const char* what, uint64_t addr, uint64_t row, uint64_t last_row) {
    if (row >= ACC_ROWS || last_row >= ACC_ROWS) {
        fail(instr, "%s: accumulator rows %llu..%llu (address 0x%llx) are out of range (the accumulator has rows "
             "0..%d)", what, (unsigned long long)row, (unsigned long long)last_row, (unsigned long long)addr,
             ACC_ROWS - 1);
        return 0;
    }
    return 1;
}

static uint16_t col_mask(uint32_t cols) { return cols >= DIM ? ALL_COLS : (uint16_t)((1u << cols) - 1u); }

static int check_written(const char* instr, const char* what, int acc, uint32_t row, uint16_t need) {
    uint16_t have = acc ? M.acc_valid[row] : M.spad_valid[row];
    if ((have & need) != need) {
        int col = 0;
        while (!((need & ~have) >> col & 1)) ++col;
        fail(instr, "%s reads %s row %u column %d, which was never written%s", what, acc ? "accumulator" : "scratchpad",
             row, col, acc ? " (zero it first, or write it without the accumulate bit)" : "");
        return 0;
    }
    return 1;
}

static int usable(const char* instr) {
    (void)instr;
    return !M.error;
}

static uint64_t ceil16(uint64_t bytes) { return (bytes + 15) / 16; }

static void charge_config(void) {
    M.span_load += 1;
    M.span_execute += 1;
    M.span_store += 1;
    M.counters.load_cycles += 1;
    M.counters.execute_cycles += 1;
    M.counters.store_cycles += 1;
}

static int check_scale(const char* instr, const char* what, float scale) {
    if (!isfinite(scale)) {
        fail(instr, "%s %g is not a finite float", what, (double)scale);
        return 0;
    }
    return 1;
}

/* ---- configuration ------------------------------------------------------------------------- */
void accpy_gemmini_config_ex(uint64_t dataflow, uint64_t act, uint64_t sys_shift, float sys_acc_scale,
                             uint64_t c_stride, uint64_t a_stride, uint64_t a_transpose, uint64_t b_transpose,
                             uint64_t set_only_strides) {
    const char* I = "config_ex";
    if (!usable(I)) return;
    if (a_stride > 0xFFFF || c_stride > 0xFFFF) {
        fail(I, "A_stride = %llu, C_stride = %llu: expected 0..65535 (16-bit fields)", (unsigned long long)a_stride,
             (unsigned long long)c_stride);
        return;
    }
    if (!set_only_strides) {
        if (dataflow == OUTPUT_STATIONARY) {
            fail(I, "dataflow OUTPUT_STATIONARY is not modelled; use WEIGHT_STATIONARY (1)");
            return;
        }
        if (dataflow != WEIGHT_STATIONARY) {
            fail(I, "dataflow = %llu, expected WEIGHT_STATIONARY (1)", (unsigned long long)dataflow);
            return;
        }
        if (act != NO_ACTIVATION && act != RELU) {
            fail(I, "act = %llu, expected NO_ACTIVATION (0) or RELU (1)", (unsigned long long)act);
            return;
        }
        if (sys_shift >= 32) {
            fail(I, "sys_shift = %llu, expected 0..31", (unsigned long long)sys_shift);
            return;
        }
        if (sys_acc_scale != 1.0f) {
            fail(I, "sys_acc_scale = %g, expected ACC_SCALE_IDENTITY (the output scale is set by config_st)",
                 (double)sys_acc_scale);
            return;
        }
        if (a_transpose > 1 || b_transpose > 1) {
            fail(I, "A_transpose = %llu, B_transpose = %llu, expected 0 or 1", (unsigned long long)a_transpose,
                 (unsigned long long)b_transpose);
            return;
        }
        if (a_transpose && b_transpose) {
            fail(I, "A_transpose and B_transpose together are not permitted in the weight-stationary dataflow");
            return;
        }
        M.sys_act = (int)act;
        M.a_transpose = (int)a_transpose;
        M.b_transpose = (int)b_transpose;
        M.ex_configured = 1;
    }
    M.a_stride = (uint32_t)a_stride;
    M.c_stride = (uint32_t)c_stride;
    M.counters.config_ex++;
    charge_config();
}

void accpy_gemmini_config_ld(uint64_t stride, float scale, uint64_t shrunk, uint64_t block_stride, uint64_t id) {
    const char* I = "config_ld";
    if (!usable(I)) return;
    if (id > 2) {
        fail(I, "id = %llu, expected 0, 1 or 2 (the queues of mvin, mvin2, mvin3)", (unsigned long long)id);
        return;
    }
    if (!check_scale(I, "scale", scale)) return;
    if (shrunk > 1) {
        fail(I, "shrunk = %llu, expected 0 or 1", (unsigned long long)shrunk);
        return;
    }
    if (block_stride > 0xFFFF) {
        fail(I, "block_mvin_stride = %llu, expected 0..65535", (unsigned long long)block_stride);
        return;
    }
    load_queue_t* q = &M.ld[id];
    q->configured = 1;
    q->stride = (int64_t)stride;
    q->scale = scale;
    q->shrunk = (int)shrunk;
    q->block_stride = (uint32_t)block_stride;
    M.counters.config_ld++;
    charge_config();
}

void accpy_gemmini_config_st(uint64_t stride, uint64_t act, float scale, uint64_t pool_stride) {
    const char* I = "config_st";
    if (!usable(I)) return;
    if (act != NO_ACTIVATION && act != RELU) {
        fail(I, "acc_act = %llu, expected NO_ACTIVATION (0) or RELU (1)", (unsigned long long)act);
        return;
    }
    if (!check_scale(I, "acc_scale", scale)) return;
    if (pool_stride != 0) {
        fail(I, "pool_stride = %llu: max-pooling on mvout is not modelled (expected 0)",
             (unsigned long long)pool_stride);
        return;
    }
    M.st_configured = 1;
    M.st_stride = (int64_t)stride;
    M.st_act = (int)act;
    M.st_scale = scale;
    M.counters.config_st++;
    charge_config();
}

/* ---- data movement ------------------------------------------------------------------------- */
void accpy_gemmini_mvin(int queue, const void* dram_addr, uint64_t addr, uint64_t cols, uint64_t rows) {
    if (queue < 0 || queue > 2) {
        fail("mvin", "queue %d does not exist (expected 0, 1, 2: mvin, mvin2, mvin3)", queue);
        return;
    }
    const char* I = queue_name(queue);
    if (!usable(I)) return;
    const load_queue_t* q = &M.ld[queue];
    if (!q->configured) {
        fail(I, "load queue %d is not configured (issue gemmini_extended3_config_ld(stride, scale, shrunk, %d) first)",
             queue, queue);
        return;
    }
    if (is_garbage(addr)) {
        fail(I, "the destination is GARBAGE_ADDR (expected a scratchpad or accumulator address)");
        return;
    }
    if (!check_addr_width(I, "destination", addr)) return;
    const int acc = (addr & ACCPY_GEMMINI_ACC_BIT) != 0;
    const int accumulate = acc && (addr & ACCPY_GEMMINI_ACCUMULATE_BIT);
    const uint64_t esize = acc && !q->shrunk ? 4 : 1;
    const uint64_t max_cols = MAX_BYTES / esize;
    if (!check_count(I, "rows", rows, DIM, "at most DIM rows per mvin")) return;
    if (!check_count(I, "cols", cols, max_cols,
                     esize == 4 ? "MAX_BYTES / 4: int32 data into the accumulator"
                                : "MAX_BYTES / 1: int8 data, at most MAX_BLOCK_LEN blocks of DIM columns"))
        return;
    const uint64_t blocks = (cols + DIM - 1) / DIM;
    const uint64_t row0 = acc ? (addr & ADDR_MASK_ACC) : addr;
    const uint64_t last = row0 + (blocks - 1) * q->block_stride + rows - 1;
    if (acc ? !check_acc_range(I, "destination", addr, row0, last) : !check_spad_range(I, "destination", addr, last))
        return;
    if (accumulate) {
        for (uint64_t b = 0; b < blocks; ++b) {
            uint32_t bc = (uint32_t)(cols - b * DIM < DIM ? cols - b * DIM : DIM);
            for (uint64_t r = 0; r < rows; ++r)
                if (!check_written(I, "an accumulating mvin", 1, (uint32_t)(row0 + b * q->block_stride + r),
                                   col_mask(bc)))
                    return;
        }
    }
    const unsigned char* src = (const unsigned char*)dram_addr;
    for (uint64_t r = 0; r < rows; ++r) {
        for (uint64_t c = 0; c < cols; ++c) {
            const uint32_t row = (uint32_t)(row0 + (c / DIM) * q->block_stride + r);
            const uint32_t col = (uint32_t)(c % DIM);
            const unsigned char* p = src ? src + (int64_t)r * q->stride + (int64_t)(c * esize) : NULL;
            if (!acc) {
                int8_t v = 0;
                if (p) {
                    memcpy(&v, p, 1);
                    if (q->scale != 1.0f) v = accpy_gemmini_mvin_scale(v, q->scale);
                }
                M.spad[row][col] = v;
                M.spad_valid[row] |= (uint16_t)(1u << col);
            } else {
                int32_t v = 0;
                if (p && q->shrunk) {
                    int8_t b8;
                    memcpy(&b8, p, 1);
                    v = q->scale != 1.0f ? accpy_gemmini_mvin_scale(b8, q->scale) : b8;
                } else if (p) {
                    memcpy(&v, p, 4);
                    if (q->scale != 1.0f) v = accpy_gemmini_mvin_scale_acc(v, q->scale);
                }
                if (accumulate)
                    M.acc[row][col] = (int32_t)((uint32_t)M.acc[row][col] + (uint32_t)v);
                else
                    M.acc[row][col] = v;
                M.acc_valid[row] |= (uint16_t)(1u << col);
            }
        }
    }
    const uint64_t bytes = rows * cols * esize;
    M.counters.mvin++;
    if (src) M.counters.bytes_in += bytes;
    M.span_load += ceil16(bytes);
    M.counters.load_cycles += ceil16(bytes);
}

void accpy_gemmini_mvout(void* dram_addr, uint64_t addr, uint64_t cols, uint64_t rows) {
    const char* I = "mvout";
    if (!usable(I)) return;
    if (!M.st_configured) {
        fail(I, "the store unit is not configured (issue gemmini_extended_config_st(stride, act, scale) first)");
        return;
    }
    if (dram_addr == NULL) {
        fail(I, "the DRAM address is NULL");
        return;
    }
    if (is_garbage(addr)) {
        fail(I, "the source is GARBAGE_ADDR (expected a scratchpad or accumulator address)");
        return;
    }
    if (!check_addr_width(I, "source", addr)) return;
    const int acc = (addr & ACCPY_GEMMINI_ACC_BIT) != 0;
    const int raw = acc && (addr & ACCPY_GEMMINI_FULL_BIT);
    const uint64_t esize = raw ? 4 : 1;
    if (!check_count(I, "rows", rows, DIM, "at most DIM rows per mvout")) return;
    if (!check_count(I, "cols", cols, MAX_BYTES / esize,
                     raw ? "MAX_BYTES / 4: raw int32 rows" : "MAX_BYTES / 1: int8 data"))
        return;
    const uint64_t blocks = (cols + DIM - 1) / DIM;
    const uint64_t row0 = acc ? (addr & ADDR_MASK_ACC) : addr;
    const uint64_t last = row0 + (blocks - 1) * DIM + rows - 1;
    if (acc ? !check_acc_range(I, "source", addr, row0, last) : !check_spad_range(I, "source", addr, last)) return;
    for (uint64_t b = 0; b < blocks; ++b) {
        uint32_t bc = (uint32_t)(cols - b * DIM < DIM ? cols - b * DIM : DIM);
        for (uint64_t r = 0; r < rows; ++r)
            if (!check_written(I, "the source", acc, (uint32_t)(row0 + b * DIM + r), col_mask(bc))) return;
    }
    unsigned char* dst = (unsigned char*)dram_addr;
    for (uint64_t r = 0; r < rows; ++r) {
        for (uint64_t c = 0; c < cols; ++c) {
            const uint32_t row = (uint32_t)(row0 + (c / DIM) * DIM + r);
            const uint32_t col = (uint32_t)(c % DIM);
            unsigned char* p = dst + (int64_t)r * M.st_stride + (int64_t)(c * esize);
            if (!acc) {
                memcpy(p, &M.spad[row][col], 1);
            } else if (raw) {
                memcpy(p, &M.acc[row][col], 4);
            } else {
                int32_t y = accpy_gemmini_acc_scale(M.acc[row][col], M.st_scale);
                if (M.st_act == RELU && y < 0) y = 0;
                int8_t v = (int8_t)y;
                memcpy(p, &v, 1);
            }
        }
    }
    const uint64_t bytes = rows * cols * esize;
    M.counters.mvout++;
    M.counters.bytes_out += bytes;
    M.span_store += ceil16(bytes);
    M.counters.store_cycles += ceil16(bytes);
}

/* ---- execute ------------------------------------------------------------------------------- */
static int require_ex(const char* I) {
    if (!M.ex_configured) {
        fail(I, "the execute unit is not configured (issue gemmini_extended_config_ex(WEIGHT_STATIONARY, ...) first)");
        return 0;
    }
    return 1;
}

void accpy_gemmini_preload(uint64_t bd, uint64_t c, uint64_t bd_cols, uint64_t bd_rows, uint64_t c_cols,
                           uint64_t c_rows) {
    const char* I = "preload";
    if (!usable(I)) return;
    if (!require_ex(I)) return;
    if (M.preload_pending) {
        fail(I, "the previous preload (B 0x%x, C 0x%x) was not consumed by a compute", M.pre_b, M.pre_c);
        return;
    }
    const int b_garbage = is_garbage(bd), c_garbage = is_garbage(c);
    if (!b_garbage) {
        if (!check_addr_width(I, "B", bd)) return;
        if (bd & ACCPY_GEMMINI_ACC_BIT) {
            fail(I, "B at 0x%llx is an accumulator address; weights are read from the scratchpad",
                 (unsigned long long)bd);
            return;
        }
        if (!check_count(I, "BD_rows", bd_rows, DIM, "a tile is at most DIM x DIM")) return;
        if (!check_count(I, "BD_cols", bd_cols, DIM, "a tile is at most DIM x DIM")) return;
        const uint64_t span = M.b_transpose ? bd_cols : bd_rows;
        if (!check_spad_range(I, "B", bd, bd + span - 1)) return;
    }
    if (!c_garbage) {
        if (!check_addr_width(I, "C", c)) return;
        if (!(c & ACCPY_GEMMINI_ACC_BIT)) {
            fail(I, "C at 0x%llx is a scratchpad address; this model writes results to the accumulator only (set "
                 "bit 31)", (unsigned long long)c);
            return;
        }
        if (!check_count(I, "C_rows", c_rows, DIM, "a tile is at most DIM x DIM")) return;
        if (!check_count(I, "C_cols", c_cols, DIM, "a tile is at most DIM x DIM")) return;
        const uint64_t row0 = c & ADDR_MASK_ACC;
        if (!check_acc_range(I, "C", c, row0, row0 + (uint64_t)M.c_stride * (c_rows - 1))) return;
    }
    M.preload_pending = 1;
    M.pre_b = b_garbage ? GARBAGE_ADDR : (uint32_t)bd;
    M.pre_c = c_garbage ? GARBAGE_ADDR : (uint32_t)c;
    M.pre_b_rows = b_garbage ? 0 : (uint32_t)bd_rows;
    M.pre_b_cols = b_garbage ? 0 : (uint32_t)bd_cols;
    M.pre_c_rows = c_garbage ? 0 : (uint32_t)c_rows;
    M.pre_c_cols = c_garbage ? 0 : (uint32_t)c_cols;
    M.counters.preload++;
    const uint64_t cost = b_garbage ? 1 : DIM;
    M.span_execute += cost;
    M.counters.execute_cycles += cost;
}

void accpy_gemmini_compute(int accumulated, uint64_t a, uint64_t bd, uint64_t a_cols, uint64_t a_rows,
                           uint64_t bd_cols, uint64_t bd_rows) {
    const char* I = accumulated ? "compute_accumulated" : "compute_preloaded";
    if (!usable(I)) return;
    if (!require_ex(I)) return;
    if (!M.preload_pending) {
        fail(I, "no preload since the last compute (each compute needs a preload giving B and C)");
        return;
    }
    if (accumulated) {
        if (M.pre_b != GARBAGE_ADDR) {
            fail(I, "its preload gave B 0x%x, which compute_accumulated ignores (it keeps the weights in the array); "
                 "use compute_preloaded, or preload GARBAGE_ADDR to reuse the weights", M.pre_b);
            return;
        }
        if (!M.weights_loaded) {
            fail(I, "no weights in the array (no compute_preloaded since the reset or the start of the call)");
            return;
        }
    }
    /* A */
    if (is_garbage(a)) {
        fail(I, "A is GARBAGE_ADDR (expected a scratchpad address)");
        return;
    }
    if (!check_addr_width(I, "A", a)) return;
    if (a & ACCPY_GEMMINI_ACC_BIT) {
        fail(I, "A at 0x%llx is an accumulator address; A is read from the scratchpad", (unsigned long long)a);
        return;
    }
    if (!check_count(I, "A_rows", a_rows, DIM, "a tile is at most DIM x DIM")) return;
    if (!check_count(I, "A_cols", a_cols, DIM, "a tile is at most DIM x DIM")) return;
    /* A's scratchpad rows: k (transposed) or i steps of A_stride; columns: i or k */
    const uint64_t a_lines = M.a_transpose ? a_cols : a_rows, a_width = M.a_transpose ? a_rows : a_cols;
    if (!check_spad_range(I, "A", a, a + (uint64_t)M.a_stride * (a_lines - 1))) return;
    for (uint64_t t = 0; t < a_lines; ++t)
        if (!check_written(I, "A", 0, (uint32_t)(a + M.a_stride * t), col_mask((uint32_t)a_width))) return;
    /* D */
    const int d_garbage = is_garbage(bd);
    if (!d_garbage) {
        if (!check_addr_width(I, "D", bd)) return;
        if (bd & ACCPY_GEMMINI_ACC_BIT) {
            fail(I, "D at 0x%llx is an accumulator address; D is read from the scratchpad (or GARBAGE_ADDR for none)",
                 (unsigned long long)bd);
            return;
        }
        if (!check_count(I, "BD_rows", bd_rows, DIM, "a tile is at most DIM x DIM")) return;
        if (!check_count(I, "BD_cols", bd_cols, DIM, "a tile is at most DIM x DIM")) return;
        if (!check_spad_range(I, "D", bd, bd + bd_rows - 1)) return;
        for (uint64_t r = 0; r < bd_rows; ++r)
            if (!check_written(I, "D", 0, (uint32_t)(bd + r), col_mask((uint32_t)bd_cols))) return;
    }
    /* B (read now: the preload only latched its address) */
    const int load_b = !accumulated && M.pre_b != GARBAGE_ADDR;
    if (load_b) {
        const uint32_t lines = M.b_transpose ? M.pre_b_cols : M.pre_b_rows;
        const uint32_t width = M.b_transpose ? M.pre_b_rows : M.pre_b_cols;
        for (uint32_t t = 0; t < lines; ++t)
            if (!check_written(I, "B (latched by preload)", 0, M.pre_b + t, col_mask(width))) return;
    }
    /* C, when accumulating */
    const int c_out = M.pre_c != GARBAGE_ADDR;
    const uint32_t c_row0 = M.pre_c & ADDR_MASK_ACC;
    const int c_accumulate = c_out && (M.pre_c & ACCPY_GEMMINI_ACCUMULATE_BIT);
    if (c_accumulate)
        for (uint32_t i = 0; i < M.pre_c_rows; ++i)
            if (!check_written(I, "C (accumulating)", 1, c_row0 + M.c_stride * i, col_mask(M.pre_c_cols))) return;

    /* execute */
    if (!accumulated) {
        memset(M.weights, 0, sizeof M.weights);
        M.w_rows = M.w_cols = 0;
        if (load_b) {
            for (uint32_t i = 0; i < M.pre_b_rows; ++i)
                for (uint32_t j = 0; j < M.pre_b_cols; ++j)
                    M.weights[i][j] = M.b_transpose ? M.spad[M.pre_b + j][i] : M.spad[M.pre_b + i][j];
            M.w_rows = M.pre_b_rows;
            M.w_cols = M.pre_b_cols;
        }
        M.weights_loaded = 1;
    }
    int8_t A[DIM][DIM];
    memset(A, 0, sizeof A);
    for (uint32_t i = 0; i < a_rows; ++i)
        for (uint32_t k = 0; k < a_cols; ++k)
            A[i][k] = M.a_transpose ? M.spad[a + M.a_stride * k][i] : M.spad[a + M.a_stride * i][k];
    int32_t R[DIM][DIM];
    for (uint32_t i = 0; i < DIM; ++i)
        for (uint32_t j = 0; j < DIM; ++j) {
            int32_t s = (!d_garbage && i < bd_rows && j < bd_cols) ? M.spad[bd + i][j] : 0;
            for (uint32_t k = 0; k < DIM; ++k) s += (int32_t)A[i][k] * (int32_t)M.weights[k][j];
            R[i][j] = s; /* |s| <= 128 + 16 * 128 * 128: no overflow */
        }
    if (c_out) {
        for (uint32_t i = 0; i < M.pre_c_rows; ++i) {
            const uint32_t row = c_row0 + M.c_stride * i;
            for (uint32_t j = 0; j < M.pre_c_cols; ++j) {
                if (c_accumulate)
                    M.acc[row][j] = (int32_t)((uint32_t)M.acc[row][j] + (uint32_t)R[i][j]);
                else
                    M.acc[row][j] = R[i][j];
            }
            M.acc_valid[row] |= col_mask(M.pre_c_cols);
        }
    }
    M.preload_pending = 0;
    const uint64_t k_used = a_cols < M.w_rows ? a_cols : M.w_rows;
    M.counters.macs += a_rows * M.w_cols * k_used;
    if (accumulated)
        M.counters.compute_accumulated++;
    else
        M.counters.compute_preloaded++;
    M.span_execute += DIM;
    M.counters.execute_cycles += DIM;
}

void accpy_gemmini_fence(void) {
    if (!usable("fence")) return;
    M.counters.fence++;
}

void accpy_gemmini_flush(uint64_t skip) {
    (void)skip;
    if (!usable("flush")) return;
    M.counters.flush++;
}

/* ---- control ------------------------------------------------------------------------------- */
static void close_span(void) {
    uint64_t m = M.span_load;
    if (M.span_execute > m) m = M.span_execute;
    if (M.span_store > m) m = M.span_store;
    M.counters.cycles += m;
    M.span_load = M.span_execute = M.span_store = 0;
}

void accpy_gemmini_begin_call(void) {
    if (call_depth > 0) {
        ++call_depth; /* nested: part of the enclosing call */
        return;
    }
    pthread_mutex_lock(&call_lock);
    call_depth = 1;
    close_span(); /* instructions issued outside calls */
    M.error = 0;
    M.error_text[0] = 0;
    memset(M.spad_valid, 0, sizeof M.spad_valid);
    memset(M.acc_valid, 0, sizeof M.acc_valid);
    M.ex_configured = 0;
    M.st_configured = 0;
    for (int q = 0; q < 3; ++q) M.ld[q].configured = 0;
    M.weights_loaded = 0;
    M.preload_pending = 0;
}

void accpy_gemmini_end_call(void) {
    if (call_depth <= 0) {
        fail("end_call", "no call is open on this thread (accpy_gemmini_begin_call was not called)");
        return;
    }
    if (--call_depth > 0) return;
    if (M.preload_pending) {
        fail("end_call", "the call ended with a preload (B 0x%x, C 0x%x) that no compute consumed", M.pre_b, M.pre_c);
        M.preload_pending = 0;
    }
    close_span();
    M.counters.calls++;
    pthread_mutex_unlock(&call_lock);
}

void accpy_gemmini_reset_counters(void) {
    memset(&M.counters, 0, sizeof M.counters);
    M.span_load = M.span_execute = M.span_store = 0;
}

void accpy_gemmini_reset(void) {
    memset(&M, 0, sizeof M);
    for (int q = 0; q < 3; ++q) {
        M.ld[q].scale = 1.0f;
        M.ld[q].block_stride = DIM;
    }
    M.st_scale = 1.0f;
    M.a_stride = M.c_stride = 1;
}

void accpy_gemmini_read_counters(accpy_gemmini_counters_t* out) {
    *out = M.counters;
    uint64_t m = M.span_load;
    if (M.span_execute > m) m = M.span_execute;
    if (M.span_store > m) m = M.span_store;
    out->cycles += m; /* the open span */
}

const char* accpy_gemmini_error(void) { return M.error ? M.error_text : NULL; }

void accpy_gemmini_clear_error(void) {
    M.error = 0;
    M.error_text[0] = 0;
}

int accpy_gemmini_dram_stride(int queue, int64_t* stride, int* shrunk) {
    if (queue == -1) {
        *stride = M.st_stride;
        if (shrunk) *shrunk = 0;
        return M.st_configured;
    }
    if (queue < 0 || queue > 2) return 0;
    *stride = M.ld[queue].stride;
    if (shrunk) *shrunk = M.ld[queue].shrunk;
    return M.ld[queue].configured;
}

int accpy_gemmini_read_rows(int memory, uint32_t row, uint32_t count, void* out, uint16_t* valid) {
    const uint32_t limit = memory ? ACC_ROWS : SPAD_ROWS;
    if ((memory != 0 && memory != 1) || row >= limit || count > limit - row) return -1;
    if (memory) {
        memcpy(out, M.acc[row], (size_t)count * sizeof M.acc[0]);
        if (valid) memcpy(valid, &M.acc_valid[row], (size_t)count * sizeof(uint16_t));
    } else {
        memcpy(out, M.spad[row], (size_t)count * sizeof M.spad[0]);
        if (valid) memcpy(valid, &M.spad_valid[row], (size_t)count * sizeof(uint16_t));
    }
    return 0;
}

int accpy_gemmini_write_rows(int memory, uint32_t row, uint32_t count, const void* data) {
    const uint32_t limit = memory ? ACC_ROWS : SPAD_ROWS;
    if ((memory != 0 && memory != 1) || row >= limit || count > limit - row) return -1;
    if (memory) {
        memcpy(M.acc[row], data, (size_t)count * sizeof M.acc[0]);
        for (uint32_t r = 0; r < count; ++r) M.acc_valid[row + r] = ALL_COLS;
    } else {
        memcpy(M.spad[row], data, (size_t)count * sizeof M.spad[0]);
        for (uint32_t r = 0; r < count; ++r) M.spad_valid[row + r] = ALL_COLS;
    }
    return 0;
}
