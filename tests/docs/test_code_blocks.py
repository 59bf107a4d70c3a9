"""Every code block of the user's guide runs (README.md and docs/, not docs/notes/).

Each page runs in a fresh process in a temporary directory (so nothing is written into the
repository): its python blocks in order in one namespace, its titled blocks written to files,
its bash blocks marked `<!-- run -->` in bash. Blocks marked `<!-- norun: why -->` are counted
and listed; they must say why and stay few.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guide_blocks import ROOT, guide_pages, parse

PAGES = [parse(p) for p in guide_pages()]
RUNNER = Path(__file__).with_name("run_page.py")
MAX_NORUN = 12          # blocks deliberately not run, over the whole guide
PAGE_TIMEOUT = 900      # seconds


def _params():
    for page in PAGES:
        if not any(b.runs for b in page.blocks):
            continue
        marks = [pytest.mark.slow] if page.slow else []
        yield pytest.param(page, id=str(page.path.relative_to(ROOT)), marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("page", list(_params()))
def test_page_blocks_run(page, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", ACCPY_REPO=str(ROOT))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    r = subprocess.run([sys.executable, str(RUNNER), str(page.path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=PAGE_TIMEOUT)
    assert r.returncode == 0, f"{page.path.relative_to(ROOT)}:\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    ran = [b for b in page.blocks if b.runs]
    assert r.stdout.count("--- ") >= len(ran), r.stdout


def test_unrun_blocks_say_why_and_are_few(capsys):
    norun = [b for p in PAGES for b in p.blocks if b.mark == "norun"]
    for b in norun:
        assert b.why, f"{b.where}: a <!-- norun --> mark needs a reason (<!-- norun: why -->)"
    with capsys.disabled():
        print(f"\n{len(norun)} code blocks of the guide are not run:")
        for b in norun:
            print(f"  {b.where} ({b.lang}): {b.why}")
    assert len(norun) <= MAX_NORUN, f"{len(norun)} blocks are marked norun (at most {MAX_NORUN})"


def test_python_blocks_are_python():
    for page in PAGES:
        for b in page.blocks:
            if b.lang == "python" and b.mark != "norun":
                compile(b.code, b.where, "exec")  # a syntax error names the block
                assert not b.code.lstrip().startswith(">>>"), f"{b.where}: a >>> transcript must be marked norun"


def test_every_page_has_a_runnable_or_explained_block_or_none():
    """A mark stands just before a block: one that precedes nothing is a typo."""
    import re

    for page in PAGES:
        text = page.path.read_text(encoding="utf-8").splitlines()
        marked = {b.line for b in page.blocks if b.mark}
        for n, line in enumerate(text, 1):
            if re.match(r"^\s*<!--\s*(norun|run)\b", line):
                following = next((m for m in range(n + 1, len(text) + 1) if text[m - 1].strip()), None)
                assert following in marked, f"{page.path.relative_to(ROOT)}:{n}: a mark with no code block after it"
