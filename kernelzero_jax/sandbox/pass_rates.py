"""Which candidates a kept worker serves: each reference's pass rate so far, as a pool sees it.

A worker kept after a correct candidate (SandboxConfig.candidates_per_worker) spares the next
candidate a process and a CUDA context, but a failure in it is judged again in a new worker
(Judge.run: what the last candidate left could have caused it), every build made again. So a
kept worker pays for candidates likely to pass and costs for the others: kept workers gave 1.23x
the throughput of a new worker per candidate where every candidate passed (an H200), and lost
4-8% of it where 3 in 5 failed (an H100; BENCHMARKS.md). An RL step's candidates pass or fail
largely by problem (a group's samples share it), so the pool estimates each reference's pass
rate from the verdicts it has, drawn towards its rate over all references while a reference has
few, and sends a candidate whose reference's estimate is under
SandboxConfig.keep_worker_min_pass_rate to a new worker (the job's "fresh_worker").

The choice changes where a candidate runs, never its verdict: a kept worker's failures are
judged again in a new one either way.
"""

from __future__ import annotations

import threading
from typing import Hashable

# How many verdicts' worth of the pool's rate over all references a reference's estimate holds.
PRIOR_WEIGHT = 2.0


class PassRates:
  """Correct verdicts out of all, per key (a reference and backend) and over all keys;
  thread-safe, as a pool's judging threads record into it."""

  def __init__(self):
    self._lock = threading.Lock()
    self._by_key: dict[Hashable, list[int]] = {}  # key -> [correct, judged]
    self._all = [0, 0]

  def record(self, key: Hashable, correct: bool) -> None:
    with self._lock:
      counts = self._by_key.setdefault(key, [0, 0])
      for c in (counts, self._all):
        c[0] += bool(correct)
        c[1] += 1

  def estimate(self, key: Hashable) -> float:
    """The pass rate expected of `key`'s next candidate: its own verdicts with PRIOR_WEIGHT of
    the pool's rate, which is Laplace's (correct + 1) / (judged + 2) over all (0.5 before any)."""
    with self._lock:
      correct, judged = self._by_key.get(key, (0, 0))
      pool = (self._all[0] + 1) / (self._all[1] + 2)
    return (correct + PRIOR_WEIGHT * pool) / (judged + PRIOR_WEIGHT)

  def counts(self, key: Hashable) -> tuple[int, int]:
    """(correct, judged) recorded for `key`."""
    with self._lock:
      correct, judged = self._by_key.get(key, (0, 0))
    return correct, judged
