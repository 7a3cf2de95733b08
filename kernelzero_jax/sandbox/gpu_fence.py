"""Keeps the sandbox's own GPU start-ups apart from timings on one GPU.

Other processes' driver work stretches a timed interval: on an H200, the sandbox's interval of a
0.29 ms forward measured 5.3 ms at the median beside processes creating CUDA contexts
(benchmarks/hold_interference.py), and in a batch of 258 CUDA candidates all 16 timings more than
5% off their copies' median ran beside another judge's start-up (benchmarks/gpu_steps.py). GPU
holds (gpu_budget.gpu_slots) do not cover start-ups: a judge and its worker create their CUDA
contexts, upload models and warm up before they take the GPU.

So start-ups take this fence shared, and a timing takes it alone (SandboxConfig.startup_fence).
Start-ups do not wait for each other or for untimed checks, only for a timing under way. A timing
that waits closes a turnstile that start-ups pass on their way in, so that a stream of start-ups
cannot starve it.

At most `startup_slots` start-ups that create a CUDA context hold the fence at once
(SandboxConfig.startups_at_once; the others wait for a start-up slot first, holding nothing).
The driver serialises context creation anyway (32 at once took 5.7 s each on an H200, about
0.18 s apiece: benchmarks/cuda_context.py), so letting them all in at once only makes a timing
that comes next wait for all of them: 10 s per timing at the median in a batch of 70 with 24
judges. Start-ups in a context that exists (a judge's upload and warm-up) take no slot: they are
short, and waiting behind context creations cost them 7-10 s each in that batch.

No deadlock with the GPU's slots (gpu_budget.gpu_slots): a start-up holds nothing else while it
waits.
A timing takes the fence before the slots where it can (Judge._evaluate: checks go on meanwhile).
One that holds every slot already (a judge whose whole evaluation holds the GPU, or one that
measures the reference first) must not wait for the fence, which a timing waiting for those slots
may hold: it polls instead (`holding_gpu`), and goes on without the fence when another timing
holds it, since that one keeps every start-up out meanwhile. A timing that may as well happen
later (timing_fence_within) waits for the fence a while before it tries the slots, without
waiting for them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from typing import Iterator, TextIO

from kernelzero_jax.sandbox.gpu_budget import took

POLL_S = 0.002  # how often a timing that holds the GPU looks at the fence again
SLOT_POLL_S = 0.005  # how often a start-up waiting for a start-up slot looks again


def fence_paths(device_index: int, lock_dir: str | None = None) -> tuple[str, str]:
  """(the turnstile's lock file, the fence's) of one GPU."""
  stem = _stem(device_index, lock_dir)
  return f"{stem}.turnstile.lock", f"{stem}.startups.lock"


def _stem(device_index: int, lock_dir: str | None) -> str:
  return os.path.join(lock_dir or tempfile.gettempdir(), f"kernelzero_sandbox_gpu{device_index}")


@contextlib.contextmanager
def _startup_slot(device_index: int, slots: int, lock_dir: str | None) -> Iterator[None]:
  """One of `slots` start-up slots of a GPU, held alone (none taken where `slots` is 0)."""
  if slots <= 0:
    yield
    return
  paths = [f"{_stem(device_index, lock_dir)}.startup{i}.lock" for i in range(slots)]
  files = [open(path, "a+") for path in paths]  # pylint: disable=consider-using-with
  try:
    # Whichever slot frees first (flock waits for one given lock only, so this polls).
    while (taken := next((f for f in files if took(f, fcntl.LOCK_EX)), None)) is None:
      time.sleep(SLOT_POLL_S)
    try:
      yield
    finally:
      fcntl.flock(taken, fcntl.LOCK_UN)
  finally:
    for f in files:
      f.close()


@contextlib.contextmanager
def startup_fence(device_index: int, timing: bool, lock_dir: str | None = None,
                  holding_gpu: bool = False, startup_slots: int = 0) -> Iterator[float]:
  """Held around a start-up (`timing` False: shared, by at most `startup_slots` start-ups at
  once where it is not 0) or a timing (alone). Yields the seconds it waited for the fence (and
  the slot). `holding_gpu`: a timing whose caller holds every GPU slot already (see the module's
  docstring)."""
  if holding_gpu and not timing:
    raise ValueError("only a timing may take the fence while holding the GPU")
  turnstile_path, fence_path = fence_paths(device_index, lock_dir)
  t0 = time.perf_counter()
  with _startup_slot(device_index, 0 if timing else startup_slots, lock_dir), \
      open(turnstile_path, "a+") as turnstile, open(fence_path, "a+") as fence:
    if holding_gpu:
      held = _alone_without_waiting(turnstile, fence)
    else:
      fcntl.flock(turnstile, fcntl.LOCK_EX)
      try:
        fcntl.flock(fence, fcntl.LOCK_EX if timing else fcntl.LOCK_SH)
      finally:
        fcntl.flock(turnstile, fcntl.LOCK_UN)
      held = True
    try:
      yield time.perf_counter() - t0
    finally:
      if held:
        fcntl.flock(fence, fcntl.LOCK_UN)


def _alone_without_waiting(turnstile: TextIO, fence: TextIO,
                           deadline: float | None = None) -> bool | None:
  """The fence alone, for a timing, without ever waiting for a lock: polls until the start-ups
  under way are done (closing the turnstile when it can, so that no new one begins). Returns
  False, not holding it, when another holds it alone: a timing waiting for the GPU, which keeps
  start-ups out until it has had the GPU; None, not holding it, where start-ups still held it
  at `deadline` (time.perf_counter's; None: no deadline)."""
  closed = False
  try:
    while True:
      closed = closed or took(turnstile, fcntl.LOCK_EX)
      if took(fence, fcntl.LOCK_EX):
        return True
      if not took(fence, fcntl.LOCK_SH):
        return False
      fcntl.flock(fence, fcntl.LOCK_UN)  # only start-ups hold it: look again
      if deadline is not None and time.perf_counter() >= deadline:
        return None
      time.sleep(POLL_S)
  finally:
    if closed:
      fcntl.flock(turnstile, fcntl.LOCK_UN)


@contextlib.contextmanager
def timing_fence_within(device_index: int, patience_s: float,
                        lock_dir: str | None = None) -> Iterator[float | None]:
  """The fence alone for a timing that does not hold the GPU yet and need not happen now (the
  reference measured first, Judge._reference_first): waits for the start-ups under way for at
  most `patience_s`, keeping new ones out meanwhile, and gives up at once where another timing
  holds the fence. Yields the seconds it waited, holding the fence, or None, not holding it.
  The caller takes the GPU after it without waiting (gpu_budget.gpu_slots' `wait` False): a
  timing that waited for the fence while holding every slot left the GPU idle (on an H100, 7
  references measured first waited 0.3-1.4 s so in a batch of 259)."""
  turnstile_path, fence_path = fence_paths(device_index, lock_dir)
  t0 = time.perf_counter()
  with open(turnstile_path, "a+") as turnstile, open(fence_path, "a+") as fence:
    held = _alone_without_waiting(turnstile, fence, deadline=t0 + patience_s)
    try:
      yield time.perf_counter() - t0 if held else None
    finally:
      if held:
        fcntl.flock(fence, fcntl.LOCK_UN)
