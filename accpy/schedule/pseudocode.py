"""A schedule as Python pseudo-code, in the style of Accera's documentation.

A split outer index is shown as a strided loop over the coordinates of the index it
came from (`for j in range(0, 12, 3)`), so array subscripts read `C[i, j+jj]`.
"""
from __future__ import annotations

from ..analysis.polyhedra import part_guard
from ..ir.affine import Affine
from ..ir.visitor import substitute_indices
from ..ir.expr import Const, Var, idx_op
from ..ir.printer import expr_str, stmt_lines
from ..ir.stmt import block
from ..ir.types import ScalarType


def _cmp_text(c: Affine, names) -> str:
    """`c >= 0` as text, preferring `x < N` for upper bounds and `x >= a` for lower ones."""
    pos = Affine([(v, k) for v, k in c.terms if k > 0])
    neg = Affine([(v, -k) for v, k in c.terms if k < 0])
    if neg.is_const:  # pos + const >= 0
        return f"{expr_str(pos.to_expr(), names)} >= {-c.const}"
    if pos.is_const:  # neg <= const  ->  neg < const + 1
        return f"{expr_str(neg.to_expr(), names)} < {c.const + 1}"
    # mixed signs: the variables on the left, in index order, the first one positive, as in
    # Accera's docs (`i - j >= 0 and i - j < 8` for the guards of a skew)
    lin = Affine(c.terms)
    if c.terms[0][1] > 0:  # lin + const >= 0  ->  lin >= -const
        return f"{expr_str(lin.to_expr(), names)} >= {-c.const}"
    return f"{expr_str((-lin).to_expr(), names)} < {c.const + 1}"  # -lin <= const


def _conjunction_text(cons: list) -> list:
    """Each constraint as text; a pair `e >= 0`, `-e >= 0` reads `x == v` (e.g. `f == 1`)."""
    out, used = [], set()
    for n, c in enumerate(cons):
        if n in used:
            continue
        twin = next((m for m in range(n + 1, len(cons)) if m not in used and (cons[m] + c).is_const
                     and (cons[m] + c).const == 0), None)
        if twin is not None and c.terms:
            used.add(twin)
            lead = c if c.terms[0][1] > 0 else -c  # lead == 0 with a positive first variable
            lin = Affine(lead.terms)
            out.append(f"{expr_str(lin.to_expr(), {})} == {-lead.const}")
        else:
            out.append(_cmp_text(c, {}))
    return out


def space_pseudocode(space) -> str:
    """The loops of an iteration space as Python pseudo-code (guards included)."""
    guards = [part_guard(space, p) for p in range(len(space.parts))]
    maps = [part.index_map for part in space.parts]
    # a dim is shown strided when every coefficient it has is a multiple of its step
    scale = {}
    for d in space.dims:
        s = d.step
        ok = s > 1
        if ok:
            for m in maps:
                for a in m.values():
                    if a.coef(d.var) % s:
                        ok = False
            for g in guards:
                for c in g:
                    if c.coef(d.var) % s:
                        ok = False
        scale[d.var] = s if ok else 1
    disp = {d.var: Var(d.name, ScalarType.index) for d in space.dims}

    def to_disp(a: Affine) -> Affine:
        return Affine([(disp[v] if v in disp else v, k // scale.get(v, 1)) for v, k in a.terms], a.const)

    lines = []
    depth = 0
    for d in space.dims:
        pad = "    " * depth
        s = scale[d.var]
        ext = expr_str(d.extent)
        if s > 1:
            stop = expr_str(d.stop if d.stop is not None else idx_op("mul", d.extent, Const(s)))
            lines.append(f"{pad}for {d.name} in range(0, {stop}, {s}):  # length {ext}, stride {s}")
        else:
            lines.append(f"{pad}for {d.name} in range({ext}):")
        depth += 1
    for p, part in enumerate(space.parts):
        mapping = {x: to_disp(a) for x, a in part.index_map.items()}
        body = block(*[substitute_indices(st.store, mapping) for st in part.statements])
        pad = "    " * depth
        g = guards[p]
        if g:
            cond = " and ".join(_conjunction_text([to_disp(c) for c in g]))
            lines.append(f"{pad}if {cond}:")
            lines.extend(stmt_lines(body, indent=depth + 1))
        else:
            lines.extend(stmt_lines(body, indent=depth))
    return "\n".join(lines)

