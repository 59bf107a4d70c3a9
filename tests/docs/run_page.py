"""Run the code blocks of one page of the guide, in order, in the current directory.

    python tests/docs/run_page.py PAGE.md

Python blocks share one namespace (`__name__ == "__main__"`, as in a script); titled blocks are
written to their files; marked bash blocks run in bash with `set -euo pipefail`. Exit status 0
when every block ran; otherwise the failing block's place and error are printed.
"""
from __future__ import annotations

import linecache
import os
import subprocess
import sys
import traceback
from pathlib import Path


# PoCL 3.1 sometimes computes the tensor-core emulation's tiles wrongly when it runs work-groups on
# several threads (tests/targets/gpu/conftest.py): the GPU page's blocks run with one
os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", "1")


def main(page_path: str) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from guide_blocks import parse

    page = parse(Path(page_path).resolve())
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    for block in page.blocks:
        if block.mark == "norun":
            continue
        if block.title:
            Path(block.title).parent.mkdir(parents=True, exist_ok=True)
            Path(block.title).write_text(block.code)
        if not block.runs:
            continue
        print(f"--- {block.where} ({block.lang})", flush=True)
        if block.lang == "python":
            # the source where tracebacks and accpy's messages (which quote statements) look for it
            linecache.cache[block.where] = (len(block.code), None, block.code.splitlines(True), block.where)
            try:
                exec(compile(block.code, block.where, "exec"), namespace)
            except BaseException:
                traceback.print_exc()
                print(f"FAILED: the python block at {block.where}", file=sys.stderr)
                return 1
        else:
            r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block.code])
            if r.returncode:
                print(f"FAILED: the bash block at {block.where} (exit status {r.returncode})", file=sys.stderr)
                return 1
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
