"""How busy the machine's CPU cores were while a benchmark ran: whether the CPU bounds it.

    with CpuLoad() as cpu:
      ...  # the work
    print(cpu.summary(items=len(batch)))

The sandbox's batch runs builds (niced), judges and workers on every core at once; if the cores
are busy all the time, more judges at once cannot raise its throughput, and what each candidate
costs the CPU is what to cut. psutil.cpu_times() over all cores, at the start and the end and
every `interval_s` between (for how much of the time the cores were saturated).
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

import psutil

SATURATED = 0.95  # a sample this busy or more counts as saturated


def cpu_busy(before: NamedTuple, after: NamedTuple) -> dict[str, float]:
  """Shares of the CPU time between two psutil.cpu_times() readings (all cores): `busy` (not
  idle and not waiting for I/O), of it `nice` (processes at a lowered priority: the sandbox's
  builders), and `iowait`. Fields a platform lacks count as 0."""
  delta = {field: getattr(after, field) - getattr(before, field) for field in after._fields}
  total = sum(delta.values())
  if total <= 0:
    return {"busy": 0.0, "nice": 0.0, "iowait": 0.0}
  idle = delta.get("idle", 0.0) + delta.get("iowait", 0.0)
  return {"busy": (total - idle) / total, "nice": delta.get("nice", 0.0) / total,
          "iowait": delta.get("iowait", 0.0) / total}


class CpuLoad:
  """A context manager that samples the CPU times while its body runs (see the module doc)."""

  def __init__(self, interval_s: float = 1.0):
    self.interval_s = interval_s
    self.samples: list[float] = []  # busy share of each interval
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None
    self.start = self.end = None
    self.seconds = 0.0

  def __enter__(self) -> "CpuLoad":
    self.start = psutil.cpu_times()
    self._began = time.monotonic()
    self._thread = threading.Thread(target=self._sample, daemon=True)
    self._thread.start()
    return self

  def _sample(self) -> None:
    last = self.start
    while not self._stop.wait(self.interval_s):
      now = psutil.cpu_times()
      self.samples.append(cpu_busy(last, now)["busy"])
      last = now

  def __exit__(self, *exc) -> None:
    self._stop.set()
    self._thread.join()
    self.end = psutil.cpu_times()
    self.seconds = time.monotonic() - self._began

  def summary(self, items: int) -> dict[str, Any]:
    """The whole span's shares (cpu_busy) in percent, the share of samples at SATURATED or more,
    the cores, and the busy core-seconds per item (e.g. per candidate)."""
    shares = cpu_busy(self.start, self.end)
    cores = psutil.cpu_count() or 1
    busy_s = shares["busy"] * self.seconds * cores
    return {"cores": cores, "seconds": round(self.seconds, 1),
            **{f"{k}_pct": round(100 * v, 1) for k, v in shares.items()},
            "saturated_pct": (round(100 * sum(s >= SATURATED for s in self.samples)
                                    / len(self.samples), 1) if self.samples else None),
            "busy_core_s_per_item": round(busy_s / items, 2) if items else None}
