"""Models built on the CPU moved to the GPU from page-locked memory.

The sandbox builds every model on the CPU, KernelBench's way, and moves it to the GPU: the
reference in its judge (under the startup fence, or under the candidate's hold where its weights
are kept apart) and the candidate in its worker ("init", under the hold). From pageable memory
the driver stages each copy through a small pinned buffer of its own: on an H200 machine 5-7
GB/s, 0.62 s for the 4 GiB of KernelBench's level-2 problem 59, against 54 GB/s (0.08 s) from
page-locked memory, whose copy of those 4 GiB took 0.24 s (benchmarks/host_upload.py).

So a model with enough bytes on the CPU is copied into page-locked memory (Tensor.pin_memory,
through Module._apply as Module.to goes), moved, and the page-locked memory given back at once:
all in the same step, under the same hold or fence as the plain move, since allocating and
freeing page-locked memory is driver work that other processes' timings must not overlap
(gpu_fence.py). The values moved are the same bytes either way.
"""

from __future__ import annotations

import time
from typing import Any

MIN_BYTES = 16 * 1024 * 1024  # below this the pageable copy takes a few milliseconds anyway


def cpu_bytes(module) -> int:
  """Bytes of the distinct CPU storages under `module`'s parameters and buffers."""
  storages: dict[int, int] = {}
  for tensor in list(module.parameters()) + list(module.buffers()):
    if tensor.device.type == "cpu":
      storage = tensor.untyped_storage()
      storages[storage.data_ptr()] = storage.nbytes()
  return sum(storages.values())


def _pinned(tensor):
  return tensor.pin_memory() if tensor.device.type == "cpu" and not tensor.is_pinned() else tensor


def _free_cached_pinned_memory(torch) -> None:
  """Gives the page-locked blocks torch's host allocator keeps for reuse back to the system."""
  empty = getattr(torch._C, "_host_emptyCache", None)  # pylint: disable=protected-access
  if empty is not None:
    empty()


def pin_module(module, min_bytes: int = MIN_BYTES, pin=_pinned) -> dict[str, Any]:
  """Replaces `module`'s CPU parameters' data and buffers by page-locked copies (`pin` applied
  through Module._apply, as Module.to goes: a parameter stays the same object) where they total
  at least `min_bytes`. Returns {} where it did nothing, else {"bytes", "pin_s"}, with
  "pin_failed" and the reason where pinning failed (e.g. page-locked memory ran out): the
  tensors not pinned by then stay where they are, with the same values."""
  nbytes = cpu_bytes(module)
  if nbytes < min_bytes:
    return {}
  evidence: dict[str, Any] = {"bytes": nbytes}
  t0 = time.perf_counter()
  try:
    module._apply(pin)  # pylint: disable=protected-access
  except Exception as e:  # pylint: disable=broad-except
    evidence["pin_failed"] = f"{type(e).__name__}: {e}"[:200]
  evidence["pin_s"] = round(time.perf_counter() - t0, 4)
  return evidence


def to_device(torch, module, device, min_bytes: int = MIN_BYTES) -> tuple[Any, dict[str, Any]]:
  """`module.to(device)`, through page-locked memory (pin_module) where `device` is a GPU.
  Returns the moved module and what was done: {} where nothing was pinned, else pin_module's
  evidence with "copy_s" (the move) and "free_s" (the page-locked memory given back)."""
  if getattr(device, "type", None) != "cuda":
    return module.to(device), {}
  evidence = pin_module(module, min_bytes)
  if not evidence:
    return module.to(device), {}
  t1 = time.perf_counter()
  moved = module.to(device)
  torch.cuda.synchronize(device)
  t2 = time.perf_counter()
  _free_cached_pinned_memory(torch)
  evidence.update(copy_s=round(t2 - t1, 4), free_s=round(time.perf_counter() - t2, 4))
  return moved, evidence
