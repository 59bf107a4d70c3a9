// accpy: the generic half of every package's Python module (see accpy_pymodule.h).
//
// Compiled once per accpy/pybind11/Python/compiler combination and cached; each package
// links it with its generated table (<name>_module.cpp) and its kernels (<name>.a).
#include "accpy_pymodule.h"

#include <string>
#include <vector>

#include "accpy_pyargs.hpp"

namespace py = pybind11;

extern "C" void* accpy_pymodule_create(const char* name, const char* doc, const accpy_fn_desc* fns, int nfns,
                                       const char* (*last_error)(void)) {
    try {
        // one definition per module object; lives as long as the process (like a static)
        auto* def = new PyModuleDef();
        py::module_ m = py::module_::create_extension_module(name, doc, def);
        py::class_<accpy::Kernel>(m, "Kernel", py::module_local())
            .def("__call__", &accpy::Kernel::call)
            .def_property_readonly("name", &accpy::Kernel::name)
            .def("__repr__", [](const accpy::Kernel& k) { return "<accpy kernel " + k.signature_text(true) + ">"; });
        py::object loads = py::module_::import("json").attr("loads");
        py::dict variants;  // full name -> parameter values
        for (int f = 0; f < nfns; ++f) {
            const accpy_fn_desc& fn = fns[f];
            std::vector<accpy::ArgSpec> sig;
            for (int k = 0; k < fn.nargs; ++k) {
                const accpy_arg_desc& a = fn.args[k];
                accpy::ArgSpec s;
                s.name = a.name;
                s.kind = a.kind;
                s.dtype = a.dtype;
                s.shape.assign(a.shape, a.shape + a.ndim);
                s.layout = a.layout;
                s.strides.assign(a.strides, a.strides + a.nstrides);
                s.written = a.written != 0;
                s.role = a.role;
                sig.push_back(std::move(s));
            }
            const bool has_base = fn.base_name && fn.base_name[0];
            m.attr(fn.full_name) = py::cast(accpy::Kernel(fn.full_name, std::move(sig), fn.packed, last_error,
                                                          has_base ? fn.base_name : ""));
            variants[py::str(fn.full_name)] = loads(fn.parameters && fn.parameters[0] ? fn.parameters : "{}");
            if (has_base && !py::hasattr(m, fn.base_name)) {
                if (fn.alias_error && fn.alias_error[0]) {
                    // several variants share the base name: calling it is an error listing them
                    std::string msg = fn.alias_error;
                    m.attr(fn.base_name) = py::cpp_function(
                        [msg](py::args, py::kwargs) -> py::object { throw py::type_error(msg); },
                        py::name(fn.base_name));
                } else {
                    m.attr(fn.base_name) = m.attr(fn.full_name);
                }
            }
        }
        m.attr("variants") = variants;
        return m.release().ptr();
    } catch (py::error_already_set& e) {
        e.restore();
        return nullptr;
    } catch (const std::exception& e) {
        PyErr_SetString(PyExc_ImportError, (std::string(name) + ": " + e.what()).c_str());
        return nullptr;
    }
}
