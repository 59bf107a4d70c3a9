"""C templates that handle a vector's lanes one at a time, for x86 shapes whose ISA has no
instruction for the operation: masked loads and stores on SSE (no masks), scatters on AVX2 and
SSE, gathers on SSE, horizontal reductions. Placeholders as in accpy/targets/x86.py ({p} address,
{m} mask: all bits set in the active lanes, {s} stride in elements, {a} vector).

Each template is a GNU C statement expression; its locals are named accpy_*_, and an operand
holding another such expression declares its own in an inner scope. A lane that is not active is
never read or written in memory (a vector loop's tail may end at the end of an array)."""
from __future__ import annotations


class Lanes:
    """How to move one shape's register through memory, element by element: `ctype` elements,
    `lanes` of them in a `vtype` register; `load_tmp` / `store_tmp` move the register from / to
    the local array accpy_t_ (the latter from the local accpy_v_); `movemask` is C for the
    active-lane bits of {m}."""

    def __init__(self, ctype: str, lanes: int, vtype: str, load_tmp: str, store_tmp: str, movemask: str):
        self.ctype, self.lanes, self.vtype = ctype, lanes, vtype
        self.load_tmp, self.store_tmp, self.movemask = load_tmp, store_tmp, movemask

    def _bits(self) -> str:
        """The declaration of accpy_b_, the active-lane bits (64 of them: up to 64 byte lanes; a
        movemask of 32 lanes is an int whose sign bit is lane 31's, so it is read as unsigned)."""
        bits = f"(unsigned int)({self.movemask})" if self.lanes <= 32 else f"({self.movemask})"
        return f"unsigned long long accpy_b_ = (unsigned long long){bits}; "

    def _loop(self, body: str, masked: bool) -> str:
        test = "if ((accpy_b_ >> accpy_l_) & 1) " if masked else ""
        return f"for (int accpy_l_ = 0; accpy_l_ < {self.lanes}; ++accpy_l_) {test}{body} "

    def _read(self, index: str, masked: bool) -> str:
        t = self.ctype
        return ("__extension__({{ const " + t + "* accpy_q_ = (const " + t + "*)({p}); "
                + (self._bits() if masked else "")
                + f"{t} accpy_t_[{self.lanes}] = {{{{0}}}}; "
                + self._loop(f"accpy_t_[accpy_l_] = accpy_q_[{index}];", masked)
                + self.load_tmp + "; }})")

    def _write(self, index: str, masked: bool) -> str:
        t = self.ctype
        return ("__extension__({{ " + t + "* accpy_q_ = (" + t + "*)({p}); "
                + (self._bits() if masked else "")
                + f"{self.vtype} accpy_v_ = ({{a}}); {t} accpy_t_[{self.lanes}]; {self.store_tmp}; "
                + self._loop(f"accpy_q_[{index}] = accpy_t_[accpy_l_];", masked) + "}})")

    def masked(self) -> dict:
        """`mload` (inactive lanes 0) and `mstore` (inactive lanes left as they are)."""
        return {"mload": self._read("accpy_l_", True), "mstore": self._write("accpy_l_", True)}

    def strided_reads(self) -> dict:
        """`gather` / `mgather`: lane l reads the element l * {s} past {p}."""
        ix = "(long long)accpy_l_ * ({s})"
        return {"gather": self._read(ix, False), "mgather": self._read(ix, True)}

    def strided_writes(self) -> dict:
        """`scatter` / `mscatter`: lane l writes the element l * {s} past {p}, in lane order."""
        ix = "(long long)accpy_l_ * ({s})"
        return {"scatter": self._write(ix, False), "mscatter": self._write(ix, True)}

    def reductions(self, wrap: bool = False) -> dict:
        """`hadd`, `hmul`, `hmin`, `hmax` of {a}: lane 0 combined with each next lane in order (as
        native/accpy_runtime.h's AVX2 helpers); `wrap`: integer sums and products wrap around
        (int32 lanes or narrower)."""
        r, x = "accpy_r_", "accpy_x_"
        combine = {"hadd": f"{r} + {x}", "hmul": f"{r} * {x}",
                   "hmin": f"({r} < {x} ? {r} : {x})", "hmax": f"({r} > {x} ? {r} : {x})"}
        t = self.ctype
        if wrap:  # two's complement: the sum / product of the unsigned values, truncated (no int overflow)
            combine["hadd"] = f"({t})((uint32_t){r} + (uint32_t){x})"
            combine["hmul"] = f"({t})((uint32_t){r} * (uint32_t){x})"
        out = {}
        for op, c in combine.items():
            out[op] = ("__extension__({{ " + f"{self.vtype} accpy_v_ = ({{a}}); {t} accpy_t_[{self.lanes}]; "
                       f"{self.store_tmp}; {t} {r} = accpy_t_[0]; "
                       f"for (int accpy_l_ = 1; accpy_l_ < {self.lanes}; ++accpy_l_) "
                       "{{ " + f"{t} {x} = accpy_t_[accpy_l_]; {r} = {c}; " + "}} " + f"{r}; " + "}})")
        return out
