"""Torch-side helpers shared by the judge and the candidate worker: module loading, seeded inputs and
parameters, output flattening and comparison.

This module imports torch. It is imported only inside sandbox processes, never by the trainer.
"""

from __future__ import annotations

import linecache
import math
import os
import sys
import types
from typing import Any, Callable, Sequence

import torch
import torch.utils._python_dispatch
import torch.utils._pytree


class SourceError(Exception):
  """A module source could not be loaded (syntax error, exception at import, missing names)."""


def load_module(source: str, name: str, filename: str | None = None) -> types.ModuleType:
  """Executes `source` as a fresh module called `name` and returns it.

  The module is registered in sys.modules while it runs (some code, e.g. dataclasses or
  load_inline's pybind modules, looks itself up there) and stays registered afterwards.
  """
  module = types.ModuleType(name)
  module.__file__ = filename or f"/kernelzero_sources/{name}.py"
  # Triton's @jit and inspect.getsource read the source through linecache; registering it there
  # makes sources that exist only as strings behave like files.
  linecache.cache[module.__file__] = (len(source), None, source.splitlines(True), module.__file__)
  sys.modules[name] = module
  try:
    code = compile(source, module.__file__, "exec")
  except SyntaxError as e:
    raise SourceError(f"syntax error at line {e.lineno}: {e.msg}") from e
  exec(code, module.__dict__)  # pylint: disable=exec-used
  return module


def require_attrs(module: types.ModuleType, names: Sequence[str]) -> None:
  missing = [n for n in names if not callable(getattr(module, n, None))]
  if missing:
    raise SourceError(f"module does not define {', '.join(missing)}")


def _to_device(obj: Any, device: torch.device) -> Any:
  if isinstance(obj, torch.Tensor):
    return obj.to(device)
  if isinstance(obj, (list, tuple)):
    return type(obj)(_to_device(o, device) for o in obj)
  return obj


def seed_torch(seed: int) -> None:
  """torch.manual_seed(seed) for the generators that sandbox processes draw from: the CPU's, and
  CUDA's (queued until CUDA is initialised, as torch.manual_seed queues it).

  torch.manual_seed also queues the seed for backends that no sandbox process initialises (XPU,
  MTIA), and each queueing formats the caller's stack (traceback.format_stack, which stats every
  source file on it through linecache): 0.15 ms a call on a CPU, more deeper in a stack, where
  seeding the CPU's generator alone takes 0.001 ms (benchmarks/trial_overhead.py: seed_ms,
  seed_cpu_ms), paid for each input set, so once per timing trial. (Where CUDA is not
  initialised yet, its seed is queued with a stack formatted, as torch.manual_seed does: once
  here instead of three times.)
  KZ_SEED_ALL_BACKENDS=1 (benchmarks' path token `allseed`) calls torch.manual_seed instead.
  The worker's integrity snapshot covers what this calls (evidence.IntegritySnapshot)."""
  if os.environ.get("KZ_SEED_ALL_BACKENDS") == "1":
    torch.manual_seed(seed)
    return
  seed = int(seed)
  if not torch.cuda._is_in_bad_fork():  # pylint: disable=protected-access  (as torch.manual_seed)
    torch.cuda.manual_seed_all(seed)
  torch.default_generator.manual_seed(seed)


def make_inputs(get_inputs: Callable[[], Sequence[Any]], seed: int, device: torch.device) -> list:
  """Forward arguments for one input set, deterministic in `seed`.

  Factory calls inside get_inputs() run under `device` as the default device, so full-size inputs
  are generated on the GPU (KernelBench's get_inputs builds multi-GB CPU tensors otherwise).
  The judge and the worker call this with the same seed on the same device, so both see the same
  tensors without shipping them between processes.
  """
  seed_torch(seed)
  with torch.device(device):
    inputs = list(get_inputs())
  return [_to_device(x, device) for x in inputs]


def input_bytes(get_inputs: Callable[[], Sequence[Any]]) -> int | None:
  """The bytes of one input set's tensors, from get_inputs() run on the meta device (shapes and
  dtypes only: no memory, no time). None when that cannot tell: get_inputs fails on meta tensors
  (e.g. it reads a value), or places a tensor on a device of its own."""
  try:
    with torch.device("meta"):
      leaves = flatten(list(get_inputs()))
  except Exception:  # pylint: disable=broad-except
    return None
  tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
  if any(not x.is_meta for x in tensors):
    return None
  return sum(x.numel() * x.element_size() for x in tensors)


class _LargestResult(torch.utils._python_dispatch.TorchDispatchMode):  # pylint: disable=protected-access
  """Records the largest storage any op's result holds (a view's is its base's: never larger
  than what exists already)."""

  def __init__(self):
    super().__init__()
    self.largest = 0

  def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # pylint: disable=redefined-outer-name
    out = func(*args, **(kwargs or {}))
    for leaf in torch.utils._pytree.tree_leaves(out):  # pylint: disable=protected-access
      if isinstance(leaf, torch.Tensor):
        self.largest = max(self.largest, leaf.untyped_storage().nbytes())
    return out


def _storage_bytes(tensors: Sequence[torch.Tensor]) -> int:
  """The bytes of the tensors' storages, each once: a view keeps its whole base alive, and two
  views of one base (or tied weights) count it once."""
  storages = {x.untyped_storage()._cdata: x.untyped_storage().nbytes() for x in tensors}  # pylint: disable=protected-access
  return sum(storages.values())


def output_bytes(model_cls: type, get_init_inputs: Callable[[], Sequence[Any]],
                 get_inputs: Callable[[], Sequence[Any]]) -> int | None:
  """The bytes of what one forward of the module leaves or makes on the way, whichever is more:
  its outputs for one input set, or the largest result of any operation inside it (a
  convolution's before the pooling that shrinks it). Read on the meta device, as input_bytes:
  the model is built there and its forward runs on meta inputs (shapes only, milliseconds).
  None when that cannot tell (an operation without a meta kernel, a value read, a tensor on a
  device of its own)."""
  try:
    with torch.device("meta"):
      inputs = list(get_inputs())
      model = model_cls(*list(get_init_inputs()))
      with _LargestResult() as largest:
        outputs = flatten(model(*inputs))
  except Exception:  # pylint: disable=broad-except
    return None
  tensors = [x for x in outputs if isinstance(x, torch.Tensor)]
  if any(not x.is_meta for x in tensors):
    return None
  return max(largest.largest, _storage_bytes(tensors))


def weight_bytes(model_cls: type, get_init_inputs: Callable[[], Sequence[Any]]) -> int | None:
  """The bytes of a module's parameters and buffers, each storage once (tied weights share one),
  with the module built on the meta device as output_bytes builds it. None when that cannot tell
  (its constructor fails there, or puts a tensor on a device of its own)."""
  try:
    with torch.device("meta"):
      model = model_cls(*list(get_init_inputs()))
  except Exception:  # pylint: disable=broad-except
    return None
  if not isinstance(model, torch.nn.Module):
    return None
  tensors = [*model.parameters(), *model.buffers()]
  if any(not x.is_meta for x in tensors):
    return None
  return _storage_bytes(tensors)


def construct_model(model_cls: type, get_init_inputs: Callable[[], Sequence[Any]],
                    seed: int) -> torch.nn.Module:
  """Instantiates a module as KernelBench does, seeded, on the CPU (make_model moves it)."""
  seed_torch(seed)
  init_inputs = list(get_init_inputs())
  seed_torch(seed)
  model = model_cls(*init_inputs)
  if not isinstance(model, torch.nn.Module):
    raise SourceError(f"{model_cls.__name__}(...) did not return a torch.nn.Module")
  return model


def make_model(model_cls: type, get_init_inputs: Callable[[], Sequence[Any]], seed: int,
               device: torch.device) -> torch.nn.Module:
  """Instantiates a module as KernelBench does: seed, build on the CPU, then move to `device`."""
  return construct_model(model_cls, get_init_inputs, seed).to(device)


def flatten(obj: Any) -> list:
  """Flattens nested lists/tuples of outputs into a list of leaves."""
  if isinstance(obj, (list, tuple)):
    out = []
    for o in obj:
      out.extend(flatten(o))
    return out
  return [obj]


def clone_leaves(leaves: Sequence[Any]) -> list:
  return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in leaves]


def compare_outputs(candidate: Sequence[Any], reference: Sequence[Any],
                    tolerance_for: Callable[[str], tuple[float, float]],
                    close_stats: Callable[..., dict[str, Any]] | None = None
                    ) -> tuple[bool, list[str], float, float]:
  """Compares flattened outputs. Returns (ok, reasons, max_abs_error, max_rel_error).

  Shapes and dtypes must match exactly; any NaN or inf in the candidate that the reference does not
  have at the same place fails (allclose with equal_nan=False). `close_stats` compares two
  floating-point tensors of one shape, dtype and device (default _close_stats; the judge's
  fused_compare.FusedCloseStats computes the same in one kernel).
  """
  close_stats = close_stats or _close_stats
  reasons: list[str] = []
  max_abs = 0.0
  max_rel = 0.0
  if len(candidate) != len(reference):
    return False, [f"returned {len(candidate)} outputs, expected {len(reference)}"], math.inf, math.inf
  for i, (c, r) in enumerate(zip(candidate, reference)):
    if isinstance(r, torch.Tensor):
      if not isinstance(c, torch.Tensor):
        reasons.append(f"output {i}: expected a tensor, got {type(c).__name__}")
        continue
      if tuple(c.shape) != tuple(r.shape):
        reasons.append(f"output {i}: shape {tuple(c.shape)} != expected {tuple(r.shape)}")
        continue
      if c.dtype != r.dtype:
        reasons.append(f"output {i}: dtype {c.dtype} != expected {r.dtype}")
        continue
      if c.device != r.device:
        reasons.append(f"output {i}: on {c.device}, expected {r.device}")
        continue
      atol, rtol = tolerance_for(str(r.dtype).replace("torch.", ""))
      if r.numel() == 0:
        continue
      if not r.is_floating_point():  # integers, bools (and complex) must match exactly
        if not torch.equal(c, r):
          reasons.append(f"output {i}: {r.dtype} values differ")
        continue
      stats = close_stats(c, r, atol, rtol)
      max_abs = max(max_abs, stats["max_abs"])
      max_rel = max(max_rel, stats["max_rel"])
      if stats["bad"]:
        msg = (f"output {i}: {stats['bad']}/{r.numel()} values outside atol={atol:g} rtol={rtol:g} "
               f"(max abs error {stats['max_abs']:.3g})")
        if stats["nonfinite"]:
          msg += f"; {stats['nonfinite']} non-finite values"
        reasons.append(msg)
    else:
      if isinstance(r, float) and isinstance(c, (int, float)):
        atol, rtol = tolerance_for("float32")
        if not (math.isfinite(c) and abs(c - r) <= atol + rtol * abs(r)):
          reasons.append(f"output {i}: {c!r} != expected {r!r}")
      elif c != r:
        reasons.append(f"output {i}: {c!r} != expected {r!r}")
  return not reasons, reasons, max_abs, max_rel


# Comparisons work through outputs in chunks, so a multi-GB output needs a few hundred MB of
# temporaries rather than several copies of itself.
_CHUNK = 1 << 25


def _chunks(c: torch.Tensor, r: torch.Tensor):
  cf, rf = c.reshape(-1), r.reshape(-1)
  work = torch.float64 if r.dtype == torch.float64 else torch.float32
  for start in range(0, rf.numel(), _CHUNK):
    yield cf[start:start + _CHUNK].to(work), rf[start:start + _CHUNK].to(work)


def _close_stats(c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> dict[str, Any]:
  """torch.isclose(c, r, rtol, atol, equal_nan=False) counted, chunked, with error stats.

  A value is close if it equals the reference or its error is finite and within tolerance
  (so a finite value where the reference is infinite is not close, as in torch.isclose). The
  errors' maxima are infinite once any error is not finite. Everything stays on the device until
  the end: one synchronisation per output, no boolean indexing (on a 6 GiB output on an H200,
  what those cost was most of a comparison)."""
  bad = nonfinite = max_abs = max_rel = c.new_zeros((), dtype=torch.float64)
  all_finite = torch.ones((), dtype=torch.bool, device=c.device)
  for cc, rc in _chunks(c, r):
    diff = (cc - rc).abs_()
    finite = torch.isfinite(diff)
    rc_abs = rc.abs()
    close = (cc == rc) | (finite & (diff <= rc_abs * rtol + atol))
    bad = bad + (close.numel() - close.sum())
    nonfinite = nonfinite + (cc.numel() - torch.isfinite(cc).sum())
    all_finite = all_finite & finite.all()
    max_abs = torch.maximum(max_abs, diff.max().double())
    max_rel = torch.maximum(max_rel, diff.div_(rc_abs.clamp_min_(1e-12)).max().double())
  bad, nonfinite, max_abs, max_rel, all_finite = torch.stack(
      [bad, nonfinite, max_abs, max_rel, all_finite.double()]).tolist()
  if not all_finite:
    max_abs = max_rel = math.inf
  return {"bad": int(bad), "nonfinite": int(nonfinite), "max_abs": max_abs, "max_rel": max_rel}


def mean_float64(r: torch.Tensor) -> float:
  """The mean of `r` in float64 (0.0 if empty), a chunk at a time: `r.double()` whole would be
  twice a float32 output's memory (12 GiB for KernelBench's 6 GiB elementwise outputs)."""
  if not r.numel():
    return 0.0
  flat = r.reshape(-1)
  return sum(flat[start:start + _CHUNK].double().sum().item()
             for start in range(0, flat.numel(), _CHUNK)) / flat.numel()


def constant_passes(r: torch.Tensor, value: float, atol: float, rtol: float) -> bool:
  """Whether an output filled with `value` would pass against reference `r`."""
  for _, rc in _chunks(r, r):
    if not bool(((value - rc).abs() <= atol + rtol * rc.abs()).all()):
      return False
  return True


def inputs_unchanged(after: Sequence[Any], pristine: Sequence[Any]) -> list[str]:
  """Names the forward arguments that the candidate changed in place (bitwise comparison)."""
  changed = []
  for i, (a, p) in enumerate(zip(after, pristine)):
    if isinstance(p, torch.Tensor):
      same = (isinstance(a, torch.Tensor) and a.shape == p.shape and a.dtype == p.dtype
              and torch.equal(a, p))
      # torch.equal is False for NaN == NaN; inputs with NaN are compared as bit patterns.
      if not same and isinstance(a, torch.Tensor) and a.shape == p.shape and a.dtype == p.dtype:
        same = torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(p, nan=0.0)) and \
            torch.equal(torch.isnan(a), torch.isnan(p)) if p.is_floating_point() else False
      if not same:
        changed.append(f"argument {i}")
  return changed
