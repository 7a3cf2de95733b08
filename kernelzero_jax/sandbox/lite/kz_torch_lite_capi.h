// kz_torch_lite_capi.h: a lite build's main.cpp without pybind11 (lite_capi.py).
//
// load_inline's main.cpp registers the candidate's functions through pybind11, whose templates
// take most of that file's compile time even against the precompiled binding header
// (kz_torch_lite_bind.h). A C-API main.cpp is the candidate's cpp_sources against the lite
// header and, generated for the functions it declares, one CPython function each and the
// module: each argument converted by pybind11's own caster and each result by torch's
// (kz_torch_lite_runtime.cpp, built once with torch's headers), exceptions translated as
// torch::wrap_pybind_function translates them, arguments no overload takes refused with
// pybind11's TypeError.
#pragma once

#include <Python.h>

#include <exception>

// main.cpp compiles beside the .cu, off a build's critical path: the standard text headers
// for it always (kz_torch_lite.h).
#ifndef KZ_LITE_STD_TEXT
#define KZ_LITE_STD_TEXT
#endif
#include "kz_torch_lite.h"

extern "C" {
// Converts `obj` into the value at `out` (default-constructed, of the kind's C++ type): 'T'
// at::Tensor, 'l' int64_t, 'i' int, 'd' double, 'f' float, 'b' bool, 'L' std::vector<int64_t>,
// 'V' std::vector<at::Tensor>. 1 if it took it, 0 (no Python error set) if not, -1 with the
// Python error its conversion raised set.
int kz_lite_arg(char kind, PyObject* obj, void* out);
// A new reference to the Python value of the result at `value`, of kind 'T', 'L' or 'V'.
PyObject* kz_lite_result(char kind, const void* value);
// Sets pybind11's TypeError for arguments that `signature` does not take; returns nullptr.
PyObject* kz_lite_incompatible(const char* name, const char* signature, PyObject* const* args,
                               Py_ssize_t nargs);
void kz_lite_set_python_error_unknown(void);
}
// Sets the Python error torch sets for the exception being handled.
void kz_lite_set_python_error(const std::exception_ptr& error);

#define KZ_CAPI_CAT2(a, b) a##b
#define KZ_CAPI_CAT(a, b) KZ_CAPI_CAT2(a, b)
#define KZ_CAPI_STR2(a) #a
#define KZ_CAPI_STR(a) KZ_CAPI_STR2(a)
