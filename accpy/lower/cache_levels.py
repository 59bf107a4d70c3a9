"""Budget caches (`max_elements`): the level each is placed at -- the highest key-slice whose active
blocks of the array fit the budget, or 0 when only one iteration's elements do (each iteration its
own key-slice, at a loop of one iteration around the innermost body, as Accera places it). A level
whose blocks grow with runtime sizes does not fit: the loops of a split's inner indices bound the
blocks below it (`kk` of k split by 32 spans at most 32 elements, also in the tail where K ends)."""
from __future__ import annotations

from typing import Optional

from ..analysis.footprint import bounded_site_footprints, prod
from ..errors import ScheduleError
from ..ir.expr import Const, Var
from ..ir.stmt import For
from ..ir.visitor import Mutator


def _highest_fitting(stmt, site_vars, buf, max_elements: int, symbols) -> Optional[Var]:
    """The first of `site_vars` (outermost first) whose blocks of `buf` hold at most `max_elements`
    elements, or None."""
    for var in site_vars:
        blocks = bounded_site_footprints(stmt, var, buf, symbols)
        if blocks and max(prod(b.ext_max) for b in blocks) <= max_elements:
            return var
    return None


def single_iteration_sites(stmt, inner_var: Var, v0: Var):
    """`stmt` with the body of every loop over `inner_var` inside a loop of one iteration over `v0`:
    the sites of level-0 caches (simplify removes the loop once the caches are in)."""
    class Wrap(Mutator):
        def visit_For(self, f: For):
            if f.var is inner_var:
                return For(f.var, f.lo, f.hi, For(v0, Const(0), Const(1), f.body), f.kind, f.attrs)
            return self.generic_visit(f)

    return Wrap().visit(stmt)


def resolved_level(c, by_key, stmt, space, symbols, single=None) -> int:
    """A cache's level; a budget cache's is the highest whose active block fits `max_elements`,
    or 0 (one iteration's elements, at the sites `single` = (statement, var) has) when only
    that fits."""
    if c.placed_level is not None:
        return c.placed_level
    n = len(space.dims)
    top = n
    root = c
    if c.outer is not None:
        # a budget cache of a budget cache: the highest level below its source's that fits
        top = resolved_level(by_key[c.outer], by_key, stmt, space, symbols, single) - 1
        while root.outer is not None:
            root = by_key[root.outer]
    buf = root.source
    level_of = {space.dims[n - lv].var: lv for lv in range(1, n + 1)}
    var = _highest_fitting(stmt, [space.dims[n - lv].var for lv in range(top, 0, -1)], buf, c.max_elements, symbols)
    level = level_of[var] if var is not None else None
    if level is None and single is not None and top >= 0 and \
            _highest_fitting(single[0], [single[1]], buf, c.max_elements, symbols) is not None:
        level = 0
    if level is not None:
        c.resolved_level = level
        return level
    raise ScheduleError(f"cache of {buf.name}: no key-slice has an active block within max_elements={c.max_elements}")
