"""Keeps the sandbox's own GPU start-ups apart from timings on one GPU.

Other processes' driver work stretches a timed interval: on an H200, the sandbox's interval of a
0.29 ms forward measured 5.3 ms at the median beside processes creating CUDA contexts
(benchmarks/hold_interference.py), and in a batch of 258 CUDA candidates all 16 timings more than
5% off their copies' median ran beside another judge's start-up (benchmarks/gpu_steps.py). GPU
holds (judge.gpu_slots) do not cover start-ups: a judge and its worker create their CUDA
contexts, upload models and warm up before they take the GPU.

So start-ups take this fence shared, and a timing, which already holds every GPU slot, takes it
alone (SandboxConfig.startup_fence). Start-ups do not wait for each other or for untimed checks,
only for a timing under way. A timing that waits closes a turnstile that start-ups pass on their
way in, so that a stream of start-ups cannot starve it. A start-up holds nothing else while it
waits, so there is no deadlock with the slots.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from typing import Iterator


def fence_paths(device_index: int, lock_dir: str | None = None) -> tuple[str, str]:
  """(the turnstile's lock file, the fence's) of one GPU."""
  directory = lock_dir or tempfile.gettempdir()
  stem = os.path.join(directory, f"kernelzero_sandbox_gpu{device_index}")
  return f"{stem}.turnstile.lock", f"{stem}.startups.lock"


@contextlib.contextmanager
def startup_fence(device_index: int, timing: bool,
                  lock_dir: str | None = None) -> Iterator[float]:
  """Held around a start-up (`timing` False: shared) or a timing (alone). Yields the seconds
  it waited for the fence."""
  turnstile_path, fence_path = fence_paths(device_index, lock_dir)
  t0 = time.perf_counter()
  with open(turnstile_path, "a+") as turnstile, open(fence_path, "a+") as fence:
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    try:
      fcntl.flock(fence, fcntl.LOCK_EX if timing else fcntl.LOCK_SH)
    finally:
      fcntl.flock(turnstile, fcntl.LOCK_UN)
    try:
      yield time.perf_counter() - t0
    finally:
      fcntl.flock(fence, fcntl.LOCK_UN)
