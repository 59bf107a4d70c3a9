"""Bad iteration logic is rejected when it is defined (acc.LogicError, a ValueError), with a
message that names the statement (its number and source text) and what is wrong."""
import re
import warnings

import numpy as np
import pytest

import accpy as acc
from accpy.nest.reference import evaluate

ST = acc.ScalarType


@pytest.fixture
def arrays():
    return dict(
        A=acc.Array(role=acc.Role.INPUT, shape=(8, 8), element_type=ST.float32, name="A"),
        Bi=acc.Array(role=acc.Role.INPUT, shape=(8,), element_type=ST.int32, name="Bi"),
        C=acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 8), element_type=ST.float32, name="C"),
        O=acc.Array(role=acc.Role.OUTPUT, shape=(8, 8), element_type=ST.float32, name="O"),
        K=acc.Array(role=acc.Role.CONST, data=np.ones((8, 8), np.float32), name="K"),
        I8=acc.Array(role=acc.Role.INPUT, shape=(8, 8), element_type=ST.int8, name="I8"),
        U8=acc.Array(role=acc.Role.INPUT, shape=(8, 8), element_type=ST.uint8, name="U8"),
        I32=acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(8, 8), element_type=ST.int32, name="I32"),
        F64=acc.Array(role=acc.Role.INPUT, shape=(8, 8), element_type=ST.float64, name="F64"),
    )


def define(body, shape=(8, 8)):
    """A nest of `shape` whose logic is body(i, j): returns the nest (raises on bad logic)."""
    nest = acc.Nest(shape=shape)
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        body(i, j)

    return nest


def logic_error(body, *patterns, shape=(8, 8)):
    with pytest.raises(acc.LogicError) as info:
        define(body, shape)
    msg = str(info.value)
    for p in patterns:
        assert re.search(p, msg), f"{p!r} not in {msg!r}"
    return msg


def test_logic_error_is_a_value_error():
    assert issubclass(acc.LogicError, ValueError)


# -- indices ---------------------------------------------------------------------------------

def test_non_affine_product_of_indices(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i * j, j]

    msg = logic_error(body, r"statement 1", r"A\[i \* j, j\]", "not an affine", "index 0 of A")
    assert __file__ in msg or "test_logic.py" in msg


def test_indirect_index(arrays):
    A, C, Bi = arrays["A"], arrays["C"], arrays["Bi"]

    def body(i, j):
        C[i, j] = A[Bi[i], j]

    logic_error(body, r"statement 1", r"A\[Bi\[i\], j\]", "is read from an array \\(a gather\\): subscripts that depend on data are not built")


@pytest.mark.parametrize("which", ["square", "floordiv_by_index", "mod_by_zero"])
def test_other_non_affine_indices(arrays, which):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        ix = {"square": i * i, "floordiv_by_index": i // (j + 1), "mod_by_zero": i % 0}[which]
        C[i, j] = A[ix, j]

    logic_error(body, r"statement 1", "not an affine")


@pytest.mark.parametrize("which", ["floordiv", "mod"])
def test_quasi_affine_indices_are_accepted(arrays, which):
    """`//` and `%` by positive constants are quasi-affine (tests/test_quasi_affine.py builds them)."""
    A, C = arrays["A"], arrays["C"]
    n = acc.Nest(shape=tuple(C.shape))
    i, j = n.get_indices()

    @n.iteration_logic
    def _():
        C[i, j] = A[{"floordiv": i // 2, "mod": i % 8}[which], j]


def test_non_affine_store_index(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i * j, j] = A[i, j]  # (i // 2 is quasi-affine, accepted)

    logic_error(body, r"statement 1", "index 0 of C", "not an affine")


def test_float_index(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, 3.0]

    logic_error(body, r"statement 1", "integer")


def test_index_of_another_nest(arrays):
    A, C = arrays["A"], arrays["C"]
    other = acc.Nest(shape=(8, 8))
    oi, oj = other.get_indices()

    def body(i, j):
        C[i, j] = A[oi, j]

    logic_error(body, r"statement 1", "not an index of this nest")


@pytest.mark.parametrize("where", ["load", "store"])
def test_wrong_rank(arrays, where):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        if where == "load":
            C[i, j] = A[i]
        else:
            C[i] = A[i, j]

    name = "A" if where == "load" else "C"
    logic_error(body, r"statement 1", "wrong rank", f"{name} has rank 2", "1 index")


def test_wrong_rank_three_indices(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, j, 0]

    logic_error(body, r"statement 1", "wrong rank", "3 indices")


# -- roles -----------------------------------------------------------------------------------

def test_write_to_input(arrays):
    # refused when InputWriteWarning is an error (the strict check; by default Accera's programs build)
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        A[i, j] = C[i, j]

    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.InputWriteWarning)
        msg = logic_error(body, r"statement 1", r"A\[i, j\] = C\[i, j\]", "INPUT", "read-only", "INPUT_OUTPUT")
    assert A.role is acc.Role.INPUT


def test_compound_write_to_input(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        A[i, j] += C[i, j]

    with warnings.catch_warnings():
        warnings.simplefilter("error", acc.InputWriteWarning)
        with pytest.raises(acc.InputWriteWarning, match="statement 1"):
            define(body)


def test_write_to_const(arrays):
    K, C = arrays["K"], arrays["C"]

    def body(i, j):
        K[i, j] = C[i, j]

    logic_error(body, r"statement 1", "CONST", "read-only")


def test_read_of_output(arrays):
    O, C = arrays["O"], arrays["C"]

    def body(i, j):
        C[i, j] = O[i, j]

    logic_error(body, r"statement 1", "reads O", "OUTPUT")


def test_accumulate_into_output(arrays):
    O, A = arrays["O"], arrays["A"]

    def body(i, j):
        O[i, j] += A[i, j]

    logic_error(body, r"statement 1", "OUTPUT")


def test_write_only_output_is_fine(arrays):
    O, A = arrays["O"], arrays["A"]

    def body(i, j):
        O[i, j] = A[i, j] * 2.0

    nest = define(body)
    assert len(nest.statements) == 1


# -- bounds ----------------------------------------------------------------------------------

def test_out_of_bounds_names_a_concrete_iteration(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i + 1, j]

    msg = logic_error(body, r"statement 1", r"A\[i \+ 1, j\]", "out of bounds", r"i=7", "it is 8",
                      r"shape \(8, 8\)")
    m = re.search(r"iteration \(i=(\d+), j=(\d+)\)", msg)
    assert m and int(m.group(1)) == 7 and 0 <= int(m.group(2)) < 8


def test_negative_index_names_a_concrete_iteration(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, j - 1]

    msg = logic_error(body, r"statement 1", "index 1 of A", "out of bounds", "it is -1")
    m = re.search(r"iteration \(i=(\d+), j=(\d+)\)", msg)
    assert m and int(m.group(2)) == 0


def test_out_of_bounds_combination_of_indices(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[2 * i - j, j]

    msg = logic_error(body, "out of bounds")
    m = re.search(r"iteration \(i=(\d+), j=(\d+)\)", msg)
    iv, jv = int(m.group(1)), int(m.group(2))
    assert not 0 <= 2 * iv - jv < 8  # the iteration given really is out of bounds


def test_out_of_bounds_store(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j + 1] = A[i, j]

    logic_error(body, "index 1 of C", "out of bounds", r"j=7")


def test_out_of_bounds_nest_larger_than_the_array(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, j]

    logic_error(body, "out of bounds", r"i=8", shape=(9, 8))


def test_in_bounds_affine_accesses_are_accepted(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] += A[7 - j, i] + A[(i + j) - j, 0] * A[2 * i - i, 7]

    nest = define(body)
    assert len(nest.statements) == 1


def test_the_second_statement_is_named(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, j]
        C[i, j] += A[i + 1, j]

    logic_error(body, r"statement 2", r"C\[i, j\] \+= A\[i \+ 1, j\]", "out of bounds")


def test_numbering_continues_across_iteration_logic_calls(arrays):
    A, C = arrays["A"], arrays["C"]
    nest = acc.Nest(shape=(8, 8))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        C[i, j] = A[i, j]

    with pytest.raises(acc.LogicError, match=r"statement 2 .*out of bounds"):
        @nest.iteration_logic
        def _():
            C[i, j] = A[i, j + 8]

    # the failed logic left nothing behind; the good one is still there
    assert len(nest.statements) == 1

    @nest.iteration_logic
    def _():
        C[i, j] *= 2.0

    assert len(nest.statements) == 2


def counterexample(msg):
    """(i, j, M, N) from an out-of-bounds message with runtime sizes."""
    it = re.search(r"iteration \(i=(\d+), j=(\d+)\)", msg)
    sizes = msg.split(" when ")[-1]
    mv = re.search(r"\bM=(\d+)", sizes)
    nv = re.search(r"\bN=(\d+)", sizes)
    assert it and mv and nv, msg
    return int(it.group(1)), int(it.group(2)), int(mv.group(1)), int(nv.group(1))


def test_runtime_dimensions_out_of_bounds():
    M, N = acc.create_dimensions()
    X = acc.Array(role=acc.Role.INPUT, shape=(M, N), element_type=ST.float32, name="X")
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, N), element_type=ST.float32, name="Y")

    def shifted(i, j):
        Y[i, j] = X[i, j + 1]

    msg = logic_error(shifted, r"statement 1", "index 1 of X", "out of bounds", "when ", r"M=\d+", r"N=\d+",
                      shape=(M, N))
    iv, jv, mv, nv = counterexample(msg)
    assert 0 <= iv < mv and 0 <= jv < nv and jv + 1 >= nv

    def transposed(i, j):
        Y[i, j] = X[j, i]  # fine only when M == N

    msg = logic_error(transposed, "out of bounds", shape=(M, N))
    iv, jv, mv, nv = counterexample(msg)
    assert 0 <= iv < mv and 0 <= jv < nv and (jv >= mv or iv >= nv)

    def fine(i, j):
        Y[i, j] += X[i, j] * 2.0

    assert len(define(fine, shape=(M, N)).statements) == 1


def test_runtime_dimension_against_a_constant_extent():
    M = acc.Dimension(name="M")
    X = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(M, 4), element_type=ST.float32, name="X")

    def body(i, j):
        X[i, j] += 1.0

    logic_error(body, "out of bounds", shape=(M, 5))
    assert len(define(body, shape=(M, 4)).statements) == 1

    def body2(i, j):
        X[j, i] += 1.0  # j < 4 but M may be smaller

    logic_error(body2, "index 0 of X", "out of bounds", shape=(4, 4))


# -- types -----------------------------------------------------------------------------------

@pytest.mark.parametrize("pair", ["int32+float32", "int64+float64", "int8+uint8", "float64->float32",
                                  "int32->float32", "uint8->int8", "float32+=int32"])
def test_mixed_types_need_a_cast(arrays, pair):
    A, C, I8, U8, I32, F64 = (arrays[k] for k in ("A", "C", "I8", "U8", "I32", "F64"))
    I64 = acc.Array(role=acc.Role.INPUT, shape=(8, 8), element_type=ST.int64, name="I64")

    def body(i, j):
        if pair == "int32+float32":
            C[i, j] = I32[i, j] + A[i, j]
        elif pair == "int64+float64":
            C[i, j] = acc.cast(I64[i, j] * F64[i, j], ST.float32)
        elif pair == "int8+uint8":
            I32[i, j] = I8[i, j] + U8[i, j]
        elif pair == "float64->float32":
            C[i, j] = F64[i, j]
        elif pair == "int32->float32":
            C[i, j] = I32[i, j]
        elif pair == "uint8->int8":
            I32[i, j] = acc.cast(U8[i, j], ST.int8) + U8[i, j]
        else:  # a plain float -> int store converts (as in Accera); a compound one does not
            I32[i, j] += A[i, j]

    logic_error(body, r"statement 1", "mixed types", "cast")


def test_explicit_casts_resolve_mixed_types(arrays):
    A, C, I8, U8, I32, F64 = (arrays[k] for k in ("A", "C", "I8", "U8", "I32", "F64"))

    def body(i, j):
        C[i, j] = acc.cast(I32[i, j], ST.float32) + A[i, j]
        I32[i, j] = acc.cast(A[i, j], ST.int32) + acc.cast(U8[i, j], ST.int32)
        C[i, j] += acc.cast(F64[i, j], ST.float32)

    assert len(define(body).statements) == 3


def test_exact_widenings_are_implicit(arrays):
    # as in Accera (int16 -> float32 is implicit): only conversions that are exact
    A, C, I8, U8, I32 = (arrays[k] for k in ("A", "C", "I8", "U8", "I32"))

    def body(i, j):
        I32[i, j] = I8[i, j] + I32[i, j]  # int8 -> int32
        I32[i, j] += U8[i, j] * 2  # uint8 -> int32
        C[i, j] = I8[i, j] * A[i, j]  # int8 -> float32 is exact
        C[i, j] += U8[i, j]

    assert len(define(body).statements) == 4


@pytest.mark.parametrize("form", ["binary", "assign", "compound", "rsub"])
def test_float_constant_in_an_integer_expression(arrays, form):
    I32 = arrays["I32"]

    def body(i, j):
        if form == "binary":
            I32[i, j] = I32[i, j] + 1.5
        elif form == "assign":
            I32[i, j] = 2.0
        elif form == "compound":
            I32[i, j] += 0.5
        else:
            I32[i, j] = 3.25 - I32[i, j]

    logic_error(body, r"statement 1", "float constant", "int32")


def test_integer_constant_that_does_not_fit(arrays):
    I8, I32 = arrays["I8"], arrays["I32"]

    def body(i, j):
        I32[i, j] = I32[i, j] + 3000000000

    logic_error(body, r"statement 1", "3000000000", "does not fit in int32")

    def body8(i, j):
        I32[i, j] = I8[i, j] * 200  # the literal adopts int8

    logic_error(body8, "200", "int8")


def test_integer_constants_in_float_expressions_are_fine(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, j] * 2 + 1 - 0.5

    assert len(define(body).statements) == 1


def test_and_or_inside_a_condition_mean_logical_and_or(arrays):
    # Python's `and` / `or` (and a chained comparison, `0 < a < 1`) directly inside acc.select or
    # _If are the logical operations; anywhere else they are refused (test_bool_misuse)
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        a = A[i, j]
        C[i, j] = acc.select(a > 0.5 or a < -0.5, a, 0.0) + acc.select(0.0 < a < 0.25, 1.0, 0.0)

    nest = define(body)
    a = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    c = np.zeros((8, 8), np.float32)
    evaluate(nest, {A: a, C: c})
    want = np.where((a > 0.5) | (a < -0.5), a, 0) + ((0 < a) & (a < 0.25))
    np.testing.assert_array_equal(c, want.astype(np.float32))


@pytest.mark.parametrize("misuse", ["if", "and", "not", "select_float", "logical_and_float",
                                    "logical_not_int", "bitand_float", "invert_float", "invert_bool",
                                    "shift_float", "abs_bool", "mod_bool"])
def test_bool_misuse(arrays, misuse):
    A, C, I32 = arrays["A"], arrays["C"], arrays["I32"]

    def body(i, j):
        a = A[i, j]
        if misuse == "if":
            if a > 0:
                C[i, j] = a
        elif misuse == "and":
            C[i, j] = a > 0 and a < 1
        elif misuse == "or":
            C[i, j] = acc.select(a > 0 or a < -1, a, 0.0)
        elif misuse == "not":
            C[i, j] = acc.select(not (a > 0), a, 0.0)
        elif misuse == "chained":
            C[i, j] = acc.select(0 < a < 1, a, 0.0)
        elif misuse == "select_float":
            C[i, j] = acc.select(a, a, C[i, j])
        elif misuse == "logical_and_float":
            C[i, j] = acc.select(acc.logical_and(a, a > 0), a, 0.0)
        elif misuse == "logical_not_int":
            I32[i, j] = acc.select(acc.logical_not(I32[i, j]), 1, 0)
        elif misuse == "bitand_float":
            C[i, j] = a & a
        elif misuse == "invert_float":
            C[i, j] = ~a
        elif misuse == "invert_bool":
            I32[i, j] = acc.select(~(a > 0), 1, 0)
        elif misuse == "shift_float":
            C[i, j] = a << 1
        elif misuse == "abs_bool":
            I32[i, j] = acc.abs(a > 0)
        else:
            I32[i, j] = acc.select((a > 0) % (a > 1), 1, 0)

    expected = {"if": "truth value", "and": "truth value", "or": "truth value", "not": "truth value",
                "chained": "truth value", "select_float": "boolean condition",
                "logical_and_float": "boolean condition", "logical_not_int": "boolean condition",
                "bitand_float": "bitwise", "invert_float": "bitwise not", "invert_bool": "bitwise not",
                "shift_float": "bitwise", "abs_bool": "numeric operand", "mod_bool": "not defined for bool"}
    logic_error(body, r"statement 1", expected[misuse])


def test_float_functions_need_float_operands(arrays):
    I32 = arrays["I32"]
    for fn in (acc.sqrt, acc.exp, acc.log, acc.tanh, acc.floor, acc.ceil, acc.round):
        def body(i, j, fn=fn):
            I32[i, j] = acc.cast(fn(I32[i, j]), ST.int32)

        logic_error(body, r"statement 1", fn.__name__, "floating-point")


def test_bool_logic_done_right_is_accepted(arrays):
    A, C, I32 = arrays["A"], arrays["C"], arrays["I32"]

    def body(i, j):
        a = A[i, j]
        C[i, j] = acc.select(acc.logical_and(a > 0, acc.logical_not(a > 1)), a, 0.0)
        I32[i, j] += acc.select(acc.logical_or(a < -1, a == 0.5), I32[i, j], -I32[i, j])
        I32[i, j] += acc.cast(a > 0, ST.int32)

    assert len(define(body).statements) == 3


# -- other definition-time errors ----------------------------------------------------------------

def test_assignment_outside_iteration_logic(arrays):
    C = arrays["C"]
    with pytest.raises(acc.LogicError, match="outside iteration logic"):
        C[0, 0] = 1.0


def test_logic_without_statements():
    nest = acc.Nest(shape=(4,))
    with pytest.raises(acc.LogicError, match="assigns no array element"):
        @nest.iteration_logic
        def _():
            pass


def test_slices_are_rejected(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, 0:2]

    logic_error(body, r"statement 1", "slice")


def test_errors_point_at_the_users_line(arrays):
    A, C = arrays["A"], arrays["C"]

    def body(i, j):
        C[i, j] = A[i, j] + A[i + 9, j]  # the marked line

    msg = logic_error(body)
    assert "the marked line" in msg
    assert re.search(r"test_logic\.py:\d+", msg)
