/* accpy_mma.cl.h: tensor-core fragments of PTX mma.sync.aligned.m16n8k16.row.col, emulated in
 * OpenCL C 1.2 (no extension needed: halves go through vload_half, bfloat16 is kept as the ushort
 * upper half of a float, so PoCL on a CPU without cl_khr_fp16 runs it).
 *
 * What it guarantees: D (16x8) = A (16x16) @ B (16x8, given K x N) + C (16x8), with every lane of
 * an emulated warp holding exactly the elements ("slots") the hardware gives that lane (the maps
 * of accpy/targets/gpu/mma.py, from the PTX ISA; groupID = lane >> 2, tig = lane % 4). A kernel
 * that loads or stores a fragment with another layout gets a wrong answer, as on a GPU.
 *
 * Warps: 32 consecutive work-items of a work-group by linear local id form a warp (lane = linear
 * id % 32, warp = linear id / 32; accpy_mma_lane() / accpy_mma_warp()); the work-group size must
 * be a multiple of 32.
 *
 * Element types <t> and their storage / accumulator types:
 *   f16  : half (accpy_f16_t, read with vload_half)   -> float
 *   bf16 : ushort bfloat16 encodings (accpy_bf16_t)    -> float
 *   s8   : char                                        -> int
 *   u8   : uchar                                       -> int
 * Fragments (private structs): accpy_mma_a_<t> (8 slots), accpy_mma_b_<t> (4), accpy_mma_c_<t> (4,
 * the accumulator type; C and D share it).
 *
 * Functions, each in a _global and a _local variant for the address space of the tile:
 *   accpy_mma_load_a_<t>_<as>(frag*, const <as> T* base, int ld, uint lane)  row-major A, M x K
 *   accpy_mma_load_b_<t>_<as>(frag*, const <as> T* base, int ld, uint lane)  row-major B, K x N
 *   accpy_mma_load_c_<t>_<as>(frag*, const <as> ACC* base, int ld, uint lane) row-major C, M x N
 *   accpy_mma_store_c_<t>_<as>(const frag*, <as> ACC* base, int ld, uint lane)
 * `base` points at element (0, 0) of the tile, `ld` is the distance between its rows.
 * Element-wise on C fragments (Accera's MMAFragmentOp): accpy_mma_fill_c_<t>(frag*, v) and its
 * alias set_c, clear_c (0), scale_c(frag*, v), relu_c (max(0, x)), relu_nc_c (x * (x > 0)).
 *
 * accpy_mma_sync_<t>(d*, const a*, const b*, const c*, __local accpy_mma_scratch_<t>* scratch,
 *                    uint warp, uint lane)
 *   Contract: every work-item of the work-group calls it together (it holds two barriers), each
 *   with its own warp and lane; `scratch` is an array with one accpy_mma_scratch_<t> per warp
 *   (ACCPY_MMA_SCRATCH_BYTES_<T> bytes each) in __local memory; `d` may be `c`. Each lane writes
 *   its A and B slots into its warp's scratch, barrier, computes its own D slots, barrier.
 *   Arithmetic: each D element is C + a[r][0]*b[0][c] + ... + a[r][15]*b[15][c], summed in that
 *   order. Products of halves (or bfloat16s) are exact in float, so fused or not they agree; the
 *   hardware's summation order is unspecified, so floating results match a GPU within a rounding
 *   tolerance. 8-bit inputs: products and sums in 32-bit two's complement, wrapping, bit-exact
 *   with the hardware (mma without .satfinite).
 *
 * Tiles of any layout, as accpy's kernels call them (fragments declared as arrays of 32-bit words:
 * ACCPY_MMA_WORDS_A / _B / _C words hold any type's fragment of that role):
 *   accpy_mma_tile_load_{a,b,c}_<t>_<as>(uint* frag, const <as> void* base, long rs, long cs, uint lane)
 *   accpy_mma_tile_store_c_<t>_<as>(const uint* frag, <as> void* base, long rs, long cs, uint lane)
 *     element (r, c) of the tile is base[r * rs + c * cs] (row-major: rs = ld, cs = 1)
 *   accpy_mma_tile_sync_<t>(uint* d, const uint* a, const uint* b, __local void* scratch, uint warp,
 *                           uint lane): d = a @ b + d, as accpy_mma_sync_<t>
 *   accpy_mma_tile_{set,scale}_c_<t>(uint* frag, ACC v), accpy_mma_tile_{relu,relu_nc}_c_<t>(uint*)
 */
#ifndef ACCPY_MMA_CL_H
#define ACCPY_MMA_CL_H

#ifndef ACCPY_MMA_FN
#define ACCPY_MMA_FN static inline
#endif

#define ACCPY_MMA_WARP 32
#define ACCPY_MMA_NEEDS_SCRATCH 1
#define accpy_f16_t half
typedef ushort accpy_bf16_t;

/* -- warps of the work-group ------------------------------------------------------------------ */
ACCPY_MMA_FN uint accpy_mma_linear_id(void) {
    return (uint)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2)));
}
ACCPY_MMA_FN uint accpy_mma_lane(void) { return accpy_mma_linear_id() % ACCPY_MMA_WARP; }
ACCPY_MMA_FN uint accpy_mma_warp(void) { return accpy_mma_linear_id() / ACCPY_MMA_WARP; }

/* -- ownership: slot i of lane -> (row, col) as int2 (x = row, y = col) ------------------------- */
ACCPY_MMA_FN int2 accpy_mma_coord_a16(uint lane, uint i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return (int2)(g + 8 * ((s >> 1) & 1), t * 2 + (s & 1) + 8 * (s >> 2));
}
ACCPY_MMA_FN int2 accpy_mma_coord_b16(uint lane, uint i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return (int2)(t * 2 + (s & 1) + 8 * (s >> 1), g);
}
ACCPY_MMA_FN int2 accpy_mma_coord_a8(uint lane, uint i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return (int2)(g + 8 * (s >> 2), t * 4 + (s & 3));
}
ACCPY_MMA_FN int2 accpy_mma_coord_b8(uint lane, uint i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return (int2)(t * 4 + s, g);
}
ACCPY_MMA_FN int2 accpy_mma_coord_c(uint lane, uint i) {
    int g = (int)(lane >> 2), t = (int)(lane & 3u), s = (int)i;
    return (int2)(g + 8 * (s >> 1), t * 2 + (s & 1));
}

/* -- element reads: a storage element as the value a fragment holds ---------------------------- */
#define ACCPY_MMA_READ_f16(p, off) vload_half((size_t)(off), (p))
#define ACCPY_MMA_READ_bf16(p, off) as_float(((uint)(p)[(off)]) << 16)
#define ACCPY_MMA_READ_s8(p, off) ((p)[(off)])
#define ACCPY_MMA_READ_u8(p, off) ((p)[(off)])

/* multiply-accumulate of one k: exact products; integers wrap in 32 bits */
#define ACCPY_MMA_MAC_float(acc, x, y) ((acc) + (x) * (y))
#define ACCPY_MMA_MAC_int(acc, x, y) ((int)((uint)(acc) + (uint)((int)(x) * (int)(y))))

/* -- fragments and scratch of one element type ------------------------------------------------- */
#define ACCPY_MMA_TYPES(T, VT, ACC)                                                                 \
    typedef struct { VT x[8]; } accpy_mma_a_##T;                                                    \
    typedef struct { VT x[4]; } accpy_mma_b_##T;                                                    \
    typedef struct { ACC x[4]; } accpy_mma_c_##T;                                                   \
    typedef struct { VT a[16 * 16]; VT b[16 * 8]; } accpy_mma_scratch_##T;

/* loads and stores of one element type in one address space */
#define ACCPY_MMA_MEMORY(T, ST, ACC, BITS, AS, SUF)                                                 \
    ACCPY_MMA_FN void accpy_mma_load_a_##T##_##SUF(accpy_mma_a_##T* f, const AS ST* base, int ld,   \
                                                    uint lane) {                                    \
        for (uint i = 0; i < 8; ++i) {                                                              \
            int2 rc = accpy_mma_coord_a##BITS(lane, i);                                             \
            f->x[i] = ACCPY_MMA_READ_##T(base, rc.x * ld + rc.y);                                   \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_load_b_##T##_##SUF(accpy_mma_b_##T* f, const AS ST* base, int ld,   \
                                                    uint lane) {                                    \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_b##BITS(lane, i);                                             \
            f->x[i] = ACCPY_MMA_READ_##T(base, rc.x * ld + rc.y);                                   \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_load_c_##T##_##SUF(accpy_mma_c_##T* f, const AS ACC* base, int ld,  \
                                                    uint lane) {                                    \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            f->x[i] = base[rc.x * ld + rc.y];                                                       \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_store_c_##T##_##SUF(const accpy_mma_c_##T* f, AS ACC* base, int ld, \
                                                     uint lane) {                                   \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            base[rc.x * ld + rc.y] = f->x[i];                                                       \
        }                                                                                           \
    }

/* element-wise operations on C fragments (Accera's MMAFragmentOp) */
#define ACCPY_MMA_ELEMENTWISE(T, ACC)                                                               \
    ACCPY_MMA_FN void accpy_mma_fill_c_##T(accpy_mma_c_##T* f, ACC v) {                             \
        for (uint i = 0; i < 4; ++i) f->x[i] = v;                                                   \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_set_c_##T(accpy_mma_c_##T* f, ACC v) { accpy_mma_fill_c_##T(f, v); } \
    ACCPY_MMA_FN void accpy_mma_clear_c_##T(accpy_mma_c_##T* f) { accpy_mma_fill_c_##T(f, (ACC)0); } \
    ACCPY_MMA_FN void accpy_mma_scale_c_##T(accpy_mma_c_##T* f, ACC v) {                            \
        for (uint i = 0; i < 4; ++i) f->x[i] = f->x[i] * v;                                         \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_relu_c_##T(accpy_mma_c_##T* f) {                                    \
        for (uint i = 0; i < 4; ++i) f->x[i] = f->x[i] > (ACC)0 ? f->x[i] : (ACC)0;                 \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_relu_nc_c_##T(accpy_mma_c_##T* f) {                                 \
        for (uint i = 0; i < 4; ++i) f->x[i] = f->x[i] * (ACC)(f->x[i] > (ACC)0);                   \
    }

/* the emulated mma.sync: scatter A and B slots to the warp's scratch, compute owned D slots */
#define ACCPY_MMA_SYNC(T, ACC, BITS)                                                                \
    ACCPY_MMA_FN void accpy_mma_sync_##T(accpy_mma_c_##T* d, const accpy_mma_a_##T* a,              \
                                         const accpy_mma_b_##T* b, const accpy_mma_c_##T* c,        \
                                         __local accpy_mma_scratch_##T* scratch, uint warp,         \
                                         uint lane) {                                               \
        __local accpy_mma_scratch_##T* s = scratch + warp;                                          \
        for (uint i = 0; i < 8; ++i) {                                                              \
            int2 rc = accpy_mma_coord_a##BITS(lane, i);                                             \
            s->a[rc.x * 16 + rc.y] = a->x[i];                                                       \
        }                                                                                           \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_b##BITS(lane, i);                                             \
            s->b[rc.x * 8 + rc.y] = b->x[i];                                                        \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        ACC out[4];                                                                                 \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            ACC acc = c->x[i];                                                                      \
            for (int k = 0; k < 16; ++k)                                                            \
                acc = ACCPY_MMA_MAC_##ACC(acc, s->a[rc.x * 16 + k], s->b[k * 8 + rc.y]);            \
            out[i] = acc;                                                                           \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        for (uint i = 0; i < 4; ++i) d->x[i] = out[i];                                              \
    }

#define ACCPY_MMA_ALL(T, ST, VT, ACC, BITS)                                                         \
    ACCPY_MMA_TYPES(T, VT, ACC)                                                                     \
    ACCPY_MMA_MEMORY(T, ST, ACC, BITS, __global, global)                                            \
    ACCPY_MMA_MEMORY(T, ST, ACC, BITS, __local, local)                                              \
    ACCPY_MMA_ELEMENTWISE(T, ACC)                                                                   \
    ACCPY_MMA_SYNC(T, ACC, BITS)

ACCPY_MMA_ALL(f16, half, float, float, 16)
ACCPY_MMA_ALL(bf16, ushort, float, float, 16)
ACCPY_MMA_ALL(s8, char, char, int, 8)
ACCPY_MMA_ALL(u8, uchar, uchar, int, 8)

/* -- tiles of any layout on word-array fragments (accpy's kernels) ----------------------------- */
#define ACCPY_MMA_WORDS_A 8
#define ACCPY_MMA_WORDS_B 4
#define ACCPY_MMA_WORDS_C 4

#define ACCPY_MMA_TILE_MEMORY(T, ST, ACC, BITS, AS, SUF)                                            \
    ACCPY_MMA_FN void accpy_mma_tile_load_a_##T##_##SUF(uint* f, const AS void* base, long rs,      \
                                                         long cs, uint lane) {                      \
        accpy_mma_a_##T* fr = (accpy_mma_a_##T*)f;                                                  \
        const AS ST* p = (const AS ST*)base;                                                        \
        for (uint i = 0; i < 8; ++i) {                                                              \
            int2 rc = accpy_mma_coord_a##BITS(lane, i);                                             \
            fr->x[i] = ACCPY_MMA_READ_##T(p, rc.x * rs + rc.y * cs);                                \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_load_b_##T##_##SUF(uint* f, const AS void* base, long rs,      \
                                                         long cs, uint lane) {                      \
        accpy_mma_b_##T* fr = (accpy_mma_b_##T*)f;                                                  \
        const AS ST* p = (const AS ST*)base;                                                        \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_b##BITS(lane, i);                                             \
            fr->x[i] = ACCPY_MMA_READ_##T(p, rc.x * rs + rc.y * cs);                                \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_load_c_##T##_##SUF(uint* f, const AS void* base, long rs,      \
                                                         long cs, uint lane) {                      \
        accpy_mma_c_##T* fr = (accpy_mma_c_##T*)f;                                                  \
        const AS ACC* p = (const AS ACC*)base;                                                      \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            fr->x[i] = p[rc.x * rs + rc.y * cs];                                                    \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_store_c_##T##_##SUF(const uint* f, AS void* base, long rs,     \
                                                          long cs, uint lane) {                     \
        const accpy_mma_c_##T* fr = (const accpy_mma_c_##T*)f;                                      \
        AS ACC* p = (AS ACC*)base;                                                                  \
        for (uint i = 0; i < 4; ++i) {                                                              \
            int2 rc = accpy_mma_coord_c(lane, i);                                                   \
            p[rc.x * rs + rc.y * cs] = fr->x[i];                                                    \
        }                                                                                           \
    }

#define ACCPY_MMA_TILE_OPS(T, ACC)                                                                  \
    ACCPY_MMA_FN void accpy_mma_tile_sync_##T(uint* d, const uint* a, const uint* b,                \
                                              __local void* scratch, uint warp, uint lane) {        \
        accpy_mma_sync_##T((accpy_mma_c_##T*)d, (const accpy_mma_a_##T*)a,                          \
                           (const accpy_mma_b_##T*)b, (const accpy_mma_c_##T*)d,                    \
                           (__local accpy_mma_scratch_##T*)scratch, warp, lane);                    \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_set_c_##T(uint* f, ACC v) {                                    \
        accpy_mma_set_c_##T((accpy_mma_c_##T*)f, v);                                                \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_scale_c_##T(uint* f, ACC v) {                                  \
        accpy_mma_scale_c_##T((accpy_mma_c_##T*)f, v);                                              \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mma_tile_relu_c_##T(uint* f) { accpy_mma_relu_c_##T((accpy_mma_c_##T*)f); } \
    ACCPY_MMA_FN void accpy_mma_tile_relu_nc_c_##T(uint* f) {                                       \
        accpy_mma_relu_nc_c_##T((accpy_mma_c_##T*)f);                                               \
    }

#define ACCPY_MMA_TILE_ALL(T, ST, ACC, BITS)                                                        \
    ACCPY_MMA_TILE_MEMORY(T, ST, ACC, BITS, __global, global)                                       \
    ACCPY_MMA_TILE_MEMORY(T, ST, ACC, BITS, __local, local)                                         \
    ACCPY_MMA_TILE_OPS(T, ACC)

ACCPY_MMA_TILE_ALL(f16, half, float, 16)
ACCPY_MMA_TILE_ALL(bf16, ushort, float, 16)
ACCPY_MMA_TILE_ALL(s8, char, int, 8)
ACCPY_MMA_TILE_ALL(u8, uchar, int, 8)

/* bytes of __local scratch per emulated warp (sizeof(accpy_mma_scratch_<t>)) */
#define ACCPY_MMA_SCRATCH_BYTES_F16 1536
#define ACCPY_MMA_SCRATCH_BYTES_BF16 1536
#define ACCPY_MMA_SCRATCH_BYTES_S8 384
#define ACCPY_MMA_SCRATCH_BYTES_U8 384

/* == AMD matrix cores: v_mfma_* of CDNA1 / CDNA2 on 64-lane wavefronts ============================
 * Accera's AMD shapes M<M>xN<N>xK<K>_B<B> (M = N = R * B) as the B instructions of an MFMA with
 * R x R x K blocks, used with the A broadcast (abid = q): instruction q computes rows R*q .. R*q+R-1
 * of D for all N columns. Ownership (accpy/targets/gpu/mfma.py, checked against AMD's matrix
 * instruction calculator): with g = lane / R, r = lane % R, kpl = M * K / 64, slot s of A (M x K)
 * holds A[r + R * (g % B)][(g / B) * kpl + s], of B (K x N) B[(g / B) * kpl + s][r + R * (g % B)];
 * slot v of one instruction's D (R x N) is block b = v / (R*R/64), w = v % (R*R/64): row
 * 4 * (64/R) * (w / 4) + 4 * (lane / R) + w % 4, column R * b + r.
 *
 * Wavefronts: 64 consecutive work-items by linear local id (lane = id % 64, wave = id / 64:
 * accpy_mfma_lane(), accpy_mfma_wave()); the work-group size must be a multiple of 64.
 * Fragments are arrays of 32-bit words, one slot per word (a float's bits, or an int): A and B
 * take at most ACCPY_MFMA_WORDS_AB words, one instruction's C at most ACCPY_MFMA_WORDS_C.
 * Input types <t>: f32 (float), f16 (half, read with vload_half), bf16 (ushort encodings), s8
 * (char); accumulators float (int for s8).
 *
 *   accpy_mfma_tile_load_a_<t>_<as>(uint* f, const <as> void* base, long rs, long cs, uint lane,
 *                                   int R, int B, int K)   A[r][k] at base[r * rs + k * cs]
 *   accpy_mfma_tile_load_b_<t>_<as>(...same...)            B[k][c] at base[k * rs + c * cs]
 *   accpy_mfma_tile_load_c_<t>_<as>(uint* f, const <as> void* base, long rs, long cs, uint lane,
 *                                   int R, int B)          one instruction's R x N tile of C
 *   accpy_mfma_tile_store_c_<t>_<as>(const uint* f, <as> void* base, long rs, long cs, uint lane,
 *                                    int R, int B)
 *   accpy_mfma_tile_sync_<t>(uint* d, const uint* a, const uint* b, __local void* scratch,
 *                            uint wave, uint lane, int R, int B, int K, int q)
 *     d (instruction q's D) = A[R*q.., :] @ B + d. Every work-item of the work-group calls it
 *     together (two barriers); `scratch` holds 2 * M * K words per wavefront (the kernel's tiles
 *     all of one shape at a time; at most ACCPY_MFMA_SCRATCH_WORDS). Each
 *     lane scatters its A and B slots, barrier, sums its own D slots over k = 0 .. K-1 in order
 *     (float; 32-bit wrapping for s8), barrier.
 *   accpy_mfma_tile_{set,scale}_c_<t>(uint* f, ACC v, int n), accpy_mfma_tile_{relu,relu_nc}_c_<t>
 *     (uint* f, int n): Accera's MMAFragmentOp on the n words of a C fragment.
 */
#define ACCPY_MFMA_WAVE 64
#define ACCPY_MFMA_WORDS_AB 4
#define ACCPY_MFMA_WORDS_C 32
#define ACCPY_MFMA_SCRATCH_WORDS 512
#define ACCPY_MFMA_SCRATCH_BYTES 2048

ACCPY_MMA_FN uint accpy_mfma_lane(void) { return accpy_mma_linear_id() % ACCPY_MFMA_WAVE; }
ACCPY_MMA_FN uint accpy_mfma_wave(void) { return accpy_mma_linear_id() / ACCPY_MFMA_WAVE; }

/* slot s of A (x = row, y = k) or, read as (y = k, x = column), of B */
ACCPY_MMA_FN int2 accpy_mfma_coord_ab(uint lane, int s, int R, int B, int K) {
    int g = (int)lane / R, r = (int)lane % R, kpl = R * B * K / ACCPY_MFMA_WAVE;
    return (int2)(r + R * (g % B), (g / B) * kpl + s);
}
/* slot v of one instruction's D: (x = row, y = column) */
ACCPY_MMA_FN int2 accpy_mfma_coord_c(uint lane, int v, int R) {
    int per = R * R / ACCPY_MFMA_WAVE, b = v / per, w = v % per;
    return (int2)(4 * (ACCPY_MFMA_WAVE / R) * (w / 4) + 4 * ((int)lane / R) + w % 4, R * b + (int)lane % R);
}

#define ACCPY_MFMA_READ_f32(p, off) ((p)[(off)])
#define ACCPY_MFMA_READ_f16(p, off) vload_half((size_t)(off), (p))
#define ACCPY_MFMA_READ_bf16(p, off) as_float(((uint)(p)[(off)]) << 16)
#define ACCPY_MFMA_READ_s8(p, off) ((int)(p)[(off)])
#define ACCPY_MFMA_WORD_float(x) as_uint(x)
#define ACCPY_MFMA_WORD_int(x) ((uint)(x))
#define ACCPY_MFMA_VALUE_float(w) as_float(w)
#define ACCPY_MFMA_VALUE_int(w) ((int)(w))

#define ACCPY_MFMA_MEMORY(T, ST, ACC, AS, SUF)                                                      \
    ACCPY_MMA_FN void accpy_mfma_tile_load_a_##T##_##SUF(uint* f, const AS void* base, long rs,     \
                                                          long cs, uint lane, int R, int B, int K) { \
        const AS ST* p = (const AS ST*)base;                                                        \
        for (int s = 0; s < R * B * K / ACCPY_MFMA_WAVE; ++s) {                                     \
            int2 rk = accpy_mfma_coord_ab(lane, s, R, B, K);                                        \
            f[s] = ACCPY_MFMA_WORD_##ACC(ACCPY_MFMA_READ_##T(p, rk.x * rs + rk.y * cs));            \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mfma_tile_load_b_##T##_##SUF(uint* f, const AS void* base, long rs,     \
                                                          long cs, uint lane, int R, int B, int K) { \
        const AS ST* p = (const AS ST*)base;                                                        \
        for (int s = 0; s < R * B * K / ACCPY_MFMA_WAVE; ++s) {                                     \
            int2 ck = accpy_mfma_coord_ab(lane, s, R, B, K);                                        \
            f[s] = ACCPY_MFMA_WORD_##ACC(ACCPY_MFMA_READ_##T(p, ck.y * rs + ck.x * cs));            \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mfma_tile_load_c_##T##_##SUF(uint* f, const AS void* base, long rs,     \
                                                          long cs, uint lane, int R, int B) {       \
        const AS ACC* p = (const AS ACC*)base;                                                      \
        for (int v = 0; v < R * R * B / ACCPY_MFMA_WAVE; ++v) {                                     \
            int2 rc = accpy_mfma_coord_c(lane, v, R);                                               \
            f[v] = ACCPY_MFMA_WORD_##ACC(p[rc.x * rs + rc.y * cs]);                                 \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mfma_tile_store_c_##T##_##SUF(const uint* f, AS void* base, long rs,    \
                                                           long cs, uint lane, int R, int B) {      \
        AS ACC* p = (AS ACC*)base;                                                                  \
        for (int v = 0; v < R * R * B / ACCPY_MFMA_WAVE; ++v) {                                     \
            int2 rc = accpy_mfma_coord_c(lane, v, R);                                               \
            p[rc.x * rs + rc.y * cs] = ACCPY_MFMA_VALUE_##ACC(f[v]);                                \
        }                                                                                           \
    }

#define ACCPY_MFMA_OPS(T, ACC)                                                                      \
    ACCPY_MMA_FN void accpy_mfma_tile_sync_##T(uint* d, const uint* a, const uint* b,               \
                                               __local void* scratch, uint wave, uint lane, int R,  \
                                               int B, int K, int q) {                               \
        int M = R * B;                                                                              \
        __local uint* sa = (__local uint*)scratch + wave * (uint)(2 * M * K);                       \
        __local uint* sb = sa + M * K;                                                              \
        for (int s = 0; s < M * K / ACCPY_MFMA_WAVE; ++s) {                                         \
            int2 lk = accpy_mfma_coord_ab(lane, s, R, B, K);                                        \
            sa[lk.x * K + lk.y] = a[s];                                                             \
            sb[lk.y * M + lk.x] = b[s];                                                             \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        ACC out[ACCPY_MFMA_WORDS_C];                                                                \
        int n = R * M / ACCPY_MFMA_WAVE;                                                            \
        for (int v = 0; v < n; ++v) {                                                               \
            int2 rc = accpy_mfma_coord_c(lane, v, R);                                               \
            ACC acc = ACCPY_MFMA_VALUE_##ACC(d[v]);                                                 \
            for (int k = 0; k < K; ++k)                                                             \
                acc = ACCPY_MMA_MAC_##ACC(acc, ACCPY_MFMA_VALUE_##ACC(sa[(R * q + rc.x) * K + k]),  \
                                          ACCPY_MFMA_VALUE_##ACC(sb[k * M + rc.y]));                \
            out[v] = acc;                                                                           \
        }                                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        for (int v = 0; v < n; ++v) d[v] = ACCPY_MFMA_WORD_##ACC(out[v]);                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mfma_tile_set_c_##T(uint* f, ACC v, int n) {                            \
        for (int i = 0; i < n; ++i) f[i] = ACCPY_MFMA_WORD_##ACC(v);                                \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mfma_tile_scale_c_##T(uint* f, ACC v, int n) {                          \
        for (int i = 0; i < n; ++i) f[i] = ACCPY_MFMA_WORD_##ACC(ACCPY_MFMA_VALUE_##ACC(f[i]) * v); \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mfma_tile_relu_c_##T(uint* f, int n) {                                  \
        for (int i = 0; i < n; ++i) {                                                               \
            ACC x = ACCPY_MFMA_VALUE_##ACC(f[i]);                                                   \
            f[i] = ACCPY_MFMA_WORD_##ACC(x > (ACC)0 ? x : (ACC)0);                                  \
        }                                                                                           \
    }                                                                                               \
    ACCPY_MMA_FN void accpy_mfma_tile_relu_nc_c_##T(uint* f, int n) {                               \
        for (int i = 0; i < n; ++i) {                                                               \
            ACC x = ACCPY_MFMA_VALUE_##ACC(f[i]);                                                   \
            f[i] = ACCPY_MFMA_WORD_##ACC(x * (ACC)(x > (ACC)0));                                    \
        }                                                                                           \
    }

#define ACCPY_MFMA_ALL(T, ST, ACC)                                                                  \
    ACCPY_MFMA_MEMORY(T, ST, ACC, __global, global)                                                 \
    ACCPY_MFMA_MEMORY(T, ST, ACC, __local, local)                                                   \
    ACCPY_MFMA_OPS(T, ACC)

ACCPY_MFMA_ALL(f32, float, float)
ACCPY_MFMA_ALL(f16, half, float)
ACCPY_MFMA_ALL(bf16, ushort, float)
ACCPY_MFMA_ALL(s8, char, int)

#endif /* ACCPY_MMA_CL_H */
