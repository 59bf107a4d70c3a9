"""Names that reach emitted C: user names are checked once (accpy/ir/names.py), text inside C
string literals is escaped, locals that clash with C's own names are renamed, and a function
alias or package name that the header could not declare is refused with a clear error."""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

import accpy as acc
from accpy.ir.names import c_string

INJECTION = 'x"); } system("echo INJECTED"); if (0) { ("'
FORMAT = "t%s%n"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ACCPY_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "names_cache"))


def _temp_kernel(temp_name: str, rename_after: str = None):
    """Y[0] += sum of T[i, j] = X[0] * 2 over (M, N); T is a runtime-sized TEMP (heap)."""
    M, N = acc.create_dimensions()
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(1,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(1,))
    T = acc.Array(role=acc.Role.TEMP, name=temp_name, shape=(M, N))
    if rename_after is not None:
        T.name = rename_after  # (bypasses the check at construction: emission must still be safe)
    nest = acc.Nest(shape=(M, N))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        T[i, j] = X[0] * 2.0
        Y[0] += T[i, j]

    return nest, (M, N, X, Y)


def _build(nest, args, out: Path, name: str, base_name: str = "f"):
    pkg = acc.Package()
    pkg.add(nest, args=args, base_name=base_name)
    return pkg.build(name, output_dir=out, python_module=False)


# -- checked where the user names something ----------------------------------------------

@pytest.mark.parametrize("bad", [INJECTION, FORMAT, "a b", "1x", "x-y", "é", "x\n"])
@pytest.mark.parametrize("role", [acc.Role.INPUT, acc.Role.INPUT_OUTPUT, acc.Role.OUTPUT, acc.Role.TEMP,
                                  acc.Role.CONST])
def test_arrays_of_every_role_refuse_names_that_are_not_c_identifiers(role, bad):
    with pytest.raises(ValueError, match=r"name: .* is not a valid C identifier"):
        acc.Array(role=role, name=bad, shape=(4,), data=np.zeros(4, np.float32) if role is acc.Role.CONST else None)


@pytest.mark.parametrize("bad", [INJECTION, FORMAT, "1x", "é"])
def test_scalars_and_dimensions_refuse_names_that_are_not_c_identifiers(bad):
    with pytest.raises(ValueError, match=r"name: .* is not a valid C identifier"):
        acc.Scalar(acc.ScalarType.float32, name=bad)
    with pytest.raises(ValueError, match=r"name: .* is not a valid C identifier"):
        acc.Dimension(name=bad)
    with pytest.raises(TypeError, match=r"name: expected a str"):
        acc.Dimension(name=3)


# -- escaped where text is pasted into a C string literal -------------------------------------

def test_c_string_round_trips_every_character(tmp_path):
    texts = [INJECTION, FORMAT, 'a\\"b', "tab\tnew\nline", "??=trigraph??/", "é ü 你", "\x01\x7f", "%d%%"]
    body = "\n".join(f'    fputs({c_string(t)}, stdout); putchar(30);' for t in texts)
    fmt = "\n".join(f'    printf({c_string(t, printf=True)}); putchar(30);' for t in texts)
    src = tmp_path / "s.c"
    src.write_text(f"#include <stdio.h>\nint main(void) {{\n{body}\n{fmt}\n    return 0;\n}}\n")
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-Wno-format-security", str(src), "-o",
                    str(tmp_path / "s")], check=True)
    out = subprocess.run([str(tmp_path / "s")], capture_output=True, check=True).stdout
    assert out.decode("utf-8").split("\x1e")[:-1] == texts + texts


def test_a_temporary_name_never_becomes_c_code(tmp_path, capfd):
    nest, args = _temp_kernel("T", rename_after=INJECTION)
    lib = _build(nest, args, tmp_path, "inj")
    y = np.zeros(1, np.float32)
    lib.f(3, 4, np.ones(1, np.float32), y)
    assert y[0] == 24
    assert "INJECTED" not in capfd.readouterr().out
    assert 'system("echo' not in (tmp_path / "inj.c").read_text()


def test_a_temporary_name_is_never_a_printf_format(tmp_path):
    nest, args = _temp_kernel("T", rename_after=FORMAT)
    lib = _build(nest, args, tmp_path, "fmt")
    # an allocation that must fail reports the name, verbatim
    with pytest.raises(acc.KernelError, match=r"the temporary t%s%n of shape \(4611686018427387920, 2\)"):
        lib.f(2 ** 62 + 16, 2, np.ones(1, np.float32), np.zeros(1, np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["memset", "exp", "free", "new", "int32_t", "accpy_alloc_array", "NAN", "args"])
def test_locals_named_like_c_library_names_are_renamed(tmp_path, name):
    nest, args = _temp_kernel(name)
    lib = _build(nest, args, tmp_path, "loc_" + name.lower())
    y = np.zeros(1, np.float32)
    lib.f(5, 3, np.full(1, 0.5, np.float32), y)
    assert y[0] == 15


# -- function aliases and package names: symbols of the header -----------------------------------

def _small():
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(4,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(4,))
    nest = acc.Nest(shape=(4,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i]

    return nest, (X, Y)


@pytest.mark.parametrize("bad, why", [
    ("malloc", "C library"), ("printf", "C library"), ("system", "C library"), ("free", "C library"),
    ("exp", "C library"), ("int64_t", "C library"), ("stderr", "C library"),
    ("int", "keyword"), ("while", "keyword"), ("class", "keyword"), ("main", "keyword"),
    ("accpy_set_error", "reserved"), ("ACCPY_INLINE", "reserved"), ("__x", "reserved"), ("_Bool", "keyword"),
    ("_Foo", "reserved"), ("name", "attribute"), ("python_module", "attribute"), ("variants", "attribute"),
    (INJECTION, "not a valid C identifier"), (FORMAT, "not a valid C identifier"),
])
def test_base_names_the_header_could_not_declare_are_refused(bad, why):
    nest, args = _small()
    with pytest.raises(ValueError, match=rf"^base_name: .*{why}"):
        acc.Package().add(nest, args=args, base_name=bad)


def test_base_names_clashing_with_the_package_symbols_are_refused_at_build(tmp_path):
    nest, args = _small()
    for base in ("p_last_error", "p_gemmini_reset"):
        pkg = acc.Package()
        pkg.add(nest, args=args, base_name=base)
        with pytest.raises(ValueError, match=rf"base_name: '{base}' is already the package's"):
            pkg.build("p", output_dir=tmp_path, python_module=False)
        assert not (tmp_path / "p.h").exists()
        # the same base name is fine in another package
        pkg.build("q", output_dir=tmp_path, python_module=False)
    # an alias that is another function's full name
    pkg = acc.Package()
    f = pkg.add(nest, args=args, base_name="g")
    pkg.add(nest, args=args, base_name=f.name)
    with pytest.raises(ValueError, match=rf"base_name: '{f.name}' is already the package's function"):
        pkg.build("r", output_dir=tmp_path, python_module=False)


@pytest.mark.parametrize("bad", ["accpy_x", "__x", "ACCPY_X", INJECTION, "a.b"])
def test_package_names_are_checked(tmp_path, bad):
    nest, args = _small()
    pkg = acc.Package()
    pkg.add(nest, args=args, base_name="f")
    with pytest.raises(ValueError, match=r"^name: "):
        pkg.build(bad, output_dir=tmp_path, python_module=False)


def test_accepted_names_give_a_header_that_compiles_beside_libc(tmp_path):
    nest, args = _small()
    pkg = acc.Package()
    for base in ("mm", "system_call", "p_last", "Foo", "_private"):
        pkg.add(nest, args=args, base_name=base)
    pkg.build("p", output_dir=tmp_path, python_module=False)
    src = tmp_path / "use.c"
    src.write_text('#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n'
                   '#include "p.h"\n#include "p.hat"\nint main(void) { float x[4] = {0}, y[4] = {0}; mm(x, y); '
                   'system_call(x, y); return p_last_error() != NULL; }\n')
    p = subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", "-pedantic", str(src), f"-L{tmp_path}", "-lp",
                        f"-Wl,-rpath,{tmp_path}", "-o", str(tmp_path / "use")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert subprocess.run([str(tmp_path / "use")]).returncode == 0


# -- what users see: the alias, and the variants of a grid ------------------------------------------

@pytest.mark.slow
def test_errors_name_the_alias_not_the_hashed_name(tmp_path):
    nest, args = _small()
    pkg = acc.Package()
    f = pkg.add(nest, args=args, base_name="add")
    lib = pkg.build("al", output_dir=tmp_path, python_module="sync")
    for fn in (lib.add, getattr(lib, f.name), lib.python_module().add):
        with pytest.raises(TypeError) as e:
            fn(np.zeros(4, np.float32))
        assert str(e.value).startswith("add(X, Y) missing argument 'Y'") and f.name not in str(e.value)
        ro = np.zeros(4, np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match=r"is written by add but the array is read-only"):
            fn(np.zeros(4, np.float32), ro)
    assert f.name in repr(lib.add)  # the kernel object itself still shows its full name


def test_the_alias_of_a_parameter_grid_lists_the_variants(tmp_path):
    P, = (acc.create_parameters(),)
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(12,))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(12,))
    nest = acc.Nest(shape=(12,))
    i, = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i] += X[i]

    s = nest.create_schedule()
    s.split(i, P)
    pkg = acc.Package()
    fns = pkg.add(s, args=(X, Y), base_name="vadd", parameters=[{P: 2}, {P: 4}, {P: 5}])
    pkg.add(nest, args=(X, Y), base_name="single")
    lib = pkg.build("grid", output_dir=tmp_path, python_module="sync")
    want = {f.name: {"P": n} for f, n in zip(fns, (2, 4, 5))}
    for mod in (lib, acc.load(tmp_path / "grid.hat"), lib.python_module()):
        assert {k: v for k, v in mod.variants.items() if k.startswith("vadd_")} == want
        with pytest.raises(TypeError) as e:
            mod.vadd(np.ones(12, np.float32), np.zeros(12, np.float32))
        msg = str(e.value)
        assert msg.startswith("vadd names 3 variants")
        for f, n in zip(fns, (2, 4, 5)):
            assert f"{f.name}: P={n}" in msg
        y = np.zeros(12, np.float32)
        getattr(mod, fns[1].name)(np.ones(12, np.float32), y)
        mod.single(np.ones(12, np.float32), y)
        assert (y == 2).all()
    header = (tmp_path / "grid.h").read_text()
    assert "static inline void vadd(" not in header and "vadd: 3 variants" in header
    assert "static inline void single(" in header


# -- names that are Python identifiers but not C ones ---------------------------------------------------

_UNICODE_SCRIPT = r'''
import sys, faulthandler, tempfile
faulthandler.dump_traceback_later(50, exit=True)  # (a hang prints where it is, then exits non-zero)
import numpy as np
import accpy as acc

Bébé = acc.Array(role=acc.Role.INPUT, shape=(6, 5))
你好 = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(6, 5))
nest = acc.Nest(shape=(6, 5))
ï, ĵ = nest.get_indices()

@nest.iteration_logic
def _():
    你好[ï, ĵ] += Bébé[ï, ĵ] * 2.0

s = nest.create_schedule()
ïï = s.split(ï, 4)
pkg = acc.Package()
pkg.add(s, args=(Bébé, 你好), base_name="f")
out = tempfile.mkdtemp()
lib = pkg.build("uni", output_dir=out, python_module=False)
a = np.arange(30, dtype=np.float32).reshape(6, 5)
b = np.ones((6, 5), np.float32)
lib.f(a, b)
assert (b == 1 + 2 * a).all(), b
print(open(out + "/uni.h").read())
'''


def test_unicode_names_of_indices_and_arrays_build_and_do_not_hang(tmp_path):
    """Regression: an index named `ï` made the C namer loop for ever (str.isalnum accepts 'ï', and no
    suffix made the name ASCII). Run in a child with a time limit, so a hang fails instead of hanging."""
    import os
    import sys

    script = tmp_path / "uni.py"
    script.write_text(_UNICODE_SCRIPT, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(acc.__file__).parent.parent), PYTHONIOENCODING="utf-8")
    try:
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90, env=env,
                           encoding="utf-8")
    except subprocess.TimeoutExpired as e:  # pragma: no cover - the regression itself
        pytest.fail(f"building a kernel with unicode names hung: {e.stderr}")
    assert p.returncode == 0, p.stderr
    # arrays named after unicode variables keep readable, deterministic C names
    assert "(const float* Bebe, float* u4f60u597d)" in p.stdout


@pytest.mark.parametrize("variable, c_name", [
    ("Bébé", "Bebe"), ("ï", "i"), ("你", "u4f60"), ("int", "int_"), ("exp", "exp_"), ("main", "main_"),
    ("restrict", "restrict_"), ("args", "args_"), ("__x", "x"), ("_X", "X"), ("_x", "_x"), ("x" * 300, "x" * 300),
    ("accpy_x", None), ("ACCPY_", None),
])
def test_names_inferred_from_variables_are_spelled_as_c_names(variable, c_name):
    from accpy.nest.naming import c_name_of_variable

    assert c_name_of_variable(variable) == c_name


def test_an_array_inferred_from_a_c_keyword_variable_is_an_argument_with_a_suffix(tmp_path):
    int = acc.Array(role=acc.Role.INPUT, shape=(4,))  # noqa: A001  (the point: a C keyword as a variable)
    exp = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,))
    nest = acc.Nest(shape=(4,))
    i = nest.get_indices()

    @nest.iteration_logic
    def _():
        exp[i] += int[i]

    assert (int.name, exp.name) == ("int_", "exp_")
    pkg = acc.Package()
    pkg.add(nest, args=(int, exp), base_name="f")
    lib = pkg.build("kw", output_dir=tmp_path, python_module=False)
    y = np.ones(4, np.float32)
    lib.f(np.arange(4, dtype=np.float32), y)
    assert (y == np.arange(4) + 1).all()
    assert "(const float* int_, float* exp_)" in (tmp_path / "kw.h").read_text()


def test_dimensions_inferred_from_unicode_variables(tmp_path):
    Mé, N = acc.create_dimensions()
    assert (Mé.name, N.name) == ("Me", "N")


def test_package_names_over_the_documented_length_are_refused(tmp_path):
    from accpy.package.package import MAX_PACKAGE_NAME_LENGTH

    nest, args = _small()
    pkg = acc.Package()
    pkg.add(nest, args=args, base_name="f")
    with pytest.raises(ValueError, match=rf"^name: a package name is at most {MAX_PACKAGE_NAME_LENGTH} characters "
                                         r"\(it names the package's files\), got 5000: 'xxxx"):
        pkg.build("x" * 5000, output_dir=tmp_path, python_module=False)
    assert list(tmp_path.iterdir()) == []
    lib = pkg.build("y" * MAX_PACKAGE_NAME_LENGTH, output_dir=tmp_path, python_module=False)
    y = np.zeros(4, np.float32)
    lib.f(np.ones(4, np.float32), y)
    assert (y == 1).all()


@pytest.mark.parametrize("pname", ["a b", 'x"y', "*/ int x; /*", "é", "%s%n", "a\\"])
def test_parameter_names_are_text_recorded_verbatim(tmp_path, pname):
    """A parameter's name never becomes C code: any text works, in the .hat, the header comment
    and the variants of the loaded package."""
    import tomllib

    P = acc.Parameter(pname)
    nest, args = _small()
    s = nest.create_schedule()
    s.split(nest.indices[0], P)
    pkg = acc.Package()
    fns = pkg.add(s, args=args, base_name="v", parameters=[{P: 2}, {P: 3}])
    lib = pkg.build("pp", output_dir=tmp_path, python_module=False)
    assert lib.variants == {fns[0].name: {pname: 2}, fns[1].name: {pname: 3}}
    hat = tomllib.loads((tmp_path / "pp.hat").read_text(encoding="utf-8"))
    assert hat["functions"][fns[1].name]["auxiliary"]["accpy"]["parameters"] == {pname: 3}
    y = np.zeros(4, np.float32)
    getattr(lib, fns[0].name)(np.ones(4, np.float32), y)
    assert (y == 1).all()


def test_two_parameters_of_one_name_are_refused_at_add():
    P, Q = acc.Parameter("P"), acc.Parameter("P")
    X = acc.Array(role=acc.Role.INPUT, name="X", shape=(12, 12))
    Y = acc.Array(role=acc.Role.INPUT_OUTPUT, name="Y", shape=(12, 12))
    nest = acc.Nest(shape=(12, 12))
    i, j = nest.get_indices()

    @nest.iteration_logic
    def _():
        Y[i, j] += X[i, j]

    s = nest.create_schedule()
    s.split(i, P)
    s.split(j, Q)
    with pytest.raises(ValueError, match=r"^parameters: two different parameters are named 'P'; the package records "
                                         r"values by name, so give them different names$"):
        acc.Package().add(s, args=(X, Y), base_name="v", parameters={P: 2, Q: 3})


def test_names_that_collide_once_spelled_in_ascii_get_suffixes(tmp_path):
    Bébé = acc.Array(role=acc.Role.INPUT, shape=(4,))
    Bebe = acc.Array(role=acc.Role.INPUT_OUTPUT, shape=(4,))
    Çà = acc.Array(role=acc.Role.INPUT, shape=(4,), name="Ca")  # explicit: kept; the inferred one yields
    Ca = acc.Array(role=acc.Role.INPUT, shape=(4,))
    nest = acc.Nest(shape=(4, 3))
    ï, i = nest.get_indices()  # both `i` in C

    @nest.iteration_logic
    def _():
        Bebe[ï] += Bébé[ï] * Çà[ï] + Ca[ï] * acc.cast(i, acc.ScalarType.float32)

    assert (Bébé.name, Bebe.name, Ca.name) == ("Bebe", "Bebe", "Ca")
    pkg = acc.Package()
    pkg.add(nest, args=(Bébé, Bebe, Ca, Çà), base_name="f")
    lib = pkg.build("col", output_dir=tmp_path, python_module=False)
    assert "(const float* Bebe, float* Bebe_1, const float* Ca_1, const float* Ca)" in (tmp_path / "col.h").read_text()
    x, y, z, w = (np.arange(4, dtype=np.float32) + k for k in range(4))
    want = y + 3 * x * w + z * 3  # (i = 0, 1, 2)
    lib.f(x, y, z, w)
    np.testing.assert_allclose(y, want)
