// The other side of kz_torch_lite.h: each kz_lite_* function does what the header's name does,
// with torch's real implementation. Compiled once per machine, with torch's headers, into an
// object that every lite-built candidate extension links (sandbox/lite_build.py).
// KZ_LITE_WITH_CUDA adds the CUDA stream (torch's CUDA libraries must then be linked).
#include <ATen/ATen.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>  // pybind11, with torch's caster for at::Tensor
#include <pybind11/stl.h>
#ifdef KZ_LITE_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <new>
#include <string>
#include <vector>

// The header hard-codes torch's enum values: they must be these.
static_assert(sizeof(at::Tensor) == sizeof(void*), "at::Tensor is one intrusive pointer");
static_assert(alignof(at::Tensor) == alignof(void*), "at::Tensor is one intrusive pointer");
static_assert(static_cast<int>(c10::ScalarType::Byte) == 0, "ScalarType::Byte");
static_assert(static_cast<int>(c10::ScalarType::Char) == 1, "ScalarType::Char");
static_assert(static_cast<int>(c10::ScalarType::Short) == 2, "ScalarType::Short");
static_assert(static_cast<int>(c10::ScalarType::Int) == 3, "ScalarType::Int");
static_assert(static_cast<int>(c10::ScalarType::Long) == 4, "ScalarType::Long");
static_assert(static_cast<int>(c10::ScalarType::Half) == 5, "ScalarType::Half");
static_assert(static_cast<int>(c10::ScalarType::Float) == 6, "ScalarType::Float");
static_assert(static_cast<int>(c10::ScalarType::Double) == 7, "ScalarType::Double");
static_assert(static_cast<int>(c10::ScalarType::Bool) == 11, "ScalarType::Bool");
static_assert(static_cast<int>(c10::ScalarType::BFloat16) == 15, "ScalarType::BFloat16");
static_assert(static_cast<int>(c10::DeviceType::CPU) == 0, "DeviceType::CPU");
static_assert(static_cast<int>(c10::DeviceType::CUDA) == 1, "DeviceType::CUDA");

namespace {

const at::Tensor& T(const void* p) { return *static_cast<const at::Tensor*>(p); }
at::Tensor& M(void* p) { return *static_cast<at::Tensor*>(p); }
// `out`: a Tensor the header default-constructed (undefined) to receive the result.
void put(void* out, at::Tensor t) { M(out) = std::move(t); }

at::TensorOptions options(int8_t dtype, int8_t device_type, int8_t device_index) {
  at::TensorOptions o;
  if (dtype >= 0) o = o.dtype(static_cast<c10::ScalarType>(dtype));
  if (device_type >= 0) {
    o = o.device(c10::Device(static_cast<c10::DeviceType>(device_type), device_index));
  }
  return o;
}

template <typename T>
void* typed_data_ptr(const at::Tensor& t) { return t.data_ptr<T>(); }

}  // namespace

extern "C" {

void kz_lite_tensor_undefined(void* out) { new (out) at::Tensor(); }
void kz_lite_tensor_copy(void* out, const void* src) { new (out) at::Tensor(T(src)); }
void kz_lite_tensor_move(void* out, void* src) { new (out) at::Tensor(std::move(M(src))); }
void kz_lite_tensor_assign(void* self, const void* src) { M(self) = T(src); }
void kz_lite_tensor_move_assign(void* self, void* src) { M(self) = std::move(M(src)); }
void kz_lite_tensor_destroy(void* self) { M(self).~Tensor(); }
int kz_lite_defined(const void* self) { return T(self).defined(); }
int64_t kz_lite_numel(const void* self) { return T(self).numel(); }
int64_t kz_lite_dim(const void* self) { return T(self).dim(); }
int64_t kz_lite_size(const void* self, int64_t dim) { return T(self).size(dim); }
int64_t kz_lite_stride(const void* self, int64_t dim) { return T(self).stride(dim); }
const int64_t* kz_lite_sizes(const void* self, size_t* n) {
  auto s = T(self).sizes();
  *n = s.size();
  return s.data();
}
const int64_t* kz_lite_strides(const void* self, size_t* n) {
  auto s = T(self).strides();
  *n = s.size();
  return s.data();
}
int64_t kz_lite_element_size(const void* self) { return T(self).element_size(); }
int kz_lite_is_cuda(const void* self) { return T(self).is_cuda(); }
int kz_lite_is_contiguous(const void* self) { return T(self).is_contiguous(); }
int8_t kz_lite_scalar_type(const void* self) {
  return static_cast<int8_t>(T(self).scalar_type());
}
void kz_lite_device(const void* self, int8_t* type, int8_t* index) {
  const c10::Device d = T(self).device();
  *type = static_cast<int8_t>(d.type());
  *index = d.index();
}
void* kz_lite_data_ptr(const void* self, int8_t expected, int typed) {
  const at::Tensor& t = T(self);
  if (!typed) return t.data_ptr();
  // torch's own data_ptr<T>, with its own checks (dtype, storage) and messages.
  switch (static_cast<c10::ScalarType>(expected)) {
    case c10::ScalarType::Byte: return typed_data_ptr<uint8_t>(t);
    case c10::ScalarType::Char: return typed_data_ptr<int8_t>(t);
    case c10::ScalarType::Short: return typed_data_ptr<int16_t>(t);
    case c10::ScalarType::Int: return typed_data_ptr<int32_t>(t);
    case c10::ScalarType::Long: return typed_data_ptr<int64_t>(t);
    case c10::ScalarType::Float: return typed_data_ptr<float>(t);
    case c10::ScalarType::Double: return typed_data_ptr<double>(t);
    case c10::ScalarType::Bool: return typed_data_ptr<bool>(t);
    case c10::ScalarType::Half: return typed_data_ptr<c10::Half>(t);
    case c10::ScalarType::BFloat16: return typed_data_ptr<c10::BFloat16>(t);
    default: TORCH_CHECK(false, "kz_torch_lite: data_ptr of an unsupported type");
  }
}
void kz_lite_contiguous(void* out, const void* self) { put(out, T(self).contiguous()); }
void kz_lite_view(void* out, const void* self, const int64_t* sizes, size_t n, int reshape) {
  const at::IntArrayRef shape(sizes, n);
  put(out, reshape ? T(self).reshape(shape) : T(self).view(shape));
}
void kz_lite_new(void* out, const int64_t* sizes, size_t n, int8_t dtype, int8_t device_type,
                 int8_t device_index, int fill) {
  const at::IntArrayRef shape(sizes, n);
  const at::TensorOptions o = options(dtype, device_type, device_index);
  put(out, fill == 1 ? at::zeros(shape, o) : fill == 2 ? at::ones(shape, o) : at::empty(shape, o));
}
void kz_lite_new_like(void* out, const void* self, int8_t dtype, int8_t device_type,
                      int8_t device_index, int fill) {
  const at::TensorOptions o = options(dtype, device_type, device_index);
  const at::Tensor& t = T(self);
  put(out, fill == 1 ? at::zeros_like(t, o) : fill == 2 ? at::ones_like(t, o)
                                                         : at::empty_like(t, o));
}
void kz_lite_op(void* out, const void* self, int op, double value, int64_t dim0, int64_t dim1) {
  at::Tensor& t = const_cast<at::Tensor&>(T(self));  // the in-place ops write the tensor itself
  switch (op) {
    case 0: t.zero_(); return;
    case 1: t.fill_(value); return;
    case 2: put(out, t.to(static_cast<c10::ScalarType>(static_cast<int>(value)))); return;
    case 3: put(out, t.t()); return;
    case 4: put(out, t.transpose(dim0, dim1)); return;
    default: TORCH_CHECK(false, "kz_torch_lite: unknown operation ", op);
  }
}
void kz_lite_check_failed(const char* file, int line, const char* condition,
                          const char* message) {
  // The message torch's TORCH_CHECK gives: the caller's text, or its default without one.
  const std::string text = (message && *message)
      ? std::string(message)
      : std::string("Expected ") + condition + " to be true, but got false.  (Could this error "
        "message be improved?  If so, please report an enhancement request to PyTorch.)";
  throw c10::Error({__func__, file, static_cast<uint32_t>(line)}, text);
}
void* kz_lite_current_stream(int8_t device_index) {
#ifdef KZ_LITE_WITH_CUDA
  return c10::cuda::getCurrentCUDAStream(device_index).stream();
#else
  (void)device_index;
  TORCH_CHECK(false, "kz_torch_lite: built without CUDA");
#endif
}

// kz_torch_lite_bind.h's side: a lite main.cpp's conversions, as torch's pybind11 caster does
// them, and its exception translation, as torch::wrap_pybind_function does it.
int kz_lite_from_python(void* out, PyObject* obj) {
  if (!THPVariable_Check(obj)) return 0;
  M(out) = THPVariable_Unpack(obj);
  return 1;
}
PyObject* kz_lite_to_python(const void* self) { return THPVariable_Wrap(T(self)); }

}  // extern "C"

void kz_lite_set_python_error(const std::exception_ptr& error) {
  torch::translate_exception_to_python(error);
}

// kz_torch_lite_capi.h's side: a C-API main.cpp's argument conversions are pybind11's own
// casters (with conversion allowed, as pybind11 loads a function that has one overload), and
// its errors pybind11's words.
namespace {

template <typename T>
int load(PyObject* obj, void* out) {
  pybind11::detail::make_caster<T> caster;
  try {
    if (!caster.load(pybind11::handle(obj), /*convert=*/true)) {
      PyErr_Clear();
      return 0;
    }
  } catch (pybind11::error_already_set& e) {  // say, a sequence whose items raise
    e.restore();  // pybind11's dispatcher raises it as it is
    return -1;
  }
  *static_cast<T*>(out) = pybind11::detail::cast_op<T>(std::move(caster));
  return 1;
}

}  // namespace

extern "C" {

int kz_lite_arg(char kind, PyObject* obj, void* out) {
  switch (kind) {
    case 'T': return kz_lite_from_python(out, obj);
    case 'l': return load<int64_t>(obj, out);
    case 'i': return load<int>(obj, out);
    case 'd': return load<double>(obj, out);
    case 'f': return load<float>(obj, out);
    case 'b': return load<bool>(obj, out);
    case 'L': return load<std::vector<int64_t>>(obj, out);
    case 'V': return load<std::vector<at::Tensor>>(obj, out);
  }
  return 0;
}

PyObject* kz_lite_result(char kind, const void* value) {
  try {
    switch (kind) {
      case 'T': return kz_lite_to_python(value);
      case 'L': return pybind11::cast(*static_cast<const std::vector<int64_t>*>(value)).release().ptr();
      case 'V':
        return pybind11::cast(*static_cast<const std::vector<at::Tensor>*>(value)).release().ptr();
    }
  } catch (pybind11::error_already_set& e) {
    e.restore();
    return nullptr;
  }
  PyErr_Format(PyExc_SystemError, "kz_torch_lite: no result of kind '%c'", kind);
  return nullptr;
}

PyObject* kz_lite_incompatible(const char* name, const char* signature, PyObject* const* args,
                               Py_ssize_t nargs) {
  // pybind11's TypeError for arguments no overload takes, with its text.
  std::string text = std::string(name) + "(): incompatible function arguments. The following "
      "argument types are supported:\n    1. " + signature + "\n\nInvoked with: ";
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* repr = PyObject_Repr(args[i]);
    const char* utf8 = repr ? PyUnicode_AsUTF8(repr) : nullptr;
    if (i) text += ", ";
    text += utf8 ? utf8 : "<unprintable>";
    Py_XDECREF(repr);
    PyErr_Clear();
  }
  PyErr_SetString(PyExc_TypeError, text.c_str());
  return nullptr;
}

void kz_lite_set_python_error_unknown(void) {
  PyErr_SetString(PyExc_RuntimeError, "Caught an unknown exception!");
}

}  // extern "C"
