/* The prelude of every device source accpy emits (OpenCL C or CUDA C): the fixed-width integer
 * types and their limits where the language lacks them, the float bit casts, the C math names
 * the kernels use, then accpy's scalar semantics (accpy_scalar.h: the same helpers host
 * kernels use, so device and host code compute the same values). */
#ifndef ACCPY_DEVICE_H
#define ACCPY_DEVICE_H

#if defined(__OPENCL_VERSION__)
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
typedef char int8_t;
typedef uchar uint8_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef int int32_t;
typedef uint uint32_t;
typedef long int64_t;
typedef ulong uint64_t;
#define INT8_MIN (-128)
#define INT8_MAX 127
#define UINT8_MAX 255
#define INT16_MIN (-32768)
#define INT16_MAX 32767
#define UINT16_MAX 65535
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define UINT32_MAX 4294967295u
#define INT64_MIN (-9223372036854775807L - 1)
#define INT64_MAX 9223372036854775807L
#define UINT64_MAX 18446744073709551615UL
#define INT64_C(v) v##L
#define UINT64_C(v) v##UL
#define ACCPY_INLINE static inline
#define ACCPY_F32_BITS(f) as_uint(f)
#define ACCPY_BITS_F32(u) as_float(u)
/* C's float-suffixed math names: OpenCL's built-ins are overloaded on the argument type */
#define sqrtf sqrt
#define expf exp
#define logf log
#define log2f log2
#define log10f log10
#define tanhf tanh
#define sinf sin
#define cosf cos
#define tanf tan
#define sinhf sinh
#define coshf cosh
#define floorf floor
#define ceilf ceil
#define rintf rint
#define fabsf fabs
#define powf pow
#define remainderf remainder
#define fmodf fmod
#define copysignf copysign
/* float atomic add (OpenCL C 1.2 has integer atomics only): a compare-and-swap loop on the bits */
static inline void accpy_atomic_add_f32(volatile __global float* p, float v) {
    uint seen = as_uint(*p), want;
    for (;;) {
        want = as_uint(as_float(seen) + v);
        uint was = atomic_cmpxchg((volatile __global uint*)p, seen, want);
        if (was == seen) break;
        seen = was;
    }
}
#elif defined(__CUDACC__)
#include <stdint.h>
#define ACCPY_INLINE static __device__ __forceinline__
#define ACCPY_F32_BITS(f) __float_as_uint(f)
#define ACCPY_BITS_F32(u) __uint_as_float(u)
#else
#error "accpy_device.h is the prelude of OpenCL C or CUDA C device code"
#endif

#include "accpy_scalar.h"

#endif /* ACCPY_DEVICE_H */
