"""The worker's build stage (a part of worker._Worker): the candidate's import, with CUDA
extensions built the fast way (fast_build.py) under names of their own, after the judge's go
where it waits for one (go_gate.py); and the one job of a worker that only compiles (a Triton
precompiler, triton_precompile.py) or only builds (a CUDA prebuilder, cuda_prebuild.py).
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import verdict as V

# The role of a worker that only compiles a Triton candidate's kernels (triton_precompile.py)...
PRECOMPILE = "precompile"
# ...and of one that only builds a CUDA candidate's extensions (cuda_prebuild.py).
PREBUILD = "prebuild"


class BuildSteps:
  """The build stage of worker._Worker. A mixin: the state it reads is _Worker's."""

  def _wrap_load_inline(self, lite: bool | None, skip_light: bool = False) -> None:
    """load_inline as fast_build.py builds (`lite`: trying the lite build first; None: as torch
    builds; `skip_light`: no fast build, the build as asked at once), with the extension names
    of spec["extension_suffix"] (_renamed)."""
    import torch.utils.cpp_extension as cpp_extension  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
    spec = self.spec
    self._load_inline = self._load_inline or cpp_extension.load_inline
    load_inline = self._load_inline
    if spec.get("extension_suffix"):
      load_inline = _renamed(load_inline, spec["extension_suffix"])
    if lite is None:
      cpp_extension.load_inline = load_inline
      return
    cpp_extension.load_inline = fast_build.fast_load_inline(
        load_inline, spec.get("pch_header"), self.build_log.append,
        lite_object=spec.get("lite_object") if lite else None,
        lite_main=bool(spec.get("lite_main")), bind_dir=spec.get("bind_dir"),
        first_choice_only=spec.get("role") == PREBUILD, capi_main=bool(spec.get("capi_main")),
        steps=self.build_steps, light_names=spec.get("light_names") if lite else None,
        skip_light=skip_light)

  def _await_go(self) -> bool:
    """Waits for the judge's go, sent once this candidate's prebuilder is done
    (cuda_prebuild.py), and not while the judge times the reference before the candidate is
    imported (SandboxConfig.reference_first, go_gate.py). Where the prebuilder's lite build
    failed, this worker's would too: it starts from the fallback (the same build a failed lite
    build falls back to), or from the build as asked where the lite build's errors were ones
    the light header cannot mend (light_names.py)."""
    msg = channel.recv(self.conn)
    self.startup.lap("await_go")
    if msg.get("cmd") != "go":
      return False
    if msg.get("skip_lite") and self._load_inline is not None:
      self.build_log.append("lite build failed in the prebuilder; building with torch's headers")
      self._wrap_load_inline(lite=False, skip_light=msg.get("skip_light") is True)
    return True

  def build(self) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
      path = self.candidate_path
      with open(path, "w") as f:
        f.write(self.spec["candidate_source"])
      module, setup_gpu = self._outside_the_hold(
          "at import", lambda: self.problem.load_module(self.spec["candidate_source"],
                                                        "kz_candidate", path))
      if not isinstance(getattr(module, "ModelNew", None), type):
        return {"ok": False, "status": V.FORMAT_ERROR, "error": "ModelNew is not a class"}
    except BaseException as e:  # pylint: disable=broad-except
      if self.guard.violations:
        return self.with_failed_setup(
            {"ok": False, "status": V.REJECTED, "error": "; ".join(self._tamper_violations())})
      # (With the steps its builds took before they failed: evidence["build"].)
      return self.with_failed_setup(
          {"ok": False, "status": V.COMPILE_ERROR, "error": V.error_tail(e),
           "build_log": list(self.build_log), "build_steps": list(self.build_steps),
           "seconds": time.perf_counter() - t0})
    self.module = module
    reply = self._clean_reply(setup_gpu)
    if not reply["ok"]:
      return reply
    return {**reply, "seconds": time.perf_counter() - t0, "build_log": self.build_log,
            "build_steps": self.build_steps, "entered_at": self.entered_at,
            "startup_seconds": self.startup.seconds,
            # (its process's start-up, told with its first candidate only)
            "fence_held": self.fence_held if self.served == 1 else None}

  def _outside_the_hold(self, where: str, run) -> tuple[Any, dict[str, Any]]:
    """Runs candidate code that the judge runs without holding the GPU (its import, its
    constructor) under the CUDA profiler, where the worker has a GPU and a working profiler:
    (run's result, {"kernels", "kernel_ms", "copies", "copy_ms", "longest_kernel",
    "profiler_s" (the profiler's own cost), and "violations" when its kernels took more than
    spec["setup_kernel_ms_limit"]}).
    Anything it left queued on the GPU is finished before this returns."""
    self.failed_setup_gpu = None
    limit = self.spec.get("setup_kernel_ms_limit")
    if self.device.type != "cuda" or limit is None or not self.profiler_works:
      return run(), {}
    ran, failed = [], []

    def timed_run():
      t0 = time.perf_counter()
      try:
        return run()
      except BaseException as e:  # pylint: disable=broad-except
        failed.append(e)  # (raised again once the profiler has its kernels)
        return None
      finally:
        ran.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    result, events = self.evidence.trace_gpu(timed_run)
    summary = self.evidence.gpu_work_summary(events)
    if failed:  # its kernels still tell its judge whether other judges' timings were disturbed
      self.failed_setup_gpu = summary
      raise failed[0]
    # What the profiler itself cost (its start, the synchronize, reading its trace).
    summary["profiler_s"] = round(time.perf_counter() - t0 - ran[0], 4)
    violation = self.evidence.setup_gpu_violation(summary, where, float(limit))
    return result, dict(summary, violations=[violation] if violation else [])

  def with_failed_setup(self, reply: dict[str, Any]) -> dict[str, Any]:
    """A failure's reply, with the profile of the import or constructor that raised it, where
    there is one (its "setup_gpu": setup_windows.py)."""
    if self.failed_setup_gpu:
      reply["setup_gpu"] = self.failed_setup_gpu
    return reply

  def precompile(self) -> dict[str, Any]:
    """The precompiler's one job: compile the candidate's Triton kernels for this machine's
    GPUs (or spec["triton_capability"]) on the meta device (triton_precompile.py)."""
    from kernelzero_jax.sandbox import triton_precompile  # pylint: disable=import-outside-toplevel
    capability = self.spec.get("triton_capability") or triton_precompile.nvml_capability()
    if not capability:
      return {"ok": False, "error": "no single GPU compute capability found through NVML"}
    return {"ok": True, **triton_precompile.precompile(
        self.module.ModelNew, self.reference.get_init_inputs, self.reference.get_inputs,
        int(capability))}

  def prebuild(self) -> dict[str, Any]:
    """The prebuilder's one job (cuda_prebuild.py): the candidate imported, its extensions
    built as its worker's would be, for the architecture that worker's GPU gives torch."""
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):  # else the worker has it too
      # pylint: disable-next=import-outside-toplevel
      from kernelzero_jax.sandbox import cuda_prebuild, triton_precompile
      arch = cuda_prebuild.arch_list(self.spec.get("cuda_capability")
                                     or triton_precompile.nvml_capability())
      if arch is None:
        return {"ok": False, "error": "no single GPU architecture found through NVML"}
      os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    reply = self.build()
    reply["build_log"] = self.build_log  # a failure's too: what failed here, its worker skips
    return reply


def _renamed(load_inline, suffix: str):
  """load_inline that builds and loads each extension as name + `suffix`. A process that has
  loaded an extension module gets that same module back for any later one of the same name
  (CPython keeps it), so a worker that serves several candidates (worker_state.py) gives each
  candidate's extensions names of their own; its prebuilder uses the same suffix."""
  import inspect  # pylint: disable=import-outside-toplevel
  signature = inspect.signature(load_inline)

  @functools.wraps(load_inline)
  def renamed(*args, **kwargs):
    bound = signature.bind(*args, **kwargs)
    bound.arguments["name"] = f"{bound.arguments['name']}{suffix}"
    return load_inline(*bound.args, **bound.kwargs)
  return renamed

