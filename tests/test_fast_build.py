"""Faster load_inline builds (sandbox/fast_build.py): the rewrite, the fallback, a real PCH."""

from __future__ import annotations

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


class FakeLoadInline:
  """Records every call; fails the first `failures` of them."""

  def __init__(self, failures=0):
    self.calls, self.failures = [], failures

  def __call__(self, name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
               verbose=False):
    self.calls.append(dict(name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources,
                           functions=functions, extra_cflags=extra_cflags, verbose=verbose))
    if len(self.calls) <= self.failures:
      raise RuntimeError("Error building extension")
    return f"module {len(self.calls)}"


def test_the_fast_build_adds_the_pch_and_the_light_header():
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, "/cache/kz_torch_extension.h", log.append)
  assert load("ext", "torch::Tensor f(torch::Tensor x);", KERNEL, functions=["f"],
              extra_cflags=["-O3"]) == "module 1"
  (call,) = fake.calls
  assert call["cuda_sources"] == [fast_build.light_cuda_source(KERNEL)]
  assert call["extra_cflags"] == ["-include", "/cache/kz_torch_extension.h", "-O3"]
  assert call["cpp_sources"] == "torch::Tensor f(torch::Tensor x);" and call["functions"] == ["f"]
  assert log == ["fast build (light .cu header, precompiled header)"]


def test_a_failed_fast_build_is_built_again_exactly_as_asked():
  fake, log = FakeLoadInline(failures=1), []
  load = fast_build.fast_load_inline(fake, None, log.append)
  assert load("ext", cpp_sources="", cuda_sources=[KERNEL, "__global__ void g() {}\n"],
              functions=["f"]) == "module 2"
  fast, plain = fake.calls
  assert fast["cuda_sources"] == [fast_build.light_cuda_source(KERNEL), "__global__ void g() {}\n"]
  assert plain == dict(name="ext", cpp_sources="",
                       cuda_sources=[KERNEL, "__global__ void g() {}\n"], functions=["f"],
                       extra_cflags=None, verbose=False)
  assert log == ["fast build (light .cu header) failed (RuntimeError); built as asked"]


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
