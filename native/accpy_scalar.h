/* accpy's scalar semantics: the helpers emitted kernels call for arithmetic whose C meaning is
 * undefined or differs from accpy's (the rules are listed in accpy_runtime.h, and the Python
 * reference evaluator, accpy/nest/reference.py, implements the same). Written once for every
 * kind of code accpy emits: host C includes it through accpy_runtime.h; device code (OpenCL C,
 * CUDA C) after a shim that defines the fixed-width types, their limits, ACCPY_INLINE and the
 * float bit casts (native/gpu/accpy_device.h). */
#ifndef ACCPY_SCALAR_H
#define ACCPY_SCALAR_H

#ifndef ACCPY_F32_BITS
ACCPY_INLINE uint32_t accpy_f32_bits_(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
ACCPY_INLINE float accpy_bits_f32_(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#define ACCPY_F32_BITS(f) accpy_f32_bits_(f)
#define ACCPY_BITS_F32(u) accpy_bits_f32_(u)
#endif

/* ---- index arithmetic (int64) ------------------------------------------------------ */
ACCPY_INLINE int64_t accpy_floordiv_index(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
ACCPY_INLINE int64_t accpy_min_index(int64_t a, int64_t b) { return a < b ? a : b; }
ACCPY_INLINE int64_t accpy_max_index(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- integer element types ----------------------------------------------------------- */
#define ACCPY_INT_HELPERS(T, UT, BITS, SFX, TMIN, TMAX)                                      \
    ACCPY_INLINE T accpy_div_##SFX(T a, T b) {                                               \
        if (b == 0) return 0;                                                                 \
        if ((TMIN) != 0 && b == (T)-1) return (T)(0 - (UT)a);                                 \
        return (T)(a / b);                                                                    \
    }                                                                                         \
    ACCPY_INLINE T accpy_floordiv_##SFX(T a, T b) {                                          \
        if (b == 0) return 0;                                                                 \
        if ((TMIN) != 0 && b == (T)-1) return (T)(0 - (UT)a);                                 \
        T q = (T)(a / b);                                                                     \
        return ((T)(a % b) != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;                    \
    }                                                                                         \
    ACCPY_INLINE T accpy_mod_##SFX(T a, T b) {                                               \
        if (b == 0 || ((TMIN) != 0 && b == (T)-1)) return 0;                                 \
        T r = (T)(a % b);                                                                     \
        return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;                             \
    }                                                                                         \
    ACCPY_INLINE T accpy_shl_##SFX(T a, T b) { return (T)((UT)a << ((UT)b & (BITS - 1))); }  \
    ACCPY_INLINE T accpy_shr_##SFX(T a, T b) { return (T)(a >> ((UT)b & (BITS - 1))); }      \
    ACCPY_INLINE T accpy_pow_##SFX(T a, T b) {                                               \
        if ((TMIN) != 0 && b < 0) {                                                           \
            if (a == 1) return 1;                                                             \
            if ((TMIN) != 0 && a == (T)-1) return (b & 1) ? (T)-1 : (T)1;                     \
            return 0;                                                                         \
        }                                                                                     \
        UT r = 1, x = (UT)a, e = (UT)b;                                                       \
        while (e) {                                                                           \
            if (e & 1) r = (UT)((uint64_t)r * x);                                             \
            x = (UT)((uint64_t)x * x);                                                        \
            e = (UT)(e >> 1);                                                                 \
        }                                                                                     \
        return (T)r;                                                                          \
    }                                                                                         \
    ACCPY_INLINE T accpy_abs_##SFX(T a) { return (TMIN) != 0 && a < 0 ? (T)(0 - (UT)a) : a; } \
    ACCPY_INLINE T accpy_min_##SFX(T a, T b) { return a < b ? a : b; }                        \
    ACCPY_INLINE T accpy_max_##SFX(T a, T b) { return a > b ? a : b; }                        \
    ACCPY_INLINE T accpy_from_f64_##SFX(double x) {                                           \
        if (x != x) return 0;                                                                 \
        if (x <= (double)(TMIN)) return (TMIN);                                               \
        if (x >= (double)(TMAX)) return (TMAX);                                               \
        return (T)x;                                                                          \
    }

ACCPY_INT_HELPERS(int8_t, uint8_t, 8, i8, INT8_MIN, INT8_MAX)
ACCPY_INT_HELPERS(int16_t, uint16_t, 16, i16, INT16_MIN, INT16_MAX)
ACCPY_INT_HELPERS(int32_t, uint32_t, 32, i32, INT32_MIN, INT32_MAX)
ACCPY_INT_HELPERS(int64_t, uint64_t, 64, i64, INT64_MIN, INT64_MAX)
ACCPY_INT_HELPERS(uint8_t, uint8_t, 8, u8, 0, UINT8_MAX)
ACCPY_INT_HELPERS(uint16_t, uint16_t, 16, u16, 0, UINT16_MAX)
ACCPY_INT_HELPERS(uint32_t, uint32_t, 32, u32, 0, UINT32_MAX)
ACCPY_INT_HELPERS(uint64_t, uint64_t, 64, u64, 0, UINT64_MAX)

/* ---- floating point ---------------------------------------------------------------- */
/* Python's float `%` and `//` (as CPython and numpy compute them): the quotient is
 * (a - fmod(a, b)) / b, adjusted by one when the remainder changes sign, then rounded to
 * the nearest integer (it is one up to rounding error); zero results take the sign Python
 * gives them. A zero divisor gives NaN. */
#define ACCPY_FLOAT_DIVMOD(T, SFX, FMOD, FLOOR, COPYSIGN)                                      \
    ACCPY_INLINE T accpy_mod_##SFX(T a, T b) {                                                \
        T r = FMOD(a, b);                                                                     \
        if (r != 0) {                                                                         \
            if ((r < 0) != (b < 0)) r += b;                                                   \
        } else {                                                                              \
            r = COPYSIGN((T)0, b);                                                            \
        }                                                                                     \
        return r;                                                                             \
    }                                                                                         \
    ACCPY_INLINE T accpy_floordiv_##SFX(T a, T b) {                                           \
        T m = FMOD(a, b);                                                                     \
        T d = (a - m) / b;                                                                    \
        if (m != 0 && ((b < 0) != (m < 0))) d -= (T)1;                                        \
        if (d != 0) {                                                                         \
            T f = FLOOR(d);                                                                   \
            if (d - f > (T)0.5) f += (T)1;                                                    \
            return f;                                                                         \
        }                                                                                     \
        return COPYSIGN((T)0, a / b);                                                         \
    }

ACCPY_FLOAT_DIVMOD(float, f32, fmodf, floorf, copysignf)
ACCPY_FLOAT_DIVMOD(double, f64, fmod, floor, copysign)
/* bfloat16: stored as its 16-bit pattern; a value is the float32 with those upper bits. Every
 * operation on bfloat16 values is done in float32 and rounded to bfloat16 (nearest even; a NaN
 * stays a quiet NaN; denormals are kept) -- the correctly rounded bfloat16 result, since float32
 * has more than twice bfloat16's 8 significand bits. */
ACCPY_INLINE float accpy_bf16_to_float(uint16_t h) { return ACCPY_BITS_F32((uint32_t)h << 16); }
ACCPY_INLINE uint16_t accpy_float_to_bf16(float f) {
    uint32_t u = ACCPY_F32_BITS(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
ACCPY_INLINE float accpy_bf16_round(float f) { return accpy_bf16_to_float(accpy_float_to_bf16(f)); }

ACCPY_INLINE float accpy_min_f32(float a, float b) { return a < b ? a : b; }
ACCPY_INLINE float accpy_max_f32(float a, float b) { return a > b ? a : b; }
ACCPY_INLINE double accpy_min_f64(double a, double b) { return a < b ? a : b; }
ACCPY_INLINE double accpy_max_f64(double a, double b) { return a > b ? a : b; }

#endif /* ACCPY_SCALAR_H */
