"""The architecture of DESIGN.md, checked on the source: accpy's import graph (read with `ast`,
imports inside functions included) has no cycle and no import across the layers; the
target-neutral folders name no target; no module is over 600 lines."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "accpy"

# folder -> the folders it may import (besides itself and the leaf modules accpy.errors, accpy.paths)
LAYERS = {
    "ir": set(),
    "nest": {"ir"},
    "analysis": {"ir"},
    "targets": {"ir"},
    "schedule": {"nest", "ir", "analysis"},
    "plan": {"schedule", "targets", "analysis", "nest", "ir"},
    "lower": {"ir", "analysis", "targets"},
    "codegen": {"ir", "targets"},
    "package": {"nest", "schedule", "plan", "targets", "analysis", "lower", "codegen", "ir"},
}
LAYERS["testing"] = LAYERS["package"] | {"package"}
LAYERS["tune"] = LAYERS["testing"] | {"testing"}
LAYERS["auto"] = LAYERS["tune"] | {"tune"}
LEAVES = {"accpy.errors", "accpy.paths", "accpy._binder", "accpy.version"}

# Accera's facade methods import upward, inside the method (README, "Architecture"):
# (module, function, imported module)
FACADES = {
    ("accpy.nest.nest", "create_schedule", "accpy.schedule.schedule"),  # nest.create_schedule()
    ("accpy.nest.nest", "_capture", "accpy.analysis.logic_check"),  # @nest.iteration_logic proves bounds
    ("accpy.schedule.schedule", "create_plan", "accpy.plan.plan"),  # schedule.create_plan()
    ("accpy.schedule.schedule", "to_python", "accpy.lower"),  # schedule.to_python(unswitched=True)
    ("accpy.plan.plan", "lower", "accpy.lower"),  # plan.lower(): the loop IR (vectorize's check uses it)
    # plan.vectorize(): the vector operations its lanes need, found as the vectorizer finds them
    ("accpy.plan.plan", "_vectorize", "accpy.lower.vector_check"),
    ("accpy.plan.plan", "emit_c", "accpy.codegen.c"),  # plan.emit_c()
    ("accpy.targets.gpu.cuda", "cuda_source", "accpy.package.launch"),  # cuda_source(plan, args): a .cu's text
}

NEUTRAL = ("lower", "codegen", "plan", "package", "ir", "testing", "tune", "auto")
# words of a target, compared with whole words of names and strings (split at "_", at other
# characters that are not letters or digits, and at camelCase): "sse" is not in "assert", nor
# "sve" in "solve". A word also matches with a version or width attached ("avx512", "sse4",
# "armv8": letters and digits, e.g. "avx512vnni", are split there too).
TARGET_WORDS = ("gemmini", "avx", "x86", "scratchpad", "accumulator", "amx", "immintrin", "mvin", "mvout",
                "preload", "vnni", "sse", "neon", "sve", "arm", "armv", "aarch64", "amd64", "riscv")
# intrinsic and register-type names, matched at the start of a name: x86's `_mm*` / `__m512*`,
# Neon's `vfmaq_f32`-style names and `int8x16_t`-style types, SVE's `sv*_...` names
TARGET_NAMES = (r"_mm\d*_", r"__m(128|256|512|mask)", r"v[a-z0-9]+q_(n_|lane_|laneq_)?([suf](8|16|32|64)\b|\{)",
                r"v(ld\d|st\d|get_low|get_high|combine|movl|movn|qmovn|dot|dup_n|cvt[a-z]*)_[suf](8|16|32|64)\b",
                r"(u?int|float|bfloat|poly)\d+x\d+(x\d+)?_t\b", r"sv[a-z]+\d*_[a-z]")
MAX_LINES = 600


def _modules() -> dict:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(mods: dict) -> list:
    """(importer, imported, line, enclosing function) for every import of an accpy module."""
    known = set(mods) | LEAVES
    out = []
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        tree = ast.parse(p.read_text())

        def visit(node, fn):
            for child in ast.iter_child_nodes(node):
                f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
                if isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = pkg.split(".")[:len(pkg.split(".")) - child.level + 1]
                        tgt = ".".join(base + ([child.module] if child.module else []))
                    else:
                        tgt = child.module or ""
                    for a in child.names:
                        sub = f"{tgt}.{a.name}"
                        dest = sub if sub in known else tgt
                        if dest in known and dest != m:
                            out.append((m, dest, child.lineno, f))
                elif isinstance(child, ast.Import):
                    for a in child.names:
                        if a.name in known and a.name != m:
                            out.append((m, a.name, child.lineno, f))
                visit(child, f)

        visit(tree, None)
    return out


def _layer(m: str) -> str:
    parts = m.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_cycles():
    mods = _modules()
    graph: dict = {m: set() for m in mods}
    for a, b, _, _ in _imports(mods):
        if b in graph:
            graph[a].add(b)
    # Tarjan's strongly connected components
    index, low, stack, on, cycles, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_imports_follow_the_layers():
    bad = []
    for a, b, line, fn in _imports(_modules()):
        la, lb = _layer(a), _layer(b)
        if la not in LAYERS or lb == la or b in LEAVES:
            continue
        if lb not in LAYERS[la] and (a, fn, b) not in FACADES:
            bad.append(f"{a}:{line} ({fn or 'module level'}) imports {b}")
    assert not bad, "imports against DESIGN.md's layers:\n" + "\n".join(bad)


MAX_FUNCTION_IMPORTS = 30  # imports of accpy modules inside functions, the FACADES included


def test_imports_are_at_module_level():
    """An import of an accpy module belongs at the top of the module: inside a function it hides a
    dependency (and often a cycle) from the reader. The few that stay say why in a comment (an
    upward FACADE, an optional compiled module)."""
    inner = [f"{a}:{line} ({fn}) imports {b}" for a, b, line, fn in _imports(_modules()) if fn]
    assert len(inner) < MAX_FUNCTION_IMPORTS, (f"{len(inner)} imports of accpy modules inside functions (at most "
                                               f"{MAX_FUNCTION_IMPORTS - 1}); move them to the top of their module:\n"
                                               + "\n".join(sorted(inner)))


def _code_tokens(path: Path):
    """(line, text) of the names and string literals of a module, docstrings and comments left out."""
    src = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstrings.add(body[0].lineno)
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.NAME, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            if tok.type == tokenize.STRING and tok.start[0] in docstrings:
                continue
            yield tok.start[0], tok.string


def _words(text: str) -> set:
    """The words of a name or string (lower case): split at characters other than letters and
    digits, at camelCase and between letters and digits; a run of letters and the digits right
    after it also count as one word ("x86", "aarch64")."""
    out = set()
    for part in re.split(r"[^A-Za-z0-9]+", text):
        for word in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", part):
            out.add(word.lower())
        for letters, digits in re.findall(r"([A-Za-z]+)(\d+)", part):
            out.add(re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", letters)[-1].lower() + digits)
    return out


_NAMES = [re.compile(r"(?<![A-Za-z0-9])" + n) for n in TARGET_NAMES]


def target_words_in(text: str) -> list:
    """The target words and intrinsic names in one name or string of code."""
    found = sorted(_words(text) & set(TARGET_WORDS))
    return found + [m.group(0) for n in _NAMES for m in [n.search(text)] if m]


def test_target_words_are_whole_words():
    """The matcher itself: whole words and intrinsic names, not letters inside other words."""
    for text in ("assert", "solve", "sparse", "alarm", "charm", "farming", "preserve", "dma_vector", "v_s",
                 "vec_f32", "vals_s8", "group_mmap"):
        assert target_words_in(text) == [], text
    for text, word in (("avx512", "avx"), ("AVX2", "avx"), ("has_sse4_1", "sse"), ("sse4.1", "sse"),
                       ("vnni_emu", "vnni"), ("accpy_vnni_dpbusd", "vnni"), ("avx512vnni", "vnni"),
                       ("useNeon", "neon"), ("SVE2", "sve"), ("x86tile", "x86"), ("arm_neon.h", "arm"),
                       ("aarch64-linux-gnu-gcc", "aarch64"), ("Armv8.2-A", "armv"), ("AMXTile", "amx"),
                       ("_mm512_fmadd_ps({a})", "_mm512_"), ("__m256i", "__m256"), ("_mm_add_ps", "_mm_"),
                       ("vfmaq_f32", "vfmaq_f32"), ("vdotq_s32({c}, {a}, {b})", "vdotq_s32"),
                       ("vdupq_n_f32", "vdupq_n_f32"), ("int8x16_t", "int8x16_t"), ("vmovl_s8", "vmovl_s8"),
                       ("vget_low_s16(x)", "vget_low_s16"), ("vld1_f32", "vld1_f32"),
                       ('f"vaddq_{sfx}({a}, {b})"', "vaddq_{"),
                       ("svmla_f32_m", "svmla_f"), ("svfloat32_t", "svfloat32_t")):
        assert word in target_words_in(text), (text, target_words_in(text))


@pytest.mark.parametrize("folder", NEUTRAL)
def test_neutral_folders_name_no_target(folder):
    bad = []
    for p in sorted((ROOT / folder).rglob("*.py")):
        for line, text in _code_tokens(p):
            for w in target_words_in(text):
                bad.append(f"{p.relative_to(ROOT.parent)}:{line}: {w!r} in {text[:60]!r}")
    assert not bad, "target names in target-neutral code (put them in a target library):\n" + "\n".join(bad)


def test_modules_are_small():
    big = [f"{p.relative_to(ROOT.parent)}: {n} lines" for p in sorted(ROOT.rglob("*.py"))
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not big, f"modules over {MAX_LINES} lines (split them by concept):\n" + "\n".join(big)


def test_the_checks_see_the_code():
    """The graph is read (a broken reader would pass every check above vacuously)."""
    mods = _modules()
    edges = {(a, b) for a, b, _, _ in _imports(mods)}
    assert len(mods) > 60 and len(edges) > 150
    assert ("accpy.lower.vector_products", "accpy.targets.library") in edges
    assert any(w in t.lower() for _, t in _code_tokens(ROOT / "targets" / "gemmini" / "__init__.py")
               for w in ("gemmini",))


def test_every_listed_facade_exists():
    """FACADES lists imports that exist (a stale entry would excuse a future upward import)."""
    found = {(a, fn, b) for a, b, _, fn in _imports(_modules()) if fn}
    assert not FACADES - found, f"facades no longer in the code: {sorted(FACADES - found)}"
