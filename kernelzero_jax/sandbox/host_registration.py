"""A model built on the CPU moved to the GPU from its own pages, page-locked in place.

The sandbox builds every model on the CPU, KernelBench's way, and moves it to the GPU: the
reference in its judge, the candidate in its worker under the judge's hold. Those moves are
pageable copies, which the driver stages through a pinned buffer of its own. On an H200
machine (BENCHMARKS.md, "Models moved to the GPU through page-locked memory") 4 GiB moved in
0.79 s so; registering the model's own pages (`cudaHostRegister`), the copy and unregistering
them took 0.18 + 0.08 + 0.08 s. A page-locked *copy* (`Tensor.pin_memory`) was slower than
either: its fresh allocation took 2 s.

SandboxConfig.registered_uploads (on by default) turns this on: on an H200 (BENCHMARKS.md, "Five
sandbox changes") batches of 36 level-2 and of 70 mixed CUDA candidates ran at 1.06x and 1.05x the
rate with it, the same verdicts. Registering is most of that time under the hold (4 GiB: 0.25-1.3 s
in a batch on an H200, against 0.08 s for the copy), so register_ahead does it before the hold
(SandboxConfig.register_uploads_ahead). What
it must get right: each page registered once (storages may share a page, and registering a page
twice fails), the storages alive until they are unregistered (the move drops the module's
references to them), and a failed call's error kept from torch, which reads CUDA's last error
after its kernel launches: the error is cleared at once, and without a way to clear it nothing is
registered.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from typing import Any, Callable, Iterable, Iterator

MIN_BYTES = 16 * 1024 * 1024  # below this a pageable copy takes a few milliseconds anyway
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# The evidence registered and to_device report, as sanitize keeps it from a worker's reply
# ("ahead": registered by register_ahead, before the move's GPU hold).
NUMBER_KEYS = ("bytes", "ranges", "register_s", "unregister_s", "copy_s")
ERROR_KEYS = ("register_failed", "unregister_failed")
FLAG_KEYS = ("ahead",)
ERROR_CHARS = 200


def page_ranges(spans: Iterable[tuple[int, int]], page: int = PAGE_BYTES
                ) -> list[tuple[int, int]]:
  """(address, bytes) spans as (address, bytes) ranges of whole pages, those that share or touch
  a page merged, in address order: every page of the spans in exactly one range."""
  bounds = sorted((start // page * page, -(-(start + size) // page) * page)
                  for start, size in spans if size > 0)
  merged: list[list[int]] = []
  for low, high in bounds:
    if merged and low <= merged[-1][1]:
      merged[-1][1] = max(merged[-1][1], high)
    else:
      merged.append([low, high])
  return [(low, high - low) for low, high in merged]


def cpu_storages(module) -> list:
  """The distinct CPU storages under `module`'s parameters and buffers."""
  storages = {}
  for tensor in list(module.parameters()) + list(module.buffers()):
    if tensor.device.type == "cpu":
      storage = tensor.untyped_storage()
      storages.setdefault(storage.data_ptr(), storage)
  return list(storages.values())


def cuda_error_clearer() -> Callable[[], Any] | None:
  """cudaGetLastError of the CUDA runtime this process has loaded (torch's), which returns and
  clears the last error; None where none is loaded."""
  try:
    with open("/proc/self/maps", encoding="utf-8") as f:
      paths = sorted({line.split()[-1] for line in f
                      if "libcudart.so" in line and line.split()[-1].startswith("/")})
  except OSError:
    return None
  for path in paths:
    try:
      return ctypes.CDLL(path).cudaGetLastError
    except (OSError, AttributeError):
      continue
  return None


def _call(function, *args) -> int | str:
  """A cudart call's error code (0: success), or what it raised."""
  try:
    return int(function(*args))
  except Exception as e:  # pylint: disable=broad-except
    return f"{type(e).__name__}: {e}"[:ERROR_CHARS]


@contextlib.contextmanager
def registered(module, cudart, clear_error: Callable[[], Any] | None,
               min_bytes: int = MIN_BYTES) -> Iterator[dict[str, Any]]:
  """Page-locks the pages of `module`'s CPU parameters and buffers in place (`cudart`: torch's
  `torch.cuda.cudart()`) while the block runs, then unlocks them, keeping the storages alive
  until then. Yields the evidence, filled in as it goes: {} where nothing was registered (fewer
  than `min_bytes`, or no `clear_error`), else {"bytes", "ranges", "register_s"}, then
  "unregister_s"; "register_failed" / "unregister_failed" with the error where a call failed
  (its error cleared; the pages registered before it still are, and the move goes on)."""
  evidence: dict[str, Any] = {}
  try:  # (a candidate's module may answer parameters() its own way)
    storages = cpu_storages(module)
    nbytes = sum(s.nbytes() for s in storages)
  except Exception:  # pylint: disable=broad-except
    storages, nbytes = [], 0
  if not nbytes or nbytes < min_bytes or clear_error is None:
    yield evidence
    return
  ranges = page_ranges((s.data_ptr(), s.nbytes()) for s in storages)
  evidence.update(bytes=nbytes, ranges=len(ranges))
  done = []
  t0 = time.perf_counter()
  try:
    for start, size in ranges:
      code = _call(cudart.cudaHostRegister, start, size, 0)
      if code != 0:
        clear_error()
        evidence["register_failed"] = f"cudaHostRegister: CUDA error {code}"[:ERROR_CHARS]
        break
      done.append(start)
    evidence["register_s"] = round(time.perf_counter() - t0, 4)
    yield evidence
  finally:
    t1 = time.perf_counter()
    for start in done:
      code = _call(cudart.cudaHostUnregister, start)
      if code != 0:
        clear_error()
        evidence.setdefault("unregister_failed",
                            f"cudaHostUnregister: CUDA error {code}"[:ERROR_CHARS])
    if done:
      evidence["unregister_s"] = round(time.perf_counter() - t1, 4)
    del storages  # (only now may the move's dropped CPU tensors be freed)


def sanitize(reply: Any) -> dict[str, Any]:
  """What a judge keeps of the evidence its worker's move reported (the worker runs the
  candidate's code): the keys registered and to_device write, numbers as numbers, errors cut
  short; nothing else."""
  if not isinstance(reply, dict):
    return {}
  out: dict[str, Any] = {}
  for key in NUMBER_KEYS:
    if isinstance(reply.get(key), (int, float)) and not isinstance(reply[key], bool):
      out[key] = reply[key]
  for key in ERROR_KEYS:
    if key in reply:
      out[key] = str(reply[key])[:ERROR_CHARS]
  for key in FLAG_KEYS:
    if reply.get(key) is True:
      out[key] = True
  return out


class Ahead:
  """A model's pages registered ahead of its move (register_ahead): to_device(..., ahead=) then
  only copies, and unregisters them once the copy is done. close() unregisters them should the
  model never move (once: closing again does nothing)."""

  def __init__(self, module, stack: contextlib.ExitStack, evidence: dict[str, Any]):
    self.module, self._stack, self.evidence = module, stack, evidence

  def close(self) -> None:
    self._stack.close()
    self.module = None

  @contextlib.contextmanager
  def held(self) -> Iterator[dict[str, Any]]:
    """registered's second half: yields the evidence, and unregisters the pages after the block
    (however it ends)."""
    try:
      yield self.evidence
    finally:
      self.close()


def register_ahead(torch, module, device, min_bytes: int = MIN_BYTES,
                   enabled: bool = True) -> Ahead | None:
  """registered's first half alone: `module`'s CPU pages page-locked now, where `device` is a
  GPU, `enabled` and there is something to register; None otherwise. (Page-locking is host and
  driver work: the sandbox does it under its start-up fence before the GPU hold in which the
  model moves, which then holds only the copy: SandboxConfig.register_uploads_ahead.)"""
  if not enabled or getattr(device, "type", None) != "cuda":
    return None
  stack = contextlib.ExitStack()
  evidence = stack.enter_context(registered(module, torch.cuda.cudart(), cuda_error_clearer(),
                                            min_bytes))
  if not evidence:
    stack.close()
    return None
  evidence["ahead"] = True
  return Ahead(module, stack, evidence)


def to_device(torch, module, device, min_bytes: int = MIN_BYTES,
              enabled: bool = True, ahead: Ahead | None = None) -> tuple[Any, dict[str, Any]]:
  """`module.to(device)`, from its own pages registered (registered) where `device` is a GPU
  and `enabled` (SandboxConfig.registered_uploads); with `ahead` (register_ahead's, of this very
  module), from the pages registered then, unregistered after the copy. Returns the moved module
  and the evidence ({} where nothing was registered; "copy_s" the move, synchronized, where
  something was)."""
  gpu = getattr(device, "type", None) == "cuda"
  if ahead is not None and not (gpu and ahead.module is module):
    ahead.close()  # (registered for another module: let go, and move this one as below)
    ahead = None
  if not gpu or (ahead is None and not enabled):
    return module.to(device), {}
  with (ahead.held() if ahead is not None else
        registered(module, torch.cuda.cudart(), cuda_error_clearer(), min_bytes)) as evidence:
    t0 = time.perf_counter()
    moved = module.to(device)
    torch.cuda.synchronize(device)
    if evidence:
      evidence["copy_s"] = round(time.perf_counter() - t0, 4)
  return moved, evidence
