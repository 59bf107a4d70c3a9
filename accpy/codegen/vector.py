"""C for the vector IR (accpy/ir/vector.py): each vector operation is the C template of a register
shape of the function's target's vector ISA (`target.vector_isa.shape_of`), filled with its operands."""
from __future__ import annotations


class VectorEmitter:
    """The vector half of the C emitter (mixed into codegen/c.py's CEmitter)."""

    target = None  # the target the function is for (emit_function sets it), when known

    def _isa(self, dtype, lanes):
        s = self.target.vector_isa.shape_of(dtype, lanes) if self.target is not None else None
        if s is None:
            where = f" on target {self.target.name}" if self.target is not None else " (no target given)"
            raise KeyError(f"no vector instructions for {lanes} x {dtype.name}{where}")
        return s

    def _fill(self, isa, op, **kw) -> str:
        t = isa.template(op)
        if t is None:
            raise NotImplementedError(f"{isa.name} has no `{op}` for {isa.dtype.name}")
        return t.format(**kw)

    def _addr(self, buffer, indices) -> str:
        return f"&{self.buf(buffer)}[{self.offset(buffer, indices)}]"

    def e_VLoad(self, e) -> str:
        isa = self._isa(e.buffer.dtype, e.lanes)
        p = self._addr(e.buffer, e.indices)
        if e.part:
            return self._partial_groups(isa, e, p)
        # a gather's template takes the stride {s}; stride 0 repeats the 32 bits at {p}
        op = "load" if e.stride == 1 else "bcast" if e.stride == 0 else "gather"
        if e.count is None:
            return self._fill(isa, op, p=p, s=e.stride)
        return self._fill(isa, "m" + op, p=p, s=e.stride, m=self._fill(isa, "mask", n=self.expr(e.count)))

    def _partial_groups(self, isa, e, p) -> str:
        """A dot product's operand of which every group holds only its first `part` elements
        (the tail of a reduction that is not a multiple of the group): a load masked as the shape
        says (`group_mask` / `mload_groups`), or for a repeated group the `part` elements at the
        address (memcpy: nothing past them is read)."""
        if e.stride == 0:
            return self._fill(isa, "bcast_part", p=p, n=e.part * (e.buffer.dtype.bits // 8))
        count = None if e.count is None else self._fill(isa, "mask", n=self.expr(e.count))
        m = isa.group_mask(e.lanes, e.group, e.part, count)
        if m is not None:
            return self._fill(isa, "mload", p=p, m=m)
        n = "-1" if e.count is None else self.expr(e.count)
        return self._fill(isa, "mload_groups", p=p, g=e.group, k=e.part, n=n)

    def e_Broadcast(self, e) -> str:
        return self._fill(self._isa(e.dtype, e.lanes), "set1", a=self.expr(e.value))

    def e_VBinOp(self, e) -> str:
        dt = e.a.dtype if e.op.startswith("cmp_") else e.dtype
        return self._fill(self._isa(dt, e.lanes), e.op, a=self.expr(e.a), b=self.expr(e.b))

    def e_VFma(self, e) -> str:
        return self._fill(self._isa(e.dtype, e.lanes), e.op, a=self.expr(e.a), b=self.expr(e.b), c=self.expr(e.c))

    def e_VCall(self, e) -> str:
        return self._fill(self._isa(e.dtype, e.lanes), e.fn, a=self.expr(e.args[0]))

    def e_VCast(self, e) -> str:
        return self._fill(self._isa(e.dtype, e.lanes), "from_" + e.value.dtype.name, a=self.expr(e.value))

    def e_VSelect(self, e) -> str:
        return self._fill(self._isa(e.dtype, e.lanes), "select", m=self.expr(e.cond), a=self.expr(e.a),
                          b=self.expr(e.b))

    def e_VMask(self, e) -> str:
        return self._fill(self._isa(e.of, e.lanes), "mask", n=self.expr(e.count))

    def e_VVar(self, e) -> str:
        return self.names.get(e, e.name)

    def e_HReduce(self, e) -> str:
        v = e.value
        return self._fill(self._isa(v.dtype, v.lanes), e.op, a=self.expr(v))

    def s_VStore(self, s, depth):
        isa = self._isa(s.buffer.dtype, s.lanes)
        p = self._addr(s.buffer, s.indices)
        op = "store" if s.stride == 1 else "scatter"  # a scatter's template takes the stride {s}
        if s.count is None:
            self.emit(self._fill(isa, op, p=p, s=s.stride, a=self.expr(s.value)) + ";", depth)
        else:
            m = self._fill(isa, "mask", n=self.expr(s.count))
            self.emit(self._fill(isa, "m" + op, p=p, s=s.stride, m=m, a=self.expr(s.value)) + ";", depth)

    def s_VAssign(self, s, depth):
        self.emit(f"{self.expr(s.var)} = {self.expr(s.value)};", depth)

    def s_VDecl(self, s, depth):
        self.emit("{", depth)
        for v in s.vars:
            self.emit(f"{self._isa(v.dtype, v.lanes).ctype} {self.expr(v)};", depth + 1)
        self.stmt(s.body, depth + 1)
        self.emit("}", depth)

    # -- statements -------------------------------------------------------------------------
