/* accpy runtime: the scalar semantics of emitted kernels, and their error channel.
 *
 * Every operation whose C behaviour is undefined or surprising gets a defined meaning
 * here, and the Python reference evaluator (accpy/nest/reference.py) implements the same:
 *   - integer arithmetic wraps (kernels are compiled with -fwrapv);
 *   - integer division truncates; a zero divisor gives 0 (numpy's result), MIN / -1 wraps;
 *   - `//` and `%` round toward minus infinity (Python), for floats too;
 *   - shift counts are taken modulo the bit width;
 *   - integer `**` wraps like repeated multiplication; a negative exponent gives the
 *     truncated value of 1 / a**|b| (1 for a == 1, +-1 for a == -1, else 0, 0 for a == 0);
 *   - float -> integer casts truncate, saturate at the type's range, and map NaN to 0;
 *   - round() rounds half to even (numpy.rint).
 */
#ifndef ACCPY_RUNTIME_H
#define ACCPY_RUNTIME_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__cplusplus)
#define ACCPY_RESTRICT __restrict__
#else
#define ACCPY_RESTRICT restrict
#endif

#define ACCPY_INLINE static inline __attribute__((always_inline, unused))

#include "accpy_scalar.h"

/* the 32 bits at p, of any element type (a vector dot product's broadcast quad or pair) */
ACCPY_INLINE int32_t accpy_load_i32(const void* p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* the first n (< 4) bytes at p, the others 0 */
ACCPY_INLINE int32_t accpy_load_i32_part(const void* p, int n) {
    int32_t v = 0;
    memcpy(&v, p, (size_t)n);
    return v;
}

/* ---- AVX2 horizontal reductions (AVX-512 has intrinsics for these) ---------------------- */
/* (a package whose kernels use no vector types defines ACCPY_NO_VECTORS: <immintrin.h> is
 * the largest header by far, most of a small kernel's compile time) */
#if defined(__x86_64__) && !defined(ACCPY_NO_VECTORS)
#include <immintrin.h>
/* c + the dot products of a's uint8 and b's int8 quads (VPDPBUSD) and of bfloat16 pairs
 * (VDPBF16PS), as asm: gcc's builtins for them make it copy every accumulator of an unrolled
 * micro-kernel from one register to another on each step */
#define accpy_dpbusd(c, a, b) __extension__({ \
    __m512i accpy_c_ = (c);                    \
    __asm__("vpdpbusd %2, %1, %0" : "+v"(accpy_c_) : "v"(a), "v"(b)); \
    accpy_c_; })
#define accpy_dpbf16ps(c, a, b) __extension__({ \
    __m512 accpy_c_ = (c);                       \
    __asm__("vdpbf16ps %2, %1, %0" : "+v"(accpy_c_) : "v"(a), "v"(b)); \
    accpy_c_; })
#define ACCPY_AVX2 static inline __attribute__((always_inline, unused, target("avx2,fma")))
#define ACCPY_HREDUCE(NAME, VT, T, N, OP)                                    \
    ACCPY_AVX2 T NAME(VT v) {                                                \
        T lanes[N];                                                          \
        memcpy(lanes, &v, sizeof lanes);                                     \
        T r = lanes[0];                                                      \
        for (int k = 1; k < N; ++k) r = OP(r, lanes[k]);                     \
        return r;                                                            \
    }
#define ACCPY_ADD(a, b) ((a) + (b))
#define ACCPY_MUL(a, b) ((a) * (b))
#define ACCPY_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ACCPY_MAX(a, b) ((a) > (b) ? (a) : (b))
ACCPY_HREDUCE(accpy_hadd_m256, __m256, float, 8, ACCPY_ADD)
ACCPY_HREDUCE(accpy_hmul_m256, __m256, float, 8, ACCPY_MUL)
ACCPY_HREDUCE(accpy_hmin_m256, __m256, float, 8, ACCPY_MIN)
ACCPY_HREDUCE(accpy_hmax_m256, __m256, float, 8, ACCPY_MAX)
ACCPY_HREDUCE(accpy_hadd_m256d, __m256d, double, 4, ACCPY_ADD)
ACCPY_HREDUCE(accpy_hmul_m256d, __m256d, double, 4, ACCPY_MUL)
ACCPY_HREDUCE(accpy_hmin_m256d, __m256d, double, 4, ACCPY_MIN)
ACCPY_HREDUCE(accpy_hmax_m256d, __m256d, double, 4, ACCPY_MAX)
#define ACCPY_IADD(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ACCPY_IMUL(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
ACCPY_HREDUCE(accpy_hadd_m256i, __m256i, int32_t, 8, ACCPY_IADD)
ACCPY_HREDUCE(accpy_hmul_m256i, __m256i, int32_t, 8, ACCPY_IMUL)
ACCPY_HREDUCE(accpy_hmin_m256i, __m256i, int32_t, 8, ACCPY_MIN)
ACCPY_HREDUCE(accpy_hmax_m256i, __m256i, int32_t, 8, ACCPY_MAX)
#endif

/* ---- error channel ------------------------------------------------------------------ */
/* Each library has its own copy (static); the package exports `<package>_last_error()`.
 * Errors normally go to the calling thread's slot. An error raised on an OpenMP worker
 * thread cannot reach the caller's thread-local slot, so it goes to a process-wide slot
 * that the caller's entry point checks (and clears) after the parallel region. Only
 * worker threads use that slot: an error on the caller's own thread must not be seen
 * by a call running at the same time on another thread. */
#ifdef _OPENMP
#include <omp.h>
#endif
/* Threads for a parallel loop: the plan's count, never more than this machine has. */
ACCPY_INLINE int accpy_threads(int requested) {
#ifdef _OPENMP
    int procs = omp_get_num_procs();
    return requested < procs ? requested : procs;
#else
    return 1;
#endif
}

ACCPY_INLINE int accpy_on_worker_thread(void) {
#ifdef _OPENMP
    /* the caller's thread is thread 0 of every enclosing team */
    for (int level = omp_get_level(); level > 0; --level)
        if (omp_get_ancestor_thread_num(level) != 0) return 1;
#endif
    return 0;
}
/* One error state per library. A package compiled as several translation units (parallel
 * builds) shares it: one unit defines it (ACCPY_DEFINE_ERROR_STATE), the others declare it
 * (ACCPY_SPLIT_UNIT alone); a single-file build (name.c as written) keeps it static. */
#if defined(ACCPY_SPLIT_UNIT) && !defined(ACCPY_DEFINE_ERROR_STATE)
#define ACCPY_ERROR_STORAGE extern __attribute__((visibility("hidden")))
#elif defined(ACCPY_SPLIT_UNIT)
#define ACCPY_ERROR_STORAGE __attribute__((visibility("hidden")))
#else
#define ACCPY_ERROR_STORAGE static
#endif
ACCPY_ERROR_STORAGE __thread char accpy_error_text[2048];
ACCPY_ERROR_STORAGE __thread int accpy_error_flag;
ACCPY_ERROR_STORAGE char accpy_shared_error_text[2048];
ACCPY_ERROR_STORAGE int accpy_shared_error_flag;

/* (The runtime's functions are `static inline`: a unit that does not call one does not compile it,
 * even at -O0, where plain static functions are all emitted; accpy.testing builds at -O0.) */
__attribute__((unused, format(printf, 1, 2))) static inline void accpy_set_error(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(accpy_error_text, sizeof accpy_error_text, fmt, ap);
    va_end(ap);
    accpy_error_flag = 1;
    if (accpy_on_worker_thread() && !__atomic_exchange_n(&accpy_shared_error_flag, 1, __ATOMIC_ACQ_REL)) {
        memcpy(accpy_shared_error_text, accpy_error_text, sizeof accpy_error_text);
    }
}

/* Called by entry points: move an error raised on a worker thread to this thread. */
__attribute__((unused)) static inline int accpy_collect_error(void) {
    if (accpy_error_flag) {
        __atomic_store_n(&accpy_shared_error_flag, 0, __ATOMIC_RELEASE);
        return 1;
    }
    if (__atomic_load_n(&accpy_shared_error_flag, __ATOMIC_ACQUIRE)) {
        memcpy(accpy_error_text, accpy_shared_error_text, sizeof accpy_error_text);
        accpy_error_flag = 1;
        __atomic_store_n(&accpy_shared_error_flag, 0, __ATOMIC_RELEASE);
        return 1;
    }
    return 0;
}

__attribute__((unused)) static inline const char* accpy_take_error(void) {
    if (!accpy_error_flag) return NULL;
    accpy_error_flag = 0;
    return accpy_error_text;
}

/* ---- runtime-sized arrays ------------------------------------------------------------ */
/* Sizes come from int64 arguments that a C caller may set to anything: every size is
 * checked (no negative dimension, no overflow of size_t) before it is allocated or copied,
 * and a bad one is an error naming the array and its shape, never a short allocation. */

/* The bytes spanned by an array of `n` dimensions `dims` of `elem`-byte elements (`strides`
 * in elements, or NULL for a dense array) in *bytes; 0 with an error set, naming `what`,
 * when a dimension is negative or the size does not fit. */
__attribute__((unused)) static inline int accpy_array_bytes(const char* what, size_t elem, int n, const int64_t* dims,
                                                     const int64_t* strides, size_t* bytes) {
    char shape[320];
    size_t len = 0;
    int negative = 0, empty = 0, overflow = 0;
    shape[0] = 0;
    for (int d = 0; d < n && len < sizeof shape - 32; ++d) {
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", d ? ", " : "(", (long long)dims[d]);
        negative |= dims[d] < 0;
        empty |= dims[d] == 0;
    }
    snprintf(shape + len, sizeof shape - len, n == 1 ? ",)" : n ? ")" : "()");
    if (negative) {
        accpy_set_error("cannot allocate %s of shape %s: a dimension is negative", what, shape);
        return 0;
    }
    uint64_t count = 1;
    if (empty) {
        count = 0;
    } else if (!strides) {
        for (int d = 0; d < n; ++d) overflow |= __builtin_mul_overflow(count, (uint64_t)dims[d], &count);
    } else {
        for (int d = 0; d < n; ++d) {
            uint64_t span;
            overflow |= strides[d] < 0;
            overflow |= __builtin_mul_overflow((uint64_t)(dims[d] - 1), (uint64_t)strides[d], &span);
            overflow |= __builtin_add_overflow(count, span, &count);
        }
    }
    size_t total = 0;
    overflow |= __builtin_mul_overflow(count, (uint64_t)elem, &total);
    /* room to round up to 64 bytes, and offsets that still fit in int64 */
    overflow |= total > (size_t)INT64_MAX - 64;
    if (overflow) {
        accpy_set_error("cannot allocate %s of shape %s (%zu-byte elements): its size in bytes overflows",
                        what, shape, elem);
        return 0;
    }
    *bytes = total;
    return 1;
}

/* ---- heap temporaries, kept per thread between calls ---------------------------------- */
/* A kernel that packs a block into a large temporary on every call would otherwise have the C
 * library hand it fresh pages each time (large blocks are mapped and unmapped; the arenas of
 * other threads are trimmed): a page fault per 4 KiB per call. Freed blocks are kept instead,
 * up to ACCPY_KEPT per thread (each at most ACCPY_KEPT_MAX bytes), and reused by the next
 * allocation they fit; a thread's blocks are freed when it exits (a thread-specific key's
 * destructor), the calling thread's and the key when the library is unloaded. Under a
 * sanitizer, or where the key cannot be had, every block is freed at once (as free() would). */
#include <malloc.h>
#include <pthread.h>
#define ACCPY_KEPT 4
#define ACCPY_KEPT_MAX ((size_t)16 << 20)
typedef struct {
    void* block[ACCPY_KEPT];
    size_t bytes[ACCPY_KEPT];
    int registered; /* the key's value is set: its destructor frees these at thread exit */
} accpy_kept_t;
ACCPY_ERROR_STORAGE __thread accpy_kept_t accpy_kept;
ACCPY_ERROR_STORAGE pthread_key_t accpy_kept_key;
ACCPY_ERROR_STORAGE int accpy_kept_usable; /* 0: no key yet, 1: made, 2: none to be had, 3: being made */

__attribute__((unused)) static void accpy_kept_release(void* kept) {
    accpy_kept_t* k = (accpy_kept_t*)kept;
    for (int s = 0; s < ACCPY_KEPT; ++s) {
        free(k->block[s]);
        k->block[s] = NULL;
    }
    k->registered = 0;
}

/* Whether this thread may keep blocks (its exit then frees them). */
__attribute__((unused)) static inline int accpy_kept_here(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 0;
#else
    if (accpy_kept.registered) return 1;
    int state = __atomic_load_n(&accpy_kept_usable, __ATOMIC_ACQUIRE);
    if (state == 0 && __atomic_compare_exchange_n(&accpy_kept_usable, &state, 3, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        state = pthread_key_create(&accpy_kept_key, accpy_kept_release) ? 2 : 1;
        __atomic_store_n(&accpy_kept_usable, state, __ATOMIC_RELEASE);
    }
    if (state != 1 || pthread_setspecific(accpy_kept_key, &accpy_kept)) return 0;
    accpy_kept.registered = 1;
    return 1;
#endif
}

#if !defined(ACCPY_SPLIT_UNIT) || defined(ACCPY_DEFINE_ERROR_STATE)
/* (unloading: other threads' blocks stay allocated, but no destructor of this library runs later) */
__attribute__((destructor, unused)) static void accpy_kept_unload(void) {
    if (__atomic_exchange_n(&accpy_kept_usable, 2, __ATOMIC_ACQ_REL) == 1) pthread_key_delete(accpy_kept_key);
    accpy_kept_release(&accpy_kept);
}
#endif

/* A 64-byte-aligned block for such an array (zeroed when `zero`), or NULL with an error set. */
__attribute__((unused)) static inline void* accpy_alloc_array(const char* what, size_t elem, int zero, int n,
                                                       const int64_t* dims) {
    size_t bytes;
    if (!accpy_array_bytes(what, elem, n, dims, NULL, &bytes)) return NULL;
    size_t rounded = bytes ? (bytes + 63) / 64 * 64 : 64;
    void* p = NULL;
    int best = -1; /* the smallest kept block it fits */
    for (int s = 0; s < ACCPY_KEPT; ++s)
        if (accpy_kept.block[s] && accpy_kept.bytes[s] >= rounded && (best < 0 || accpy_kept.bytes[s] < accpy_kept.bytes[best]))
            best = s;
    if (best >= 0) {
        p = accpy_kept.block[best];
        accpy_kept.block[best] = NULL;
    } else {
        p = aligned_alloc(64, rounded);
    }
    if (!p) {
        accpy_set_error("out of memory allocating %s (%zu bytes)", what, bytes);
        return NULL;
    }
    if (zero) memset(p, 0, rounded);
    return p;
}

/* A block of accpy_alloc_array given back: kept for this thread (in place of a smaller one), or freed.
 * (a name no user argument can shadow, unlike `free`) */
__attribute__((unused)) static inline void accpy_free(void* p) {
    if (!p) return;
    size_t bytes = malloc_usable_size(p);
    if (bytes <= ACCPY_KEPT_MAX && accpy_kept_here()) {
        int slot = 0;
        for (int s = 1; s < ACCPY_KEPT; ++s)
            if (!accpy_kept.block[s] || (accpy_kept.block[slot] && accpy_kept.bytes[s] < accpy_kept.bytes[slot])) slot = s;
        if (!accpy_kept.block[slot] || accpy_kept.bytes[slot] < bytes) {
            free(accpy_kept.block[slot]);
            accpy_kept.block[slot] = p;
            accpy_kept.bytes[slot] = bytes;
            return;
        }
    }
    free(p);
}

#endif /* ACCPY_RUNTIME_H */
