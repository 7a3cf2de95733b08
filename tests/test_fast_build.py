"""Faster load_inline builds (sandbox/fast_build.py): the rewrite, the fallback, a real PCH."""

from __future__ import annotations

import inspect

import json
import os
import subprocess

import pytest

from kernelzero_jax.sandbox import fast_build

KERNEL = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void k(float* x) { x[0] = 1.f; }
"""


@pytest.mark.parametrize("include", ["#include <torch/extension.h>", '#include "torch/extension.h"',
                                     "  #  include <torch/extension.h>  ",
                                     "#include\t<torch/extension.h>"])
def test_the_extension_header_becomes_the_light_one(include):
  light = fast_build.light_cuda_source(KERNEL.replace("#include <torch/extension.h>", include))
  assert light.splitlines()[0] == fast_build.LIGHT_INCLUDE
  assert light.splitlines()[1:] == KERNEL.splitlines()[1:]  # nothing else changes


@pytest.mark.parametrize("source", [
    "#include <ATen/ATen.h>\n__global__ void k() {}\n",
    "// #include <torch/extension.h>\n__global__ void k() {}\n",
    '#include <torch/extension.hpp>\n',
    'const char* s = "#include <torch/extension.h>";\n',
])
def test_sources_without_the_header_are_left_alone(source):
  assert fast_build.light_cuda_source(source) is None


def test_compiler_flags_are_read_from_the_probe_build_file(tmp_path):
  ninja = tmp_path / "build.ninja"
  ninja.write_text("ninja_required_version = 1.3\ncxx = /usr/bin/g++-13\n\n"
                   "cflags = -DTORCH_EXTENSION_NAME=kz_pch_probe -DTORCH_API_INCLUDE_EXTENSION_H "
                   "-isystem '/opt/torch include' -fPIC -std=c++17\n"
                   "post_cflags = -D_GLIBCXX_USE_CXX11_ABI=1\ncuda_cflags = -O3\n")
  cxx, flags = fast_build._cflags_from_ninja(str(ninja))  # pylint: disable=protected-access
  assert cxx == "/usr/bin/g++-13"
  assert flags == ["-DTORCH_API_INCLUDE_EXTENSION_H", "-isystem", "/opt/torch include", "-fPIC",
                   "-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=1"]


# What load_inline raises when ninja fails: the build's whole output.
BUILD_ERROR = ("Error building extension 'ext': [1/3] nvcc -c cuda.cu -o cuda.cuda.o\n"
               "FAILED: cuda.cuda.o\n"
               'cuda.cu(3): error: identifier "kz_missing" is undefined\n'
               "1 error detected in the compilation of \"cuda.cu\".\n"
               "ninja: build stopped: subcommand failed.")
BUILD_FAILURE = ("RuntimeError: Error building extension 'ext': [1/3] nvcc -c cuda.cu -o "
                 'cuda.cuda.o | cuda.cu(3): error: identifier "kz_missing" is undefined | '
                 '1 error detected in the compilation of "cuda.cu".')


class FakeLoadInline:
  """Records every call; fails the first `failures` of them."""

  def __init__(self, failures=0):
    self.calls, self.failures = [], failures

  def __call__(self, name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
               extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
               verbose=False, no_implicit_headers=False):
    self.calls.append(dict(name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources,
                           functions=functions, extra_cflags=extra_cflags,
                           extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                           extra_include_paths=extra_include_paths, verbose=verbose,
                           no_implicit_headers=no_implicit_headers))
    if len(self.calls) <= self.failures:
      raise RuntimeError(BUILD_ERROR)
    return f"module {len(self.calls)}"


def test_the_fast_build_adds_the_pch_and_the_light_header():
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, "/cache/kz_torch_extension.h", log.append,
                                     op_headers=False)
  assert load("ext", "torch::Tensor f(torch::Tensor x);", KERNEL, functions=["f"],
              extra_cflags=["-O3"]) == "module 1"
  (call,) = fake.calls
  assert call["cuda_sources"] == [fast_build.light_cuda_source(KERNEL)]
  assert call["extra_cflags"] == ["-include", "/cache/kz_torch_extension.h", "-O3"]
  assert call["cpp_sources"] == "torch::Tensor f(torch::Tensor x);" and call["functions"] == ["f"]
  assert log == ["fast build (light .cu header, precompiled header)"]


@pytest.mark.parametrize("cpp, pch", [
    ("torch::Tensor f(torch::Tensor x);", False),  # would not compile as asked: nor here
    ("#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x);", True),
])
def test_no_pch_for_a_main_cpp_that_asked_for_no_implicit_headers_and_includes_none(cpp, pch):
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, "/cache/kz_torch_extension.h", log.append,
                                     op_headers=False)
  load("ext", cpp, KERNEL, functions=["f"], no_implicit_headers=True)
  (call,) = fake.calls
  assert (call["extra_cflags"] == ["-include", "/cache/kz_torch_extension.h"]) == pch
  assert call["extra_cflags"] is None or pch
  assert log == ["fast build (light .cu header" + (", precompiled header)" if pch else ")")]


def test_a_failed_fast_build_is_built_again_exactly_as_asked():
  from torch.utils import cpp_extension  # pylint: disable=import-outside-toplevel
  run_ninja = cpp_extension._run_ninja_build  # pylint: disable=protected-access
  ninja_runs = []

  class Recorded(FakeLoadInline):
    def __call__(self, *args, **kwargs):  # how torch would run ninja for this build
      ninja_runs.append(cpp_extension._run_ninja_build)  # pylint: disable=protected-access
      return super().__call__(*args, **kwargs)
  Recorded.__call__.__signature__ = inspect.signature(FakeLoadInline.__call__)
  fake, log, steps = Recorded(failures=1), [], []
  load = fast_build.fast_load_inline(fake, None, log.append, op_headers=False, steps=steps)
  assert load("ext", cpp_sources="", cuda_sources=[KERNEL, "__global__ void g() {}\n"],
              functions=["f"]) == "module 2"
  # as asked, with the .cu that failed compiled first (ninja_steps.objects_first); then as before
  assert ninja_runs[0] is run_ninja and ninja_runs[1] is not run_ninja
  assert cpp_extension._run_ninja_build is run_ninja  # pylint: disable=protected-access
  fast, plain = fake.calls
  assert fast["cuda_sources"] == [fast_build.light_cuda_source(KERNEL), "__global__ void g() {}\n"]
  assert plain == dict(name="ext", cpp_sources="",
                       cuda_sources=[KERNEL, "__global__ void g() {}\n"], functions=["f"],
                       extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
                       extra_include_paths=None, verbose=False, no_implicit_headers=False)
  assert log == [f"fast build (light .cu header) failed ({BUILD_FAILURE}); built as asked, "
                 "cuda.cuda.o first"]
  assert [(s["step"], s["ok"]) for s in steps] == [("fast", False), ("as_asked", True)]


def test_step_seconds_sum_a_builds_calls_of_a_step_and_list_builds_by_step():
  builds = [[{"step": "lite", "seconds": 1.0, "ok": False},
             {"step": "fast", "seconds": 2.0, "ok": False},
             {"step": "lite", "seconds": 0.5, "ok": True}],
            [{"step": "as_asked", "seconds": 3.0, "ok": True}],
            [],
            [{"step": "lite", "seconds": 4.0, "ok": True}]]
  assert fast_build.step_seconds(builds) == {"as_asked": [3.0], "fast": [2.0],
                                             "lite": [1.5, 4.0]}
  assert list(fast_build.step_seconds(builds)) == ["as_asked", "fast", "lite"]


def test_a_build_failure_keeps_the_compilers_last_error_lines_and_is_short():
  assert fast_build.failure(RuntimeError(BUILD_ERROR)) == BUILD_FAILURE
  assert fast_build.failure(ImportError("undefined symbol: kz_lite_empty")) == (
      "ImportError: undefined symbol: kz_lite_empty")
  assert fast_build.failure(RuntimeError()) == "RuntimeError"
  many = RuntimeError("\n".join(f"x.cu({i}): error: {'y' * 300}" for i in range(10)))
  short = fast_build.failure(many)
  assert short.startswith("RuntimeError: ") and len(short) == len("RuntimeError: ") + 600
  assert short.endswith("x.cu(9): error: " + "y" * 300)


FUNCTIONS_H = """#pragma once
#include <ATen/Context.h>
#include <ATen/ops/add.h>
#include <ATen/ops/conv2d.h>
  #  include <ATen/ops/relu.h>
#include <ATen/ops/var.h>
namespace at {
inline Tensor var(const Tensor& self, int dim) { return at::var(self, IntArrayRef{dim}); }
}
"""
NATIVE_FUNCTIONS_H = """#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/conv2d_native.h>
#include <ATen/ops/relu_native.h>
"""


def fake_include_dir(root):
  (root / "ATen").mkdir(parents=True)
  (root / "ATen" / "Functions.h").write_text(FUNCTIONS_H)
  (root / "ATen" / "NativeFunctions.h").write_text(NATIVE_FUNCTIONS_H)
  return str(root)


def test_variant_names_count_as_their_operator():
  assert fast_build.names_in(["at::add_out(o, x, y); y.relu_(); at::mm_outf(a, b, c);"]) >= {
      "add", "add_out", "relu", "relu_", "mm", "at", "o"}


def test_only_the_operators_a_source_names_are_included(tmp_path):
  include = fake_include_dir(tmp_path / "torch")
  out = tmp_path / "ops"
  dropped = fast_build.write_op_headers(str(out), ["auto y = at::add_out(o, x, x); y.relu_();"],
                                        include)
  assert dropped == 2  # conv2d.h and conv2d_native.h
  assert (out / "ATen" / "Functions.h").read_text() == FUNCTIONS_H.replace(
      "#include <ATen/ops/conv2d.h>\n", "")  # var stays: the aggregator's own code calls it
  assert (out / "ATen" / "NativeFunctions.h").read_text() == NATIVE_FUNCTIONS_H.replace(
      "#include <ATen/ops/conv2d_native.h>\n", "")


def test_a_source_naming_every_operator_needs_no_new_headers(tmp_path):
  include = fake_include_dir(tmp_path / "torch")
  out = tmp_path / "ops"
  assert fast_build.write_op_headers(str(out), ["add(conv2d(relu(x)))"], include) == 0
  assert not out.exists()


def test_the_cu_is_built_with_its_operators_only_and_the_headers_are_removed_after():
  seen = {}

  def load_inline(name, cpp_sources, cuda_sources=None, functions=None,
                  extra_cuda_cflags=None):
    op_dir = next(f[2:] for f in extra_cuda_cflags if f.startswith("-I"))
    seen.update(flags=extra_cuda_cflags, op_dir=op_dir,
                functions_h=open(os.path.join(op_dir, "ATen", "Functions.h")).read())
    return "module"

  log = []
  load = fast_build.fast_load_inline(load_inline, None, log.append)
  assert load("ext", "", KERNEL + "torch::Tensor f(torch::Tensor x) { return at::relu(x); }",
              extra_cuda_cflags=["-O3"]) == "module"
  assert seen["flags"] == ["-DAT_PER_OPERATOR_HEADERS", f"-I{seen['op_dir']}", "-O3"]
  assert "#include <ATen/ops/relu.h>" in seen["functions_h"]
  assert "#include <ATen/ops/conv2d.h>" not in seen["functions_h"]
  assert not os.path.exists(seen["op_dir"])
  assert log[0].startswith("fast build (light .cu header, named operators only (")


@pytest.mark.timeout(300)
def test_named_operator_headers_compile_a_real_source(tmp_path):
  """With torch's real headers: a source using factories, operators, methods, dtypes and the
  dispatch macros compiles with only its operators, and far fewer headers are read."""
  from torch.utils.cpp_extension import include_paths  # pylint: disable=import-outside-toplevel
  source = tmp_path / "f.cpp"
  source.write_text("""#include <torch/types.h>
torch::Tensor f(torch::Tensor x) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
  auto y = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "f", [&] { y.copy_(at::relu(x)); });
  return torch::add(y, x.sum(), 2.0) * 3;
}
""")
  op_dir = tmp_path / "ops"
  assert fast_build.write_op_headers(str(op_dir), [source.read_text()],
                                     fast_build.torch_include_dir()) > 1000
  flags = ["-std=c++17", *[f for p in include_paths() for f in ("-isystem", p)]]
  lean = ["-DAT_PER_OPERATOR_HEADERS", f"-I{op_dir}"]
  proc = subprocess.run(["c++", *lean, *flags, "-fsyntax-only", "-H", str(source)],
                        capture_output=True, text=True, timeout=280)
  assert proc.returncode == 0, proc.stderr[-3000:]
  read = [line.split()[-1] for line in proc.stderr.splitlines() if line.startswith(".")]
  assert any(p.endswith("ATen/ops/relu.h") for p in read)
  assert any(p.endswith("ATen/ops/empty_like.h") for p in read)
  assert not any(p.endswith("ATen/ops/conv2d.h") or p.endswith("ATen/ops/conv2d_native.h")
                 for p in read)


def test_a_plain_build_fails_as_it_would_have():
  fake = FakeLoadInline(failures=2)
  load = fast_build.fast_load_inline(fake, "/cache/h.h")
  with pytest.raises(RuntimeError, match="Error building extension"):
    load("ext", "", KERNEL)
  assert len(fake.calls) == 2


def test_nothing_to_speed_up_is_one_plain_call():
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, None, log.append)
  assert load("ext", "int f() { return 1; }", functions=["f"]) == "module 1"
  assert fake.calls[0]["extra_cflags"] is None and log == ["plain build (nothing to speed up)"]


@pytest.mark.timeout(600)
def test_the_probe_build_file_is_written_without_building_and_matches_a_build(tmp_path):
  """The PCH's flags come from a probe build file that load_inline writes but does not build;
  a real build of the same probe writes the same flags."""
  from torch.utils import cpp_extension  # pylint: disable=import-outside-toplevel
  written, built = tmp_path / "written", tmp_path / "built"
  written.mkdir()
  built.mkdir()
  run_ninja = cpp_extension._run_ninja_build  # pylint: disable=protected-access
  fast_build.write_probe_build_file(str(written), with_cuda=False)
  assert cpp_extension._run_ninja_build is run_ninja  # pylint: disable=protected-access
  assert sorted(os.listdir(written)) == ["build.ninja", "main.cpp"]  # nothing compiled
  module = cpp_extension.load_inline(
      "kz_pch_probe", cpp_sources=fast_build._PROBE_CPP, functions=["kz_probe"],  # pylint: disable=protected-access
      build_directory=str(built), with_cuda=False)
  assert module.kz_probe is not None
  assert (fast_build._cflags_from_ninja(str(written / "build.ninja"))  # pylint: disable=protected-access
          == fast_build._cflags_from_ninja(str(built / "build.ninja")))  # pylint: disable=protected-access


@pytest.mark.timeout(900)
def test_a_real_precompiled_header_is_valid_for_load_inline_builds(tmp_path):
  """The PCH built from the probe's flags is the one GCC uses for a load_inline extension, and
  the extension it builds computes what the plain one does."""
  cache = tmp_path / "pch"
  header = fast_build.ensure_pch(str(cache), with_cuda=False)
  assert fast_build.ready_pch(str(cache), with_cuda=False) == header
  assert fast_build.ensure_pch(str(cache), with_cuda=False) == header  # built once
  assert [n for n in os.listdir(cache) if n.startswith(".building_")] == []
  recorded = json.load(open(os.path.join(os.path.dirname(header), "pch.json")))

  # GCC's -H marks a header it took from a valid PCH with "!".
  probe = tmp_path / "probe.cpp"
  probe.write_text("#include <torch/extension.h>\nint main() { return 0; }\n")
  proc = subprocess.run([recorded["cxx"], *recorded["cflags"], "-DTORCH_EXTENSION_NAME=x",
                         "-include", header, "-H", "-fsyntax-only", str(probe)],
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert f"! {header}.gch" in proc.stderr

  import torch  # pylint: disable=import-outside-toplevel
  from torch.utils.cpp_extension import load_inline  # pylint: disable=import-outside-toplevel
  log = []
  load = fast_build.fast_load_inline(load_inline, header, log.append)
  module = load("kz_pch_test", "torch::Tensor twice(torch::Tensor x) { return x * 2; }",
                functions=["twice"], build_directory=str(tmp_path),
                extra_cflags=["-Winvalid-pch"])
  assert log == ["fast build (precompiled header)"]
  assert torch.equal(module.twice(torch.arange(4.0)), torch.arange(4.0) * 2)

  # Beside it, the lite header's runtime, compiled with the same flags, links into an extension
  # whose second translation unit sees only the lite header.
  from torch.utils.cpp_extension import load  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import lite_build  # pylint: disable=import-outside-toplevel
  assert fast_build.lite_intact(header) and recorded["lite"] is not None
  (tmp_path / "main.cpp").write_text(
      "#include <torch/extension.h>\ntorch::Tensor halve(torch::Tensor x);\n"
      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"halve\", &halve); }\n")
  (tmp_path / "lite.cpp").write_text(
      '#include "kz_torch_lite.h"\ntorch::Tensor halve(torch::Tensor x) {\n'
      "  auto y = torch::empty_like(x);\n"
      "  for (int64_t i = 0; i < x.numel(); ++i) y.data_ptr<float>()[i] = x.data_ptr<float>()[i] / 2;\n"
      "  return y;\n}\n")
  lite = load("kz_lite_runtime_test", [str(tmp_path / "main.cpp"), str(tmp_path / "lite.cpp")],
              extra_include_paths=[lite_build.LITE_DIR],
              extra_ldflags=[fast_build.lite_object_of(header)],
              build_directory=str(tmp_path))
  assert torch.equal(lite.halve(torch.arange(4.0)), torch.arange(4.0) / 2)

  # And the binding header precompiled with the same flags, beside copies of the lite headers:
  # GCC takes it for a lite main.cpp that includes it first, not for one that defines a macro
  # the header tests before it (the text header then, as without the PCH).
  assert fast_build.bind_intact(header) and recorded["bind_error"] is None
  bind = fast_build.bind_dir_of(header)
  for first, used in (("", True), ("#define KZ_LITE_HALF\n", False)):
    probe.write_text(first + '#include "kz_torch_lite_bind.h"\nint main() { return 0; }\n')
    proc = subprocess.run([recorded["cxx"], *recorded["cflags"], "-DTORCH_EXTENSION_NAME=x",
                           "-I", bind, "-I", lite_build.LITE_DIR, "-H", "-fsyntax-only",
                           str(probe)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (f"! {bind}/kz_torch_lite_bind.h.gch" in proc.stderr) == used, proc.stderr[:2000]
  # A lite main.cpp built that way binds the lite code as torch's headers do.
  (tmp_path / "main.cpp").write_text(
      lite_build.lite_cpp_sources(["torch::Tensor halve(torch::Tensor x);"])[0]
      + "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
      'm.def("halve", torch::wrap_pybind_function(halve), "halve");\n}\n')
  (tmp_path / "bound").mkdir()
  bound = load("kz_lite_bind_pch_test", [str(tmp_path / "main.cpp"), str(tmp_path / "lite.cpp")],
               extra_include_paths=[bind, lite_build.LITE_DIR],
               extra_ldflags=[fast_build.lite_object_of(header)],
               extra_cflags=["-Winvalid-pch"], build_directory=str(tmp_path / "bound"))
  assert torch.equal(bound.halve(torch.arange(4.0)), torch.arange(4.0) / 2)
  with pytest.raises(TypeError, match="incompatible function arguments"):
    bound.halve("not a tensor")


def test_a_pch_changed_after_its_build_is_not_used(tmp_path):
  """A candidate's compiler flags can write outside its directory (-o, -MF): a PCH that is not
  the one its builder wrote is never handed to another build (and the judge rejects the
  candidate whose build changed it)."""
  key_dir = tmp_path / fast_build.cache_key(False)
  key_dir.mkdir()
  header = key_dir / fast_build.PCH_HEADER
  header.write_text("#include <torch/extension.h>\n")
  gch = key_dir / (fast_build.PCH_HEADER + ".gch")
  gch.write_bytes(b"precompiled")
  fingerprint = fast_build._fingerprint(str(gch))  # pylint: disable=protected-access
  (key_dir / "pch.json").write_text(json.dumps({"cxx": "c++", "cflags": [], "gch": fingerprint}))
  assert fast_build.pch_intact(str(header))
  assert fast_build.ready_pch(str(tmp_path), with_cuda=False) == str(header)
  gch.write_bytes(b"poisoned!!!")  # rewritten in place
  assert not fast_build.pch_intact(str(header))
  assert fast_build.ready_pch(str(tmp_path), with_cuda=False) is None
  (key_dir / "pch.json").unlink()
  assert not fast_build.pch_intact(str(header))
