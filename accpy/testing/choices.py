"""Where random choices come from, and the one drawer of schedule transforms built on them.

A `Chooser` makes the choices a generator needs (an integer in a range, one element, a
subset, a permutation, a coin). `HypothesisChooser` takes them from a hypothesis draw
(shrinkable, biased to boundary values); `RandomChooser` from a seeded `random.Random`
(fast: a batch of hundreds of distinct cases from one seed).

`draw_transform` chooses one schedule transform over a schedule's indices. It sees the
indices only as handles (live `acc.Index` objects, or names in a generator that replays its
cases as code) with their extents and split parents, and returns plain data; the caller
applies it. `accpy.testing.schedules` applies it to a live schedule; a batch generator can
record it as a replayable step.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from ._deps import hypothesis_strategies

# How often each transform is drawn (splits and reorders reshape the most).
TRANSFORM_WEIGHTS = {"split": 4, "tile": 2, "reorder": 4, "skew": 2, "pad": 1}


class Chooser:
    """The choices a generator makes."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (shrinks toward lo)."""
        raise NotImplementedError

    def choice(self, seq):
        """One element of `seq` (shrinks toward the first)."""
        raise NotImplementedError

    def subset(self, seq, min_size: int, max_size: int) -> list:
        """Distinct elements of `seq` (compared by identity), in a random order."""
        raise NotImplementedError

    def permutation(self, seq) -> list:
        """The elements of `seq` in a random order."""
        raise NotImplementedError

    def chance(self, p: float) -> bool:
        """True with probability about p (shrinks to False)."""
        return self.integer(0, 999) >= 1000 - int(round(p * 1000))


class HypothesisChooser(Chooser):
    """Choices from a hypothesis draw (`@st.composite`'s `draw`, or `data.draw`)."""

    def __init__(self, draw):
        self.draw, self.st = draw, hypothesis_strategies()

    def integer(self, lo, hi):
        """An integer in [lo, hi] (shrinks toward lo)."""
        return self.draw(self.st.integers(lo, hi))

    def choice(self, seq):
        """One element of `seq` (shrinks toward the first)."""
        return self.draw(self.st.sampled_from(list(seq)))

    def subset(self, seq, min_size, max_size):
        """Distinct elements of `seq` (compared by identity), in a random order."""
        return self.draw(self.st.lists(self.st.sampled_from(list(seq)), min_size=min_size, max_size=max_size,
                                       unique_by=id))

    def permutation(self, seq):
        """The elements of `seq` in a random order."""
        return list(self.draw(self.st.permutations(list(seq))))


class RandomChooser(Chooser):
    """Choices from a `random.Random`."""

    def __init__(self, rng):
        self.rng = rng

    def integer(self, lo, hi):
        """An integer in [lo, hi] (shrinks toward lo)."""
        return self.rng.randint(lo, hi)

    def choice(self, seq):
        """One element of `seq` (shrinks toward the first)."""
        return self.rng.choice(list(seq))

    def subset(self, seq, min_size, max_size):
        """Distinct elements of `seq` (compared by identity), in a random order."""
        seq = list(seq)
        return self.rng.sample(seq, self.rng.randint(min_size, min(max_size, len(seq))))

    def permutation(self, seq):
        """The elements of `seq` in a random order."""
        seq = list(seq)
        self.rng.shuffle(seq)
        return seq


def weighted_kinds(kinds: Sequence[str]) -> list:
    """`kinds` repeated by their TRANSFORM_WEIGHTS (a choice from it is a weighted draw)."""
    return [k for k in kinds for _ in range(TRANSFORM_WEIGHTS.get(k, 1))]


def split_size(ch: Chooser, extent: Optional[int], max_split: Optional[int] = None) -> int:
    """1..extent+3 (dividing, not dividing, the whole extent, past it; 1..16 for a runtime
    extent), at most `max_split`."""
    hi = (extent if extent is not None else 13) + 3
    return ch.integer(1, min(hi, max_split) if max_split else hi)


def repair_order(perm: Sequence, parent: Callable) -> list:
    """The order closest to `perm` in which every split parent precedes its inner index
    (repeatedly takes the earliest index whose parent is placed). `parent(ix)`: the index
    `ix` was split from, or None; handles compare by identity."""
    placed, out, todo = [], [], list(perm)
    while todo:
        for n, ix in enumerate(todo):
            p = parent(ix)
            if p is None or any(p is q for q in placed):
                out.append(ix)
                placed.append(ix)
                del todo[n]
                break
        else:  # pragma: no cover - parents always form a forest
            raise AssertionError(f"cyclic split parents in {perm}")
    return out


def draw_transform(ch: Chooser, kind: str, indices: Sequence, extent: Callable, parent: Callable,
                   max_split: Optional[int] = None) -> Optional[tuple]:
    """One transform of `kind` over a schedule whose loop order is `indices`, as plain data:

        ("split", ix, size)             ("tile", ((ix, size), ...))
        ("reorder", (ix, ...))          ("skew", ix, reference, unroll_loops_smaller_than or None)
        ("pad", ix, size)

    `extent(ix)`: the index's extent (None when it is a runtime size); `parent(ix)`: the
    index it was split from, or None. None when the kind does not apply (a skew of one loop).
    Sizes go past the extents and pads include 0: the edge cases are where lowering breaks.
    """
    indices = list(indices)
    if not indices:
        return None
    if kind == "split":
        ix = ch.choice(indices)
        return ("split", ix, split_size(ch, extent(ix), max_split))
    if kind == "tile":
        chosen = ch.subset(indices, 1, min(3, len(indices)))
        return ("tile", tuple((ix, split_size(ch, extent(ix), max_split)) for ix in chosen))
    if kind == "reorder":
        return ("reorder", tuple(repair_order(ch.permutation(indices), parent)))
    if kind == "skew":
        if len(indices) < 2:
            return None
        a, b = ch.subset(indices, 2, 2)
        return ("skew", a, b, ch.integer(1, 8) if ch.chance(0.4) else None)
    if kind == "pad":
        return ("pad", ch.choice(indices), ch.integer(0, 3))
    raise ValueError(f"kind: expected one of {sorted(TRANSFORM_WEIGHTS)}, got {kind!r}")
