"""Memory safety of generated code: the emitted `name.c` runs under AddressSanitizer and
UndefinedBehaviorSanitizer, called from a C driver with exactly-sized heap buffers.

Kernels chosen for their boundary code: a matmul with tiles that do not divide the
extents, a skewed conv1d (triangle / rectangle / triangle loops, also unrolled), runtime
sizes with partial tiles, LAST_MAJOR and explicitly strided inputs, a cached and
vectorized matmul, and the DEBUG-mode wrapper (reference copies, comparison).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import accpy as acc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from abi import kernels as K  # noqa: E402
from abi.driver import read_results, write_driver  # noqa: E402

SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-g", "-O1",
             "-std=gnu11", "-fwrapv", "-fno-math-errno"]
REPORT_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


def _sanitizers_available(tmp: Path) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    p = subprocess.run(["gcc", *SAN_FLAGS, str(src), "-o", str(tmp / "probe")], capture_output=True, text=True)
    return p.returncode == 0


def _cached_vectorized_matmul():
    k = K.make_matmul(30, 37, 19, tiles=(8, 16), k_split=4, base_name="cached_mm")
    i, j, kk_, kk, ii, jj = k.source.get_indices()
    plan = k.source.create_plan()
    A, B, C = k.args
    plan.cache(B, index=ii)
    plan.cache(C, index=ii)
    plan.vectorize(jj)
    k.source = plan
    return k


def _kernels():
    return [
        K.make_matmul(13, 11, 7, tiles=(4, 5), k_split=3, base_name="mm_ragged"),
        K.make_conv1d_skewed(20, 5, base_name="conv1d_skew"),
        K.make_conv1d_skewed(9, 4, unroll_below=3, base_name="conv1d_skew_unrolled"),
        K.make_runtime_matmul(dims=(13, 9, 7), tiles=(4, 4), base_name="rt_mm"),
        K.make_last_major(7, 10, 6, base_name="lm_mm"),
        K.make_int_axpy(37, base_name="axpy_i32"),
        _cached_vectorized_matmul(),
    ]


def _sample_kernels():
    """The sample kernels (samples/optimized_matmul.py, samples/conv2d.py) at ragged sizes."""
    root = Path(__file__).resolve().parent.parent / "samples"
    sys.path.insert(0, str(root))
    from conv2d import conv2d_plan, conv2d_reference
    from optimized_matmul import matmul_plan

    out = []
    # (the third: heap panels per thread; the last two: long k blocks, 8 x 48 micro-tiles with tails)
    for M, N, K_, t in ((61, 75, 37, 1), (70, 130, 45, 2), (37, 300, 130, 2), (13, 100, 800, 1), (21, 150, 790, 2)):
        plan, args = matmul_plan(M, N, K_, threads=t)
        A, B, C = args

        def inputs(rng, M=M, N=N, K_=K_):
            return {"A": K._rand(rng, (M, K_), "float32"), "B": K._rand(rng, (K_, N), "float32"),
                    "C": K._rand(rng, (M, N), "float32")}

        out.append(K.Kernel(plan, args, f"sgemm_t{t}_{N}_{K_}", inputs=inputs,
                            oracle=lambda v: {"C": v["C"] + v["A"] @ v["B"]}))
    H, W, C_, K2 = 5, 9, 6, 20
    plan, args = conv2d_plan(H, W, C_, K2)
    names = [a.name for a in args]

    def conv_inputs(rng):
        return {names[0]: K._rand(rng, (H + 2, W + 2, C_), "float32"), names[1]: K._rand(rng, (3, 3, C_, K2), "float32"),
                names[2]: K._rand(rng, (H, W, K2), "float32")}

    out.append(K.Kernel(plan, args, "conv3x3", inputs=conv_inputs,
                        oracle=lambda v: {names[2]: v[names[2]] + conv2d_reference(v[names[0]], v[names[1]])}))
    return out


def _run_under_sanitizers(tmp_path: Path, mode, kernels=None, includes=()) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    if not _sanitizers_available(tmp_path):
        pytest.skip("gcc cannot link -fsanitize=address,undefined here (libasan/libubsan missing)")
    kernels = kernels if kernels is not None else _kernels()
    pkg = acc.Package()
    fns = [pkg.add(k.source, args=k.args, base_name=k.base_name) for k in kernels]
    out = tmp_path / "out"
    name = "san_" + mode.value
    assert pkg.build(name, format=acc.Package.Format.HAT_SOURCE, mode=mode, output_dir=out) is None
    meta = tomllib.loads((out / f"{name}.hat").read_text())
    openmp = bool(meta["dependencies"]["dynamic"])
    rng = np.random.default_rng(7)
    cases, before = [], []
    for k, f in zip(kernels, fns):
        values = k.call_args(rng)
        cases.append((f.name, f.infos, values))
        before.append(K.copy_inputs(values))
    work = tmp_path / "work"
    work.mkdir()
    driver = write_driver(work, name, cases)
    exe = work / "driver"
    cmd = ["gcc", *SAN_FLAGS, f"-I{out}", *[f"-I{d}" for d in includes], str(out / f"{name}.c"), str(driver), "-o",
           str(exe), "-lm"]
    if openmp:
        cmd.insert(1, "-fopenmp")
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"compiling under sanitizers failed:\n{' '.join(cmd)}\n{p.stderr}"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    if "LeakSanitizer has encountered a fatal error" in r.stderr:  # e.g. under ptrace: run without leak checks
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0:halt_on_error=1"
        r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, f"driver exited with {r.returncode}\n{r.stderr[-6000:]}"
    for marker in REPORT_MARKERS:
        assert marker not in r.stderr, r.stderr[-6000:]
    # the driver really ran the kernels: its results match numpy
    for k, res, b in zip(kernels, read_results(work, cases), before):
        K.check_outputs(k, res, b)


@pytest.mark.slow
def test_release_kernels_are_memory_safe(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    _run_under_sanitizers(tmp_path, acc.Package.Mode.RELEASE)


@pytest.mark.slow
def test_debug_mode_wrappers_are_memory_safe(tmp_path, monkeypatch):
    # DEBUG mode adds heap copies of the written arrays and an element-wise comparison
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    _run_under_sanitizers(tmp_path, acc.Package.Mode.DEBUG)


@pytest.mark.slow
def test_sample_kernels_are_memory_safe(tmp_path, monkeypatch):
    # the optimized sgemm (packed panels, register tile, masked tails, OpenMP) and the conv2d sample
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    _run_under_sanitizers(tmp_path, acc.Package.Mode.RELEASE, _sample_kernels())


@pytest.mark.slow
def test_flattened_pixel_caches_are_memory_safe(tmp_path, monkeypatch):
    # bands of whole image rows (exact blocks) and bands that start inside a row (fractional bounds)
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    kernels = [K.make_flattened_band(6, 14, 28, "band_rows"), K.make_flattened_band(5, 9, 16, "band_16"),
               K.make_flattened_band(7, 5, 3, "band_3"), K.make_flattened_band(4, 6, 40, "band_past_end")]
    _run_under_sanitizers(tmp_path, acc.Package.Mode.RELEASE, kernels)


def test_driver_catches_an_out_of_bounds_kernel(tmp_path, monkeypatch):
    """The harness itself: a kernel that writes one element past its output is reported."""
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    if shutil.which("gcc") is None or not _sanitizers_available(tmp_path):
        pytest.skip("gcc with -fsanitize=address,undefined is not available")
    from accpy.ir.expr import BinOp, Const
    from accpy.ir.visitor import Mutator
    from accpy.package.package import PackageFunction

    k = K.make_conv1d_skewed(8, 3, base_name="oob")
    orig = PackageFunction.lowered

    class ShiftStore(Mutator):  # Y[i] -> Y[i + 1]: the last iteration writes Y[N]
        def visit_Store(self, st):
            return type(st)(st.buffer, (BinOp("add", st.indices[0], Const(1), st.indices[0].dtype),), st.value,
                            st.reduce)

    def shifted(self, name):
        import dataclasses

        fn = orig(self, name)
        return dataclasses.replace(fn, body=ShiftStore().visit(fn.body))

    monkeypatch.setattr(PackageFunction, "lowered", shifted)
    pkg = acc.Package()
    f = pkg.add(k.source, args=k.args, base_name=k.base_name)
    out = tmp_path / "out"
    pkg.build("oob", format=acc.Package.Format.HAT_SOURCE, output_dir=out)
    work = tmp_path / "work"
    work.mkdir()
    cases = [(f.name, f.infos, k.call_args(np.random.default_rng(0)))]
    driver = write_driver(work, "oob", cases)
    exe = work / "driver"
    p = subprocess.run(["gcc", *SAN_FLAGS, f"-I{out}", str(out / "oob.c"), str(driver), "-o", str(exe), "-lm"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    assert r.returncode != 0
    assert "heap-buffer-overflow" in r.stderr


# -- runtime sizes that do not fit: an error naming the array, never a short allocation ------------

RUNTIME_SIZES_SRC = r'''
import ctypes, sys
import numpy as np
import accpy as acc

out = sys.argv[1]
M, N = acc.create_dimensions()
X = acc.Array(role=acc.Role.INPUT, name="X", shape=(1,))
Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(1,))
T = acc.Array(role=acc.Role.TEMP, name="T", shape=(M, N))  # runtime-sized: on the heap
nest = acc.Nest(shape=(M, N))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    T[i, j] = X[0] * 2.0
    Y[0] += T[i, j]

# DEBUG mode copies the written runtime-sized array Z before the reference run
Z = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Z", shape=(M, N))
nest2 = acc.Nest(shape=(M, N))
i2, j2 = nest2.get_indices()

@nest2.iteration_logic
def _():
    Z[i2, j2] += 1.0

pkg = acc.Package()
f = pkg.add(nest, args=(M, N, X, Y), base_name="tmp")
pkg.build("sizes", output_dir=out, python_module=False)
dbg = acc.Package()
g = dbg.add(nest2, args=(M, N, Z), base_name="inc")
dbg.build("dbgsizes", output_dir=out, python_module=False, mode=acc.Package.Mode.DEBUG)
lib = acc.load(out, name="sizes")
x, y = np.ones(1, np.float32), np.zeros(1, np.float32)
lib.tmp(3, 5, x, y)
assert y[0] == 30, y
for m, n in ((2 ** 62 + 16, 1), (2 ** 61, 2 ** 3), (2 ** 63 - 1, 2 ** 63 - 1)):
    try:
        lib.tmp(m, n, x, y)
        print("no error for", m, n)
    except acc.KernelError as e:
        print("KernelError", e)
so = ctypes.CDLL(f"{out}/libsizes.so")
so.sizes_last_error.restype = ctypes.c_char_p
P = ctypes.POINTER(ctypes.c_float)
fn = getattr(so, f.name)
fn.argtypes = [ctypes.c_int64, ctypes.c_int64, P, P]
for m, n in ((-3, -5), (-1, 4), (2 ** 62 + 16, 1)):
    fn(m, n, x.ctypes.data_as(P), y.ctypes.data_as(P))
    print("C", m, n, so.sizes_last_error())
so2 = ctypes.CDLL(f"{out}/libdbgsizes.so")
so2.dbgsizes_last_error.restype = ctypes.c_char_p
fn2 = getattr(so2, g.name)
fn2.argtypes = [ctypes.c_int64, ctypes.c_int64, P]
z = np.zeros(4, np.float32)
for m, n in ((2 ** 62, 4), (-2, 2), (0, 5)):
    fn2(m, n, z.ctypes.data_as(P))
    print("D", m, n, so2.dbgsizes_last_error())
print("done")
'''


@pytest.mark.slow
def test_runtime_sizes_that_overflow_are_errors_not_crashes(tmp_path):
    """Temporaries and DEBUG copies sized by runtime dimensions: a negative dimension or a
    size whose byte count overflows is a KernelError naming the array and its shape
    (the kernel runs in a subprocess: a wrapped size would crash it)."""
    env = dict(os.environ, ACCPY_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                           os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", RUNTIME_SIZES_SRC, str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=300, env=env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert lines[-1] == "done"
    assert lines[0] == ("KernelError tmp: cannot allocate the temporary T of shape (4611686018427387920, 1) "
                        "(4-byte elements): its size in bytes overflows")
    assert lines[1].startswith("KernelError tmp: cannot allocate the temporary T of shape (2305843009213693952, 8)")
    assert lines[2].startswith("KernelError tmp: cannot allocate the temporary T of shape "
                               "(9223372036854775807, 9223372036854775807)")
    assert lines[3] == "C -3 -5 b'cannot allocate the temporary T of shape (-3, -5): a dimension is negative'"
    assert lines[4] == "C -1 4 b'cannot allocate the temporary T of shape (-1, 4): a dimension is negative'"
    assert lines[5].startswith("C 4611686018427387920 1 b'cannot allocate the temporary T of shape")
    assert lines[6].startswith("D 4611686018427387904 4 b'cannot allocate the DEBUG-mode copy of Z of shape "
                               "(4611686018427387904, 4)") and lines[6].endswith("overflows'")
    assert lines[7] == "D -2 2 b'cannot allocate the DEBUG-mode copy of Z of shape (-2, 2): a dimension is negative'"
    assert lines[8] == "D 0 5 None"  # an empty array is fine


# ---- multicaches (trigger_index) over padded and skewed spaces -----------------------------

def _trigger_matmul(M, N, K_, dtype, schedule_fn, cache_fn, name, layout_b=acc.Array.Layout.FIRST_MAJOR):
    """A matmul kernel whose schedule and caches are set by the two callbacks."""
    et = acc.ScalarType(dtype)
    A = acc.Array(role=acc.Role.INPUT, name="A", shape=(M, K_), element_type=et)
    B = acc.Array(role=acc.Role.INPUT, name="B", shape=(K_, N), element_type=et, layout=layout_b)
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, name="C", shape=(M, N), element_type=et)
    nest = acc.Nest(shape=(M, N, K_))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += A[i, k] * B[k, j]

    s = nest.create_schedule()
    idx = schedule_fn(s, i, j, k)
    plan = s.create_plan()
    cache_fn(plan, (A, B, C), idx)
    order = "F" if layout_b is acc.Array.Layout.LAST_MAJOR else "C"

    def inputs(rng):
        return {"A": K._rand(rng, (M, K_), dtype), "B": K._rand(rng, (K_, N), dtype, order),
                "C": K._rand(rng, (M, N), dtype)}

    return K.Kernel(plan, (A, B, C), name, inputs=inputs, oracle=lambda v: {"C": v["C"] + v["A"] @ v["B"]})


def _padded_split(s, i, j, k):
    s.pad(i, 2)
    ii = s.split(i, 3)
    return {"i": i, "ii": ii, "j": j, "k": k}


def _skewed(s, i, j, k):
    s.reorder(j, k, i)
    s.skew(j, k)
    return {"i": i, "j": j, "k": k}


def _trigger_kernels():
    return [
        # pad + split: the panels of the first (padded) rows start before A
        _trigger_matmul(40, 30, 20, "float32", _padded_split,
                        lambda p, a, x: p.cache(a[0], index=x["ii"], trigger_index=x["i"]), "trig_pad"),
        _trigger_matmul(2, 1, 1, "float32", _padded_split,
                        lambda p, a, x: p.cache(a[0], index=x["ii"], trigger_index=x["i"]), "trig_pad_tiny"),
        # skew: lead combinations the skewed loops never visit reach before B
        _trigger_matmul(1, 4, 3, "int32", _skewed,
                        lambda p, a, x: p.cache(a[1], index=x["i"], trigger_index=x["j"]), "trig_skew_lm",
                        layout_b=acc.Array.Layout.LAST_MAJOR),
        _trigger_matmul(5, 9, 4, "int32", _skewed,
                        lambda p, a, x: p.cache(a[1], index=x["i"], trigger_index=x["j"]), "trig_skew"),
        _trigger_matmul(7, 6, 5, "float32", _skewed,
                        lambda p, a, x: p.cache(a[0], index=x["i"], trigger_index=x["j"]), "trig_skew_a"),
    ]


@pytest.mark.slow
def test_trigger_caches_are_memory_safe(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    _run_under_sanitizers(tmp_path, acc.Package.Mode.RELEASE, _trigger_kernels())


def _random_trigger_kernels(seed: int, count: int) -> list:
    """`count` matmuls with random pads, splits, skews and orders, each with a multicache of A
    or B at random key and trigger indices (combinations accpy refuses are drawn again)."""
    import random

    rnd = random.Random(seed)
    out, tries = [], 0
    while len(out) < count:
        tries += 1
        assert tries < 50 * count, "too few legal random schedules"
        M, N, K_ = (rnd.randint(1, 13) for _ in range(3))
        dtype = rnd.choice(["float32", "int32"])
        layout_b = rnd.choice([acc.Array.Layout.FIRST_MAJOR, acc.Array.Layout.LAST_MAJOR])
        ops = rnd.sample(["pad", "split", "split2", "skew"], rnd.randint(1, 4))
        picks = [rnd.random() for _ in range(8)]

        def schedule_fn(s, i, j, k, ops=ops, picks=picks):
            x = {"i": i, "j": j, "k": k}
            for op in ops:
                if op == "pad":
                    s.pad(x[rnd_pick(["i", "j", "k"], picks[0])], 1 + int(picks[1] * 3))
                elif op in ("split", "split2"):
                    name = rnd_pick(sorted(x), picks[2 if op == "split" else 3])
                    x[name + "s"] = s.split(x[name], 2 + int(picks[4] * 3))
                else:
                    a, b = rnd_pick([("j", "k"), ("i", "k"), ("i", "j")], picks[5])
                    s.skew(x[a], x[b])
            order = list(s.get_indices())
            rnd2 = random.Random(int(picks[6] * 1e9))
            rnd2.shuffle(order)
            try:
                s.reorder(*order)
            except Exception:
                pass  # keep the order the transforms gave
            return {ix.name: ix for ix in s.get_indices()}

        def cache_fn(plan, args, idx, picks=picks):
            order = list(plan.schedule.get_indices())
            a, b = sorted(random.Random(int(picks[7] * 1e9)).sample(range(len(order)), 2))
            plan.cache(args[0] if picks[0] < 0.5 else args[1], index=order[b], trigger_index=order[a])

        try:
            kern = _trigger_matmul(M, N, K_, dtype, schedule_fn, cache_fn, f"rt{len(out)}", layout_b=layout_b)
            probe = acc.Package()
            probe.add(kern.source, args=kern.args, base_name="probe")  # accepted by the front end
        except (ValueError, TypeError, acc.ScheduleError, NotImplementedError):
            continue
        out.append(kern)
    return out


def rnd_pick(seq, u):
    return seq[min(int(u * len(seq)), len(seq) - 1)]


@pytest.mark.slow
def test_random_trigger_caches_are_memory_safe(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    _run_under_sanitizers(tmp_path, acc.Package.Mode.RELEASE, _random_trigger_kernels(seed=11, count=40))


def _tile_kernel(M, N, K_, ta, tb, base_name):
    """An int8 matmul tensorized onto the x86 tile unit's functional model (A, B, C in tiles;
    partial tiles go through scratch blocks)."""
    from accpy.targets import x86tile

    S = acc.ScalarType
    A = acc.Array(role=acc.Role.INPUT, element_type=ta, shape=(M, K_), name="A")
    B = acc.Array(role=acc.Role.INPUT, element_type=tb, shape=(K_, N), name="B")
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type=S.int32, shape=(M, N), name="C")
    nest = acc.Nest(shape=(M, N, K_))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += acc.cast(A[i, k], S.int32) * acc.cast(B[k, j], S.int32)

    s = nest.create_schedule()
    ii, jj, kk = s.split(i, 16), s.split(j, 16), s.split(k, 64)
    s.reorder(j, k, i, ii, jj, kk)
    plan = s.create_plan(x86tile.emulating(acc.Target.HOST))
    plan.cache(B, index=i, location=acc.MemorySpace.AMX_TILE)
    plan.cache(A, index=ii, location=acc.MemorySpace.AMX_TILE)
    plan.cache(C, index=ii, location=acc.MemorySpace.AMX_TILE)
    plan.tensorize(indices=(ii, jj, kk))

    def inputs(rng):
        return {"A": rng.integers(-100, 100, (M, K_)).astype(ta.dtype), "B": rng.integers(-100, 100, (K_, N)).astype(tb.dtype),
                "C": rng.integers(-1000, 1000, (M, N)).astype(np.int32)}

    def oracle(v):
        return {"C": v["C"] + v["A"].astype(np.int32) @ v["B"].astype(np.int32)}

    return K.Kernel(plan, (A, B, C), base_name, inputs=inputs, oracle=oracle)


def _sample_matmul_kernel(M, N, K_, path, base_name, threads=1, sizes=None, columns=None):
    """samples/int8_matmul.py's int8 kernels: the blocked tile schedule on the tile unit's model
    (B packed in VNNI order, partial tiles in every direction; with threads and `sizes`, e.g. each
    thread its own rows and copy of B, C's next tiles prefetched; with `columns` (lo, hi), only
    those of C: `build_tile_matmul`'s two functions) or the VNNI vector one (a partial group of k:
    masked loads, a broadcast of fewer than 4 bytes)."""
    import sys

    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import tile_matmul_plan, vector_matmul_plan

    if path == "amx":
        plan, args = tile_matmul_plan(M, N, K_, "int8", threads, target=x86tile.emulating(acc.Target.HOST),
                                      sizes=sizes or dict(NC=48), columns=columns)
    else:
        plan, args = vector_matmul_plan(M, N, K_, "int8", sizes=dict(NC=64, KC=16, MC=12))

    def inputs(rng):
        return {"A": rng.integers(0, 256, (M, K_)).astype(np.uint8), "B": rng.integers(-128, 128, (K_, N)).astype(np.int8),
                "C": rng.integers(-1000, 1000, (M, N)).astype(np.int32)}

    lo, hi = columns or (0, N)

    def oracle(v):
        c = v["C"].copy()
        c[:, lo:hi] += v["A"].astype(np.int32) @ v["B"][:, lo:hi].astype(np.int32)
        return {"C": c}

    return K.Kernel(plan, args, base_name, inputs=inputs, oracle=oracle)


def _sample_fused_kernel(M, N, K_, base_name):
    """samples/int8_matmul.py's fused quantized matmul on the tile unit's model: the epilogue's
    16 x 16 blocks stored from the tiles, partial ones at the edges."""
    import sys

    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_matmul import fused_tile_plan, reference

    plan, args = fused_tile_plan(M, N, K_, relu=True, target=x86tile.emulating(acc.Target.HOST), sizes=dict(NC=48))

    def inputs(rng):
        return {"A": rng.integers(0, 256, (M, K_)).astype(np.uint8), "B": rng.integers(-128, 128, (K_, N)).astype(np.int8),
                "Acc": np.zeros((M, N), np.int32), "bias": rng.standard_normal(N).astype(np.float32),
                "Out": np.zeros((M, N), np.int8), "scale": np.float32(0.003)}

    def oracle(v):
        return {"Acc": v["A"].astype(np.int32) @ v["B"].astype(np.int32),
                "Out": reference(v["A"], v["B"], v["scale"], v["bias"], relu=True)}

    return K.Kernel(plan, args, base_name, inputs=inputs, oracle=oracle)


def _sample_fused_conv_kernel(H, W, C, K_, base_name):
    """samples/int8_conv.py's fused quantized conv on the tile unit's model (a partial tile of
    pixels, the epilogue's blocks stored from the tiles)."""
    import sys

    from accpy.targets import x86tile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "samples"))
    from int8_conv import fused_tile_conv_plan, reference

    plan, args = fused_tile_conv_plan(H, W, C, K_, relu=False, target=x86tile.emulating(acc.Target.HOST))

    def inputs(rng):
        return {"I": rng.integers(0, 256, (H + 2, W + 2, C)).astype(np.uint8),
                "Wt": rng.integers(-128, 128, (3, 3, C, K_)).astype(np.int8), "Acc": np.zeros((H, W, K_), np.int32),
                "bias": rng.standard_normal(K_).astype(np.float32), "Out": np.zeros((H, W, K_), np.int8),
                "scale": np.float32(1.0 / (32 * 9 * C))}

    def oracle(v):
        out, sums = reference(v["I"], v["Wt"], v["scale"], v["bias"], relu=False)
        return {"Acc": sums, "Out": out}

    return K.Kernel(plan, args, base_name, inputs=inputs, oracle=oracle)


@pytest.mark.slow
def test_tile_unit_kernels_are_memory_safe(tmp_path, monkeypatch):
    """Tensorized int8 matmuls on the tile unit's model (full and partial tiles, scratch blocks,
    VNNI packing of B) under AddressSanitizer and UBSan."""
    from accpy.paths import native_dir

    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path / "cache"))
    S = acc.ScalarType
    kernels = [_tile_kernel(32, 32, 128, S.int8, S.int8, "tile_full"),
               _tile_kernel(37, 21, 70, S.int8, S.int8, "tile_partial"),
               _tile_kernel(5, 3, 9, S.int8, S.int8, "tile_small"),
               _sample_matmul_kernel(37, 61, 70, "amx", "tile_blocked"),
               # two threads, 5 and 4 rows of 2 x 2 tiles (the last partial), each its own copy of B
               _sample_matmul_kernel(264, 100, 70, "amx", "tile_own_rows", threads=2, sizes=dict(PF=1)),
               # two threads, 2 x 2 tiles, each its own two blocks of columns (the last partial), k in
               # blocks of 64 with a partial last one, A's rows of tiles copied
               _sample_matmul_kernel(70, 200, 150, "amx", "tile_own_columns", threads=2,
                                     sizes=dict(GR=2, GC=2, NC=64, KC=64, PA=1, split="j", PF=1)),
               # `build_tile_matmul`'s two functions for a C 16 bytes past a line: columns 12.. on a
               # 2 x 2 grid (k blocks of 64, the last partial), then columns 0..11 (one partial tile)
               _sample_matmul_kernel(70, 96, 150, "amx", "tile_lined_columns", threads=2, columns=(12, 96),
                                     sizes=dict(GR=2, GC=2, NC=64, KC=64, PA=1, split="j", PF=1)),
               _sample_matmul_kernel(70, 96, 150, "amx", "tile_edge_columns", threads=2, columns=(0, 12),
                                     sizes=dict(GR=1, GC=1, NC=16, KC=150, split="i")),
               _sample_fused_kernel(37, 61, 70, "tile_fused_epilogue"),
               _sample_fused_conv_kernel(3, 20, 64, 32, "tile_fused_conv")]
    if all(acc.Target.HOST.has(f) for f in ("avx512f", "avx512bw", "avx512_vnni")):
        kernels += [_sample_matmul_kernel(13, 70, 43, "vector", "vnni_tails"),
                    _sample_matmul_kernel(3, 16, 1, "vector", "vnni_one_k")]
    _run_under_sanitizers(tmp_path, acc.Package.Mode.RELEASE, kernels, includes=[native_dir() / "x86tile"])
