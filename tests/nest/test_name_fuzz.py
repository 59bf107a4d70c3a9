"""Property test: whatever names a user writes, building either works (values equal numpy's) or
is refused at the call that received the name, with a ValueError naming the argument; never a
hang, a crash, a compiler error or an OSError.

Each example writes a small script whose variables (arrays, a TEMP array, indices, a runtime
dimension, a parameter) are drawn from classes of awkward names (unicode letters, C keywords,
C library symbols, leading underscores, accpy's reserved prefixes, very long names, names that
collide once spelled in ASCII), names some arrays explicitly (`name=`), and adds two functions
(drawn base names) to a package (a drawn package name). An alarm bounds each example: a hang
fails the example instead of hanging the run.
"""
from __future__ import annotations

import keyword
import re
import signal
import textwrap
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import accpy as acc

UNICODE = ["ï", "ĵ", "Bébé", "Bebe", "你好", "Ωmega", "ß", "ﬁx", "Ärger", "çà", "µ", "ǅx", "i"]
C_KEYWORDS = ["int", "char", "auto", "restrict", "register", "main", "double", "float", "long", "short",
              "signed", "unsigned", "void", "volatile", "struct", "union", "typedef", "sizeof", "static",
              "switch", "case", "default", "do", "goto", "extern", "const", "enum", "inline", "bool", "true",
              "NULL", "_Bool", "new", "delete", "template", "this", "args", "int_", "main_"]
LIBC = ["exp", "malloc", "printf", "free", "memcpy", "memset", "sqrt", "size_t", "int32_t", "errno", "stdin",
        "FILE", "system", "abort", "exit", "time", "NAN", "INFINITY", "exp_"]
UNDERSCORES = ["_x", "__x", "_X", "___", "_1", "x_", "__init__", "x"]
RESERVED = ["accpy_x", "ACCPY_Y", "accpy_alloc_array", "accpy_set_error"]
LONG = ["a" * 300, "b" * 1000 + "é", "c" * 127]
NOT_IDENTIFIERS = ["a b", "x'y", 'q"', "1abc", "é", "x-y", "t%s", "x\n"]

_TEMPLATE_NAMES = {"acc", "np", "nest", "sched", "plan", "logic", "pkg", "other", "f2"}


def _variable(name: str) -> str:
    """The name Python gives a variable spelled `name` (identifiers are NFKC-normalized)."""
    return unicodedata.normalize("NFKC", name)


def _usable(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and _variable(name) not in _TEMPLATE_NAMES


IDENTIFIER_POOL = [n for n in UNICODE + C_KEYWORDS + LIBC + UNDERSCORES + RESERVED + LONG if _usable(n)]
letters = st.text(st.characters(categories=["Lu", "Ll", "Lo", "Lt"]), min_size=1, max_size=6).filter(_usable)
variable_names = st.one_of(st.sampled_from(IDENTIFIER_POOL), letters)
ascii_pool = [n for n in IDENTIFIER_POOL if n.isascii()]
_good_array_names = st.sampled_from(["_x", "x_", "malloc", "printf", "FILE", "i", "c" * 127])
explicit_names = st.one_of(st.none(), st.none(), st.none(), _good_array_names, _good_array_names,
                           st.sampled_from(ascii_pool + NOT_IDENTIFIERS))  # (a sixth of them doubtful)
GOOD_SYMBOLS = ["f", "mm", "g_1", "_x", "Foo", "x_", "exp_", "int_", "x" * 5000, "_1"]
symbol_names = st.one_of(st.sampled_from(GOOD_SYMBOLS), st.sampled_from(GOOD_SYMBOLS),
                         st.sampled_from(ascii_pool + NOT_IDENTIFIERS))
package_names = st.one_of(st.sampled_from(["p", "x_", "_p", "malloc", "printf", "c" * 128]),
                          st.sampled_from(ascii_pool + NOT_IDENTIFIERS + ["", "x" * 129, "x" * 5000]))

SCRIPT = """
{A} = acc.Array(role=acc.Role.INPUT, shape=(3, {M}){a_name})
{B} = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(3, {M}){b_name})
{T} = acc.Array(role=acc.Role.TEMP, shape=(3, {M}))
{P} = acc.create_parameters()
nest = acc.Nest(shape=(3, {M}))
{i}, {j} = nest.get_indices()

@nest.iteration_logic
def logic():
    {T}[{i}, {j}] = {A}[{i}, {j}] * 2.0
    {B}[{i}, {j}] += {T}[{i}, {j}]

sched = nest.create_schedule()
{jj} = sched.split({j}, {P})
plan = sched.create_plan()
"""


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("an example took over 60 s: a hang")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "name_fuzz_cache"))


def _refused(e: BaseException, *prefixes: str) -> bool:
    return type(e) is ValueError and str(e).startswith(prefixes)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                        HealthCheck.large_base_example,
                                                        HealthCheck.function_scoped_fixture])


@settings(max_examples=8, **_SETTINGS)
@given(data=st.data())
def test_any_names_build_or_are_refused_where_given(tmp_path_factory, data):
    _example(tmp_path_factory, data)


@pytest.mark.slow
@settings(max_examples=40, **_SETTINGS)
@given(data=st.data())
def test_any_names_build_or_are_refused_where_given_more_examples(tmp_path_factory, data):
    _example(tmp_path_factory, data)


def _example(tmp_path_factory, data):
    # eight distinct variables (distinct as Python sees them)
    names = list(data.draw(st.permutations(IDENTIFIER_POOL), label="variables")[:8])
    for k in range(8):  # some replaced by letters of any script
        other = data.draw(st.none() | letters, label=f"letters {k}")
        if other is not None and _variable(other) not in {_variable(n) for n in names}:
            names[k] = other
    A, B, T, P, M, i, j, jj = names
    a_name, b_name = data.draw(explicit_names, label="A name="), data.draw(explicit_names, label="B name=")
    base1, base2 = data.draw(symbol_names, label="base_name 1"), data.draw(symbol_names, label="base_name 2")
    package = data.draw(package_names, label="package name")
    split = data.draw(st.sampled_from([1, 2, 3]), label="split")
    out = tmp_path_factory.mktemp("fuzz")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)  # (an example takes about a second; a hang fails it instead of hanging the run)
    try:
        _build_and_check(A, B, T, P, M, i, j, jj, a_name, b_name, base1, base2, package, split, out)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _build_and_check(A, B, T, P, M, i, j, jj, a_name, b_name, base1, base2, package, split, out):
    ns = {"acc": acc, "np": np}
    head = f"{M} = acc.create_dimensions()\n"
    kw = {k: "" if v is None else f", name={v!r}" for k, v in (("a_name", a_name), ("b_name", b_name))}
    code = head + textwrap.dedent(SCRIPT).format(A=A, B=B, T=T, P=P, M=M, i=i, j=j, jj=jj, **kw)
    try:
        exec(compile(code, "<fuzzed script>", "exec"), ns)
    except ValueError as e:
        # only an explicit name that is not a C identifier is refused here, by the Array call
        assert _refused(e, "name: "), e
        event("refused: an array's name=")
        assert any(n is not None and not (n.isascii() and n.isidentifier()) and repr(n) in str(e)
                   for n in (a_name, b_name)), (e, a_name, b_name)
        return
    for n in (a_name, b_name):
        assert n is None or (n.isascii() and n.isidentifier()), f"{n!r} was accepted as an array name"
    dim, arr_a, arr_b, param = ns[_variable(M)], ns[_variable(A)], ns[_variable(B)], ns[_variable(P)]
    args = (dim, arr_a, arr_b)
    pkg = acc.Package()
    for base, value in ((base1, split), (base2, 2), ("fallback", split)):
        if base == "fallback" and pkg.functions:
            break
        try:
            pkg.add(ns["plan"], args=args, base_name=base, parameters={param: value})
        except ValueError as e:
            if str(e).startswith("args["):  # an explicit array name that cannot name a C parameter
                assert any(n and repr(n) in str(e) for n in (a_name, b_name)), e
                event("refused at Package.add: an array's name")
                return
            assert _refused(e, "base_name: ", "a function named"), e
            event(f"refused at Package.add: {str(e).split(':')[0]}")
    try:
        lib = pkg.build(package, output_dir=out, python_module=False, progress=False)
    except ValueError as e:
        assert _refused(e, "name: ", "base_name: "), e
        event(f"refused at build: {str(e).split(':')[0]}")
        if not str(e).startswith("name: "):
            return
        package = "p"
        lib = pkg.build(package, output_dir=out, python_module=False, progress=False)
    event("built and called")
    rng = np.random.default_rng(0)
    bases = [f.base_name for f in pkg.functions]
    for name in [f.name for f in pkg.functions] + [b for b in bases if b and bases.count(b) == 1]:
        a, b = rng.random((3, 5), dtype=np.float32), rng.random((3, 5), dtype=np.float32)
        want = b + a * np.float32(2)
        getattr(lib, name)(5, a, b)
        np.testing.assert_allclose(b, want, rtol=1e-6)
    header = (out / f"{package}.h").read_text(encoding="utf-8")
    assert re.sub(r"/\*.*?\*/", "", header, flags=re.S).isascii(), header  # (non-ASCII only in comments)
