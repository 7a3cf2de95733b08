"""When candidates' code ran on a GPU outside every judge's hold, so that timings beside it can be
told why they were disturbed.

A judge holds the GPU for its candidate's checks and timing, but the candidate's import and its
constructor run before (so that a slow import or a large model built on the CPU holds nothing).
The worker profiles that code (worker_build._outside_the_hold) and the judge rejects a candidate
whose kernels there took more than SandboxConfig.setup_kernel_ms_limit, but only once it has
run: its kernels time-slice with whatever another judge is timing meanwhile. On an H200, in
three batches of 259 CUDA candidates, the 10 timings made while the cheat `busy_at_import` kept
the GPU busy for 2 s at import (9 candidates', one reference's) measured 2.2-2.9x their copies'
or their other runs' times (level 2 problem 95: 39.7 ms against 17.6 ms; BENCHMARKS.md).

So each judge opens a window in a directory per GPU before its worker runs candidate code outside
a hold (the import: from the go; the constructor: from its command) and closes it with the
kernel time the worker's profiler saw. A window whose code ran no kernels (nearly all) is deleted
as it closes; one that ran some, or whose end is unknown (the worker died or hung), stays for a
while as a closed file. After each timing, a judge asks which windows overlapped it
(`disturbances`) and tells them in its verdict's evidence. What makes it time again is the mark
such kernels leave on the timing itself (GpuSteps._timing_disturbed): on an H100 (BENCHMARKS.md)
every timing they stretched showed it, and none of the 83 timings that only overlapped a window
measured more than its copies; the mark also catches GPU work that no window covers.

Files, not locks: a window outlives neither its judge's interest nor a crash (a window whose
owner process is gone counts as closed, its kernels unknown, when a reader first sees it so).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from typing import Any

from kernelzero_jax import atomic_file

# Kernels of less than this (ms) in a window do not count: a time-sliced context switch around
# them moves at most one trial of a timing, which reports the median.
DISTURBING_KERNEL_MS = 1.0
KEEP_CLOSED_S = 600.0  # closed windows older than this are deleted by whoever reads the directory
POLL_S = 0.01


def window_dir(device_index: int, lock_dir: str | None = None) -> str:
  return os.path.join(lock_dir or tempfile.gettempdir(),
                      f"kernelzero_sandbox_gpu{int(device_index)}.setup_windows")


def open_window(device_index: int, kind: str, lock_dir: str | None = None) -> str:
  """A window opened now for candidate code of `kind` ("import", "constructor") about to run
  outside every hold on GPU `device_index`. Returns its handle (a path) for close_window."""
  directory = window_dir(device_index, lock_dir)
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"{os.getpid()}-{uuid.uuid4().hex}")
  atomic_file.write_json(f"{path}.open", {"pid": os.getpid(), "kind": kind, "start": time.time()})
  return path


def close_window(handle: str, kernel_ms: float | None) -> None:
  """Closes the window `handle` now: deleted where its code ran under DISTURBING_KERNEL_MS of
  kernels, else kept with its kernel time (None: unknown, which counts as disturbing)."""
  try:
    with open(f"{handle}.open", encoding="utf-8") as f:
      record = json.load(f)
  except (OSError, ValueError):
    return  # closed already
  if kernel_ms is None or kernel_ms >= DISTURBING_KERNEL_MS:
    atomic_file.write_json(f"{handle}.closed", dict(record, end=time.time(), kernel_ms=kernel_ms))
  _remove(f"{handle}.open")


def _remove(path: str) -> None:
  try:
    os.unlink(path)
  except OSError:
    pass


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:  # (someone else's: alive)
    return True
  return True


def _scan(directory: str, now: float) -> tuple[list[dict], list[dict], bool]:
  """(closed windows, open ones, whether a file changed while it was read)."""
  closed, open_, changed = [], [], False
  try:
    names = os.listdir(directory)
  except FileNotFoundError:
    return [], [], False
  for name in names:
    path = os.path.join(directory, name)
    if not name.endswith((".open", ".closed")):
      continue
    try:
      with open(path, encoding="utf-8") as f:
        record = json.load(f)
    except (OSError, ValueError):
      changed = True  # closed or written meanwhile: read again
      continue
    if name.endswith(".closed"):
      if now - float(record.get("end") or 0) > KEEP_CLOSED_S:
        _remove(path)
      else:
        closed.append(record)
    elif not _alive(int(record.get("pid", -1))):
      # Its judge is gone: ended, its kernels unknown, by the time it is first seen so.
      gone = dict(record, end=now, kernel_ms=None, owner_gone=True)
      atomic_file.write_json(path[:-len(".open")] + ".closed", gone)
      _remove(path)
      closed.append(gone)
    else:
      open_.append(record)
  return closed, open_, changed


def _overlaps(window: dict, start: float, end: float) -> bool:
  return float(window["start"]) < end and (window.get("end") is None
                                           or float(window["end"]) > start)


def disturbances(device_index: int, start: float, end: float, wait_s: float,
                 lock_dir: str | None = None) -> dict[str, Any]:
  """The windows on GPU `device_index` that overlapped [start, end] (time.time()) with kernels
  (or kernels unknown), waiting up to `wait_s` for the overlapping ones still open to close:
  {"disturbing": [window...], "unresolved": [still open at the deadline...], "waited_s"}.
  This process's own windows do not count: its worker runs nothing while it times."""
  directory = window_dir(device_index, lock_dir)
  t0 = time.perf_counter()
  while True:
    closed, open_, changed = _scan(directory, time.time())
    closed = [w for w in closed if w.get("pid") != os.getpid()]
    open_ = [w for w in open_ if w.get("pid") != os.getpid()]
    pending = [w for w in open_ if _overlaps(w, start, end)]
    if (changed or pending) and time.perf_counter() - t0 < wait_s:
      time.sleep(POLL_S)
      continue
    disturbing = [w for w in closed if _overlaps(w, start, end)
                  and (w.get("kernel_ms") is None or w["kernel_ms"] >= DISTURBING_KERNEL_MS)]
    return {"disturbing": [_summary(w, start) for w in disturbing],
            "unresolved": [_summary(w, start) for w in pending],
            "waited_s": round(time.perf_counter() - t0, 3)}


def _summary(window: dict, start: float) -> dict[str, Any]:
  """A window as a verdict's evidence: its kind, kernel time, and times relative to the timing
  hold's start."""
  out = {"kind": str(window.get("kind"))[:40], "kernel_ms": window.get("kernel_ms"),
         "from_s": round(float(window["start"]) - start, 3)}
  if window.get("end") is not None:
    out["to_s"] = round(float(window["end"]) - start, 3)
  if window.get("owner_gone"):
    out["owner_gone"] = True
  return out
