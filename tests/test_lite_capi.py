"""lite_capi: which cpp_sources a C-API main.cpp binds, and what it writes (the builds that
check its bindings against torch's are in test_lite_build.py)."""

from __future__ import annotations

import re

import pytest

from kernelzero_jax.sandbox import lite_capi

T = ("T", "at::Tensor", "torch.Tensor")
L = ("l", "int64_t", "int")


@pytest.mark.parametrize("cpp, expected", [
    ("torch::Tensor f(torch::Tensor x);", (T, [(T, False)])),
    ("at::Tensor f(const at::Tensor& x, int64_t k = 3);", (T, [(T, True), (L, False)])),
    ("torch::Tensor\nf(\n    torch::Tensor a,\n    long long,\n    double s);",
     (T, [(T, False), (L, False), (("d", "double", "float"), False)])),
    ("void f();", (("v", "void", "None"), [])),
    ("bool f(void);", (("b", "bool", "bool"), [])),
    ("std::vector<torch::Tensor> f(std::vector<int64_t> shape, const std::vector<at::Tensor>& xs);",
     (("V", "std::vector<at::Tensor>", "List[torch.Tensor]"),
      [(("L", "std::vector<int64_t>", "List[int]"), False),
       (("V", "std::vector<at::Tensor>", "List[torch.Tensor]"), True)])),
    # a declaration and its definition, and calls of it, agree
    ("torch::Tensor f(torch::Tensor x);\n"
     "torch::Tensor f(torch::Tensor x) { return x; }\n"
     "torch::Tensor g(torch::Tensor x) { return f(x); }\nstatic inline int h() { f(x); }",
     (T, [(T, False)])),
    ("static inline int f(int k) { return k; }",
     (("i", "int", "int"), [(("i", "int", "int"), False)])),
])
def test_the_signatures_it_binds(cpp, expected):
  assert lite_capi.signature(cpp, "f") == expected


@pytest.mark.parametrize("cpp", [
    "torch::Tensor g(torch::Tensor x);",  # not declared
    "torch::Tensor f(torch::Tensor x);\ntorch::Tensor f(torch::Tensor x, int k);",  # overloads
    "torch::Tensor f(float* x);",  # a pointer
    "torch::Tensor& f(torch::Tensor& x);",  # a reference returned
    "std::tuple<torch::Tensor, torch::Tensor> f(torch::Tensor x);",  # a type not bound here
    "torch::Tensor f(c10::optional<torch::Tensor> x);",
    "torch::Tensor f(at::IntArrayRef x);",
    "auto f(torch::Tensor x) -> torch::Tensor;",
    "template <typename T> T f(T x);",
    "torch::Tensor f(torch::Tensor&& x);",
    "torch::Tensor f(int (*g)(int));",  # parentheses in the parameters
])
def test_signatures_it_leaves_to_pybind11(cpp):
  assert lite_capi.signature(cpp, "f") is None


def test_the_main_cpp_replaces_torchs_header_and_binds_each_function():
  main = lite_capi.capi_main_cpp(
      ["#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x);",
       "void g(torch::Tensor x, int64_t k);"], {"f": 'doc "quoted"', "g": "g"})
  assert main.startswith('#include "kz_torch_lite_capi.h"\n')
  assert "torch/extension.h" not in main and "pybind11" not in main.lower()
  assert '"(arg0: torch.Tensor) -> torch.Tensor"' in main
  assert "at::Tensor kz_r = f(std::move(kz_a0));" in main
  assert "g(std::move(kz_a0), std::move(kz_a1));" in main
  assert '{"f", ' in main and 'METH_FASTCALL, "doc \\"quoted\\""}' in main
  assert "PyInit_, TORCH_EXTENSION_NAME" in main
  # one list of names works as load_inline's functions, a single name too
  assert lite_capi.capi_main_cpp(["torch::Tensor f(torch::Tensor x);"], "f") is not None
  assert "#define KZ_LITE_HALF" in lite_capi.capi_main_cpp(
      ["at::Half h; torch::Tensor f(torch::Tensor x);"], ["f"])


@pytest.mark.parametrize("cpp, functions, kwargs", [
    (["torch::Tensor f(torch::Tensor x);"], ["f"], {"with_pytorch_error_handling": False}),
    (["torch::Tensor f(torch::Tensor x);"], [], {}),
    (["torch::Tensor f(torch::Tensor x);"], None, {}),
    (["torch::Tensor f(torch::Tensor x);"], ["f", "f"], {}),
    (["torch::Tensor f(torch::Tensor x);"], ["f", "g"], {}),
    (["#include <torch/extension.h>\nnamespace py = pybind11;\ntorch::Tensor f(torch::Tensor x);"],
     ["f"], {}),
    (["#include <ATen/cuda/Atomic.cuh>\ntorch::Tensor f(torch::Tensor x);"], ["f"], {}),
])
def test_what_it_leaves_to_the_pybind11_main_cpp(cpp, functions, kwargs):
  assert lite_capi.capi_main_cpp(cpp, functions, **kwargs) is None


def test_its_own_names_hide_no_candidate_function():
  """A function named like a local of the generated code is still the one called."""
  main = lite_capi.capi_main_cpp(["torch::Tensor name(torch::Tensor args, int64_t nargs);"],
                                 ["name"])
  generated = main[main.index("static PyObject*"):]
  assert "name(std::move(kz_a0), std::move(kz_a1))" in generated
  for local in ("name", "sig", "args", "nargs", "a0", "r"):
    assert not re.search(rf"[^\w\"]{local}\b(?!\()", generated), local


def test_a_commented_out_declaration_does_not_count():
  cpp = ["// torch::Tensor f(torch::Tensor x, int k);\n/* torch::Tensor f(float y); */\n"
         "torch::Tensor f(torch::Tensor x);"]
  uncommented = lite_capi._COMMENTS.sub(" ", cpp[0])  # pylint: disable=protected-access
  assert lite_capi.signature(uncommented, "f") == (T, [(T, False)])
  assert lite_capi.capi_main_cpp(cpp, ["f"]) is not None


# Errors as torch raises them from ninja's output. Where the .cu fails, main.cpp's compile, under
# way meanwhile, shows as a command too (as on an H100: the C-API main.cpp was tried again
# through pybind11 while a check for "main.cpp" in the message decided).
MAIN_FAILURE = ("Error building extension 'ext': [1/3] c++ -c main.cpp -o main.o\n"
                "FAILED: main.o \nc++ -c main.cpp -o main.o\n"
                "main.cpp:3:1: error: 'foo' was not declared in this scope\n"
                "ninja: build stopped: subcommand failed.")
CU_FAILURE = ("Error building extension 'ext': [1/3] nvcc -c cuda.cu -o cuda.cuda.o\n"
              "FAILED: [code=1] cuda.cuda.o \nnvcc -c cuda.cu -o cuda.cuda.o\n"
              'cuda.cu(3): error: identifier "kz_missing" is undefined\n'
              "[2/3] c++ -c main.cpp -o main.o\nninja: build stopped: subcommand failed.")
KERNEL = "#include <torch/extension.h>\n__global__ void k(float* x) { x[0] = 1.f; }\n"


class Builds:
  """load_inline's stand-in: records each call, raises the given errors in turn."""

  def __init__(self, *errors):
    self.calls, self.errors = [], list(errors)

  def __call__(self, name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
               extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
               no_implicit_headers=False,
               with_pytorch_error_handling=True):
    self.calls.append(dict(cpp_sources=cpp_sources, functions=functions,
                           extra_cflags=extra_cflags, extra_include_paths=extra_include_paths))
    if self.errors:
      raise RuntimeError(self.errors.pop(0))
    return f"module {len(self.calls)}"


def _load(builds, log, capi_main=True, steps=None):
  from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
  return fast_build.fast_load_inline(builds, "/cache/h.h", log.append, lite_object="/cache/rt.o",
                                     bind_dir="/cache/bind", capi_main=capi_main, steps=steps)


def test_with_capi_main_a_lite_build_binds_through_cpythons_api_first():
  builds, log = Builds(), []
  assert _load(builds, log)("ext", "torch::Tensor f(torch::Tensor x);", KERNEL,
                            functions=["f"]) == "module 1"
  (call,) = builds.calls
  assert call["functions"] is None and call["extra_cflags"] is None
  assert call["cpp_sources"] == [lite_capi.capi_main_cpp(["torch::Tensor f(torch::Tensor x);"],
                                                         ["f"])]
  assert log == ["lite build (kz_torch_lite.h for the .cu, main.cpp through CPython's API)"]


def test_a_capi_main_cpp_that_fails_is_bound_through_pybind11_and_a_failed_cu_is_not():
  builds, log, steps = Builds(MAIN_FAILURE), [], []
  assert _load(builds, log, steps=steps)("ext", "torch::Tensor f(torch::Tensor x);", KERNEL,
                                         functions=["f"]) == "module 2"
  assert builds.calls[1]["functions"] == ["f"]
  assert builds.calls[1]["cpp_sources"] == [
      '#include "kz_torch_lite_bind.h"\ntorch::Tensor f(torch::Tensor x);']
  assert log[0].startswith("C-API main.cpp failed (RuntimeError: ") and log[1].startswith(
      "lite build (kz_torch_lite.h for the .cu and main.cpp")
  # each load_inline call, timed, in order (evidence["build_steps"])
  assert [(s["step"], s["ok"]) for s in steps] == [("lite_capi", False), ("lite", True)]
  assert all(s["seconds"] >= 0 for s in steps)
  # the .cu failed: the pybind11 main.cpp would fail the same way; the fast build comes next
  builds, log, steps = Builds(CU_FAILURE), [], []
  assert _load(builds, log, steps=steps)("ext", "torch::Tensor f(torch::Tensor x);", KERNEL,
                                         functions=["f"]) == "module 2"
  assert "-include" in builds.calls[1]["extra_cflags"] and len(builds.calls) == 2
  assert [(s["step"], s["ok"]) for s in steps] == [("lite_capi", False), ("fast", True)]
  assert log[0].startswith("lite build failed") and log[1].startswith("fast build")


def test_functions_it_cannot_bind_and_the_default_go_through_pybind11():
  for cpp, capi_main in (("std::tuple<torch::Tensor, int> f(torch::Tensor x);", True),
                         ("torch::Tensor f(torch::Tensor x);", False)):
    builds, log = Builds(), []
    _load(builds, log, capi_main)("ext", cpp, KERNEL, functions=["f"])
    (call,) = builds.calls
    assert call["functions"] == ["f"] and call["cpp_sources"] == [
        '#include "kz_torch_lite_bind.h"\n' + cpp]


def test_the_build_benchmark_writes_the_teachers_kernels_and_a_c_api_main_cpp_binds_them(
    kernelbench_dir, tmp_path):
  """cuda_build --teacher_kernelbench_dir: one file per problem the teacher covers, each a
  candidate whose load_inline calls the C-API main.cpp binds (as the b259 batch's are)."""
  from benchmarks import cuda_build  # pylint: disable=import-outside-toplevel
  files = cuda_build.teacher_files(kernelbench_dir, str(tmp_path))
  assert len(files) >= 20 and all(f.endswith("_cuda.py") for f in files)
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.split("/")[-1] for f in files)
  for path in files[:5]:
    (call,) = cuda_build.captured_calls(path)
    cpp = call["cpp_sources"]
    assert lite_capi.capi_main_cpp([cpp] if isinstance(cpp, str) else cpp,
                                   call["functions"]) is not None, path


def test_the_build_benchmark_injects_a_fault_into_copies_of_its_candidates(kernelbench_dir,
                                                                           tmp_path):
  """cuda_build --fault: each candidate built with the fault in its .cu, the originals intact."""
  from absl import app  # pylint: disable=import-outside-toplevel
  from benchmarks import cuda_build, faulty_candidates  # pylint: disable=import-outside-toplevel
  (tmp_path / "teacher").mkdir()
  files = cuda_build.teacher_files(kernelbench_dir, str(tmp_path / "teacher"))[:3]
  originals = [open(f, encoding="utf-8").read() for f in files]
  (tmp_path / "faulted").mkdir()
  faulted = cuda_build.faulted_files(files, "undeclared", str(tmp_path / "faulted"))
  assert [f.split("/")[-1] for f in faulted] == [f.split("/")[-1] for f in files]
  for path, faulted_path, original in zip(files, faulted, originals):
    assert open(path, encoding="utf-8").read() == original
    (call,) = cuda_build.captured_calls(faulted_path)
    cuda = call["cuda_sources"]
    assert f"{faulty_candidates.MARKER}_undeclared" in (cuda if isinstance(cuda, str)
                                                         else "".join(cuda)), faulted_path
  with pytest.raises(app.UsageError, match="not one of"):
    cuda_build.faulted_files(files, "typo", str(tmp_path / "faulted"))
