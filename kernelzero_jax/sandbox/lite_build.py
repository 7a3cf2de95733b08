"""CUDA candidates built against kz_torch_lite.h instead of torch's headers (the .cu only).

nvcc parses a .cu three times (cudafe++, cicc, the host compiler), and with torch/extension.h,
or even torch/types.h and only the operators it names (fast_build.py), that parsing is nearly
all of a candidate's build. `lite/kz_torch_lite.h` declares the part of torch's C++ API that
kernel files use (at::Tensor and its common methods, the factories, TensorOptions, dtypes and
devices, TORCH_CHECK, the AT_DISPATCH family, the current CUDA stream, the CUDA guards and error
checks) with torch's names, layout and meaning; each operation calls a kz_lite_* function of
`lite/kz_torch_lite_runtime.cpp`, compiled with torch's real headers once per machine next to
the precompiled header (fast_build.build_pch) and linked into every lite-built extension. A
source that names a 16-bit float type also gets c10's Half and BFloat16 (KZ_LITE_HALF), one
that names what <string>, <sstream> or <stdexcept> declare gets those (KZ_LITE_STD_TEXT).

With SandboxConfig.lite_main_cpp, the generated main.cpp (the candidate's cpp_sources and the
pybind11 module load_inline adds) is built against `lite/kz_torch_lite_bind.h` too: pybind11,
the lite header, a caster for at::Tensor and torch::wrap_pybind_function, whose conversions and
exception translation are the runtime's, i.e. torch's (`lite_cpp_sources`).

`lite_cuda_sources` swaps a .cu's torch includes for the lite header; a .cu that includes any
other torch, ATen or c10 header (say ATen/cuda/Atomic.cuh) is not lite-built. A .cu that uses a
name the lite header lacks fails to compile, and fast_build.fast_load_inline builds it again the
next way (operator headers and the PCH, then exactly as asked): the lite build only ever saves
time.
"""

from __future__ import annotations

import os
import re

LITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lite")
LITE_HEADER = "kz_torch_lite.h"
BIND_HEADER = "kz_torch_lite_bind.h"  # a lite main.cpp's: pybind11 and at::Tensor's caster
RUNTIME_SOURCE = os.path.join(LITE_DIR, "kz_torch_lite_runtime.cpp")
RUNTIME_OBJECT = "kz_torch_lite_runtime.o"
# load_inline puts `#include <torch/types.h>`, <cuda.h> and <cuda_runtime.h> at the top of every
# .cu unless told not to (no_implicit_headers); a lite build tells it not to and adds these two.
IMPLICIT_CUDA_INCLUDES = "#include <cuda.h>\n#include <cuda_runtime.h>\n"
# The torch headers whose use in a kernel file the lite header covers.
_COVERED = ("torch/extension.h", "torch/types.h", "torch/torch.h", "ATen/ATen.h",
            "ATen/cuda/CUDAContext.h", "c10/cuda/CUDAStream.h", "c10/cuda/CUDAException.h",
            "c10/cuda/CUDAGuard.h", "ATen/cuda/CUDAGuard.h")
_HALF = re.compile(r"half|bfloat16|kfloat16", re.IGNORECASE)
# Names the standard text and stream headers declare (<string>, <sstream>, <stdexcept> and what
# they include), which the lite header includes only for a .cu that names one (KZ_LITE_STD_TEXT):
# nvcc parses them three times: a lite .cu 1.73 CPU seconds without them, 2.61 with them, on the
# CPU machine; in a batch of 151 on an H100 machine's 16 cores, a whole lite build 2.00 s instead
# of 2.41 at the median, the same verdicts (BENCHMARKS.md). A name missed here fails the lite
# build, which then builds the next way (fast_load_inline). A word that only looks like one
# (`hex`) costs only that time.
_STD_TEXT = re.compile(
    r"\b(?:(?:w|basic_|u8|u16|u32)?string(?:_view)?|(?:basic_)?[io]?stringstream|stringbuf"
    r"|[io]?f?stream|iostream|ios(?:_base)?|streamsize|streambuf|cout|cerr|clog|cin|endl|ends"
    r"|flush|getline|to_w?string|sto(?:i|l|ll|ul|ull|f|d|ld)|runtime_error|logic_error"
    r"|invalid_argument|out_of_range|domain_error|length_error|range_error|overflow_error"
    r"|underflow_error|exception|bad_\w+|error_code|system_error|locale|char_traits|hash"
    r"|setw|setprecision|setfill|fixed|scientific|hex|dec|oct|boolalpha|quoted)\b"
    r"|using\s+namespace\s+std\b")
_TORCH_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]((?:torch|ATen|c10|caffe2)/[^>"]+)[>"][^\n]*$', re.MULTILINE)


def includes_torch(source: str) -> bool:
  """Whether `source` includes a torch, ATen or c10 header."""
  return bool(_TORCH_INCLUDE.search(source))


def lite_cuda_source(source: str, std_text_always: bool | None = None) -> str | None:
  """`source` with its torch includes replaced by the lite header, or None when it includes a
  torch header the lite header does not cover, or none at all. KZ_LITE_STD_TEXT defined above
  the header where the source names what the standard text headers declare (_STD_TEXT), or
  with `std_text_always` whatever it names, as every lite .cu before 2026-12-06 (None: where
  the environment has KZ_LITE_STD_TEXT_ALWAYS=1, benchmarks' path token `stdtext`)."""
  if std_text_always is None:
    std_text_always = os.environ.get("KZ_LITE_STD_TEXT_ALWAYS") == "1"
  return (_with_header(source, LITE_HEADER, std_text="always" if std_text_always else "named")
          if includes_torch(source) else None)


def _with_header(source: str, header: str, std_text: str = "never") -> str | None:
  """`source` with its torch includes (all covered, or None) replaced by `header`, which comes
  first when it includes none; KZ_LITE_HALF defined above it when the source names half, and
  KZ_LITE_STD_TEXT by `std_text`: "never" (main.cpp's headers define it themselves), "named"
  (a .cu that names what the text headers declare) or "always"."""
  includes = _TORCH_INCLUDE.findall(source)
  if any(path not in _COVERED for path in includes):
    return None
  include = f'#include "{header}"'
  first = True

  def replace(_match: re.Match) -> str:
    nonlocal first
    line, first = (include if first else ""), False
    return line

  lite = _TORCH_INCLUDE.sub(replace, source) if includes else include + "\n" + source
  # torch's 16-bit float types, and the text headers, only for a source that names them.
  defines = [name for name, named in (("KZ_LITE_HALF", _HALF.search(source)),
                                      ("KZ_LITE_STD_TEXT", std_text == "always" or (
                                          std_text == "named" and _STD_TEXT.search(source))))
             if named]
  return lite.replace(include, "".join(f"#define {name}\n" for name in defines) + include, 1)


def lite_cpp_sources(sources: list[str], header: str = BIND_HEADER) -> list[str] | None:
  """load_inline's cpp_sources for a lite main.cpp: joined, their torch includes (all covered,
  or None) replaced by the binding header (put first when they include none). load_inline then
  adds its pybind11 module, whose torch::wrap_pybind_function the binding header declares.
  (lite_capi's main.cpp has its own `header` and module instead.)"""
  lite = _with_header("\n".join(sources), header)
  return None if lite is None else [lite]


def lite_cuda_sources(sources: list[str], std_text_always: bool | None = None
                      ) -> list[str] | None:
  """load_inline's cuda_sources as the one lite .cu it would write (it joins them by lines), or
  None if that cannot be lite (`std_text_always`: lite_cuda_source's)."""
  lite = lite_cuda_source("\n".join(sources), std_text_always)
  return None if lite is None else [lite]


def runtime_compile_command(cxx: str, cflags: list[str], out_dir: str,
                            with_cuda: bool) -> list[str]:
  """The command that compiles the runtime with a candidate build's own C++ flags."""
  return [cxx, "-c", *cflags, *(["-DKZ_LITE_WITH_CUDA"] if with_cuda else []), RUNTIME_SOURCE,
          "-o", os.path.join(out_dir, RUNTIME_OBJECT)]
