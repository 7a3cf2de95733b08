// kz_torch_lite.h: the part of the torch C++ API that kernel files use, without torch's headers.
//
// A CUDA candidate's .cu normally includes torch/extension.h, and nvcc parses those headers
// three times (cudafe++, cicc, the host compiler): most of a build. This header declares the
// same names (at::Tensor, torch::empty, TORCH_CHECK, ...) with the same meaning, and every
// operation forwards to the real implementation through the kz_lite_* functions of
// kz_torch_lite_runtime.cpp, which is compiled once per machine with torch's real headers and
// linked into each candidate's extension (sandbox/lite_build.py). A name this header lacks
// makes the .cu fail to compile here, and the build falls back to torch's headers.
//
// at::Tensor here has torch's layout (one intrusive pointer to the TensorImpl) and is, like
// torch's, not trivially copyable, so a Tensor passes between this .cu and the generated
// main.cpp (compiled with torch's headers) exactly as between two torch translation units.
#pragma once

// What torch's headers bring in that kernel files commonly use without including it.
#include <algorithm>
#include <cassert>  // torch's headers declare assert too (FLT_MAX they do not: nor does this)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>
// The text and stream headers are the heavy ones (nvcc parses them three times: a lite .cu took
// 2.61 CPU seconds with them, 1.73 without, on the CPU machine), so only a source that names
// what they declare gets them (lite_build.py defines KZ_LITE_STD_TEXT); this header's messages
// do without.
#if defined(KZ_LITE_STD_TEXT)
#include <sstream>
#include <stdexcept>
#include <string>
#endif
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif
#if defined(KZ_LITE_HALF)  // torch's own 16-bit float types (about 1 s of parsing more)
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#endif

extern "C" {
// `self`, `out`, `src`: addresses of at::Tensor objects (one pointer each).
void kz_lite_tensor_undefined(void* out);
void kz_lite_tensor_copy(void* out, const void* src);
void kz_lite_tensor_move(void* out, void* src);
void kz_lite_tensor_assign(void* self, const void* src);
void kz_lite_tensor_move_assign(void* self, void* src);
void kz_lite_tensor_destroy(void* self);
int kz_lite_defined(const void* self);
int64_t kz_lite_numel(const void* self);
int64_t kz_lite_dim(const void* self);
int64_t kz_lite_size(const void* self, int64_t dim);
int64_t kz_lite_stride(const void* self, int64_t dim);
const int64_t* kz_lite_sizes(const void* self, size_t* n);
const int64_t* kz_lite_strides(const void* self, size_t* n);
int64_t kz_lite_element_size(const void* self);
int kz_lite_is_cuda(const void* self);
int kz_lite_is_contiguous(const void* self);
int8_t kz_lite_scalar_type(const void* self);
void kz_lite_device(const void* self, int8_t* type, int8_t* index);
void* kz_lite_data_ptr(const void* self, int8_t expected, int typed);
void kz_lite_contiguous(void* out, const void* self);
void kz_lite_view(void* out, const void* self, const int64_t* sizes, size_t n, int reshape);
// fill: 0 empty, 1 zeros, 2 ones. dtype -1 / device_type -1: not given.
void kz_lite_new(void* out, const int64_t* sizes, size_t n, int8_t dtype, int8_t device_type,
                 int8_t device_index, int fill);
void kz_lite_new_like(void* out, const void* self, int8_t dtype, int8_t device_type,
                      int8_t device_index, int fill);
[[noreturn]] void kz_lite_check_failed(const char* file, int line, const char* condition,
                                       const char* message);
void* kz_lite_current_stream(int8_t device_index);
// op: 0 zero_, 1 fill_(value), 2 to(dtype), 3 t(), 4 transpose(dim0, dim1). The in-place
// ones (0, 1) change `self` and leave `out` alone.
void kz_lite_op(void* out, const void* self, int op, double value, int64_t dim0, int64_t dim1);
}

namespace c10 {
// The values of torch's enums (kz_torch_lite_runtime.cpp checks them against torch's own).
enum class ScalarType : int8_t {
  Byte = 0, Char = 1, Short = 2, Int = 3, Long = 4, Half = 5, Float = 6, Double = 7,
  Bool = 11, BFloat16 = 15,
};
enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
}  // namespace c10

// The classes besides at::Tensor live in their own namespace, under torch's names by `using`:
// their members then never share a linker symbol with torch's classes of the same name, which
// main.cpp (compiled with torch's headers) also defines. at::Tensor itself must be torch's
// name (it crosses between the two), and has torch's layout and meaning.
namespace kz_lite {

using c10::DeviceType;
using c10::ScalarType;

// What Tensor::dtype() and the deprecated Tensor::type() give: compared with and converted to a
// ScalarType, as torch's TypeMeta and DeprecatedTypeProperties are in kernel files.
struct DType {
  ScalarType scalar_type_;
  operator ScalarType() const { return scalar_type_; }  // NOLINT
  ScalarType toScalarType() const { return scalar_type_; }
  ScalarType scalarType() const { return scalar_type_; }
  bool operator==(ScalarType t) const { return scalar_type_ == t; }
  bool operator!=(ScalarType t) const { return scalar_type_ != t; }
};

struct Device {
  DeviceType type_;
  int8_t index_;
  Device(DeviceType type, int8_t index = -1) : type_(type), index_(index) {}  // NOLINT
  DeviceType type() const { return type_; }
  int8_t index() const { return index_; }
  bool has_index() const { return index_ >= 0; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// torch's IntArrayRef: a view of int64_t values owned elsewhere.
class IntArrayRef {
 public:
  IntArrayRef(const int64_t* data, size_t size) : data_(data), size_(size) {}
  // Views the list for the call it is passed to, as torch's does (hence the pragma).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  IntArrayRef(std::initializer_list<int64_t> list)  // NOLINT: implicit, as torch's
      : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t operator[](size_t i) const { return data_[i]; }
  int64_t front() const { return data_[0]; }
  int64_t back() const { return data_[size_ - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }

 private:
  const int64_t* data_;
  size_t size_;
};

struct TensorOptions {
  int8_t dtype_ = -1;  // -1: not given (torch's default, or the tensor's for *_like)
  int8_t device_type_ = -1;
  int8_t device_index_ = -1;
  TensorOptions() = default;
  // Implicit, as torch's: torch::zeros({n}, torch::kFloat32).
  TensorOptions(ScalarType t) : dtype_(static_cast<int8_t>(t)) {}  // NOLINT
  TensorOptions(DType t) : dtype_(static_cast<int8_t>(t.scalar_type_)) {}  // NOLINT
  TensorOptions(Device d)  // NOLINT
      : device_type_(static_cast<int8_t>(d.type())), device_index_(d.index()) {}
  TensorOptions(DeviceType t) : device_type_(static_cast<int8_t>(t)) {}  // NOLINT
  TensorOptions dtype(ScalarType t) const {
    TensorOptions o = *this;
    o.dtype_ = static_cast<int8_t>(t);
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_type_ = static_cast<int8_t>(d.type());
    o.device_index_ = d.index();
    return o;
  }
  TensorOptions device(DeviceType t, int8_t index = -1) const { return device(Device(t, index)); }
};

template <typename T> struct ScalarTypeOf;  // no definition: a type torch has no dtype for
template <> struct ScalarTypeOf<uint8_t> { static constexpr ScalarType value = ScalarType::Byte; };
template <> struct ScalarTypeOf<int8_t> { static constexpr ScalarType value = ScalarType::Char; };
template <> struct ScalarTypeOf<int16_t> { static constexpr ScalarType value = ScalarType::Short; };
template <> struct ScalarTypeOf<int32_t> { static constexpr ScalarType value = ScalarType::Int; };
template <> struct ScalarTypeOf<int64_t> { static constexpr ScalarType value = ScalarType::Long; };
template <> struct ScalarTypeOf<float> { static constexpr ScalarType value = ScalarType::Float; };
template <> struct ScalarTypeOf<double> { static constexpr ScalarType value = ScalarType::Double; };
template <> struct ScalarTypeOf<bool> { static constexpr ScalarType value = ScalarType::Bool; };
#if defined(KZ_LITE_HALF)
template <> struct ScalarTypeOf<c10::Half> {
  static constexpr ScalarType value = ScalarType::Half;
};
template <> struct ScalarTypeOf<c10::BFloat16> {
  static constexpr ScalarType value = ScalarType::BFloat16;
};
#endif

template <ScalarType> struct CppTypeOf;  // the C++ type of a dtype, for AT_DISPATCH_*_AND*
template <> struct CppTypeOf<ScalarType::Byte> { using type = uint8_t; };
template <> struct CppTypeOf<ScalarType::Char> { using type = int8_t; };
template <> struct CppTypeOf<ScalarType::Short> { using type = int16_t; };
template <> struct CppTypeOf<ScalarType::Int> { using type = int32_t; };
template <> struct CppTypeOf<ScalarType::Long> { using type = int64_t; };
template <> struct CppTypeOf<ScalarType::Float> { using type = float; };
template <> struct CppTypeOf<ScalarType::Double> { using type = double; };
template <> struct CppTypeOf<ScalarType::Bool> { using type = bool; };
#if defined(KZ_LITE_HALF)
template <> struct CppTypeOf<ScalarType::Half> { using type = c10::Half; };
template <> struct CppTypeOf<ScalarType::BFloat16> { using type = c10::BFloat16; };
#endif


// torch's names for dtypes in messages.
inline const char* scalar_type_name(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "Byte";
    case ScalarType::Char: return "Char";
    case ScalarType::Short: return "Short";
    case ScalarType::Int: return "Int";
    case ScalarType::Long: return "Long";
    case ScalarType::Half: return "Half";
    case ScalarType::Float: return "Float";
    case ScalarType::Double: return "Double";
    case ScalarType::Bool: return "Bool";
    case ScalarType::BFloat16: return "BFloat16";
  }
  return "UNKNOWN_SCALAR";
}

// c10::str for messages: the arguments written one after another, as an ostream writes them
// (numbers with its default format, a dtype by torch's name), into a fixed buffer (longer
// messages are cut), without the stream headers.
struct Message {
  char text[2048];
  size_t length = 0;
  Message() { text[0] = '\0'; }
  void add(const char* s) {
    while (s != nullptr && *s != '\0' && length + 1 < sizeof(text)) text[length++] = *s++;
    text[length] = '\0';
  }
  template <typename... Args> void format(const char* spec, Args... args) {
    char buffer[64];
    snprintf(buffer, sizeof(buffer), spec, args...);
    add(buffer);
  }
};
inline void put(Message& m, const char* s) { m.add(s); }
inline void put(Message& m, char c) {
  const char s[2] = {c, '\0'};
  m.add(s);
}
inline void put(Message& m, signed char c) { put(m, static_cast<char>(c)); }  // as ostream
inline void put(Message& m, unsigned char c) { put(m, static_cast<char>(c)); }
inline void put(Message& m, ScalarType t) { m.add(scalar_type_name(t)); }
inline void put(Message& m, const void* p) {
  if (p == nullptr) {
    m.add("0");
  } else {
    m.format("%p", p);
  }
}
template <typename T>
typename std::enable_if<std::is_integral<T>::value && std::is_signed<T>::value>::type put(
    Message& m, T v) {
  m.format("%lld", static_cast<long long>(v));
}
template <typename T>
typename std::enable_if<std::is_integral<T>::value && !std::is_signed<T>::value>::type put(
    Message& m, T v) {
  m.format("%llu", static_cast<unsigned long long>(v));
}
template <typename T>
typename std::enable_if<std::is_floating_point<T>::value>::type put(Message& m, T v) {
  m.format("%g", static_cast<double>(v));
}
template <typename T>  // an unscoped enum, as its number (a scoped one has no ostream form)
typename std::enable_if<std::is_enum<T>::value && std::is_convertible<T, long long>::value>::type
put(Message& m, T v) {
  m.format("%lld", static_cast<long long>(v));
}
#if defined(KZ_LITE_STD_TEXT)
inline void put(Message& m, const std::string& s) { m.add(s.c_str()); }
// Anything else an ostream can write, written by one (what the overloads above take, as there:
// the same part reads the same in a .cu with these headers and in one without).
template <typename T>
typename std::enable_if<!std::is_arithmetic<T>::value && !std::is_enum<T>::value &&
                        !std::is_pointer<T>::value && !std::is_convertible<T, const char*>::value &&
                        !std::is_convertible<T, ScalarType>::value &&
                        !std::is_convertible<T, std::string>::value>::type
put(Message& m, const T& v) {
  std::ostringstream out;
  out << v;
  m.add(out.str().c_str());
}
#endif
inline void append(Message&) {}
template <typename T, typename... Rest>
void append(Message& m, const T& first, const Rest&... rest) {
  put(m, first);
  append(m, rest...);
}
template <typename... Args>
Message message(const Args&... args) {
  Message m;
  append(m, args...);
  return m;
}

#if defined(__CUDACC__)
// torch's CUDAStream converts to cudaStream_t; so does this.
struct CUDAStream {
  cudaStream_t stream_;
  operator cudaStream_t() const { return stream_; }  // NOLINT
  cudaStream_t stream() const { return stream_; }
};
inline CUDAStream getCurrentCUDAStream(int8_t device_index = -1) {
  return CUDAStream{static_cast<cudaStream_t>(kz_lite_current_stream(device_index))};
}

// torch's CUDAGuard and OptionalCUDAGuard: the current device set for a scope, then restored.
class OptionalCUDAGuard {
 public:
  OptionalCUDAGuard() = default;
  explicit OptionalCUDAGuard(Device d) { set_device(d); }
  explicit OptionalCUDAGuard(int8_t index) { set_index(index); }
  OptionalCUDAGuard(const OptionalCUDAGuard&) = delete;
  OptionalCUDAGuard& operator=(const OptionalCUDAGuard&) = delete;
  ~OptionalCUDAGuard() {
    if (original_ >= 0) cudaSetDevice(original_);
  }
  void set_device(Device d) {
    if (d.is_cuda() && d.has_index()) set_index(d.index());
  }
  void set_index(int8_t index) {
    if (original_ < 0) {
      int current = 0;
      if (cudaGetDevice(&current) != cudaSuccess) return;
      original_ = current;
    }
    cudaSetDevice(index);
  }

 private:
  int original_ = -1;
};
class CUDAGuard : public OptionalCUDAGuard {
 public:
  explicit CUDAGuard(Device d) : OptionalCUDAGuard(d) {}
  explicit CUDAGuard(int8_t index) : OptionalCUDAGuard(index) {}
};
#endif

}  // namespace kz_lite

namespace c10 {
using kz_lite::Device;
using kz_lite::IntArrayRef;
using kz_lite::TensorOptions;
}  // namespace c10

namespace at {

using c10::DeviceType;
using c10::ScalarType;
using kz_lite::Device;
using kz_lite::IntArrayRef;
using kz_lite::TensorOptions;

// Every member function of at::Tensor here, and every function of namespace at, is a template
// (KZ_LITE_DISTINCT), so that its linker symbol can never be one of torch's inline functions
// that main.cpp defines with the same name and arguments: the linker keeps one definition of a
// symbol, and torch's Tensor::type(), say, returns another type than this one's.
#define KZ_LITE_DISTINCT template <int KzLiteDistinct = 0>
// Constructors and the destructor cannot be templates: they are always inlined instead, so that
// no object file defines them out of line under torch's symbols. Otherwise the linker could
// keep this header's at::Tensor::Tensor() for the runtime too, which calls the runtime, which
// calls it again (a lite main.cpp is linked before the runtime).
#define KZ_LITE_SPECIAL __attribute__((always_inline)) inline

class Tensor {
 public:
  KZ_LITE_SPECIAL Tensor() { kz_lite_tensor_undefined(this); }
  KZ_LITE_SPECIAL Tensor(const Tensor& other) { kz_lite_tensor_copy(this, &other); }
  KZ_LITE_SPECIAL Tensor(Tensor&& other) noexcept { kz_lite_tensor_move(this, &other); }
  KZ_LITE_SPECIAL ~Tensor() { kz_lite_tensor_destroy(this); }
  KZ_LITE_SPECIAL Tensor& operator=(const Tensor& other) {
    kz_lite_tensor_assign(this, &other);
    return *this;
  }
  KZ_LITE_SPECIAL Tensor& operator=(Tensor&& other) noexcept {
    kz_lite_tensor_move_assign(this, &other);
    return *this;
  }

  KZ_LITE_DISTINCT bool defined() const { return kz_lite_defined(this) != 0; }
  KZ_LITE_DISTINCT int64_t numel() const { return kz_lite_numel(this); }
  KZ_LITE_DISTINCT int64_t dim() const { return kz_lite_dim(this); }
  KZ_LITE_DISTINCT int64_t ndimension() const { return kz_lite_dim(this); }
  KZ_LITE_DISTINCT int64_t size(int64_t d) const { return kz_lite_size(this, d); }
  KZ_LITE_DISTINCT int64_t stride(int64_t d) const { return kz_lite_stride(this, d); }
  KZ_LITE_DISTINCT IntArrayRef sizes() const {
    size_t n = 0;
    const int64_t* p = kz_lite_sizes(this, &n);
    return IntArrayRef(p, n);
  }
  KZ_LITE_DISTINCT IntArrayRef strides() const {
    size_t n = 0;
    const int64_t* p = kz_lite_strides(this, &n);
    return IntArrayRef(p, n);
  }
  KZ_LITE_DISTINCT int64_t element_size() const { return kz_lite_element_size(this); }
  KZ_LITE_DISTINCT bool is_cuda() const { return kz_lite_is_cuda(this) != 0; }
  KZ_LITE_DISTINCT bool is_contiguous() const { return kz_lite_is_contiguous(this) != 0; }
  KZ_LITE_DISTINCT ScalarType scalar_type() const {
    return static_cast<ScalarType>(kz_lite_scalar_type(this));
  }
  KZ_LITE_DISTINCT Device device() const {
    int8_t type = 0, index = -1;
    kz_lite_device(this, &type, &index);
    return Device(static_cast<DeviceType>(type), index);
  }
  KZ_LITE_DISTINCT int64_t get_device() const {
    return device().is_cuda() ? device().index() : -1;
  }
  KZ_LITE_DISTINCT TensorOptions options() const {
    return TensorOptions().dtype(scalar_type()).device(device());
  }
  KZ_LITE_DISTINCT Tensor contiguous() const {
    Tensor out;
    kz_lite_contiguous(&out, this);
    return out;
  }
  KZ_LITE_DISTINCT Tensor view(IntArrayRef shape) const {
    Tensor out;
    kz_lite_view(&out, this, shape.data(), shape.size(), 0);
    return out;
  }
  KZ_LITE_DISTINCT Tensor reshape(IntArrayRef shape) const {
    Tensor out;
    kz_lite_view(&out, this, shape.data(), shape.size(), 1);
    return out;
  }
  KZ_LITE_DISTINCT void* data_ptr() const { return kz_lite_data_ptr(this, 0, 0); }
  template <typename T, int KzLiteDistinct = 0> T* data_ptr() const {
    return static_cast<T*>(
        kz_lite_data_ptr(this, static_cast<int8_t>(kz_lite::ScalarTypeOf<T>::value), 1));
  }
  template <typename T, int KzLiteDistinct = 0> T* mutable_data_ptr() const {
    return data_ptr<T>();
  }
  template <typename T, int KzLiteDistinct = 0> const T* const_data_ptr() const {
    return data_ptr<T>();
  }
  KZ_LITE_DISTINCT kz_lite::DType dtype() const { return kz_lite::DType{scalar_type()}; }
  KZ_LITE_DISTINCT kz_lite::DType type() const { return kz_lite::DType{scalar_type()}; }
  KZ_LITE_DISTINCT Tensor& zero_() { return in_place(0, 0.0); }
  KZ_LITE_DISTINCT Tensor& fill_(double value) { return in_place(1, value); }
  KZ_LITE_DISTINCT Tensor to(ScalarType t) const {
    return op(2, static_cast<double>(static_cast<int>(t)), 0, 0);
  }
  KZ_LITE_DISTINCT Tensor t() const { return op(3, 0.0, 0, 0); }
  KZ_LITE_DISTINCT Tensor transpose(int64_t dim0, int64_t dim1) const {
    return op(4, 0.0, dim0, dim1);
  }

 private:
  KZ_LITE_DISTINCT Tensor op(int code, double value, int64_t dim0, int64_t dim1) const {
    Tensor out;
    kz_lite_op(&out, this, code, value, dim0, dim1);
    return out;
  }
  KZ_LITE_DISTINCT Tensor& in_place(int code, double value) {
    Tensor ignored;
    kz_lite_op(&ignored, this, code, value, 0, 0);
    return *this;
  }
  void* impl_;  // torch's intrusive pointer to the TensorImpl
};

}  // namespace at

namespace kz_lite {
// fill: 0 empty, 1 zeros, 2 ones.
inline at::Tensor make(IntArrayRef size, TensorOptions o, int fill) {
  at::Tensor out;
  kz_lite_new(&out, size.data(), size.size(), o.dtype_, o.device_type_, o.device_index_, fill);
  return out;
}
inline at::Tensor make_like(const at::Tensor& self, TensorOptions o, int fill) {
  at::Tensor out;
  kz_lite_new_like(&out, &self, o.dtype_, o.device_type_, o.device_index_, fill);
  return out;
}
inline at::Tensor empty(IntArrayRef size, TensorOptions o = {}) { return make(size, o, 0); }
inline at::Tensor zeros(IntArrayRef size, TensorOptions o = {}) { return make(size, o, 1); }
inline at::Tensor ones(IntArrayRef size, TensorOptions o = {}) { return make(size, o, 2); }
inline at::Tensor empty_like(const at::Tensor& t, TensorOptions o = {}) {
  return make_like(t, o, 0);
}
inline at::Tensor zeros_like(const at::Tensor& t, TensorOptions o = {}) {
  return make_like(t, o, 1);
}
inline at::Tensor ones_like(const at::Tensor& t, TensorOptions o = {}) {
  return make_like(t, o, 2);
}
inline TensorOptions dtype(ScalarType t) { return TensorOptions().dtype(t); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }

constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kShort = ScalarType::Short;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kLong = ScalarType::Long;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kDouble = ScalarType::Double;
constexpr ScalarType kBool = ScalarType::Bool;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;
}  // namespace kz_lite

#define KZ_LITE_EXPORT_NAMES                                                              \
  using kz_lite::empty;                                                                   \
  using kz_lite::empty_like;                                                              \
  using kz_lite::ones;                                                                    \
  using kz_lite::ones_like;                                                               \
  using kz_lite::zeros;                                                                   \
  using kz_lite::zeros_like;                                                              \
  using kz_lite::kBFloat16;                                                               \
  using kz_lite::kBool;                                                                   \
  using kz_lite::kByte;                                                                   \
  using kz_lite::kChar;                                                                   \
  using kz_lite::kCPU;                                                                    \
  using kz_lite::kCUDA;                                                                   \
  using kz_lite::kDouble;                                                                 \
  using kz_lite::kFloat;                                                                  \
  using kz_lite::kHalf;                                                                   \
  using kz_lite::kInt;                                                                    \
  using kz_lite::kLong;                                                                   \
  using kz_lite::kShort;

namespace at {
KZ_LITE_EXPORT_NAMES
// torch's device_of gives an optional Device; the guards take it as a Device here.
KZ_LITE_DISTINCT Device device_of(const Tensor& t) { return t.device(); }
#if defined(__CUDACC__)
namespace cuda {
using kz_lite::CUDAGuard;
using kz_lite::CUDAStream;
using kz_lite::OptionalCUDAGuard;
using kz_lite::getCurrentCUDAStream;
}  // namespace cuda
#endif
}  // namespace at

namespace torch {
KZ_LITE_EXPORT_NAMES
using at::Device;
using at::DeviceType;
using at::IntArrayRef;
using at::ScalarType;
using at::Tensor;
using at::TensorOptions;
using kz_lite::device;
using kz_lite::dtype;
constexpr ScalarType kFloat32 = ScalarType::Float;
constexpr ScalarType kFloat64 = ScalarType::Double;
constexpr ScalarType kFloat16 = ScalarType::Half;
constexpr ScalarType kInt32 = ScalarType::Int;
constexpr ScalarType kInt64 = ScalarType::Long;
constexpr ScalarType kInt16 = ScalarType::Short;
constexpr ScalarType kInt8 = ScalarType::Char;
constexpr ScalarType kUInt8 = ScalarType::Byte;
}  // namespace torch

#undef KZ_LITE_EXPORT_NAMES

#if defined(__CUDACC__)
namespace c10 {
namespace cuda {
using kz_lite::CUDAGuard;
using kz_lite::CUDAStream;
using kz_lite::OptionalCUDAGuard;
using kz_lite::getCurrentCUDAStream;
}  // namespace cuda
}  // namespace c10
#endif

#define TORCH_CHECK(cond, ...)                                                            \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::kz_lite_check_failed(__FILE__, __LINE__, #cond,                                   \
                             ::kz_lite::message("", ##__VA_ARGS__).text);                 \
    }                                                                                     \
  } while (0)

// torch's error checks, all raising as TORCH_CHECK does.
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define AT_ASSERTM(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define AT_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)

namespace kz_lite {
[[noreturn]] inline void dispatch_failed(const char* file, int line, const char* name,
                                         ScalarType t) {
  kz_lite_check_failed(file, line, name,
                       message("\"", name, "\" not implemented for '", t, "'").text);
}
}  // namespace kz_lite

// torch's AT_DISPATCH_* macros: the lambda run with scalar_t the C++ type of the dtype.
#define KZ_LITE_CASE(ST, ...)                                                             \
  case ST: {                                                                              \
    using scalar_t = ::kz_lite::CppTypeOf<ST>::type;                                      \
    return __VA_ARGS__();                                                                 \
  }
#define KZ_LITE_DISPATCH(TYPE, NAME, CASES)                                               \
  [&] {                                                                                   \
    const ::c10::ScalarType _kz_st = (TYPE);                                              \
    switch (_kz_st) {                                                                     \
      CASES                                                                               \
      default: ::kz_lite::dispatch_failed(__FILE__, __LINE__, NAME, _kz_st);              \
    }                                                                                     \
  }()
#define KZ_LITE_FLOATING(...)                                                             \
  KZ_LITE_CASE(::c10::ScalarType::Double, __VA_ARGS__)                                    \
  KZ_LITE_CASE(::c10::ScalarType::Float, __VA_ARGS__)
#define KZ_LITE_INTEGRAL(...)                                                             \
  KZ_LITE_CASE(::c10::ScalarType::Byte, __VA_ARGS__)                                      \
  KZ_LITE_CASE(::c10::ScalarType::Char, __VA_ARGS__)                                      \
  KZ_LITE_CASE(::c10::ScalarType::Int, __VA_ARGS__)                                       \
  KZ_LITE_CASE(::c10::ScalarType::Long, __VA_ARGS__)                                      \
  KZ_LITE_CASE(::c10::ScalarType::Short, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)                                       \
  KZ_LITE_DISPATCH(TYPE, NAME, KZ_LITE_FLOATING(__VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND(S1, TYPE, NAME, ...)                               \
  KZ_LITE_DISPATCH(TYPE, NAME, KZ_LITE_FLOATING(__VA_ARGS__) KZ_LITE_CASE(S1, __VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND2(S1, S2, TYPE, NAME, ...)                          \
  KZ_LITE_DISPATCH(TYPE, NAME, KZ_LITE_FLOATING(__VA_ARGS__) KZ_LITE_CASE(S1, __VA_ARGS__) \
                   KZ_LITE_CASE(S2, __VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND_HALF(TYPE, NAME, ...)                              \
  AT_DISPATCH_FLOATING_TYPES_AND(::c10::ScalarType::Half, TYPE, NAME, __VA_ARGS__)
#define AT_DISPATCH_INTEGRAL_TYPES(TYPE, NAME, ...)                                       \
  KZ_LITE_DISPATCH(TYPE, NAME, KZ_LITE_INTEGRAL(__VA_ARGS__))
#define AT_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                                            \
  KZ_LITE_DISPATCH(TYPE, NAME, KZ_LITE_FLOATING(__VA_ARGS__) KZ_LITE_INTEGRAL(__VA_ARGS__))

#if defined(__CUDACC__)
#define C10_CUDA_CHECK(EXPR)                                                              \
  do {                                                                                    \
    const cudaError_t _kz_err = (EXPR);                                                   \
    if (_kz_err != cudaSuccess) {                                                         \
      ::kz_lite_check_failed(                                                             \
          __FILE__, __LINE__, #EXPR,                                                      \
          ::kz_lite::message("CUDA error: ", cudaGetErrorString(_kz_err)).text);          \
    }                                                                                     \
  } while (0)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
#define AT_CUDA_CHECK(EXPR) C10_CUDA_CHECK(EXPR)
#endif
