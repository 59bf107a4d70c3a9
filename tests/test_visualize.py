"""Schedule.visualize / Plan.visualize: the pictures' order numbers are the order the generated
code runs (checked by building kernels that record it), padding is drawn hollow, figures and
files are real."""
from __future__ import annotations

import numpy as np
import pytest

import accpy as acc


def _recorder(shape):
    """A nest whose code writes, at each point, how many points ran before it (order-dependent:
    schedules of it need unsafe=True, which is the point)."""
    T = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=shape, name="T", element_type=acc.ScalarType.int32)
    Cnt = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(1,), name="Cnt", element_type=acc.ScalarType.int32)
    nest = acc.Nest(shape=shape)
    idx = nest.get_indices()
    idx = idx if isinstance(idx, (list, tuple)) else [idx]

    @nest.iteration_logic
    def _():
        T[tuple(idx)] = Cnt[0]
        Cnt[0] += 1

    return nest, idx, (T, Cnt)


def _run_order(schedule, args, shape, tmp_path):
    pkg = acc.Package()
    pkg.add(schedule, args=args, base_name="rec")
    fn = pkg.build("rec", output_dir=tmp_path).rec
    t = np.full(shape, -1, np.int32)
    cnt = np.zeros(1, np.int32)
    fn(t, cnt)
    return t


def _text_grid(schedule):
    from accpy.schedule.visualize import points

    out = {}
    for p in points(schedule, "logical"):
        if p.order is not None:
            out[p.coords] = p.order
    return out


def _split(s, idx):
    s.split(idx[0], 3)


def _split_pad(s, idx):
    s.pad(idx[0], 2)
    s.split(idx[0], 5)


def _tile_reorder(s, idx):
    x, y = idx
    xx, yy = s.tile({x: 3, y: 2})
    s.reorder(y, x, yy, xx, unsafe=True)


def _skew(s, idx):
    s.skew(idx[0], idx[1], unsafe=True)


@pytest.mark.parametrize("shape, transform", [((12,), _split), ((12,), _split_pad), ((6, 4), _tile_reorder),
                                               ((5, 3), _skew)])
def test_order_numbers_are_the_order_the_code_runs(tmp_path, shape, transform):
    nest, idx, args = _recorder(shape)
    s = nest.create_schedule()
    transform(s, idx)
    ran = _run_order(s, args, shape, tmp_path)
    drawn = _text_grid(s)
    assert len(drawn) == int(np.prod(shape))
    for coords, order in drawn.items():
        assert ran[coords] == order, (coords, ran[coords], order)


def test_fused_schedule_order(tmp_path):
    T = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="T", element_type=acc.ScalarType.int32)
    U = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="U", element_type=acc.ScalarType.int32)
    Cnt = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(1,), name="Cnt", element_type=acc.ScalarType.int32)
    n0, n1 = acc.Nest(shape=(4,)), acc.Nest(shape=(4,))
    i, j = n0.get_indices(), n1.get_indices()

    @n0.iteration_logic
    def _():
        T[i] = Cnt[0]
        Cnt[0] += 1

    @n1.iteration_logic
    def _():
        U[j] = Cnt[0]
        Cnt[0] += 1

    s = acc.fuse((n0.create_schedule(), n1.create_schedule()), unsafe=True)
    pkg = acc.Package()
    pkg.add(s, args=(T, U, Cnt), base_name="fz")
    fn = pkg.build("fz", output_dir=tmp_path).fz
    t, u, c = np.zeros(4, np.int32), np.zeros(4, np.int32), np.zeros(1, np.int32)
    fn(t, u, c)
    from accpy.schedule.visualize import points

    pts = [p for p in points(s) if p.order is not None]
    assert [(p.part, p.coords[0]) for p in sorted(pts, key=lambda p: p.order)] == \
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3)]
    assert list(t) == [0, 2, 4, 6] and list(u) == [1, 3, 5, 7]
    assert s.visualize(format="text") == "0a/1b 2a/3b 4a/5b 6a/7b"


def test_text_form_with_padding():
    nest, idx, _ = _recorder((12,))
    s = nest.create_schedule()
    s.pad(idx[0], 2)
    s.split(idx[0], 5)
    assert s.visualize(format="text").split() == ["."] * 2 + [str(k) for k in range(12)] + ["."]


@pytest.mark.slow
def test_figures_and_files(tmp_path):
    pytest.importorskip("matplotlib")
    nest, idx, (T, _) = _recorder((6, 4))
    s = nest.create_schedule()
    x, y = idx
    xx, yy = s.tile({x: 3, y: 2})
    s.reorder(x, y, xx, yy, unsafe=True)  # (the recorder is order-dependent)
    fig = s.visualize(tmp_path / "tile.png")
    ax = fig.axes[0]
    labels = sorted(int(t.get_text()) for t in ax.texts if t.get_text())
    assert labels == list(range(24))  # every point numbered once
    assert (tmp_path / "tile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    s.visualize(tmp_path / "tile.svg")
    assert b"<svg" in (tmp_path / "tile.svg").read_bytes()[:400]
    # padding drawn hollow: a pad of 2 in front of 12 points, split by 5 -> 3 hollow points
    one, (i,), _ = _recorder((12,))
    sp = one.create_schedule()
    sp.pad(i, 2)
    sp.split(i, 5)
    f2 = sp.visualize()
    hollow = [c for c in f2.axes[0].collections if len(c.get_facecolor()) == 0 or c.get_facecolor()[0][3] == 0]
    assert len(hollow) == 3
    # a plan: the cache's first active block outlined
    plan = s.create_plan()
    plan.cache(T, index=xx)
    pf = plan.visualize(tmp_path / "cache.png")
    outlined = [c for c in pf.axes[0].collections
                if len(c.get_edgecolor()) and tuple(c.get_edgecolor()[0][:3]) == (1.0, 0.0, 0.0)]
    assert len(outlined) == 6  # the 3 x 2 tile of the first (x, y) block


def test_bad_requests():
    nest, idx, _ = _recorder((12,))
    s = nest.create_schedule()
    with pytest.raises(ValueError, match="format: expected 'png', 'svg', 'pdf' or 'text'"):
        s.visualize(format="gif")
    with pytest.raises(ValueError, match="view: expected 'logical' or 'schedule'"):
        s.visualize(format="text", view="sideways")
    big, _, _ = _recorder((200, 200))
    with pytest.raises(ValueError, match="40000 points"):
        big.create_schedule().visualize(format="text")
