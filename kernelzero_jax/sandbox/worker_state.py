"""What a candidate worker's process looks like before a candidate, and what a candidate changed.

A worker may serve several candidates in turn (SandboxConfig.candidates_per_worker): after a
correct candidate, its judge keeps it for its next job instead of starting a new process and a
new CUDA context. It serves another only where nothing the last candidate did is left in it that
the next could see. `Pristine` is taken once, after the worker's set-up and before its first
candidate; after each candidate, with the candidate's own modules and objects dropped,
`Pristine.drift()` lists what still differs, and the worker is ended where anything does.

Classes of leftovers, each compared with the pristine state:
- Python: module attributes and class attributes of torch, triton, numpy, the standard library
  the harness uses, and this package, by identity (a function or class replaced, a module in
  sys.modules swapped); import machinery and trace or profile hooks; the default dtype and
  torch's global numerics flags (TF32, reduced-precision reductions, deterministic algorithms,
  cuDNN); environment variables; signal handlers; resource limits; the umask.
- Native: the operator registrations of torch's dispatcher (an extension that registers or
  overrides an operator's kernel changes them); the process's OS threads (a thread started from
  native code is no Python thread); child processes.
- GPU: the memory still allocated, the current device and stream.

What a fingerprint cannot see (native code that writes into another library's memory, device
settings that torch does not expose) is bounded otherwise: at most candidates_per_worker
candidates share a worker, a worker that was kept is stopped (SIGSTOP) while its judge writes a
verdict, every judge draws its own input seeds (a leftover of one candidate's outputs matches no
other's inputs), and a candidate that fails in a kept worker is judged again in a new one
(judge.Judge.run).
"""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import sys
import threading
import warnings
from typing import Any

# Top-level packages whose module and class attributes are compared.
ROOTS = frozenset({
    "torch", "triton", "numpy", "kernelzero_jax", "builtins", "math", "operator", "functools",
    "itertools", "os", "sys", "time", "random", "threading", "_thread", "ctypes", "importlib",
    "types", "inspect", "contextlib", "collections", "copy", "pickle", "io", "abc", "gc",
    "signal", "multiprocessing", "subprocess", "socket", "tempfile", "shutil", "json", "struct",
})
# Values compared by nothing: counters and sizes that libraries bump as they run.
_UNCOMPARED = (int, float)
# Environment variables the worker itself sets for each candidate (worker._enter_directory).
PER_CANDIDATE_ENV = frozenset({"TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TMPDIR", "HOME"})
_LIMITS = tuple(getattr(resource, n) for n in ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_NOFILE",
                                               "RLIMIT_NPROC", "RLIMIT_STACK", "RLIMIT_CPU",
                                               "RLIMIT_FSIZE", "RLIMIT_DATA")
                if hasattr(resource, n))
# Module attributes the worker itself sets for each candidate (worker._enter_directory).
PER_CANDIDATE_ATTRIBUTES = frozenset({("tempfile", "tempdir")})
# Class attributes the interpreter itself creates on first use (copyreg's cache of a class's
# slots when it is pickled, a class's annotations dict when it is first read).
LAZY_CLASS_ATTRIBUTES = frozenset({"__slotnames__", "__annotations__"})
# Modules that Triton's CPU interpreter (TRITON_INTERPRET=1) rebinds on every launch it
# interprets: not compared where the worker runs on the CPU.
INTERPRETER_PATCHED = ("triton.language",)
# GPU memory a candidate may leave allocated (the allocator's rounding), in bytes.
GPU_BYTES_LEFT_OK = 2 * 2**20


def _attributes() -> tuple[dict[tuple[str, ...], Any], dict[tuple[str, str], frozenset]]:
  """(module, name) and (module, class, name) -> the object bound there, for ROOTS; and each
  class's attribute names (a name added to a class can shadow one it inherits)."""
  out: dict[tuple[str, ...], Any] = {}
  names: dict[tuple[str, str], frozenset] = {}
  seen: set[int] = set()
  with warnings.catch_warnings():  # some deprecated aliases warn when looked at
    warnings.simplefilter("ignore")
    for name, mod in list(sys.modules.items()):
      if mod is None or name.split(".")[0] not in ROOTS:
        continue
      try:
        members = list(vars(mod).items())
      except TypeError:
        continue
      for key, value in members:
        if not isinstance(value, _UNCOMPARED):
          out[(name, key)] = value
        if isinstance(value, type) and id(value) not in seen and \
            str(getattr(value, "__module__", "")).split(".")[0] in ROOTS:
          seen.add(id(value))
          members = list(vars(value).items())
          names[(value.__module__, value.__qualname__)] = frozenset(k for k, _ in members)
          for ckey, cvalue in members:
            if not isinstance(cvalue, _UNCOMPARED):
              out[(value.__module__, value.__qualname__, ckey)] = cvalue
  return out, names


def _dispatcher_digest(torch) -> str:
  """A digest of every operator's schema and kernel registrations in torch's dispatcher."""
  digest = hashlib.sha256()
  for op in sorted(torch._C._dispatch_get_all_op_names()):  # pylint: disable=protected-access
    digest.update(torch._C._dispatch_dump(op).encode())  # pylint: disable=protected-access
  return digest.hexdigest()


def _torch_flags(torch) -> dict[str, Any]:
  flags = {
      "default_dtype": torch.get_default_dtype(), "grad": torch.is_grad_enabled(),
      "inference_mode": torch.is_inference_mode_enabled(),
      "anomaly": torch.is_anomaly_enabled(),
      "deterministic": torch.are_deterministic_algorithms_enabled(),
      "matmul_precision": torch.get_float32_matmul_precision(),
      "cuda_matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
      "fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
      "bf16_reduced": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
      "cudnn": (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
                torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32),
      "threads": torch.get_num_threads(),
  }
  if hasattr(torch, "get_default_device"):
    flags["default_device"] = str(torch.get_default_device())
  return flags


def _signals() -> dict[int, Any]:
  out = {}
  for sig in signal.valid_signals():
    try:
      out[int(sig)] = signal.getsignal(sig)
    except (ValueError, OSError):
      continue
  return out


def os_threads() -> set[int]:
  """The ids of this process's OS threads (Python's and native ones)."""
  try:
    return {int(t) for t in os.listdir("/proc/self/task")}
  except OSError:
    return set()


def _umask() -> int:
  mask = os.umask(0o22)
  os.umask(mask)
  return mask


class Pristine:
  """The state of a worker before its first candidate (see the module's docstring)."""

  def __init__(self, torch, device):
    self.torch, self.device = torch, device
    self.attributes, self.class_names = _attributes()
    self.modules = {name: mod for name, mod in sys.modules.items()}
    self.dispatcher = _dispatcher_digest(torch)
    self.flags = _torch_flags(torch)
    self.hooks = self._hooks()
    self.environ = self._environ()
    self.signals = _signals()
    self.limits = {lim: resource.getrlimit(lim) for lim in _LIMITS}
    self.umask = _umask()
    self.threads = os_threads()
    self.gpu_bytes = (torch.cuda.memory_allocated(device) if device.type == "cuda" else 0)

  @staticmethod
  def _hooks() -> dict[str, Any]:
    return {"path": list(sys.path), "meta_path": list(sys.meta_path),
            "path_hooks": list(sys.path_hooks), "trace": sys.gettrace(),
            "profile": sys.getprofile(), "threading_trace": getattr(threading, "_trace_hook", None),
            "threading_profile": getattr(threading, "_profile_hook", None),
            "recursion": sys.getrecursionlimit(), "switch": sys.getswitchinterval(),
            "excepthook": sys.excepthook, "displayhook": sys.displayhook,
            "thread_excepthook": threading.excepthook}

  @staticmethod
  def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in PER_CANDIDATE_ENV}

  def drift(self) -> list[str]:
    """What differs from the pristine state now, in words (empty: nothing seen)."""
    torch, out = self.torch, []
    now, class_names = _attributes()
    replaced = [".".join(key) for key, value in self.attributes.items()
                if (key not in now or now[key] is not value)
                and key not in PER_CANDIDATE_ATTRIBUTES and key[-1] not in LAZY_CLASS_ATTRIBUTES]
    replaced += [".".join(cls) + "." + name for cls, names in self.class_names.items()
                 for name in sorted(class_names.get(cls, names) - names - LAZY_CLASS_ATTRIBUTES)]
    if self.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
      replaced = [r for r in replaced if not r.startswith(INTERPRETER_PATCHED)]
    if replaced:
      out.append(f"{len(replaced)} attribute(s) of modules or classes replaced, removed or "
                 f"added to a class ({', '.join(sorted(replaced)[:8])})")
    swapped = [n for n, m in self.modules.items() if sys.modules.get(n) is not m]
    if swapped:
      out.append(f"modules replaced or removed in sys.modules ({', '.join(sorted(swapped)[:3])})")
    hooks = self._hooks()
    changed = [k for k, v in self.hooks.items() if hooks[k] != v]
    if changed:
      out.append(f"interpreter hooks or settings changed ({', '.join(changed)})")
    flags = _torch_flags(torch)
    changed = [k for k, v in self.flags.items() if flags.get(k) != v]
    if changed:
      out.append(f"torch's global settings changed ({', '.join(changed)})")
    environ = self._environ()
    changed = sorted(k for k in set(environ) | set(self.environ)
                     if environ.get(k) != self.environ.get(k))
    if changed:
      out.append(f"environment variables changed ({', '.join(changed[:3])})")
    if _signals() != self.signals:
      out.append("signal handlers changed")
    if {lim: resource.getrlimit(lim) for lim in _LIMITS} != self.limits:
      out.append("resource limits changed")
    if _umask() != self.umask:
      out.append("the umask changed")
    new_threads = os_threads() - self.threads
    if new_threads:
      out.append(f"{len(new_threads)} OS thread(s) more than before the first candidate")
    if _dispatcher_digest(torch) != self.dispatcher:
      out.append("operator registrations in torch's dispatcher changed")
    if self.device.type == "cuda":
      out.extend(self._gpu_drift())
    return out

  def _gpu_drift(self) -> list[str]:
    torch, device = self.torch, self.device
    try:
      torch.cuda.synchronize(device)
      torch.cuda.ipc_collect()
      torch.cuda.empty_cache()
      left = torch.cuda.memory_allocated(device) - self.gpu_bytes
      out = []
      if left > GPU_BYTES_LEFT_OK:
        out.append(f"{left / 2**20:.1f} MiB of GPU memory left allocated")
      if torch.cuda.current_device() != device.index:
        out.append("the current CUDA device changed")
      if torch.cuda.current_stream(device) != torch.cuda.default_stream(device):
        out.append("the current CUDA stream changed")
      return out
    except RuntimeError as e:
      return [f"the GPU is not usable ({str(e)[:200]})"]
