"""Compiles a Triton candidate's kernels before its checks, outside the GPU hold.

A Triton kernel compiles at its first launch (the MLIR passes, ptxas, and on Triton 3.6 a C
launcher per signature and the driver's own C module, both with gcc). In a worker that happens
inside the candidate's first check, while the judge holds the GPU: on an H200 that first call took
1.79 s against 0.08 s for a CUDA candidate (BENCHMARKS.md). The GPU sits idle meanwhile.

So for a Triton candidate on a GPU the judge starts a second worker, the precompiler, beside the
candidate's worker (judge.py). It is a worker like the other (own process, the guard, the same
workdir and so the same private Triton cache) that never sees a GPU (CUDA_VISIBLE_DEVICES is
empty): it imports the candidate, builds ModelNew and the inputs on the meta device, and runs one
forward in which every Triton launch only compiles (`warmup`), for the GPU's compute capability
read through NVML. What it compiles lands in the cache directory, where the worker's first launch
finds it. The compile is deterministic in the cache key, so the worker runs the same binary it
would have compiled itself; and since the precompiler shares nothing with the worker but the
workdir (which the candidate could write from the worker anyway), a candidate that keeps state
between calls (a buffer cached by shape, say) cannot carry meta tensors into its checks. A forward
that fails on the meta device (data-dependent code, `.item()`) compiles what it launched until
then; the worker compiles the rest as before. The precompiler can only change how long a verdict
takes, never what it is.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from typing import Any, Callable, Sequence

# The longest a judge waits for its precompiler once the worker has built: a compile that takes
# longer than this would be a candidate's own problem in its checks too.
MAX_WAIT_S = 60.0
# What the precompiler's reply may say (it ran candidate code: the judge keeps only these).
REPLY_LIMITS = {"kernels": 64, "name_chars": 80, "error_chars": 300}
# Its seconds, step by step: the driver's utilities, the kernels (one forward), their launchers.
STEP_KEYS = ("utils_s", "kernels_s", "launchers_s")


def nvml_capability() -> int | None:
  """The compute capability (e.g. 90) shared by every GPU NVML sees, or None: no NVML, no GPU,
  or GPUs of several capabilities (the precompiler cannot tell which one the worker gets). NVML
  starts no CUDA context, so this is safe in a process that forks workers later."""
  try:
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
  except OSError:
    return None
  if nvml.nvmlInit_v2() != 0:
    return None
  try:
    count = ctypes.c_uint()
    if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0 or count.value == 0:
      return None
    capabilities = set()
    for i in range(count.value):
      handle = ctypes.c_void_p()
      major, minor = ctypes.c_int(), ctypes.c_int()
      if (nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0 or
          nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major),
                                                  ctypes.byref(minor)) != 0):
        return None
      capabilities.add(10 * major.value + minor.value)
    return capabilities.pop() if len(capabilities) == 1 else None
  finally:
    nvml.nvmlShutdown()


def compile_only_driver(capability: int):
  """Triton's CUDA driver with the target fixed and no device behind it: device 0, stream 0.
  Its C utilities module (compiled with gcc on Triton 3.6) is built when it can be, so the
  worker finds that in the cache too; without libcuda (a CPU machine) kernels still compile."""
  from triton.backends.compiler import GPUTarget  # pylint: disable=import-outside-toplevel
  from triton.backends.nvidia import driver as nvidia  # pylint: disable=import-outside-toplevel

  class CompileOnlyDriver(nvidia.CudaDriver):
    """Compiles for `capability`; launching anything is an error."""

    def __init__(self):  # pylint: disable=super-init-not-called
      self.launcher_cls = nvidia.CudaLauncher
      self.utils_error = None
      try:
        self.utils = nvidia.CudaUtils()
      except Exception as e:  # pylint: disable=broad-except
        self.utils_error = f"{type(e).__name__}: {e}"
      self.get_current_device = lambda: 0
      self.set_current_device = lambda device: None
      self.get_current_stream = lambda device=None: 0
      self.get_device_capability = lambda device=None: divmod(capability, 10)

    def get_current_target(self):
      return GPUTarget("cuda", capability, 32)

  return CompileOnlyDriver()


@contextlib.contextmanager
def _compile_only_launches(compiled: list):
  """Every Triton launch compiles without running (the autotuner: every config it would try),
  and what compiled is appended to `compiled`."""
  from triton.runtime import autotuner, jit  # pylint: disable=import-outside-toplevel
  jit_run, tuner_run = jit.JITFunction.run, autotuner.Autotuner.run

  def run(self, *args, grid, warmup, **kwargs):  # pylint: disable=unused-argument
    kernel = jit_run(self, *args, grid=grid, warmup=True, **kwargs)
    if kernel is not None:
      compiled.append(kernel)
    return kernel

  def tune(self, *args, **kwargs):
    self.nargs = dict(zip(self.arg_names, args))
    kernel = None
    try:
      for config in self.prune_configs(kwargs):
        kernel = self.fn.run(*args, **kwargs, **config.all_kwargs())
    finally:
      self.nargs = None
    return kernel

  jit.JITFunction.run, autotuner.Autotuner.run = run, tune
  try:
    yield
  finally:
    jit.JITFunction.run, autotuner.Autotuner.run = jit_run, tuner_run


class _NoLaunchMetadata:
  """What a launcher built before its kernel's compile reads of the kernel's metadata: no
  tensor descriptors (which change the launcher's C source; a kernel that has them gets its
  own launcher after its compile, as before), zeros for the rest (that launcher never runs)."""

  tensordesc_meta = None

  def __getattr__(self, name: str):
    return 0


@contextlib.contextmanager
def _launchers_beside_kernels(launcher_cls, built: list):
  """While each kernel compiles, its C launcher builds in a thread beside it: the launcher's
  source depends only on the kernel's signature and constants, known before the compile, and
  Triton 3.6 builds it with gcc after the compile (0.2-0.3 s on an H200 machine, on the
  critical path of a Triton candidate whose reference was measured before its compile ended).
  The launcher lands in the cache under the key Triton computes from that source, where the
  launcher made after the compile finds it. Later Triton versions build no C launcher: nothing
  happens there, nor without a launcher class (`launcher_cls` None: no libcuda to link).
  KZ_TRITON_EARLY_LAUNCHERS=0 turns it off (benchmarks compare the two). `built` gets a future
  per launcher started."""
  # pylint: disable=import-outside-toplevel
  import concurrent.futures
  import os
  from triton import compiler
  from triton.backends.nvidia import driver as nvidia
  if (launcher_cls is None or not hasattr(nvidia, "make_launcher")
      or os.environ.get("KZ_TRITON_EARLY_LAUNCHERS", "1") == "0"):
    yield
    return
  real_compile = compiler.compile
  started: set[str] = set()
  pool = concurrent.futures.ThreadPoolExecutor(max_workers=4,
                                               thread_name_prefix="kz-triton-launcher")

  def compile_beside_its_launcher(src, *args, **kwargs):
    signature, constants = getattr(src, "signature", None), getattr(src, "constants", None)
    if isinstance(signature, dict) and isinstance(constants, dict):
      key = repr((sorted(signature.items()), sorted(constants.items(), key=repr)))
      if key not in started:
        started.add(key)
        built.append(pool.submit(launcher_cls, src, _NoLaunchMetadata()))
    return real_compile(src, *args, **kwargs)

  # JITFunction binds `triton.compiler.compile` at its first launch (create_binder), which for
  # the candidate's kernels comes inside this context.
  compiler.compile = compile_beside_its_launcher
  try:
    yield
  finally:
    compiler.compile = real_compile
    pool.shutdown(wait=True)


def _meta_devices():
  """A torch function mode that sends what asks for a CUDA device to the meta device instead
  (`device="cuda"`, `.cuda()`, `.to("cuda")`), so code written for the GPU runs here."""
  import torch  # pylint: disable=import-outside-toplevel
  from torch.overrides import TorchFunctionMode  # pylint: disable=import-outside-toplevel
  meta = torch.device("meta")

  def is_cuda(x: Any) -> bool:
    if isinstance(x, torch.device):
      return x.type == "cuda"
    if isinstance(x, str):
      return x.split(":")[0] == "cuda"
    return False

  class MetaDevices(TorchFunctionMode):
    """See _meta_devices."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
      kwargs = dict(kwargs or {})
      if is_cuda(kwargs.get("device")):
        kwargs["device"] = meta
      if func is torch.Tensor.cuda:
        return args[0]
      if func is torch.Tensor.to:
        args = tuple(meta if is_cuda(a) else a for a in args)
      return func(*args, **kwargs)

  return MetaDevices()


def precompile(model_cls: type, get_init_inputs: Callable[[], Sequence[Any]],
               get_inputs: Callable[[], Sequence[Any]], capability: int) -> dict[str, Any]:
  """Runs one forward of `model_cls` on meta tensors with every Triton launch compile-only,
  for `capability`, and builds each compiled kernel's launcher (beside its compile where it
  can). Returns what compiled ({"kernels", "launchers", "launchers_early", "seconds", "error"}:
  what failed, if anything)."""
  import torch  # pylint: disable=import-outside-toplevel
  from triton.runtime import driver  # pylint: disable=import-outside-toplevel
  t0 = time.perf_counter()
  compiled: list = []
  errors: list[str] = []
  active = compile_only_driver(capability)
  steps = {"utils_s": time.perf_counter() - t0}  # found in the cache (triton_seed.py) or built
  if active.utils_error:
    errors.append(f"Triton's driver utilities: {active.utils_error}")
  driver.set_active(active)
  early: list = []  # launchers built beside the compiles (_launchers_beside_kernels)
  with _launchers_beside_kernels(None if active.utils_error else active.launcher_cls, early):
    try:
      with _compile_only_launches(compiled), torch.no_grad(), torch.device("meta"), \
          _meta_devices():
        model = model_cls(*list(get_init_inputs()))
        model(*list(get_inputs()))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(f"forward on the meta device: {type(e).__name__}: {e}")
    steps["kernels_s"] = time.perf_counter() - t0 - sum(steps.values())
  # (Leaving it waited for the early launchers; one that failed is built again below, where
  # its error is kept.)
  launchers = 0
  # Launchers link against libcuda as the utilities do: without those, there are none.
  for kernel in {id(k): k for k in compiled}.values() if not active.utils_error else ():
    try:  # Triton 3.6 compiles a C launcher per signature here; later ones need none
      active.launcher_cls(kernel.src, kernel.metadata)
      launchers += 1
    except Exception as e:  # pylint: disable=broad-except
      errors.append(f"launcher: {type(e).__name__}: {e}")
      break
  steps["launchers_s"] = time.perf_counter() - t0 - sum(steps.values())
  names = sorted({str(getattr(k, "name", "?")) for k in compiled})
  return {"kernels": names, "launchers": launchers,
          "launchers_early": sum(f.exception() is None for f in early),
          "seconds": round(time.perf_counter() - t0, 3),
          **{k: round(v, 3) for k, v in steps.items()},
          "error": "; ".join(errors) if errors else None}


def sanitize(reply: Any) -> dict[str, Any]:
  """What the judge keeps of a precompiler's reply (evidence only; never a verdict)."""
  if not isinstance(reply, dict):
    return {"error": "no reply"}
  kernels = reply.get("kernels")
  kernels = [str(k)[:REPLY_LIMITS["name_chars"]] for k in kernels][:REPLY_LIMITS["kernels"]] \
      if isinstance(kernels, list) else []
  finite = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and x == x
  out: dict[str, Any] = {"kernels": kernels}
  for key in ("launchers", "launchers_early", "seconds", *STEP_KEYS):
    if finite(reply.get(key)):
      out[key] = reply[key]
  error = reply.get("error")
  if error:
    out["error"] = str(error)[:REPLY_LIMITS["error_chars"]]
  return out

