"""Loop-invariant fills: a local buffer filled with the same values in every iteration of a loop
is filled once, before the loop.

Tensorize copies partial blocks into local scratch buffers (e.g. the tile unit's last A tile of
a k loop that is not a whole tile: its rows copied into a zeroed 16 x 64-byte block, then loaded
from there). Where that block does not depend on the loops around the copy, say the last A tile
of a row of tiles, met again for every column block, the copy is repeated for nothing.

The rule, exact: an `Alloc(s, [fill..., rest...])` directly in a loop's body (through blocks) is
moved around the loop, its fill before the loop, when
  - the fill only stores into `s` (loops, guards and stores; no calls), and the rest never writes
    `s` (no store, no call that may write through a pointer to it);
  - the fill does not read the loop's variable, nor any buffer the loop writes (stores, or calls
    that may write through a pointer: an intrinsic's `read_only` parameters are reads);
  - the loop has constant bounds and runs at least once (the fill then reads nothing the loop
    would not have read), and is neither parallel nor vectorized (its kind in the request).
Every iteration then reads the same values of `s` as before, and `s` starts zeroed (or not)
just as it did. Applied bottom-up, a fill moves out of as many loops as it can.

Guarantees afterwards: every load of such a buffer reads the values it read before.
"""
from __future__ import annotations

from ..ir.expr import Call, Load, as_int
from ..ir.kinds import LoopKind
from ..ir.stmt import Alloc, Block, For, Store, block
from ..ir.visitor import Mutator, free_vars, walk
from ..ir.vector import VStore
from ..targets.library import intrinsic


def written_buffers(stmt) -> set:
    """Buffers `stmt` may write: stored into, or passed by pointer to a call that may write
    through it (an unknown function: every buffer it is given)."""
    out = set()
    for n in walk(stmt):
        if isinstance(n, (Store, VStore)):
            out.add(n.buffer)
        elif isinstance(n, Call):
            intr = intrinsic(n.fn)
            params = intr.params if intr is not None else ()
            for k, a in enumerate(n.args):
                p = params[k] if k < len(params) else None
                if isinstance(a, Load) and (intr is None or (p in intr.pointer_params and p not in intr.read_only)):
                    out.add(a.buffer)
    return out


def _read_buffers(stmt) -> set:
    return {n.buffer for n in walk(stmt) if isinstance(n, Load)}


def _split_fill(a: Alloc):
    """(fill statements, rest) of an Alloc's body: the leading statements that only store into
    its buffer; None when there is no such fill or the rest may write the buffer."""
    stmts = a.body.stmts if isinstance(a.body, Block) else (a.body,)
    n = 0
    for s in stmts:
        if any(isinstance(x, (Call, Alloc)) for x in walk(s)) or written_buffers(s) != {a.buffer}:
            break
        n += 1
    fill, rest = stmts[:n], stmts[n:]
    if not fill or not rest or a.buffer in written_buffers(block(*rest)):
        return None
    return fill, rest


class _Hoist(Mutator):
    def __init__(self, kinds: dict):
        self.kinds = kinds

    def visit_For(self, f: For):
        f = self.generic_visit(f)
        lo, hi = as_int(f.lo), as_int(f.hi)
        if (lo is None or hi is None or hi <= lo or f.kind != LoopKind.SERIAL
                or self.kinds.get(f.var, LoopKind.SERIAL) not in (LoopKind.SERIAL, LoopKind.UNROLLED)):
            return f
        written = written_buffers(f.body)
        hoisted = []

        def strip(s):
            if isinstance(s, Block):
                return block(*[strip(x) for x in s.stmts])
            if isinstance(s, Alloc):
                parts = _split_fill(s)
                if parts is not None:
                    fill = block(*parts[0])
                    if f.var not in free_vars(fill) and not (_read_buffers(fill) - {s.buffer}) & written:
                        hoisted.append((s, fill))
                        return strip(block(*parts[1]))
            return s

        body = strip(f.body)
        if not hoisted:
            return f
        out = For(f.var, f.lo, f.hi, body, f.kind, f.attrs)
        for a, fill in reversed(hoisted):
            out = Alloc(a.buffer, block(fill, out), zero=a.zero)
        return out


def hoist_invariant_fills(stmt, kinds: dict):
    """`stmt` with loop-invariant fills of local buffers moved out of their loops (see above)."""
    return _Hoist(kinds).visit(stmt)
