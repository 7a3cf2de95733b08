"""Runtime evidence, gathered inside the candidate worker while the candidate runs.

The second anti-cheat layer (static_checks.py is the first). It does not look at names in the
source; it watches what executes:
  * every ATen op that the candidate's forward dispatches (Python, C++ extension or nn.Module, no
    matter how the function was looked up), through a TorchDispatchMode;
  * every Triton kernel launch, through a hook on Triton's launcher;
  * on a GPU, every device kernel and the stream it ran on, through the CUDA profiler; and the
    GPU work of the candidate's import and constructor, which run outside the judge's GPU holds;
  * new Python threads and child processes;
  * the identity of the functions that the harness relies on (timers, synchronisation, the
    launcher hooks, this package's own code), so monkey-patching is caught even when it slipped
    past the static layer.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import threading
import time
import types
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelzero_jax.sandbox import process_tree

# ATen ops a candidate's forward may dispatch: allocation, views and metadata, copies within one
# device. Everything else computes, and computing is the kernel's job.
ALLOWED_ATEN_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_",
    "zero", "zero_", "scalar_tensor", "_local_scalar_dense",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "transpose", "t", "permute",
    "expand", "squeeze", "unsqueeze", "select", "slice", "split", "split_with_sizes", "chunk",
    "unbind", "alias", "detach", "contiguous", "clone", "copy", "copy_", "_to_copy", "to",
    "flatten", "unflatten", "narrow", "view_as", "expand_as", "movedim", "resize_", "set_",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "dim", "numel",
    "size", "stride", "storage_offset", "is_same_size", "_reshape_copy", "arange", "item",
    "record_stream", "view_as_real", "view_as_complex", "squeeze_", "unsqueeze_", "t_",
    "transpose_", "as_strided_",
})

# Kernels that come from a vendor library or from ATen's own implementations. A candidate's own
# kernel is recognised by name first, so a candidate kernel called `my_gemm` is never flagged.
_LIBRARY_KERNEL_RE = re.compile(
    r"gemm|gemv|cublas|cudnn|cutlass|xmma|cutensor|winograd|implicit_convolve|fft|splitk|"
    r"at::native|at_cuda_detail|cub::|sm\d\d_|ampere_|volta_|turing_|hopper_|nvjet|triton_(?:poi|red|per|tem)_",
    re.IGNORECASE)


def op_name(func) -> str:
  """'aten::add.Tensor' -> 'add'."""
  name = getattr(func, "__name__", str(func))  # e.g. 'add.Tensor'
  return name.split(".")[0]


class OpRecorder(TorchDispatchMode):
  """Records every ATen op dispatched while active (and not suspended)."""

  def __init__(self):
    super().__init__()
    self.ops: list[str] = []
    self.violations: list[str] = []
    self.suspended = 0

  def __torch_dispatch__(self, func, types, args=(), kwargs=None):
    kwargs = kwargs or {}
    if not self.suspended:
      name = op_name(func)
      self.ops.append(name)
      if name not in ALLOWED_ATEN_OPS:
        self.violations.append(f"forward computes with the torch op aten::{name}")
      elif name in ("_to_copy", "copy_", "copy", "to") and _crosses_devices(args, kwargs):
        self.violations.append(f"forward moves data between devices (aten::{name}): a host round "
                               "trip is not the candidate's own kernel")
    return func(*args, **kwargs)

  # An honest forward allocates, reshapes and launches: a handful of ops. Thousands of them, or
  # many host reads of single values, mean the result is being assembled element by element.
  MAX_OPS_PER_FORWARD = 4096
  MAX_SCALAR_READS_PER_FORWARD = 256

  def check_budget(self) -> None:
    if len(self.ops) > self.MAX_OPS_PER_FORWARD:
      self.violations.append(f"forward dispatched {len(self.ops)} torch ops (limit "
                             f"{self.MAX_OPS_PER_FORWARD}): computing element by element in Python")
    reads = sum(op in ("_local_scalar_dense", "item") for op in self.ops)
    if reads > self.MAX_SCALAR_READS_PER_FORWARD:
      self.violations.append(f"forward read {reads} scalars to the host (limit "
                             f"{self.MAX_SCALAR_READS_PER_FORWARD}): computing in Python")

  @contextlib.contextmanager
  def suspend(self):
    self.suspended += 1
    try:
      yield
    finally:
      self.suspended -= 1


def _crosses_devices(args, kwargs) -> bool:
  devices = {a.device for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)}
  target = kwargs.get("device")
  if target is not None:
    devices.add(torch.device(target))
  return len(devices) > 1


class LaunchRecorder:
  """Counts Triton kernel launches by kernel name (works for compiled and interpreted Triton)."""

  def __init__(self):
    self.launches: dict[str, int] = {}
    self.active = False
    self.op_recorder: OpRecorder | None = None

  def record(self, name: str):
    if self.active:
      self.launches[name] = self.launches.get(name, 0) + 1


def install_triton_launch_hook(launches: LaunchRecorder) -> list[Callable]:
  """Wraps Triton's launch entry points. Returns the wrappers (for the integrity snapshot)."""
  try:
    from triton.runtime import jit as triton_jit
  except Exception:  # pylint: disable=broad-except
    return []
  classes = [triton_jit.JITFunction]
  try:
    from triton.runtime import interpreter as triton_interpreter
    classes.append(triton_interpreter.InterpretedFunction)
  except Exception:  # pylint: disable=broad-except
    pass
  wrappers = []
  for cls in classes:
    original = cls.run

    def run(self, *args, __original=original, **kwargs):
      fn = getattr(self, "fn", None)
      launches.record(getattr(fn, "__name__", None) or getattr(self, "__name__", "triton_kernel"))
      # The interpreter runs a kernel's body as Python and moves arguments with torch ops; the
      # body itself is checked statically to be Triton only, so its torch traffic is not the
      # candidate's.
      ctx = launches.op_recorder.suspend() if launches.op_recorder else contextlib.nullcontext()
      with ctx:
        return __original(self, *args, **kwargs)

    cls.run = run
    wrappers.append(run)
  return wrappers


class IntegritySnapshot:
  """Identities (and code objects) of everything the harness relies on in this process."""

  def __init__(self, extra: dict[str, Any] | None = None):
    self.items: dict[str, tuple[Any, Any]] = {}
    targets: dict[str, Any] = {
        "time.perf_counter": time.perf_counter, "time.perf_counter_ns": time.perf_counter_ns,
        "time.time": time.time, "time.monotonic": time.monotonic,
        "torch.manual_seed": torch.manual_seed, "torch.equal": torch.equal,
        # what problem.seed_torch seeds input sets with (a generator rebound, or a seeding made
        # a no-op, would let a candidate's timing see the same inputs trial after trial)
        "torch.cuda.manual_seed_all": torch.cuda.manual_seed_all,
        "torch.default_generator": torch.default_generator,
        "torch.Tensor.clone": torch.Tensor.clone, "torch.Tensor.detach": torch.Tensor.detach,
        "torch.nn.Module.__call__": torch.nn.Module.__call__,
        "torch.nn.Module._call_impl": torch.nn.Module._call_impl,
        "torch.device": torch.device, "torch.no_grad": torch.no_grad,
        "torch.utils._python_dispatch.TorchDispatchMode": TorchDispatchMode,
        "threading.Thread.start": threading.Thread.start,
        "os._exit": os._exit,
    }
    if torch.cuda.is_available():
      targets.update({
          "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
          "torch.cuda.Event.record": torch.cuda.Event.record,
          "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
          "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
          "torch.cuda.current_stream": torch.cuda.current_stream,
          "torch.cuda.Stream.synchronize": torch.cuda.Stream.synchronize,
          "torch.profiler.profile": torch.profiler.profile,
      })
    if torch.cuda.is_initialized():  # (CUDA's initialisation sets the tuple)
      targets["torch.cuda.default_generators"] = torch.cuda.default_generators
    # Every function of this package's modules that are loaded in the worker.
    for modname, mod in list(sys.modules.items()):
      if modname.startswith("kernelzero_jax.") and mod is not None:
        for k, v in list(vars(mod).items()):
          if callable(v) and getattr(v, "__module__", None) == modname:
            targets[f"{modname}.{k}"] = v
            if isinstance(v, type):
              for mk, mv in list(vars(v).items()):
                if callable(mv):
                  targets[f"{modname}.{k}.{mk}"] = mv
              # And what it inherits from this package's classes (worker._Worker's stages are
              # mixins): a method set on the class itself would shadow the one watched there.
              for base in v.__mro__[1:]:
                if getattr(base, "__module__", "").startswith("kernelzero_jax."):
                  for mk, mv in list(vars(base).items()):
                    if isinstance(mv, types.FunctionType):
                      targets.setdefault(f"{modname}.{k}.{mk}", mv)
    try:
      from triton.runtime import jit as triton_jit
      targets["triton.runtime.jit.JITFunction.run"] = triton_jit.JITFunction.run
      from triton.runtime import interpreter as triton_interpreter
      targets["triton.runtime.interpreter.InterpretedFunction.run"] = (
          triton_interpreter.InterpretedFunction.run)
    except Exception:  # pylint: disable=broad-except
      pass
    targets.update(extra or {})
    self._modules = {n: m for n, m in sys.modules.items()
                     if n.startswith("kernelzero_jax") or n in ("time", "torch", "threading")}
    for name, obj in targets.items():
      self.items[name] = (obj, getattr(obj, "__code__", None))
    self._resolvers = {name: _resolver(name) for name in targets}

  def violations(self) -> list[str]:
    out = []
    for name, (obj, code) in self.items.items():
      current = self._resolvers[name]()
      if current is not obj:
        out.append(f"the harness function {name} was replaced (monkey-patching)")
      elif code is not None and getattr(obj, "__code__", None) is not code:
        out.append(f"the code of the harness function {name} was replaced")
    for n, m in self._modules.items():
      if sys.modules.get(n) is not m:
        out.append(f"the harness module {n} was replaced in sys.modules")
    return out


def _resolver(name: str) -> Callable[[], Any]:
  """Looks a dotted name up again at check time (so replacement on the owner is visible)."""
  parts = name.split(".")
  for i in range(len(parts), 0, -1):
    modname = ".".join(parts[:i])
    if modname in sys.modules:
      rest = parts[i:]
      break
  else:
    return lambda: None

  def resolve():
    obj = sys.modules.get(modname)
    for attr in rest:
      try:
        obj = obj.__dict__[attr] if isinstance(obj, type) and attr in obj.__dict__ else getattr(obj, attr)
      except Exception:  # pylint: disable=broad-except
        return None
    return obj

  return resolve


def thread_and_process_violations(baseline_threads: set[int]) -> list[str]:
  """New live Python threads or child processes since the baseline was taken."""
  out = []
  extra = [t for t in threading.enumerate() if t.ident not in baseline_threads and t.is_alive()]
  if extra:
    out.append(f"the candidate started {len(extra)} background thread(s) "
               f"({', '.join(t.name for t in extra[:3])})")
  try:
    children = process_tree.descendant_pids()
    if children:
      out.append(f"the candidate started {len(children)} child process(es)")
  except Exception:  # pylint: disable=broad-except
    pass
  return out


# Chrome-trace categories of the GPU's own work: kernels, and copies and fills by its engines.
GPU_EVENT_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def trace_gpu(run: Callable[[], Any]) -> tuple[Any, list[dict]]:
  """Runs `run` under the CUDA profiler, then a device-wide synchronize, so that work it left
  queued on any stream counts too. Returns (run's result, the GPU's work in order of start):
  {"cat" (GPU_EVENT_CATEGORIES), "name", "stream", "ts", "dur" (µs)}."""
  from torch.profiler import ProfilerActivity, profile
  with profile(activities=[ProfilerActivity.CUDA]) as prof:
    result = run()
    torch.cuda.synchronize()
  fd, path = tempfile.mkstemp(suffix=".json")
  os.close(fd)
  try:
    prof.export_chrome_trace(path)
    with open(path) as f:
      trace = json.load(f)
  finally:
    os.unlink(path)
  events = [{"cat": ev["cat"], "name": ev.get("name", ""),
             "stream": (ev.get("args") or {}).get("stream"), "ts": ev.get("ts", 0),
             "dur": float(ev.get("dur") or 0.0)}
            for ev in trace.get("traceEvents", []) if ev.get("cat") in GPU_EVENT_CATEGORIES]
  events.sort(key=lambda e: e["ts"])
  return result, events


def profile_kernels(run: Callable[[], Any], marker: Callable[[], Any]) -> tuple[Any, list[dict]]:
  """Runs `marker` then `run` under the CUDA profiler. Returns (run's result, kernels), each kernel
  {"name", "stream", "marker"}; the marker's kernel identifies the harness's stream."""
  def marked():
    marker()
    torch.cuda.synchronize()
    return run()
  result, events = trace_gpu(marked)
  return result, [{"name": e["name"], "stream": e["stream"], "ts": e["ts"]}
                  for e in events if e["cat"] == "kernel"]


def gpu_work_summary(events: list[dict]) -> dict[str, Any]:
  """What trace_gpu saw: how many kernels and copies or fills, and their summed GPU times (ms)."""
  kernels = [e for e in events if e["cat"] == "kernel"]
  copies = [e for e in events if e["cat"] != "kernel"]
  return {"kernels": len(kernels), "kernel_ms": round(sum(e["dur"] for e in kernels) / 1e3, 3),
          "copies": len(copies), "copy_ms": round(sum(e["dur"] for e in copies) / 1e3, 3),
          "longest_kernel": max(kernels, key=lambda e: e["dur"])["name"][:120] if kernels else None}


def setup_gpu_violation(summary: dict[str, Any], where: str, limit_ms: float) -> str | None:
  """A violation if the candidate's code kept the GPU's compute busy for more than `limit_ms`
  where the judge does not hold the GPU (`where`: at import, in its constructor). Other judges
  time their candidates and references meanwhile, and GPU contexts time-slice, so such work
  lengthens their measured times (and a reference time inflated so is shared with a group).
  Copies are not limited: the copy engines run beside other contexts' kernels."""
  if summary["kernel_ms"] <= limit_ms:
    return None
  return (f"the candidate ran {summary['kernel_ms']:.1f} ms of GPU kernels {where} "
          f"({summary['kernels']} kernel(s), the longest {summary['longest_kernel']}), where the "
          f"judge does not hold the GPU and other judges' timings run; at most {limit_ms:g} ms "
          "is allowed there: GPU work belongs in forward")


# ATen kernels behind the allocation and copy ops a forward may dispatch (ALLOWED_ATEN_OPS).
ALLOWED_LIBRARY_KERNELS = ("FillFunctor", "direct_copy_kernel", "copy_kernel", "fill_kernel")


def kernel_violations(kernels: list[dict], own_names: list[str], marker_name: str,
                      backend: str) -> tuple[list[str], list[str]]:
  """Judges profiled kernels. Returns (violations, names of the candidate's own kernels that ran).

  Kernels of allowed allocation/copy ops are not judged, except those that look like the
  harness's marker kernel, which are kept so the marker can be found."""
  kernels = [k for k in kernels if not any(a in k["name"] for a in ALLOWED_LIBRARY_KERNELS)
             or marker_name in k["name"]]
  violations = []
  marker = [k for k in kernels if marker_name in k["name"]]
  harness_stream = marker[0]["stream"] if marker else None
  body = kernels[kernels.index(marker[0]) + 1:] if marker else kernels
  own_ran = []
  patterns = [re.compile(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])") for n in own_names]
  for k in body:
    name = k["name"]
    if any(p.search(name) for p in patterns):
      own_ran.append(name)
      if harness_stream is not None and k["stream"] != harness_stream:
        violations.append(f"kernel {name[:80]} ran on stream {k['stream']}, not the harness's "
                          f"stream {harness_stream}: side-stream work escapes the timer")
    elif _LIBRARY_KERNEL_RE.search(name):
      violations.append(f"a library kernel ran in forward: {name[:120]}")
    elif harness_stream is not None and k["stream"] != harness_stream:
      violations.append(f"kernel {name[:80]} ran on a side stream {k['stream']}")
  if not own_ran:
    violations.append(f"none of the candidate's own {backend} kernels "
                      f"({', '.join(own_names) or 'none found'}) ran on the GPU in forward")
  return violations, own_ran
