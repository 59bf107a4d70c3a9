/* The error channel of accpy_runtime.h across threads (compiled by tests/test_abi.py with
 * -fopenmp -pthread). Returns 0 when:
 *  - an error raised on an OpenMP worker thread reaches the caller through accpy_collect_error;
 *  - an error on the caller's own thread stays on that thread (it is not published process-wide);
 *  - an error raised on another application thread is not collected here.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "accpy_runtime.h"

static void* other_thread(void* arg) {
    (void)arg;
    accpy_set_error("error on another thread");
    return NULL;
}

int main(void) {
    omp_set_dynamic(0);
#pragma omp parallel num_threads(4)
    {
        if (omp_get_thread_num() == 2) accpy_set_error("worker %d failed", 2);
    }
    if (!accpy_collect_error()) return 1;
    const char* e = accpy_take_error();
    if (!e || strcmp(e, "worker 2 failed") != 0) return 2;
    if (accpy_take_error() != NULL) return 3;

    accpy_set_error("mine");
    if (accpy_shared_error_flag) return 4; /* the caller's own error is not process-wide */
    if (!accpy_collect_error() || strcmp(accpy_take_error(), "mine") != 0) return 5;

    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, NULL);
    if (accpy_collect_error()) return 6; /* another thread's error is not ours */
    if (accpy_take_error() != NULL) return 7;
    printf("ok\n");
    return 0;
}
