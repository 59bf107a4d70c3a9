"""Package functions made of calls of other package functions.

Two sources give one mechanism: a Python function given to `Package.add` (its steps, in order:
calls, and element assignments), and a nest whose iteration logic calls functions (the same
steps inside the schedule's loops, erased loops fixed at 0). Either is lowered to a C function
that allocates the TEMP arrays it uses and calls the callees' implementations: an array argument
is a pointer into its root array (a view: at its first element), or, when the callee expects
another layout, a contiguous copy made before the call and written back after it. Every window
passed is proved inside its array over every iteration, and a callee's runtime sizes must match
the arrays given. The reference (`reference`) runs the same composition over numpy.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..analysis.polyhedra import conjunction, part_guard
from ..codegen.c import CEmitter, Names, emit_function, function_params
from ..errors import LogicError, ScheduleError
from ..ir.affine import Affine, to_affine
from ..ir.expr import BinOp, Buffer, Cast, Const, Load, Var, idx_op
from ..ir.kinds import BufferRole
from ..ir.names import c_string
from ..ir.printer import expr_str
from ..ir.stmt import Alloc, For, Function, If, Stmt, Store, block
from ..ir.types import ScalarType
from ..ir.visitor import free_vars, substitute
from ..nest.array import Array, Dimension, Role, Scalar
from ..nest.functions import ArrayBinding, capture_function, record_call, statement_nest
from ..nest.nest import Nest
from ..nest.parameters import parameter_values
from ..nest.reference import evaluate, evaluate_expr
from ..plan.erase import erased_vars
from ..plan.lowering import argument_objects
from ..plan.plan import Plan
from ..schedule.schedule import Schedule
from ..targets import Target
from .signature import describe_arguments, function_hash


@dataclass(frozen=True)
class Invoke(Stmt):
    """`callee(args...)`: an array argument is a Load of the element its pointer points at; the
    others are values."""

    callee: str
    args: tuple


def _emitter_class():
    class CallEmitter(CEmitter):
        """The C emitter, with calls of other functions of the package."""

        def s_Invoke(self, s: Invoke, depth):
            texts = [self._addr(a.buffer, a.indices) if isinstance(a, Load) else self.expr(a) for a in s.args]
            self.emit(f"{s.callee}({', '.join(texts)});", depth)

    return CallEmitter


def _written(role) -> bool:
    return role in (BufferRole.INPUT_OUTPUT, BufferRole.OUTPUT)


def _same(a, b) -> bool:
    x, y = to_affine(a), to_affine(b)
    return x is not None and y is not None and x == y


# -- proofs over the caller's iterations -----------------------------------------------------------

class _Domain:
    """The points a step runs at: loop variables in their ranges, the part's guard, runtime sizes >= 1."""

    def __init__(self, loops=(), guard=(), sizes=()):
        self.loops, self.guard, self.sizes = list(loops), list(guard), set(sizes)
        self._vars: dict = {}

    def prove(self, facts, goal) -> bool:
        """Does `goal` (a z3 formula over IR expressions, built by `term`) hold at every point where
        every fact holds?"""
        import z3

        s = z3.Solver()
        s.set("timeout", 5000)
        for v, hi in self.loops:
            s.add(self.term(v) >= 0, self.term(v) < self.term(hi))
        for c in self.guard:
            s.add(self.term(c.to_expr()) >= 0)
        for f in facts:
            s.add(f)
        s.add(z3.Not(goal))
        for v in list(self._vars):
            if v in self.sizes:
                s.add(self._vars[v] >= 1)
        return s.check() == z3.unsat

    def term(self, e):
        import z3

        a = to_affine(e)
        if a is not None:
            out = z3.IntVal(a.const)
            for v, c in a.terms:
                out = out + c * self._var(v)
            return out
        if isinstance(e, Cast):
            return self.term(e.value)
        if isinstance(e, BinOp) and e.dtype.is_int:
            x, y = self.term(e.a), self.term(e.b)
            ops = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
                   "min": lambda: z3.If(x < y, x, y), "max": lambda: z3.If(x > y, x, y),
                   "floordiv": lambda: x / y, "mod": lambda: x % y}
            if e.op in ops:
                return ops[e.op]()
        raise LogicError(f"the value `{e!r}` is not an integer expression accpy can reason about "
                         f"(sums, products, //, %, min and max of indices and sizes)")

    def _var(self, v):
        import z3

        if v not in self._vars:
            self._vars[v] = z3.Int(f"{v.name}_{v.uid}")
        return self._vars[v]


# -- the function ------------------------------------------------------------------------------------

class CallingFunction:
    """A package function whose body calls other functions of the package (see the module doc)."""

    def __init__(self, args, base_name: str, target, python_fn=None, plan=None, description: str = "",
                 auxiliary=None):
        self.args = tuple(args)
        self.requested_args = self.args
        self.base_name = base_name
        self.parameters: dict = {}
        self.description = description
        self.auxiliary = auxiliary or {}
        self.python_fn, self.plan = python_fn, plan
        self.target = plan.target if plan is not None else target
        self.infos = describe_arguments(self.args)
        self.arg_objs = argument_objects(self.args)
        what = getattr(python_fn, "__qualname__", "") if python_fn is not None else "nest"
        h = function_hash(f"{base_name}|calls|{what}", self.target.describe(), {}, self.infos)
        self.name = f"{base_name}_{h}" if base_name else f"_{h}"
        self._program = None
        if plan is not None:
            self._check_plan()
            self.lowered("check")  # a nest of calls is checked (windows, sizes, roles) when added

    @property
    def display(self) -> str:
        """The name users know the function by: its base name, else its Python function's name."""
        return self.base_name or getattr(self.python_fn, "__name__", "") or self.name

    def __call__(self, *args):
        record_call(self, self.args, args)

    # -- the steps -----------------------------------------------------------------------------
    def program(self):
        """(steps, TEMP arrays): steps are ("call", CallRecord) and ("store", statement, its nest)."""
        if self._program is None:
            self._program = self._trace()
        return self._program

    def _trace(self):
        if self.python_fn is not None:
            cap = capture_function(self.python_fn, self.args)
            steps, used = [], dict(cap.used)
            for st in cap.steps:
                if st[0] == "call":
                    steps.append(st)
                else:
                    _, where, obligations = st
                    steps.append(("store", where, statement_nest(where, obligations, list(used.values()))))
        else:
            steps = [("call", rec) for rec in self.plan.schedule.space.parts[0].nest.calls]
            used = {}
        for st in steps:
            if st[0] == "call":
                used.update({id(b.root): b.root for b in st[1].bindings if isinstance(b, ArrayBinding)})
        given = {id(a) for a in self.args}
        temps = []
        for a in used.values():
            if a.role is Role.TEMP:
                temps.append(a)
            elif a.role is not Role.CONST and id(a) not in given:
                raise ValueError(f"{self.display}: the array {a.name} ({a.role.name}) is used but is "
                                 f"not among the arguments; an array made inside the function must be "
                                 f"Role.TEMP (or pass it in args)")
        if not steps:
            raise ValueError(f"{self.display}: the function calls no package function and assigns "
                             f"no array element")
        return steps, temps

    def _check_plan(self):
        plan, space = self.plan, self.plan.schedule.space
        what = f"{self.display} (a nest of calls)"
        if len(space.parts) != 1:
            raise NotImplementedError(f"{what}: fusing a nest of calls with other nests is not built in accpy")
        if plan.loop_annotations() or plan.caches or plan.parallel is not None or plan.tensorize_requests():
            raise NotImplementedError(f"{what}: unroll, vectorize, parallelize, caches and tensorize are not "
                                      f"built for a nest whose logic calls functions (annotate the called plans)")
        self._check_order()

    def _check_order(self):
        """The calls must run in the nest's order: accpy does not analyze dependences between calls, so
        a schedule that would run two calls in another order than the nest's is refused."""
        space = self.plan.schedule.space
        part, erased = space.parts[0], erased_vars(self.plan)
        nest_vars = list(part.index_map)
        last = (-1, None)
        for d in space.dims:
            if d.var in erased:
                continue
            uses = [(k, dict(a.terms)[d.var]) for k, (x, a) in enumerate(part.index_map.items())
                    if d.var in dict(a.terms)]
            ok = len(uses) == 1 and uses[0][1] > 0
            if ok:
                k, c = uses[0]
                ok = k > last[0] or (k == last[0] and last[1] is not None and c < last[1])
            if not ok:
                raise ScheduleError(
                    f"{self.display}: the loop over {d.name} would run the calls of the logic "
                    f"in another order than the nest's ({', '.join(v.name for v in nest_vars)}); reordering calls "
                    f"is not built in accpy (it does not analyze dependences between calls)")
            last = uses[0]

    # -- lowering -------------------------------------------------------------------------------
    def _loops(self):
        """(loop variables and their ends, the guard, the map of nest indices) of a nest of calls."""
        if self.plan is None:
            return [], [], {}
        space = self.plan.schedule.space
        zero = {v: Affine.constant(0) for v in erased_vars(self.plan)}
        loops = [(d.var, d.extent) for d in space.dims if d.var not in zero]
        guard = [c.subs(zero) for c in part_guard(space, 0)]
        guard = [c for c in guard if not (c.is_const and c.const >= 0)]
        if any(c.is_const for c in guard):
            raise ScheduleError(f"{self.display}: the erased loops leave no point to run")
        imap = {x: a.subs(zero).to_expr() for x, a in space.parts[0].index_map.items()}
        return loops, guard, imap

    def _sizes(self) -> set:
        """The runtime sizes (>= 1): the dimensions in the arguments' shapes and the nest's extents."""
        out = {v for a in self.args if isinstance(a, Array) for s in a.shape_exprs() for v in free_vars(s)}
        if self.plan is not None:
            out.update(v for d in self.plan.schedule.space.dims for v in free_vars(d.extent))
        return out

    def lowered(self, name: str) -> Function:
        """The function as loop IR: loops (a nest of calls), TEMP allocations, calls and stores."""
        steps, temps = self.program()
        loops, guard, imap = self._loops()
        domain = _Domain(loops, guard, self._sizes())
        body = []
        for st in steps:
            if st[0] == "call":
                body.append(self._lower_call(st[1], imap, domain))
            else:
                body.append(st[1].store)
        stmt = block(*body)
        if guard:
            stmt = If(conjunction(guard), stmt)
        for v, hi in reversed(loops):
            stmt = For(v, Const(0), hi, stmt)
        for t in temps:
            stmt = Alloc(t.buffer, stmt, zero=True)
        return Function(name, self.arg_objs, stmt)

    def lowered_reference(self, name: str) -> Function:
        """DEBUG mode's oracle: the same composition (its callees are checked on their own)."""
        return self.lowered(name)

    def impl_source(self, name: str, linkage: str) -> str:
        """The C of the implementation, after declarations of the functions it calls."""
        decls = []
        for callee in self._callees():
            fn = callee.lowered(f"{callee.name}__impl")
            decls.append(f"static void {fn.name}({function_params(fn, Names())});")
        return "\n".join(dict.fromkeys(decls)) + "\n" + emit_function(self.lowered(name), linkage,
                                                                     emitter=_emitter_class())

    def _callees(self) -> list:
        return [st[1].callee for st in self.program()[0] if st[0] == "call"]

    def check_callees(self, functions) -> None:
        """Every function called is in the package being built (`functions`), for the same target."""
        names = {f.name for f in functions}
        for c in self._callees():
            if c.name not in names:
                raise ValueError(f"{self.display}: calls {c.base_name or c.name}, which is not a "
                                 f"function of this package; add it to the same package")
            if c.target != self.target:
                raise NotImplementedError(f"{self.display}: calls {c.base_name or c.name}, built for "
                                          f"target {c.target.name}, from a function built for {self.target.name}; "
                                          f"calls across targets are not built in accpy")

    def _lower_call(self, rec, imap: dict, domain: _Domain):
        callee = rec.callee
        fname = callee.base_name or callee.name
        params, objs = callee.args, callee.arg_objs
        bind = {}
        for p, b in zip(params, rec.bindings):
            if isinstance(p, (Dimension, Scalar)):
                bind[p.var] = substitute(b, imap)
        for p in preconditions_of(callee):
            need = substitute(p.constraint.to_expr(), bind)
            if not domain.prove([], domain.term(need) >= 0):
                raise LogicError(f"{rec.describe()}: the arguments given to {fname} may break its precondition "
                                 f"{p.why}; accpy proves a called function's preconditions for every call")
        args, pre, post, allocs = [], [], [], []
        roots = {}
        for k, (p, obj, b) in enumerate(zip(params, objs, rec.bindings)):
            if not isinstance(b, ArrayBinding):
                args.append(bind[p.var])
                continue
            where = f"{rec.describe()}: argument {k} of {fname} ({p.name})"
            root = b.root.buffer
            if _written(obj.role) and root.role in (BufferRole.INPUT, BufferRole.CONST):
                raise ValueError(f"{where}: {fname} writes it, but {b.root.name} is {b.root.role.name} (read-only)")
            prev = roots.get(root)
            if prev is not None and (_written(obj.role) or _written(prev)):
                raise NotImplementedError(f"{where}: {b.root.name} is passed twice and written through one of the "
                                          f"arguments; calls with aliased arguments are not built in accpy")
            roots[root] = obj.role
            offsets = tuple(substitute(o, imap) for o in b.offsets)
            shape = tuple(substitute(s, imap) for s in b.shape)
            want_shape = tuple(substitute(s, bind) for s in obj.shape)
            for d, (have, want) in enumerate(zip(shape, want_shape)):
                if not domain.prove([], domain.term(have) == domain.term(want)):
                    raise ValueError(f"{where}: dimension {d} of the array given has size `{_text(have)}`, but "
                                     f"{fname} expects `{_text(want)}` there")
            self._prove_window(where, b, root, offsets, shape, domain)
            strides = tuple(_sum(b.coeffs, root.strides, j) for j in range(len(shape)))
            want_strides = tuple(substitute(s, bind) for s in obj.strides)
            if all(_same(x, y) for x, y in zip(strides, want_strides)):
                args.append(Load(root, offsets))
                continue
            # another layout than the callee's: through a copy in its layout
            tmp = Buffer(f"{p.name}_arg{k}", obj.dtype, want_shape, want_strides, role=BufferRole.TEMP)
            ts = tuple(Var(f"c{d}", ScalarType.index) for d in range(len(shape)))
            src = tuple(_window_index(o, row, ts) for o, row in zip(offsets, b.coeffs))
            loops = lambda s: _nest_loops(ts, shape, s)  # noqa: E731
            if obj.role != BufferRole.OUTPUT:
                pre.append(loops(Store(tmp, ts, Load(root, src))))
            if _written(obj.role):
                post.append(loops(Store(root, src, Load(tmp, ts))))
            args.append(Load(tmp, tuple(Const(0) for _ in ts)))
            allocs.append(tmp)
        stmt = block(*pre, Invoke(f"{callee.name}__impl", tuple(args)), *post)
        for t in allocs:
            stmt = Alloc(t, stmt, zero=False)
        return stmt

    def _prove_window(self, where, b, root, offsets, shape, domain) -> None:
        """Every element of the window lies inside the root array at every point of the domain."""
        nonempty = [domain.term(s) >= 1 for s in shape]
        for d, (off, row) in enumerate(zip(offsets, b.coeffs)):
            lo = domain.term(off)
            hi = domain.term(off)
            for c, s in zip(row, shape):
                if c > 0:
                    hi = hi + c * (domain.term(s) - 1)
                elif c < 0:
                    lo = lo + c * (domain.term(s) - 1)
            size = domain.term(root.shape[d])
            if not domain.prove(nonempty, lo >= 0) or not domain.prove(nonempty, hi < size):
                raise LogicError(f"{where}: the window of {b.root.name} given may leave it along dimension {d} "
                                 f"(it starts at `{_text(off)}`; {b.root.name} has size `{_text(root.shape[d])}` "
                                 f"there); accpy proves every window passed lies inside its array")

    # -- the reference -------------------------------------------------------------------------------
    def reference(self, values: dict) -> None:
        """Run the function on `values` (Array / Dimension / Scalar objects of its arguments -> numpy arrays
        and numbers), updating the arrays in place, as the generated code does."""
        steps, temps = self.program()
        bufs = {a.buffer: np.asarray(values[a]) for a in self.args if isinstance(a, Array)}
        env = {a.var: values[a] for a in self.args if isinstance(a, (Dimension, Scalar))}
        for t in temps:
            shape = tuple(int(evaluate_expr(s, env)) for s in t.buffer.shape)
            bufs[t.buffer] = np.zeros(shape, t.element_type.dtype)
        loops, guard, imap = self._loops()
        for point in _points(loops, guard, env, evaluate_expr):
            env.update(point)
            for x, e in imap.items():
                env[x] = int(evaluate_expr(e, env))
            for st in steps:
                if st[0] == "store":
                    nest = st[2]
                    vals = {a: bufs[a.buffer] for a in nest.arrays_used if a.buffer in bufs}
                    vals.update({a: env[a.var] for a in self.args if isinstance(a, (Dimension, Scalar))})
                    evaluate(nest, vals)
                    continue
                rec = st[1]
                callee = rec.callee
                vals = {}
                for p, b in zip(callee.args, rec.bindings):
                    if isinstance(b, ArrayBinding):
                        vals[p] = _numpy_window(bufs[b.root.buffer], b, env, evaluate_expr)
                    else:
                        v = evaluate_expr(b, env)
                        vals[p] = int(v) if isinstance(p, Dimension) else v
                if isinstance(callee, CallingFunction):
                    callee.reference(vals)
                else:
                    nests = list(dict.fromkeys(part.nest for part in callee.plan.schedule.space.parts))
                    evaluate(nests, vals)


def _text(e) -> str:
    return expr_str(e)


def _sum(coeffs, strides, j):
    """The memory stride of view dimension j: sum over root dimensions of coefficient * stride."""
    out = Const(0)
    for row, st in zip(coeffs, strides):
        if row[j]:
            out = idx_op("add", out, idx_op("mul", Const(row[j]), st))
    return out


def _window_index(off, row, ts):
    out = off
    for c, t in zip(row, ts):
        if c:
            out = idx_op("add", out, idx_op("mul", Const(c), t))
    return out


def _nest_loops(ts, shape, body):
    for t, n in reversed(list(zip(ts, shape))):
        body = For(t, Const(0), n, body)
    return body


def _points(loops, guard, env, evaluate_expr):
    """The loop points in order (dicts var -> value), where the guard holds."""
    if not loops:
        yield {}
        return
    ranges = []
    for v, hi in loops:
        if free_vars(hi) & {u for u, _ in loops}:
            raise NotImplementedError("reference: a nest of calls whose loop ends depend on other loops")
        ranges.append(range(int(evaluate_expr(hi, env))))
    names = [v for v, _ in loops]
    for combo in itertools.product(*ranges):
        point = dict(zip(names, combo))
        scope = {**env, **point}
        if all(int(evaluate_expr(c.to_expr(), scope)) >= 0 for c in guard):
            yield point


def _numpy_window(arr, b: ArrayBinding, env, evaluate_expr):
    """The view `b` of numpy array `arr` (sharing its memory)."""
    offsets = [int(evaluate_expr(o, env)) for o in b.offsets]
    shape = [int(evaluate_expr(s, env)) for s in b.shape]
    start = arr[tuple(slice(o, None) for o in offsets)]
    strides = [sum(c * st for c, st in zip((row[j] for row in b.coeffs), arr.strides)) for j in range(len(shape))]
    return np.lib.stride_tricks.as_strided(start, shape, strides)


def calling_function(source, args, base_name: str, parameters, auxiliary):
    """The CallingFunction `Package.add(source, ...)` makes when `source` is a Python function or a
    plan (schedule, nest) whose logic calls functions; None for any other source."""
    import inspect

    if isinstance(source, (Nest, Schedule, Plan)):
        plan = source if isinstance(source, Plan) else source.create_plan() if isinstance(source, Schedule) \
            else source.create_schedule().create_plan()
        with parameter_values(parameters[0] if isinstance(parameters, list) and parameters else
                              parameters if isinstance(parameters, dict) else {}):
            nests = [p.nest for p in plan.realize().schedule.space.parts]
        calls = any(n.calls for n in nests)
        if getattr(plan, "_erased_loops", None) and not calls:
            raise NotImplementedError("_erase_loops: erasing loops changes what the nest computes; accpy builds it "
                                      "only in a nest whose logic calls package functions")
        if not calls:
            return None
        source, python_fn = plan, None
    elif inspect.isfunction(source) or inspect.ismethod(source):
        python_fn, source = source, None
    else:
        return None
    if parameters:
        raise NotImplementedError("parameters: a function made of calls takes no parameter values (give them to "
                                  "the functions it calls)")
    return CallingFunction(args, base_name, Target.HOST, python_fn=python_fn, plan=source, auxiliary=auxiliary)


def preconditions_of(fn) -> list:
    """The preconditions (analysis/preconditions.py) of a package function: its nests' (none for a
    function made of calls, whose calls are proved)."""
    plan = getattr(fn, "plan", None)
    if plan is None or isinstance(fn, CallingFunction):
        return []
    out = []
    for part in plan.schedule.space.parts:
        out += [p for p in part.nest.preconditions if p not in out]
    return out


def precondition_checks(fn, display: str) -> list:
    """C lines refusing a call whose index arguments break a precondition (the error names it)."""
    names = {i.obj: i.name for i in fn.infos}
    lines = []
    for p in preconditions_of(fn):
        terms = [f"{c}*(int64_t){names[v]}" for v, c in p.constraint.terms if v in names]
        if len(terms) != len(p.constraint.terms):
            continue  # (a variable that is not an argument: the argument checks of Package.add refuse it)
        text = " + ".join(terms + [f"(int64_t){p.constraint.const}"])
        msg = c_string("%s: the arguments break a precondition: " + p.why.replace("%", "%%"))
        lines += [f"    if (!({text} >= 0)) {{", f"        accpy_set_error({msg}, {c_string(display)});",
                  "        return;", "    }"]
    return lines
