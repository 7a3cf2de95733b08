"""The worker's run stage (a part of worker._Worker): the candidate's model built and moved to
the device, its forward on an input set with every op, launch and (on a GPU, profiled) kernel
recorded, its timing (timing.py), and what it may have tampered with.
"""

from __future__ import annotations

import time
from typing import Any

from kernelzero_jax.sandbox import host_registration
from kernelzero_jax.sandbox import verdict as V

MARKER_KERNEL = "FillFunctor"


class RunSteps:
  """The run stage of worker._Worker. A mixin: the state it reads is _Worker's."""

  def construct(self, seed: int) -> dict[str, Any]:
    """ModelNew built on the CPU, before the judge takes the GPU: a large model's CPU init
    (4 GiB of nn.Linear in KernelBench's level-2 problem 59: 9 s on an H200 machine under load)
    would otherwise hold the GPU. Like its import, it runs under the profiler, its GPU work
    limited (_outside_the_hold)."""
    model, setup_gpu = self._outside_the_hold("in its constructor", lambda: (
        self.problem.construct_model(self.module.ModelNew, self.reference.get_init_inputs, seed)))
    self.constructed = (seed, model)
    return self._clean_reply(setup_gpu)

  def register(self) -> dict[str, Any]:
    """The constructed model's pages page-locked now, under the judge's start-up fence before
    its hold, so that init's move under the hold only copies (host_registration.register_ahead;
    SandboxConfig.register_uploads_ahead)."""
    if self.ahead is not None:
      self.ahead.close()
    self.ahead = None
    if self.constructed is not None:
      self.ahead = host_registration.register_ahead(
          self.torch, self.constructed[1], self.device,
          enabled=bool(self.spec.get("registered_uploads")))
    return {"ok": True, "registered": self.ahead is not None}

  def init(self, seed: int) -> dict[str, Any]:
    """The model construct built, moved to the device under the judge's hold: from its own
    pages page-locked in place where it is large and spec["registered_uploads"]
    (host_registration.py; the reply's "upload" says how)."""
    constructed, self.constructed = self.constructed, None
    if constructed is not None and constructed[0] == seed:
      model = constructed[1]
    else:
      model = self.problem.construct_model(self.module.ModelNew, self.reference.get_init_inputs,
                                           seed)
    del constructed
    ahead, self.ahead = self.ahead, None
    self.model, upload = host_registration.to_device(
        self.torch, model, self.device, enabled=bool(self.spec.get("registered_uploads")),
        ahead=ahead)
    del model, ahead
    reply = self._clean_reply()
    if upload and reply.get("ok"):
      reply["upload"] = upload
    return reply

  def _clean_reply(self, setup_gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"ok": True}, or the violations seen since the candidate's code first ran, its setup's
    among them; with `setup_gpu`, _outside_the_hold's summary, where given."""
    violations = self._tamper_violations() + (setup_gpu or {}).pop("violations", [])
    reply = ({"ok": False, "status": V.REJECTED, "error": "; ".join(violations)} if violations
             else {"ok": True})
    if setup_gpu is not None:  # a rejection's too: its kernels tell the judge whether other
      reply["setup_gpu"] = setup_gpu  # judges' timings were disturbed (setup_windows.py)
    return reply

  def _inputs(self, seed: int) -> list:
    return self.problem.make_inputs(self.reference.get_inputs, seed, self.device)

  def _observed_forward(self, inputs: list) -> tuple[Any, list[str], dict[str, int]]:
    """One forward with every op and launch recorded."""
    self.ops.ops.clear()
    self.ops.violations.clear()
    self.launches.launches = {}
    self.launches.active = True
    try:
      with self.ops:
        out = self.model(*inputs)
        if self.ops not in _dispatch_mode_stack():
          self.ops.violations.append("forward removed the harness's op observer")
    finally:
      self.launches.active = False
    self.ops.check_budget()
    if self.device.type == "cuda":
      self.torch.cuda.synchronize()
    return out, list(dict.fromkeys(self.ops.violations)), dict(self.launches.launches)

  def run(self, seed: int, profile: bool) -> dict[str, Any]:
    """The candidate's forward on input set `seed`, observed (and profiled, with `profile`, on
    a GPU). The reply's "steps_s" is the worker's own account of where its time went, for
    reading only (worker_handle.RUN_STEPS): the input set's making (on a GPU, its kernels
    launched: they run on within the forward's wait), the forward to its end on the device, and
    the checks of what it ran and left."""
    t0 = time.perf_counter()
    inputs = self._inputs(seed)
    t1 = time.perf_counter()
    kernels = None
    if profile and self.device.type == "cuda":
      try:
        (out, violations, launches), kernels = self.evidence.profile_kernels(
            lambda: self._observed_forward(inputs), lambda: self.marker.fill_(1.0))
      except RuntimeError as e:
        if "profiler" not in str(e).lower() and "cupti" not in str(e).lower():
          raise
        out, violations, launches = self._observed_forward(inputs)
    else:
      out, violations, launches = self._observed_forward(inputs)
    t2 = time.perf_counter()
    violations += self._launch_violations(launches)
    evidence = {"ops": sorted(set(self.ops.ops)), "triton_launches": launches}
    if kernels is not None:
      kv, own_ran = self.evidence.kernel_violations(kernels, self.own_kernels, MARKER_KERNEL,
                                                    self.backend)
      violations += kv
      evidence["gpu_kernels"] = sorted({k["name"][:120] for k in kernels})[:50]
      evidence["own_kernels_ran"] = sorted(set(n[:120] for n in own_ran))
    violations += self._tamper_violations()
    leaves = self.problem.flatten(out)
    self._held = (leaves, inputs)
    return {"ok": True, "outputs": leaves, "inputs_after": inputs, "violations": violations,
            "evidence": evidence, "steps_s": {"inputs": t1 - t0, "forward": t2 - t1,
                                              "checks": time.perf_counter() - t2}}

  def time(self, seeds: list[int], audit_positions: list[int], warmup: int, target_s: float,
           min_trials: int, precision: float | None = None,
           outside_ms: list[float] | None = None, outside_min_trials: int = 5,
           far_ms: float | None = None, far_min_trials: int = 3) -> dict[str, Any]:
    audits: list[tuple[int, list]] = []
    audit_violations: list[str] = []

    def on_audit(seed, inputs):
      out, violations, launches = self._observed_forward(inputs)
      audit_violations.extend(violations + self._launch_violations(launches))
      audits.append((seed, self.problem.flatten(out)))

    result = self.timing.time_forward(self.timer, self.model, self._inputs, seeds, warmup,
                                      target_s, min_trials, on_audit, audit_positions,
                                      precision=precision, outside_ms=outside_ms,
                                      outside_min_trials=outside_min_trials,
                                      far_ms=far_ms, far_min_trials=far_min_trials)
    if self.device.type == "cuda":
      # Only the audited outputs stay (for the judge's comparison); the trials' input sets and
      # outputs left in torch's cache held 29 GiB of a 7 GiB problem on an H100, and the judge's
      # reference forward for that comparison ran out of memory.
      self.torch.cuda.empty_cache()
    violations = list(dict.fromkeys(audit_violations)) + self._tamper_violations()
    self._held = audits
    return {"ok": True, **result, "audits": audits, "violations": violations}

  def release(self) -> dict[str, Any]:
    """Gives the GPU memory of the last reply back (its tensors went with _held) and says how
    much is still allocated (the model's parameters, unless something kept them). A block that
    the judge viewed through CUDA IPC waits in torch's limbo until ipc_collect, should the judge's
    views have gone only after this worker dropped it."""
    if self.device.type != "cuda":
      return {"ok": True}
    self.torch.cuda.ipc_collect()
    self.torch.cuda.empty_cache()
    return {"ok": True, "allocated_bytes": self.torch.cuda.memory_allocated(self.device)}

  def _launch_violations(self, launches: dict[str, int]) -> list[str]:
    if self.backend != "triton":
      return []
    if not any(name in self.own_kernels for name in launches):
      return ["forward launched none of the candidate's @triton.jit kernels"]
    return []

  def _tamper_violations(self) -> list[str]:
    return list(dict.fromkeys(
        self.guard.violations + self.integrity.violations() +
        self.evidence.thread_and_process_violations(self.baseline_threads)))


def _dispatch_mode_stack() -> list:
  from torch.utils import _python_dispatch  # pylint: disable=import-outside-toplevel
  return _python_dispatch._get_current_dispatch_mode_stack()  # pylint: disable=protected-access
