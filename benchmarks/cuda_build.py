r"""CUDA candidate build times: `load_inline` as asked against the fast build paths, one run.

    python -m benchmarks.cuda_build --candidates=benchmarks/candidates/honest \
        --modes=plain,light,ops,fast

For each CUDA candidate (`*_cuda.py`), the `load_inline` calls it makes are captured (its module
runs with a recorder in place of load_inline), then each call is built from scratch in a fresh
directory once per mode, one build at a time:
  plain  load_inline exactly as the candidate asked (KernelBench's way);
  light  the .cu's torch/extension.h replaced by torch/types.h (sandbox/fast_build.py);
  ops    light, with only the per-operator headers of the operators the .cu names;
  pch    light, plus the precompiled torch/extension.h for main.cpp (built first, once per
         machine; its time is printed separately);
  fast   all three: the sandbox's build (SandboxConfig.fast_build);
  lite_cu  the .cu against kz_torch_lite.h instead of torch's headers, main.cpp with the PCH
         (sandbox/lite_build.py), falling back to fast: the sandbox's build
         (SandboxConfig.lite_cuda_header; `lite` until the lite main.cpp came);
  lite   lite_cu, and main.cpp against kz_torch_lite_bind.h (pybind11 and the lite header)
         instead of the PCH (SandboxConfig.lite_main_cpp);
  lite_pch  lite, with the binding header precompiled (built with the PCH, once per machine):
         the sandbox's build (SandboxConfig.lite_bind_pch).
  lite_capi  lite_pch, with main.cpp bound through CPython's API instead of pybind11 where
         lite_capi.py can (SandboxConfig.lite_capi_main).
  lite_skip  lite_capi, and a failed lite build whose errors the light header cannot mend built
         as asked at once, without the fast build (SandboxConfig.skip_light_after_lite_errors;
         the names beside the PCH: light_names.py).
Other modes compile only the main.cpp that load_inline writes (to an object, no nvcc, so
they also run on a machine without CUDA, with a CPU precompiled header there):
  main_pch   main.cpp as load_inline writes it, with the precompiled torch/extension.h (what
             fast and lite_cu compile);
  main_plain the same main.cpp with torch/extension.h as text (what plain compiles, and the
             sandbox's build as asked after a failed fast build, unless the object that failed
             there fails first: ninja_steps.objects_first);
  main_lite  main.cpp as a lite build writes it, against kz_torch_lite_bind.h (what lite
             compiles);
  main_lite_pch  the same main.cpp with the precompiled binding header (what lite_pch
             compiles);
  main_capi  main.cpp as lite_capi writes it (what lite_capi compiles where it can).
And two modes compile only the .cu of a lite build (nvcc to an object for --cuda_arch: no GPU
needed):
  cu_lite       the .cu as lite_build writes it (the standard text headers only where it names
                what they declare: KZ_LITE_STD_TEXT);
  cu_lite_text  the same .cu with KZ_LITE_STD_TEXT always defined (every lite .cu before
                2026-12-06).
With --fault (benchmarks/faulty_candidates.py, e.g. `undeclared`), every candidate is built with
that fault injected: what a candidate that fails to compile costs each mode (each row's `steps`
say how long each load_inline call of the sandbox's fallback chain took: fast_build.BUILD_STEPS;
the summary gives their medians over the failed builds).
Prints each build's seconds, the CPU seconds its compilers took (user and system, summed over
the processes it waited for: what a batch's builds take from the machine's cores) and whether
it built (a failed fast build falls back to plain, and
the printed time then includes both), and the median per mode and its ratio to plain.
"""

from __future__ import annotations

import glob
import json
import os
import re
import resource
import statistics
import tempfile
import time
import types

from absl import app
from absl import flags

from kernelzero_jax import atomic_file

# mode: (the precompiled header, only the named operators' headers, the lite .cu header, the
# lite main.cpp, its binding header precompiled, main.cpp through CPython's API, no fast build
# after a lite build that the light header cannot mend)
_FAST_MODES = {"light": (False, False, False, False, False, False, False),
               "ops": (False, True, False, False, False, False, False),
               "pch": (True, False, False, False, False, False, False),
               "fast": (True, True, False, False, False, False, False),
               "lite_cu": (True, True, True, False, False, False, False),
               "lite": (True, True, True, True, False, False, False),
               "lite_pch": (True, True, True, True, True, False, False),
               "lite_capi": (True, True, True, True, True, True, False),
               "lite_skip": (True, True, True, True, True, True, True)}
_MAIN_MODES = ("main_pch", "main_plain", "main_lite", "main_lite_pch", "main_capi")
_CU_MODES = ("cu_lite", "cu_lite_text")


def _define_flags() -> None:
  """The command line, defined only when this runs as a program: tests import this module
  beside other benchmarks whose flags have the same names."""
  flags.DEFINE_string(
      "teacher_kernelbench_dir", None, "Also build the rule-based teacher's CUDA kernel for every "
      "KernelBench level 1-2 problem of this directory that it covers (kernelzero_jax.teacher).")
  flags.DEFINE_string("candidates", "benchmarks/candidates/honest",
                      "A directory of *_cuda.py candidates.")
  flags.DEFINE_list("modes", ["plain", "light", "ops", "pch", "fast", "lite_cu", "lite",
                              "lite_pch"], "Build modes to time.")
  flags.DEFINE_integer("max_candidates", 0, "At most this many candidates (0: all).")
  flags.DEFINE_string("fault", "", "Build every candidate with this fault of "
                      "benchmarks/faulty_candidates.py injected (empty: as it is).")
  flags.DEFINE_string("out", None, "Write the results here (JSON).")
  flags.DEFINE_string("cuda_arch", "9.0", "The compute capability the cu_* modes build for.")


def captured_calls(path: str) -> list[dict]:
  """The keyword arguments of every load_inline call the candidate's module makes."""
  import torch.utils.cpp_extension as cpp_extension  # pylint: disable=import-outside-toplevel
  calls = []
  original = cpp_extension.load_inline

  def record(*args, **kwargs):
    import inspect  # pylint: disable=import-outside-toplevel
    calls.append(dict(inspect.signature(original).bind(*args, **kwargs).arguments))
    return types.SimpleNamespace()

  cpp_extension.load_inline = record
  try:
    with open(path, encoding="utf-8") as f:
      exec(compile(f.read(), path, "exec"), {"__name__": "kz_capture"})  # pylint: disable=exec-used
  except Exception:  # pylint: disable=broad-except
    pass  # what runs after load_inline may need the real module; the call is recorded
  finally:
    cpp_extension.load_inline = original
  return calls


def teacher_files(kernelbench_dir: str, out_dir: str) -> list[str]:
  """The teacher's CUDA candidate for each level 1-2 problem it covers, written to `out_dir`
  as teacher_<level>_<problem>_cuda.py."""
  from kernelzero_jax.tasks import kernelbench  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.teacher import NotInFamily, teach  # pylint: disable=import-outside-toplevel
  files = []
  for task in kernelbench.scan_tasks(kernelbench_dir, (1, 2))[0]:
    try:
      source = teach(task.source, "cuda")
    except NotInFamily:
      continue
    path = os.path.join(out_dir, "teacher_" + re.sub(r"\W", "_", task.key) + "_cuda.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write(source)
    files.append(path)
  return files


def faulted_files(files: list[str], fault: str, out_dir: str) -> list[str]:
  """Copies of `files` in `out_dir`, each with `fault` injected (faulty_candidates.inject)."""
  from benchmarks import faulty_candidates  # pylint: disable=import-outside-toplevel
  if fault not in faulty_candidates.FAULTS:
    raise app.UsageError(f"--fault: {fault!r} is not one of {faulty_candidates.FAULTS}")
  out = []
  for path in files:
    with open(path, encoding="utf-8") as f:
      source = faulty_candidates.inject(f.read(), "cuda", fault)
    out.append(os.path.join(out_dir, os.path.basename(path)))
    with open(out[-1], "w", encoding="utf-8") as f:
      f.write(source)
  return out


def written_main_cpp(call: dict, lite: bool, capi: bool = False) -> str | None:
  """The main.cpp that torch's load_inline writes for `call`, as asked or (`lite`) as a lite
  build has it written (`capi`: through CPython's API); None if a lite build would not write
  one for this call."""
  import torch.utils.cpp_extension as cpp_extension  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
  written = []

  def capture(name, sources, *args, **kwargs):
    del name, args, kwargs
    with open(sources[0], encoding="utf-8") as f:  # main.cpp comes first
      written.append(f.read())
    raise RuntimeError("captured")

  original = cpp_extension._jit_compile  # pylint: disable=protected-access
  cpp_extension._jit_compile = capture  # pylint: disable=protected-access
  try:
    load = cpp_extension.load_inline
    if lite:
      load = fast_build.fast_load_inline(load, None, lite_object="kz_unused.o", capi_main=capi)
    try:
      load(**dict(call, build_directory=tempfile.mkdtemp(prefix="kz_main_")))
    except RuntimeError:
      pass
  finally:
    cpp_extension._jit_compile = original  # pylint: disable=protected-access
  if lite:
    from kernelzero_jax.sandbox import lite_build  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import lite_capi  # pylint: disable=import-outside-toplevel
    written = [w for w in written if (lite_capi.CAPI_HEADER if capi else lite_build.BIND_HEADER)
               in w]
  return written[0] if written else None


def compile_main_cpp(source: str, header: str, lite: bool,
                     bind: bool = False, pch: bool = True) -> tuple[bool, str | None]:
  """Compiles `source` (a main.cpp) to an object with the flags the PCH `header` was built with,
  and the PCH itself (unless not `pch`: its headers as text) or the lite headers (`bind`: the
  bind directory's first, with its precompiled binding header)."""
  import subprocess  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import lite_build  # pylint: disable=import-outside-toplevel
  with open(os.path.join(os.path.dirname(header), "pch.json"), encoding="utf-8") as f:
    meta = json.load(f)
  out_dir = tempfile.mkdtemp(prefix="kz_main_")
  path = os.path.join(out_dir, "main.cpp")
  with open(path, "w", encoding="utf-8") as f:
    f.write(source)
  extra = ["-I", lite_build.LITE_DIR] if lite else ["-include", header] if pch else []
  if bind:
    extra = ["-I", fast_build.bind_dir_of(header), *extra]
  proc = subprocess.run([meta["cxx"], "-c", *extra, *meta["cflags"],
                         "-DTORCH_EXTENSION_NAME=kz_main", path, "-o", path + ".o"],
                        capture_output=True, text=True, check=False)
  return proc.returncode == 0, (proc.stderr[-300:] if proc.returncode else None)


def compile_lite_cu(call: dict, text: bool, arch: str,
                    phases: dict | None = None) -> tuple[bool, str | None]:
  """Compiles the .cu that a lite build writes for `call` (`text`: with KZ_LITE_STD_TEXT defined
  whatever it names) to an object, with load_inline's CUDA flags, for compute capability `arch`
  alone; `phases` gets the milliseconds of each of nvcc's phases (its -time report)."""
  import subprocess  # pylint: disable=import-outside-toplevel
  import torch.utils.cpp_extension as cpp_extension  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import lite_build  # pylint: disable=import-outside-toplevel
  sources = call.get("cuda_sources") or []
  lite = lite_build.lite_cuda_sources([sources] if isinstance(sources, str) else list(sources),
                                      std_text_always=text)
  if lite is None:
    return False, "a lite build would not write a .cu for this call"
  source = lite_build.IMPLICIT_CUDA_INCLUDES + lite[0]
  out_dir = tempfile.mkdtemp(prefix="kz_cu_")
  path = os.path.join(out_dir, "cuda.cu")
  with open(path, "w", encoding="utf-8") as f:
    f.write(source)
  number = arch.replace(".", "")
  nvcc = os.path.join(cpp_extension.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
  proc = subprocess.run(
      [nvcc, "-c", path, "-o", path + ".o", f"-I{lite_build.LITE_DIR}",
       "-isystem", cpp_extension.include_paths()[0], f"-DTORCH_EXTENSION_NAME={call['name']}",
       "-DTORCH_API_INCLUDE_EXTENSION_H", *cpp_extension.COMMON_NVCC_FLAGS,
       f"-gencode=arch=compute_{number},code=sm_{number}", "--compiler-options", "-fPIC",
       "-std=c++17", *(call.get("extra_cuda_cflags") or []), "-time", path + ".time.csv"],
      capture_output=True, text=True, check=False)
  if phases is not None and os.path.exists(path + ".time.csv"):
    import csv  # pylint: disable=import-outside-toplevel
    with open(path + ".time.csv", encoding="utf-8") as f:
      for row in list(csv.reader(f))[1:]:  # source, phase, inputs, output, arch, tool, ms, unit
        if len(row) >= 8 and row[7].strip() == "ms":
          phase = row[1].strip()
          phases[phase] = round(phases.get(phase, 0.0) + float(row[6]), 1)
  return proc.returncode == 0, (proc.stderr[-300:] if proc.returncode else None)


def main(argv):
  del argv
  from torch.utils.cpp_extension import load_inline  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.sandbox import fast_build, light_names
  files = sorted(glob.glob(os.path.join(flags.FLAGS.candidates, "*_cuda.py")))
  if flags.FLAGS.teacher_kernelbench_dir:
    files += teacher_files(flags.FLAGS.teacher_kernelbench_dir,
                           tempfile.mkdtemp(prefix="kz_teacher_"))
  if flags.FLAGS.max_candidates:
    files = files[:flags.FLAGS.max_candidates]
  if flags.FLAGS.fault:
    files = faulted_files(files, flags.FLAGS.fault, tempfile.mkdtemp(prefix="kz_faulted_"))
  header = None
  unknown = set(flags.FLAGS.modes) - {"plain", *_FAST_MODES, *_MAIN_MODES, *_CU_MODES}
  if unknown:
    raise app.UsageError(f"unknown modes {sorted(unknown)}; known: plain, "
                         f"{', '.join([*_FAST_MODES, *_MAIN_MODES, *_CU_MODES])}")
  # The main.cpp modes compile with the PCH's flags (and main_pch with the PCH itself).
  if any(mode in _MAIN_MODES or _FAST_MODES.get(mode, (False,))[0] for mode in flags.FLAGS.modes):
    import torch  # pylint: disable=import-outside-toplevel
    t0 = time.perf_counter()
    header = fast_build.ensure_pch(fast_build.default_cache_dir(),
                                   with_cuda=torch.cuda.is_available())
    print(f"precompiled header ready in {time.perf_counter() - t0:.1f} s: {header}", flush=True)
    if any(_FAST_MODES.get(mode, (False,) * 7)[2] or mode == "main_capi"
           for mode in flags.FLAGS.modes):
      fast_build.require_lite(header)
    if any(mode in ("lite_pch", "lite_capi", "lite_skip", "main_lite_pch")
           for mode in flags.FLAGS.modes):
      fast_build.require_bind(header)
    if "lite_skip" in flags.FLAGS.modes and light_names.read(light_names.path_of(header)) is None:
      raise RuntimeError(f"no light names beside {header} (pch.json's light_names_error)")
  rows = []
  for path in files:
    for i, call in enumerate(captured_calls(path)):
      for mode in flags.FLAGS.modes:
        log, steps, phases = [], [], {}
        if mode in _CU_MODES:  # the lite .cu alone
          attempt = lambda: compile_lite_cu(  # pylint: disable=cell-var-from-loop
              call, text=mode == "cu_lite_text", arch=flags.FLAGS.cuda_arch, phases=phases)
        elif mode in _MAIN_MODES:  # main.cpp alone: what it takes to write it is not timed
          lite = mode not in ("main_pch", "main_plain")
          bind, pch = mode == "main_lite_pch", mode != "main_plain"
          source = written_main_cpp(call, lite=lite, capi=mode == "main_capi")
          attempt = (lambda: compile_main_cpp(source, header, lite=lite, bind=bind, pch=pch)
                     ) if source else (
              lambda: (False, "a lite build would not write main.cpp for this call"))
        else:
          if mode == "plain":
            build = load_inline
          else:
            pch, op_headers, lite, lite_main, bind, capi, skip = _FAST_MODES[mode]
            build = fast_build.fast_load_inline(
                load_inline, header if pch else None, log.append, op_headers=op_headers,
                lite_object=fast_build.lite_object_of(header) if lite else None,
                lite_main=lite_main, bind_dir=fast_build.bind_dir_of(header) if bind else None,
                capi_main=capi, steps=steps,
                light_names=light_names.path_of(header) if skip else None)
          args = dict(call, name=f"{call['name']}_{mode}_{len(rows)}",
                      build_directory=tempfile.mkdtemp(prefix="kz_build_"))
          attempt = lambda: _built(build, args)  # pylint: disable=cell-var-from-loop
        t0, cpu0 = time.perf_counter(), _children_cpu_s()
        ok, error = attempt()
        row = {"candidate": os.path.basename(path), "call": i, "mode": mode, "ok": ok,
               "seconds": round(time.perf_counter() - t0, 2),
               "cpu_s": round(_children_cpu_s() - cpu0, 2), "log": log, "steps": steps,
               "error": error}
        if phases:
          row["nvcc_phases_ms"] = phases
        rows.append(row)
        print(json.dumps(row), flush=True)
        _write(rows)  # after every build: a run stopped at its time limit keeps what finished
  print()
  for mode in flags.FLAGS.modes:
    failed = [r for r in rows if r["mode"] == mode and not r["ok"]]
    if failed:
      by_step = fast_build.step_seconds([r["steps"] for r in failed])
      seconds = statistics.median(r["seconds"] for r in failed)
      print(f"{mode}: {len(failed)} failed, median {seconds:.1f} s, its compilers' CPU "
            f"{statistics.median(r['cpu_s'] for r in failed):.2f} s; "
            + ", ".join(f"{name} {statistics.median(v):.1f} s ({len(v)})"
                        for name, v in by_step.items()))
  plain = [r["seconds"] for r in rows if r["mode"] == "plain" and r["ok"]]
  for mode in flags.FLAGS.modes:
    times = [r["seconds"] for r in rows if r["mode"] == mode and r["ok"]]
    if times:
      ratio = (f", {statistics.median(plain) / statistics.median(times):.1f}x faster than plain"
               if plain and mode != "plain" else "")
      cpu = statistics.median(r["cpu_s"] for r in rows if r["mode"] == mode and r["ok"])
      print(f"{mode}: median {statistics.median(times):.1f} s over {len(times)} builds{ratio}; "
            f"its compilers' CPU {cpu:.2f} s")
      timed = [r["nvcc_phases_ms"] for r in rows
               if r["mode"] == mode and r["ok"] and r.get("nvcc_phases_ms")]
      if timed:
        names = list(dict.fromkeys(name for phases in timed for name in phases))
        print(f"  nvcc's phases (median ms over {len(timed)}): " + ", ".join(
            f"{name} {statistics.median(p.get(name, 0.0) for p in timed):.0f}"
            for name in names))
  _write(rows)


def _children_cpu_s() -> float:
  """User and system CPU seconds of the processes this one has waited for, so far."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def _built(build, args: dict) -> tuple[bool, str | None]:
  """(whether `build(**args)` built, and its error if not)."""
  try:
    build(**args)
    return True, None
  except Exception as e:  # pylint: disable=broad-except
    return False, f"{type(e).__name__}: {str(e)[-300:]}"


def _write(rows: list[dict]) -> None:
  if flags.FLAGS.out:
    atomic_file.write_json(flags.FLAGS.out, rows, indent=1)


if __name__ == "__main__":
  _define_flags()
  app.run(main)
