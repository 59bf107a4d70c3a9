/* accpy: the interface between a package's generated module table and the generic module code.
 *
 * A package's Python module is two objects linked with the package's kernels:
 *   - accpy_pymodule.cpp (pybind11, argument checking; the same for every package, so it is
 *     compiled once and cached: pybind11's headers take seconds to compile), and
 *   - <name>_module.cpp (generated: the signature tables below and PyInit_<name>; compiles
 *     in a fraction of a second).
 * Plain C structs, so that the table file does not need pybind11.
 */
#ifndef ACCPY_PYMODULE_H
#define ACCPY_PYMODULE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accpy_arg_desc {
    const char* name;
    int kind;               /* 0 array, 1 scalar, 2 runtime dimension */
    const char* dtype;      /* numpy dtype name */
    int ndim;
    const int64_t* shape;   /* >= 0: constant; < 0: -(k+1) = value of argument k (a dimension) */
    const char* layout;     /* "C", "F" or "S" (explicit element strides) */
    int nstrides;
    const int64_t* strides; /* element strides for "S" */
    int written;
    const char* role;
} accpy_arg_desc;

typedef struct accpy_fn_desc {
    const char* full_name;
    const char* base_name;  /* "" for none */
    int nargs;
    const accpy_arg_desc* args;
    int (*packed)(void**);
    const char* parameters;  /* the variant's parameter values, as a JSON object */
    const char* alias_error; /* non-empty: base_name names several variants; calling it raises this */
} accpy_fn_desc;

/* Creates the module object (called by PyInit_<name>); NULL with a Python error set on failure. */
void* accpy_pymodule_create(const char* name, const char* doc, const accpy_fn_desc* fns, int nfns,
                            const char* (*last_error)(void));

#ifdef __cplusplus
}
#endif

#endif /* ACCPY_PYMODULE_H */
