"""GPU timing, the same code for the reference (in the judge) and the candidate (in the worker).

Each trial: fresh inputs (a new seed, generated on the GPU, untimed), the L2 cache flushed,
then CUDA events around forward plus a *device-wide* synchronize, so work that a forward leaves
running on any stream is inside the measured interval. The median over trials is reported.

The reference (ours, in the judge) may be timed on one input set instead (`reuse_inputs`): fresh
inputs stop a candidate from replaying outputs it cached, which ours does not do, and for the
6-8 GiB problems making a set costs about as much as the forward. Its trials still flush the L2
cache; the set is made again whenever a forward changed it in place (torch's version counters).

How many trials: enough for about `target_s` of measured time (within [min_trials, the seeds
given]), or fewer where `precision` is given and the median is already known that well: the
timing stops after at least min_trials once a distribution-free interval for the median (order
statistics, MEDIAN_CONFIDENCE) lies within +-precision of it (median_interval). A steady kernel
then stops at min_trials however fast it is; a noisy one goes on toward the target. (Triton's
do_bench plans its repetitions from a time budget alone, as few as one for a slow kernel.)
Where the caller needs precision only for some times (`outside_ms`: a reward that tells apart
speedups between 1x and 3x only), a timing known to lie outside them stops sooner, after at least
`outside_min_trials` (SandboxConfig.speedup_band). One whose first `far_min_trials` timed trials
each took over `far_ms` (far slower than the band's slow end: SandboxConfig.band_far_factor) stops
there, its audits still to come made at once: a speedup that far under the band earns what any
under it does, and its audits still check what the timing ran.

That interval also holds the host's wake-up from the synchronize, which a machine whose cores are
busy can stretch by milliseconds (benchmarks/timing_noise.py). So each trial also records an
event on the stream as soon as forward returns, and the timing reports the median of what the
interval holds past it (`after_forward_ms`): the wake-up, plus any work left on other streams.
"""

from __future__ import annotations

import math
import statistics
import time
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


# The confidence of the interval for the median that a precision-stopped timing asks to lie
# within +-precision of it: with 5 trials, their least and greatest (93.75%).
MEDIAN_CONFIDENCE = 0.9


def median_interval(times: Sequence[float], confidence: float = MEDIAN_CONFIDENCE
                    ) -> tuple[float, float] | None:
  """A distribution-free interval for the median of what `times` were drawn from: their k-th
  least and k-th greatest, for the largest k whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is
  at least `confidence`. None where even the least and greatest do not cover it so (n < 5 at
  0.9)."""
  n = len(times)
  below, k = 0.0, 0  # P(Binomial(n, 1/2) < k), and the k that has it
  while k < n // 2:
    nxt = below + math.comb(n, k) / 2.0 ** n
    if 1.0 - 2.0 * nxt < confidence:
      break
    below, k = nxt, k + 1
  if k == 0:
    return None
  ordered = sorted(times)
  return ordered[k - 1], ordered[n - k]


def precise_enough(times: Sequence[float], precision: float,
                   confidence: float = MEDIAN_CONFIDENCE) -> bool:
  """Whether the median of `times` is known to within +-`precision` (a fraction of it):
  median_interval lies inside that band."""
  interval = median_interval(times, confidence)
  if interval is None:
    return False
  mid = statistics.median(times)
  lo, hi = interval
  return mid > 0 and max(mid - lo, hi - mid) <= precision * mid


def _versions(inputs: Any) -> tuple | None:
  """The version counters of the tensors in `inputs` (nested lists and tuples too), which every
  in-place change moves; None where something could change unseen (an object other than a
  tensor, a number, a string or None; an inference tensor, which keeps no counter)."""
  if isinstance(inputs, torch.Tensor):
    try:
      return (inputs._version,)  # pylint: disable=protected-access
    except RuntimeError:
      return None
  if isinstance(inputs, (list, tuple)):
    versions: tuple = ()
    for x in inputs:
      inner = _versions(x)
      if inner is None:
        return None
      versions += inner
    return versions
  return () if inputs is None or isinstance(inputs, (bool, int, float, complex, str)) else None


class _Inputs:
  """The input set of each trial: a fresh one per seed, or with `reuse` the first one again for
  as long as no forward changed it in place (a tensor's version counter moved)."""

  def __init__(self, make_inputs: Callable[[int], list], reuse: bool):
    self.make_inputs, self.reuse = make_inputs, reuse
    self.current: list | None = None
    self.versions: tuple | None = None
    self.made = 0

  def next(self, seed: int) -> list:
    if (self.reuse and self.current is not None and self.versions is not None
        and _versions(self.current) == self.versions):
      return self.current
    self.current = None  # free the previous set before making the next (full-size inputs are GBs)
    self.current = self.make_inputs(seed)
    self.versions = _versions(self.current)
    self.made += 1
    return self.current


def band_ms(reference_ms: float | None, band: Sequence[float] | None,
            slow_start: float) -> tuple[float, float] | None:
  """The candidate times (fast_ms, slow_ms) that a speedup band (low, high; SandboxConfig's
  speedup_band) needs to precision, from the reference's time: the reference's time over the
  band's high end, and over its low end with `slow_start` more. None without a band or a
  positive finite reference time."""
  if band is None or not reference_ms or not math.isfinite(reference_ms) or reference_ms <= 0:
    return None
  low, high = band
  return reference_ms / high, reference_ms / low * (1.0 + slow_start)


def known_outside(times: Sequence[float], band_ms: Sequence[float],
                  confidence: float = MEDIAN_CONFIDENCE) -> bool:
  """Whether the median of `times` is known to lie outside `band_ms` (fast_ms, slow_ms): its
  median_interval wholly under fast_ms or wholly over slow_ms."""
  interval = median_interval(times, confidence)
  if interval is None:
    return False
  fast_ms, slow_ms = band_ms
  return interval[1] < fast_ms or interval[0] > slow_ms


def time_forward(timer: Timer, forward: Callable[..., Any], make_inputs: Callable[[int], list],
                 seeds: Sequence[int], warmup: int, target_s: float, min_trials: int,
                 on_audit: Callable[[int, list], None] | None = None,
                 audit_positions: Sequence[int] = (), reuse_inputs: bool = False,
                 precision: float | None = None, outside_ms: Sequence[float] | None = None,
                 outside_min_trials: int = 5, far_ms: float | None = None,
                 far_min_trials: int = 3) -> dict[str, Any]:
  """Times `forward` on fresh inputs, one seed per trial (seeds must be long enough), or with
  `reuse_inputs` on the first seed's inputs while they stay as made (the reference only: see the
  module's docstring).

  `audit_positions` are trial indices that are not timed: `on_audit(seed, inputs)` runs instead,
  under whatever observation the caller wants; every one of them comes before a timing stopped
  for `precision` (the module's docstring), which stops only after min_trials positions and the
  last audit. `outside_ms` (fast_ms, slow_ms): the times the caller needs to `precision`; a
  timing whose median is known to lie outside them (known_outside) stops after at least
  `outside_min_trials` timed trials and the last audit. `far_ms`: a timing whose first
  `far_min_trials` timed trials each took longer stops after them, the audits still to come run
  at once, one after another. Returns {"median_ms", "times_ms", "warmup_ms", "trials",
  "planned", "stopped", "after_forward_ms", "input_sets", "inputs_ms", "beyond_ms"}
  (warmup_ms: the warm-up calls' times, in order; planned: the positions the target asked for,
  audits included; stopped: "precision", "outside" or "far" where the timing stopped before
  them, else "planned"; after_forward_ms: the median over trials of the measured time past the
  end of forward's work on its stream, where the timer tells it, else None; input_sets: how
  many input sets were made; inputs_ms: the median over timed trials of the wall time spent
  getting the trial's input set, 0 where one was reused;
  beyond_ms: the median over timed trials of the trial's wall time, its input set included,
  beyond what it measured: what a trial costs the GPU's hold on top of its measurement).
  """
  seeds = list(seeds)
  sets = _Inputs(make_inputs, reuse_inputs)
  with torch.no_grad():
    warm_times = []
    for i in range(warmup):
      inputs = None
      inputs = sets.next(seeds[i])
      t, out = timer.time_call(lambda: forward(*inputs))
      # (Kept past the loop, the last warm-up's output held a 6 GiB problem's output through
      # every trial: on an 80 GiB GPU, the trial's own output then ran out of memory.)
      del out
      warm_times.append(t)
    estimate = statistics.median(warm_times) if warm_times else 0.0
    n = plan_trials(estimate, target_s, min_trials, len(seeds) - warmup)
    times, after, inputs_ms, beyond_ms = [], [], [], []
    audits = set(audit_positions)
    last_audit = max(audits, default=-1)
    stopped = "planned"
    for i in range(n):
      seed = seeds[warmup + i]
      started = time.perf_counter()
      inputs = None
      inputs = sets.next(seed)
      made = time.perf_counter()
      if i in audits and on_audit is not None:
        on_audit(seed, inputs)
        continue
      t, out = timer.time_call(lambda: forward(*inputs))
      del out
      times.append(t)
      on_stream = getattr(timer, "last_stream_ms", None)
      if on_stream is not None:
        after.append(t - on_stream)
      inputs_ms.append((made - started) * 1e3)
      beyond_ms.append((time.perf_counter() - started) * 1e3 - t)
      if (far_ms is not None and i + 1 < n and len(times) == far_min_trials
          and min(times) > far_ms):
        for j in (a for a in sorted(audits) if i < a < n and on_audit is not None):
          inputs = None
          inputs = sets.next(seeds[warmup + j])
          on_audit(seeds[warmup + j], inputs)
        stopped = "far"
        break
      if i + 1 >= n or i < last_audit:
        continue
      if (precision is not None and i + 1 >= min_trials
          and precise_enough(times, precision)):
        stopped = "precision"
        break
      if (outside_ms is not None and len(times) >= outside_min_trials
          and known_outside(times, outside_ms)):
        stopped = "outside"
        break
  return {"median_ms": statistics.median(times) if times else None, "times_ms": times,
          "warmup_ms": warm_times,
          "trials": len(times), "planned": n, "stopped": stopped,
          "after_forward_ms": round(statistics.median(after), 4) if after else None,
          "input_sets": sets.made,
          "inputs_ms": round(statistics.median(inputs_ms), 4) if inputs_ms else None,
          "beyond_ms": round(statistics.median(beyond_ms), 4) if beyond_ms else None}
