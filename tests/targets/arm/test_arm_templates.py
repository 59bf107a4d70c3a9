"""Every template of the Neon and SVE shapes (accpy/targets/arm/) against the IR's semantics, on
random data with NaN, infinities, signed zeros, subnormals and integer extremes: one C program (a
function per shape and operation, on rows of random lanes) cross-compiled and run once under qemu;
numpy computes what each operation means (as tests/test_x86_intrinsics.py does for x86, whose
oracle this reuses). The strided, dot-product and conversion templates run inside kernels
(test_arm_emulation.py, test_neon_shapes.py, test_arm_sve.py)."""
from __future__ import annotations

import subprocess
import textwrap

import numpy as np
import pytest

from accpy.ir.types import ScalarType
from accpy.paths import native_dir
from accpy.targets.arm import AARCH64_TOOLCHAIN
from accpy.targets.arm.neon import PRELUDE, SHAPES
from accpy.targets.arm.sve import prelude as sve_prelude
from accpy.targets.arm.sve import sve_shape
from accpy.targets.arm.toolchain import SVE_WORKAROUND

import test_x86_intrinsics as x86t  # the oracle: inputs, expected values, comparisons

S = ScalarType
SVE_BYTES = 32
ROWS = x86t.ROWS
C_TYPES = {S.float64: "double", S.float32: "float", S.float16: "float16_t", S.int32: "int32_t", S.int16: "int16_t",
           S.uint16: "uint16_t", S.int8: "int8_t", S.uint8: "uint8_t"}
_why = AARCH64_TOOLCHAIN.missing() or AARCH64_TOOLCHAIN.cannot_run()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"AArch64 tools missing: {_why}")


def _shapes():
    out = [(f"neon_{t.name}", isa) for t, isa in SHAPES.items()]
    return out + [(f"sve_{t.name}", sve_shape(t, SVE_BYTES)) for t in (S.float64, S.float32, S.int32)]


def _ops(isa):
    ops = sorted(op for op in isa.ops if op in x86t.KNOWN_OPS)
    if isa.dtype is S.float16:
        ops = [op for op in ops if op != "fma"]  # (the oracle's exact fma rounds to float32 / float64 only)
    return ops


def _body(isa, op) -> str:
    ints = sve_shape(S.int32, SVE_BYTES) if isa.name == "sve" else SHAPES[S.int32]
    if op == "from_int32":
        return isa.template("store").format(p="po", a=isa.template("from_int32").format(
            a=ints.template("load").format(p="pi"))) + ";"
    for t, ct in C_TYPES.items():  # (the x86 oracle's C bodies name the element type: add Arm's types)
        x86t.C_TYPES.setdefault(t, ct)
    return x86t._body(isa, op)


def _source(tests) -> str:
    parts = ['#include "accpy_runtime.h"', PRELUDE, sve_prelude(SVE_BYTES), "#include <stdio.h>"]
    for k, (_, isa, op) in enumerate(tests):
        T = C_TYPES[isa.dtype]
        parts.append(textwrap.dedent(f"""\
            static void t{k}(const {T}* a, const {T}* b, const {T}* c, {T}* out, const int32_t* ints,
                             const int32_t* n) {{
                for (int64_t r = 0; r < {ROWS}; ++r) {{
                    const {T}* pa = a + r * {isa.lanes}; const {T}* pb = b + r * {isa.lanes};
                    const {T}* pc = c + r * {isa.lanes}; const int32_t* pi = ints + r * 16;
                    {T}* po = out + r * {isa.lanes}; int nr = n[r];
                    (void)pa; (void)pb; (void)pc; (void)pi; (void)nr;
                    {_body(isa, op)}
                }}
            }}
            """))
    parts.append("static char buf[1 << 16] __attribute__((aligned(64)));")
    parts.append("int main(int argc, char** argv) {\n    char path[4096]; FILE* f;")
    for k, (_, isa, _) in enumerate(tests):
        T = C_TYPES[isa.dtype]
        m = ROWS * isa.lanes
        size = 4 * m * isa.dtype.bits // 8 + (16 * ROWS + ROWS) * 4
        parts.append(textwrap.dedent(f"""\
                snprintf(path, sizeof path, "%s/{k}.bin", argv[1]); f = fopen(path, "rb");
                if (!f || fread(buf, 1, {size}, f) != {size}) return 3; fclose(f);
                {{ {T}* d = ({T}*)buf; int32_t* i = (int32_t*)(d + {4 * m});
                   t{k}(d, d + {m}, d + {2 * m}, d + {3 * m}, i, i + {16 * ROWS});
                   snprintf(path, sizeof path, "%s/{k}.out", argv[1]); f = fopen(path, "wb");
                   fwrite(d + {3 * m}, 1, {m * isa.dtype.bits // 8}, f); fclose(f); }}""").replace("\n", "\n    "))
    parts.append("    return 0;\n}\n")
    return "\n".join(parts)


def _ints(rng, dt, shape):
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    pick = rng.random(shape) < 0.2
    x[pick] = rng.choice(np.array([info.min, info.max, 0, 1, info.max // 2], dtype=dt), size=int(pick.sum()))
    return x


def _inputs(isa, op, seed):
    if isa.dtype.is_int:
        rng = np.random.default_rng(seed)
        dt = isa.dtype.dtype
        a, b, c = (_ints(rng, dt, (ROWS, isa.lanes)) for _ in range(3))
        same = rng.random(a.shape) < 0.15
        b[same] = a[same]
        ints = x86t.random_ints(rng, np.int32, (ROWS, 16))
        return a, b, c, ints, (np.arange(ROWS) % (isa.lanes + 1)).astype(np.int32)
    with np.errstate(over="ignore"):  # (the oracle's specials compare float16 lanes with 1e30)
        a, b, c, ints, n = x86t.inputs(isa, op, seed)
    if isa.dtype is S.float16 and op == "hadd":  # (float16 overflows at 65504: keep the sums finite)
        a = b = c = np.clip(np.nan_to_num(a, posinf=0, neginf=0), -1000, 1000).astype(np.float16)
    return a, b, c, ints, n


def _compare(isa, op, got, want, a):
    if isa.dtype is not S.float16:
        return x86t.compare(isa, op, got, want, a)
    bad = (got.view(np.uint16) != want.view(np.uint16)) & ~(np.isnan(got) & np.isnan(want))
    if op in ("hmin", "hmax"):
        bad = got != want
    assert not bad.any(), f"{isa.name} float16 `{op}`: {int(bad.sum())} lanes differ, e.g. row " \
                          f"{np.argwhere(bad)[0].tolist()}; template {isa.template(op)}"


@pytest.mark.slow
def test_every_arm_template_computes_the_ir_semantics(tmp_path):
    tests = [(name, isa, op) for name, isa in _shapes() for op in _ops(isa) for _ in range(2)]
    data = []
    for k, (name, isa, op) in enumerate(tests):
        a, b, c, ints, n = _inputs(isa, op, seed=k)
        sentinel = np.full((ROWS, isa.lanes), 77, dtype=isa.dtype.dtype)
        (tmp_path / f"{k}.bin").write_bytes(b"".join(np.ascontiguousarray(x).tobytes()
                                                     for x in (a, b, c, sentinel, ints, n)))
        data.append((a, b, c, ints, n, sentinel))
    src = tmp_path / "templates.c"
    src.write_text(_source(tests))
    exe = tmp_path / "templates"
    cc = AARCH64_TOOLCHAIN.cc
    # -ffp-contract=off: each template computes what it says (no multiply-add fused by the compiler)
    cmd = [cc, "-O2", "-std=gnu11", "-ffp-contract=off", "-march=armv8.2-a+fp16+dotprod+sve",
           f"-msve-vector-bits={SVE_BYTES * 8}", *SVE_WORKAROUND, "-static", "-I", str(native_dir()), str(src), "-o", str(exe), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr[:4000]}"
    run = AARCH64_TOOLCHAIN.run_command(str(exe), [f"-msve-vector-bits={SVE_BYTES * 8}"]) + [str(tmp_path)]
    r = subprocess.run(run, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    for k, ((name, isa, op), (a, b, c, ints, n, sentinel)) in enumerate(zip(tests, data)):
        got = np.frombuffer((tmp_path / f"{k}.out").read_bytes(), dtype=isa.dtype.dtype).reshape(ROWS, isa.lanes)
        if op in ("hadd", "hmul") and not isa.dtype.is_int:
            x86t._check_float_reduction(isa, op, got, a)
            continue
        if op == "fma" and isa.dtype.is_int:  # (SVE's MLA on integers: a * b + c, wrapping)
            with np.errstate(all="ignore"):
                want = a * b + c
        else:
            want = x86t.expected(isa, op, a, b, c, ints, n, sentinel)
        _compare(isa, op, got, want, a)


def test_masked_loads_and_stores_touch_no_memory_past_their_lanes(tmp_path):
    """A tail's masked load and store of k < lanes elements ending at a page followed by an
    inaccessible one: no fault (nothing past the k elements is read or written), the values right."""
    body = []
    for name, isa in _shapes():
        T, n = C_TYPES[isa.dtype], isa.lanes
        for k in range(1, n):
            p = f"(({T}*)(edge - {k} * sizeof({T})))"
            m = isa.template("mask").format(n=k)
            v = isa.template("mload").format(p=p, m=m)
            body.append(f"    for (int l = 0; l < {k}; ++l) {p}[l] = ({T})(l + 1);")
            # (the empty asm keeps every lane of the loaded register alive: no load is narrowed away)
            body.append(f"    {{ {isa.ctype} v = {v}; __asm__ volatile(\"\" : \"+w\"(v)); "
                        + isa.template("mstore").format(p=p, m=m, a="v") + "; }")
            body.append(f"    for (int l = 0; l < {k}; ++l) if ({p}[l] != ({T})(l + 1)) return 10;")
    src = tmp_path / "edge.c"
    src.write_text("\n".join([
        '#include "accpy_runtime.h"', PRELUDE, sve_prelude(SVE_BYTES), "#include <sys/mman.h>",
        "int main(void) {",
        "    char* page = mmap(NULL, 2 * 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);",
        "    if (page == MAP_FAILED || mprotect(page + 65536, 65536, PROT_NONE) != 0) return 2;",
        "    char* edge = page + 65536;", *body, "    return 0;", "}", ""]))
    exe = tmp_path / "edge"
    cmd = [AARCH64_TOOLCHAIN.cc, "-O2", "-march=armv8.2-a+fp16+dotprod+sve", f"-msve-vector-bits={SVE_BYTES * 8}",
           *SVE_WORKAROUND, "-static", "-I", str(native_dir()), str(src), "-o", str(exe), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr[:4000]}"
    r = subprocess.run(AARCH64_TOOLCHAIN.run_command(str(exe), [f"-msve-vector-bits={SVE_BYTES * 8}"]),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr)
