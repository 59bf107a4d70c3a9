"""The nest kinds a case draws from: templates of public-API source and their size ranges."""
from __future__ import annotations

from dataclasses import dataclass


# -----------------------------------------------------------------------------------------
# nests
# -----------------------------------------------------------------------------------------

LAYOUTS = ("FIRST_MAJOR", "LAST_MAJOR")


@dataclass(frozen=True)
class NestKind:
    name: str
    template: str  # Python source; placeholders {T} (element type), {L0}, {L1}, ... (layouts), sizes
    size_names: tuple  # placeholders of the template filled by the sizes
    sizes: tuple  # (lo, hi) inclusive range of each size
    n_arrays: int
    dtypes: tuple = ("int32", "float32")
    runtime_sizes: bool = False  # extents are acc.Dimensions (the template defines `values`)
    ordered: bool = False  # not order-invariant: transforms may be refused (tests/support/legality.py)
    default: bool = True  # drawn when no kinds are named (kinds_with, order_invariant_kinds)


NEST_KINDS: dict = {}


def nest_kind(name, template, size_names, sizes, n_arrays, dtypes=("int32", "float32"),
              runtime_sizes=False, ordered=False, default=True) -> NestKind:
    kind = NestKind(name, template.strip("\n"), tuple(size_names), sizes, n_arrays, tuple(dtypes), runtime_sizes,
                    ordered, default)
    NEST_KINDS[name] = kind
    return kind


def kinds_with(runtime_sizes: bool) -> list:
    return sorted(k for k, v in NEST_KINDS.items()
                  if v.runtime_sizes == runtime_sizes and not v.ordered and v.default)


def order_invariant_kinds() -> list:
    """The kinds drawn by default: every schedule of them is legal."""
    return sorted(k for k, v in NEST_KINDS.items() if not v.ordered and v.default)


def narrow_kinds() -> list:
    """The kinds of narrow element types (int8, uint8, int16, bfloat16) with wider accumulators:
    not drawn by default; the fuzz driver draws them through accpy.testing's strategies."""
    return sorted(k for k, v in NEST_KINDS.items() if not v.default)


@dataclass(frozen=True)
class NestSpec:
    kind: str
    sizes: tuple
    dtype: str = "int32"
    layouts: tuple = ()  # one of LAYOUTS per array; () means all FIRST_MAJOR

    def source(self) -> str:
        k = NEST_KINDS[self.kind]
        lay = self.layouts or ("FIRST_MAJOR",) * k.n_arrays
        fields = dict(zip(k.size_names, self.sizes))
        fields["T"] = f"acc.ScalarType.{self.dtype}"
        fields["ACC"] = f"acc.ScalarType.{ACCUMULATOR.get(self.dtype, self.dtype)}"
        for n, lo in enumerate(lay):
            fields[f"L{n}"] = f"acc.Array.Layout.{lo}"
        return k.template.format(**fields)

    def __str__(self) -> str:
        sizes = ", ".join(f"{n}={s}" for n, s in zip(NEST_KINDS[self.kind].size_names, self.sizes))
        lay = "" if not self.layouts or set(self.layouts) == {"FIRST_MAJOR"} else \
            " layouts=" + "/".join("F" if x == "FIRST_MAJOR" else "L" for x in self.layouts)
        return f"{self.kind}({sizes}) {self.dtype}{lay}"


# the wider type a narrow one accumulates in (a template's {ACC})
ACCUMULATOR = {"int8": "int32", "uint8": "int32", "int16": "int32", "bfloat16": "float32", "float16": "float32"}

EXTENT = (1, 13)  # includes 1, primes, and sizes that nothing divides
SMALL = (1, 5)

_MATMUL = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {K}), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K}, {N}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L2})
nest = acc.Nest(shape=({M}, {N}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] += A[i, k] * B[k, j]

nests, args = [nest], (A, B, C)
schedule = nest.create_schedule()
'''
nest_kind("matmul", _MATMUL, "MNK", (EXTENT, EXTENT, EXTENT), 3)

_CONV1D = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({N} + {K} - 1,), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K},), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N},), layout={L2})
nest = acc.Nest(shape=({N}, {K}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    C[i] += A[i + j] * B[j]

nests, args = [nest], (A, B, C)
schedule = nest.create_schedule()
'''
nest_kind("conv1d", _CONV1D, "NK", (EXTENT, EXTENT), 3)

_CONV2D = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({H} + {R} - 1, {W} + {S} - 1), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({R}, {S}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({H}, {W}), layout={L2})
nest = acc.Nest(shape=({H}, {W}, {R}, {S}))
i, j, k, l = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] += A[i + k, j + l] * B[k, l]

nests, args = [nest], (A, B, C)
schedule = nest.create_schedule()
'''
nest_kind("conv2d", _CONV2D, "HWRS", ((1, 9), (1, 9), SMALL, SMALL), 3)

_ELEMENTWISE = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L2})
D = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L3})
nest = acc.Nest(shape=({M}, {N}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] = A[i, j] * 2 + B[i, j]
    D[i, j] += C[i, j] - 1

nests, args = [nest], (A, B, C, D)
schedule = nest.create_schedule()
'''
nest_kind("elementwise", _ELEMENTWISE, "MN", (EXTENT, EXTENT), 4)

# a 3-D element-wise nest with a transposed access and two statements
_TRANSPOSE3 = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K}, {N}, {M}), layout={L0})
B = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}, {K}), layout={L1})
nest = acc.Nest(shape=({M}, {N}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    B[i, j, k] -= A[k, j, i]
    B[i, j, k] *= 3

nests, args = [nest], (A, B)
schedule = nest.create_schedule()
'''
nest_kind("transpose3", _TRANSPOSE3, "MNK", ((1, 9), (1, 9), (1, 9)), 2)

_ROWSUM = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L0})
S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M},), layout={L1})
U = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N},), layout={L2})
nest = acc.Nest(shape=({M}, {N}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    S[i] += A[i, j]
    U[j] += A[i, j] * A[i, j]

nests, args = [nest], (A, S, U)
schedule = nest.create_schedule()
'''
nest_kind("rowsum", _ROWSUM, "MN", (EXTENT, EXTENT), 3)

_MAXREDUCE = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}, {K}), layout={L0})
X = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M},), layout={L1})
Y = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({N}, {K}), layout={L2})
nest = acc.Nest(shape=({M}, {N}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    X[i] = acc.max(X[i], A[i, j, k])
    Y[j, k] = acc.min(Y[j, k], A[i, j, k] - 1)

nests, args = [nest], (A, X, Y)
schedule = nest.create_schedule()
'''
nest_kind("maxreduce", _MAXREDUCE, "MNK", ((1, 9), (1, 9), (1, 9)), 3)


# runtime sizes: the loops' extents are only known when the function is called
_MATMUL_DYN = '''
M, N, K = acc.create_dimensions()
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=(M, K), layout={L0})
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=(K, N), layout={L1})
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=(M, N), layout={L2})
nest = acc.Nest(shape=(M, N, K))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] += A[i, k] * B[k, j]

nests, args = [nest], (A, B, C, M, N, K)
values = {{M: {M}, N: {N}, K: {K}}}
schedule = nest.create_schedule()
'''
nest_kind("matmul_dyn", _MATMUL_DYN, "MNK", (EXTENT, EXTENT, EXTENT), 3, runtime_sizes=True)

_ROWMAX_DYN = '''
M, N = acc.create_dimensions()
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=(M, N), layout={L0})
S = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=(M,), layout={L1})
nest = acc.Nest(shape=(M, N))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    S[i] = acc.max(S[i], A[i, j] * 3 - 1)

nests, args = [nest], (A, S, M, N)
values = {{M: {M}, N: {N}}}
schedule = nest.create_schedule()
'''
nest_kind("rowmax_dyn", _ROWMAX_DYN, "MN", (EXTENT, EXTENT), 2, runtime_sizes=True)


# narrow element types: products accumulated in a wider type (int8 / uint8 / int16 -> int32,
# bfloat16 -> float32), the caches drawn in VNNI order and column panels; and element-wise
# arithmetic in the narrow type itself (values stay small: no overflow)
NARROW = ("int8", "uint8", "int16", "bfloat16", "float32", "int32")

_QMATMUL = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {K}), layout={L0}, name="A")
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({K}, {N}), layout={L1}, name="B")
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={ACC}, shape=({M}, {N}), layout={L2}, name="C")
nest = acc.Nest(shape=({M}, {N}, {K}))
i, j, k = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] += acc.cast(A[i, k], {ACC}) * acc.cast(B[k, j], {ACC})

nests, args = [nest], (A, B, C)
schedule = nest.create_schedule()
'''
nest_kind("qmatmul", _QMATMUL, "MNK", ((1, 12), (1, 20), (1, 12)), 3, dtypes=NARROW, default=False)

_QELEMENTWISE = '''
A = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L0}, name="A")
B = acc.Array(role=acc.Role.INPUT, element_type={T}, shape=({M}, {N}), layout={L1}, name="B")
C = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L2}, name="C")
D = acc.Array(role=acc.Role.INPUT_OUTPUT, element_type={T}, shape=({M}, {N}), layout={L3}, name="D")
nest = acc.Nest(shape=({M}, {N}))
i, j = nest.get_indices()

@nest.iteration_logic
def _():
    C[i, j] = A[i, j] + B[i, j]
    D[i, j] = acc.max(D[i, j], A[i, j] - C[i, j])

nests, args = [nest], (A, B, C, D)
schedule = nest.create_schedule()
'''
nest_kind("qelementwise", _QELEMENTWISE, "MN", ((1, 9), (1, 40)), 4, dtypes=NARROW, default=False)
