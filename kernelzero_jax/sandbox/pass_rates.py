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

The estimates read recent verdicts only (the last WINDOW of a reference, the last POOL_WINDOW of
the pool): a pool lives through an RL run, and the policy it judges gets better.

The choice changes where a candidate runs, never its verdict: a kept worker's failures are
judged again in a new one either way.
"""

from __future__ import annotations

import collections
import threading
from typing import Hashable

# How many verdicts' worth of the pool's rate over all references a reference's estimate holds.
PRIOR_WEIGHT = 2.0
# The verdicts an estimate reads: a reference's last WINDOW (two RL groups of 16), the pool's
# last POOL_WINDOW.
WINDOW = 32
POOL_WINDOW = 256


class PassRates:
  """Recent verdicts (correct or not), per key (a reference and backend) and over all keys;
  thread-safe, as a pool's judging threads record into it."""

  def __init__(self):
    self._lock = threading.Lock()
    self._by_key: dict[Hashable, collections.deque[bool]] = {}
    self._all: collections.deque[bool] = collections.deque(maxlen=POOL_WINDOW)

  def record(self, key: Hashable, correct: bool) -> None:
    with self._lock:
      self._by_key.setdefault(key, collections.deque(maxlen=WINDOW)).append(bool(correct))
      self._all.append(bool(correct))

  def estimate(self, key: Hashable) -> float:
    """The pass rate expected of `key`'s next candidate: its recent verdicts with PRIOR_WEIGHT
    of the pool's recent rate, which is Laplace's (correct + 1) / (judged + 2) (0.5 before
    any)."""
    with self._lock:
      correct, judged = self._counts(key)
      pool = (sum(self._all) + 1) / (len(self._all) + 2)
    return (correct + PRIOR_WEIGHT * pool) / (judged + PRIOR_WEIGHT)

  def counts(self, key: Hashable) -> tuple[int, int]:
    """(correct, judged) among `key`'s recent verdicts."""
    with self._lock:
      return self._counts(key)

  def _counts(self, key: Hashable) -> tuple[int, int]:
    recent = self._by_key.get(key, ())
    return sum(recent), len(recent)
