"""The iteration-space model: ordered dims with extents, per-nest index maps, constraints.

A schedule is a rectilinear box of `dims` (the loop order) plus, for each nest it runs
(a *part*; several after fusing), an affine map from the nest's indices to the dims.
A point of the box is a *real* iteration of part p exactly when its `constraints(p)`
hold: the nest's domain pulled back through the map, the intrinsic range of split
inner dims and, after fusing, `f == p`. Everything else is padding.

Every transform is a substitution on this model; nothing replays transform history.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from ..ir.affine import Affine, to_affine, upper_bound_constraints
from ..ir.affine import ceildiv
from ..ir.expr import Const, Expr, Var, idx_op
from ..ir.types import ScalarType


@dataclass(frozen=True)
class Dim:
    """One loop of the schedule. `index` is the user's handle for it."""

    index: object  # nest.logic.Index
    var: Var
    extent: Expr
    step: int = 1  # stride of the loop in the coordinates of the index it was split from
    parent: object = None  # for a split inner dim: the handle of the dim it was split from
    origin: str = "nest"  # nest | split | fuse
    stop: Optional[Expr] = None  # display: the range end of the index it stands for

    @property
    def name(self) -> str:
        """The name of the dimension's index."""
        return self.var.name


@dataclass(frozen=True)
class Part:
    """The logic of one nest inside the space, and where its iterations sit."""

    nest: object
    index_map: dict  # nest index Var -> Affine over dim vars
    statements: tuple  # LogicStatement
    extents: dict  # nest index Var -> Affine extent (constant or runtime dimension)
    constraints: tuple = ()  # extra constraints of this part only (e.g. f == p)


@dataclass(frozen=True)
class IterationSpace:
    dims: tuple  # of Dim, in loop order
    parts: tuple  # of Part
    constraints: tuple = ()  # common constraints over dim vars (split sizes)
    attrs: tuple = field(default=())  # (key, value) annotations, e.g. skew unroll thresholds

    # -- construction -------------------------------------------------------------------
    @staticmethod
    def of_nest(nest) -> "IterationSpace":
        """The iteration space of a nest in its default order."""
        dims = []
        imap = {}
        for ix, ext in zip(nest.indices, nest.extents):
            v = Var(ix.name, ScalarType.index)
            dims.append(Dim(ix, v, ext, stop=ext))
            imap[ix.var] = Affine.var(v)
        extents = {ix.var: to_affine(e) for ix, e in zip(nest.indices, nest.extents)}
        part = Part(nest, imap, tuple(nest.statements), extents)
        return IterationSpace(tuple(dims), (part,))

    @staticmethod
    def fuse(spaces, partial: int, fused: tuple, fusing) -> "IterationSpace":
        """Fuse the first `partial` dims of `spaces` (handles `fused`), add the fusing dim
        (handle `fusing`, extent len(spaces)), then the unfused dims of each space in turn.

        Part p of space s is real where its own constraints hold (including its old box,
        which the wider fused dims no longer imply), `f == s`, and every unfused dim of the
        other spaces is 0: each real point still stands for exactly one nest iteration.
        """
        seen: set = set()
        for sp in spaces:
            for v in sp.vars:
                if v in seen:
                    raise ValueError("fuse: a schedule appears twice among the fused schedules")
                seen.add(v)
        new_vars = [Var(h.name, ScalarType.index) for h in fused]
        fvar = Var(fusing.name, ScalarType.index)
        renamed: dict = {}  # id(old handle) -> fused handle
        for j in range(partial):
            for sp in spaces:
                renamed[id(sp.dims[j].index)] = fused[j]

        def handle(h):
            return None if h is None else renamed.get(id(h), h)

        dims = []
        for j in range(partial):
            ds = [sp.dims[j] for sp in spaces]
            if len({d.step for d in ds}) > 1:
                raise ValueError(f"fuse: the fused dimensions at position {j} have different steps "
                                 f"({', '.join(f'{d.name}: {d.step}' for d in ds)}); split them alike before fusing")
            ext = ds[0].extent
            for d in ds[1:]:
                if d.extent != ext:
                    ext = idx_op("max", ext, d.extent)
            parent = next((handle(d.parent) for d in ds if d.parent is not None), None)
            dims.append(Dim(fused[j], new_vars[j], ext, ds[0].step, parent, ds[0].origin,
                            ds[0].stop if all(d.stop == ds[0].stop for d in ds) else None))
        n = len(spaces)
        dims.append(Dim(fusing, fvar, Const(n), origin="fuse", stop=Const(n)))
        for sp in spaces:
            dims.extend(dataclasses.replace(d, parent=handle(d.parent)) for d in sp.dims[partial:])
        parts, attrs = [], []
        f = Affine.var(fvar)
        for p, sp in enumerate(spaces):
            mapping = {sp.dims[j].var: Affine.var(new_vars[j]) for j in range(partial)}
            s2 = sp.substitute(mapping)
            own = [c.subs(mapping) for c in sp.box_constraints()] + list(s2.constraints) + [f - p, -f + p]
            for q, other in enumerate(spaces):
                if q != p:
                    own.extend(-Affine.var(d.var) for d in other.dims[partial:])
            for part in s2.parts:
                parts.append(dataclasses.replace(part, constraints=tuple(part.constraints) + tuple(own)))
            for k, v in sp.attrs:
                if k == "unroll_below":
                    v = (handle(v[0]), handle(v[1]), v[2])
                attrs.append((k, v))
        return IterationSpace(tuple(dims), tuple(parts), (), tuple(attrs))

    # -- queries ------------------------------------------------------------------------
    def position(self, handle) -> Optional[int]:
        """The position of the dimension of index `handle`, or None."""
        for k, d in enumerate(self.dims):
            if d.index is handle:
                return k
        return None

    def dim(self, handle) -> Dim:
        """The dimension of index `handle` (ValueError naming it when unknown)."""
        k = self.position(handle)
        if k is None:
            raise unknown_index(handle, [d.index for d in self.dims])
        return self.dims[k]

    @property
    def vars(self) -> tuple:
        """The IR variables of the dimensions, in order."""
        return tuple(d.var for d in self.dims)

    def box_constraints(self) -> list:
        """Bounds of each dimension as constraints (for the exact dependence checks)."""
        out = []
        for d in self.dims:
            out.append(Affine.var(d.var))
            ub = upper_bound_constraints(d.var, d.extent)
            if ub is not None:
                out.extend(ub)
        return out

    def part_constraints(self, p: int) -> list:
        """Constraints (over dim vars and runtime sizes) marking the real points of part p."""
        part = self.parts[p]
        out = list(self.constraints) + list(part.constraints)
        for x, a in part.index_map.items():
            out.append(a)  # 0 <= x
            out.append(part.extents[x] - a - 1)  # x <= N - 1
        return out

    def unroll_below(self) -> dict:
        """Loop var -> threshold: the loops a split asked to run unrolled when shorter
        (`unroll_below` attributes; both the split's outer and inner loops)."""
        out = {}
        for k, v in self.attrs:
            if k == "unroll_below":
                index, ref, threshold = v
                for h in (index, ref):
                    pos = self.position(h)
                    if pos is not None:
                        out[self.dims[pos].var] = threshold
        return out

    def attr(self, key, default=None):
        """The value of a transform attribute (e.g. "unroll_below"), or `default`."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    # -- transforms ---------------------------------------------------------------------
    def substitute(self, mapping: dict) -> "IterationSpace":
        """The space with variables replaced (a mapping of IR variables to expressions)."""
        parts = tuple(dataclasses.replace(
            p, index_map={x: a.subs(mapping) for x, a in p.index_map.items()},
            constraints=tuple(c.subs(mapping) for c in p.constraints)) for p in self.parts)
        cons = tuple(c.subs(mapping) for c in self.constraints)
        return dataclasses.replace(self, parts=parts, constraints=cons)

    def split(self, handle, size: int, inner_index) -> "IterationSpace":
        """The space with `handle`'s dimension split by `size`; `inner_index` names the new inner one."""
        k = self.position(handle)
        d = self.dims[k]
        inner_var = Var(inner_index.name, ScalarType.index)
        inner = Dim(inner_index, inner_var, Const(size), step=d.step, parent=handle, origin="split",
                    stop=Const(size * d.step) if size * d.step else None)
        outer = dataclasses.replace(d, extent=ceildiv(d.extent, size), step=d.step * size)
        sp = self.substitute({d.var: Affine.var(d.var, size) + Affine.var(inner_var)})
        dims = list(self.dims)
        dims[k] = outer
        dims.insert(k + 1, inner)
        # 0 <= inner <= size - 1, both sides recorded: a later skew or pad moves the inner
        # dim in the box, and then its lower bound is no longer the box's 0
        cons = sp.constraints + (Affine.var(inner_var), Affine.constant(size - 1) - Affine.var(inner_var))
        return dataclasses.replace(sp, dims=tuple(dims), constraints=cons)

    def skew(self, handle, reference) -> "IterationSpace":
        """The space with `handle`'s dimension skewed by `reference`'s."""
        k, r = self.position(handle), self.position(reference)
        d, rd = self.dims[k], self.dims[r]
        # (N, M) -> (N + M - 1, M): point (i, j) moves to (i + j, j)
        sp = self.substitute({d.var: Affine.var(d.var) - Affine.var(rd.var)})
        ext = idx_op("sub", idx_op("add", d.extent, rd.extent), Const(1))
        dims = list(sp.dims)
        dims[k] = dataclasses.replace(d, extent=ext, stop=None)
        return dataclasses.replace(sp, dims=tuple(dims))

    def pad(self, handle, size: int) -> "IterationSpace":
        """The space with `size` empty iterations in front of `handle`'s dimension."""
        k = self.position(handle)
        d = self.dims[k]
        sp = self.substitute({d.var: Affine.var(d.var) - size})
        dims = list(sp.dims)
        dims[k] = dataclasses.replace(d, extent=idx_op("add", d.extent, Const(size)), stop=None)
        return dataclasses.replace(sp, dims=tuple(dims))

    def reorder(self, handles) -> "IterationSpace":
        """The space with its dimensions in the order of `handles`."""
        dims = tuple(self.dim(h) for h in handles)
        return dataclasses.replace(self, dims=dims)

    def with_attr(self, key, value) -> "IterationSpace":
        """The space with a transform attribute set."""
        return dataclasses.replace(self, attrs=self.attrs + ((key, value),))

    def shape(self) -> list:
        """The extent of each dimension (ints, or index expressions for runtime sizes)."""
        out = []
        for d in self.dims:
            a = to_affine(d.extent)
            out.append(a.const if a is not None and a.is_const else d.extent)
        return out


def unknown_index(index, known, what: str = "index") -> ValueError:
    """The error for an index that is not one of a schedule's indices (`known`, in order)."""
    name = getattr(index, "name", repr(index))
    return ValueError(f"Unknown index! {what}: {name} is not an index of the schedule with indices "
                      f"({', '.join(getattr(k, 'name', repr(k)) for k in known)}); is it an index of another "
                      f"nest or schedule?")
