/* accpy_mma.cuh: tensor-core fragments of PTX mma.sync.aligned.m16n8k16.row.col in CUDA C (sm_80
 * and later), with the names and contracts of accpy_mma.cl.h, its OpenCL emulation.
 *
 * What it guarantees: D (16x8) = A (16x16) @ B (16x8, given K x N) + C (16x8) by one mma.sync
 * through inline PTX; the loads and stores put into each lane exactly the elements the
 * instruction expects of it (the maps of accpy/targets/gpu/mma.py, from the PTX ISA; groupID =
 * lane >> 2, tig = lane % 4), packed into 32-bit registers as it reads them: two 16-bit values per
 * register (the lower slot in the low half), four 8-bit values per register (slot 4r+j in byte j).
 * No ldmatrix, no shared memory, no barrier: the instruction is warp-synchronous.
 *
 * Warps: lane = linear thread id % 32 (accpy_mma_lane(), accpy_mma_warp()); the `lane` passed to
 * the loads and stores must be that lane, since mma.sync reads each lane's own registers; all 32
 * lanes of the warp call accpy_mma_sync_<t> together (converged).
 *
 * Element types <t> and their storage / accumulator types:
 *   f16  : __half (accpy_f16_t)                        -> float  (.f32.f16.f16.f32)
 *   bf16 : unsigned short bfloat16 encodings (accpy_bf16_t) -> float (.f32.bf16.bf16.f32)
 *   s8   : signed char                                 -> int    (.s32.s8.s8.s32)
 *   u8   : unsigned char                               -> int    (.s32.u8.u8.s32)
 * Functions (both _global and _local variants take generic pointers, so shared memory works too):
 *   accpy_mma_load_a_<t>_<as>(frag*, const T* base, int ld, unsigned lane)   row-major A, M x K
 *   accpy_mma_load_b_<t>_<as>(frag*, const T* base, int ld, unsigned lane)   row-major B, K x N
 *   accpy_mma_load_c_<t>_<as>(frag*, const ACC* base, int ld, unsigned lane) row-major C, M x N
 *   accpy_mma_store_c_<t>_<as>(const frag*, ACC* base, int ld, unsigned lane)
 *   accpy_mma_fill_c_<t> / set_c / clear_c / scale_c / relu_c / relu_nc_c (Accera's MMAFragmentOp)
 *   accpy_mma_sync_<t>(d*, const a*, const b*, const c*, accpy_mma_scratch_<t>* scratch,
 *                      unsigned warp, unsigned lane): `d` may be `c`; `scratch` is not used here
 *   (the OpenCL emulation needs it; pass 0: ACCPY_MMA_NEEDS_SCRATCH is 0 and the scratch types
 *   are incomplete so that none is allocated).
 *   Integer results wrap in 32 bits (no .satfinite); the order in which the hardware sums a float
 *   D element is unspecified, so it agrees with the emulation within a rounding tolerance.
 * Tiles of any layout, as accpy's kernels call them (the same names and contracts as in
 * accpy_mma.cl.h; fragments are arrays of ACCPY_MMA_WORDS_A / _B / _C 32-bit words):
 *   accpy_mma_tile_load_{a,b,c}_<t>_<as>(unsigned* f, const void* base, long long rs, long long cs,
 *                                       unsigned lane): element (r, c) of the tile at base[r*rs + c*cs]
 *   accpy_mma_tile_store_c_<t>_<as>(const unsigned* f, void* base, long long rs, long long cs, unsigned lane)
 *   accpy_mma_tile_sync_<t>(unsigned* d, const unsigned* a, const unsigned* b, void* scratch (unused),
 *                           unsigned warp, unsigned lane): d = a @ b + d
 *   accpy_mma_tile_{set,scale}_c_<t>(unsigned* f, ACC v), accpy_mma_tile_{relu,relu_nc}_c_<t>(unsigned* f)
 */
#ifndef ACCPY_MMA_CUH
#define ACCPY_MMA_CUH

#include <cuda_fp16.h>

#define ACCPY_MMA_FN __device__ __forceinline__
#define ACCPY_MMA_WARP 32
#define ACCPY_MMA_NEEDS_SCRATCH 0
#define ACCPY_MMA_SCRATCH_BYTES_F16 0
#define ACCPY_MMA_SCRATCH_BYTES_BF16 0
#define ACCPY_MMA_SCRATCH_BYTES_S8 0
#define ACCPY_MMA_SCRATCH_BYTES_U8 0
typedef __half accpy_f16_t;
typedef unsigned short accpy_bf16_t;

/* -- warps of the block ------------------------------------------------------------------------ */
ACCPY_MMA_FN unsigned accpy_mma_linear_id(void) {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
ACCPY_MMA_FN unsigned accpy_mma_lane(void) { return accpy_mma_linear_id() % ACCPY_MMA_WARP; }
ACCPY_MMA_FN unsigned accpy_mma_warp(void) { return accpy_mma_linear_id() / ACCPY_MMA_WARP; }

/* -- ownership: slot i of lane -> (row, col) as int2 (x = row, y = col) ------------------------- */
ACCPY_MMA_FN int2 accpy_mma_coord_a16(unsigned lane, unsigned i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return make_int2(g + 8 * ((s >> 1) & 1), t * 2 + (s & 1) + 8 * (s >> 2));
}
ACCPY_MMA_FN int2 accpy_mma_coord_b16(unsigned lane, unsigned i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return make_int2(t * 2 + (s & 1) + 8 * (s >> 1), g);
}
ACCPY_MMA_FN int2 accpy_mma_coord_a8(unsigned lane, unsigned i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return make_int2(g + 8 * (s >> 2), t * 4 + (s & 3));
}
ACCPY_MMA_FN int2 accpy_mma_coord_b8(unsigned lane, unsigned i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return make_int2(t * 4 + s, g);
}
ACCPY_MMA_FN int2 accpy_mma_coord_c(unsigned lane, unsigned i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return make_int2(g + 8 * (s >> 1), t * 2 + (s & 1));
}

/* -- element bits: the raw 16 or 8 bits a register lane holds ------------------------------------ */
#define ACCPY_MMA_BITS_f16(p, off) ((unsigned)__half_as_ushort((p)[(off)]))
#define ACCPY_MMA_BITS_bf16(p, off) ((unsigned)(p)[(off)])
#define ACCPY_MMA_BITS_s8(p, off) ((unsigned)(unsigned char)(p)[(off)])
#define ACCPY_MMA_BITS_u8(p, off) ((unsigned)(p)[(off)])

/* -- fragments of one element type: registers as mma.sync reads them --------------------------- */
#define ACCPY_MMA_TYPES(T, ACC, AREGS, BREGS)                                                       \
    typedef struct { unsigned x[AREGS]; } accpy_mma_a_##T;                                          \
    typedef struct { unsigned x[BREGS]; } accpy_mma_b_##T;                                          \
    typedef struct { ACC x[4]; } accpy_mma_c_##T;                                                   \
    typedef struct accpy_mma_scratch_##T accpy_mma_scratch_##T;

/* register r of a fragment of `n` slots packed `per` to a register (per = 32 / bits) */
#define ACCPY_MMA_PACK(T, ROLE, BITS, f, base, ld, lane, n)                                         \
    for (unsigned r = 0; r < (n) / (32 / BITS); ++r) {                                              \
        unsigned word = 0;                                                                          \
        for (unsigned j = 0; j < 32 / BITS; ++j) {                                                  \
            int2 rc = accpy_mma_coord_##ROLE##BITS(lane, r * (32 / BITS) + j);                      \
            word |= ACCPY_MMA_BITS_##T(base, rc.x * (ld) + rc.y) << (BITS * j);                     \
        }                                                                                           \
        (f)->x[r] = word;                                                                           \
    }

#define ACCPY_MMA_MEMORY(T, ST, ACC, BITS, SUF)                                                     \
    ACCPY_MMA_FN void accpy_mma_load_a_##T##_##SUF(accpy_mma_a_##T* f, const ST* base, int ld,      \
                                                    unsigned lane) {                                \
        ACCPY_MMA_PACK(T, a, BITS, f, base, ld, lane, 8)                                            \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_load_b_##T##_##SUF(accpy_mma_b_##T* f, const ST* base, int ld,      \
                                                    unsigned lane) {                                \
        ACCPY_MMA_PACK(T, b, BITS, f, base, ld, lane, 4)                                            \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_load_c_##T##_##SUF(accpy_mma_c_##T* f, const ACC* base, int ld,     \
                                                    unsigned lane) {                                \
        for (unsigned i = 0; i < 4; ++i) {                                                          \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            f->x[i] = base[rc.x * ld + rc.y];                                                       \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_store_c_##T##_##SUF(const accpy_mma_c_##T* f, ACC* base, int ld,    \
                                                     unsigned lane) {                               \
        for (unsigned i = 0; i < 4; ++i) {                                                          \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            base[rc.x * ld + rc.y] = f->x[i];                                                       \
        }                                                                                           \
    }

/* element-wise operations on C fragments (Accera's MMAFragmentOp) */
#define ACCPY_MMA_ELEMENTWISE(T, ACC)                                                               \
    ACCPY_MMA_FN void accpy_mma_fill_c_##T(accpy_mma_c_##T* f, ACC v) {                             \
        for (unsigned i = 0; i < 4; ++i) f->x[i] = v;                                               \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_set_c_##T(accpy_mma_c_##T* f, ACC v) { accpy_mma_fill_c_##T(f, v); } \
    ACCPY_MMA_FN void accpy_mma_clear_c_##T(accpy_mma_c_##T* f) { accpy_mma_fill_c_##T(f, (ACC)0); } \
    ACCPY_MMA_FN void accpy_mma_scale_c_##T(accpy_mma_c_##T* f, ACC v) {                            \
        for (unsigned i = 0; i < 4; ++i) f->x[i] = f->x[i] * v;                                     \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_relu_c_##T(accpy_mma_c_##T* f) {                                    \
        for (unsigned i = 0; i < 4; ++i) f->x[i] = f->x[i] > (ACC)0 ? f->x[i] : (ACC)0;             \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_relu_nc_c_##T(accpy_mma_c_##T* f) {                                 \
        for (unsigned i = 0; i < 4; ++i) f->x[i] = f->x[i] * (ACC)(f->x[i] > (ACC)0);               \
    }

/* mma.sync with 16-bit inputs (4 A registers, 2 B registers, f32 accumulators) */
#define ACCPY_MMA_SYNC16(T, PTX)                                                                    \
    ACCPY_MMA_FN void accpy_mma_sync_##T(accpy_mma_c_##T* d, const accpy_mma_a_##T* a,              \
                                         const accpy_mma_b_##T* b, const accpy_mma_c_##T* c,        \
                                         accpy_mma_scratch_##T* scratch, unsigned warp,             \
                                         unsigned lane) {                                           \
        (void)scratch; (void)warp; (void)lane;                                                      \
        float c0 = c->x[0], c1 = c->x[1], c2 = c->x[2], c3 = c->x[3], d0, d1, d2, d3;               \
        asm volatile(PTX " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"   \
                     : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)                                       \
                     : "r"(a->x[0]), "r"(a->x[1]), "r"(a->x[2]), "r"(a->x[3]), "r"(b->x[0]),        \
                       "r"(b->x[1]), "f"(c0), "f"(c1), "f"(c2), "f"(c3));                           \
        d->x[0] = d0; d->x[1] = d1; d->x[2] = d2; d->x[3] = d3;                                     \
    }

/* mma.sync with 8-bit inputs (2 A registers, 1 B register, s32 accumulators) */
#define ACCPY_MMA_SYNC8(T, PTX)                                                                     \
    ACCPY_MMA_FN void accpy_mma_sync_##T(accpy_mma_c_##T* d, const accpy_mma_a_##T* a,              \
                                         const accpy_mma_b_##T* b, const accpy_mma_c_##T* c,        \
                                         accpy_mma_scratch_##T* scratch, unsigned warp,             \
                                         unsigned lane) {                                           \
        (void)scratch; (void)warp; (void)lane;                                                      \
        int c0 = c->x[0], c1 = c->x[1], c2 = c->x[2], c3 = c->x[3], d0, d1, d2, d3;                 \
        asm volatile(PTX " {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"                  \
                     : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)                                       \
                     : "r"(a->x[0]), "r"(a->x[1]), "r"(b->x[0]), "r"(c0), "r"(c1), "r"(c2),         \
                       "r"(c3));                                                                    \
        d->x[0] = d0; d->x[1] = d1; d->x[2] = d2; d->x[3] = d3;                                     \
    }

#define ACCPY_MMA_ALL(T, ST, ACC, BITS, AREGS, BREGS)                                               \
    ACCPY_MMA_TYPES(T, ACC, AREGS, BREGS)                                                           \
    ACCPY_MMA_MEMORY(T, ST, ACC, BITS, global)                                                      \
    ACCPY_MMA_MEMORY(T, ST, ACC, BITS, local)                                                       \
    ACCPY_MMA_ELEMENTWISE(T, ACC)

ACCPY_MMA_ALL(f16, __half, float, 16, 4, 2)
ACCPY_MMA_ALL(bf16, unsigned short, float, 16, 4, 2)
ACCPY_MMA_ALL(s8, signed char, int, 8, 2, 1)
ACCPY_MMA_ALL(u8, unsigned char, int, 8, 2, 1)
ACCPY_MMA_SYNC16(f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
ACCPY_MMA_SYNC16(bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
ACCPY_MMA_SYNC8(s8, "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32")
ACCPY_MMA_SYNC8(u8, "mma.sync.aligned.m16n8k16.row.col.s32.u8.u8.s32")

/* -- tiles of any layout on word-array fragments (accpy's kernels) ----------------------------- */
#define ACCPY_MMA_WORDS_A 8
#define ACCPY_MMA_WORDS_B 4
#define ACCPY_MMA_WORDS_C 4

#define ACCPY_MMA_PACK_RC(T, ROLE, BITS, f, base, rs, cs, lane, n)                                  \
    for (unsigned r = 0; r < (n) / (32 / BITS); ++r) {                                              \
        unsigned word = 0;                                                                          \
        for (unsigned j = 0; j < 32 / BITS; ++j) {                                                  \
            int2 rc = accpy_mma_coord_##ROLE##BITS(lane, r * (32 / BITS) + j);                      \
            word |= ACCPY_MMA_BITS_##T(base, rc.x * (rs) + rc.y * (cs)) << (BITS * j);              \
        }                                                                                           \
        (f)->x[r] = word;                                                                           \
    }

#define ACCPY_MMA_TILE_MEMORY(T, ST, ACC, BITS, SUF)                                                \
    ACCPY_MMA_FN void accpy_mma_tile_load_a_##T##_##SUF(unsigned* f, const void* base, long long rs, \
                                                         long long cs, unsigned lane) {             \
        accpy_mma_a_##T* fr = (accpy_mma_a_##T*)f;                                                  \
        const ST* p = (const ST*)base;                                                              \
        ACCPY_MMA_PACK_RC(T, a, BITS, fr, p, rs, cs, lane, 8)                                       \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_load_b_##T##_##SUF(unsigned* f, const void* base, long long rs, \
                                                         long long cs, unsigned lane) {             \
        accpy_mma_b_##T* fr = (accpy_mma_b_##T*)f;                                                  \
        const ST* p = (const ST*)base;                                                              \
        ACCPY_MMA_PACK_RC(T, b, BITS, fr, p, rs, cs, lane, 4)                                       \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_load_c_##T##_##SUF(unsigned* f, const void* base, long long rs, \
                                                         long long cs, unsigned lane) {             \
        accpy_mma_c_##T* fr = (accpy_mma_c_##T*)f;                                                  \
        const ACC* p = (const ACC*)base;                                                            \
        for (unsigned i = 0; i < 4; ++i) {                                                          \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            fr->x[i] = p[rc.x * rs + rc.y * cs];                                                    \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_store_c_##T##_##SUF(const unsigned* f, void* base, long long rs, \
                                                          long long cs, unsigned lane) {            \
        const accpy_mma_c_##T* fr = (const accpy_mma_c_##T*)f;                                      \
        ACC* p = (ACC*)base;                                                                        \
        for (unsigned i = 0; i < 4; ++i) {                                                          \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            p[rc.x * rs + rc.y * cs] = fr->x[i];                                                    \
        }                                                                                           \
    }

#define ACCPY_MMA_TILE_OPS(T, ACC)                                                                  \
    ACCPY_MMA_FN void accpy_mma_tile_sync_##T(unsigned* d, const unsigned* a, const unsigned* b,    \
                                              void* scratch, unsigned warp, unsigned lane) {        \
        (void)scratch;                                                                              \
        accpy_mma_sync_##T((accpy_mma_c_##T*)d, (const accpy_mma_a_##T*)a,                          \
                           (const accpy_mma_b_##T*)b, (const accpy_mma_c_##T*)d, 0, warp, lane);    \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_set_c_##T(unsigned* f, ACC v) {                                \
        accpy_mma_set_c_##T((accpy_mma_c_##T*)f, v);                                                \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_scale_c_##T(unsigned* f, ACC v) {                              \
        accpy_mma_scale_c_##T((accpy_mma_c_##T*)f, v);                                              \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_relu_c_##T(unsigned* f) {                                      \
        accpy_mma_relu_c_##T((accpy_mma_c_##T*)f);                                                  \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_relu_nc_c_##T(unsigned* f) {                                   \
        accpy_mma_relu_nc_c_##T((accpy_mma_c_##T*)f);                                               \
    }

#define ACCPY_MMA_TILE_ALL(T, ST, ACC, BITS)                                                        \
    ACCPY_MMA_TILE_MEMORY(T, ST, ACC, BITS, global)                                                 \
    ACCPY_MMA_TILE_MEMORY(T, ST, ACC, BITS, local)                                                  \
    ACCPY_MMA_TILE_OPS(T, ACC)

ACCPY_MMA_TILE_ALL(f16, __half, float, 16)
ACCPY_MMA_TILE_ALL(bf16, unsigned short, float, 16)
ACCPY_MMA_TILE_ALL(s8, signed char, int, 8)
ACCPY_MMA_TILE_ALL(u8, unsigned char, int, 8)

#endif /* ACCPY_MMA_CUH */
