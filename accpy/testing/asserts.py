"""Build, run and compare: schedules and plans against each other or against the reference."""
from __future__ import annotations

import tempfile
from typing import Optional

import numpy as np

from ..nest.array import Array, Dimension, OutputDimension, Role, Scalar
from ..nest.nest import Nest
from ..nest.reference import evaluate
from ..package import Package
from ..package.compile import optimization
from ..plan.plan import Plan
from .replay import replay_code
from .strategies import value_for

_counter = iter(range(1, 1 << 62))


def _written(args) -> list:
    """Positions of the arguments a function writes (INPUT_OUTPUT / OUTPUT arrays, OUTPUT dimensions)."""
    return [k for k, a in enumerate(args)
            if isinstance(a, OutputDimension) or (isinstance(a, Array) and a.role in (Role.INPUT_OUTPUT, Role.OUTPUT))]


def _data(args, data, seed: int) -> list:
    """The caller's data (copied), or random data for `args` (see accpy.testing.arrays)."""
    if data is not None:
        if len(data) != len(args):
            raise ValueError(f"data: expected {len(args)} values (one per argument), got {len(data)}")
        return [np.array(x, copy=True, order="K") if isinstance(x, np.ndarray) else x for x in data]
    rng = np.random.default_rng(seed)
    sizes = {}
    for a in args:
        for x in (a.shape if isinstance(a, Array) else [a] if isinstance(a, Dimension) else []):
            if isinstance(x, Dimension):
                sizes.setdefault(id(x), int(rng.integers(1, 9)))
    return [value_for(a, sizes, rng) for a in args]


# Kernels under test are compiled at -O0: what a property test checks is accpy's lowering, and
# the C compiler is most of an example's time (-O0 is about 10 ms of 70 faster than -O1 on a
# small nest). `opt="-O3"` tests them as packages are built.
TEST_OPT = "-O0"


def run(x, args, data, *, opt: str = TEST_OPT):
    """Build `x` (a Nest, Schedule or Plan) with `args`, call it on a copy of `data`, return the copy."""
    pkg = Package()
    name = f"t{next(_counter)}"
    pkg.add(x, args=tuple(args), base_name=name)
    with optimization(opt), tempfile.TemporaryDirectory(prefix="accpy-testing-") as out:
        # only the shared library: no static archive to make (about 15 ms of each example)
        lib = pkg.build(name, format=Package.Format.HAT_DYNAMIC, output_dir=out, python_module=False, progress=False)
        values = [np.array(v, copy=True, order="K") if isinstance(v, np.ndarray) else v for v in data]
        getattr(lib, name)(*values)
    return values


def _tolerances(args, rtol, atol):
    floats = any(isinstance(a, Array) and a.element_type.is_float for a in args)
    return (1e-4 if rtol is None and floats else rtol or 0.0), (1e-5 if atol is None and floats else atol or 0.0)


def first_difference(name: str, got, want, rtol: float = 0.0, atol: float = 0.0) -> Optional[str]:
    """None when `got` equals `want` (floats within rtol/atol, NaN equal to NaN), else a message
    naming the first differing element, both values and how many differ."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != {want.shape}"
    diff = _first_difference(got, want, rtol, atol)
    if diff is None:
        return None
    where, g, w, n = diff
    g, w = (x.item() if hasattr(x, "item") else x for x in (g, w))
    return f"{name}{list(where)}: got {g!r}, expected {w!r} ({n} of {got.size} elements differ)"


def _first_difference(got, want, rtol, atol) -> Optional[tuple]:
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind == "f" or want.dtype.kind == "f":
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != want
    if not bad.any():
        return None
    where = tuple(int(v) for v in np.argwhere(bad)[0])
    return where, got[where], want[where], int(bad.sum())


def _describe(x) -> str:
    if isinstance(x, Nest):
        return "the nest in its default order"
    try:
        return replay_code(x)
    except Exception as e:  # pragma: no cover - printing must not hide the failure
        return f"(no replay code: {e})"


def _compare(args, got_vals, want_vals, rtol, atol, what_got, what_want, context) -> None:
    for k in _written(args):
        diff = _first_difference(got_vals[k], want_vals[k], rtol, atol)
        if diff is not None:
            where, g, w, n = diff
            g, w = (x.item() if hasattr(x, "item") else x for x in (g, w))
            name = args[k].name
            raise AssertionError(
                f"{name}{list(where)}: {what_got} gives {g!r}, {what_want} gives {w!r} "
                f"({n} element{'s' if n != 1 else ''} differ; rtol={rtol}, atol={atol})\n\n{context}")


def assert_equivalent(a, b, args, *, data=None, rtol: Optional[float] = None, atol: Optional[float] = None,
                      seed: int = 0, opt: str = TEST_OPT) -> None:
    """Build `a` and `b` (schedules or plans of the same logic) and compare their outputs.

    `data`: one value per argument (copied, never modified; default: random data from
    `seed`). Floats are compared with `rtol` (default 1e-4) and `atol` (default 1e-5),
    integers exactly. `opt`: the C compiler's optimization level (default -O0; e.g. "-O3"
    to test the code as packages are built). On a difference, AssertionError names the first
    differing element, both values, and prints both as accpy code that replays them.
    """
    values = _data(args, data, seed)
    rtol, atol = _tolerances(args, rtol, atol)
    got_a, got_b = run(a, args, values, opt=opt), run(b, args, values, opt=opt)
    context = f"first:\n{_indent(_describe(a))}\nsecond:\n{_indent(_describe(b))}"
    _compare(args, got_a, got_b, rtol, atol, "the first", "the second", context)


def assert_matches_reference(x, args, *, data=None, rtol: Optional[float] = None, atol: Optional[float] = None,
                             seed: int = 0, opt: str = TEST_OPT) -> None:
    """Build `x` (a Nest, Schedule or Plan) and compare its outputs with the reference evaluator
    (the logic run in its default order in Python). Arguments as for `assert_equivalent`."""
    values = _data(args, data, seed)
    rtol, atol = _tolerances(args, rtol, atol)
    got = run(x, args, values, opt=opt)
    schedule = x.schedule if isinstance(x, Plan) else x
    nests = [x] if isinstance(x, Nest) else schedule.nests
    want = [np.array(v, copy=True, order="K") if isinstance(v, np.ndarray) else v for v in values]
    env = {}
    for a, v in zip(args, want):
        if isinstance(a, OutputDimension):
            env[a.array] = v
        elif isinstance(a, (Array, Dimension, Scalar)):
            env[a] = v
    evaluate(nests, env)
    _compare(args, got, want, rtol, atol, "accpy", "the reference", f"schedule:\n{_indent(_describe(x))}")


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
