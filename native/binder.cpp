// accpy._binder: binds any built kernel (a shared library + its signature) to Python.
//
// Built once when accpy is installed, so that a freshly built package is callable
// without waiting for a per-package C++ compile.
#include <dlfcn.h>

#include <string>

#include "accpy_pyargs.hpp"

namespace py = pybind11;

static void* open_library(const std::string& path) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error("cannot load " + path + ": " + dlerror());
    return h;  // kept for the life of the process: kernels may still be referenced
}

static accpy::Kernel load_kernel(const std::string& lib, const std::string& symbol, const std::string& error_symbol,
                                 py::list signature, const std::string& display_name) {
    void* h = open_library(lib);
    auto fn = reinterpret_cast<accpy::PackedFn>(dlsym(h, (symbol + "__packed").c_str()));
    if (!fn) throw std::runtime_error("symbol " + symbol + "__packed not found in " + lib);
    auto err = reinterpret_cast<accpy::ErrorFn>(dlsym(h, error_symbol.c_str()));
    return accpy::Kernel(symbol, accpy::parse_signature(signature), fn, err, display_name);
}

PYBIND11_MODULE(_binder, m) {
    m.doc() = "Generic binder: load a kernel from a built accpy library by its signature.";
    // the interface version accpy/package/loader.py expects (a stale build is rebuilt there)
    m.attr("ABI") = 2;
    accpy::bind_kernel_class(m);
    m.def("load_kernel", &load_kernel, py::arg("library"), py::arg("symbol"), py::arg("error_symbol"),
          py::arg("signature"), py::arg("display_name") = "");
}
