"""The README's shape (the two commands first, under 250 lines) and the guide's links and site."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from guide_blocks import ROOT, guide_pages

TWO_COMMANDS = """```bash
pip install -e '.[test,dask,viz]' && python samples/hello_matmul.py
python -m pytest -q
```"""
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(md: str) -> set:
    """The ids MkDocs gives the headings of a page (toc's default slugs)."""
    out = set()
    for line in md.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:
            text = re.sub(r"[`*_]", "", m.group(1)).lower()
            out.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text)).strip("-"))
    return out


def test_readme_starts_with_the_two_commands_and_is_short():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines (the guide's limit is 250)"
    first_block = text[text.index("```"):]
    assert first_block.startswith(TWO_COMMANDS), "README.md must start with the two commands, unchanged"
    assert lines[0].startswith("# ") and all(not ln.strip() for ln in lines[1:2])
    assert 'python -m pytest -q -m "not slow"' in text
    assert "ACCPY_HOST_MODEL" in text


@pytest.mark.parametrize("page", guide_pages() + sorted((ROOT / "docs" / "notes").glob("*.md")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    """Links between pages (and to images) point at files that exist, and anchors at headings."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # not inside code blocks
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("#") and page.name == "README.md":
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest.read_text(encoding="utf-8")), \
                f"{page.relative_to(ROOT)}: link to {target}: no heading with that anchor"


def test_every_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in (ROOT / "docs").rglob("*.md"):
        rel = page.relative_to(ROOT / "docs").as_posix()
        assert rel in nav, f"docs/{rel} is not in mkdocs.yml's nav"


def test_api_reference_covers_the_public_surface():
    """Every public name of accpy/__init__.py appears in an API page (as ::: accpy.Name or in a
    module it documents whole)."""
    import accpy

    api = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "api").glob("*.md"))
    documented_modules = {"accpy.nest.ops": accpy.nest.ops, "accpy.errors": accpy.errors}
    missing = []
    for name, obj in vars(accpy).items():
        if name.startswith("_") or type(obj).__name__ == "module" and name != "tune" or name in ("inf",):
            continue
        if re.search(rf"^::: accpy\.{name}\s*$", api, re.M):
            continue
        if any(getattr(mod, name, None) is obj for mod in documented_modules.values()):
            continue
        missing.append(name)
    assert not missing, f"public names without an API entry: {missing}"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mkdocs") is None, reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_site_builds_strictly(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                      **__import__("os").environ})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert (tmp_path / "site" / "api" / "schedule" / "index.html").exists()
