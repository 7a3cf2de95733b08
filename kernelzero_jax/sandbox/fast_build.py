"""Faster `load_inline` builds for CUDA candidates, with the plain build as the fallback.

A `load_inline` extension is two translation units: the generated `main.cpp` (the candidate's
`cpp_sources` and pybind11 bindings, after `#include <torch/extension.h>`) and the candidate's
`cuda_sources` as a `.cu` file, which nearly always begins with the same include. Parsing
torch/extension.h (the whole C++ frontend, pybind11 and Python.h) is most of the build. Two
changes cut it without touching what the candidate computes:

- **A precompiled header for main.cpp.** `ensure_pch` builds torch/extension.h once per machine
  (torch, compiler and flags in the cache key) with the exact compiler flags `load_inline` uses,
  read from the build file of a probe extension. Candidates then compile with `-include` of
  that header: GCC uses the .gch when it is valid for the command line and otherwise includes
  the header as text, so a stale or mismatched PCH is slower, never wrong.
- **A lighter header for the .cu.** `light_cuda_source` replaces `#include <torch/extension.h>`
  with `#include <torch/types.h>` (ATen, the torch:: aliases and dtypes, TORCH_CHECK; not the
  C++ frontend's nn/optim/data, nor pybind11), which a kernel file rarely needs.
- **Only the operators the .cu names.** ATen/Functions.h and ATen/NativeFunctions.h are lists
  of per-operator headers (thousands), and nvcc parses the .cu three times (host preprocessing
  and compile, cudafe++, cicc). `write_op_headers` writes both files again with only the
  operators whose names appear in the .cu (or in the aggregator's own code), in a directory
  searched before torch's, and the .cu is built with `AT_PER_OPERATOR_HEADERS` (PyTorch's own
  switch for its per-operator builds), so other headers include just the operators they use.
  Every name the source can call keeps its whole overload set, so overload resolution cannot
  change; an operator reached only through a macro fails to compile and the plain build runs.

`fast_load_inline` wraps `torch.utils.cpp_extension.load_inline`: it builds with these changes,
and when that build fails for any reason it builds again exactly as asked, so a candidate that
compiles the plain way still compiles, and one that does not still fails with the plain error.
Given the lite runtime, it first tries the .cu against kz_torch_lite.h instead of torch's headers
(lite_build.py; SandboxConfig.lite_cuda_header); the runtime is compiled here, beside the PCH.
So is the lite main.cpp's binding header (pybind11 and the lite header), precompiled into
`bind/` with copies of the two lite headers (SandboxConfig.lite_bind_pch): a lite main.cpp built
with that directory first in its include path gets the .gch from GCC where it is valid (its
`#include` comes before any other code, no macro that changes it is defined), the same header
as text otherwise.

The PCH is built by trusted processes only (the sandbox pool, before any candidate runs in that
cache), into a temporary directory renamed into place; workers only read it.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from kernelzero_jax.sandbox import light_names as light_names_lib
from kernelzero_jax.sandbox import lite_build
from kernelzero_jax.sandbox import lite_capi
from kernelzero_jax.sandbox import ninja_steps

_EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][ \t]*$',
                                re.MULTILINE)
LIGHT_INCLUDE = "#include <torch/types.h>"
PCH_HEADER = "kz_torch_extension.h"
BIND_DIR = "bind"  # beside the PCH: the lite headers and the binding header's .gch
# The aggregators of per-operator headers, and the suffix of the headers each includes.
OP_AGGREGATORS = {os.path.join("ATen", "Functions.h"): "",
                  os.path.join("ATen", "NativeFunctions.h"): "_native"}
_OP_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<ATen/ops/(\w+)\.h>[ \t]*$")
_VARIANT_SUFFIX = re.compile(r"(_symint|_outf|_out|_)+$")
_PROBE_CPP = "torch::Tensor kz_probe(torch::Tensor x) { return x; }"
_PROBE_CUDA = ("#include <torch/extension.h>\n"
               "__global__ void kz_probe_kernel(float* x) { x[0] = 0.f; }\n")


def light_cuda_source(source: str) -> str | None:
  """`source` with torch/extension.h replaced by the light header, or None if it has none."""
  light, n = _EXTENSION_INCLUDE.subn(LIGHT_INCLUDE, source)
  return light if n else None


def names_in(sources: list[str]) -> set[str]:
  """The identifiers of `sources`, plus each with ATen's variant suffixes removed (`add_`,
  `add_out`, `add_outf`, `add_symint` are declared by the header of `add`)."""
  identifiers = set(light_names_lib.IDENTIFIER.findall("\n".join(sources)))
  return identifiers | {_VARIANT_SUFFIX.sub("", name) for name in identifiers}


def torch_include_dir() -> str | None:
  """The include directory holding torch's ATen/Functions.h, or None."""
  from torch.utils import cpp_extension  # pylint: disable=import-outside-toplevel
  for path in cpp_extension.include_paths():
    if os.path.isfile(os.path.join(path, "ATen", "Functions.h")):
      return path
  return None


def write_op_headers(out_dir: str, sources: list[str], include_dir: str) -> int:
  """Writes ATen/Functions.h and ATen/NativeFunctions.h under `out_dir`: torch's own (from
  `include_dir`) with only the per-operator includes of operators named in `sources` or in the
  aggregator's own code. Returns how many per-operator includes were dropped (0: nothing to
  gain, nothing written)."""
  named = names_in(sources)
  dropped, texts = 0, {}
  for relative, suffix in OP_AGGREGATORS.items():
    try:
      with open(os.path.join(include_dir, relative), encoding="utf-8") as f:
        lines = f.read().splitlines()
    except OSError:
      continue
    own_code = "\n".join(line for line in lines if not _OP_INCLUDE.match(line))
    keep = named | names_in([own_code])
    kept = []
    for line in lines:
      match = _OP_INCLUDE.match(line)
      if match:
        op = match.group(1)
        op = op[:-len(suffix)] if suffix and op.endswith(suffix) else op
        if op not in keep:
          dropped += 1
          continue
      kept.append(line)
    texts[relative] = "\n".join(kept) + "\n"
  if dropped:
    for relative, text in texts.items():
      path = os.path.join(out_dir, relative)
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path, "w", encoding="utf-8") as f:
        f.write(text)
  return dropped


def default_cache_dir() -> str:
  root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(root, "kernelzero_jax", "pch")


def _compiler_version(cxx: str) -> str:
  try:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.splitlines()[0] if out.stdout else ""
  except (OSError, subprocess.SubprocessError):
    return ""


def cache_key(with_cuda: bool) -> str:
  """Identifies what the PCH depends on: torch, Python, the compiler, CUDA or not, and the
  sources of what is built beside it (the lite runtime and headers, the light names)."""
  import torch  # pylint: disable=import-outside-toplevel
  cxx = os.environ.get("CXX", "c++")
  parts = [torch.__version__, sys.version, cxx, _compiler_version(cxx), f"cuda={with_cuda}",
           os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
           *(_file_digest(path) for path in (
               lite_build.RUNTIME_SOURCE, os.path.join(lite_build.LITE_DIR, lite_build.LITE_HEADER),
               os.path.join(lite_build.LITE_DIR, lite_build.BIND_HEADER),
               light_names_lib.__file__))]
  return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _file_digest(path: str) -> str:
  try:
    with open(path, "rb") as f:
      return hashlib.sha256(f.read()).hexdigest()[:16]
  except OSError:
    return ""


def _cflags_from_ninja(path: str) -> tuple[str, list[str]]:
  """(compiler, C++ flags) of the build file `load_inline` wrote, without the extension name."""
  cxx, cflags = "c++", []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.startswith("cxx = "):
        cxx = line.split("=", 1)[1].strip()
      elif line.startswith("cflags = "):
        cflags = shlex.split(line.split("=", 1)[1])
      elif line.startswith("post_cflags = "):
        cflags += shlex.split(line.split("=", 1)[1])
  return cxx, [f for f in cflags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


class _BuildFileWritten(Exception):
  """Stops a probe `load_inline` once its build file is written."""


def write_probe_build_file(probe_dir: str, with_cuda: bool) -> None:
  """Has `load_inline` write the build.ninja of a probe extension into `probe_dir`, without
  building it where torch's build step can be stopped (the build is all that is left then: on
  an H200, most of a minute for the CUDA probe). Raises RuntimeError if it cannot."""
  from torch.utils import cpp_extension  # pylint: disable=import-outside-toplevel
  run_ninja = getattr(cpp_extension, "_run_ninja_build", None)

  def stop(*args, **kwargs):
    del args, kwargs
    raise _BuildFileWritten()
  if run_ninja is not None:
    cpp_extension._run_ninja_build = stop  # pylint: disable=protected-access
  try:
    cpp_extension.load_inline("kz_pch_probe", cpp_sources=_PROBE_CPP, functions=["kz_probe"],
                              cuda_sources=_PROBE_CUDA if with_cuda else None,
                              build_directory=probe_dir, with_cuda=with_cuda)
  except _BuildFileWritten:
    pass
  except Exception as e:  # pylint: disable=broad-except
    raise RuntimeError(f"the probe extension's build file was not written: {e}") from e
  finally:
    if run_ninja is not None:
      cpp_extension._run_ninja_build = run_ninja  # pylint: disable=protected-access
  if not os.path.exists(os.path.join(probe_dir, "build.ninja")):
    raise RuntimeError(f"load_inline wrote no build.ninja into {probe_dir}")


def build_pch(out_dir: str, with_cuda: bool, timeout_s: float = 900) -> str:
  """Builds the PCH into `out_dir` (created); returns the header to pass with -include.

  The build file `load_inline` itself writes for a probe extension gives the exact flags, so
  the PCH matches the candidates' builds on this machine. Raises RuntimeError when a step fails.
  """
  os.makedirs(out_dir, exist_ok=True)
  probe_dir = os.path.join(out_dir, "probe")
  os.makedirs(probe_dir, exist_ok=True)
  write_probe_build_file(probe_dir, with_cuda)
  cxx, cflags = _cflags_from_ninja(os.path.join(probe_dir, "build.ninja"))
  header = os.path.join(out_dir, PCH_HEADER)
  with open(header, "w", encoding="utf-8") as f:
    f.write("#include <torch/extension.h>\n")
  cmd = [cxx, "-x", "c++-header", *cflags, header, "-o", header + ".gch"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
  if proc.returncode != 0:
    raise RuntimeError(f"building the PCH failed: {proc.stderr[-2000:]}")
  # The lite header's runtime (lite_build.py), with the same flags; optional: without it the
  # lite build is skipped, nothing else.
  lite = subprocess.run(lite_build.runtime_compile_command(cxx, cflags, out_dir, with_cuda),
                        capture_output=True, text=True, timeout=timeout_s)
  lite_object = os.path.join(out_dir, lite_build.RUNTIME_OBJECT)
  bind, bind_error = _build_bind_pch(cxx, cflags, os.path.join(out_dir, BIND_DIR), timeout_s)
  # Every name the light .cu header declares (light_names.py); optional, like the runtime.
  names_error = (light_names_lib.write(out_dir, os.path.join(probe_dir, "build.ninja"),
                                       timeout_s=timeout_s)
                 if with_cuda else "no CUDA build here")
  with open(os.path.join(out_dir, "pch.json"), "w", encoding="utf-8") as f:
    json.dump({"cxx": cxx, "cflags": cflags, "gch": _fingerprint(header + ".gch"),
               "lite": _fingerprint(lite_object) if lite.returncode == 0 else None,
               "lite_error": lite.stderr[-2000:] if lite.returncode else None,
               "bind": bind, "bind_error": bind_error, "light_names_error": names_error},
              f, indent=1)
  shutil.rmtree(probe_dir, ignore_errors=True)
  return header


def _build_bind_pch(cxx: str, cflags: list[str], bind_dir: str,
                    timeout_s: float) -> tuple[dict[str, list[int] | None] | None, str | None]:
  """Copies the lite headers into `bind_dir` and precompiles the binding header there with a
  candidate main.cpp's flags. Returns (the fingerprints of the three files, None) or (None, the
  compiler's error): optional, like the runtime; without it a lite main.cpp parses the text."""
  os.makedirs(bind_dir, exist_ok=True)
  names = (lite_build.LITE_HEADER, lite_build.BIND_HEADER)
  for name in names:
    shutil.copyfile(os.path.join(lite_build.LITE_DIR, name), os.path.join(bind_dir, name))
  gch = lite_build.BIND_HEADER + ".gch"
  proc = subprocess.run([cxx, "-x", "c++-header", *cflags, os.path.join(bind_dir, names[1]),
                         "-o", os.path.join(bind_dir, gch)],
                        capture_output=True, text=True, timeout=timeout_s)
  if proc.returncode != 0:
    return None, proc.stderr[-2000:]
  # Names, not paths: the directory is built under a temporary name and renamed into place.
  return {name: _fingerprint(os.path.join(bind_dir, name)) for name in (*names, gch)}, None


def _fingerprint(path: str) -> list[int] | None:
  """What changes when anything rewrites the file: size, modification time, inode."""
  try:
    st = os.stat(path)
  except OSError:
    return None
  return [st.st_size, st.st_mtime_ns, st.st_ino]


def _recorded(header: str, key: str) -> Any:
  """What the builder recorded under `key` in the pch.json beside `header` (None if nothing)."""
  try:
    with open(os.path.join(os.path.dirname(header), "pch.json"), encoding="utf-8") as f:
      return json.load(f).get(key)
  except (OSError, ValueError):
    return None


def _recorded_intact(header: str, key: str, path: str) -> bool:
  """Whether `path` is the file whose fingerprint the builder recorded under `key` in the
  pch.json beside `header` (None recorded: it did not build)."""
  recorded = _recorded(header, key)
  return recorded is not None and recorded == _fingerprint(path)


def pch_intact(header: str) -> bool:
  """Whether the PCH is the one its builder wrote. A candidate's compiler flags could write
  anywhere (e.g. -o or -MF to a path outside its directory); a PCH changed that way must not
  reach other candidates' builds."""
  return _recorded_intact(header, "gch", header + ".gch")


def lite_intact(header: str) -> bool:
  """Whether the lite runtime object beside the PCH `header` is the one its builder wrote."""
  return _recorded_intact(header, "lite", lite_object_of(header))


def bind_dir_of(header: str) -> str:
  return os.path.join(os.path.dirname(header), BIND_DIR)


def bind_intact(header: str) -> bool:
  """Whether the precompiled binding header and the lite headers beside it, in the bind
  directory next to the PCH `header`, are the files its builder wrote (a changed header copy
  would reach every lite build that searches that directory first)."""
  recorded = _recorded(header, "bind")
  bind_dir = bind_dir_of(header)
  return bool(recorded) and all(
      fingerprint is not None and fingerprint == _fingerprint(os.path.join(bind_dir, name))
      for name, fingerprint in recorded.items())


def require_lite(header: str) -> None:
  """Raises RuntimeError, with the compiler's error, if the lite runtime beside the PCH
  `header` did not build or was changed (what must not pass unnoticed where the lite build is
  what is measured)."""
  if not lite_intact(header):
    error = _recorded(header, "lite_error")
    raise RuntimeError(f"the lite header's runtime beside {header} is missing or changed"
                       + (f": {error}" if error else ""))


def require_bind(header: str) -> None:
  """The same for the precompiled binding header beside the PCH `header`."""
  if not bind_intact(header):
    error = _recorded(header, "bind_error")
    raise RuntimeError(f"the precompiled binding header in {bind_dir_of(header)} is missing or "
                       "changed" + (f": {error}" if error else ""))


def lite_object_of(header: str) -> str:
  return os.path.join(os.path.dirname(header), lite_build.RUNTIME_OBJECT)


def ready_pch(cache_dir: str, with_cuda: bool) -> str | None:
  """The PCH header of this machine if it has been built and is intact, else None (never
  builds)."""
  header = os.path.join(cache_dir, cache_key(with_cuda), PCH_HEADER)
  return header if pch_intact(header) else None


def build_into_place(final: str, ready: Callable[[], bool], build: Callable[[str], Any]) -> None:
  """Builds the directory `final` with `build(tmp)` unless `ready()`. One builder at a time (a
  lock file beside it); the build goes to a temporary directory renamed into place, so a reader
  sees a whole build or none, and a builder killed midway leaves only a directory the next one
  removes. What machine-wide builds (the PCH, triton_seed.py) share."""
  parent = os.path.dirname(final)
  os.makedirs(parent, exist_ok=True)
  with open(os.path.join(parent, ".lock"), "w", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if ready():
      return
    for name in os.listdir(parent):  # left by a builder that was killed
      if name.startswith(".building_"):
        shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=".building_", dir=parent)
    try:
      build(tmp)
      shutil.rmtree(final, ignore_errors=True)  # an incomplete or altered one
      os.rename(tmp, final)
    finally:
      shutil.rmtree(tmp, ignore_errors=True)


def ensure_pch(cache_dir: str, with_cuda: bool) -> str:
  """The PCH header for this machine, built first if missing (build_into_place)."""
  final = os.path.join(cache_dir, cache_key(with_cuda))
  header = os.path.join(final, PCH_HEADER)
  build_into_place(final, lambda: pch_intact(header), lambda tmp: build_pch(tmp, with_cuda))
  return header


_ERROR_LINE = re.compile(r"error|undefined", re.IGNORECASE)  # compiler's and linker's words


def failure(error: BaseException, max_lines: int = 4, max_chars: int = 600) -> str:
  """A failed build's exception type and the compiler's last error lines, short enough for a
  verdict's evidence: a fallback that hides why the faster build failed cannot be fixed."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  lines = [line for line in lines if _ERROR_LINE.search(line)] or lines[-1:]
  detail = " | ".join(lines[-max_lines:])[-max_chars:]
  return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


def _source_list(sources: str | list[str]) -> list[str]:
  """load_inline's cpp_sources or cuda_sources (one string or several) as a list."""
  return [sources] if isinstance(sources, str) else list(sources)


# What fast_load_inline's `steps` name its load_inline calls: the lite build with main.cpp through
# CPython's API, the lite build, the fast build, the build as asked after it, a plain build where
# there was nothing to speed up.
BUILD_STEPS = ("lite_capi", "lite", "fast", "as_asked", "plain")


def step_seconds(builds: list[list[dict[str, Any]]]) -> dict[str, list[float]]:
  """Each step's seconds per build that took it (summed over a build's calls), by step name:
  what the benchmarks take medians of, from fast_load_inline's `steps` lists."""
  by_step: dict[str, list[float]] = {}
  for steps in builds:
    summed: dict[str, float] = {}
    for step in steps:
      summed[step["step"]] = summed.get(step["step"], 0.0) + step["seconds"]
    for name, seconds in summed.items():
      by_step.setdefault(name, []).append(seconds)
  return dict(sorted(by_step.items()))


def fast_load_inline(load_inline: Callable[..., Any], pch_header: str | None,
                     log: Callable[[str], None] = lambda _: None,
                     op_headers: bool = True,
                     lite_object: str | None = None,
                     lite_main: bool = True,
                     bind_dir: str | None = None,
                     first_choice_only: bool = False,
                     capi_main: bool = False,
                     steps: list[dict[str, Any]] | None = None,
                     light_names: str | None = None,
                     skip_light: bool = False) -> Callable[..., Any]:
  """`load_inline` that builds with the PCH, the light .cu header and (with `op_headers`) only
  the operators the .cu names first, and exactly as asked if that fails. With `lite_object`
  (the lite runtime, lite_build.py), a .cu that the lite header can serve is built against it
  before all that, and (with `lite_main`) so is the generated main.cpp where it can be, with
  the lite headers and the precompiled binding header of `bind_dir` (bind_dir_of) if given.
  With `capi_main`, a lite main.cpp binds the functions through CPython's API instead of
  pybind11 where lite_capi can (and through pybind11 again if that main.cpp fails to compile).
  With `first_choice_only` (a CUDA prebuilder's, cuda_prebuild.py), only the lite build is
  tried, and anything else raises: the worker builds the rest itself. `steps` gets each
  load_inline call's {"step": one of BUILD_STEPS, "seconds", "ok"}, in order. With
  `light_names` (a names file: light_names.py), a failed lite build whose errors the light
  header cannot mend goes straight to the build as asked, and so does every build with
  `skip_light` (a worker whose prebuilder's lite build failed so)."""
  signature = inspect.signature(load_inline)

  def timed(step: str, *args, **kwargs) -> Any:
    t0 = time.perf_counter()
    ok = False
    try:
      module = load_inline(*args, **kwargs)
      ok = True
      return module
    finally:
      if steps is not None:
        steps.append({"step": step, "seconds": round(time.perf_counter() - t0, 3), "ok": ok})

  def with_pch(arguments: dict[str, Any]) -> list[str]:
    """The C++ flags (main.cpp's) with the precompiled header first."""
    return ["-include", pch_header, *(arguments.get("extra_cflags") or [])]

  def lite_attempt(arguments: dict[str, Any]) -> tuple[Any, bool]:
    """(The module built with the lite .cu header, or None if that is not possible here or
    failed; whether it failed with errors the light header cannot mend: lite_failed)."""
    cuda = arguments.get("cuda_sources")
    if not (lite_object and cuda):
      return None, False
    sources = lite_build.lite_cuda_sources(_source_list(cuda))
    if sources is None:
      return None, False
    if "no_implicit_headers" not in signature.parameters:
      return None, False  # this load_inline puts torch/types.h at the top of every .cu
    cpp = _source_list(arguments.get("cpp_sources") or [])
    implicit = not arguments.get("no_implicit_headers")
    # main.cpp lite too (the binding header instead of torch/extension.h), unless the candidate
    # asked for no implicit headers and includes no torch header itself (it gets none then).
    main = (lite_build.lite_cpp_sources(cpp)
            if lite_main and (implicit or any(map(lite_build.includes_torch, cpp))) else None)
    # Searched first, the bind directory's copies of the lite headers serve both files, and
    # its .gch main.cpp's #include of the binding header, where GCC finds it valid.
    lite_dirs = [bind_dir, lite_build.LITE_DIR] if (main and bind_dir) else [lite_build.LITE_DIR]
    lite = dict(arguments, cuda_sources=sources,
                extra_include_paths=[*lite_dirs, *(arguments.get("extra_include_paths") or [])],
                extra_ldflags=[*(arguments.get("extra_ldflags") or []), lite_object])
    if implicit:
      # What load_inline would add, less torch/types.h in the .cu, which would undo the lite
      # header (and clash with it).
      lite.update(no_implicit_headers=True,
                  cpp_sources=main or ["#include <torch/extension.h>", *cpp],
                  cuda_sources=[lite_build.IMPLICIT_CUDA_INCLUDES + sources[0], *sources[1:]])
    elif main:
      lite["cpp_sources"] = main
    if pch_header and not main:
      lite["extra_cflags"] = with_pch(lite)
    capi = (lite_capi.capi_main_cpp(cpp, arguments.get("functions"),
                                    arguments.get("with_pytorch_error_handling", True))
            if capi_main and main else None)
    if capi is not None:
      try:
        module = timed("lite_capi", **dict(lite, cpp_sources=[capi], functions=None))
        log("lite build (kz_torch_lite.h for the .cu, main.cpp through CPython's API)")
        return module, False
      except Exception as e:  # pylint: disable=broad-except
        if ninja_steps.only_cuda_failed(e):  # the .cu failed: so would pybind11 main.cpp's build
          return lite_failed(e)
        log(f"C-API main.cpp failed ({failure(e)}); binding through pybind11")
    try:
      module = timed("lite", **lite)
    except Exception as e:  # pylint: disable=broad-except
      return lite_failed(e)
    log("lite build (kz_torch_lite.h for the .cu" + (
        (" and main.cpp, binding header precompiled)" if bind_dir else " and main.cpp)")
        if main else ", precompiled header)" if pch_header else ")"))
    return module, False

  def lite_failed(error: Exception) -> tuple[None, bool]:
    """lite_attempt's answer where the lite build failed with `error`."""
    log(f"lite build failed ({failure(error)}); building with torch's headers")
    names = light_names_lib.read(light_names) if light_names else None
    unmendable = names is not None and light_names_lib.cannot_help(error, names)
    if unmendable:
      log(light_names_lib.CANNOT_HELP)
    return None, unmendable

  def wrapper(*args, **kwargs):
    bound = signature.bind(*args, **kwargs)
    module, unmendable = lite_attempt(dict(bound.arguments))
    if module is not None:
      return module
    if first_choice_only:
      raise RuntimeError("prebuild: no lite build of this extension")
    if (skip_light or unmendable) and bound.arguments.get("cuda_sources"):
      # The .cu that failed decides the build as asked first (ninja_steps.objects_first).
      log(f"built as asked, {ninja_steps.CUDA_OBJECT} first (no fast build: "
          f"{light_names_lib.CANNOT_HELP})")
      with ninja_steps.objects_first([ninja_steps.CUDA_OBJECT]):
        return timed("as_asked", *args, **kwargs)
    fast = dict(bound.arguments)
    changes = []
    op_dir = None
    cuda = fast.get("cuda_sources")
    if cuda:
      sources = _source_list(cuda)
      light = [light_cuda_source(s) for s in sources]
      if any(x is not None for x in light):
        sources = [x if x is not None else s for x, s in zip(light, sources)]
        fast["cuda_sources"] = sources
        changes.append("light .cu header")
      include_dir = torch_include_dir() if op_headers else None
      if include_dir:
        try:
          op_dir = tempfile.mkdtemp(prefix="kz_op_headers_")  # TMPDIR: the candidate's directory
          dropped = write_op_headers(op_dir, sources, include_dir)
        except OSError as e:
          log(f"operator headers not written ({e}); all operators included")
          dropped = 0
        if dropped:
          fast["extra_cuda_cflags"] = ["-DAT_PER_OPERATOR_HEADERS", f"-I{op_dir}",
                                       *(fast.get("extra_cuda_cflags") or [])]
          changes.append(f"named operators only ({dropped} operator headers left out)")
    # The PCH is torch/extension.h, which main.cpp has at its top unless the candidate asked
    # load_inline for no implicit headers (then only where it includes it itself).
    if pch_header and (not fast.get("no_implicit_headers") or any(
        "torch/extension.h" in s for s in _source_list(fast.get("cpp_sources") or []))):
      fast["extra_cflags"] = with_pch(fast)
      changes.append("precompiled header")
    try:
      if not changes:
        log("plain build (nothing to speed up)")
        return timed("plain", *args, **kwargs)
      try:
        module = timed("fast", **fast)
        log(f"fast build ({', '.join(changes)})")
        return module
      except Exception as e:  # pylint: disable=broad-except
        # What failed here is built first, and alone, as asked (ninja_steps.objects_first).
        first = ninja_steps.failed_objects(e)
        log(f"fast build ({', '.join(changes)}) failed ({failure(e)}); built as asked"
            + (f", {' '.join(first)} first" if first else ""))
        with ninja_steps.objects_first(first):
          return timed("as_asked", *args, **kwargs)
    finally:
      if op_dir:
        shutil.rmtree(op_dir, ignore_errors=True)

  return wrapper


def main(argv: list[str]) -> int:
  """python -m kernelzero_jax.sandbox.fast_build CACHE_DIR cpu|cuda: builds the PCH."""
  if len(argv) != 3 or argv[2] not in ("cpu", "cuda"):
    print(main.__doc__, file=sys.stderr)
    return 2
  print(ensure_pch(argv[1], argv[2] == "cuda"))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
