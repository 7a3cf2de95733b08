"""Runtime validation of a proposed module (the Proposer's): does it make a usable problem?

A judge process (judge.py, job kind "module") starts a worker of its own for the module, as it
does for a candidate, so the module's code never runs in the judge. The worker builds `Model`
from `get_init_inputs` with the init seed and runs `forward` on seeded inputs; a fresh model per
run, so the determinism check covers the constructor too. The judge decides, in this order, and
names the first rule broken (REJECTIONS):

  does_not_run         import, construction or forward raises or kills the worker
  timeout              a stage outlives its limit
  too_much_memory      the worker passes the memory limit
  too_large            an input or output has more elements than `max_elements`
  no_tensor_output     forward returns no floating-point tensor
  not_finite           an output holds NaN or inf
  nondeterministic     the same input set twice gives different outputs
  constant_output      an all-zeros or mean-filled output would pass (near zero, or constant)
  input_independent    two input sets give the same outputs
  too_slow             its fastest forward takes longer than `max_forward_ms` (the first one
                       also pays one-time set-up: thread pools, cuBLAS handles, lazy modules)

Comparisons use the sandbox's tolerance (what the Coder's kernels will be held to).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import verdict as V

REJECTIONS = ("does_not_run", "timeout", "too_much_memory", "too_large", "no_tensor_output",
              "not_finite", "nondeterministic", "constant_output", "input_independent",
              "too_slow")


@dataclasses.dataclass(frozen=True)
class ModuleLimits:
  max_forward_ms: float = 1000.0
  max_elements: int = 2 ** 26  # per input or output tensor

  def __post_init__(self):
    if self.max_forward_ms <= 0 or self.max_elements < 1:
      raise ValueError("max_forward_ms and max_elements must be positive")


@dataclasses.dataclass
class ModuleVerdict:
  valid: bool = False
  rejection: str | None = None      # one of REJECTIONS when not valid
  reasons: list[str] = dataclasses.field(default_factory=list)
  forward_ms: float | None = None   # the fastest of the timed forwards
  output_shapes: list[list[int]] = dataclasses.field(default_factory=list)
  seconds: float | None = None      # the whole validation, caller side (SandboxPool)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> "ModuleVerdict":
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


# --- worker side (runs the module; nothing here is trusted by the judge but its messages) ----

def module_worker_main(conn, spec: dict[str, Any], inherited_fds: tuple[int, ...] = ()) -> None:
  """Entry point of a module worker: build, then answer {"cmd": "run", "seed"} until "exit"."""
  from kernelzero_jax.sandbox import worker as worker_lib  # pylint: disable=import-outside-toplevel
  by_value = spec["device"] == "cpu"
  try:
    for fd in inherited_fds:
      os.close(fd)
    worker_lib._setup_process(spec)  # pylint: disable=protected-access
    import torch  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import problem  # pylint: disable=import-outside-toplevel
    torch.set_grad_enabled(False)
    device = torch.device(spec["device"])
    if device.type == "cuda":
      torch.cuda.set_device(device)
      torch.cuda.set_per_process_memory_fraction(spec["gpu_memory_fraction"], device)
    module = problem.load_module(spec["module_source"], "kz_proposed_module",
                                 os.path.join(spec["workdir"], "module.py"))
    problem.require_attrs(module, ("Model", "get_inputs", "get_init_inputs"))
  except BaseException as e:  # pylint: disable=broad-except
    channel.send(conn, {"ok": False, "error": V.error_tail(e)}, by_value=True)
    return
  channel.send(conn, {"ok": True}, by_value=True)
  held = None
  while True:
    msg = channel.recv(conn)
    held = None
    if msg.get("cmd") != "run":
      return
    try:
      model = problem.make_model(module.Model, module.get_init_inputs, spec["init_seed"], device)
      inputs = problem.make_inputs(module.get_inputs, msg["seed"], device)
      # The forward's own random state differs from run to run (active dropout must show).
      torch.manual_seed(msg["forward_seed"])
      sizes = [int(x.numel()) for x in inputs if isinstance(x, torch.Tensor)]
      if device.type == "cuda":
        torch.cuda.synchronize(device)
      t0 = time.perf_counter()
      out = model(*inputs)
      if device.type == "cuda":
        torch.cuda.synchronize(device)
      ms = (time.perf_counter() - t0) * 1e3
      held = problem.flatten(out)
      reply = {"ok": True, "outputs": held, "ms": ms, "input_sizes": sizes}
    except BaseException as e:  # pylint: disable=broad-except
      reply = {"ok": False, "error": V.error_tail(e)}
    channel.send(conn, reply, by_value=by_value)


# --- judge side -------------------------------------------------------------------------------

class _Reject(Exception):
  def __init__(self, rejection: str, reason: str):
    super().__init__(reason)
    self.rejection, self.reason = rejection, reason


def _from_stage_failure(failure) -> _Reject:
  from kernelzero_jax.sandbox import verdict as V  # pylint: disable=import-outside-toplevel
  if failure.status == V.TIMEOUT:
    return _Reject("timeout", failure.reason)
  if "memory limit" in failure.reason:
    return _Reject("too_much_memory", failure.reason)
  return _Reject("does_not_run", failure.reason)


def run_module_job(job: dict[str, Any]) -> ModuleVerdict:
  """Validates job["module_source"] (in the judge process; the module runs in a worker)."""
  # pylint: disable=import-outside-toplevel
  import shutil
  import tempfile
  import torch
  from kernelzero_jax.sandbox import gpu_budget
  from kernelzero_jax.sandbox import judge_gpu
  from kernelzero_jax.sandbox import problem
  from kernelzero_jax.sandbox import worker_handle
  from kernelzero_jax.sandbox.config import SandboxConfig
  cfg = SandboxConfig.from_dict(job.get("config", {}))
  limits = ModuleLimits(**job.get("limits", {}))
  verdict = ModuleVerdict()
  workdir = tempfile.mkdtemp(prefix="kz_module_")
  device = judge_gpu.device_name(cfg, job.get("gpu_index", 0))
  spec = {"workdir": workdir, "device": device, "module_source": job["module_source"],
          "init_seed": cfg.init_seed, "memory_limit_gb": cfg.memory_limit_gb,
          "gpu_memory_fraction": cfg.gpu_memory_fraction}
  handle = None
  gpu = contextlib.ExitStack()
  try:
    handle = worker_handle.WorkerHandle(spec, cfg.memory_limit_gb, target=module_worker_main)

    def ask(msg, timeout_s, stage):
      try:
        reply = handle.request(msg, timeout_s, stage) if msg else handle.wait(timeout_s, stage)
      except worker_handle.StageFailure as f:
        raise _from_stage_failure(f) from None
      if not reply.get("ok"):
        error = str(reply.get("error"))
        memory = any(m in error for m in ("out of memory", "can't allocate memory",
                                          "Cannot allocate memory", "MemoryError"))
        raise _Reject("too_much_memory" if memory else "does_not_run", f"{stage}: {error}")
      return reply

    ask(None, cfg.build_timeout_s, "build")
    if device != "cpu":
      # The forwards and their checks hold a GPU slot, as a judge's checks do: never while a
      # judge of any pool or process times a kernel on this GPU, which they would disturb.
      gpu.enter_context(gpu_budget.gpu_slots(job.get("gpu_index", 0), cfg.gpu_concurrency,
                                            exclusive=False, timings_first=cfg.timings_first))
    tol = cfg.tolerance_for
    base = cfg.seed * 1_000_003
    runs = []
    for i, seed in enumerate((base + 1, base + 1, base + 2)):
      reply = ask({"cmd": "run", "seed": seed, "forward_seed": base + 0x5EED + i},
                  cfg.correctness_timeout_s, "forward")
      outs = [o.to(torch.device(device)) if isinstance(o, torch.Tensor) else o
              for o in reply["outputs"]]
      runs.append((outs, reply))
    first, again, other = (r[0] for r in runs)
    verdict.forward_ms = min(r[1]["ms"] for r in runs)
    tensors = [o for o in first if isinstance(o, torch.Tensor)]
    verdict.output_shapes = [list(t.shape) for t in tensors]
    sizes = runs[0][1]["input_sizes"] + [int(t.numel()) for t in tensors]
    if any(n > limits.max_elements for n in sizes):
      raise _Reject("too_large", f"a tensor of {max(sizes)} elements (limit "
                    f"{limits.max_elements})")
    floats = [t for t in tensors if t.is_floating_point() and t.numel()]
    if not floats:
      raise _Reject("no_tensor_output", "forward returns no non-empty floating-point tensor")
    if any(not bool(torch.isfinite(t).all()) for t in floats):
      raise _Reject("not_finite", "an output holds NaN or inf")
    ok, reasons, _, _ = problem.compare_outputs(again, first, tol)
    if not ok:
      raise _Reject("nondeterministic", "the same inputs gave other outputs: "
                    + "; ".join(reasons[:2]))
    for outs in (first, other):
      ts = [t for t in outs if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
      for fill in ("zeros", "mean"):
        if all(problem.constant_passes(t, 0.0 if fill == "zeros" else t.double().mean().item(),
                                       *tol(str(t.dtype).replace("torch.", ""))) for t in ts):
          raise _Reject("constant_output", f"an output filled with its {fill} would pass")
    ok, _, _, _ = problem.compare_outputs(other, first, tol)
    if ok:
      raise _Reject("input_independent", "two different input sets gave the same outputs")
    if verdict.forward_ms > limits.max_forward_ms:
      raise _Reject("too_slow", f"forward took {verdict.forward_ms:.1f} ms (limit "
                    f"{limits.max_forward_ms:g} ms)")
    verdict.valid = True
  except _Reject as r:
    verdict.rejection, verdict.reasons = r.rejection, [r.reason[-1500:]]
  finally:
    gpu.close()
    if handle is not None:
      handle.kill()
    shutil.rmtree(workdir, ignore_errors=True)
  return verdict
