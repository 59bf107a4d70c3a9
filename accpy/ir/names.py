"""Names that reach emitted C: the one whitelist they are checked against, and C string literals.

A user's name (an array, scalar, dimension, function base name or package name) is pasted
into C identifiers, declarations and headers; it must be a plain C identifier that cannot
be taken for anything else there. Text that appears inside a C string literal goes
through `c_string` only, so no name can end the literal (or become a printf format).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Optional

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while bool true false main NULL _Bool _Complex _Imaginary _Alignas _Alignof _Atomic
_Generic _Noreturn _Static_assert _Thread_local""".split())
# the headers are also C++ (extern "C"): its keywords cannot name arguments or aliases either
CXX_KEYWORDS = frozenset("""alignas alignof and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl
concept consteval constexpr constinit const_cast co_await co_return co_yield decltype delete dynamic_cast explicit
export friend mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
reinterpret_cast requires static_assert static_cast template this thread_local throw try typeid typename using
virtual wchar_t xor xor_eq""".split())
# Names that emitted kernels use as functions, types or macros: a parameter of that name
# would shadow them inside the function (or be macro-expanded), and the C would not compile.
C_LIBRARY_NAMES = frozenset("""sqrt sqrtf exp expf log logf log2 log2f log10 log10f tanh tanhf sin sinf cos cosf tan
tanf sinh sinhf cosh coshf floor floorf ceil ceilf rint rintf fabs fabsf pow powf fmod fmodf copysign copysignf
memset memcpy NAN INFINITY errno linux unix int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
size_t ptrdiff_t intptr_t uintptr_t INT8_MIN INT16_MIN INT32_MIN INT64_MIN INT8_MAX INT16_MAX INT32_MAX INT64_MAX
UINT8_MAX UINT16_MAX UINT32_MAX UINT64_MAX INT64_C UINT64_C va_list""".split())
# Functions of the C library (and POSIX) a program that includes a package's header is
# likely to call: a function alias of that name would collide with their declarations.
LIBC_SYMBOLS = frozenset("""abort abs atexit atof atoi atol bsearch calloc div exit free getenv labs malloc qsort
rand realloc srand strtod strtol strtoul system aligned_alloc posix_memalign printf fprintf sprintf snprintf
vprintf vfprintf vsprintf vsnprintf scanf fscanf sscanf puts fputs fgets fopen fclose fread fwrite fflush fseek
ftell perror remove rename tmpfile putchar getchar stdin stdout stderr FILE EOF memmove memcmp memchr strcpy
strncpy strcat strncat strcmp strncmp strlen strchr strrchr strstr strdup strerror strtok assert signal raise
setjmp longjmp time clock exec execl execv execve execvp fork kill open close read write dlopen dlsym dlclose
pthread_create pthread_join omp_get_num_threads omp_get_thread_num""".split())

# Prefixes of accpy's own runtime symbols and macros (native/accpy_runtime.h, generated code).
RESERVED_PREFIXES = ("accpy_", "ACCPY_", "__")


def is_c_identifier(name) -> bool:
    """`name` is a str spelling a C identifier: `[A-Za-z_][A-Za-z0-9_]*`."""
    return isinstance(name, str) and _IDENTIFIER.match(name) is not None


def ascii_identifier(name) -> str:
    """A C identifier spelling `name` as closely as ASCII allows; the same `name` always gives the same result.

    Accented letters lose their accents (`ï` -> `i`, `Bébé` -> `Bebe`); other characters that
    are not ASCII become `u` and their code point in hex (`你` -> `u4f60`), other ASCII characters `_`;
    a leading digit gets a `_` before it; an empty result is `v`. Two names may give the same
    spelling (`ï` and `i`): callers that need distinct names add suffixes.
    """
    out = []
    for ch in unicodedata.normalize("NFKD", str(name)):
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif ch.isascii():
            out.append("_")
        elif not unicodedata.combining(ch):
            out.append(f"u{ord(ch):04x}")
    text = "".join(out) or "v"
    return "_" + text if text[0].isdigit() else text


def reserved_reason(name: str) -> Optional[str]:
    """Why the identifier `name` is taken in emitted C or its headers, or None."""
    if name in C_KEYWORDS or name in CXX_KEYWORDS:
        return "it is a C/C++ keyword or reserved name"
    if name.startswith(RESERVED_PREFIXES) or (name[0] == "_" and name[1:2].isupper()):
        return "identifiers starting with accpy_, ACCPY_, __ or _ and a capital letter are reserved"
    return None


def check_name(name, what: str) -> str:
    """`name` if it spells a C identifier (`[A-Za-z_][A-Za-z0-9_]*`), else a TypeError/ValueError.

    The check where a user names something (an array, scalar or dimension). Whether the
    name may also be a C parameter or a global symbol depends on its role:
    `argument_name_problem` and `check_symbol_name` say that where it is known; a local
    (a TEMP array, a cache, an index) that clashes with something is renamed in the C.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what}: expected a str, got {type(name).__name__} {name!r}")
    if not is_c_identifier(name):
        raise ValueError(f"{what}: {name!r} is not a valid C identifier (names become C identifiers: "
                         f"ASCII letters, digits and underscores, not starting with a digit)")
    return name


def argument_name_problem(name) -> Optional[str]:
    """Why `name` cannot name a C parameter of a generated function, or None."""
    if not is_c_identifier(name):
        return "it is not an ASCII identifier"
    if name in C_KEYWORDS or name in CXX_KEYWORDS or name == "args":
        return "it is a C/C++ keyword or reserved name"
    if name in C_LIBRARY_NAMES:
        return "generated C code uses it as a library function, type or macro"
    return reserved_reason(name)


def check_symbol_name(name, what: str, taken: Optional[dict] = None) -> str:
    """`name` if it can be a global C symbol of a package (a function alias, a package name).

    Refused with a ValueError naming `what`: non-identifiers, C/C++ keywords, accpy's
    reserved prefixes, names the C library and the runtime header use (the package's
    header or source would not compile, or a program including the header would call
    the wrong function), and `taken`: the package's own generated symbols, mapped to
    what each one is.
    """
    check_name(name, what)
    if name in C_KEYWORDS or name in CXX_KEYWORDS or name == "args":
        raise ValueError(f"{what}: {name!r} is a C/C++ keyword or reserved name; the header could not declare it")
    why = reserved_reason(name)
    if why:
        raise ValueError(f"{what}: {name!r} is reserved ({why})")
    if name in C_LIBRARY_NAMES or name in LIBC_SYMBOLS:
        raise ValueError(f"{what}: {name!r} is a name of the C library or of the headers a package includes; "
                         f"the package's header could not declare it")
    if taken and name in taken:
        raise ValueError(f"{what}: {name!r} is already the package's {taken[name]}; choose another name")
    return name


_C_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "?": "\\?"}


def c_string(text: str, printf: bool = False) -> str:
    """`text` as a C string literal (quotes included), every byte safe.

    Quotes, backslashes, `?` (trigraphs) and non-printable or non-ASCII bytes are escaped
    (as octal, so no following character can extend the escape). With `printf`, `%` is
    doubled: the literal is a printf format that prints `text` verbatim.
    """
    out = []
    for b in str(text).encode("utf-8", "surrogatepass"):
        ch = chr(b)
        if ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif ch == "%" and printf:
            out.append("%%")
        elif 32 <= b < 127:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def c_comment(text: str) -> str:
    """`text` inside a C block comment: nothing in it can close the comment early."""
    return "/* " + " ".join(str(text).split()).replace("*/", "* /") + " */"
