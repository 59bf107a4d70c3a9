"""Accera programs that must run on accpy by changing the import: operand orders, names,
constant data, constant scalars and the small API forms Accera's documentation uses."""
import operator

import numpy as np
import pytest

import accpy as acc
from accpy.nest.parameters import parameter_values
from accpy.nest.reference import evaluate

ST = acc.ScalarType


def _build(pkg, tmp_path, name, **kw):
    return pkg.build(name, output_dir=tmp_path, **kw)


# -- CONST data is given in logical (numpy) indexing, whatever the storage layout ------------------

@pytest.mark.parametrize("layout", ["LAST_MAJOR", "FIRST_MAJOR", (1, 4), (5, 1)], ids=str)
def test_const_data_is_logical_whatever_the_layout(tmp_path, layout):
    data = np.arange(6).reshape(2, 3).astype("f4")
    lay = getattr(acc.Array.Layout, layout) if isinstance(layout, str) else layout
    K = acc.Array(role=acc.Role.CONST, data=data, layout=lay)
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(2, 3))
    nest = acc.Nest((2, 3))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Out[i, j] = K[i, j]

    ref = np.zeros((2, 3), "f4")
    evaluate(nest, {Out: ref})
    np.testing.assert_array_equal(ref, data)
    pkg = acc.Package()
    pkg.add(nest, args=(Out,), base_name="k")
    for mode in (acc.Package.Mode.RELEASE, acc.Package.Mode.DEBUG):
        lib = _build(pkg, tmp_path / mode.name, "const_" + mode.name.lower(), mode=mode, python_module=False)
        got = np.zeros((2, 3), "f4")
        lib.k(got)
        np.testing.assert_array_equal(got, data)  # A[0, 1] is data[0, 1], not data[1, 0]


# -- a Scalar in logic: a constant with a value, else an argument ----------------------------------

def test_constant_scalar_is_a_literal(tmp_path):
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8,))
    nest = acc.Nest((8,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] = A[i] * acc.Scalar(0.2)

    pkg = acc.Package()
    pkg.add(nest, args=(A,), base_name="scale")
    lib = _build(pkg, tmp_path, "cscalar", python_module=False)
    a = np.arange(8, dtype="f4")
    want = a * np.float32(0.2)
    lib.scale(a)
    np.testing.assert_allclose(a, want, rtol=1e-6)
    n2 = acc.Nest((8,))
    k = n2.get_indices()

    @n2.iteration_logic
    def _():
        A[k] = A[k] * acc.Scalar(2) + acc.Scalar(value=1)  # untyped constants act as literals

    a = np.arange(8, dtype="f4")
    evaluate(n2, {A: a})
    np.testing.assert_array_equal(a, np.arange(8, dtype="f4") * 2 + 1)
    with pytest.raises(acc.LogicError, match="mixed types"):
        n3 = acc.Nest((8,))
        m = n3.get_indices()

        @n3.iteration_logic
        def _():
            A[m] = A[m] * acc.Scalar(ST.int32, value=2)  # a typed constant keeps its type
    s = acc.Scalar(value=3)
    assert s.value == 3 and s.element_type is ST.int64
    assert acc.Scalar(value=2.5).element_type is ST.float32
    assert acc.Scalar(ST.int8, value=3).element_type is ST.int8
    with pytest.raises(ValueError, match="not an integer"):
        acc.Scalar(ST.int32, value=2.5)
    with pytest.raises(ValueError, match="constant"):
        acc.Package().add(nest, args=(A, s), base_name="bad")


def test_scalar_without_value_not_passed_is_named_at_add():
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8,))
    alpha = acc.Scalar(ST.float32)
    nest = acc.Nest((8,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] = A[i] * alpha

    with pytest.raises(ValueError, match=r"alpha is used by the logic .* not among the arguments"):
        acc.Package().add(nest, args=(A,), base_name="f")
    acc.Package().add(nest, args=(A, alpha), base_name="f")  # passed: fine


# -- names accpy infers or generates never collide -------------------------------------------------

def test_generated_names_are_unique():
    names = [acc.Dimension().name for _ in range(3000)] + [acc.Scalar().name for _ in range(3000)]
    assert len(set(names)) == len(names)
    arrays = [acc.Array(role=acc.Role.INPUT, shape=(2,)) for _ in range(3000)]
    assert len({a.name for a in arrays}) == len(arrays)


def _helper_array(n):
    X = acc.Array(role=acc.Role.INPUT, shape=(n,))
    return X


def test_inferred_names_are_hints_made_unique_in_args(tmp_path):
    A, B = _helper_array(4), _helper_array(4)
    assert A.name == B.name == "X"
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,))
    nest = acc.Nest((4,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i] = A[i] - B[i]

    pkg = acc.Package()
    fn = pkg.add(nest, args=(A, B, C), base_name="sub")
    assert [i.name for i in fn.infos] == ["X", "X_1", "C"]
    lib = _build(pkg, tmp_path, "names")
    a, b, c = np.arange(4, dtype="f4"), np.ones(4, "f4"), np.zeros(4, "f4")
    lib.sub(a, b, c)
    np.testing.assert_array_equal(c, a - b)


def test_inferred_name_yields_to_an_explicit_one_and_dimensions_follow():
    N = acc.Dimension()
    M = acc.Dimension(name="N")  # explicitly named N: keeps its name
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N,))
    B = acc.Array(role=acc.Role.INPUT, shape=(M,))
    nest = acc.Nest((N,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        A[i] += 1.0

    fn = acc.Package().add(nest, args=(N, M, A, B), base_name="d")
    assert [i.name for i in fn.infos] == ["N_1", "N", "A", "B"]
    assert fn.infos[2].shape == ("N_1",) and fn.infos[3].shape == ("N",)


def test_explicit_duplicate_names_are_refused():
    A = acc.Array(role=acc.Role.INPUT, shape=(4,), name="X")
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,), name="X")
    nest = acc.Nest((4,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i] += A[i]

    with pytest.raises(ValueError, match="two arguments are named 'X'"):
        acc.Package().add(nest, args=(A, B), base_name="f")


# -- every operator, every operand kind, both orders ----------------------------------------------

_BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
           operator.pow, operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
           operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]
_UNARY = [operator.neg, abs]
_KINDS = ["parameter", "scalar", "index", "access"]


def test_operators_in_both_orders_for_every_operand_kind(tmp_path):
    N = 6
    P = acc.create_parameters()
    S = acc.Scalar(ST.int64, name="S")
    X = acc.Array(role=acc.Role.INPUT, shape=(N,), element_type=ST.int64, name="X")
    cases = [(op, a, b) for op in _BINARY for a in _KINDS for b in _KINDS] + \
            [(op, a, None) for op in _UNARY for a in _KINDS]
    Out = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(N, len(cases)), element_type=ST.int64, name="Out")
    nest = acc.Nest((N,))
    i = nest.get_indices()

    def operand(kind):
        return {"parameter": P, "scalar": S, "index": i, "access": X[i]}[kind]

    @nest.iteration_logic
    def _():
        for c, (op, a, b) in enumerate(cases):
            v = op(operand(a)) if b is None else op(operand(a), operand(b))
            if isinstance(v, acc.Parameter):  # parameter op parameter: a derived parameter,
                v = v.value  # computed by Python when the function is added (P / P is 1.0)
                v = int(v) if isinstance(v, float) else v
            Out[i, c] = acc.select(v, 1, 0) if op in _BINARY[12:] else v

    x = np.array([3, -2, 5, 1, 7, -4], "i8")
    s, p = 2, 3
    ref = np.zeros((N, len(cases)), "i8")
    with parameter_values({P: p}):
        evaluate(nest, {X: x, S: s, Out: ref})
    # spot checks of the oracle itself: the kinds stand for their values
    vals = {"parameter": np.full(N, p), "scalar": np.full(N, s), "index": np.arange(N), "access": x}
    for c, (op, a, b) in enumerate(cases):
        if op in (operator.add, operator.sub, operator.mul, operator.lt, operator.eq) or b is None:
            want = op(vals[a]) if b is None else op(vals[a], vals[b]).astype("i8")
            np.testing.assert_array_equal(ref[:, c], want, err_msg=f"{op.__name__}({a}, {b})")
    pkg = acc.Package()
    pkg.add(nest, args=(X, S, Out), base_name="ops", parameters={P: p})
    lib = _build(pkg, tmp_path, "ops", python_module=False)
    got = np.zeros_like(ref)
    lib.ops(x, s, got)
    for c, (op, a, b) in enumerate(cases):
        np.testing.assert_array_equal(got[:, c], ref[:, c], err_msg=f"{op.__name__}({a}, {b})")


def test_parameter_on_the_left_in_the_parameters_chapter_matmul(tmp_path):
    M, N, K = 8, 6, 5
    A = acc.Array(role=acc.Role.INPUT, shape=(M, K))
    B = acc.Array(role=acc.Role.INPUT, shape=(K, N))
    C = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N))
    P = acc.create_parameters()
    nest = acc.Nest((M, N, K))
    i, j, k = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] += P * A[i, k] * B[k, j]

    pkg = acc.Package()
    pkg.add(nest, args=(A, B, C), base_name="mm", parameters={P: 2.0})
    lib = _build(pkg, tmp_path, "pmm", python_module=False)
    rng = np.random.default_rng(1)
    a, b = rng.random((M, K), "f4"), rng.random((K, N), "f4")
    c = np.zeros((M, N), "f4")
    lib.mm(a, b, c)
    np.testing.assert_allclose(c, 2 * a @ b, rtol=1e-5)


def test_derived_parameters_and_conditions():
    P, Q = acc.create_parameters()
    with parameter_values({P: 7, Q: 2}):
        assert (P % Q).value == 1 and (P ** Q).value == 49 and (-P).value == -7 and abs(-P).value == 7
        assert (P << Q).value == 28 and (P / Q).value == 3.5 and (1 - P).value == -6
    assert P == P and P != Q and {P: 1}[P] == 1  # parameters stay usable as dict keys
    with pytest.raises(TypeError, match="no truth value"):
        bool(P < Q)


# -- small forms Accera programs use -----------------------------------------------------------

def test_dimension_name_first_and_role_keywords():
    M = acc.Dimension("M")
    assert M.name == "M" and M.role is acc.Role.INPUT
    N = acc.Dimension(role=acc.Role.INPUT, name="N")
    R = acc.Dimension(acc.Role.INPUT)
    assert N.name == "N" and R.name == "R"
    with pytest.raises(TypeError, match="name"):
        acc.Dimension(3)


def test_skew_zero_means_no_unrolling():
    nest = acc.Nest((8, 3))
    i, j = nest.get_indices()
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(11,))

    @nest.iteration_logic
    def _():
        A[i + j] += 1.0

    s = nest.create_schedule()
    s.skew(i, j, 0)
    assert s.space.attr("unroll_below") is None and s.get_shape() == [10, 3]
    t = nest.create_schedule()
    t.skew(i, j, 2)  # a positive threshold is kept
    assert t.space.attr("unroll_below") is not None
    with pytest.raises(ValueError, match="unroll_loops_smaller_than"):
        nest.create_schedule().skew(i, j, -1)


def test_float_to_int_store_converts_but_arithmetic_keeps_its_rules(tmp_path):
    A = acc.Array(role=acc.Role.INPUT, shape=(6,))
    B = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(6,), element_type=ST.int32)
    nest = acc.Nest((6,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        B[i] = acc.round(A[i])

    a = np.array([0.4, 1.5, 2.5, -1.6, 7.9, -0.2], "f4")
    ref = np.zeros(6, "i4")
    evaluate(nest, {A: a, B: ref})
    np.testing.assert_array_equal(ref, np.rint(a).astype("i4"))
    pkg = acc.Package()
    pkg.add(nest, args=(A, B), base_name="r")
    lib = _build(pkg, tmp_path, "round", python_module=False)
    got = np.zeros(6, "i4")
    lib.r(a, got)
    np.testing.assert_array_equal(got, ref)
    n2 = acc.Nest((6,))
    k = n2.get_indices()
    with pytest.raises(acc.LogicError, match="mixed types"):
        @n2.iteration_logic
        def _():
            B[k] = B[k] + A[k]  # arithmetic: int32 + float32 still needs a cast


def test_index_equality_is_identity_outside_logic():
    nest = acc.Nest((4, 4))
    i, j = nest.get_indices()
    assert (i == i) is True and (i == j) is False and (i != j) is True
    assert len({i, j, i}) == 2
    A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 4))

    @nest.iteration_logic
    def _():
        A[i, j] = acc.select(i == j, 1.0, 0.0)  # inside logic: a condition

    out = np.zeros((4, 4), "f4")
    evaluate(nest, {A: out})
    np.testing.assert_array_equal(out, np.eye(4, dtype="f4"))
    plan = nest.create_plan()
    c = plan.cache(A, index=j)
    assert c.index == j


def _two_schedules():
    out = []
    for _ in range(2):
        A = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4, 4))
        nest = acc.Nest((4, 4))
        i, j = nest.get_indices()

        @nest.iteration_logic
        def _():
            A[i, j] += 1.0

        out.append(nest.create_schedule())
    return out


@pytest.mark.parametrize("form", ["list", "tuple", "generator"])
def test_fuse_takes_any_iterable(form):
    s0, s1 = _two_schedules()
    arg = {"list": [s0, s1], "tuple": (s0, s1), "generator": (s for s in (s0, s1))}[form]
    fs = acc.fuse(arg)
    assert isinstance(fs, acc.FusedSchedule)


@pytest.mark.parametrize("form", ["list", "tuple", "single", "generator"])
def test_parallelize_takes_a_list_a_tuple_or_an_index(form):
    s = _two_schedules()[0]
    i = s.get_indices()[0]
    plan = s.create_plan()
    plan.parallelize(indices={"list": [i], "tuple": (i,), "single": i, "generator": (x for x in [i])}[form])
    assert plan.parallel[0] == (i,)


def test_shape_equals_lists_and_tuples():
    A = acc.Array(role=acc.Role.INPUT, shape=(2, 3))
    assert A.shape == [2, 3] and A.shape == (2, 3) and A.shape != [3, 2] and [2, 3] == A.shape
    M, N = acc.create_dimensions()
    B = acc.Array(role=acc.Role.INPUT, shape=(M, 3))
    assert B.shape == [M, 3] and B.shape != [N, 3] and (M == M) is True and M in [N, M]


def test_acc_inf_is_a_float_constant_in_logic(tmp_path):
    A = acc.Array(role=acc.Role.INPUT, shape=(4, 5))
    M = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,))
    n0 = acc.Nest((4,))
    i0 = n0.get_indices()

    @n0.iteration_logic
    def _():
        M[i0] = -acc.inf

    nest = acc.Nest((4, 5))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        M[i] = acc.max(M[i], A[i, j])

    a = np.random.default_rng(0).random((4, 5), dtype="f4") - 2
    m = np.zeros(4, "f4")
    evaluate([n0, nest], {A: a, M: m})
    np.testing.assert_array_equal(m, a.max(axis=1))
    pkg = acc.Package()
    pkg.add(n0, args=(M,), base_name="fill")
    lib = _build(pkg, tmp_path, "inf", python_module=False)
    m = np.zeros(4, "f4")
    lib.fill(m)
    assert np.all(m == -np.inf)
    with pytest.raises(ValueError, match=r"shape: only the last dimension can be acc.inf"):
        acc.Array(role=acc.Role.INPUT, shape=(acc.inf, 4))  # (an unbounded last size: tests/nest/test_arrays.py)


def test_unknown_index_names_the_index_and_the_schedule():
    (s0, s1) = _two_schedules()
    j1 = s1.get_indices()[1]
    with pytest.raises(ValueError, match=r"Unknown index! index: j is not an index of the schedule with "
                                         r"indices \(i, j\)"):
        s0.split(j1, 2)
    plan = s0.create_plan()
    with pytest.raises(ValueError, match=r"Unknown index! .*j is not an index of the schedule"):
        plan.parallelize(j1)


# -- targets: Accera's names, facts and units ------------------------------------------------

def test_accera_known_devices_by_name_and_by_model():
    T, M = acc.Target, acc.Target.Model
    skx = T("Intel 7900X")
    assert skx == T(M.INTEL_7900X) and str(M.INTEL_7900X) == "Intel 7900X"
    assert (skx.family, skx.num_cores, skx.num_threads, skx.frequency_GHz, skx.turbo_frequency_GHz) == \
        ("Skylake-X", 10, 20, 3.3, 4.5)
    assert skx.cache_sizes == (32, 1024, 1408) and skx.cache_lines == (64, 64, 64)  # KiB, bytes
    assert skx.cache_bytes == (32 << 10, 1 << 20, 1408 << 10)
    assert (skx.vector_bytes, skx.vector_registers) == (64, 32) and skx.has("avx512f") and skx.has("avx512bw")
    sky = T("Intel 6700")
    assert (sky.num_cores, sky.vector_bytes, sky.cache_sizes) == (4, 32, (32, 256, 8192))
    assert sky.has("avx2") and not sky.has("avx512f")
    icx = T("Intel 8351N")
    assert icx.num_cores == 36 and icx.has("avx512_vnni") and icx.cache_sizes == (48, 512, 55296)
    assert T(M.INTEL_7960X).num_cores == 16
    pi = T("Raspberry Pi 3B")
    assert pi.architecture is T.Architecture.ARM and pi.num_cores == 4 and pi.cache_sizes == (32, 512)
    assert pi == T(M.RASPBERRY_PI_3B) and pi.required_features() == []
    from accpy.targets.devices import KNOWN_CPUS

    assert len(KNOWN_CPUS) > 500 and all(T(row[0]).name == row[0] for row in KNOWN_CPUS)


def test_unknown_target_name_is_a_value_error_with_close_names():
    with pytest.raises(ValueError, match=r"no known device matches 'Intel 7901X'\. Close names: .*'Intel 7900X'"):
        acc.Target("Intel 7901X")
    with pytest.raises(RuntimeError):  # Accera raises RuntimeError: both catch it
        acc.Target("Intel 7901X")


def test_cache_sizes_are_kib_as_in_accera():
    t = acc.Target(cache_sizes=[32, 256, 8192], cache_lines=[64, 64, 64])
    assert t.cache_sizes == (32, 256, 8192) and t.cache_bytes == (32 << 10, 256 << 10, 8 << 20)
    assert acc.Target(cache_sizes=[32, 1024, 19.25 * 1024]).cache_bytes[2] == 19712 << 10
    with pytest.raises(ValueError, match="in KiB"):
        acc.Target(cache_sizes=[32768, 262144])


# -- documentation: every public callable says what it does ----------------------------------------

# Modules whose public callables must have docstrings. The other modules of accpy (package,
# plan, ir, lower, codegen, analysis, the rest of targets) are to be added here as they get theirs.
#: packages (walked with their submodules) and modules whose public callables need docstrings
_DOCUMENTED_PACKAGES = ("accpy.nest", "accpy.schedule", "accpy.plan", "accpy.package", "accpy.tune", "accpy.testing",
                        "accpy.targets")
_DOCUMENTED_MODULES = ("accpy.errors", "accpy.ir.types")
_DOCUMENTED = _DOCUMENTED_PACKAGES + _DOCUMENTED_MODULES


def _public_callables():
    import importlib
    import inspect
    import pkgutil

    mods = [importlib.import_module(m) for m in _DOCUMENTED]
    for p in _DOCUMENTED_PACKAGES:
        mods += [importlib.import_module(m.name)
                 for m in pkgutil.iter_modules(importlib.import_module(p).__path__, p + ".")]
    objs = [(f"acc.{n}", getattr(acc, n)) for n in dir(acc) if not n.startswith("_")]
    objs += [(f"{m.__name__}.{n}", o) for m in mods for n, o in vars(m).items() if not n.startswith("_")]
    seen, out = set(), []
    for where, obj in objs:
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or id(obj) in seen:
            continue
        if not getattr(obj, "__module__", "").startswith(_DOCUMENTED):
            continue
        seen.add(id(obj))
        out.append((where, obj))
        if inspect.isclass(obj):
            for k, v in vars(obj).items():
                if k.startswith("_"):
                    continue
                v = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                if isinstance(v, property):
                    out.append((f"{where}.{k}", v.fget))
                elif inspect.isfunction(v):
                    out.append((f"{where}.{k}", v))
    return out


def test_public_callables_have_docstrings():
    import inspect

    found = _public_callables()
    assert len(found) > 100  # the walk reaches the API
    # an overriding method without its own docstring inherits the documented base method's;
    # classes need their own
    missing = [where for where, obj in found
               if not ((obj.__doc__ if inspect.isclass(obj) else inspect.getdoc(obj)) or "").strip()]
    assert not missing, f"public callables without a docstring: {missing}"
