// kz_torch_lite_bind.h: what a lite build's main.cpp needs instead of torch/extension.h.
//
// load_inline's main.cpp holds the candidate's cpp_sources (usually declarations of the .cu's
// functions) and the pybind11 module it generates, in which each function is registered
// through torch::wrap_pybind_function. With torch's headers, even precompiled, that file takes
// about twice as long to compile as with this one (BENCHMARKS.md). Here it gets pybind11
// (torch's copy, so the module shares torch's pybind11 internals and exception translators),
// the lite at::Tensor, a pybind11 caster for it and torch::wrap_pybind_function, which forward
// to kz_torch_lite_runtime.cpp: the Python tensor <-> at::Tensor conversions and the exception
// translation are torch's own.
// (C++ warnings, TORCH_WARN, are not turned into Python warnings here.)
#pragma once

#include <Python.h>

#include <exception>
#include <optional>
#include <utility>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

// main.cpp compiles beside the .cu, off a build's critical path: the standard text headers
// for it always (kz_torch_lite.h).
#ifndef KZ_LITE_STD_TEXT
#define KZ_LITE_STD_TEXT
#endif
#include "kz_torch_lite.h"

extern "C" {
// Puts torch.Tensor `obj`'s tensor in the at::Tensor at `out` (1), or nothing if obj is not a
// torch.Tensor (0).
int kz_lite_from_python(void* out, PyObject* obj);
// A new reference to the torch.Tensor (None if undefined) of the at::Tensor at `self`.
PyObject* kz_lite_to_python(const void* self);
}
// Sets the Python error torch sets for the exception being handled (RuntimeError, IndexError,
// ValueError, ... with torch's message).
void kz_lite_set_python_error(const std::exception_ptr& error);

namespace pybind11 {
namespace detail {

template <>
struct type_caster<at::Tensor> {
 public:
  PYBIND11_TYPE_CASTER(at::Tensor, _("torch.Tensor"));

  bool load(handle src, bool /*convert*/) { return kz_lite_from_python(&value, src.ptr()) != 0; }

  static handle cast(const at::Tensor& src, return_value_policy /*policy*/, handle /*parent*/) {
    PyObject* out = kz_lite_to_python(&src);
    if (out == nullptr) throw error_already_set();
    return handle(out);
  }
};

}  // namespace detail
}  // namespace pybind11

namespace torch {

// torch's wrap_pybind_function: C++ exceptions become the Python errors torch would raise.
template <typename Ret, typename... Args>
auto wrap_pybind_function(Ret (*f)(Args...)) {
  return [f](Args... args) -> Ret {
    try {
      return f(std::forward<Args>(args)...);
    } catch (pybind11::error_already_set&) {
      throw;
    } catch (pybind11::builtin_exception&) {
      throw;
    } catch (const std::exception&) {
      kz_lite_set_python_error(std::current_exception());
      throw pybind11::error_already_set();
    }
  };
}

}  // namespace torch

namespace py = pybind11;
