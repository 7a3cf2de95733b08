"""CUDA builds against kz_torch_lite.h (sandbox/lite_build.py, sandbox/lite/).

On the CPU: the same C++ source, compiled once against the lite header and once against torch's,
in one extension (so torch's at::Tensor and the lite one meet in one library, as main.cpp and a
lite .cu do), gives the same results and the same errors on the same tensors; the honest CUDA
candidates' kernel files compile against the lite header with nvcc; the lite build is tried
first and falls back to the fast build when it fails.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import re
import shutil
import subprocess

import pytest
import torch

from kernelzero_jax.sandbox import fast_build
from kernelzero_jax.sandbox import lite_build
from kernelzero_jax.sandbox import lite_capi
from test_fast_build import BUILD_FAILURE, FakeLoadInline

CANDIDATES = pathlib.Path(__file__).parent.parent / "benchmarks" / "candidates" / "honest"

KERNEL = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void k(float* x) { x[0] = 1.f; }
"""


def test_the_torch_includes_become_one_lite_include():
  lite = lite_build.lite_cuda_source(KERNEL)
  assert lite.splitlines() == ['#include "kz_torch_lite.h"', "",
                               "__global__ void k(float* x) { x[0] = 1.f; }"]


@pytest.mark.parametrize("source", [
    "#include <cuda_runtime.h>\n__global__ void k() {}\n",  # no torch header: nothing to gain
    KERNEL + "#include <ATen/cuda/Atomic.cuh>\n",  # a header the lite one does not cover
    KERNEL.replace("ATen/cuda/CUDAContext.h", "ATen/native/cuda/Loops.cuh"),
])
def test_sources_the_lite_header_cannot_serve_are_not_rewritten(source):
  assert lite_build.lite_cuda_source(source) is None
  assert lite_build.lite_cuda_sources([source]) is None
  if "torch" in source or "ATen" in source:
    assert lite_build.lite_cuda_sources([KERNEL, source]) is None


@pytest.mark.parametrize("code,text", [
    ('std::string s = "x";', True),
    ('throw std::runtime_error("no");', True),
    ("std::cout << n;", True),
    ("auto s = std::to_string(n);", True),
    ("using namespace std;", True),
    ("std::ostringstream out;", True),
    ("int n = std::min(a, b); std::vector<int64_t> v; printf(\"%d\", n);", False),
    ("int hexes = strings_of_it;", False),
])
def test_a_cu_that_names_the_standard_text_headers_gets_them(code, text):
  lite = lite_build.lite_cuda_source(KERNEL + code + "\n")
  include = '#include "kz_torch_lite.h"'
  assert lite.startswith("#define KZ_LITE_STD_TEXT\n" + include if text else include)
  half = lite_build.lite_cuda_source(KERNEL + code + "\n__half h;\n")
  assert half.startswith("#define KZ_LITE_HALF\n" + ("#define KZ_LITE_STD_TEXT\n" if text else "")
                         + include)
  # main.cpp's headers always have them (kz_torch_lite_bind.h, kz_torch_lite_capi.h).
  assert "KZ_LITE_STD_TEXT" not in lite_build.lite_cpp_sources([KERNEL + code])[0]


def test_every_cu_gets_the_standard_text_headers_where_asked(monkeypatch):
  """std_text_always (or KZ_LITE_STD_TEXT_ALWAYS=1 in the environment, benchmarks' path token
  `stdtext`): every lite .cu defines KZ_LITE_STD_TEXT, as before 2026-12-06; otherwise only one
  that names what the text headers declare."""
  include = '#include "kz_torch_lite.h"'
  assert lite_build.lite_cuda_source(KERNEL).startswith(include)
  assert lite_build.lite_cuda_source(KERNEL, std_text_always=True).startswith(
      "#define KZ_LITE_STD_TEXT\n" + include)
  monkeypatch.setenv("KZ_LITE_STD_TEXT_ALWAYS", "1")
  (lite,) = lite_build.lite_cuda_sources([KERNEL, "__device__ __half h;\n"])
  assert lite.startswith("#define KZ_LITE_HALF\n#define KZ_LITE_STD_TEXT\n" + include)
  assert lite_build.lite_cuda_source(KERNEL, std_text_always=False).startswith(include)
  monkeypatch.setenv("KZ_LITE_STD_TEXT_ALWAYS", "0")
  assert lite_build.lite_cuda_source(KERNEL).startswith(include)
  assert lite_build.lite_cuda_source("__global__ void k() {}\n") is None  # (no torch include)


def test_several_cuda_sources_become_the_one_lite_cu_load_inline_writes():
  """A source without torch includes rides on the other's lite header; one that names half
  turns on KZ_LITE_HALF for the whole file."""
  other = "__device__ __half h;\n"
  (lite,) = lite_build.lite_cuda_sources([KERNEL, other])
  assert lite == lite_build.lite_cuda_source(KERNEL + "\n" + other)
  assert lite.startswith('#define KZ_LITE_HALF\n#include "kz_torch_lite.h"')


# One body, two translation units: KZ(name) names its functions after the header it saw.
BODY = r"""
std::vector<int64_t> KZ(geometry)(torch::Tensor x) {
  std::vector<int64_t> out = {x.numel(), x.dim(), x.ndimension(), x.element_size(),
                              x.is_contiguous(), x.is_cuda(), (int64_t)x.scalar_type(),
                              x.device().is_cpu(), x.get_device(), x.defined()};
  for (auto s : x.sizes().vec()) out.push_back(s);
  for (auto s : x.strides()) out.push_back(s);
  for (int64_t d = 0; d < x.dim(); ++d) {
    out.push_back(x.size(d)); out.push_back(x.stride(d)); out.push_back(x.size(-1 - d));
  }
  return out;
}

torch::Tensor KZ(make)(torch::Tensor x, int64_t which) {
  switch (which) {
    case 0: return torch::zeros({2, 3}, torch::TensorOptions().dtype(torch::kFloat64));
    case 1: return torch::ones({4}, x.options());
    case 2: return torch::zeros_like(x);
    case 3: return torch::ones_like(x, torch::dtype(torch::kInt32));
    case 4: return torch::empty_like(x);
    case 5: return torch::empty(x.sizes(), x.options());
    case 6: return x.contiguous();
    case 7: return x.reshape({-1});
    case 8: return x.view({x.numel()});
    case 9: return torch::zeros({0}, torch::kFloat32);
    case 10: return torch::ones({2, 2}, torch::kCPU);
    default: {
      torch::Tensor a = x, b;
      b = a;
      torch::Tensor c(std::move(b));
      b = std::move(c);
      return b;
    }
  }
}

double KZ(total)(torch::Tensor x) {
  double total = 0;
  torch::Tensor y = x.contiguous();
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "total", [&] {
    const scalar_t* p = y.data_ptr<scalar_t>();
    for (int64_t i = 0; i < y.numel(); ++i) total += p[i];
  });
  return total;
}

torch::Tensor KZ(ops)(torch::Tensor x, int64_t which) {
  switch (which) {
    case 0: { auto y = torch::empty_like(x); y.fill_(2.5); return y; }
    case 1: { auto y = torch::ones_like(x); y.zero_(); return y; }
    case 2: return x.to(torch::kFloat64);
    case 3: return x.dim() == 2 ? x.t() : x.to(torch::kInt64);
    case 4: return x.dim() >= 2 ? x.transpose(0, 1) : x.transpose(0, 0);
    case 5: return torch::zeros({2}, x.dtype());
    default:
      return torch::ones({1}, torch::TensorOptions().dtype(x.dtype()).device(at::device_of(x)));
  }
}

int64_t KZ(kinds)(torch::Tensor x) {
  return (x.dtype() == torch::kFloat32) + 2 * (x.dtype() != torch::kInt32) +
         4 * (x.type().scalarType() == at::kHalf) + 8 * (int64_t)x.dtype().toScalarType();
}

double KZ(sums)(torch::Tensor x, int64_t which) {
  double total = 0;
  torch::Tensor y = x.contiguous();
  auto add_all = [&](auto* p) { for (int64_t i = 0; i < y.numel(); ++i) total += (double)p[i]; };
  if (which == 0) AT_DISPATCH_FLOATING_TYPES_AND_HALF(y.scalar_type(), "sums", [&] {
    add_all(y.data_ptr<scalar_t>()); });
  if (which == 1) AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16,
                                                  y.scalar_type(), "sums", [&] {
    add_all(y.data_ptr<scalar_t>()); });
  if (which == 2) AT_DISPATCH_ALL_TYPES(y.scalar_type(), "sums", [&] {
    add_all(y.data_ptr<scalar_t>()); });
  if (which == 3) AT_DISPATCH_INTEGRAL_TYPES(y.scalar_type(), "sums", [&] {
    add_all(y.data_ptr<scalar_t>()); });
  if (which == 4) AT_DISPATCH_FLOATING_TYPES_AND(at::kHalf, y.scalar_type(), "sums", [&] {
    add_all(y.const_data_ptr<scalar_t>()); });
  if (which == 5) add_all(y.data_ptr<at::Half>());
  return total;
}

int64_t KZ(size_at)(torch::Tensor x, int64_t dim) { return x.size(dim); }

int64_t KZ(check)(torch::Tensor x, int64_t which) {
  if (which == 0) TORCH_CHECK(x.dim() == 1, "need 1-D, got ", x.dim(), "-D ", x.scalar_type());
  if (which == 1) TORCH_CHECK(x.is_contiguous());
  if (which == 2) return x.data_ptr<float>() != nullptr;
  if (which == 3) return x.data_ptr<int64_t>() != nullptr;
  if (which == 4) return x.const_data_ptr<double>() != nullptr;
  return 1;
}

double KZ(mixed)(torch::Tensor x, int k, double a, float b, bool flag,
                 std::vector<int64_t> shape) {
  return (flag ? 1.0 : -1.0) * (k + a + b + (double)shape.size() + (shape.empty() ? 0 : shape[0]))
         + x.numel();
}

std::vector<torch::Tensor> KZ(pieces)(std::vector<torch::Tensor> xs, const torch::Tensor& y) {
  std::vector<torch::Tensor> out(xs);
  out.push_back(y);
  return out;
}

void KZ(nothing)(torch::Tensor x) { TORCH_CHECK(x.dim() < 3, "3-D or more: ", x.dim()); }

bool KZ(is_float)(const torch::Tensor& x) { return x.scalar_type() == torch::kFloat32; }

enum Plain { kPlainThree = 3 };

void KZ(message)(torch::Tensor x, int64_t which) {
  TORCH_CHECK(which != 0, "i ", (int64_t)-3, " u ", (uint32_t)7, " s ", (short)-2, " d ", 0.1,
              " f ", 2.5f, " big ", 1e20, " small ", 1.5e-7, " z ", -0.0, " b ", true, " c ", 'x',
              " i8 ", (int8_t)65, " u8 ", (uint8_t)66, " e ", kPlainThree);
  TORCH_CHECK(which != 1, x.scalar_type(), " ", x.numel(), " at ", (const void*)x.data_ptr(),
              " null ", (const void*)nullptr, " ", (const char*)"chars");
  TORCH_CHECK(which != 2, "long ", 0.1, " ", 1234567.0, " ", 12345678.0, " ", 1.0 / 3.0,
              " ", -7.25f, " ", (long long)9000000000LL, " ", (unsigned long long)-1);
}
"""
# As above, for a source that names the standard text headers' names (KZ_LITE_STD_TEXT).
TEXT_BODY = r"""
void KZ(text_message)(torch::Tensor x) {
  std::string s = "text";
  TORCH_CHECK(x.dim() > 8, s, " ", std::string("more"), " ", std::string_view("view"), " ",
              x.dim(), " ", x.scalar_type(), " ", 0.25);
}
"""
NAMES = ("geometry", "make", "total", "ops", "kinds", "sums", "size_at", "check", "mixed",
         "pieces", "nothing", "is_float", "message")


@pytest.fixture(scope="module")
def both(tmp_path_factory):
  """The extension: bindings (torch's headers), the body twice, the lite runtime."""
  from torch.utils.cpp_extension import load  # pylint: disable=import-outside-toplevel
  src = tmp_path_factory.mktemp("lite_src")
  # As lite_build writes them: BODY names a 16-bit float type, TEXT_BODY std::string.
  lite = lite_build.lite_cuda_source("#include <torch/types.h>\n#define KZ(name) lite_##name\n"
                                     + BODY)
  assert lite.startswith('#define KZ_LITE_HALF\n#include "kz_torch_lite.h"\n')
  (src / "lite.cpp").write_text(lite)
  lite_text = lite_build.lite_cuda_source(
      "#include <torch/types.h>\n#define KZ(name) lite_##name\n" + TEXT_BODY)
  assert lite_text.startswith('#define KZ_LITE_STD_TEXT\n#include "kz_torch_lite.h"\n')
  (src / "lite_text.cpp").write_text(lite_text)
  (src / "real.cpp").write_text("#include <torch/types.h>\n#define KZ(name) real_##name\n"
                                + BODY + TEXT_BODY)
  declarations = re.findall(r"^(\S[^\n]*KZ\(\w+\)\([^)]*\))", BODY + TEXT_BODY, re.MULTILINE)
  main = ["#include <torch/extension.h>"]
  for prefix in ("lite", "real"):
    main += [d.replace("KZ(", f"{prefix}_").replace(")(", "(", 1) + ";" for d in declarations]
  main.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
  main += [f'  m.def("{p}_{n}", &{p}_{n});' for p in ("lite", "real")
           for n in (*NAMES, "text_message")]
  main.append("}")
  (src / "main.cpp").write_text("\n".join(main) + "\n")
  return load("kz_lite_parity", [str(src / "main.cpp"), str(src / "lite.cpp"),
                                 str(src / "lite_text.cpp"), str(src / "real.cpp"),
                                 lite_build.RUNTIME_SOURCE],
              extra_include_paths=[lite_build.LITE_DIR],
              build_directory=str(tmp_path_factory.mktemp("lite_build")))


TENSORS = {
    "float": torch.arange(6, dtype=torch.float32).reshape(2, 3),
    "transposed": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
    "double": torch.linspace(-1, 1, 5, dtype=torch.float64),
    "int": torch.arange(4, dtype=torch.int32),
    "long": torch.arange(3),
    "scalar": torch.tensor(2.5),
    "empty": torch.zeros(0, 3),
    "half": torch.linspace(-2, 2, 6, dtype=torch.float16).reshape(3, 2),
    "bfloat16": torch.arange(5, dtype=torch.bfloat16),
    "byte": torch.arange(7, dtype=torch.uint8),
}


def _outcome(fn, *args):
  try:
    out = fn(*args)
  except RuntimeError as e:
    return ("error", str(e).splitlines()[0])
  if isinstance(out, torch.Tensor):
    return ("tensor", out.dtype, tuple(out.shape), out.stride(), out.device)
  return ("value", out)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("tensor", list(TENSORS))
def test_the_lite_header_and_torchs_agree(both, tensor):
  x = TENSORS[tensor]
  assert _outcome(both.lite_geometry, x) == _outcome(both.real_geometry, x)
  assert _outcome(both.lite_total, x) == _outcome(both.real_total, x)
  for which in range(12):
    lite, real = _outcome(both.lite_make, x, which), _outcome(both.real_make, x, which)
    assert lite == real, (which, lite, real)
    if lite[0] == "tensor" and which not in (4, 5):  # empty* has no defined values
      assert torch.equal(both.lite_make(x, which), both.real_make(x, which)), which
  for which in range(5):
    assert _outcome(both.lite_check, x, which) == _outcome(both.real_check, x, which), which
  for which in range(7):
    lite, real = _outcome(both.lite_ops, x, which), _outcome(both.real_ops, x, which)
    assert lite == real, (which, lite, real)
    if lite[0] == "tensor":
      assert torch.equal(both.lite_ops(x, which), both.real_ops(x, which)), which
  assert _outcome(both.lite_kinds, x) == _outcome(both.real_kinds, x)
  for which in range(6):
    assert _outcome(both.lite_sums, x, which) == _outcome(both.real_sums, x, which), which


@pytest.fixture(scope="module")
def lite_bound(tmp_path_factory):
  """The body in a lite main.cpp as a lite build writes it: lite_cpp_sources, then the module
  load_inline generates (each function through torch::wrap_pybind_function), and the runtime."""
  from torch.utils.cpp_extension import load  # pylint: disable=import-outside-toplevel
  src = tmp_path_factory.mktemp("lite_bound_src")
  (main,) = lite_build.lite_cpp_sources(["#define KZ(name) lite_##name\n" + BODY])
  module = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
  module += [f'm.def("lite_{n}", torch::wrap_pybind_function(lite_{n}), "lite_{n}");'
             for n in NAMES]
  (src / "main.cpp").write_text(main + "\n" + "\n".join(module + ["}"]) + "\n")
  return load("kz_lite_bound", [str(src / "main.cpp"), lite_build.RUNTIME_SOURCE],
              extra_include_paths=[lite_build.LITE_DIR],
              build_directory=str(tmp_path_factory.mktemp("lite_bound_build")))


@pytest.fixture(scope="module")
def capi_bound(tmp_path_factory):
  """The body in a C-API main.cpp (lite_capi.capi_main_cpp: no pybind11), and the runtime."""
  from torch.utils.cpp_extension import load  # pylint: disable=import-outside-toplevel
  src = tmp_path_factory.mktemp("capi_bound_src")
  body = "#include <torch/extension.h>\n" + re.sub(r"KZ\((\w+)\)", r"lite_\1", BODY)
  main = lite_capi.capi_main_cpp([body], [f"lite_{n}" for n in NAMES])
  assert main is not None
  (src / "main.cpp").write_text(main)
  return load("kz_capi_bound", [str(src / "main.cpp"), lite_build.RUNTIME_SOURCE],
              extra_include_paths=[lite_build.LITE_DIR],
              build_directory=str(tmp_path_factory.mktemp("capi_bound_build")))


@pytest.fixture(params=["lite_bound", "capi_bound"])
def bound(request):
  """A lite main.cpp either way: pybind11 against the binding header, or CPython's API."""
  return request.getfixturevalue(request.param)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("tensor", list(TENSORS))
def test_a_lite_main_cpp_binds_as_torchs_does(bound, both, tensor):
  """Same body: bound through the lite binding header or CPython's API, and through torch's
  (the `both` extension's real_* functions): the same results and the same errors."""
  lite_bound = bound
  x = TENSORS[tensor]
  for name, whiches in (("geometry", [()]), ("total", [()]), ("kinds", [()]),
                        ("make", [(w,) for w in range(12)]), ("check", [(w,) for w in range(5)]),
                        ("ops", [(w,) for w in range(7)]), ("sums", [(w,) for w in range(6)])):
    lite, real = getattr(lite_bound, f"lite_{name}"), getattr(both, f"real_{name}")
    for which in whiches:
      assert _outcome(lite, x, *which) == _outcome(real, x, *which), (name, which)


def test_a_lite_main_cpp_rejects_and_returns_python_objects_as_torchs_does(bound, both):
  lite_bound = bound
  for bad in ("not a tensor", None, [1.0, 2.0], torch.arange(3).numpy()):
    for fn in (lite_bound.lite_total, both.real_total):
      with pytest.raises(TypeError, match="incompatible function arguments"):
        fn(bad)
  with pytest.raises(TypeError):
    lite_bound.lite_make(torch.ones(2), 1.5)  # a float where int64_t is declared
  x = torch.nn.Parameter(torch.arange(4.0))
  assert lite_bound.lite_make(x, 11) is x  # the same Python object back, as torch's caster
  import sys  # pylint: disable=import-outside-toplevel
  before = sys.getrefcount(x)
  for _ in range(100):
    lite_bound.lite_make(x, 11)
    lite_bound.lite_geometry(x)
  assert sys.getrefcount(x) == before
  for fn in (lite_bound.lite_size_at, both.real_size_at, both.lite_size_at):
    assert fn(x, -1) == 4
    with pytest.raises(IndexError, match="Dimension out of range"):  # torch's error types
      fn(x, 3)


def _called(fn, *args):
  """What a call gives, as far as a binding decides it: the value, or the error's type (and
  torch's message, which is the function's own)."""
  try:
    out = fn(*args)
  except TypeError:
    return ("TypeError",)
  except Exception as e:  # pylint: disable=broad-except
    return (type(e).__name__, str(e).splitlines()[0])
  if isinstance(out, list):
    return ("list", [(t.data_ptr(), t.dtype) for t in out])
  return ("value", out)


def test_a_lite_main_cpp_converts_every_bound_type_as_torchs_does(bound, both):
  """Integers, floats, bools, lists of integers and of tensors, void: pybind11's conversions
  (an int for a float, a bool or numpy integer for an int, None or 0 for a bool, a tuple for a
  list; no float for an int, no int past 32 bits for an int) either way."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  class Raising:  # a sequence whose items raise: the error itself comes back, not a TypeError
    def __len__(self):
      return 2

    def __getitem__(self, i):
      raise ValueError(f"no item {i}")

  x, y = torch.ones(2, 3), torch.zeros(2, dtype=torch.float64)
  calls = [("mixed", (x, 1, 2.5, 0.5, True, [4, 5])), ("mixed", (x, 1, 2, 0.5, False, (4,))),
           ("mixed", (x, True, 2.0, 1, None, [])), ("mixed", (x, np.int64(3), 1.0, 1.0, 0, [1])),
           ("mixed", (x, 1.5, 2.0, 1.0, True, [1])), ("mixed", (x, 2**40, 2.0, 1.0, True, [1])),
           ("mixed", (x, 1, "2", 1.0, True, [1])), ("mixed", (x, 1, 2.0, 1.0, True, [1.5])),
           ("mixed", (x, 1, 2.0, 1.0, True)), ("mixed", (None, 1, 2.0, 1.0, True, [1])),
           ("pieces", ([x, y], y)), ("pieces", ((x,), x)), ("pieces", ([], y)),
           ("pieces", ([x, 1], y)), ("pieces", (Raising(), y)),
           ("mixed", (x, 1, 2.0, 1.0, True, Raising())), ("nothing", (x,)),
           ("nothing", (torch.ones(1, 1, 1),)),
           ("is_float", (x,)), ("is_float", (y,))]
  for name, args in calls:
    lite, real = getattr(bound, f"lite_{name}"), getattr(both, f"real_{name}")
    assert _called(lite, *args) == _called(real, *args), (name, args)
  assert _called(bound.lite_nothing, torch.ones(1, 1, 1)) == ("RuntimeError", "3-D or more: 3")
  assert _called(bound.lite_pieces, Raising(), y) == ("ValueError", "no item 0")
  assert _called(bound.lite_mixed, x, 1, 2.0, 1.0, True, [1]) == ("value", 12.0)


def test_tensors_cross_the_lite_code_without_leaks_or_copies(both):
  import sys  # pylint: disable=import-outside-toplevel
  x = torch.arange(5.0)
  before = sys.getrefcount(x)
  for _ in range(100):
    same = both.lite_make(x, 11)  # copy, assign, move in the lite code: the same tensor back
    assert same.data_ptr() == x.data_ptr()
    del same
    both.lite_geometry(x)
  assert sys.getrefcount(x) == before
  reshaped = both.lite_make(x, 7)
  assert reshaped.data_ptr() == x.data_ptr()  # a view, as torch's reshape gives


def _message(fn, *args) -> str:
  with pytest.raises(RuntimeError) as raised:
    fn(*args)
  return str(raised.value).splitlines()[0]


def test_messages_are_written_as_torchs(both):
  """The lite header writes a message's parts itself, without the stream headers, unless the
  source names them (KZ_LITE_STD_TEXT): every kind of part as torch's c10::str writes it."""
  x = TENSORS["float"]
  for which in range(3):
    assert _message(both.lite_message, x, which) == _message(both.real_message, x, which)
  assert _message(both.lite_message, x, 0) == (
      "i -3 u 7 s -2 d 0.1 f 2.5 big 1e+20 small 1.5e-07 z -0 b 1 c x i8 A u8 B e 3")
  assert _message(both.lite_text_message, x) == _message(both.real_text_message, x)
  assert _message(both.lite_text_message, x) == "text more view 2 Float 0.25"


def test_the_errors_are_torchs(both):
  x = TENSORS["double"]
  assert _outcome(both.lite_check, x, 2) == ("error", "expected scalar type Float but found Double")
  assert _outcome(both.lite_check, TENSORS["float"], 0) == ("error", "need 1-D, got 2-D Float")
  assert _outcome(both.lite_total, TENSORS["int"]) == ("error",
                                                        "\"total\" not implemented for 'Int'")
  assert _outcome(both.lite_check, TENSORS["transposed"], 1)[1].startswith(
      "Expected x.is_contiguous() to be true, but got false.")


NVCC = shutil.which("nvcc")


def _cuda_source(path: pathlib.Path) -> str:
  return re.search(r'cuda_src\w* = r?"""(.*?)"""', path.read_text(), re.DOTALL).group(1)


def _nvcc(source: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess:
  """nvcc with load_inline's CUDA flags (torch's include directory: c10's 16-bit floats)."""
  from torch.utils.cpp_extension import include_paths  # pylint: disable=import-outside-toplevel
  cu = tmp_path / "k.cu"
  cu.write_text(source)
  return subprocess.run([NVCC, "-std=c++17", "-O3", "--expt-relaxed-constexpr",
                         "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                         "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                         "-gencode=arch=compute_90,code=sm_90", f"-I{lite_build.LITE_DIR}",
                         "-isystem", include_paths()[0], "-c", str(cu),
                         "-o", str(tmp_path / "k.o")],
                        capture_output=True, text=True, timeout=240)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("candidate", sorted(p.name for p in CANDIDATES.glob("*_cuda.py")))
def test_honest_kernel_files_compile_against_the_lite_header(candidate, tmp_path):
  lite = lite_build.lite_cuda_source(_cuda_source(CANDIDATES / candidate))
  assert lite is not None
  proc = _nvcc(lite, tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["elementwise", "reduction", "softmax", "matmul"])
def test_the_teachers_kernel_files_compile_against_the_lite_header(kind, tmp_path):
  """The rule-based teacher writes most of the warm start's CUDA candidates."""
  import random  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.teacher import cuda_writer  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.teacher import generator  # pylint: disable=import-outside-toplevel
  spec = generator.sample_spec(random.Random(0), kind)
  source = re.search(r'cuda_source = r"""(.*?)"""', cuda_writer.write_cuda(spec),
                     re.DOTALL).group(1)
  proc = _nvcc(lite_build.lite_cuda_source(source), tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]


GUARDED_HALF = r"""#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <ATen/cuda/CUDAContext.h>
template <typename scalar_t>
__global__ void twice(const scalar_t* x, scalar_t* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = static_cast<scalar_t>(static_cast<float>(x[i]) * 2.f);
}
torch::Tensor f(torch::Tensor x) {
  const at::cuda::OptionalCUDAGuard guard(device_of(x));
  at::cuda::CUDAGuard same(x.device());
  TORCH_CHECK(x.dtype() == torch::kFloat16 || x.type().scalarType() != at::kBFloat16);
  auto y = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "twice", [&] {
    twice<scalar_t><<<(x.numel() + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), x.numel());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  AT_CUDA_CHECK(cudaGetLastError());
  return y;
}
"""


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_guards_and_half_kernels_compile_against_the_lite_header(tmp_path):
  lite = lite_build.lite_cuda_source(GUARDED_HALF)
  assert lite.splitlines()[:2] == ["#define KZ_LITE_HALF", '#include "kz_torch_lite.h"']
  proc = _nvcc(lite, tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_a_kernel_file_that_asserts_compiles_against_the_lite_header(tmp_path):
  """torch's headers bring in assert (a kernel file may use it without including <cassert>),
  so the lite header does too."""
  source = KERNEL + ("__global__ void checked(const float* x, int n) { assert(n > 0); }\n"
                     "void f(torch::Tensor x) { assert(x.dim() == 2); }\n")
  proc = _nvcc(lite_build.lite_cuda_source(source), tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_a_name_the_lite_header_lacks_fails_to_compile(tmp_path):
  """...so fast_load_inline builds that .cu with torch's headers instead."""
  source = KERNEL + "torch::Tensor f(torch::Tensor x) { return x.permute({1, 0}); }\n"
  proc = _nvcc(lite_build.lite_cuda_source(source), tmp_path)
  assert proc.returncode != 0 and "permute" in proc.stderr


def test_the_lite_build_comes_first():
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, "/cache/h.h", log.append, lite_object="/cache/rt.o")
  assert load("ext", "int g();", KERNEL, extra_ldflags=["-lfoo"]) == "module 1"
  (call,) = fake.calls
  # load_inline is told not to put torch/types.h above the lite header; main.cpp gets the
  # binding header instead of torch/extension.h (and no PCH), the .cu the CUDA headers
  # load_inline would have added.
  assert call["no_implicit_headers"] is True
  assert call["cpp_sources"] == ['#include "kz_torch_lite_bind.h"\nint g();']
  assert call["cuda_sources"] == ["#include <cuda.h>\n#include <cuda_runtime.h>\n"
                                  + lite_build.lite_cuda_source(KERNEL)]
  assert call["extra_include_paths"] == [lite_build.LITE_DIR]
  assert call["extra_ldflags"] == ["-lfoo", "/cache/rt.o"]
  assert call["extra_cflags"] is None
  assert log == ["lite build (kz_torch_lite.h for the .cu and main.cpp)"]


def test_a_lite_main_cpp_searches_the_precompiled_binding_header_first():
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, "/cache/h.h", log.append, lite_object="/cache/rt.o",
                                     bind_dir="/cache/bind")
  load("ext", "int g();", KERNEL, extra_include_paths=["/mine"])
  (call,) = fake.calls
  # Both files find the bind directory's copies of the lite headers first; the candidate's own
  # directories come after ours, as they come after torch's in a plain build.
  assert call["extra_include_paths"] == ["/cache/bind", lite_build.LITE_DIR, "/mine"]
  assert call["cpp_sources"] == ['#include "kz_torch_lite_bind.h"\nint g();']
  assert call["extra_cflags"] is None
  assert log == ["lite build (kz_torch_lite.h for the .cu and main.cpp, binding header "
                 "precompiled)"]
  # A main.cpp that is not lite has no use for it: the .cu alone searches the lite directory.
  fake = FakeLoadInline()
  fast_build.fast_load_inline(fake, "/cache/h.h", lite_object="/cache/rt.o", lite_main=False,
                              bind_dir="/cache/bind")("ext", "int g();", KERNEL)
  assert fake.calls[0]["extra_include_paths"] == [lite_build.LITE_DIR]


@pytest.mark.parametrize("lite_main, cpp", [
    (False, "int g();"),  # asked for
    (True, "#include <torch/python.h>\nint g();"),  # a header the binding one does not cover
])
def test_main_cpp_keeps_torchs_headers_and_the_pch_where_it_cannot_be_lite(lite_main, cpp):
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, "/cache/h.h", log.append, lite_object="/cache/rt.o",
                                     lite_main=lite_main)
  load("ext", cpp, KERNEL)
  (call,) = fake.calls
  assert call["cpp_sources"] == ["#include <torch/extension.h>", cpp]
  assert call["extra_cflags"] == ["-include", "/cache/h.h"]
  assert call["cuda_sources"][0].endswith(lite_build.lite_cuda_source(KERNEL))
  assert log == ["lite build (kz_torch_lite.h for the .cu, precompiled header)"]


def test_a_failed_lite_build_is_built_the_fast_way_then_as_asked():
  fake, log = FakeLoadInline(failures=2), []
  load = fast_build.fast_load_inline(fake, "/cache/h.h", log.append, lite_object="/cache/rt.o")
  assert load("ext", "", KERNEL) == "module 3"
  lite, fast, plain = fake.calls
  assert lite["extra_ldflags"] == ["/cache/rt.o"] and lite["no_implicit_headers"]
  assert not fast["no_implicit_headers"] and fast["cpp_sources"] == ""
  assert fast["cuda_sources"] == [fast_build.light_cuda_source(KERNEL)]
  assert fast["extra_ldflags"] is None and plain["extra_ldflags"] is None
  assert plain["cuda_sources"] == KERNEL and plain["extra_cflags"] is None
  assert log[0] == f"lite build failed ({BUILD_FAILURE}); building with torch's headers"


def test_a_candidate_that_asks_for_no_implicit_headers_and_includes_torch_gets_a_lite_main():
  fake = FakeLoadInline()
  load = fast_build.fast_load_inline(fake, "/cache/h.h", lite_object="/cache/rt.o")
  load("ext", ["#include <torch/extension.h>\n", "int g();"], KERNEL, no_implicit_headers=True)
  (call,) = fake.calls
  assert call["cpp_sources"] == ['#include "kz_torch_lite_bind.h"\n\nint g();']
  assert call["cuda_sources"] == [lite_build.lite_cuda_source(KERNEL)]
  assert call["extra_cflags"] is None


def test_a_candidate_that_asks_for_no_implicit_headers_gets_none_added():
  fake = FakeLoadInline()
  load = fast_build.fast_load_inline(fake, None, lite_object="/cache/rt.o")
  load("ext", ["int g();"], [KERNEL, "__global__ void k2() {}\n"], no_implicit_headers=True)
  (call,) = fake.calls
  assert call["cpp_sources"] == ["int g();"] and call["no_implicit_headers"] is True
  assert call["cuda_sources"] == [
      lite_build.lite_cuda_source(KERNEL + "\n__global__ void k2() {}\n")]


def test_no_lite_build_with_a_load_inline_that_always_adds_torch_types_h():
  """torch's load_inline before no_implicit_headers existed: the .cu would get torch/types.h."""
  def old_load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                      extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
                      verbose=False):
    calls.append(extra_ldflags)
    return "module"
  calls = []
  load = fast_build.fast_load_inline(old_load_inline, None, lite_object="/cache/rt.o")
  assert load("ext", "", KERNEL) == "module" and calls == [None]


def test_the_cu_that_load_inline_writes_for_a_lite_build_names_no_torch_header(
    tmp_path, monkeypatch):
  """torch's own load_inline, up to the files it writes and hands to its compiler."""
  from torch.utils import cpp_extension  # pylint: disable=import-outside-toplevel
  written = []

  def compile_nothing(name, sources, *args, **kwargs):
    written.append({os.path.basename(p): pathlib.Path(p).read_text() for p in sources})
    raise RuntimeError("not compiled here")
  monkeypatch.setattr(cpp_extension, "_jit_compile", compile_nothing)

  def load_inline(*args, **kwargs):
    return cpp_extension.load_inline(*args, build_directory=str(tmp_path), **kwargs)
  load_inline.__signature__ = inspect.signature(cpp_extension.load_inline)
  load = fast_build.fast_load_inline(load_inline, None, lite_object="/cache/rt.o")
  with pytest.raises(RuntimeError, match="not compiled here"):
    load("kz_lite_written", "torch::Tensor f(torch::Tensor x);", KERNEL, functions=["f"])
  lite, _, plain = written  # the lite attempt, then the fallbacks
  assert not re.search(r"#include\s*<(torch|ATen|c10)/", lite["cuda.cu"])
  assert '#include "kz_torch_lite.h"' in lite["cuda.cu"]
  assert lite["main.cpp"].startswith('#include "kz_torch_lite_bind.h"\n')
  assert not re.search(r"#include\s*<(torch|ATen|c10)/", lite["main.cpp"])
  assert 'm.def("f", torch::wrap_pybind_function(f), "f");' in lite["main.cpp"]
  assert plain["cuda.cu"].startswith("#include <torch/types.h>")  # as torch builds it


@pytest.mark.parametrize("lite_object, source", [
    (None, KERNEL), ("/cache/rt.o", KERNEL + "#include <ATen/cuda/Atomic.cuh>\n")])
def test_no_lite_build_without_the_runtime_or_for_an_uncovered_header(lite_object, source):
  fake = FakeLoadInline()
  load = fast_build.fast_load_inline(fake, None, lite_object=lite_object)
  load("ext", "", source)
  assert len(fake.calls) == 1 and fake.calls[0]["extra_include_paths"] is None


def test_a_lite_runtime_changed_after_its_build_is_not_used(tmp_path):
  """Like the PCH: a candidate's flags could overwrite the shared runtime object."""
  import json  # pylint: disable=import-outside-toplevel
  header = tmp_path / fast_build.PCH_HEADER
  runtime = tmp_path / lite_build.RUNTIME_OBJECT
  runtime.write_bytes(b"object")
  fingerprint = fast_build._fingerprint(str(runtime))  # pylint: disable=protected-access
  (tmp_path / "pch.json").write_text(json.dumps({"lite": fingerprint}))
  assert fast_build.lite_intact(str(header))
  assert fast_build.lite_object_of(str(header)) == str(runtime)
  runtime.write_bytes(b"another object")
  assert not fast_build.lite_intact(str(header))
  (tmp_path / "pch.json").write_text(json.dumps({"lite": None}))  # its build had failed
  assert not fast_build.lite_intact(str(header))


def test_a_changed_binding_header_or_lite_header_copy_is_not_used(tmp_path):
  """The bind directory is searched before the lite directory by every lite build: a copy
  rewritten by one candidate's compiler flags must not reach the next."""
  import json  # pylint: disable=import-outside-toplevel
  header = tmp_path / fast_build.PCH_HEADER
  bind = tmp_path / fast_build.BIND_DIR
  bind.mkdir()
  names = (lite_build.LITE_HEADER, lite_build.BIND_HEADER, lite_build.BIND_HEADER + ".gch")
  for name in names:
    (bind / name).write_text(name)
  recorded = {n: fast_build._fingerprint(str(bind / n)) for n in names}  # pylint: disable=protected-access
  (tmp_path / "pch.json").write_text(json.dumps({"bind": recorded}))
  assert fast_build.bind_intact(str(header))
  assert fast_build.bind_dir_of(str(header)) == str(bind)
  fast_build.require_bind(str(header))
  for name in names:
    original = (bind / name).read_text()
    (bind / name).write_text(original + " changed")
    assert not fast_build.bind_intact(str(header)), name
    (bind / name).unlink()
    (bind / name).write_text(original)  # the same bytes again, but not the builder's file
    assert not fast_build.bind_intact(str(header)), name
  (tmp_path / "pch.json").write_text(json.dumps({"bind": None, "bind_error": "no pybind11"}))
  assert not fast_build.bind_intact(str(header))
  with pytest.raises(RuntimeError, match="missing or changed: no pybind11"):
    fast_build.require_bind(str(header))


def test_a_missing_lite_runtime_is_an_error_where_it_is_required(tmp_path):
  """The benchmarks time the lite build: without its runtime they would time the fast one."""
  import json  # pylint: disable=import-outside-toplevel
  header = tmp_path / fast_build.PCH_HEADER
  (tmp_path / "pch.json").write_text(json.dumps({"lite": None, "lite_error": "no cusparse.h"}))
  with pytest.raises(RuntimeError, match="missing or changed: no cusparse.h"):
    fast_build.require_lite(str(header))
  runtime = tmp_path / lite_build.RUNTIME_OBJECT
  runtime.write_bytes(b"object")
  fingerprint = fast_build._fingerprint(str(runtime))  # pylint: disable=protected-access
  (tmp_path / "pch.json").write_text(json.dumps({"lite": fingerprint}))
  fast_build.require_lite(str(header))
