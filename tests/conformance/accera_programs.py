"""The Accera programs the conformance run measures: the tests of Accera's wheel (read with `ast`,
not imported) and the python blocks of its documentation pages, each classified in or out of
scope by rules on its text (never by its outcome)."""
from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path

TEST_FILES = ("smoke_tests.py", "dsl_tests.py", "unit_tests.py", "int_matmul_tests.py", "mfma_tests.py")

# -- scope rules: the first that matches a program's text (with the helpers it calls) decides -----------
GPU = re.compile(r"(?i)gpu|cuda|rocm|vulkan|mfma|\bmma|MMA[A-Z_]|GridUnits?\b|\bBarrier\b|_MemorySpace\.(SHARED|PRIVATE|"
                 r"MMA_FRAGMENT|TENSOR)|\.bind\(|NVIDIA|\bAMD[ _]|\bMI[12]\d\d\b")
IR_TEXT = re.compile(r"file_checker\(|make_asm_sequence_filechecker|FileCheck")
INTERNALS = re.compile(r"\b(NativeArray|_MemoryLayout|_Module|_SetActiveModule|_ClearActiveModule|"
                       r"_ResolveConstantDataReference|_Valor|ViewAdapter|_Dim3|_GetTargetDeviceFromName|"
                       r"CompilerOptions|ModuleScope|_create_function|_default_module|_create_tensorizable_plan)\b")
VULKAN = re.compile(r"(?i)vulkan")
SCOPE_RULES = (
    ("gpu", GPU, "targets a GPU (CUDA/ROCm/Vulkan, MMA, barriers, grid units, bind)"),
    ("ir_text", IR_TEXT, "checks Accera's MLIR / LLVM IR / assembly text (FileCheck)"),
    ("internals", INTERNALS, "uses Accera's internal objects (native module, memory layouts, compiler options)"),
)
SCOPES = {"in": "in scope"} | {name: why for name, _, why in SCOPE_RULES} | {
    "fragment": "documentation fragment, not a complete program (uses names it never defines)",
    "not_python": "documentation block that is not Python (pseudo-code or output)",
    "accera_doc_error": "documentation example that fails in Accera too (read, not run)",
    "vulkan": "targets Vulkan (accpy has no Vulkan runtime)",
    "cpu": "not a GPU program (the default run measures it; this run is `--gpu`)",
}
# Documentation examples that are wrong for Accera itself, found by reading them against Accera's API
ACCERA_DOC_ERRORS = {
    "docs/Reference/classes/Nest/iteration_logic.md": "`acc.role.INPUT`: Accera's module has `Role`, no `role`",
    "docs/Reference/functions/create_dimensions.md": "`acc.Nest(M, N)`: Accera's Nest takes one argument, "
                                                     "the shape (`acc.Nest((M, N))`)",
}


@dataclass
class Program:
    """One unit the runner runs: a test method, or a documentation page's (or script's) program."""

    id: str
    kind: str  # "unittest" or "program"
    scope: str
    scope_detail: str = ""
    file: str = ""  # unittest: the wheel's test file; program: the page's path in the checkout
    cls: str = ""
    method: str = ""
    source: str = ""  # program: its whole text
    folder: str = ""  # program: a script's folder (its sibling modules import from there)
    decorators: list = field(default_factory=list)

    @property
    def in_scope(self) -> bool:
        return self.scope == "in"

    def job(self) -> dict:
        """What a worker needs to run it."""
        if self.kind == "unittest":
            return {"kind": "unittest", "module": Path(self.file).stem, "cls": self.cls, "method": self.method}
        return {"kind": "program", "path": self.file, "source": self.source, "folder": self.folder}


def classify(text: str, file_name: str = "", gpu: bool = False) -> tuple[str, str]:
    """(scope, why) of a program from its text: GPU, then IR text, then internals, else in scope.
    With `gpu` (a `--gpu` run) it is the other way round: the GPU programs are in scope (Vulkan
    ones excepted), every other program out of scope as "cpu"."""
    is_gpu = file_name == "mfma_tests.py" or GPU.search(text) is not None
    if gpu:
        if not is_gpu:
            return "cpu", SCOPES["cpu"]
        if VULKAN.search(text):
            return "vulkan", SCOPES["vulkan"]
        rules = SCOPE_RULES[1:]
    else:
        rules = SCOPE_RULES
    if file_name == "mfma_tests.py" and not gpu:
        return "gpu", "Accera's GPU tensorization tests (mfma_tests.py)"
    for name, rule, why in rules:
        m = rule.search(text)
        if m:
            return name, f"{why}: {m.group(0)!r}"
    return "in", ""


# -- the wheel's tests ------------------------------------------------------------------------------------

def _called_names(node) -> tuple[set, set]:
    """Methods called as self.NAME(...) and functions called as NAME(...) inside `node`."""
    methods, functions = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                methods.add(f.attr)
            elif isinstance(f, ast.Name):
                functions.add(f.id)
    return methods, functions


def collect_tests(test_dir: Path, gpu: bool = False) -> list[Program]:
    """Every test method of Accera's test files, with its scope from its text and its helpers'
    (`gpu`: classified for a `--gpu` run)."""
    out = []
    for file_name in TEST_FILES:
        path = Path(test_dir) / file_name
        if not path.exists():
            continue
        text = path.read_text()
        tree = ast.parse(text)
        lines = text.splitlines()

        def segment(node) -> str:  # (ast.get_source_segment splits the whole file on every call)
            return "\n".join(lines[node.lineno - 1:node.end_lineno])

        module_funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        for cls in classes.values():
            methods = {}
            for base in [b.id for b in cls.bases if isinstance(b, ast.Name) and b.id in classes] + [cls.name]:
                methods.update({n.name: n for n in classes[base].body if isinstance(n, ast.FunctionDef)})
            if not any(isinstance(b, ast.Attribute) and b.attr == "TestCase" or
                       isinstance(b, ast.Name) and (b.id == "TestCase" or b.id in classes) for b in cls.bases):
                continue
            for name, fn in methods.items():
                if not name.startswith("test"):
                    continue
                seen, todo, parts = set(), [fn], []
                while todo:  # the test's text and every helper it reaches
                    node = todo.pop()
                    if id(node) in seen:
                        continue
                    seen.add(id(node))
                    parts.append(segment(node))
                    ms, fs = _called_names(node)
                    todo += [methods[m] for m in ms if m in methods] + [module_funcs[f] for f in fs if f in module_funcs]
                scope, why = classify(name + "\n" + "\n".join(parts), file_name, gpu)
                decos = [segment(d).strip().lstrip("@") for d in fn.decorator_list]
                out.append(Program(id=f"{path.stem}::{cls.name}::{name}", kind="unittest", scope=scope,
                                   scope_detail=why, file=str(path), cls=cls.name, method=name, decorators=decos))
    return out


# -- the documentation -----------------------------------------------------------------------------------

DOC_FOLDERS = ("docs/Manual", "docs/Tutorials", "docs/Reference")
_FENCE = re.compile(r"^```[ \t]*python[^\n]*\n(.*?)^```", re.S | re.M)


def _free_names(tree: ast.AST) -> set:
    """Names a program reads but never binds anywhere (flow-insensitive) and that are not builtins."""
    bound, used = set(dir(builtins)), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (used if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
    return used - bound


def _doc_program(pid: str, rel: str, source: str, gpu: bool = False, folder: str = "") -> Program:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return Program(pid, "program", "not_python", f"{SCOPES['not_python']}: line {e.lineno}: {e.msg}",
                       file=rel, source=source)
    scope, why = classify(rel + "\n" + source, gpu=gpu)
    if scope == "in" and rel in ACCERA_DOC_ERRORS:
        scope, why = "accera_doc_error", f"{SCOPES['accera_doc_error']}: {ACCERA_DOC_ERRORS[rel]}"
    if scope == "in":
        free = sorted(_free_names(tree))
        if free:
            scope, why = "fragment", f"{SCOPES['fragment']}: {', '.join(free[:6])}"
    return Program(pid, "program", scope, why, file=rel, source=source, folder=folder)


def collect_docs(checkout: Path, gpu: bool = False) -> list[Program]:
    """Each documentation page is one program (its python blocks in order); each script of the
    tutorials is one program, run with its folder on the import path (`gpu`: classified for a
    `--gpu` run)."""
    checkout = Path(checkout)
    out = []
    for folder in DOC_FOLDERS:
        for path in sorted((checkout / folder).rglob("*")):
            rel = str(path.relative_to(checkout))
            if path.suffix == ".md":
                blocks = _FENCE.findall(path.read_text(errors="replace"))
                if blocks:
                    out.append(_doc_program(f"docs::{rel}", rel, "\n".join(blocks), gpu))
            elif path.suffix == ".py":
                out.append(_doc_program(f"docs::{rel}", rel, path.read_text(errors="replace"), gpu, str(path.parent)))
    return out
