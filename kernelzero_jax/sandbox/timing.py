"""GPU timing, the same code for the reference (in the judge) and the candidate (in the worker).

Each trial: fresh inputs (a new seed, generated on the GPU, untimed), the L2 cache flushed,
then CUDA events around forward plus a *device-wide* synchronize, so work that a forward leaves
running on any stream is inside the measured interval. The median over trials is reported.

That interval also holds the host's wake-up from the synchronize, which a machine whose cores are
busy can stretch by milliseconds (benchmarks/timing_noise.py). So each trial also records an
event on the stream as soon as forward returns, and the timing reports the median of what the
interval holds past it (`after_forward_ms`): the wake-up, plus any work left on other streams.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # several times the H100/H200 L2 (50-60 MB)


class Timer:
  """Holds the flush buffer; created once per process after CUDA is initialised."""

  def __init__(self, device: torch.device):
    self.device = device
    self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    self.last_stream_ms: float | None = None  # the last call's time to its end on the stream

  def time_call(self, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Times one call in milliseconds."""
    self._flush.zero_()
    torch.cuda.synchronize()
    start, on_stream, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    start.record()
    out = fn()
    on_stream.record()
    torch.cuda.synchronize()
    end.record()
    end.synchronize()
    self.last_stream_ms = start.elapsed_time(on_stream)
    return start.elapsed_time(end), out


def plan_trials(estimate_ms: float, target_s: float, min_trials: int, max_trials: int) -> int:
  """Enough trials for about `target_s` of measured time, within [min_trials, max_trials]."""
  if estimate_ms <= 0:
    return max_trials
  return int(max(min_trials, min(max_trials, (target_s * 1000.0) // estimate_ms)))


def time_forward(timer: Timer, forward: Callable[..., Any], make_inputs: Callable[[int], list],
                 seeds: Sequence[int], warmup: int, target_s: float, min_trials: int,
                 on_audit: Callable[[int, list], None] | None = None,
                 audit_positions: Sequence[int] = ()) -> dict[str, Any]:
  """Times `forward` on fresh inputs, one seed per trial (seeds must be long enough).

  `audit_positions` are trial indices that are not timed: `on_audit(seed, inputs)` runs instead,
  under whatever observation the caller wants. Returns {"median_ms", "times_ms", "trials",
  "after_forward_ms"} (the last: the median over trials of the measured time past the end of
  forward's work on its stream, where the timer tells it, else None).
  """
  seeds = list(seeds)
  with torch.no_grad():
    warm_times = []
    for i in range(warmup):
      inputs = None
      inputs = make_inputs(seeds[i])
      t, _ = timer.time_call(lambda: forward(*inputs))
      warm_times.append(t)
    estimate = statistics.median(warm_times) if warm_times else 0.0
    n = plan_trials(estimate, target_s, min_trials, len(seeds) - warmup)
    times, after = [], []
    audits = set(audit_positions)
    for i in range(n):
      seed = seeds[warmup + i]
      inputs = None  # free the previous set before making the next (full-size inputs are GBs)
      inputs = make_inputs(seed)
      if i in audits and on_audit is not None:
        on_audit(seed, inputs)
        continue
      t, out = timer.time_call(lambda: forward(*inputs))
      del out
      times.append(t)
      on_stream = getattr(timer, "last_stream_ms", None)
      if on_stream is not None:
        after.append(t - on_stream)
  return {"median_ms": statistics.median(times) if times else None, "times_ms": times,
          "trials": len(times),
          "after_forward_ms": round(statistics.median(after), 4) if after else None}
