"""Functions made of calls (accpy/package/calls.py): a Python function given to Package.add, and a
nest whose iteration logic calls package functions; compared with numpy and with the reference."""
import numpy as np
import pytest

import accpy as acc
from accpy import Array, Nest, Package, Role, ScalarType


def _copy_fn(package, src, dst, base):
    nest = Nest(dst.shape)
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        dst[i, j] = src[i, j] * 2.0

    return package.add(nest, args=(src, dst), base_name=base)

def _nest_of_tile_calls():
    """A package holding `twice_tile` (a 4 x 4 tile doubled) and an 8 x 12 nest whose logic calls it
    on the tile of A and of B at each point (i, j)."""
    package = Package()
    A = Array(role=Role.INPUT, shape=(8, 12))
    B = Array(role=Role.INPUT_OUTPUT, shape=(8, 12))
    src = Array(role=Role.INPUT, shape=(4, 4))
    dst = Array(role=Role.INPUT_OUTPUT, shape=(4, 4))
    double = _copy_fn(package, src, dst, "twice_tile")
    nest = Nest((8, 12))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        double(A.sub_array(offsets=(i, j), shape=(4, 4)), B.sub_array(offsets=(i, j), shape=(4, 4)))

    return package, nest, (A, B), (i, j)


def test_python_function_calls_with_temp_and_views(tmp_path):
    package = Package()
    X = Array(role=Role.INPUT, shape=(8, 8))
    Y = Array(role=Role.INPUT_OUTPUT, shape=(8, 8))
    src = Array(role=Role.INPUT, shape=(4, 4))
    dst = Array(role=Role.INPUT_OUTPUT, shape=(4, 4))
    double = _copy_fn(package, src, dst, "twice")

    def body(X, Y):
        T = Array(role=Role.TEMP, shape=(4, 4))
        double(X.sub_array(offsets=(2, 3), shape=(4, 4)), T)  # a window of another layout: through a copy
        double(T, Y.sub_array(offsets=(4, 0), shape=(4, 4)))
        Y[0, 0] = 7.0
        Y[1, 1] += X[0, 0]

    f = package.add(body, args=(X, Y), base_name="body")
    lib = package.build("calls_py", output_dir=tmp_path, python_module=False)
    x = np.random.rand(8, 8).astype(np.float32)
    y = np.random.rand(8, 8).astype(np.float32)
    want = y.copy()
    want[4:8, 0:4] = x[2:6, 3:7] * 4
    want[0, 0] = 7.0
    want[1, 1] += x[0, 0]
    ref = y.copy()
    f.reference({X: x, Y: ref})
    np.testing.assert_allclose(ref, want, rtol=1e-6)
    getattr(lib, f.name)(x, y)
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.slow
def test_nest_of_calls_over_tiles_with_erased_loops(tmp_path):
    package, nest, (A, B), (i, j) = _nest_of_tile_calls()

    sched = nest.create_schedule()
    ii, jj = sched.tile({i: 4, j: 4})
    plan = sched.create_plan()
    plan._erase_loops([ii, jj])
    f = package.add(plan, args=(A, B), base_name="tiles")
    lib = package.build("calls_tiles", output_dir=tmp_path, python_module=False)
    a = np.random.rand(8, 12).astype(np.float32)
    b = np.zeros((8, 12), np.float32)
    ref = b.copy()
    f.reference({A: a, B: ref})
    np.testing.assert_allclose(ref, 2 * a, rtol=1e-6)
    getattr(lib, f.name)(a, b)
    np.testing.assert_allclose(b, 2 * a, rtol=1e-6)


def test_window_leaving_its_array_is_refused():
    package, nest, (A, B), (i, j) = _nest_of_tile_calls()

    # without erasing the inner loops, the window at (i, j) = (7, 11) leaves A
    with pytest.raises(acc.LogicError, match="window of A given may leave it along dimension 0"):
        package.add(nest, args=(A, B), base_name="all_points")


def test_reordered_calls_are_refused():
    package = Package()
    A = Array(role=Role.INPUT_OUTPUT, shape=(4,))
    one = Array(role=Role.INPUT_OUTPUT, shape=(4,))
    n1 = Nest((4,))
    k = n1.get_indices()

    @n1.iteration_logic
    def _():
        one[k] += 1.0

    inc = package.add(n1, args=(one,), base_name="inc")
    nest = Nest((2, 3))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        inc(A)

    sched = nest.create_schedule()
    sched.reorder(j, i)
    with pytest.raises(acc.ScheduleError, match="reordering calls is not built"):
        package.add(sched, args=(A,), base_name="reordered")


def test_array_made_inside_must_be_temp(tmp_path):
    package = Package()
    A = Array(role=Role.INPUT_OUTPUT, shape=(4, 4))
    src = Array(role=Role.INPUT, shape=(4, 4))
    dst = Array(role=Role.INPUT_OUTPUT, shape=(4, 4))
    double = _copy_fn(package, src, dst, "twice")

    def wrong(A):
        T = Array(role=Role.INPUT_OUTPUT, shape=(4, 4))
        double(A, T)

    package.add(wrong, args=(A,))  # traced when the package is built (as Accera does)
    with pytest.raises(ValueError, match=r"wrong: the array T \(INPUT_OUTPUT\) is used but is not among the "
                                         r"arguments; an array made inside the function must be Role.TEMP"):
        package.build("calls_wrong", output_dir=tmp_path, python_module=False)


def test_call_checks_its_arguments():
    package = Package()
    src = Array(role=Role.INPUT, shape=(4, 4))
    dst = Array(role=Role.INPUT_OUTPUT, shape=(4, 4))
    double = _copy_fn(package, src, dst, "twice")
    X = Array(role=Role.INPUT, shape=(4, 4))
    I8 = Array(role=Role.INPUT_OUTPUT, shape=(4, 4), element_type=ScalarType.int8)
    with pytest.raises(TypeError, match=r"twice: a package function is called inside iteration logic"):
        double(X, X)

    def too_few(X):
        double(X)

    def wrong_type(X, I8):
        double(X, I8)

    def writes_input(X):
        double(X, X)

    package.add(too_few, args=(X,))
    with pytest.raises(TypeError, match=r"twice: takes 2 arguments \(src, dst\), got 1"):
        package.build("calls_bad", python_module=False)
    package._functions.pop()
    package.add(wrong_type, args=(X, I8))
    with pytest.raises(TypeError, match=r"argument 1 \(dst\): expected float32 elements, got I8 of int8"):
        package.build("calls_bad", python_module=False)
    package._functions.pop()
    package.add(writes_input, args=(X,))
    with pytest.raises(ValueError, match=r"twice writes it, but X is INPUT \(read-only\)"):
        package.build("calls_bad", python_module=False)


def test_logic_function_replaces_captured_variables():
    A = Array(role=Role.INPUT_OUTPUT, shape=(4,))
    B = Array(role=Role.INPUT_OUTPUT, shape=(4,))
    nest = Nest((4,))
    i = nest.get_indices()

    def fill():
        A[i] = 1.0

    logic = acc.logic_function(fill)
    assert acc.logic_function(logic) is logic
    assert logic.get_args() == {"A": A}
    assert logic.get_indices() == {"i": i}
    nest.iteration_logic(lambda: logic(A=B))  # the statement writes B
    assert nest.statements[0].assign.buffer is B.buffer
    assert A is logic.get_args()["A"]  # restored
    with pytest.raises(TypeError, match="C is not a variable the function captures"):
        logic(C=B)


def _tiled_matmul(package, erase=True):
    """Accera's nested nests: a packing function and a tile matmul called at each tile's position."""
    M, N, K, Mt, Nt, Kt = 8, 16, 6, 4, 8, 3
    A = Array(role=Role.INPUT, shape=(M, K))
    B = Array(role=Role.INPUT, shape=(K, N))
    C = Array(role=Role.INPUT_OUTPUT, shape=(M, N))
    B_temp = Array(role=Role.TEMP, shape=(Kt, Nt))
    io_B = Array(role=Role.INPUT_OUTPUT, shape=(Kt, Nt))
    i0, j0, k0 = acc.Dimension("i0"), acc.Dimension("j0"), acc.Dimension("k0")
    pack = Nest([Kt, Nt])
    pk, pj = pack.get_indices()

    @pack.iteration_logic
    def _():
        io_B[pk, pj] = B[pk + k0, pj + j0]

    pack_fn = package.add(pack, args=(B, io_B, j0, k0), base_name="pack_tile")
    mm = Nest([Mt, Nt, Kt])
    mi, mj, mk = mm.get_indices()

    @mm.iteration_logic
    def _():
        C[mi + i0, mj + j0] += A[mi + i0, mk + k0] * io_B[mk, mj]

    mm_plan = mm.create_plan()
    mm_plan.vectorize(mj)
    mm_fn = package.add(mm_plan, args=(A, C, io_B, i0, j0, k0), base_name="mm_tile")
    tiles = Nest([M, N, K])
    i, j, k = tiles.get_indices()

    @tiles.iteration_logic
    def _():
        pack_fn(B, B_temp, j, k)
        mm_fn(A, C, B_temp, i, j, k)

    sched = tiles.create_schedule()
    ii, jj, kk = sched.tile({i: Mt, j: Nt, k: Kt})
    plan = sched.create_plan()
    if erase:
        plan._erase_loops([ii, jj, kk])
    return (A, B, C), pack_fn, package.add(plan, args=(A, B, C), base_name="tiled")


@pytest.mark.slow
def test_nested_nests_matmul_with_index_arguments(tmp_path):
    package = Package()
    (A, B, C), pack_fn, full = _tiled_matmul(package)
    lib = package.build("calls_mm", output_dir=tmp_path, python_module=False)
    a, b = np.random.rand(8, 6).astype(np.float32), np.random.rand(6, 16).astype(np.float32)
    c = np.random.rand(8, 16).astype(np.float32)
    want = a @ b + c
    ref = c.copy()
    full.reference({A: a, B: b, C: ref})
    np.testing.assert_allclose(ref, want, rtol=1e-5)
    getattr(lib, full.name)(a, b, c)
    np.testing.assert_allclose(c, want, rtol=1e-5)
    # the packing function called directly: its entry checks its preconditions (0 <= j0 <= 8, 0 <= k0 <= 3)
    t = np.zeros((3, 8), np.float32)
    getattr(lib, pack_fn.name)(b, t, 8, 3)
    np.testing.assert_array_equal(t, b[3:6, 8:16])
    with pytest.raises(acc.KernelError, match=r"pack_tile: the arguments break a precondition: index 1 of B "
                                              r"\(`j0 \+ pj`\) < 16 at every iteration"):
        getattr(lib, pack_fn.name)(b, t, 9, 3)


def test_a_call_that_may_break_a_precondition_is_refused():
    # without erasing the loops inside a tile, k runs to 5 and the packing of B[k:k + 3, ..] leaves B
    with pytest.raises(acc.LogicError, match=r"call 1 \(`pack_fn\(B, B_temp, j, k\)`.*\): the arguments given to "
                                             r"pack_tile may break its precondition index 0 of B \(`k0 \+ pk`\) < 6"):
        _tiled_matmul(Package(), erase=False)
