"""sandbox/ninja_steps.py: what a failed torch build's ninja output names, and a build that
compiles chosen objects first, with real ninja runs: a build file of this test's own, and a C++
extension that torch's load_inline builds on this CPU machine."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest
from torch.utils import cpp_extension

from kernelzero_jax.sandbox import ninja_steps

# A failed load_inline as torch words it: the .cu failed; main.cpp, compiled meanwhile, did not.
CU_FAILED = ("Error building extension 'ext_v1': [1/3] nvcc -c cuda.cu -o cuda.cuda.o\n"
             "FAILED: [code=1] cuda.cuda.o \nnvcc -c cuda.cu -o cuda.cuda.o\n"
             "cuda.cu(13): error: #error kz_injected_fault\n"
             "[2/3] c++ -c main.cpp -o main.o\nninja: build stopped: subcommand failed.")


@pytest.mark.parametrize("message, outputs, only_cuda, objects", [
    (CU_FAILED, ["cuda.cuda.o"], True, ["cuda.cuda.o"]),
    ("FAILED: main.o \nc++ -c main.cpp\nFAILED: cuda.cuda.o \n", ["main.o", "cuda.cuda.o"], False,
     ["main.o", "cuda.cuda.o"]),
    ("[3/3] c++ main.o cuda.cuda.o -o ext.so\nFAILED: ext.so \n", ["ext.so"], False, []),
    ("ImportError: ext.so: undefined symbol: f", [], False, []),  # not ninja's
    ("error: FAILED: main.o", [], False, []),  # not at a line's start
])
def test_failed_outputs_are_the_ones_ninja_names_at_a_line_start(message, outputs, only_cuda,
                                                                  objects):
  error = RuntimeError(message)
  assert ninja_steps.failed_outputs(error) == outputs
  assert ninja_steps.only_cuda_failed(error) is only_cuda
  assert ninja_steps.failed_objects(error) == objects


def _build_file(directory, fails: bool) -> None:
  """Two objects and a link, as load_inline's: `bad.o` fails where `fails`, `main.o` takes
  its time and leaves its file."""
  bad = "echo 'bad.cu(1): error: kz_missing' && exit 1" if fails else "touch $out"
  (directory / "build.ninja").write_text(textwrap.dedent(f"""\
      rule bad
        command = sh -c "{bad}"
      rule slow
        command = sh -c "sleep 0.3 && touch $out"
      rule link
        command = sh -c "cat $in > $out"
      build bad.o: bad
      build main.o: slow
      build ext.so: link bad.o main.o
      default ext.so
      """))


def test_the_objects_named_build_alone_first_and_a_failure_stops_the_build_there(tmp_path):
  _build_file(tmp_path, fails=True)
  assert ninja_steps.build_outputs(str(tmp_path)) == {"bad.o", "main.o", "ext.so"}
  run_ninja = cpp_extension._run_ninja_build  # pylint: disable=protected-access
  with ninja_steps.objects_first(["bad.o", "elsewhere.o"]):
    patched = cpp_extension._run_ninja_build  # pylint: disable=protected-access
    assert patched is not run_ninja
    with pytest.raises(RuntimeError) as raised:
      patched(str(tmp_path), False, "Error building extension 'ext'")
  assert cpp_extension._run_ninja_build is run_ninja  # pylint: disable=protected-access
  message = str(raised.value)
  assert message.startswith("Error building extension 'ext': ")
  assert ninja_steps.failed_outputs(raised.value) == ["bad.o"] and "kz_missing" in message
  assert not (tmp_path / "main.o").exists()  # never started
  # torch's own run builds both side by side and fails the same way, main.o built meanwhile
  with pytest.raises(RuntimeError) as raised:
    run_ninja(str(tmp_path), False, "Error building extension 'ext'")
  assert ninja_steps.failed_outputs(raised.value) == ["bad.o"]
  assert (tmp_path / "main.o").exists()


def test_where_the_objects_compile_the_build_goes_on_as_it_would_have(tmp_path):
  _build_file(tmp_path, fails=False)
  with ninja_steps.objects_first(["bad.o"]):
    cpp_extension._run_ninja_build(str(tmp_path), False, "x")  # pylint: disable=protected-access
  assert all((tmp_path / out).exists() for out in ("bad.o", "main.o", "ext.so"))
  # nothing named, or nothing the build file has: torch's own run, untouched
  run_ninja = cpp_extension._run_ninja_build  # pylint: disable=protected-access
  with ninja_steps.objects_first([]):
    assert cpp_extension._run_ninja_build is run_ninja  # pylint: disable=protected-access
  (tmp_path / "ext.so").unlink()
  with ninja_steps.objects_first(["elsewhere.o"]):
    cpp_extension._run_ninja_build(str(tmp_path), False, "x")  # pylint: disable=protected-access
  assert (tmp_path / "ext.so").exists()


def test_torchs_load_inline_runs_the_object_first(tmp_path, monkeypatch):
  """The build torch writes for load_inline names main.cpp's object main.o, and its build goes
  through the patched run: the broken main.cpp fails alone, ninja asked for main.o."""
  runs = []
  real_run = subprocess.run

  def recorded(args, *a, **k):
    runs.append(list(args))
    return real_run(args, *a, **k)
  monkeypatch.setattr(subprocess, "run", recorded)
  source = "#include <pybind11/pybind11.h>\nint seven() { return kz_missing; }\n"
  with ninja_steps.objects_first(["main.o"]):
    with pytest.raises(RuntimeError) as raised:
      cpp_extension.load_inline("kz_ninja_steps_test", cpp_sources=[source],
                                no_implicit_headers=True, build_directory=str(tmp_path))
  assert "kz_missing" in str(raised.value)
  assert ninja_steps.failed_outputs(raised.value) == ["main.o"]
  assert str(raised.value).startswith("Error building extension 'kz_ninja_steps_test'")
  assert [r for r in runs if r[:2] == ["ninja", "-v"]] == [["ninja", "-v", "main.o"]]
  assert os.path.exists(tmp_path / "build.ninja")
