"""Heap temporaries kept per thread between calls (native/accpy_runtime.h): a freed block is reused
by the next allocation it fits (the smallest such), at most ACCPY_KEPT blocks are kept (the
smallest given way to a larger one), blocks over ACCPY_KEPT_MAX and every block under a sanitizer
are freed at once, a thread's blocks are freed at its exit, and a zeroed allocation of a reused
block is zeros. Then a package's kernel with a heap temporary, called from threads that come
and go, stays exact."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.paths import native_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi.kernels import mixed_matmul_nest  # noqa: E402

PROBE = r"""
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
static int frees; /* the runtime's calls of free() on a block */
static void counting_free(void* p) { if (p) __atomic_add_fetch(&frees, 1, __ATOMIC_SEQ_CST); free(p); }
#define free counting_free
#include "accpy_runtime.h"
#undef free
#include <assert.h>
static void* get(int64_t bytes, int zero) { return accpy_alloc_array("t", 1, zero, 1, (const int64_t[]){bytes}); }
static size_t kept_count(void) { size_t n = 0; for (int s = 0; s < ACCPY_KEPT; ++s) n += accpy_kept.block[s] != NULL; return n; }
static void* worker(void* out) {
    void* p = get(2 << 20, 0);
    accpy_free(p);
    ((size_t*)out)[0] = kept_count();
    ((size_t*)out)[1] = (size_t)__atomic_load_n(&frees, __ATOMIC_SEQ_CST);
    return NULL;
}
int main(void) {
    size_t in_thread[2] = {0, 0};
    pthread_t t;
    pthread_create(&t, NULL, worker, in_thread);
    pthread_join(t, NULL);
    size_t after = (size_t)frees; /* the thread's block, freed at its exit */
    void* big = get(1 << 20, 0);
    memset(big, 7, 1 << 20);
    accpy_free(big);
    void* again = get(300000, 1);            /* fits the kept block: reused, and zeroed */
    int reused = again == big;
    for (int i = 0; i < 300000; ++i) assert(((unsigned char*)again)[i] == 0);
    accpy_free(again);
    void* blocks[6];
    for (int i = 0; i < 6; ++i) blocks[i] = get((int64_t)(i + 1) << 16, 0);
    for (int i = 0; i < 6; ++i) accpy_free(blocks[i]);
    size_t smallest = (size_t)-1;
    for (int s = 0; s < ACCPY_KEPT; ++s) if (accpy_kept.block[s] && accpy_kept.bytes[s] < smallest) smallest = accpy_kept.bytes[s];
    void* huge = get((int64_t)ACCPY_KEPT_MAX + 4096, 0);
    accpy_free(huge);
    int huge_kept = 0;
    for (int s = 0; s < ACCPY_KEPT; ++s) huge_kept |= accpy_kept.block[s] == huge;
    printf("%d %zu %zu %d %zu %d\n", reused, kept_count(), smallest, huge_kept, in_thread[0],
           in_thread[1] == 0 && after == 1);
    return 0;
}
"""


def _probe(tmp_path, *flags):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp_path / "kept.c"
    src.write_text(PROBE)
    exe = tmp_path / ("kept" + "".join(f.strip("-=,") for f in flags))
    p = subprocess.run(["gcc", "-O1", "-w", f"-I{native_dir()}", *flags, str(src), "-o", str(exe), "-lpthread"],
                       capture_output=True, text=True)
    if p.returncode:
        if flags:
            pytest.skip(f"gcc cannot build with {flags}: {p.stderr[-200:]}")
        raise AssertionError(p.stderr)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [int(x) for x in r.stdout.split()]


def test_freed_blocks_are_kept_and_reused(tmp_path):
    reused, kept, smallest, huge_kept, in_thread, freed_at_exit = _probe(tmp_path)
    assert reused == 1
    # six blocks of 64 KiB .. 384 KiB given back (the 1 MiB one kept too): the four largest stay
    assert kept == 4 and smallest >= 3 << 16
    assert huge_kept == 0
    assert in_thread == 1 and freed_at_exit == 1  # the thread's own block, kept while it ran


def test_nothing_is_kept_under_the_address_sanitizer(tmp_path):
    reused, kept, smallest, huge_kept, in_thread, _ = _probe(tmp_path, "-fsanitize=address")
    assert (reused, kept, in_thread) == (0, 0, 0)


UNLOAD = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
typedef void (*mm_t)(const float*, const float*, float*);
static mm_t mm;
static float a[64 * 256], b[256 * 256], c[64 * 256];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static int called, unloaded;
static void* worker(void* unused) {
    mm(a, b, c);                                   /* keeps its temporary: a key value set */
    pthread_mutex_lock(&lock);
    called = 1;
    pthread_cond_broadcast(&go);
    while (!unloaded) pthread_cond_wait(&go, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;                                   /* exits after the library is gone */
}
int main(int argc, char** argv) {
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { printf("%s\n", dlerror()); return 2; }
    mm = (mm_t)dlsym(lib, argv[2]);
    for (int i = 0; i < 64 * 256; ++i) a[i] = (float)(i % 7);
    for (int i = 0; i < 256 * 256; ++i) b[i] = (float)(i % 5);
    mm(a, b, c);                                   /* and the main thread's */
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_mutex_lock(&lock);
    while (!called) pthread_cond_wait(&go, &lock);
    pthread_mutex_unlock(&lock);
    if (dlclose(lib)) return 3;
    pthread_mutex_lock(&lock);
    unloaded = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    printf("ok\n");
    return 0;
}
"""


def _heap_cache_package(M, N, K):
    """A package of one float32 matmul `mm` whose B is cached whole (K x N: on the heap from 64 KiB)."""
    F32 = acc.ScalarType.float32
    nest, (A, B, C), (i, j, k) = mixed_matmul_nest(M, N, K, F32, F32, F32, F32)
    plan = nest.create_plan()
    plan.cache(B, index=i)
    pkg = acc.Package()
    pkg.add(plan, args=(A, B, C), base_name="mm")
    return pkg


def test_a_library_unloaded_before_a_thread_that_kept_a_block_exits(tmp_path):
    """dlclose, then a thread that kept a block exits: its key's destructor (code of the unloaded
    library) must not run; the process ends normally."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    _heap_cache_package(64, 256, 256).build("unload", output_dir=tmp_path, python_module=False, progress=False)
    sym = re.search(r"void (mm_[0-9a-f]+)\(", (tmp_path / "unload.h").read_text()).group(1)
    (tmp_path / "unload_driver.c").write_text(UNLOAD)
    exe = tmp_path / "unload_driver"
    subprocess.run(["gcc", "-O1", str(tmp_path / "unload_driver.c"), "-o", str(exe), "-ldl", "-lpthread"], check=True)
    so = next(tmp_path.glob("*.so"))
    r = subprocess.run([str(exe), str(so), sym], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr)


def test_kernels_with_heap_temporaries_from_threads_that_come_and_go(tmp_path):
    """A cache of 256 KiB (on the heap) in a kernel called from 8 threads, one after another and
    four at a time: every result exact."""
    M, N, K = 64, 256, 256
    lib = _heap_cache_package(M, N, K).build("kept", output_dir=tmp_path, python_module=False, progress=False)
    assert "accpy_alloc_array" in (tmp_path / "kept.c").read_text()
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 4, (M, K)).astype(np.float32)
    b = rng.integers(-4, 4, (K, N)).astype(np.float32)
    want = a @ b
    bad = []

    def run():
        for _ in range(3):
            c = np.zeros((M, N), np.float32)
            lib.mm(a, b, c)
            if not np.array_equal(c, want):
                bad.append(1)

    for wave in range(2):
        ts = [threading.Thread(target=run) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    run()
    assert not bad
