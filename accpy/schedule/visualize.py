"""Pictures of schedules: the points of an iteration space numbered in their scheduled order.

The order comes from the iteration-space model the lowering uses (`Schedule.space`): the
box of the schedule's dims is walked in loop order, and a box point is a real iteration of
a nest exactly when that nest's constraints hold there (the rule `lower.scan` generates
loops from); the other points are padding. Each point is drawn at its nest's coordinates
(`view="logical"`) or at the schedule's own loop coordinates (`view="schedule"`: a skewed
space appears sheared). matplotlib draws the figure (`pip install 'accpy[viz]'`);
`format="text"` needs nothing.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

from ..ir.affine import to_affine

MAX_POINTS = 20000


@dataclass
class Point:
    """One point of the schedule's box: where it is drawn and what it is."""

    coords: tuple  # logical (nest) or schedule coordinates, as drawn
    box: tuple  # the schedule dims' values
    part: Optional[int]  # which nest runs it (None: padding)
    order: Optional[int]  # position in the scheduled order (None: padding)


def _const(e, what: str) -> int:
    a = to_affine(e)
    if a is None or not a.is_const:
        raise ValueError(f"visualize: {what} is not a constant (runtime sizes and parameters cannot be drawn); "
                         f"draw a schedule of a nest with constant sizes")
    return a.const


def _eval(a, env) -> int:
    return a.const + sum(c * env[v] for v, c in a.terms)


def points(schedule, view: str = "logical") -> list:
    """Every point of the schedule's box, in loop order, numbered where it is a real iteration."""
    if view not in ("logical", "schedule"):
        raise ValueError(f"view: expected 'logical' or 'schedule', got {view!r}")
    space = schedule.space
    extents = [_const(d.extent, f"the extent of {d.name}") for d in space.dims]
    total = 1
    for e in extents:
        total *= e
    if total > MAX_POINTS:
        raise ValueError(f"visualize: the schedule has {total} points (at most {MAX_POINTS} are drawn); draw a "
                         f"smaller nest with the same schedule")
    parts = space.parts
    cons = [space.part_constraints(p) for p in range(len(parts))]
    maps = [[part.index_map[ix.var] for ix in part.nest.indices] for part in parts]
    out, n = [], 0
    for box in itertools.product(*[range(e) for e in extents]):
        env = dict(zip(space.vars, box))
        part = next((p for p in range(len(parts)) if all(_eval(c, env) >= 0 for c in cons[p])), None)
        logical = tuple(_eval(a, env) for a in maps[part if part is not None else 0])
        coords = logical if view == "logical" else box
        out.append(Point(coords, box, part, n if part is not None else None))
        if part is not None:
            n += 1
    return out


def text(schedule, view: str = "logical") -> str:
    """A grid of order numbers (`.` for padding): rows the first coordinate, columns the second; a
    3-D space as one grid per value of its first coordinate. Fused parts are told apart by a
    letter after the number (a, b, ...) when there are several."""
    pts = points(schedule, view)
    multi = len(schedule.space.parts) > 1
    dims = len(pts[0].coords) if pts else 0
    cells: dict = {}
    for p in pts:
        key = p.coords if dims >= 1 else (0,)
        label = "." if p.order is None else f"{p.order}{chr(97 + p.part) if multi else ''}"
        if key in cells and cells[key] != ".":
            if label == ".":
                continue
            label = cells[key] + "/" + label  # (two parts at one logical point)
        cells[key] = label
    width = max((len(v) for v in cells.values()), default=1)
    fmt = lambda s: s.rjust(width)  # noqa: E731

    def grid(coords2):
        rows = sorted({c[0] for c in coords2})
        cols = sorted({c[1] for c in coords2})
        lines = []
        for r in rows:
            lines.append(" ".join(fmt(coords2.get((r, c), " ")) for c in cols))
        return lines

    if dims == 1:
        return " ".join(fmt(cells[k]) for k in sorted(cells))
    if dims == 2:
        return "\n".join(grid(cells))
    out = []
    for first in sorted({k[0] for k in cells}):
        out.append(f"[{first}, :, :]")
        out += grid({k[1:3]: v for k, v in cells.items() if k[0] == first and all(x == 0 for x in k[3:])})
    return "\n".join(out)


def _matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("visualize: drawing needs matplotlib: pip install 'accpy[viz]' "
                          "(or use format='text')") from None
    return plt


def _tile_lines(schedule, view):
    """Per drawn axis: the coordinates of split/tile boundaries (logical view)."""
    space = schedule.space
    if view != "logical" or not space.parts:
        return {}
    part = space.parts[0]
    out: dict = {}
    for axis, ix in enumerate(part.nest.indices):
        a = part.index_map[ix.var]
        for d in space.dims:
            if d.origin == "split" and a.coef(d.var):
                size = abs(a.coef(d.var)) * _const(d.extent, d.name)
                out.setdefault(axis, set()).add(size)
    return out


def figure(schedule, view: str = "logical", title: Optional[str] = None, highlight=None, arrows: int = 6):
    """A matplotlib Figure of the schedule (see Schedule.visualize). `highlight`: box points to mark
    (a cache's key slice) as a set of box tuples."""
    plt = _matplotlib()
    pts = points(schedule, view)
    dims = len(pts[0].coords)
    real = [p for p in pts if p.order is not None]
    n = max(len(real), 1)
    nparts = len(schedule.space.parts)
    slices = sorted({p.coords[0] for p in pts}) if dims >= 3 else [None]
    fig, axes = plt.subplots(1, len(slices), figsize=(min(4.2 * len(slices), 16), 4.4), squeeze=False)
    cmaps = ["viridis", "autumn", "winter", "cool"]
    for ax, sl in zip(axes[0], slices):
        sel = [p for p in pts if sl is None or p.coords[0] == sl]

        def xy(p):
            c = p.coords if sl is None else p.coords[1:]
            x, y = (c[1], c[0]) if len(c) >= 2 else (c[0], 0)
            if nparts > 1 and p.part is not None:  # the nests of a fused schedule side by side
                if len(c) >= 2:
                    return x + 0.3 * (p.part - (nparts - 1) / 2), y
                return x, p.part
            return x, y

        for p in sel:
            x, y = xy(p)
            if p.order is None:
                ax.scatter([x], [y], s=140, facecolors="none", edgecolors="0.6", linewidths=1.0, zorder=2)
                continue
            cmap = plt.get_cmap(cmaps[p.part % len(cmaps)] if nparts > 1 else "viridis")
            color = cmap(0.1 + 0.8 * p.order / n)
            ax.scatter([x], [y], s=140, color=color, zorder=2,
                       edgecolors="red" if highlight and p.box in highlight else "none", linewidths=2)
            ax.annotate(str(p.order), (x, y), ha="center", va="center", fontsize=6, color="white", zorder=3)
        ordered = sorted((p for p in sel if p.order is not None), key=lambda p: p.order)[:arrows + 1]
        for a, b in zip(ordered, ordered[1:]):
            (x0, y0), (x1, y1) = xy(a), xy(b)
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=1,
                        arrowprops=dict(arrowstyle="->", color="0.35", lw=0.8, shrinkA=7, shrinkB=7))
        for axis, sizes in _tile_lines(schedule, view).items():
            coord_axis = axis - (0 if sl is None else 1)
            if coord_axis < 0:
                continue
            vals = [p.coords[axis] for p in sel]
            lo, hi = min(vals), max(vals)
            for size in sizes:
                for b in range((lo // size + 1) * size, hi + 1, size):
                    if dims == 1 or coord_axis == 1 or (sl is None and axis == 1):
                        ax.axvline(b - 0.5, color="0.5", lw=0.8, ls="--", zorder=0)
                    else:
                        ax.axhline(b - 0.5, color="0.5", lw=0.8, ls="--", zorder=0)
        xs, ys = zip(*(xy(p) for p in sel))
        ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
        ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
        ax.set_aspect("equal")
        ax.invert_yaxis()
        names = _axis_names(schedule, view)
        if sl is not None:
            ax.set_title(f"{names[0]} = {sl}", fontsize=9)
            names = names[1:]
        if len(names) >= 2:
            ax.set_xlabel(names[1])
            ax.set_ylabel(names[0])
        elif names:
            ax.set_xlabel(names[0])
            if nparts > 1:
                ax.set_yticks(range(nparts))
                ax.set_yticklabels([f"nest {p}" for p in range(nparts)])
            else:
                ax.set_yticks([])
    fig.suptitle(title or "scheduled order (hollow: padding)", fontsize=10)
    fig.tight_layout()
    return fig


def _axis_names(schedule, view):
    if view == "schedule":
        return [d.name for d in schedule.space.dims]
    return [ix.name for ix in schedule.space.parts[0].nest.indices]


def visualize(schedule, filename=None, *, format: Optional[str] = None, view: Optional[str] = None,
              title: Optional[str] = None, highlight=None):
    """The body of Schedule.visualize / Plan.visualize (see there)."""
    if view is None:
        view = "schedule" if any(c.op == "skew" for c in getattr(schedule, "_commands", [])) else "logical"
    if format is None and filename is not None:
        format = str(filename).rsplit(".", 1)[-1].lower() if "." in str(filename) else "png"
    if format == "text":
        t = text(schedule, view)
        if filename is not None:
            with open(filename, "w") as f:
                f.write(t + "\n")
        return t
    if format not in (None, "png", "svg", "pdf"):
        raise ValueError(f"format: expected 'png', 'svg', 'pdf' or 'text', got {format!r}")
    fig = figure(schedule, view, title, highlight)
    if filename is not None:
        fig.savefig(filename, format=format, dpi=130)
    return fig
