/* A C (and C++) program that calls an accpy package through its header or its .hat file.
 *
 * Compiled by tests/test_abi.py with:
 *   -DACCPY_HEADER='"pkg.h"' (or "pkg.hat"; -DACCPY_HEADER2 to include both)
 *   -DMM_FULL=<full name of matmul>  -DRT_FULL=<full name of rt_matmul>
 *   -DLAST_ERROR=<pkg>_last_error    -DSIZE_M=.. -DSIZE_N=.. -DSIZE_K=..
 *   -DRT_M=.. -DRT_N=.. -DRT_K=..
 * It checks every call against a naive triple loop and returns nonzero on a mismatch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include ACCPY_HEADER
#ifdef ACCPY_HEADER2
#include ACCPY_HEADER2
#endif

static void fill(float* p, long n, int seed) {
    for (long t = 0; t < n; ++t) p[t] = (float)(((t * 7 + seed * 13) % 17) - 8) / 8.0f;
}

static void naive(long m, long n, long k, const float* A, const float* B, float* C) {
    for (long i = 0; i < m; ++i)
        for (long j = 0; j < n; ++j) {
            double s = C[i * n + j];
            for (long p = 0; p < k; ++p) s += (double)A[i * k + p] * (double)B[p * n + j];
            C[i * n + j] = (float)s;
        }
}

static int check(const char* what, long count, const float* got, const float* want) {
    for (long t = 0; t < count; ++t) {
        if (fabs((double)got[t] - (double)want[t]) > 1e-4 * (1.0 + fabs((double)want[t]))) {
            fprintf(stderr, "%s: element %ld: got %g, want %g\n", what, t, got[t], want[t]);
            return 1;
        }
    }
    return 0;
}

static int run_static(int use_alias) {
    const long m = SIZE_M, n = SIZE_N, k = SIZE_K;
    float* A = (float*)malloc(sizeof(float) * m * k);
    float* B = (float*)malloc(sizeof(float) * k * n);
    float* C = (float*)malloc(sizeof(float) * m * n);
    float* R = (float*)malloc(sizeof(float) * m * n);
    fill(A, m * k, 1);
    fill(B, k * n, 2);
    fill(C, m * n, 3);
    fill(R, m * n, 3);
    naive(m, n, k, A, B, R);
    if (use_alias)
        matmul(A, B, C); /* the base-name alias (static inline in the header) */
    else
        MM_FULL(A, B, C);
    int bad = check(use_alias ? "matmul (alias)" : "matmul (full name)", m * n, C, R);
    free(A);
    free(B);
    free(C);
    free(R);
    return bad;
}

static int run_runtime(void) {
    const int64_t m = RT_M, n = RT_N, k = RT_K;
    float* A = (float*)malloc(sizeof(float) * m * k);
    float* B = (float*)malloc(sizeof(float) * k * n);
    float* C = (float*)malloc(sizeof(float) * m * n);
    float* R = (float*)malloc(sizeof(float) * m * n);
    fill(A, m * k, 4);
    fill(B, k * n, 5);
    fill(C, m * n, 6);
    fill(R, m * n, 6);
    naive(m, n, k, A, B, R);
    rt_matmul(m, n, k, A, B, C);
    int bad = check("rt_matmul", m * n, C, R);
    RT_FULL(m, n, k, A, B, C); /* C += A @ B a second time */
    naive(m, n, k, A, B, R);
    bad |= check("rt_matmul (full name, second call)", m * n, C, R);
    free(A);
    free(B);
    free(C);
    free(R);
    return bad;
}

int main(void) {
    int bad = run_static(1) | run_static(0) | run_runtime();
    if (LAST_ERROR() != NULL) {
        fprintf(stderr, "last_error: %s\n", LAST_ERROR());
        return 3;
    }
    if (!bad) printf("ok\n");
    return bad ? 1 : 0;
}
