"""How a vector loop's accesses move with its lanes: the coefficient of the loop counter in an
index expression, the elements an access moves per iteration, an access's element offset. Shared
by the vectorizer (accpy/lower/vectorize.py) and its dot-product matching (vector_products.py)."""
from __future__ import annotations

from ..ir.affine import combination_affine, element_offset, to_affine
from ..ir.expr import BinOp, Const, Var
from ..ir.visitor import free_vars, substitute


class NotVectorizable(Exception):
    pass


class MissingVectorOp(NotVectorizable):
    """The loop's vector shape (`shape`: its `name`, the library's name of the register shape) has no instruction for the
    operation `op` (an IR vector operation: "add", "cmp_lt", "from_int8", "hadd", ...) on lanes of
    `dtype`; `what` the message (default: says so)."""

    def __init__(self, op: str, dtype, shape, what: str = ""):
        self.op, self.dtype, self.shape = op, dtype, shape
        super().__init__(what or f"no {shape.name} instruction for `{op}` on {dtype.name}")


def coef_of(e, lane: Var):
    """The coefficient of `lane` in the index expression `e`, or None when `e` is not affine
    in it. Parts without `lane` may be anything (e.g. a block origin `max(4*i - 3, 0)`)."""
    if lane not in free_vars(e):
        return 0
    if e is lane:
        return 1
    if isinstance(e, BinOp) and e.op in ("add", "sub"):
        a, b = coef_of(e.a, lane), coef_of(e.b, lane)
        if a is None or b is None:
            return None
        return a + b if e.op == "add" else a - b
    if isinstance(e, BinOp) and e.op == "mul":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(x, Const) and lane not in free_vars(x):
                c = coef_of(y, lane)
                return None if c is None else int(x.value) * c
    a = to_affine(e)
    return a.coef(lane) if a is not None else None


def lane_coef(buffer, indices, lane: Var, chunk=None) -> int:
    """How many elements the address moves when the loop counter moves by one. `chunk` (base,
    lanes): the vector's lanes are lane = base + l, l < lanes (where they may meet column panels).
    Subscripts that are not affine in the loop counter count when the address they make is:
    `[x // m, x % m]` in a dimension of extent m is the flat offset x (combination_affine)."""
    if buffer.group == 1 and buffer.panel == 1 and any(coef_of(ix, lane) is None for ix in indices):
        flat = _flat_offset(buffer, indices)
        if flat is not None:
            return flat.coef(lane)
    total = 0
    for d, (ix, st) in enumerate(zip(indices, buffer.strides)):
        c = coef_of(ix, lane)
        if c and buffer.group > 1 and d == len(indices) - 2:
            raise NotVectorizable(f"{buffer.name} keeps rows in groups of {buffer.group} (a grouped layout): the "
                                  f"vectorized loop may not move along its second-to-last dimension")
        if c and buffer.panel > 1 and d == len(indices) - 1 and not _in_one_panel(buffer, ix, lane, c, chunk):
            raise NotVectorizable(f"{buffer.name} keeps its columns in panels of {buffer.panel}: the vectorized "
                                  f"loop may move along them only in whole vectors inside one panel")
        if c is None:
            raise NotVectorizable(f"the subscript of {buffer.name} is not affine")
        if c == 0:
            continue
        s = to_affine(st)
        if s is None or not s.is_const:
            raise NotVectorizable(f"{buffer.name} has a runtime stride along the vectorized loop")
        total += c * s.const
    return total


def _in_one_panel(buffer, ix, lane: Var, c: int, chunk) -> bool:
    """Whether the vector's columns ix(base + l), l < lanes, lie in one panel of `buffer`."""
    if chunk is None or c != 1 or buffer.panel % chunk[1]:
        return False
    a = to_affine(substitute(ix, {lane: chunk[0]}))
    w = chunk[1]
    return a is not None and a.const % w == 0 and all(k % w == 0 for _, k in a.terms)


def _flat_offset(buffer, indices):
    """The element offset of `buffer[indices]` as an Affine where the subscripts' floor divisions
    and remainders recombine (`m * (x // m) + x % m == x`); None when they do not or a stride is
    not constant."""
    pairs = []
    for ix, st in zip(indices, buffer.strides):
        c = to_affine(st)
        if c is None or not c.is_const:
            return None
        pairs.append((ix, c.const))
    return combination_affine(pairs)


def subscripts_apart(ix, iy, lane: Var) -> bool:
    """Whether two accesses of one buffer never touch the same element in any lanes of the loop of
    `lane`: at some position their subscripts are (e + c1) % m and (e + c2) % m, with c1 != c2
    modulo m and e not moving with the lane (e.g. the two planes of a ring buffer, X[(t + 1) % 2, ..]
    and X[t % 2, ..], in a loop inside t)."""
    for a, b in zip(ix, iy):
        if isinstance(a, BinOp) and isinstance(b, BinOp) and a.op == b.op == "mod" \
                and isinstance(a.b, Const) and isinstance(b.b, Const) and a.b.value == b.b.value and a.b.value > 0:
            ea, eb = to_affine(a.a), to_affine(b.a)
            if ea is None or eb is None or ea.coef(lane) or eb.coef(lane):
                continue
            d = ea - eb
            if d.is_const and d.const % a.b.value != 0:
                return True
    return False


def access_offset(buffer, indices):
    """The element offset of an access as an Affine (None when a stride is not constant, or the
    offset is not affine)."""
    if buffer.group > 1 or buffer.panel > 1:
        return to_affine(element_offset(buffer, indices))
    return _flat_offset(buffer, indices)
