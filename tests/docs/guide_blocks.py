"""Fenced code blocks of the user's guide (README.md and docs/**/*.md, not docs/notes/).

A block runs unless the line just before it (blank lines aside) is an HTML comment
`<!-- norun: why -->`. Python blocks of one page run in order in one namespace; a bash block
runs only when marked `<!-- run -->` (most name long commands); a block with a title
(```c title="main.c"```) is written to that file first, so a later bash block can compile it.
A page whose text holds `<!-- docs-test: slow -->` is a slow test.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)(?P<attrs>[^\n]*)$")
MARK = re.compile(r"^\s*<!--\s*(?P<kind>norun|run)\s*(?::\s*(?P<why>.*?))?\s*-->\s*$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
SLOW_MARK = "<!-- docs-test: slow -->"


@dataclass
class Block:
    page: Path
    line: int            # 1-based line of the opening fence
    lang: str
    code: str
    title: str | None = None
    mark: str | None = None     # "norun" or "run" or None
    why: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        if self.mark == "norun":
            return False
        if self.lang == "python":
            return True
        if self.lang in ("bash", "sh", "console"):
            return self.mark == "run"
        return False


@dataclass
class Page:
    path: Path
    blocks: list = field(default_factory=list)
    slow: bool = False


def guide_pages() -> list[Path]:
    """README.md and every page of docs/ except the notes (measurement diaries)."""
    docs = ROOT / "docs"
    pages = [ROOT / "README.md"]
    pages += sorted(p for p in docs.rglob("*.md") if "notes" not in p.relative_to(docs).parts)
    return pages


def parse(path: Path) -> Page:
    lines = path.read_text(encoding="utf-8").splitlines()
    page = Page(path, slow=SLOW_MARK in "\n".join(lines))
    n = 0
    while n < len(lines):
        m = FENCE.match(lines[n])
        if not m:
            n += 1
            continue
        indent, fence = m["indent"], m["fence"]
        body, end = [], n + 1
        while end < len(lines) and not (lines[end].strip().startswith(fence)
                                        and lines[end].strip().strip(fence[0]) == ""):
            body.append(lines[end][len(indent):] if lines[end].startswith(indent) else lines[end])
            end += 1
        prev = n - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        mark = MARK.match(lines[prev]) if prev >= 0 else None
        title = TITLE.search(m["attrs"])
        page.blocks.append(Block(path, n + 1, m["lang"].lower(), "\n".join(body) + "\n",
                                 title["title"] if title else None,
                                 mark["kind"] if mark else None,
                                 (mark["why"] or "").strip() if mark else None))
        n = end + 1
    return page
