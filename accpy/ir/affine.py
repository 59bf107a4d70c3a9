"""Affine expressions over IR variables, and their conversion to and from IR expressions.

An `Affine` is `sum(coef * var) + const` with integer coefficients. A constraint is an
Affine read as `expr >= 0`. Every analysis (bounds, footprints, unswitching,
dependences) speaks this one language.
"""
from __future__ import annotations

from typing import Iterable, Optional

from .expr import BinOp, Cast, Const, Expr, UnOp, Var, as_int, idx_op, to_expr
from .types import ScalarType


class Affine:
    __slots__ = ("terms", "const", "_hash", "_coefs")

    def __init__(self, terms=None, const: int = 0):
        d: dict = {}
        if terms:
            items = terms.items() if isinstance(terms, dict) else terms
            for v, c in items:
                if c:
                    d[v] = d.get(v, 0) + c
        self.terms = tuple(sorted(((v, c) for v, c in d.items() if c), key=lambda t: t[0].uid))
        self.const = int(const)
        self._hash = None
        self._coefs = None

    # -- construction -------------------------------------------------------------------
    @staticmethod
    def _of(terms: tuple, const: int) -> "Affine":
        """From terms already in canonical form (sorted by uid, no zero coefficient): the
        arithmetic that keeps them so (negation, scaling, dropping a term) skips the sort."""
        a = Affine.__new__(Affine)
        a.terms, a.const, a._hash, a._coefs = terms, const, None, None
        return a

    @staticmethod
    def var(v: Var, coef: int = 1) -> "Affine":
        return Affine({v: coef})

    @staticmethod
    def constant(c: int) -> "Affine":
        return Affine(None, c)

    # -- queries ------------------------------------------------------------------------
    def coef(self, v: Var) -> int:
        if self._coefs is None:
            self._coefs = dict(self.terms)
        return self._coefs.get(v, 0)

    @property
    def vars(self) -> tuple:
        return tuple(v for v, _ in self.terms)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def __bool__(self):  # pragma: no cover - guard against accidental truth tests
        raise TypeError("Affine has no truth value")

    # -- arithmetic ---------------------------------------------------------------------
    def __add__(self, o) -> "Affine":
        if isinstance(o, int):
            return Affine._of(self.terms, self.const + o)
        d = dict(self.terms)
        for v, c in o.terms:
            d[v] = d.get(v, 0) + c
        return Affine(d, self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> "Affine":
        return Affine._of(tuple((v, -c) for v, c in self.terms), -self.const)

    def __sub__(self, o) -> "Affine":
        return self + (-o if isinstance(o, Affine) else -o)

    def __rsub__(self, o) -> "Affine":
        return (-self) + o

    def __mul__(self, k: int) -> "Affine":
        if not isinstance(k, int):
            raise TypeError("Affine can only be scaled by an int")
        if k == 0:
            return Affine._of((), 0)
        return Affine._of(tuple((v, c * k) for v, c in self.terms), self.const * k)

    __rmul__ = __mul__

    def subs(self, mapping: dict) -> "Affine":
        """Substitute variables by Affine expressions."""
        out = Affine.constant(self.const)
        for v, c in self.terms:
            if v in mapping:
                out = out + mapping[v] * c
            else:
                out = out + Affine({v: c})
        return out

    def drop(self, v: Var) -> "Affine":
        return Affine._of(tuple((w, c) for w, c in self.terms if w is not v), self.const)

    def __eq__(self, o):
        return isinstance(o, Affine) and self.terms == o.terms and self.const == o.const

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((self.terms, self.const))
        return self._hash

    def __repr__(self) -> str:
        return affine_str(self)

    # -- back to IR ---------------------------------------------------------------------
    def to_expr(self) -> Expr:
        """Positive terms first, then the constant, then subtracted terms: `i + 2*j + 3 - k`."""

        def term(v, c):
            return v if c == 1 else idx_op("mul", Const(c), v)

        e: Optional[Expr] = None
        for v, c in self.terms:
            if c > 0:
                e = term(v, c) if e is None else idx_op("add", e, term(v, c))
        if e is None:
            e = Const(self.const)
        elif self.const:
            e = idx_op("add", e, Const(self.const)) if self.const > 0 else idx_op("sub", e, Const(-self.const))
        for v, c in self.terms:
            if c < 0:
                e = idx_op("sub", e, term(v, -c))
        return e


def affine_str(a: Affine, names: Optional[dict] = None) -> str:
    parts = []
    for v, c in a.terms:
        n = names.get(v, v.name) if names else v.name
        if c == 1:
            parts.append(f"+ {n}")
        elif c == -1:
            parts.append(f"- {n}")
        elif c < 0:
            parts.append(f"- {-c}*{n}")
        else:
            parts.append(f"+ {c}*{n}")
    if a.const or not parts:
        parts.append(f"+ {a.const}" if a.const >= 0 else f"- {-a.const}")
    s = " ".join(parts)
    if s.startswith("+ "):
        s = s[2:]
    elif s.startswith("- "):
        s = "-" + s[2:]
    return s


def to_affine(e) -> Optional[Affine]:
    """The affine form of an integer IR expression, or None if it is not affine."""
    if isinstance(e, int):
        return Affine.constant(e)
    if isinstance(e, Const):
        if e.dtype.is_float:
            return None
        return Affine.constant(int(e.value))
    if isinstance(e, Var):
        if e.dtype.is_float:
            return None
        return Affine.var(e)
    if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
        return to_affine(e.value)
    if isinstance(e, UnOp) and e.op == "neg":
        a = to_affine(e.a)
        return None if a is None else -a
    if isinstance(e, BinOp):
        if e.op in ("add", "sub"):
            a, b = to_affine(e.a), to_affine(e.b)
            if a is None or b is None:
                return None
            return a + b if e.op == "add" else a - b
        if e.op == "mul":
            a, b = to_affine(e.a), to_affine(e.b)
            if a is None or b is None:
                return None
            if a.is_const:
                return b * a.const
            if b.is_const:
                return a * b.const
            return None
    return None


# -- constraints from IR conditions and loop bounds ----------------------------------------

def cond_constraints(cond) -> Optional[list]:
    """A conjunction of affine comparisons as a list of constraints (`c >= 0`), else None."""
    if isinstance(cond, Const) and cond.dtype is ScalarType.bool:
        return [] if cond.value else [Affine.constant(-1)]
    if not isinstance(cond, BinOp):
        return None
    if cond.op == "land":
        a, b = cond_constraints(cond.a), cond_constraints(cond.b)
        if a is None or b is None:
            return None
        return a + b
    if cond.op in ("lt", "le", "gt", "ge", "eq"):
        a, b = to_affine(cond.a), to_affine(cond.b)
        if a is None or b is None:
            return None
        if cond.op == "lt":
            return [b - a - 1]
        if cond.op == "le":
            return [b - a]
        if cond.op == "gt":
            return [a - b - 1]
        if cond.op == "ge":
            return [a - b]
        return [a - b, b - a]
    return None


def is_quasi_affine(e) -> bool:
    """`e` is built from affine index expressions with `+`, `-`, multiplication by an integer
    constant, and floor division / modulo (`//`, `%`) by positive integer constants, e.g.
    `(i // 4) % 4` (Accera's packing subscripts). Such an index is exact in z3 (its integer
    division and modulo by a positive constant are Python's floor semantics)."""
    if to_affine(e) is not None:
        return True
    if isinstance(e, UnOp) and e.op == "neg":
        return is_quasi_affine(e.a)
    if isinstance(e, Cast):
        return e.dtype.is_int and is_quasi_affine(e.value)
    if not isinstance(e, BinOp) or not e.dtype.is_int:
        return False
    if e.op in ("add", "sub"):
        return is_quasi_affine(e.a) and is_quasi_affine(e.b)
    if e.op == "mul":
        return (as_int(e.a) is not None and is_quasi_affine(e.b)) or (as_int(e.b) is not None and is_quasi_affine(e.a))
    if e.op in ("floordiv", "mod"):
        c = as_int(e.b)
        return c is not None and c > 0 and is_quasi_affine(e.a)
    return False


def quasi_linear(pairs) -> Optional[tuple]:
    """`sum(k * e for e, k in pairs)` as (Affine part, {(x, m): [coefficient of x // m,
    coefficient of x % m]}) for floor divisions and remainders of affine `x` by constants m > 0;
    None when some part is neither."""
    total = Affine.constant(0)
    quasi: dict = {}

    def add(e, k) -> bool:
        nonlocal total
        a = to_affine(e)
        if a is not None:
            total = total + a * k
            return True
        if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
            return add(e.value, k)
        if isinstance(e, UnOp) and e.op == "neg":
            return add(e.a, -k)
        if not isinstance(e, BinOp):
            return False
        if e.op in ("add", "sub"):
            return add(e.a, k) and add(e.b, k if e.op == "add" else -k)
        if e.op == "mul":
            ca, cb = as_int(e.a), as_int(e.b)
            return add(e.b, k * ca) if ca is not None else cb is not None and add(e.a, k * cb)
        if e.op in ("floordiv", "mod"):
            m, x = as_int(e.b), to_affine(e.a)
            if m is None or m <= 0 or x is None:
                return False
            quasi.setdefault((x, m), [0, 0])[0 if e.op == "floordiv" else 1] += k
            return True
        return False

    for e, k in pairs:
        if not add(e, k):
            return None
    return total, {key: ks for key, ks in quasi.items() if ks != [0, 0]}


def combination_affine(pairs) -> Optional[Affine]:
    """`sum(k * e for e, k in pairs)` as an Affine when it is affine once floor divisions and
    remainders recombine: `m * (x // m) + (x % m) == x` for an affine `x` and a constant m > 0.
    That is the flat offset of a subscript pair `[x // m, x % m]` in a dimension of extent m,
    e.g. a flattened pixel index read from a block whose rows are m pixels wide. None if a
    division or remainder is left over."""
    parts = quasi_linear(pairs)
    if parts is None:
        return None
    total, quasi = parts
    for (x, m), (k_div, k_mod) in quasi.items():
        if k_div != m * k_mod:
            return None
        total = total + x * k_mod
    return total


def floor_form(e) -> Optional[tuple]:
    """`e` as `floor(Y / d) + R` (Y, R affine, d >= 1), or None.

    Covers the extents of split, skewed and padded runtime dimensions, e.g.
    ceil(ceil(N/2)/4) + 3 -> floor((N + 7)/8) + 3, using floor((floor(Y/d) + R)/c) ==
    floor((Y + R*d)/(d*c)) for integer R and c >= 1.
    """
    a = to_affine(e)
    if a is not None:
        return a, 1, Affine.constant(0)
    if not isinstance(e, BinOp):
        return None
    if e.op == "floordiv":
        c = as_int(e.b)
        inner = floor_form(e.a)
        if c is None or c <= 0 or inner is None:
            return None
        y, d, r = inner
        return y + r * d, d * c, Affine.constant(0)
    if e.op in ("add", "sub"):
        for f_side, a_side, sign in ((e.a, e.b, 1), (e.b, e.a, 1)) if e.op == "add" else ((e.a, e.b, -1),):
            rest = to_affine(a_side)
            inner = floor_form(f_side) if rest is not None else None
            if inner is not None:
                y, d, r = inner
                return y, d, r + rest * sign
    return None


def lower_bound_constraints(v: Var, e) -> Optional[list]:
    """Constraints equivalent to `v >= e` where e is affine, a max of such, or a floor form."""
    if isinstance(e, BinOp) and e.op == "max":
        a, b = lower_bound_constraints(v, e.a), lower_bound_constraints(v, e.b)
        return None if a is None or b is None else a + b
    f = floor_form(e)
    if f is None:
        return None
    y, d, r = f
    # v >= floor(y/d) + r  <=>  v - r + 1 > y/d  <=>  d*(v - r + 1) - y - 1 >= 0
    return [(Affine.var(v) - r + 1) * d - y - 1]


def upper_bound_constraints(v: Var, e) -> Optional[list]:
    """Constraints equivalent to `v < e` (exclusive upper bound)."""
    if isinstance(e, BinOp) and e.op == "min":
        a, b = upper_bound_constraints(v, e.a), upper_bound_constraints(v, e.b)
        return None if a is None or b is None else a + b
    f = floor_form(e)
    if f is None:
        return None
    y, d, r = f
    # v < floor(y/d) + r  <=>  v - r + 1 <= floor(y/d)  <=>  d*(v - r + 1) <= y
    return [y - (Affine.var(v) - r + 1) * d]


def normalize(c: Affine) -> Affine:
    """Divide a constraint `c >= 0` by the gcd of its coefficients, tightening the constant."""
    from math import gcd

    g = 0
    for _, k in c.terms:
        g = gcd(g, abs(k))
    if g <= 1:
        return c
    return Affine._of(tuple((v, k // g) for v, k in c.terms), c.const // g)


def vars_of(cs: Iterable[Affine]) -> set:
    out: set = set()
    for c in cs:
        out.update(c.vars)
    return out


def ceildiv(a, b) -> Expr:
    """ceil(a / b) for a positive constant b, as an index expression."""
    cb = as_int(b)
    ca = as_int(a)
    if ca is not None and cb is not None:
        return Const(-((-ca) // cb), ScalarType.index)
    a = to_expr(a)
    # ceil((floor(x / d) + k) / b) == floor((x + (k + b - 1) * d) / (d * b)) for d, b > 0:
    # a split of a split outer index keeps one division (its loop bound stays affine-analyzable)
    inner, k = a, None
    if isinstance(a, BinOp) and a.op == "add":
        if isinstance(a.a, BinOp) and a.a.op == "floordiv":
            inner, k = a.a, a.b
        elif isinstance(a.b, BinOp) and a.b.op == "floordiv":
            inner, k = a.b, a.a
    d = as_int(inner.b) if isinstance(inner, BinOp) and inner.op == "floordiv" else None
    if d is not None and d > 0 and cb is not None and cb > 0:
        num = idx_op("add", inner.a, idx_op("mul", idx_op("add", k, Const(cb - 1)) if k is not None
                                            else Const(cb - 1), Const(d)))
        aff = to_affine(num)
        return idx_op("floordiv", aff.to_expr() if aff is not None else num, Const(d * cb))
    return idx_op("floordiv", idx_op("add", a, Const(cb - 1)), b)


def element_offset(buffer, indices, ranges=None) -> Expr:
    """The element offset of `buffer[indices]` from its first element (strides, and the
    grouping of the second-to-last dimension when `buffer.group` > 1, in panels of columns when
    `buffer.panel` > 1). `ranges` ({Var: (lo, hi)}, inclusive) lets a division by the group or
    the panel fold where the loops keep the remainder inside one group or panel."""
    total = None
    n = len(indices)
    for d, (ix, st) in enumerate(zip(indices, buffer.strides)):
        if buffer.group > 1 and d == n - 2:
            q, r = _divmod(ix, buffer.group, ranges)
            term = idx_op("add", idx_op("mul", q, st), r)
        elif buffer.panel > 1 and d == n - 1:
            q, r = _divmod(ix, buffer.panel, ranges)
            term = idx_op("add", idx_op("mul", q, Const(buffer.panel_stride)), idx_op("mul", r, st))
        else:
            term = idx_op("mul", ix, st)
        total = term if total is None else idx_op("add", total, term)
    return Const(0) if total is None else total


def affine_bounds(a, ranges) -> Optional[tuple]:
    """(min, max) of the affine `a` when each of its vars v lies in ranges[v] = (first, last);
    None when a var has no range."""
    lo = hi = a.const
    for v, c in a.terms:
        r = ranges.get(v)
        if r is None:
            return None
        lo += c * (r[0] if c > 0 else r[1])
        hi += c * (r[1] if c > 0 else r[0])
    return lo, hi


def _divmod(ix, g: int, ranges=None) -> tuple:
    """(ix // g, ix % g); exact without division where ix = g*X + r with r in [0, g) (r a constant,
    or terms whose `ranges` bound it)."""
    a = to_affine(ix)
    if a is not None and ranges:
        rest = Affine([(v, c) for v, c in a.terms if c % g], a.const % g)
        b = affine_bounds(rest, ranges)
        if b is not None and 0 <= b[0] and b[1] < g:
            q = Affine([(v, c // g) for v, c in a.terms if c % g == 0], a.const // g)
            return q.to_expr(), rest.to_expr()
    return _floordiv(ix, g), _mod(ix, g)


def _floordiv(ix, g: int) -> Expr:
    """ix // g, exactly (g*X + c) // g = X + c // g when ix is affine with g | every coefficient."""
    a = to_affine(ix)
    if a is not None and all(c % g == 0 for _, c in a.terms):
        return Affine([(v, c // g) for v, c in a.terms], a.const // g).to_expr()
    return idx_op("floordiv", ix, Const(g))


def _mod(ix, g: int) -> Expr:
    a = to_affine(ix)
    if a is not None and all(c % g == 0 for _, c in a.terms):
        return Const(a.const % g)
    return idx_op("mod", ix, Const(g))
