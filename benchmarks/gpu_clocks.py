"""The GPU's SM clock and throttle reasons while a benchmark runs, and what they were during each
candidate's timing.

    with GpuClocks(gpu_index=0) as clocks:
      ...  # the batch
    print(timing_clocks(rows, clocks.samples))

In batches of CUDA candidates on an H200, one copy of a level-2 GEMM candidate now and then
measured 2.25-2.3x its twin's time, beside no start-up and no exit of another judge
(BENCHMARKS.md). A lowered clock would explain that. This samples `nvidia-smi` every
`interval_s` (one query per sample, stamped with time.time() when it returns, comparable with
the verdicts' `evidence["gpu_holds"]`), and tells each timed copy's lowest SM clock and the
throttle reasons seen during its timing hold. Without nvidia-smi it samples nothing and says so.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from typing import Any, NamedTuple

from benchmarks.gpu_steps import timed_copies

QUERY = "clocks.sm,clocks_event_reasons.active,power.draw"
OUTLIER_PCT = 10.0  # a timed copy this far above its copies' median is reported


class Sample(NamedTuple):
  at: float  # time.time() when the query returned
  sm_mhz: int
  reasons: int  # clocks_event_reasons.active, a bit mask (0: none)
  power_w: float | None


def parse_line(at: float, line: str) -> Sample | None:
  """One `nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits` line, or None."""
  parts = [p.strip() for p in line.split(",")]
  if len(parts) != 3:
    return None
  try:
    power = float(parts[2])
  except ValueError:
    power = None  # "[N/A]"
  try:
    return Sample(at, int(float(parts[0])), int(parts[1], 16), power)
  except ValueError:
    return None


class GpuClocks:
  """A context manager that samples one GPU's clocks on a thread while its body runs."""

  def __init__(self, gpu_index: int = 0, interval_s: float = 0.2, enabled: bool = True):
    self.command = ["nvidia-smi", "-i", str(gpu_index), f"--query-gpu={QUERY}",
                    "--format=csv,noheader,nounits"]
    self.interval_s = interval_s
    self.enabled = enabled and shutil.which("nvidia-smi") is not None
    self.samples: list[Sample] = []
    self.error: str | None = None if self.enabled else "no nvidia-smi (or not asked for)"
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None

  def __enter__(self) -> "GpuClocks":
    if self.enabled:
      self._thread = threading.Thread(target=self._sample, daemon=True)
      self._thread.start()
    return self

  def _sample(self) -> None:
    while not self._stop.is_set():
      try:
        out = subprocess.run(self.command, capture_output=True, text=True, timeout=5,
                             check=True).stdout
      except (OSError, subprocess.SubprocessError) as e:
        self.error = f"{type(e).__name__}: {e}"[:200]
        return
      sample = parse_line(time.time(), out.strip().splitlines()[0] if out.strip() else "")
      if sample is not None:
        self.samples.append(sample)
      self._stop.wait(self.interval_s)

  def __exit__(self, *exc) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()


def during(samples: list[Sample], start: float, end: float) -> dict[str, Any] | None:
  """The lowest and median SM clock and the throttle reasons (OR'ed, hex) of the samples taken
  between `start` and `end` (wall-clock seconds), or None if none was."""
  inside = [s for s in samples if start <= s.at <= end]
  if not inside:
    return None
  reasons = 0
  for s in inside:
    reasons |= s.reasons
  return {"samples": len(inside), "min_sm_mhz": min(s.sm_mhz for s in inside),
          "median_sm_mhz": statistics.median(s.sm_mhz for s in inside),
          "reasons": hex(reasons)}


def timing_clocks(rows: list[dict], samples: list[Sample]) -> dict[str, Any]:
  """The run's SM clock (lowest, median, reasons seen), and every timed copy more than
  OUTLIER_PCT above its copies' median with the clocks during its timing hold (its last hold
  alone) and its twins'. Copies are named NAME/0, NAME/1, ... (sandbox_throughput)."""
  copies = {name: [{"name": r.get("name"), "candidate_ms": round(r["candidate_ms"], 3),
                    "clocks": during(samples, alone[-1][0], alone[-1][1])}
                   for _, r, alone in timed]
            for name, timed in timed_copies(rows).items()}
  outliers = []
  for name, timed in copies.items():
    if len(timed) < 2:
      continue
    median = statistics.median(t["candidate_ms"] for t in timed)
    slow = [t for t in timed if 100.0 * (t["candidate_ms"] - median) / median > OUTLIER_PCT]
    if slow:
      outliers.append({"candidate": name, "slow": slow,
                       "others": [t for t in timed if t not in slow]})
  whole = during(samples, float("-inf"), float("inf"))
  return {"samples": len(samples), "run": whole, "outliers": outliers}
