"""The fast build skipped after a lite build that the light header cannot mend (light_names.py)."""

from __future__ import annotations

import os
import shutil

import pytest

from kernelzero_jax.sandbox import fast_build
from kernelzero_jax.sandbox import light_names

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")

# nvcc's errors as torch's ninja build reports them.
UNDECLARED = ("Error building extension 'ext': [1/3] nvcc -c cuda.cu -o cuda.cuda.o\n"
              "FAILED: [code=1] cuda.cuda.o \nnvcc -c cuda.cu -o cuda.cuda.o\n"
              '/tmp/b/cuda.cu(14): error: identifier "kz_helper" is undefined\n'
              '/tmp/b/cuda.cu(20): error #20-D: identifier "kz_other" is undefined\n'
              '          detected during instantiation of "void k<T>(T *) [with T=float]"\n'
              "2 errors detected in the compilation of \"/tmp/b/cuda.cu\".\n"
              "[2/3] c++ -c main.cpp -o main.o\nninja: build stopped: subcommand failed.")
TYPE_ERROR = UNDECLARED.replace('error #20-D: identifier "kz_other" is undefined',
                                'error: no suitable conversion function from "at::Tensor" to '
                                '"float *" exists')
FATAL = ("FAILED: cuda.cuda.o\n"
         "/tmp/b/cuda.cu:1:10: fatal error: cusparse.h: No such file or directory\n")
KERNEL = "#include <torch/extension.h>\n__global__ void k(float* x) { kz_helper(); }\n"


@pytest.mark.parametrize("error, names, cannot", [
    (UNDECLARED, frozenset({"at", "c10"}), True),      # the candidate's own names
    (UNDECLARED, frozenset({"kz_other"}), False),      # one the light header declares
    (TYPE_ERROR, frozenset(), False),                  # another kind of error: it may mend it
    (FATAL, frozenset(), False),
    ("ninja: build stopped: subcommand failed.", frozenset(), False),  # no error line at all
    ("1 error detected in the compilation", frozenset(), False),
])
def test_only_undefined_identifiers_the_light_header_lacks_skip_the_fast_build(error, names,
                                                                               cannot):
  assert light_names.cannot_help(RuntimeError(error), names) is cannot


def test_nvcc_and_its_flags_are_read_from_the_build_file(tmp_path):
  (tmp_path / "build.ninja").write_text(
      "ninja_required_version = 1.3\ncxx = c++\nnvcc = /opt/cuda/bin/nvcc\n\n"
      "cflags = -DTORCH_EXTENSION_NAME=kz -I/x\n"
      "cuda_cflags = -DTORCH_EXTENSION_NAME=kz -isystem '/a b' --expt-relaxed-constexpr\n"
      "cuda_post_cflags = -gencode=arch=compute_90,code=sm_90 --compiler-options '-fPIC'\n")
  assert light_names.cuda_command_from_ninja(str(tmp_path / "build.ninja")) == (
      "/opt/cuda/bin/nvcc", ["-isystem", "/a b", "--expt-relaxed-constexpr",
                             "-gencode=arch=compute_90,code=sm_90", "--compiler-options",
                             "-fPIC"])


def _build_file(tmp_path, flags: str) -> str:
  path = tmp_path / "build.ninja"
  path.write_text(f"nvcc = {NVCC}\ncuda_cflags = {flags}\ncuda_post_cflags = \n")
  return str(path)


@needs_nvcc
def test_the_names_are_every_identifier_and_macro_of_the_preprocessed_header(tmp_path):
  (tmp_path / "inc").mkdir()
  (tmp_path / "inc" / "kz_h.h").write_text("#define KZ_MACRO(x) (x)\nint kz_declared(int);\n")
  (tmp_path / "out").mkdir()
  assert light_names.write(str(tmp_path / "out"), _build_file(tmp_path, f"-I{tmp_path}/inc"),
                           header="kz_h.h") is None
  names = light_names.read(str(tmp_path / "out" / light_names.FILE))
  assert {"kz_declared", "KZ_MACRO", "__CUDACC__"} <= names and "kz_helper" not in names
  assert not light_names.cannot_help(UNDECLARED.replace("kz_other", "KZ_MACRO"), names)
  assert light_names.cannot_help(UNDECLARED, names)


@needs_nvcc
def test_torchs_light_header_declares_what_a_kernel_takes_from_it(tmp_path):
  """The names of torch/types.h as a .cu sees it (this machine's torch, with nvcc)."""
  from torch.utils import cpp_extension  # pylint: disable=import-outside-toplevel
  flags = " ".join(f"-isystem {p}" for p in cpp_extension.include_paths()) + " -std=c++17"
  assert light_names.write(str(tmp_path), _build_file(tmp_path, flags)) is None
  names = light_names.read(str(tmp_path / light_names.FILE))
  # torch's macros and names, and CUDA's half type that c10's Half pulls in for a .cu
  assert {"TORCH_CHECK", "at", "c10", "Tensor", "__half", "INFINITY"} <= names
  assert "kz_helper" not in names


def test_a_failed_nvcc_leaves_no_names(tmp_path):
  (tmp_path / "build.ninja").write_text("nvcc = /nonexistent/nvcc\ncuda_cflags = \n")
  assert "nonexistent" in light_names.write(str(tmp_path), str(tmp_path / "build.ninja"))
  assert not (tmp_path / light_names.FILE).exists()
  assert light_names.read(str(tmp_path / light_names.FILE)) is None


class Builds:
  """load_inline's stand-in: records each call (the .cu it got), raises the given errors in
  turn."""

  def __init__(self, *errors):
    self.calls, self.errors = [], list(errors)

  def __call__(self, name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
               extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None,
               no_implicit_headers=False, with_pytorch_error_handling=True):
    del name, functions, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths
    del no_implicit_headers, with_pytorch_error_handling
    self.calls.append({"cpp_sources": cpp_sources, "cuda_sources": cuda_sources})
    if self.errors:
      raise RuntimeError(self.errors.pop(0))
    return f"module {len(self.calls)}"


def _load(builds, log, steps, names_file=None, **kwargs):
  return fast_build.fast_load_inline(builds, None, log.append, op_headers=False,
                                     lite_object="/cache/rt.o", steps=steps,
                                     light_names=names_file, **kwargs)


def _names_file(tmp_path, *names) -> str:
  path = tmp_path / light_names.FILE
  path.write_text("\n".join(("at", "c10", *names)) + "\n")
  return str(path)


@pytest.mark.parametrize("declared, expected", [
    ((), ["lite", "as_asked"]),                      # nothing to mend: as asked at once
    (("kz_other",), ["lite", "fast", "as_asked"]),   # the light header may mend it: as before
])
def test_a_lite_build_the_light_header_cannot_mend_is_built_as_asked_next(tmp_path, declared,
                                                                          expected):
  builds, log, steps = Builds(UNDECLARED, UNDECLARED, UNDECLARED), [], []
  with pytest.raises(RuntimeError, match="kz_helper"):
    _load(builds, log, steps, _names_file(tmp_path, *declared))("ext", "", KERNEL)
  assert [s["step"] for s in steps] == expected
  assert (light_names.CANNOT_HELP in log) is (not declared)
  assert builds.calls[-1]["cuda_sources"] == KERNEL  # the last build: as asked
  if not declared:
    assert log[-1].startswith("built as asked, cuda.cuda.o first (no fast build")


def test_without_names_nothing_is_skipped_and_a_prebuilder_only_tells(tmp_path):
  builds, log, steps = Builds(UNDECLARED, UNDECLARED, UNDECLARED), [], []
  with pytest.raises(RuntimeError):
    _load(builds, log, steps)("ext", "", KERNEL)
  assert [s["step"] for s in steps] == ["lite", "fast", "as_asked"]
  # A prebuilder tries the lite build alone: its log tells its worker (cuda_prebuild.hand_over).
  builds, log, steps = Builds(UNDECLARED), [], []
  with pytest.raises(RuntimeError, match="no lite build"):
    _load(builds, log, steps, _names_file(tmp_path), first_choice_only=True)("ext", "", KERNEL)
  assert [s["step"] for s in steps] == ["lite"] and log[-1] == light_names.CANNOT_HELP


def test_a_worker_told_to_skip_the_fast_build_builds_as_asked_at_once():
  builds, log, steps = Builds(), [], []
  load = fast_build.fast_load_inline(builds, None, log.append, op_headers=False, steps=steps,
                                     skip_light=True)
  assert load("ext", "", KERNEL) == "module 1"
  assert [s["step"] for s in steps] == ["as_asked"] and builds.calls[0]["cuda_sources"] == KERNEL
  # C++ alone: there is no .cu to skip for; built as before
  builds, steps = Builds(), []
  load = fast_build.fast_load_inline(builds, None, op_headers=False, steps=steps, skip_light=True)
  assert load("ext", "int g();") == "module 1" and [s["step"] for s in steps] == ["plain"]


def test_each_extension_s_own_lite_build_decides_for_it(tmp_path):
  """A candidate with two extensions: the first's lite build cannot be mended; the second's .cu
  includes no torch header, so it has no lite build: it builds as before, not as asked."""
  builds, log, steps = Builds(UNDECLARED, UNDECLARED), [], []
  load = _load(builds, log, steps, _names_file(tmp_path))
  with pytest.raises(RuntimeError):
    load("ext", "", KERNEL)
  assert load("ext2", "", "__global__ void g() {}\n") == "module 3"
  assert [s["step"] for s in steps] == ["lite", "as_asked", "plain"]
