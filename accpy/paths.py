"""Where accpy's native files and its build cache live."""
from __future__ import annotations

import os
from pathlib import Path


def native_dir() -> Path:
    """`native/` of the source tree, or its copy inside an installed accpy."""
    here = Path(__file__).resolve().parent.parent  # accpy/
    for cand in (here / "native", here.parent / "native"):
        if (cand / "accpy_runtime.h").exists():
            return cand
    raise FileNotFoundError("accpy's native/ directory (accpy_runtime.h) was not found; reinstall accpy")


def native_file(name: str) -> Path:
    """A file of accpy's native/ directory."""
    return native_dir() / name


def cache_dir() -> Path:
    """The build cache: $ACCPY_CACHE_DIR, else ~/.cache/accpy."""
    d = os.environ.get("ACCPY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "accpy")
    p = Path(d)
    p.mkdir(parents=True, exist_ok=True)
    return p


def native_text(name: str) -> str:
    """The text of native/`name`, with each `#include "x.h"` of a native file replaced by that
    file's text (recursively): C that stands alone."""
    return inline_native_includes(native_file(name).read_text())


def inline_native_includes(text: str) -> str:
    """C `text` with each `#include "x.h"` (x.h: a file of native/) replaced by that file's text."""
    out = []
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if s.startswith('#include "') and s.endswith('"'):
            out.append(native_text(s[len('#include "'):-1]))
        else:
            out.append(line)
    return "".join(out)
