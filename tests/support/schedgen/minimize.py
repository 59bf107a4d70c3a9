"""Minimizing a failing case, and the errors that are legitimate rejections of a drawn case."""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

import accpy as acc
from .steps import Ref, Step
from .nests import NEST_KINDS, NestSpec
from .cases import Case, realize
from .batches import check_cases


# -----------------------------------------------------------------------------------------
# minimizing a failing case (for debugging; hypothesis shrinks batches too slowly)
# -----------------------------------------------------------------------------------------


def case_fails(case: Case, output_dir, what: Optional[str] = None) -> bool:
    """True when the case fails (with a failure whose headline contains `what`, if given)."""
    rep = check_cases([case], output_dir, name="minimize")
    return any(what is None or what in f.what for f in rep.failures)


def _variants(case: Case):
    """Simpler versions of a case, roughly simplest first."""
    steps = case.steps
    for n in range(len(steps)):  # drop one step
        yield dataclasses.replace(case, steps=steps[:n] + steps[n + 1:])
    spec = case.nest
    if spec.layouts:
        yield dataclasses.replace(case, nest=dataclasses.replace(spec, layouts=()))
    if spec.dtype != "int32" and "int32" in NEST_KINDS[spec.kind].dtypes:
        yield dataclasses.replace(case, nest=dataclasses.replace(spec, dtype="int32"))
    for n, s in enumerate(spec.sizes):  # smaller nest sizes
        for smaller in sorted({1, s // 2, s - 1}):
            if 1 <= smaller < s:
                sizes = spec.sizes[:n] + (smaller,) + spec.sizes[n + 1:]
                yield dataclasses.replace(case, nest=dataclasses.replace(spec, sizes=sizes))
    for n, step in enumerate(steps):  # simpler arguments
        if step.kwargs:
            yield dataclasses.replace(case, steps=steps[:n] + (dataclasses.replace(step, kwargs=()),) + steps[n + 1:])
        for k, a in enumerate(step.args):
            if isinstance(a, int) and not isinstance(a, bool) and a > 1:
                for smaller in sorted({1, a // 2, a - 1}):
                    args = step.args[:k] + (smaller,) + step.args[k + 1:]
                    yield dataclasses.replace(case, steps=steps[:n] + (dataclasses.replace(step, args=args),)
                                              + steps[n + 1:])
    if case.seed:
        yield dataclasses.replace(case, seed=0)


def minimize(case: Case, output_dir, what: Optional[str] = None, max_attempts: int = 400) -> Case:
    """Greedily simplify a failing case while it keeps failing; returns the simplest found."""
    attempts = 0
    improved = True
    while improved and attempts < max_attempts:
        improved = False
        for v in _variants(case):
            attempts += 1
            try:
                realize(v)
            except Exception:
                continue  # e.g. a later step names an index an earlier dropped step made
            if case_fails(v, output_dir, what):
                case = v
                improved = True
                break
            if attempts >= max_attempts:
                break
    return case


# =========================================================================================
# random PLANS on random schedules (unroll, vectorize, cache, parallelize)
# =========================================================================================
#
# `draw_plan_case(chooser)` draws a schedule case as above (split/tile/reorder/skew/pad),
# then plan steps on the final schedule, each checked against the logic first so that it
# is legal by construction as far as the schedule alone can tell:
#   * cache: an array the logic uses, at a random index, level or budget (max_elements);
#     for an INPUT sometimes a trigger index at or above the cache's; sometimes another
#     layout, a wider element type, thrifty, double buffering, or a cache of an earlier
#     cache at a lower level;
#   * vectorize: an index along which every access is contiguous (one element apart in
#     memory) or invariant, whose later indices all have small constant extents (unrolled
#     by request or as the vectorized loop's subtree); the element type is int32 or
#     float32; sometimes with an AVX2 target instead of the host's;
#   * unroll: one or two of the last indices with a small constant extent;
#   * parallelize: one or two contiguous outer indices that every written element moves
#     with (no race), none of them unrolled or vectorized.
# Plan calls that accpy rejects when they are made (Accera's argument rules) are dropped.
# What the schedule cannot tell is only found when the loops are lowered; the reasons in
# `LEGITIMATE_REJECTIONS` are accepted at build time (and counted), any other failure fails.
#
# `check_plan_cases` builds a batch as one package and checks every case like
# `check_cases` -- but the lowered IR (vector statements included) runs in Python through
# `plan_ir_to_python`, with bounds-checked linear memory (vector lanes included), before
# the native call.

def avx2_target_steps() -> list:
    """Steps making `plan` for this host without its AVX-512 extensions (32-byte vectors)."""
    exts = tuple(e for e in acc.Target.HOST.extensions if not e.startswith("avx512"))
    return [Step("HOST", (), (("extensions", exts), ("vector_bytes", 32)), results=("avx2",), target="acc.Target"),
            Step("create_plan", (Ref("avx2"),), results=("plan",))]

# build-time rejections that are legitimate for the plans drawn here: (pattern, why, only for
# nests with runtime sizes)
LEGITIMATE_REJECTIONS = [
    (r"ScheduleError: vectorize\(\w+\): the loop over \w+ is inside it",
     "the vectorized loop is not innermost after unrolling: an inner loop kept a runtime trip "
     "count (runtime sizes, or the pieces of a skewed / padded dimension), so it was not unrolled", False),
    (r"ScheduleError: vectorize\(\w+\): its body has a condition",
     "a guard that depends on runtime sizes is left inside the vectorized loop", True),
    (r"ScheduleError: vectorize\(\w+\): \w+ has a runtime stride along the vectorized loop",
     "vectorized along a dimension whose stride is a runtime size", True),
    (r"ScheduleError: cache of \w+: no key-slice has an active block within max_elements",
     "the budget is smaller than the block of the innermost key-slice", False),
    (r"ScheduleError: cache of \w+: the block's extent along dimension \d+ depends on runtime sizes",
     "caches need blocks of bounded size; this one grows with a runtime size", True),
    (r"ScheduleError: cache: the bounds of loop \w+ are not affine",
     "a cache inside loops whose bounds are not convex (a min of lower bounds, e.g. after two skews, "
     "or floor divisions of runtime sizes): not supported", False),
    (r"ScheduleError: cache of \w+: the block's extent along dimension \d+ is not affine",
     "a cache block of a runtime-size nest whose extent is not an affine function of the loops", True),
    (r"ScheduleError: cache: the footprint is unbounded",
     "a cache block of a runtime-size nest without a bound", True),
    (r"ScheduleError: cache of \w+_cache: subscript \d+ is not affine",
     "a cache of a cache whose source block starts at a floor division (split or skewed loops with "
     "rational bounds): the inner cache's subscripts are not affine", False),
    (r"ScheduleError: unrolling loop \w+ would emit more than \d+ copies",
     "the unrolled loops together have too many iterations", False),
    # (the generator vectorizes only the innermost index under a budget cache, but even there the
    # block can be smaller than one vector's iterations: then its copies are in the vectorized loop)
    (r"ScheduleError: vectorize\(\w+\): \w+_cache is written and read at different elements in the loop",
     "a budget cache (max_elements) whose key-slice, chosen when lowering, lies inside the vectorized loop: "
     "its copies would be in the loop", False),
    (r"ScheduleError: vectorize\(\w+\): every iteration assigns the same element of \w+_cache",
     "a budget cache (max_elements) of one element inside the vectorized loop: every iteration writes it", False),
    (r"ScheduleError: vectorize\(\w+\): two statements reduce into the same element of \w+_cache",
     "a budget cache (max_elements) of one element inside the vectorized loop: its fill and a reduction "
     "write it in every iteration", False),
]


def legitimate_rejection(error_text: str, spec: Optional[NestSpec] = None) -> Optional[str]:
    """The reason (from LEGITIMATE_REJECTIONS) a build failure is acceptable, or None."""
    last = error_text.strip().splitlines()[-1] if error_text.strip() else ""
    runtime = spec is not None and NEST_KINDS[spec.kind].runtime_sizes
    for pattern, why, runtime_only in LEGITIMATE_REJECTIONS:
        if re.search(pattern, last) and (runtime or not runtime_only):
            return why
    return None
