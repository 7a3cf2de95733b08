"""Whether the light .cu header could help a candidate whose lite build failed.

After a failed lite build (the .cu against kz_torch_lite.h: lite_build.py), the fast build
compiles the .cu against torch/types.h (the light header: fast_build.py), and where that fails
too, the build as asked compiles it against torch/extension.h. For the usual RL compile error, a
mistake in the candidate's own code, the light build is a parse of torch's headers for nothing:
the light header helps only where the lite build lacked a declaration. So every name that the
light .cu header can declare (the identifiers of `nvcc -E -dD` of it, macros included, with the
flags of load_inline's own build file) is written once per machine beside the precompiled
header, and where every error of a lite build is `identifier "X" is undefined` with no X among
those names, the fast build is skipped and the build as asked comes next
(SandboxConfig.skip_light_after_lite_errors).

That never changes a verdict: the build as asked, which decides it, still runs. A wrong guess
costs speed only (a light build that would have worked skipped for the build as asked).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile

FILE = "light_names.txt"  # beside the precompiled header
# What a build log says where the lite build's errors are of that kind (fast_build.py), and what
# tells a CUDA prebuilder's worker to skip the fast build (cuda_prebuild.hand_over).
CANNOT_HELP = "the lite build's errors name nothing the light header declares"
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# An error line of nvcc's front end (`cuda.cu(14): error: ...`, with its number where nvcc shows
# them: `error #20-D: ...`) or of the host compiler (`main.cpp:3:5: error: ...`, `fatal error:`).
_ERROR_LINE = re.compile(r"^.*?: (?:fatal )?error(?: #\d+(?:-D)?)?: .*$", re.MULTILINE)
_UNDEFINED = re.compile(r'\berror(?: #\d+(?:-D)?)?: identifier "(\w+)" is undefined\b')


def path_of(pch_header: str) -> str:
  """Where the names file of the precompiled header `pch_header` is."""
  return os.path.join(os.path.dirname(pch_header), FILE)


def cuda_command_from_ninja(path: str) -> tuple[str, list[str]]:
  """(nvcc, its flags for a .cu) from the build file `load_inline` wrote, without the
  extension's name."""
  nvcc, flags = "nvcc", []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.startswith("nvcc = "):
        nvcc = line.split("=", 1)[1].strip()
      elif line.startswith(("cuda_cflags = ", "cuda_post_cflags = ")):
        flags += shlex.split(line.split("=", 1)[1])
  return nvcc, [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def write(out_dir: str, build_file: str, header: str = "torch/types.h",
          timeout_s: float = 300) -> str | None:
  """Writes into `out_dir` every name a .cu that includes `header` can use, preprocessed as
  `build_file` (a probe extension's build.ninja) compiles a .cu. Returns None, or what failed."""
  nvcc, flags = cuda_command_from_ninja(build_file)
  with tempfile.TemporaryDirectory(prefix="kz_light_names_") as tmp:
    source = os.path.join(tmp, "light.cu")
    with open(source, "w", encoding="utf-8") as f:
      f.write(f"#include <{header}>\n")
    try:
      proc = subprocess.run([nvcc, *flags, "-E", "-Xcompiler", "-dD", "-x", "cu", source],
                            capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as e:
      return f"{type(e).__name__}: {e}"
  if proc.returncode != 0:
    return proc.stderr[-2000:] or f"nvcc exited with {proc.returncode}"
  names = sorted(set(IDENTIFIER.findall(proc.stdout)))
  with open(os.path.join(out_dir, FILE), "w", encoding="utf-8") as f:
    f.write("\n".join(names) + "\n")
  return None


def read(path: str) -> frozenset[str] | None:
  """The names in the file `path`, or None where it cannot be read."""
  try:
    with open(path, encoding="utf-8") as f:
      return frozenset(f.read().split())
  except OSError:
    return None


def cannot_help(error: BaseException | str, names: frozenset[str]) -> bool:
  """Whether the failed lite build `error` (torch's message, with the compilers' output) shows
  only errors that the light header cannot mend: at least one error, and every one an
  undefined identifier that is none of `names`."""
  lines = _ERROR_LINE.findall(str(error))
  found = [_UNDEFINED.search(line) for line in lines]
  return bool(lines) and all(found) and not any(m[1] in names for m in found)
