"""End-to-end tests of samples/: each sample runs as a script, in a fresh process, with its
own output directory and an empty build cache, and must exit 0 and print its key lines. Every
run leaves the repository as it was (`git status`, ignored files included): the files go to
--output-dir, or without it to a folder under the system's temporary directory. Samples whose
kernel runs on a functional model say "functional model, not timed" instead of a speed; fused
samples slower than numpy say so and why. (The rules each sample's source keeps, and
samples/sample_support.py itself: tests/samples/test_sample_support.py.)"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"


NOT_TIMED = "functional model, not timed"


def _git(*args: str) -> str:
    p = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"git {' '.join(args)}: {p.stderr.strip()} (not a git working tree?)")
    return p.stdout


def _git_entries() -> set:
    """`git status` entries, every file listed, ignored ones included, that a sample could have
    made: under samples/ (next to itself) or outside the repository's other folders (at the top:
    its working directory here). Not __pycache__ (Python's own, when a sample imports another);
    not the test runners' caches, nor other folders, where other work in the same tree may be
    adding files meanwhile."""
    others = set(_git("ls-tree", "-d", "--name-only", "HEAD").split()) - {"samples"}
    others |= {".hypothesis", ".pytest_cache", ".benchmarks"}
    out = set()
    for line in _git("status", "--porcelain", "--ignored", "--untracked-files=all").splitlines():
        path = line[3:].strip('"')
        if "__pycache__" not in path and path.split("/")[0] not in others:
            out.add(line)
    return out


def run_sample(name: str, tmp_path: Path, *args: str, timeout: float = 900, output_dir: bool = True,
               env: dict = None) -> subprocess.CompletedProcess:
    """Run samples/<name> (with --output-dir tmp_path/out unless output_dir=False), from the
    repository's top, and check that it left the repository as it was."""
    env = dict(os.environ, **(env or {}))
    env["ACCPY_CACHE_DIR"] = str(tmp_path / "cache")
    env.pop("ACCPY_DEBUG_LOWER", None)
    out = ["--output-dir", str(tmp_path / "out")] if output_dir else []
    before = _git_entries()
    p = subprocess.run([sys.executable, str(SAMPLES / name), *out, *args],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    made = sorted(_git_entries() - before)
    assert not made, f"{name} changed the repository: {made}\n--- stdout\n{p.stdout}"
    return p


def check_ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"exit status {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
    return p.stdout


@pytest.mark.slow  # builds the pybind11 module with an empty cache (about 10 s)
def test_hello_matmul(tmp_path):
    out = check_ok(run_sample("hello_matmul.py", tmp_path))
    # the schedule is printed, with the guard of the partial j tile (320 = 6 * 48 + 32)
    assert "for j in range(0, 320, 48):  # length 7, stride 48" in out
    assert "if j + jj < 320:" in out
    assert re.search(r"lib\.matmul \(object returned by build\)\s+max \|error\| \S+\s+OK", out)
    assert re.search(r"hello_matmul\.matmul \(pybind11 module\)\s+max \|error\| \S+\s+OK", out)
    assert re.search(r"built hello_matmul in [\d.]+ s .*function matmul_[0-9a-f]{16}", out)
    assert re.search(r"timings \(s\): emit [\d.]+, gcc [\d.]+, compile_total [\d.]+, total [\d.]+", out)
    assert re.search(r"python module \(background\): pybind11 [\d.]+ s", out)
    assert out.rstrip().endswith("PASS")
    d = tmp_path / "out"
    for f in ("hello_matmul.c", "hello_matmul.h", "hello_matmul.hat", "libhello_matmul.so", "hello_matmul.a"):
        assert (d / f).is_file(), f
        assert f in out
    modules = list(d.glob("hello_matmul.cpython-*.so")) + list(d.glob("hello_matmul.*.pyd"))
    assert modules and modules[0].name in out


@pytest.mark.slow  # builds 15 functions (about 6 s)
def test_schedules_tour(tmp_path):
    out = check_ok(run_sample("schedules_tour.py", tmp_path))
    verdicts = [ln for ln in out.splitlines() if re.match(r"(ok|FAIL)\s{2,}\w+\s+shape", ln)]
    assert len(verdicts) == 15, verdicts
    assert all(v.startswith("ok ") and v.endswith("C == numpy") for v in verdicts), verdicts
    assert "15 of 15 examples match numpy" in out
    assert "built 15 functions into one package" in out
    # facts and loops from Accera's chapter
    for text in [
        "order (i, j, jj, k), shape (3, 4, 3, 15): 540 iterations\n",
        "        for j in range(0, 12, 3):  # length 4, stride 3\n",
        "shape (3, 3, 5, 15): 540 iterations + 135 empty elements",
        "shape (3, 1, 13, 15): 540 iterations + 45 empty elements",
        "order (i, j, jjj, jj, k), shape (3, 2, 2, 3, 15)",
        "            for jjj in range(0, 6, 3):  # length 2, stride 3\n",
        "order (i, j, jj, k, kk), shape (3, 6, 2, 5, 3)",
        "order (j, k, i), shape (12, 15, 3)",
        "                    if j + jj < 12:\n",
        "            if i - j >= 0 and i - j < 8:\n",
        # skew, unswitched: triangle / rectangle / upside-down triangle
        "    for i in range(2):\n        for j in range(i + 1):\n            C[i - j] += A[i] * B[j]\n"
        "    for i in range(2, 8):\n        for j in range(3):\n            C[i - j] += A[i] * B[j]\n"
        "    for i in range(8, 10):\n        for j in range(i - 7, 3):\n",
        # unroll_loops_smaller_than=3: the triangles become straight-line code
        "    C[0] += A[0] * B[0]\n    C[1] += A[1] * B[0]\n    C[0] += A[1] * B[1]\n    for i in range(2, 8):\n",
    ]:
        assert text in out, text
    # the split by 5 is unswitched: the partial tile runs as its own loop, without a guard
    split5 = out.split("\n5. split(j, 5)")[1].split("=====")[0]
    lowered = split5.split("to_python(unswitched=True):")[1]
    assert "if " not in lowered and "for jj in range(2):" in lowered
    assert (tmp_path / "out" / "libschedules_tour.so").is_file()


@pytest.mark.slow  # builds 15 functions (about 5 s)
def test_schedules_tour_quiet(tmp_path):
    out = check_ok(run_sample("schedules_tour.py", tmp_path, "--quiet"))
    assert "print(schedule)" not in out
    assert "15 of 15 examples match numpy" in out


@pytest.mark.slow
def test_conv1d_skew(tmp_path):
    out = check_ok(run_sample("conv1d_skew.py", tmp_path))
    assert "1-D convolution: C[992] += A[1000] (*) B[9], float32" in out
    labels = re.findall(r"^    # (\w+)$", out, flags=re.M)
    assert labels == ["triangle", "rectangle", "triangle"] * 2, labels
    assert "guards left in the lowered loops: skew 0, skew + split + reorder 0" in out
    assert "    for i in range(1, 124):\n        for j in range(9):\n            for ii in range(8):\n" in out
    for name in ("conv_default", "conv_skew", "conv_skew_blocked"):
        assert re.search(rf"^ok\s+{name}\s+max \|error\| vs np.correlate", out, flags=re.M), name
    assert out.rstrip().endswith("PASS")


@pytest.mark.slow  # about 6 s
def test_conv1d_skew_split_2(tmp_path):
    """gcc 12 -O3 miscompiled these loops (the vectorizer lost updates of overlapping elements);
    the emitter now keeps gcc's vectorizer off loops whose iterations may touch one element."""
    check_ok(run_sample("conv1d_skew.py", tmp_path, "--taps", "7", "--split", "2"))


@pytest.mark.slow  # builds and times (about 9 s)
def test_fused_relu(tmp_path):
    out = check_ok(run_sample("fused_relu.py", tmp_path, "--m", "64", "--n", "48", "--k", "40", "--rows", "4",
                              "--tile", "16"))
    assert "reorder(i, j, k, f) -> ValueError: Invalid order: the fusing index f must precede" in out
    assert re.search(r"fusing the matmul reordered to \(j, i, k\) -> ScheduleError: .*C\[\d+, \d+\]", out)
    assert "fused schedule: [Index(i), Index(j), Index(f), Index(kk), Index(ii), Index(jj)]" in out
    assert "result vs numpy maximum(C + A @ B, 0): OK" in out
    assert "register tile of C: 4 x 16" in out
    _check_honest_timing(out, "of which A @ B")


def _check_honest_timing(out: str, breakdown: str) -> None:
    """A fused sample's timing: the medians with numpy's own breakdown, then 'faster than numpy',
    or 'slower than numpy' with the reason (or the noise), never a bare ratio below 1."""
    assert re.search(rf"accpy fused: [\d.]+ GFLOP/s \([\d.]+ ms\); numpy .*{breakdown} [\d.]+ ms\)", out), out
    ratio = re.search(r"accpy's fused kernel is (?:([\d.]+)x faster than numpy|as fast as numpy \(([\d.]+)x\)|"
                      r"slower than numpy: ([\d.]+)x its speed)\.", out)
    assert ratio, out
    if ratio.group(3) is not None:
        assert float(ratio.group(3)) <= 1
        assert "\nWhy: numpy's" in out or "within the machine's noise" in out, out
    else:
        assert float(ratio.group(1) or ratio.group(2)) >= 1 and "Why:" not in out


def test_fused_relu_sizes_its_tile_from_the_registers():
    """Two vectors of C a row; rows while 2 * rows accumulators + 3 fit the registers (at most 8)."""
    import accpy as acc

    sys.path.insert(0, str(SAMPLES))
    from fused_relu import tile_shape

    host = acc.Target.HOST
    assert tile_shape(host(vector_bytes=64, vector_registers=32)) == (8, 32)  # AVX-512: 16 of 32 zmm
    assert tile_shape(host(vector_bytes=32, vector_registers=16)) == (6, 16)  # AVX2: 12 of 16 ymm
    assert tile_shape(host(vector_bytes=16, vector_registers=16)) == (6, 8)  # SSE


@pytest.mark.slow  # builds and times (about 7 s)
def test_fused_relu_says_why_it_is_slower(tmp_path):
    """An 8 x 32 tile on a 16-register target (AVX2) spills its 32 accumulators: the sample is
    slower than numpy and says why, naming the registers."""
    import accpy as acc

    if acc.Target.HOST.vector_registers != 16 or acc.Target.HOST.vector_bytes != 32:
        pytest.skip("the reason checked here is that of a target with 16 vector registers of 32 bytes (AVX2)")
    out = check_ok(run_sample("fused_relu.py", tmp_path, "--rows", "8", "--tile", "32"))
    if "slower than numpy" in out and "Why:" in out:
        assert "its 8 x 32 tile of C needs 32 vector accumulators, more than the 16 vector registers hold" in out
    _check_honest_timing(out, "of which A @ B")


@pytest.mark.slow  # builds and times (about 7 s)
def test_three_matmul(tmp_path):
    out = check_ok(run_sample("three_matmul.py", tmp_path, "--m", "19", "--n", "21", "--k", "17", "--l", "33"))
    assert "fusing (i, j) with (i, l) -> ScheduleError" in out and "T[" in out and "reads it" in out
    assert "fused on i: [Index(i0), Index(f), Index(k0), Index(j1), Index(ii), Index(j0), Index(l1)]" in out
    assert "result vs numpy E + (A @ B) @ D: OK" in out
    _check_honest_timing(out, "of which the two products")


@pytest.mark.slow
def test_samples_report_failures(tmp_path):
    """A sample whose result is wrong exits nonzero (here: a bad shape expectation is injected)."""
    env = dict(os.environ)
    env["ACCPY_CACHE_DIR"] = str(tmp_path / "cache")
    code = ("import sys, runpy\n"
            f"sys.path.insert(0, {str(SAMPLES)!r})\n"
            "import schedules_tour as t\n"
            "t.EXAMPLES[:] = [t.Example('bad', 'a wrong expectation', 'matmul', '', (3, 12, 16))]\n"
            f"sys.exit(t.main(['--quiet', '--output-dir', {str(tmp_path / 'out')!r}]))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL  bad" in p.stdout and "but the chapter says (3, 12, 16)" in p.stdout


@pytest.mark.slow  # builds 45 examples (about 30 s)
def test_property_test_example(tmp_path):
    """samples/property_test_example.py is a pytest file a user runs: it passes."""
    env = dict(os.environ, ACCPY_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(SAMPLES / "property_test_example.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    out = check_ok(p)
    assert re.search(r"\b3 passed\b", out), out


@pytest.mark.slow  # draws 7 pictures (about 13 s)
def test_visualize_schedules(tmp_path):
    pytest.importorskip("matplotlib")
    out = check_ok(run_sample("visualize_schedules.py", tmp_path))
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert pngs == ["fused_pair.png", "pad_2.png", "skew_conv1d.png", "split_by_3.png", "split_by_5_padded.png",
                    "tile_3x2.png", "tile_3x2_cache.png"], out
    text = check_ok(run_sample("visualize_schedules.py", tmp_path, "--text"))
    assert "split_by_5_padded:\n 0  1  2  3  4  5  6  7  8  9 10 11  .  .  .\n" in text


def _has(*features):
    import accpy as acc

    return all(acc.Target.HOST.has(f) for f in features)


_NO_VNNI = "this CPU has no AVX-512 VNNI"
_NO_BF16 = "this CPU has no AVX-512 BF16"


@pytest.mark.slow  # the tile unit's model, two packages (about 60 s)
@pytest.mark.parametrize("threads", ["1", "2"])
def test_int8_matmul(tmp_path, threads):
    """The quantized int8 matmul on the tile unit (AMX here, else its functional model), exact
    against numpy, tails in every direction."""
    out = check_ok(run_sample("int8_matmul.py", tmp_path, "100", "130", "90", "--threads", threads, "--path", "amx",
                              "--compare"))
    assert "exact against numpy" in out and "the tile unit" in out
    _check_timed_unless_model(out, "int8 GOPS")
    assert sorted(p.name for p in (tmp_path / "out").glob("*.so")) == ["libmatmul_i8.so", "libqmm.so"]


def _check_timed_unless_model(out: str, speed: str) -> None:
    """On the tile unit's functional model (no AMX), the sample says so instead of a speed or a
    ratio; on AMX it prints its speed."""
    if _has("amx_tile", "amx_int8", "amx_bf16"):
        assert speed in out and NOT_TIMED not in out
    else:
        assert f"{NOT_TIMED} (it ran on the x86 tile unit's functional model" in out, out
        assert speed not in out and "faster" not in out and "as fast" not in out, out


@pytest.mark.slow  # about 20 s
@pytest.mark.skipif(not _has("avx512f", "avx512bw", "avx512_vnni"), reason=_NO_VNNI)
@pytest.mark.parametrize("threads", ["1", "2"])
def test_int8_matmul_vnni(tmp_path, threads):
    """The same on AVX-512 VNNI (K = 91: a last group of 3 k), exact against numpy."""
    out = check_ok(run_sample("int8_matmul.py", tmp_path, "100", "130", "91", "--threads", threads, "--path", "vector"))
    assert "exact against numpy" in out and "VNNI" in out


@pytest.mark.slow  # the tile unit's model (about 25 s)
@pytest.mark.parametrize("threads", ["1", "2"])
def test_int8_conv(tmp_path, threads):
    """The quantized 3x3 conv as an implicit GEMM on the tile unit (its model without AMX), exact
    against numpy: 30 pixels a row (a partial tile of 14), 48 output channels (GC = 3), 128 input
    channels (two tile steps per tap)."""
    out = check_ok(run_sample("int8_conv.py", tmp_path, "--size", "5", "30", "128", "48", "--threads", threads,
                              "--path", "amx", "--repeat", "1"))
    assert "exact against numpy" in out
    _check_timed_unless_model(out, "x faster")


@pytest.mark.slow  # about 20 s
@pytest.mark.skipif(not _has("avx512f", "avx512bw", "avx512_vnni"), reason=_NO_VNNI)
def test_int8_conv_vnni(tmp_path):
    out = check_ok(run_sample("int8_conv.py", tmp_path, "--size", "5", "30", "68", "40", "--path", "vector",
                              "--repeat", "1"))
    assert "exact against numpy" in out and "VNNI" in out


@pytest.mark.slow  # the tile unit's model (about 20 s)
def test_bf16_matmul(tmp_path):
    out = check_ok(run_sample("bf16_matmul.py", tmp_path, "70", "100", "50", "--threads", "2", "--path", "amx"))
    assert "matches numpy" in out
    _check_timed_unless_model(out, "GFLOP/s")


@pytest.mark.slow  # about 15 s
@pytest.mark.skipif(not _has("avx512f", "avx512bw", "avx512_bf16"), reason=_NO_BF16)
def test_bf16_matmul_avx512(tmp_path):
    out = check_ok(run_sample("bf16_matmul.py", tmp_path, "70", "100", "51", "--path", "vector"))
    assert "matches numpy" in out and "BF16" in out


@pytest.mark.slow  # about 10 s
def test_conv2d(tmp_path):
    out = check_ok(run_sample("conv2d.py", tmp_path, "--size", "4", "10", "8", "12"))
    assert "max relative error vs numpy (float64)" in out and out.rstrip().endswith("OK")
    assert re.search(r"conv3x3 4x10, 8->12 channels, 1 thread\(s\): [\d.]+ GFLOP/s \(median of 21\)", out)
    assert "conv3x3_auto: max relative error vs numpy (float64)" in out
    assert re.search(r"autoscheduled: [\d.]+ GFLOP/s, [\d.]+ x the hand schedule", out)
    assert (tmp_path / "out" / "libconv2d.so").is_file()


@pytest.mark.slow  # about 10 s
@pytest.mark.parametrize("threads", ["1", "2"])
def test_optimized_matmul(tmp_path, threads):
    out = check_ok(run_sample("optimized_matmul.py", tmp_path, "70", "90", "50", "--threads", threads))
    assert re.search(r"max relative error vs numpy: \S+\n", out)
    assert re.search(rf"sgemm 70x90x50, {threads} thread\(s\): [\d.]+ GFLOP/s \(median of 7\)", out)
    # the nest autoscheduled next to the hand schedule: checked, then timed
    assert "autoschedule: register-blocked contraction, chosen by model" in out
    assert re.search(r"sgemm_auto: max relative error vs numpy: \S+\n", out)
    assert re.search(r"autoscheduled: [\d.]+ GFLOP/s, [\d.]+ x the hand schedule", out)
    assert (tmp_path / "out" / "liboptimized_matmul.so").is_file()


@pytest.mark.slow  # three packages (about 12 s)
def test_vectorized_subtrees(tmp_path):
    """Runs on any x86-64 with AVX2 (instructions a target lacks are reported, not required)."""
    if not _has("avx2", "fma"):
        pytest.skip("the recipes vectorize with AVX2 or AVX-512")
    out = check_ok(run_sample("vectorized_subtrees.py", tmp_path))
    for line in ("ok  matmul: C == numpy; instructions: vfmadd", "ok  transpose: C == numpy; instructions: vgatherdps"):
        assert line in out, out
    if _has("avx512f", "avx512bw"):
        assert "ok  int16: C == numpy (exact); instructions: vpmaddwd" in out
    else:
        assert "(the target lacks avx512f, avx512bw: vpmaddwd not required)" in out
        assert "  note: vectorize(i): no vector instructions for mixed element types" in out
        assert "ok  int16: C == numpy (exact)" in out
    assert out.rstrip().endswith("PASS")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["int16", "matmul", "transpose"]


@pytest.mark.slow  # the Gemmini model's package (about 10 s)
@pytest.mark.parametrize("name, shape", [("gemmini_matmul.py", "40x24x72"), ("gemmini_conv.py", "3x10x16x24")])
def test_gemmini_samples_say_their_model_is_not_timed(tmp_path, name, shape):
    out = check_ok(run_sample(name, tmp_path, "--shape", shape))
    assert "equals numpy bit for bit" in out
    assert (f"  {NOT_TIMED} (it ran on Gemmini's functional model: its results are checked; its wall time says "
            f"nothing of the hardware); the cycles above are the model's estimate") in out
    stem = name[:-3]
    assert (tmp_path / "out" / f"lib{stem}.so").is_file() and (tmp_path / "out" / f"{stem}.hat").is_file()


@pytest.mark.slow  # measures 5 variants (about 15 s)
def test_tune_matmul_keeps_its_results_in_the_output_dir(tmp_path):
    out = check_ok(run_sample("tune_matmul.py", tmp_path, "--quick"))
    assert "sgemm 128x128x128, 1 thread(s): 5 of 5 variants measured" in out
    assert (tmp_path / "out" / "results.jsonl").is_file()


@pytest.mark.slow  # about 5 s each
@pytest.mark.parametrize("name, args, made", [
    ("schedules_tour.py", ("--quiet",), "libschedules_tour.so"),
    ("conv1d_skew.py", ("--n", "40", "--taps", "3"), "libconv1d_skew.so"),
    ("gemmini_matmul.py", ("--shape", "16x16x16"), "libgemmini_matmul.so"),
])
def test_without_output_dir_the_files_go_under_the_system_temp(tmp_path, name, args, made):
    """No --output-dir: a folder under the system's temporary directory ($TMPDIR here)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    check_ok(run_sample(name, tmp_path, *args, output_dir=False, env={"TMPDIR": str(tmp)}))
    found = [p.relative_to(tmp) for p in tmp.glob(f"accpy_samples_*/*/{made}")]
    assert [p.parent.name for p in found] == [name[:-3]], found
