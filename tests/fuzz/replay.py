"""Minimizing a failing fuzz case and writing it as a replay script.

`minimize` greedily simplifies a case (`schedgen._variants`: drop a step, smaller sizes and
arguments, int32, default layouts, seed 0) while it still fails the same way, each attempt run
in a watched worker (a hang is a failure that takes the attempt's time limit to show).
`write_replay` writes a runnable script: it rebuilds the case and checks it like the driver,
exiting 1 while the failure reproduces (a hang: after a time limit, with the stacks) and 0 once
it is fixed; it shows the nest and the accpy calls, so it reads as a bug report too.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from support import schedgen as sg

from .generators import FAILING, Outcome


def same_failure(a: Outcome, b: Outcome) -> bool:
    if a is None or b is None or a.kind != b.kind:
        return False
    return a.kind in ("hang", "crash") or a.what == b.what


def minimize(check, outcome: Outcome, seconds: float, log=print) -> Outcome:
    """The simplest variant of `outcome.case` found within `seconds` that fails as it does.
    `check(case) -> Outcome` runs one case (in a worker)."""
    end = time.monotonic() + seconds
    tried = 0
    improved = True
    while improved and time.monotonic() < end:
        improved = False
        for v in sg._variants(outcome.case):
            if time.monotonic() >= end:
                break
            tried += 1
            got = check(v)
            if same_failure(got, outcome):
                outcome = got
                improved = True
                break
    log(f"  minimized in {tried} attempts: {outcome.case.describe()}")
    return outcome


TEMPLATE = '''"""accpy fuzz replay: {title}

Found by `python tests/fuzz/run.py --seed {seed}` ({gen} generator, batch {index}){minimized}.
Run it from the repository root:

    python {path}

It exits with status 1 while the failure reproduces ({timeout_note}) and 0 once it is fixed.
The case: {describe}
"""
import sys

sys.path[:0] = ["tests", "."]
from fuzz.replay import replay  # noqa: E402

# The nest ({kind} from tests/support/schedgen/nests.py):
{nest_comment}

STEPS = """
{steps}
"""

if __name__ == "__main__":
    sys.exit(replay({gen!r}, {kind!r}, {sizes!r}, {dtype!r}, {layouts!r}, {case_seed!r}, STEPS, {expect!r},
                    timeout={timeout!r}, opt={opt!r}))
'''


def write_replay(out_dir, outcome: Outcome, gen: str, run_seed: int, index, original=None,
                 timeout: float = 120.0, opt: str = "-O3") -> Path:
    """Write `outcome` (a failure) as out_dir/replay_<gen>_<kind>_<n>.py; returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n = 0
    while (path := out_dir / f"replay_{gen}_{outcome.kind}_{n}.py").exists():
        n += 1
    case, spec = outcome.case, outcome.case.nest
    nest = "\n".join("# " + line if line else "#" for line in spec.source().splitlines())
    minimized = "" if original is None or original == case else \
        f", minimized from\n  {original.describe()}"
    text = TEMPLATE.format(
        title=f"{outcome.kind}: {outcome.what}".replace('"""', "'''")[:300], seed=run_seed, gen=gen, index=index,
        minimized=minimized, path=path, describe=case.describe(), kind=spec.kind, nest_comment=nest,
        steps=case.step_code() or "# (no transforms)", sizes=tuple(spec.sizes), dtype=spec.dtype,
        layouts=tuple(spec.layouts), case_seed=case.seed, expect=outcome.kind, timeout=timeout, opt=opt,
        timeout_note="a hang: stopped after the timeout, with the stacks" if outcome.kind == "hang"
        else "the difference or the error is printed")
    path.write_text(text)
    return path


def replay(gen: str, kind: str, sizes, dtype: str, layouts, seed: int, steps: str, expect: str,
           timeout: float = 120.0, opt: str = "-O3") -> int:
    """Check the case once, in this process (kernels built at `opt`); 1 if it fails (as any
    failure), else 0."""
    import faulthandler
    import tempfile
    import warnings

    from .generators import check_batch

    warnings.simplefilter("ignore")
    case = sg.Case(sg.NestSpec(kind, tuple(sizes), dtype, tuple(layouts)), sg.steps_from_code(steps), seed)
    faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)  # a hang: the stacks, exit 1
    with tempfile.TemporaryDirectory(prefix="accpy-replay-") as tmp:
        if gen == "sanitize":  # the kernel under ASan + UBSan
            from .sanitize import sanitize_cases

            res = sanitize_cases([case], tmp)
            msg = res["failures"][0][1] if res["failures"] else ""
            got = Outcome(case, "error" if msg else "ok", msg.splitlines()[0] if msg else "", msg)
        else:
            from accpy.package.compile import optimization

            with optimization(opt):
                got = check_batch(gen, [case], tmp, name="replay")[0]
    faulthandler.cancel_dump_traceback_later()
    print(f"{got.kind}{': ' + got.what if got.what else ''}  (found as: {expect})")
    if got.details:
        print(got.details)
    return 1 if got.kind in FAILING else 0
