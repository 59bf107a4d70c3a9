// accpy: validation of Python arguments against a kernel's signature, and the call.
//
// Shared by the generic binder (accpy._binder, built once at install) and by every
// package's own pybind11 module, so both give the same errors: a TypeError/ValueError
// naming the argument, what was expected and what was given. Never a crash.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace accpy {

namespace py = pybind11;

enum ArgKind { ARRAY = 0, SCALAR = 1, DIM = 2 };

struct ArgSpec {
    std::string name;
    int kind = ARRAY;
    std::string dtype;            // numpy dtype name, e.g. "float32"
    std::vector<int64_t> shape;   // >= 0: constant; < 0: -(k+1) = value of argument k (a DIM)
    std::string layout;           // "C", "F", or "S" (explicit element strides)
    std::vector<int64_t> strides; // for "S"
    bool written = false;
    std::string role;
    mutable py::object dtype_obj = py::object();  // the numpy dtype of `dtype`, made on first use
};

using PackedFn = int (*)(void**);
using ErrorFn = const char* (*)(void);

inline std::string join_shape(const std::vector<int64_t>& v) {
    std::ostringstream o;
    o << "(";
    for (size_t k = 0; k < v.size(); ++k) o << (k ? ", " : "") << v[k];
    if (v.size() == 1) o << ",";
    o << ")";
    return o.str();
}

inline PyObject* kernel_error_type() {
    static PyObject* cls = nullptr;
    if (!cls) {
        py::object mod = py::module_::import("accpy.errors");
        cls = mod.attr("KernelError").ptr();
        Py_INCREF(cls);
    }
    return cls;
}

class Kernel {
public:
    // `display`: the name messages use, the function's base name (what users call it by),
    // not its hashed full name; the full name when empty.
    Kernel(std::string name, std::vector<ArgSpec> sig, PackedFn fn, ErrorFn err, std::string display = "")
        : name_(std::move(name)), display_(display.empty() ? name_ : std::move(display)), sig_(std::move(sig)),
          fn_(fn), err_(err) {}

    const std::string& name() const { return name_; }

    // `full`: with the function's full (hashed) name, else the name users call it by
    std::string signature_text(bool full = false) const {
        std::string s = (full ? name_ : display_) + "(";
        for (size_t k = 0; k < sig_.size(); ++k) s += (k ? ", " : "") + sig_[k].name;
        return s + ")";
    }

    py::object call(py::args args, py::kwargs kwargs) {
        const size_t n = sig_.size();
        std::vector<py::object> given(n);
        if (args.size() > n) {
            throw py::type_error(signature_text() + " takes " + std::to_string(n) + " argument" +
                                 (n == 1 ? "" : "s") + " but " + std::to_string(args.size()) + " were given");
        }
        for (size_t k = 0; k < args.size(); ++k) given[k] = args[k];
        for (auto item : kwargs) {
            std::string key = py::str(item.first);
            size_t k = 0;
            while (k < n && sig_[k].name != key) ++k;
            if (k == n) throw py::type_error(signature_text() + " got an unexpected keyword argument '" + key + "'");
            if (given[k]) throw py::type_error(signature_text() + " got multiple values for argument '" + key + "'");
            given[k] = py::reinterpret_borrow<py::object>(item.second);
        }
        for (size_t k = 0; k < n; ++k) {
            if (!given[k]) {
                throw py::type_error(signature_text() + " missing argument '" + sig_[k].name + "' (argument " +
                                     std::to_string(k) + ")");
            }
        }
        // runtime dimensions first: array shapes refer to them
        std::vector<int64_t> dims(n, 0);
        std::vector<int64_t> scalars_i(n, 0);
        std::vector<double> scalars_f(n, 0.0);
        std::vector<unsigned char> scalar_bytes(n * 8, 0);
        for (size_t k = 0; k < n; ++k) {
            const ArgSpec& a = sig_[k];
            if (a.kind != DIM) continue;
            py::object o = given[k];
            int overflow = 0;
            long long v = index_value(a, o, "an int (a runtime dimension)", overflow);
            if (overflow != 0) {
                throw py::value_error("argument '" + a.name + "': the dimension " + std::string(py::str(py::repr(o))) +
                                      " does not fit in int64");
            }
            if (v < 0) throw py::value_error("argument '" + a.name + "': a dimension must be >= 0, got " + std::to_string(v));
            dims[k] = v;
        }
        std::vector<py::array> arrays(n);
        std::vector<void*> argv(n, nullptr);
        for (size_t k = 0; k < n; ++k) {
            const ArgSpec& a = sig_[k];
            py::object o = given[k];
            if (a.kind == DIM) {
                std::memcpy(&scalar_bytes[8 * k], &dims[k], 8);
                argv[k] = &scalar_bytes[8 * k];
                continue;
            }
            if (a.kind == SCALAR) {
                argv[k] = convert_scalar(a, o, &scalar_bytes[8 * k]);
                continue;
            }
            argv[k] = check_array(a, o, dims, arrays[k]);
        }
        check_overlaps(arrays);
        int status;
        {
            py::gil_scoped_release nogil;
            status = fn_(argv.data());
        }
        if (status != 0) {
            const char* msg = err_ ? err_() : nullptr;
            std::string text = msg ? std::string(msg) : std::string("the kernel reported an error");
            // messages from the kernel usually start with its name already
            if (text.compare(0, display_.size() + 1, display_ + ":") != 0 &&
                text.compare(0, name_.size() + 1, name_ + ":") != 0)
                text = display_ + ": " + text;
            PyErr_SetString(kernel_error_type(), text.c_str());
            throw py::error_already_set();
        }
        return py::none();
    }

private:
    // The value of an integer-like object (its __index__), as long long; `overflow` is set
    // (like PyLong_AsLongLongAndOverflow) when it does not fit. Floats, strings, None and
    // objects whose __index__ fails raise a TypeError naming the argument.
    static long long index_value(const ArgSpec& a, py::handle o, const std::string& what, int& overflow) {
        auto type_err = [&]() {
            return py::type_error("argument '" + a.name + "': expected " + what + ", got " +
                                  std::string(py::str(py::type::handle_of(o).attr("__name__"))) + " " +
                                  std::string(py::str(py::repr(o))));
        };
        if (py::isinstance<py::float_>(o) || py::isinstance<py::str>(o) || !py::hasattr(o, "__index__")) throw type_err();
        PyObject* idx = PyNumber_Index(o.ptr());
        if (!idx) {
            PyErr_Clear();
            throw type_err();
        }
        py::object keep = py::reinterpret_steal<py::object>(idx);
        overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            throw type_err();
        }
        return v;
    }

    void* convert_scalar(const ArgSpec& a, py::object o, unsigned char* out) {
        const std::string& t = a.dtype;
        auto type_err = [&]() {
            return py::type_error("argument '" + a.name + "': expected a " + t + " scalar, got " +
                                  std::string(py::str(py::repr(o))));
        };
        if (t == "float32" || t == "float64" || t == "float16") {
            if (!py::hasattr(o, "__float__") || py::isinstance<py::str>(o)) throw type_err();
            double v = PyFloat_AsDouble(o.ptr());
            if (v == -1.0 && PyErr_Occurred()) {
                // e.g. an int too large for a double, or a failing __float__
                PyErr_Clear();
                throw py::value_error("argument '" + a.name + "': " + std::string(py::str(py::repr(o))) +
                                      " does not fit in " + t);
            }
            // a finite value that the element type cannot hold would silently become inf
            const double limit = t == "float32" ? 3.4028234663852886e38 : t == "float16" ? 65504.0 : 0.0;
            if (limit != 0.0 && std::isfinite(v) && std::fabs(v) > limit) {
                const float fv = (float)v;  // values within half an ulp of the limit round to it
                const bool rounds_to_max = t == "float32" ? std::isfinite(fv) : std::fabs(v) < 65520.0;
                if (!rounds_to_max) {
                    throw py::value_error("argument '" + a.name + "': " + std::string(py::str(py::repr(o))) +
                                          " does not fit in " + t + " (it would become inf)");
                }
            }
            if (t == "float64") std::memcpy(out, &v, 8);
            else if (t == "float32") { float f = (float)v; std::memcpy(out, &f, 4); }
            else { _Float16 h = (_Float16)v; std::memcpy(out, &h, 2); }
            return out;
        }
        int overflow = 0;
        long long v = index_value(a, o, "a " + t + " scalar (an int)", overflow);
        unsigned long long uv = 0;
        bool ok = true;
        if (t == "uint64") {
            if (overflow < 0 || (overflow == 0 && v < 0)) ok = false;
            else if (overflow > 0) {
                py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(o.ptr()));
                uv = PyLong_AsUnsignedLongLong(idx.ptr());
                if (PyErr_Occurred()) { PyErr_Clear(); ok = false; }
            }
            else uv = (unsigned long long)v;
            if (ok) std::memcpy(out, &uv, 8);
        } else if (overflow != 0) {
            ok = false;
        } else {
            long long lo = 0, hi = 0; int size = 8;
            if (t == "int8") { lo = INT8_MIN; hi = INT8_MAX; size = 1; }
            else if (t == "int16") { lo = INT16_MIN; hi = INT16_MAX; size = 2; }
            else if (t == "int32") { lo = INT32_MIN; hi = INT32_MAX; size = 4; }
            else if (t == "int64") { lo = INT64_MIN; hi = INT64_MAX; size = 8; }
            else if (t == "uint8") { lo = 0; hi = UINT8_MAX; size = 1; }
            else if (t == "uint16") { lo = 0; hi = UINT16_MAX; size = 2; }
            else if (t == "uint32") { lo = 0; hi = UINT32_MAX; size = 4; }
            else if (t == "bool") { lo = 0; hi = 1; size = 1; }
            ok = v >= lo && v <= hi;
            if (ok) {
                int64_t w = v;
                std::memcpy(out, &w, (size_t)size);  // little-endian: low bytes first
            }
        }
        if (!ok) throw py::value_error("argument '" + a.name + "': " + std::string(py::str(py::repr(o))) +
                                       " does not fit in " + t);
        return out;
    }

    void* check_array(const ArgSpec& a, py::object o, const std::vector<int64_t>& dims, py::array& keep) {
        std::vector<int64_t> shape;
        for (int64_t s : a.shape) shape.push_back(s >= 0 ? s : dims[(size_t)(-s - 1)]);
        if (!py::isinstance<py::array>(o)) {
            throw py::type_error("argument '" + a.name + "': expected a numpy array of " + a.dtype + " with shape " +
                                 join_shape(shape) + ", got " + std::string(py::str(py::type::handle_of(o).attr("__name__"))));
        }
        py::array arr = py::reinterpret_borrow<py::array>(o);
        // numpy's builtin dtypes are singletons: compare objects, and build names only for errors
        // (str(dtype) runs Python code: ~2 us per argument on every call)
        if (!a.dtype_obj) a.dtype_obj = py::dtype(a.dtype);
        py::dtype got_dtype = arr.dtype();
        if (!got_dtype.is(a.dtype_obj) && !got_dtype.equal(py::reinterpret_borrow<py::dtype>(a.dtype_obj))) {
            std::string got = py::str(got_dtype);
            throw py::type_error("argument '" + a.name + "': expected dtype " + a.dtype + ", got " + got +
                                 " (no implicit conversion; use .astype(np." + a.dtype + "))");
        }
        if ((size_t)arr.ndim() != shape.size()) {
            throw py::value_error("argument '" + a.name + "': expected a " + std::to_string(shape.size()) +
                                  "-D array with shape " + join_shape(shape) + ", got " + std::to_string(arr.ndim()) +
                                  "-D with shape " + join_shape(std::vector<int64_t>(arr.shape(), arr.shape() + arr.ndim())));
        }
        for (size_t d = 0; d < shape.size(); ++d) {
            if (arr.shape(d) != shape[d]) {
                throw py::value_error("argument '" + a.name + "': expected shape " + join_shape(shape) + ", got " +
                                      join_shape(std::vector<int64_t>(arr.shape(), arr.shape() + arr.ndim())));
            }
        }
        const int64_t item = arr.itemsize();
        std::vector<int64_t> expect(shape.size());
        if (a.layout == "S") {
            for (size_t d = 0; d < shape.size(); ++d) expect[d] = a.strides[d] * item;
        } else {
            int64_t acc = item;
            for (size_t t = 0; t < shape.size(); ++t) {
                size_t d = a.layout == "C" ? shape.size() - 1 - t : t;
                expect[d] = acc;
                acc *= shape[d];
            }
        }
        bool empty = false;
        for (int64_t s : shape) empty |= (s == 0);
        if (!empty) {
            for (size_t d = 0; d < shape.size(); ++d) {
                if (shape[d] > 1 && arr.strides(d) != expect[d]) {
                    std::string how = a.layout == "C" ? "a C-contiguous (FIRST_MAJOR) array; use np.ascontiguousarray"
                                    : a.layout == "F" ? "a Fortran-ordered (LAST_MAJOR) array; use np.asfortranarray"
                                                      : "an array with the declared explicit strides";
                    throw py::value_error("argument '" + a.name + "': expected " + how + " (byte strides " +
                                          join_shape(expect) + "), got byte strides " +
                                          join_shape(std::vector<int64_t>(arr.strides(), arr.strides() + arr.ndim())));
                }
            }
        }
        if (!(arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_)) {
            throw py::value_error("argument '" + a.name + "': the array's data is not aligned to its element size");
        }
        if (a.written && !arr.writeable()) {
            throw py::value_error("argument '" + a.name + "' (" + a.role + ") is written by " + display_ +
                                  " but the array is read-only");
        }
        keep = arr;
        return const_cast<void*>(arr.data());
    }

    void check_overlaps(const std::vector<py::array>& arrays) {
        const size_t n = sig_.size();
        for (size_t a = 0; a < n; ++a) {
            if (sig_[a].kind != ARRAY || !sig_[a].written || !arrays[a]) continue;
            for (size_t b = 0; b < n; ++b) {
                if (b == a || sig_[b].kind != ARRAY || !arrays[b]) continue;
                if (b < a && sig_[b].written) continue;  // reported once
                if (overlaps(arrays[a], arrays[b])) {
                    throw py::value_error("arguments '" + sig_[a].name + "' and '" + sig_[b].name +
                                          "' share memory, but '" + sig_[a].name + "' is written by " + display_ +
                                          "; pass a copy");
                }
            }
        }
    }

    static bool overlaps(const py::array& x, const py::array& y) {
        auto span = [](const py::array& a, const char*& lo, const char*& hi) {
            const char* base = static_cast<const char*>(a.data());
            lo = hi = base;
            if (a.size() == 0) return false;
            ptrdiff_t mn = 0, mx = 0;
            for (py::ssize_t d = 0; d < a.ndim(); ++d) {
                ptrdiff_t ext = (ptrdiff_t)(a.shape(d) - 1) * a.strides(d);
                if (ext < 0) mn += ext; else mx += ext;
            }
            lo = base + mn;
            hi = base + mx + a.itemsize();
            return true;
        };
        const char *xl, *xh, *yl, *yh;
        if (!span(x, xl, xh) || !span(y, yl, yh)) return false;
        return xl < yh && yl < xh;
    }

    std::string name_;
    std::string display_;
    std::vector<ArgSpec> sig_;
    PackedFn fn_;
    ErrorFn err_;
};

// Build ArgSpecs from the Python description: a list of tuples
// (name, kind, dtype, shape, layout, strides, written, role).
inline std::vector<ArgSpec> parse_signature(py::list desc) {
    std::vector<ArgSpec> out;
    for (auto item : desc) {
        py::tuple t = item.cast<py::tuple>();
        ArgSpec a;
        a.name = t[0].cast<std::string>();
        a.kind = t[1].cast<int>();
        a.dtype = t[2].cast<std::string>();
        a.shape = t[3].cast<std::vector<int64_t>>();
        a.layout = t[4].cast<std::string>();
        a.strides = t[5].cast<std::vector<int64_t>>();
        a.written = t[6].cast<bool>();
        a.role = t[7].cast<std::string>();
        out.push_back(a);
    }
    return out;
}

inline void bind_kernel_class(py::module_& m) {
    py::class_<Kernel>(m, "Kernel")
        .def("__call__", &Kernel::call)
        .def_property_readonly("name", &Kernel::name)
        .def("__repr__", [](const Kernel& k) { return "<accpy kernel " + k.signature_text(true) + ">"; });
}

}  // namespace accpy
