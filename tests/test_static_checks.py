"""Fast unit tests of the sandbox's static layer (kernelzero_jax.sandbox.static_checks).

No processes and no torch: `check_candidate(source, backend)` is pure Python. Three groups:
  * forbidden capabilities are rejected (one small source per capability);
  * honest sources, Triton and CUDA (load_inline), are accepted, and CUDA kernel names extracted;
  * capabilities that reach forbidden modules *without an import statement*
    (e.g. `torch.os`, `torch.threading`, `torch.builtins.exec`, `torch.nn.functional.np`).
"""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from kernelzero_jax.sandbox.static_checks import check_candidate
from kernelzero_jax.sandbox.static_checks import cuda_kernel_names

CANDIDATES = pathlib.Path(__file__).parent / "candidates"

# A minimal honest Triton candidate; snippets below are spliced into it.
_KERNEL = '''
@triton.jit
def add_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  mask = offs < n
  tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)
'''


def _triton_source(forward_body: str = "", module_code: str = "", imports: str = "",
                   init_body: str = "") -> str:
  """An honest add-one Triton candidate with extra code spliced in."""
  forward_body = textwrap.indent(textwrap.dedent(forward_body), "    ")
  init_body = textwrap.indent(textwrap.dedent(init_body), "    ")
  return (
      "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
      + textwrap.dedent(imports) + "\n" + _KERNEL + "\n" + textwrap.dedent(module_code) + "\n\n"
      "class ModelNew(nn.Module):\n"
      "  def __init__(self):\n"
      "    super().__init__()\n" + init_body + "\n"
      "  def forward(self, x):\n" + forward_body + "\n"
      "    out = torch.empty_like(x)\n"
      "    add_one_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)\n"
      "    return out\n")


def _rejections(source: str, backend: str = "triton") -> list[str]:
  report = check_candidate(source, backend)
  assert not report.format_errors, report.format_errors
  return report.rejections


def test_base_source_is_accepted():
  report = check_candidate(_triton_source(), "triton")
  assert report.ok, report
  assert report.triton_kernel_names == ["add_one_kernel"]


# --------------------------------------------------------------------------------------------
# Forbidden capabilities: (id, source, substring expected in one of the rejection reasons).
# --------------------------------------------------------------------------------------------

_FORBIDDEN: list[tuple[str, str, str]] = []


def _forbid(name: str, source: str, reason: str) -> None:
  _FORBIDDEN.append((name, source, reason))


for _mod in ("ctypes", "subprocess", "os", "sys", "importlib", "gc", "inspect", "threading",
             "multiprocessing", "concurrent.futures", "numpy", "time", "signal", "socket",
             "pickle", "builtins", "cffi", "jax", "cupy"):
  _forbid(f"import_{_mod}", _triton_source(imports=f"import {_mod}\n"), f"imports `{_mod}`")
_forbid("from_os_import_system", _triton_source(imports="from os import system\n"),
        "imports `os`")
_forbid("import_as_alias", _triton_source(imports="import ctypes as c\n"), "imports `ctypes`")
for _mod in ("torch._C", "torch._dynamo", "torch._inductor", "torch.multiprocessing",
             "torch.distributed", "torch.fx", "torch.jit", "torch.overrides", "torch.profiler",
             "torch.testing", "torch.utils.data", "torch.utils.hooks", "torch.utils.benchmark",
             "torch.compiler", "torch.cuda.graphs", "triton.runtime", "triton.testing",
             "triton.compiler"):
  _forbid(f"import_{_mod}", _triton_source(imports=f"import {_mod}\n"), f"imports `{_mod}`")
_forbid("from_python_dispatch", _triton_source(
    imports="from torch.utils._python_dispatch import TorchDispatchMode\n"), "_python_dispatch")
_forbid("from_torch_import_private", _triton_source(imports="from torch import _C\n"),
        "imports `_C`")
_forbid("from_torch_import_compile", _triton_source(imports="from torch import compile\n"),
        "imports `compile`")
_forbid("relative_import", _triton_source(imports="from . import helpers\n"), "relative imports")

# Dynamic code and builtins that reach interpreter internals.
for _call, _why in (("eval('1 + 1')", "eval"), ("exec('y = 1')", "exec"),
                    ("compile('1', 'f', 'eval')", "compile"), ("__import__('os')", "__import__"),
                    ("globals()", "globals"), ("locals()", "locals"), ("vars(self)", "vars"),
                    ("open('/etc/passwd')", "open"), ("breakpoint()", "breakpoint"),
                    ("setattr(torch, 'relu', None)", "setattr"),
                    ("delattr(torch, 'relu')", "delattr"), ("exit()", "exit"),
                    ("quit()", "quit")):
  _forbid(f"builtin_{_why}", _triton_source(forward_body=f"_ = {_call}\n"), f"`{_why}`")
_forbid("builtins_name", _triton_source(forward_body="b = __builtins__\n"), "__builtins__")

# Attributes: compilation, streams/graphs, host round trips, harness state, hooks.
for _expr, _why in (("torch.compile(lambda t: t)", "compile"),
                    ("torch.cuda.Stream()", "Stream"),
                    ("torch.cuda.stream(None)", "stream"),
                    ("torch.cuda.CUDAGraph()", "CUDAGraph"),
                    ("torch.cuda.graph(None)", "graph"),
                    ("x.numpy()", "numpy"), ("x.cpu()", "cpu"), ("x.tolist()", "tolist"),
                    ("torch.from_numpy(None)", "from_numpy"),
                    ("torch.manual_seed(0)", "manual_seed"), ("torch.seed()", "seed"),
                    ("torch.set_rng_state(None)", "set_rng_state"),
                    ("torch.backends.cuda.matmul", "backends"),
                    ("torch.set_default_device('cpu')", "set_default_device"),
                    ("torch.use_deterministic_algorithms(True)", "use_deterministic_algorithms"),
                    ("self.register_forward_hook(None)", "register_forward_hook"),
                    ("self.register_forward_pre_hook(None)", "register_forward_pre_hook"),
                    ("nn.modules.module.register_module_forward_hook(None)",
                     "register_module_forward_hook"),
                    ("torch._C._get_tracing_state()", "private"),
                    ("x._version", "private"),
                    ("torch.ops.aten._foo", "private")):
  _forbid(f"attr_{_why}_{len(_FORBIDDEN)}", _triton_source(forward_body=f"_ = {_expr}\n"), _why)

# Monkey-patching: assignment, augmented assignment, deletion, subscripts into harness modules.
for _target in ("torch.allclose", "torch.cuda.synchronize", "torch.Tensor.clone",
                "torch.nn.Module.__call__", "nn.Module.__call__", "torch.nn.functional.relu",
                "triton.jit", "tl.load", "math.exp", "torch.testing.assert_close"):
  _forbid(f"assign_{_target}", _triton_source(module_code=f"{_target} = lambda *a, **k: True\n"),
          "monkey-patching")
_forbid("assign_time_perf_counter",
        _triton_source(imports="import time\n", module_code="time.perf_counter = lambda: 0.0\n"),
        "monkey-patching")
_forbid("assign_functional_alias",
        _triton_source(imports="import torch.nn.functional as F\n",
                       module_code="F.relu = lambda t: t\n"), "monkey-patching")
_forbid("augassign_torch", _triton_source(module_code="torch.relu += 1\n"), "monkey-patching")
_forbid("annassign_torch", _triton_source(module_code="torch.relu: object = None\n"),
        "monkey-patching")
_forbid("delete_torch_attr", _triton_source(module_code="del torch.relu\n"), "monkey-patching")
_forbid("tuple_target", _triton_source(module_code="a, torch.relu = 1, 2\n"), "monkey-patching")
_forbid("in_forward_patch", _triton_source(forward_body="torch.equal = lambda a, b: True\n"),
        "monkey-patching")

# Dunder introspection.
for _expr, _dunder in (("x.__class__.__bases__", "__bases__"),
                       ("self.forward.__globals__", "__globals__"),
                       ("self.__dict__", "__dict__"),
                       ("self.forward.__code__", "__code__"),
                       ("object.__subclasses__()", "__subclasses__"),
                       ("type(x).__mro__", "__mro__"),
                       ("torch.__builtins__", "__builtins__"),
                       ("self.forward.__func__", "__func__"),
                       ("x.__reduce_ex__(2)", "__reduce_ex__"),
                       ("torch.__loader__", "__loader__")):
  _forbid(f"dunder_{_dunder}", _triton_source(forward_body=f"_ = {_expr}\n"), _dunder)

# getattr/hasattr games and dynamic classes.
_forbid("getattr_computed", _triton_source(forward_body="_ = getattr(torch, 're' + 'lu')\n"),
        "computed attribute name")
_forbid("getattr_private", _triton_source(forward_body="_ = getattr(torch, '_C')\n"), "'_C'")
_forbid("getattr_forbidden_attr", _triton_source(forward_body="_ = getattr(torch, 'compile')\n"),
        "'compile'")
_forbid("hasattr_private", _triton_source(forward_body="_ = hasattr(torch, '_dynamo')\n"),
        "'_dynamo'")
_forbid("type_three_args", _triton_source(forward_body="_ = type('X', (object,), {})\n"),
        "type(name, bases, dict)")

# Triton kernel bodies must be Triton only (the CPU interpreter would run anything as Python).
_forbid("triton_body_torch", _triton_source(module_code='''
@triton.jit
def body_torch_kernel(x_ptr):
  torch.relu(x_ptr)
'''), "kernel bodies may only use triton")
_forbid("triton_body_print", _triton_source(module_code='''
@triton.jit
def body_print_kernel(x_ptr):
  print(x_ptr)
'''), "uses `print`")
_forbid("triton_body_python_helper", _triton_source(module_code='''
def helper(v):
  return v

@triton.jit
def body_helper_kernel(x_ptr):
  helper(x_ptr)
'''), "calls Python function `helper`")
_forbid("triton_body_imported_module", _triton_source(imports="import torch.nn.functional as F\n",
                                                      module_code='''
@triton.jit
def body_f_kernel(x_ptr):
  F.relu(x_ptr)
'''), "uses `F`")

# Backends and their contracts.
_forbid("triton_without_kernel", '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
  def forward(self, x):
    return x
''', "defines no @triton.jit kernel")


@pytest.mark.parametrize("name,source,reason", _FORBIDDEN, ids=[f[0] for f in _FORBIDDEN])
def test_forbidden_capability_is_rejected(name, source, reason):
  rejections = _rejections(source)
  assert rejections, f"{name}: accepted"
  assert any(reason in r for r in rejections), (name, rejections)


# --------------------------------------------------------------------------------------------
# CUDA backend.
# --------------------------------------------------------------------------------------------

_HONEST_CUDA = (CANDIDATES / "honest" / "scaled_relu_cuda.py").read_text()

_CUDA_TEMPLATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void add_one_kernel(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + 1.f;
}
%s
torch::Tensor add_one(torch::Tensor x) {
  auto out = torch::empty_like(x);
  add_one_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
  return out;
}
"""
ext = load_inline(name="add_one_ext", cpp_sources="torch::Tensor add_one(torch::Tensor x);",
                  cuda_sources=src, functions=["add_one"])


class ModelNew(nn.Module):
  def forward(self, x):
    return ext.add_one(x)
'''


def _cuda_source(extra_cuda: str = "") -> str:
  return _CUDA_TEMPLATE % extra_cuda


def test_honest_cuda_candidate_is_accepted():
  report = check_candidate(_HONEST_CUDA, "cuda")
  assert report.ok, report


def test_honest_cuda_candidate_kernel_names_are_extracted():
  # `__global__ void __launch_bounds__(256) name(...)` is the common order; the name extracted
  # must be the kernel's, not `__launch_bounds__`, or the GPU check "none of the candidate's own
  # kernels ran" rejects an honest kernel.
  report = check_candidate(_HONEST_CUDA, "cuda")
  assert report.cuda_kernel_names == ["fill_zero_kernel", "scaled_relu_kernel"]


def test_minimal_cuda_candidate_is_accepted():
  report = check_candidate(_cuda_source(), "cuda")
  assert report.ok, report
  assert report.cuda_kernel_names == ["add_one_kernel"]


@pytest.mark.parametrize("decl,name", [
    ("__global__ void k1(float* x) {}", "k1"),
    ("__global__ void\nk2(float* x) {}", "k2"),
    ("extern \"C\" __global__ void k3(float* x) {}", "k3"),
    ("template <typename T>\n__global__ void k4(T* x) {}", "k4"),
    ("__global__ __launch_bounds__(128) void k5(float* x) {}", "k5"),
    ("__global__ void __launch_bounds__(128, 2) k6(float* x) {}", "k6"),
    ("__global__ void __launch_bounds__(256) k8(float* x) {}", "k8"),
    ("static __global__ void k7(float* x) {}", "k7"),
])
def test_cuda_kernel_name_forms(decl, name):
  assert cuda_kernel_names(decl) == [name]


@pytest.mark.parametrize("snippet,reason", [
    ("void f() { cublasSgemm(0); }", "cuBLAS"),
    ("void f() { cublasLtMatmul(0); }", "cuBLAS"),
    ("void f() { cudnnConvolutionForward(0); }", "cuDNN"),
    ("void f() { cufftExecC2C(0); }", "math library"),
    ("at::Tensor f(at::Tensor a) { return at::native::add(a, a); }", "at::native"),
    ("torch::Tensor f(torch::Tensor a) { return torch::matmul(a, a); }", "torch compute op"),
    ("at::Tensor f(at::Tensor a) { return at::conv2d(a, a); }", "torch compute op"),
    ("torch::Tensor f(torch::Tensor a) { return torch::softmax(a, 0); }", "torch compute op"),
    ("void f() { cudaStream_t s; cudaStreamCreate(&s); }", "streams"),
    ("void f() { auto s = at::cuda::getStreamFromPool(); }", "side stream"),
    ("void f() { cudaGraphLaunch(0, 0); }", "graphs"),
    ("void f() { std::thread t([]{}); }", "threads"),
    ("void f() { fork(); }", "processes"),
    ("void f() { system(\"ls\"); }", "processes"),
    ("void f() { dlopen(\"x\", 0); }", "processes"),
    ("void f() { cudaDeviceReset(); }", "device state"),
    ("static int x = setenv(\"CUDA_VISIBLE_DEVICES\", \"0\", 1);", "environment"),
    ("void f() { putenv((char*)\"CUDA_VISIBLE_DEVICES=0\"); }", "environment"),
    ("void f() { unsetenv(\"CUDA_VISIBLE_DEVICES\"); }", "environment"),
    ("extern char** environ; void f() { environ[0] = 0; }", "environment"),
])
def test_cuda_forbidden_patterns(snippet, reason):
  rejections = _rejections(_cuda_source(snippet), backend="cuda")
  assert any(reason in r for r in rejections), rejections


def test_cuda_without_global_kernel_is_rejected():
  src = _cuda_source().replace("__global__ void add_one_kernel", "__device__ void add_one_kernel")
  assert any("no __global__ kernel" in r for r in _rejections(src, backend="cuda"))


def test_cuda_without_load_inline_is_rejected():
  src = '''
import torch
import torch.nn as nn

SRC = "__global__ void k(float* x) { x[0] = 1.f; }"


class ModelNew(nn.Module):
  def forward(self, x):
    return x
'''
  assert any("never builds" in r for r in _rejections(src, backend="cuda"))


def test_cuda_candidate_python_rules_still_apply():
  src = _cuda_source().replace("import torch\n", "import torch\nimport ctypes\n", 1)
  assert any("imports `ctypes`" in r for r in _rejections(src, backend="cuda"))


def test_cuda_comment_mentioning_cublas_is_accepted():
  # A C++ comment is not a library call; honest generated code often says what it replaces.
  # (Known false reject: the patterns run over comments too. Fix: strip // and /* */ comments
  # from the CUDA/C++ strings before matching.)
  src = _cuda_source("// one fused kernel instead of cublas + a bias kernel\n")
  assert check_candidate(src, "cuda").ok


# --------------------------------------------------------------------------------------------
# Honest Triton sources (files and idioms) are accepted.
# --------------------------------------------------------------------------------------------

_HONEST_FILES = sorted(p for p in (CANDIDATES / "honest").glob("*.py") if "cuda" not in p.name)


@pytest.mark.parametrize("path", _HONEST_FILES, ids=[p.stem for p in _HONEST_FILES])
def test_honest_triton_files_are_accepted(path):
  report = check_candidate(path.read_text(), "triton")
  assert report.ok, report
  assert report.triton_kernel_names


@pytest.mark.parametrize("name,source", [
    ("self_private_state", _triton_source(init_body="self._cache = None\n",
                                          forward_body="self._calls = 1\n")),
    ("math_and_typing", _triton_source(imports="import math\nfrom typing import Optional\n",
                                       forward_body="n: Optional[int] = math.prod(x.shape)\n")),
    ("functools_and_dataclasses", _triton_source(
        imports="import functools\nimport dataclasses\n",
        module_code="@functools.lru_cache(maxsize=None)\ndef block_for(n):\n  return 256\n")),
    ("from_triton_import_jit", _triton_source(imports="from triton import jit\n",
                                              module_code="@jit\ndef other_kernel(p):\n  pass\n")),
    ("libdevice_in_body", _triton_source(
        imports="from triton.language.extra import libdevice\n", module_code='''
@triton.jit
def tanh_kernel(x_ptr, n, BLOCK: tl.constexpr):
  offs = tl.arange(0, BLOCK)
  tl.store(x_ptr + offs, libdevice.tanh(tl.load(x_ptr + offs)))
''')),
    ("jit_helper_in_body", _triton_source(module_code='''
@triton.jit
def _square(v):
  return v * v

@triton.jit
def square_kernel(x_ptr, BLOCK: tl.constexpr):
  offs = tl.arange(0, BLOCK)
  tl.store(x_ptr + offs, _square(tl.load(x_ptr + offs)))
''')),
    ("constexpr_global_in_body", _triton_source(module_code='''
BLOCK_M: tl.constexpr = 64

@triton.jit
def const_kernel(x_ptr):
  offs = tl.arange(0, BLOCK_M)
  tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2.0)
''')),
    ("autotune_and_heuristics", _triton_source(module_code='''
@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def tuned_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
''')),
    ("views_and_allocation", _triton_source(forward_body='''
x = x.contiguous().view(-1).reshape(x.shape)
tmp = torch.zeros(x.shape[0], device=x.device, dtype=x.dtype)
y = x.new_empty(x.shape)
z = x.transpose(0, 1).t().flatten()
n = x.numel() * x.stride(0) + x.size(0) + x.dim()
''')),
    ("dunder_name_and_class", _triton_source(forward_body='''
_ = self.__class__.__name__
nn.Module.__init__(self) if False else None
''')),
    ("getattr_constant_public", _triton_source(forward_body="_ = getattr(self, 'weight', None)\n")),
    ("main_guard", _triton_source(module_code='if __name__ == "__main__":\n  pass\n')),
    ("local_subscript_assign", _triton_source(forward_body="d = {}\nd['out'] = x\n")),
    ("torch_dtype_module_constant", _triton_source(module_code="DTYPE = torch.float32\n")),
])
def test_honest_triton_idioms_are_accepted(name, source):
  report = check_candidate(source, "triton")
  assert report.ok, (name, report)


# --------------------------------------------------------------------------------------------
# Format errors.
# --------------------------------------------------------------------------------------------

def test_syntax_error_is_a_format_error():
  report = check_candidate("class ModelNew(:\n  pass\n", "triton")
  assert report.format_errors and "does not parse" in report.format_errors[0]


def test_missing_model_new_is_a_format_error():
  report = check_candidate(_triton_source().replace("class ModelNew", "class Model"), "triton")
  assert any("class ModelNew" in e for e in report.format_errors)


def test_model_new_without_forward_is_a_format_error():
  src = _triton_source().replace("def forward(self, x)", "def run(self, x)")
  assert any("no forward" in e for e in check_candidate(src, "triton").format_errors)


def test_unknown_backend_is_a_format_error():
  assert check_candidate(_triton_source(), "opencl").format_errors


def test_nested_model_new_is_not_enough():
  src = "def make():\n  class ModelNew:\n    def forward(self, x):\n      return x\n  return ModelNew\n"
  assert check_candidate(src, "triton").format_errors


# --------------------------------------------------------------------------------------------
# Forbidden modules and builtins reached as *attributes* of allowed modules, with no import
# statement: each gives a candidate a capability the import whitelist means to deny.
# --------------------------------------------------------------------------------------------

_ATTRIBUTE_ESCAPES = [
    ("torch_os_system", "torch.os.system('true')"),
    ("torch_os_kill", "torch.os.kill(torch.os.getppid(), 9)"),
    ("torch_ctypes", "torch.ctypes.string_at(0)"),
    ("torch_threading", "torch.threading.Thread(target=print).start()"),
    ("torch_builtins_exec", "torch.builtins.exec('import os')"),
    ("torch_builtins_getattr_private", "torch.builtins.getattr(torch, '_' + 'C')"),
    ("torch_sys", "torch.sys.setrecursionlimit(10)"),
    ("torch_importlib", "torch.importlib.import_module('ctypes')"),
    ("torch_inspect", "torch.inspect.stack()"),
    ("torch_multiprocessing_attr", "torch.multiprocessing.Process(target=print)"),
    ("functional_np", "torch.nn.functional.np.asarray(x)"),
    ("cpp_extension_subprocess", "torch.utils.cpp_extension.subprocess.run(['true'])"),
    ("typing_sys", "typing.sys.exit(0)"),
    ("dataclasses_inspect", "dataclasses.inspect.stack()"),
    ("operator_attrgetter_dunder", "operator.attrgetter('__globals__')(self.forward)"),
]


@pytest.mark.parametrize("name,expr", _ATTRIBUTE_ESCAPES, ids=[e[0] for e in _ATTRIBUTE_ESCAPES])
def test_forbidden_module_reached_as_attribute_is_rejected(name, expr):
  src = _triton_source(imports="import typing\nimport dataclasses\nimport operator\n"
                               "import torch.utils.cpp_extension\n",
                       forward_body=f"_ = {expr}\n")
  assert check_candidate(src, "triton").rejections, f"{name}: `{expr}` was accepted"


def test_triton_body_calling_a_module_level_lambda_is_rejected():
  # `helper = lambda: ...` is not a FunctionDef, so the "kernel bodies may only call @triton.jit
  # functions" rule misses it; under the CPU interpreter the body runs it as Python.
  src = _triton_source(module_code='''
STATE = {}
helper = lambda: STATE["out"].copy_(torch.relu(STATE["x"]))

@triton.jit
def lambda_kernel(p):
  helper()
''')
  assert check_candidate(src, "triton").rejections


def test_cheat_files_caught_statically():
  """The cheat fixtures whose rule is static are rejected by check_candidate alone."""
  static = ["thread_import", "process_import", "monkeypatch_allclose", "monkeypatch_cuda_sync",
            "monkeypatch_time", "monkeypatch_setattr", "torch_compile", "numpy_roundtrip",
            "import_numpy", "import_ctypes", "import_subprocess", "import_os", "import_sys",
            "import_importlib", "import_gc", "import_inspect", "dunder_bases", "dunder_globals",
            "dunder_builtins", "triton_body_torch"]
  accepted = [n for n in static
              if check_candidate((CANDIDATES / "cheats" / f"{n}.py").read_text(), "triton").ok]
  assert not accepted
