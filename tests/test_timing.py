"""sandbox/timing.time_forward's bookkeeping, with a scripted timer in place of CUDA events."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import weakref

import pytest
import torch

from kernelzero_jax.sandbox import timing


class _ScriptedTimer:
  """Answers each call with the next (measured ms, ms to the end on the stream) pair; with
  `stream=False`, a timer that cannot tell the second (no last_stream_ms)."""

  def __init__(self, pairs, stream=True):
    self.pairs, self.stream, self.calls = list(pairs), stream, []

  def time_call(self, fn):
    self.calls.append(fn())
    measured, on_stream = self.pairs.pop(0)
    if self.stream:
      self.last_stream_ms = on_stream
    return measured, None


# Warm-up of 2 calls at 10 ms: a 0.05 s target plans 5 trials. The measured intervals hold
# 1, 3, 2, 21 and 1 ms past the end of forward's work on its stream.
WARMUP = [(10.0, 9.0), (10.0, 9.0)]
TRIALS = [(10.0, 9.0), (12.0, 9.0), (11.0, 9.0), (30.0, 9.0), (10.0, 9.0)]


@pytest.mark.parametrize("stream", [True, False])
def test_the_timing_reports_the_median_time_past_forwards_end_on_its_stream(stream):
  timer = _ScriptedTimer(WARMUP + TRIALS, stream=stream)
  seeds = list(range(100, 120))
  result = timing.time_forward(timer, lambda x: x, lambda seed: [seed], seeds, warmup=2,
                               target_s=0.05, min_trials=3)
  assert timer.calls == seeds[:7]  # one fresh input set per call, in order
  assert all(isinstance(result.pop(k), float) for k in ("inputs_ms", "beyond_ms"))  # (wall times)
  assert result == {"median_ms": 11.0, "times_ms": [10.0, 12.0, 11.0, 30.0, 10.0], "trials": 5,
                    "planned": 5, "stopped": "planned", "warmup_ms": [10.0, 10.0],
                    "after_forward_ms": 2.0 if stream else None, "input_sets": 7}


def test_audited_trials_are_neither_timed_nor_counted_past_the_stream():
  timer = _ScriptedTimer(WARMUP + [TRIALS[0], TRIALS[2], TRIALS[3], TRIALS[4]])
  audited = []
  result = timing.time_forward(timer, lambda x: x, lambda seed: [seed], list(range(20)),
                               warmup=2, target_s=0.05, min_trials=3,
                               on_audit=lambda seed, inputs: audited.append(seed),
                               audit_positions=[1])
  assert audited == [3]  # the second trial's input set, after the 2 warm-up calls
  assert result["times_ms"] == [10.0, 11.0, 30.0, 10.0] and result["trials"] == 4
  assert result["after_forward_ms"] == 1.5  # median of 1, 2, 21, 1


def _coverage_by_enumeration(n: int, k: int) -> float:
  """P(x_(k) <= median < x_(n+1-k)) for n draws of a continuous distribution, by enumerating
  which of them fall below its median (each with probability 1/2): the interval covers it when
  at least k and at most n-k fall below."""
  hits = sum(1 for pattern in range(2 ** n) if k <= bin(pattern).count("1") <= n - k)
  return hits / 2 ** n


@pytest.mark.parametrize("n", [4, 5, 6, 8, 10, 15, 18])
def test_the_median_interval_is_the_widest_k_that_still_has_the_confidence(n):
  times = [float(10 * i) for i in range(n, 0, -1)]  # (given unsorted)
  got = timing.median_interval(times, 0.9)
  ks = [k for k in range(1, n // 2 + 1) if _coverage_by_enumeration(n, k) >= 0.9]
  if not ks:
    assert got is None and n == 4  # 1 - 2/16 = 0.875
    return
  k = max(ks)
  assert got == (10.0 * k, 10.0 * (n + 1 - k))
  assert _coverage_by_enumeration(n, k + 1) < 0.9 or k == n // 2


def test_precise_enough_asks_both_ends_of_the_interval_to_lie_within_the_band():
  steady = [10.0, 10.05, 9.95, 10.08, 9.92]  # interval (min, max) = (9.92, 10.08), median 10
  assert timing.precise_enough(steady, 0.01)
  assert not timing.precise_enough(steady, 0.005)
  assert not timing.precise_enough(steady[:4], 0.5)  # 4 trials: no 90% interval
  assert not timing.precise_enough([10.0, 10.0, 10.0, 10.0, 10.2], 0.01)  # 2% above
  # With 10 trials one outlier on each side is left out (k = 2).
  assert timing.precise_enough([10.0] * 8 + [30.0, 1.0], 0.01)
  assert not timing.precise_enough([10.0] * 7 + [30.0, 30.0, 1.0], 0.01)


def _steady_then(n_steady: int, pairs_after: list) -> list:
  return [(10.0, 9.9)] * n_steady + pairs_after


def test_a_steady_timing_stops_at_min_trials_once_precise():
  timer = _ScriptedTimer(WARMUP + _steady_then(40, []))
  result = timing.time_forward(timer, lambda x: x, lambda seed: [seed], list(range(60)),
                               warmup=2, target_s=0.4, min_trials=6, precision=0.01)
  assert result["planned"] == 40 and result["stopped"] == "precision"
  assert result["trials"] == 6 and len(timer.calls) == 8


def test_a_noisy_timing_goes_on_until_precise_or_planned():
  # Alternating 10 and 11 ms: the median's interval spans 10-11 until the end (planned);
  # with a 6% band, 5 trials (median 10, 10% to the top) are not enough, 6 (median 10.5, 4.8%
  # either way) are.
  noisy = [(10.0 + (i % 2), 9.9) for i in range(40)]
  result = timing.time_forward(_ScriptedTimer(WARMUP + noisy), lambda x: x, lambda s: [s],
                               list(range(60)), warmup=2, target_s=0.4, min_trials=3,
                               precision=0.01)
  assert result["stopped"] == "planned" and result["trials"] == 40
  result = timing.time_forward(_ScriptedTimer(WARMUP + noisy), lambda x: x, lambda s: [s],
                               list(range(60)), warmup=2, target_s=0.4, min_trials=3,
                               precision=0.06)
  assert result["stopped"] == "precision" and result["trials"] == 6


def test_without_precision_every_planned_trial_runs():
  result = timing.time_forward(_ScriptedTimer(WARMUP + _steady_then(40, [])), lambda x: x,
                               lambda s: [s], list(range(60)), warmup=2, target_s=0.4,
                               min_trials=6)
  assert result["stopped"] == "planned" and result["trials"] == 40


def test_a_precise_timing_still_makes_every_audited_call():
  # min_trials counts audited positions. The audit at position 6 comes after 6 steady trials
  # that were precise enough at min_trials (5): the timing waits for it, and stops after the
  # timed trial that follows.
  audited = []
  result = timing.time_forward(_ScriptedTimer(WARMUP + _steady_then(40, [])), lambda x: x,
                               lambda s: [s], list(range(60)), warmup=2, target_s=0.4,
                               min_trials=5, on_audit=lambda seed, inputs: audited.append(seed),
                               audit_positions=[6], precision=0.01)
  assert audited == [2 + 6]
  assert result["stopped"] == "precision" and result["trials"] == 7


class _Output:
  """A forward's output, tracked by weak reference."""


def test_no_earlier_output_is_alive_while_a_forward_runs():
  """Each warm-up's and trial's output is gone before the next call, as a 6 GiB problem needs
  (with the last warm-up's output kept through the trials, an 80 GiB GPU ran out of memory)."""
  alive, seen = weakref.WeakSet(), []

  def forward(x):
    seen.append(len(alive))
    out = _Output()
    alive.add(out)
    return out

  class Timer:  # returns forward's output, as timing.Timer does
    def time_call(self, fn):
      return 10.0, fn()

  result = timing.time_forward(Timer(), forward, lambda seed: [seed], list(range(20)), warmup=3,
                               target_s=0.05, min_trials=3)
  assert result["trials"] == 5 and seen == [0] * 8


class _Made:
  """make_inputs for the reuse tests: records each seed it made a set for."""

  def __init__(self, build):
    self.build, self.seeds = build, []

  def __call__(self, seed):
    self.seeds.append(seed)
    return self.build(seed)


def _time_with_reuse(make, forward, trials=5):
  timer = _ScriptedTimer([(10.0, 9.0)] * (2 + trials))
  return timing.time_forward(timer, forward, make, list(range(100, 120)), warmup=2,
                             target_s=trials * 0.01, min_trials=3, reuse_inputs=True)


def test_the_reference_is_timed_on_one_input_set_while_its_forward_leaves_it_as_made():
  make = _Made(lambda seed: [torch.full((4,), float(seed)), [torch.ones(2), 3], None])
  seen = []
  result = _time_with_reuse(make, lambda x, nested, none: seen.append(x) or x * 2)
  assert make.seeds == [100] and result["input_sets"] == 1 and result["trials"] == 5
  assert all(x is seen[0] for x in seen) and len(seen) == 7


@pytest.mark.parametrize("where", ["top", "nested"])
def test_an_input_set_the_forward_changed_in_place_is_made_again(where):
  make = _Made(lambda seed: [torch.full((4,), float(seed)), (torch.ones(2),)])

  def forward(x, nested):
    (x if where == "top" else nested[0]).add_(1.0)  # the reference changes its inputs
    return x
  result = _time_with_reuse(make, forward)
  assert make.seeds == list(range(100, 107)) and result["input_sets"] == 7


def test_inputs_whose_changes_cannot_be_seen_are_made_fresh_for_every_trial():
  # A dict (or any object) could change without a version counter moving; so could an
  # inference tensor, which keeps none.
  make = _Made(lambda seed: [{"x": torch.ones(2)}])
  assert _time_with_reuse(make, lambda d: d)["input_sets"] == 7
  with torch.inference_mode():
    frozen = torch.ones(2)
  make = _Made(lambda seed: [frozen])
  assert _time_with_reuse(make, lambda x: x)["input_sets"] == 7


def test_without_reuse_every_trial_has_a_fresh_set_even_when_nothing_changed():
  make = _Made(lambda seed: [torch.full((4,), float(seed))])
  timer = _ScriptedTimer([(10.0, 9.0)] * 7)
  result = timing.time_forward(timer, lambda x: x, make, list(range(100, 120)), warmup=2,
                               target_s=0.05, min_trials=3)
  assert make.seeds == list(range(100, 107)) and result["input_sets"] == 7


@pytest.mark.parametrize("reuse", [False, True])
def test_a_trials_wall_time_beyond_its_measurement_holds_its_input_set(reuse):
  """A 30 ms input set, a timer that says 1 ms at once: each fresh trial's 30 ms are reported in
  inputs_ms and beyond_ms (less the 1 ms it says it measured); reused, the set is made once,
  before the timed trials (the bound, half the sleep, leaves a busy machine's stalls room)."""
  def slow(seed):
    time.sleep(0.03)
    return [torch.full((2,), float(seed))]
  timer = _ScriptedTimer([(1.0, 1.0)] * 7)
  result = timing.time_forward(timer, lambda x: x, slow, list(range(100, 120)), warmup=2,
                               target_s=0.005, min_trials=5, reuse_inputs=reuse)
  assert result["trials"] == 5
  if reuse:
    assert result["input_sets"] == 1 and result["inputs_ms"] < 15.0 and result["beyond_ms"] < 15.0
  else:
    assert result["input_sets"] == 7
    assert result["inputs_ms"] >= 30.0 and result["beyond_ms"] >= result["inputs_ms"] - 1.0


def test_the_stopping_rules_benchmark_replays_the_timings_rule_on_recorded_trials():
  from benchmarks import stopping_rules  # pylint: disable=import-outside-toplevel
  steady = [10.0] * 30
  shifted = [11.0] * 6 + [10.0] * 24  # a slow start: 5 trials would stop inside it
  assert stopping_rules.stop_at(steady, 0.01, 10) == 10
  assert stopping_rules.stop_at(shifted, 0.01, 5) == 5
  # The 6 slow trials must all lie above the 90% interval (k >= 7 of the greatest): n = 21.
  assert stopping_rules.stop_at(shifted, 0.01, 10) == 21
  assert _coverage_by_enumeration(21, 7) >= 0.9 > _coverage_by_enumeration(20, 7)
  assert stopping_rules.stop_at([10.0, 11.0] * 15, 0.01, 10) == 30  # never precise: all
  rows = [{"evidence": {"timing_times_ms": {"candidate": steady, "reference": shifted}}},
          {"evidence": {"timing_times_ms": {"candidate": shifted, "reference": steady},
                        "reference_reused": ["timing"]}},
          {"evidence": {"timing_times_ms": {"candidate": [1.0] * 9}}}, {"evidence": {}}]
  series = stopping_rules.recorded_series(rows)
  assert series == [steady, shifted, shifted]
  assert stopping_rules.weigh(series, 0.01, 5) == {
      "precision": 0.01, "min_trials": 5, "trials": 15, "share": 0.167, "median_off_pct": 10.0,
      "p90_off_pct": 10.0, "max_off_pct": 10.0, "over_2pct": 2}
  assert stopping_rules.weigh(series, 0.01, 10) == {
      "precision": 0.01, "min_trials": 10, "trials": 52, "share": 0.578, "median_off_pct": 0.0,
      "p90_off_pct": 0.0, "max_off_pct": 0.0, "over_2pct": 0}


def test_the_band_in_times_comes_from_the_reference_and_the_slow_start():
  assert timing.band_ms(6.0, (1.0, 3.0), 0.2) == pytest.approx((2.0, 7.2))
  assert timing.band_ms(6.0, (1.0, float("inf")), 0.0) == (0.0, 6.0)
  for ref in (None, 0.0, float("nan"), -1.0):
    assert timing.band_ms(ref, (1.0, 3.0), 0.2) is None
  assert timing.band_ms(6.0, None, 0.2) is None


def test_a_median_is_known_outside_a_band_only_when_its_whole_interval_is():
  band = (5.0, 10.0)
  assert timing.known_outside([11.0, 12.0, 11.5, 13.0, 11.2], band)  # all slower
  assert timing.known_outside([4.0, 4.5, 4.2, 4.1, 4.9], band)  # all faster
  assert not timing.known_outside([11.0, 12.0, 11.5, 13.0], band)  # 4: no interval at 90%
  assert not timing.known_outside([11.0, 12.0, 9.0, 13.0, 11.2], band)  # the least inside
  # With 10 trials one outlier on each side is left out (k = 2).
  assert timing.known_outside([11.0] * 9 + [9.0], band)
  assert not timing.known_outside([11.0] * 8 + [9.0, 9.0], band)


def _banded(times, band, audits=(), min_trials=10, outside_min_trials=5, precision=0.01,
            far_ms=None, far_min_trials=3):
  audited = []
  timer = _ScriptedTimer(WARMUP + [(t, t) for t in times])
  result = timing.time_forward(timer, lambda x: x,
                               lambda s: [s], list(range(len(times) + len(audits) + 2)),
                               warmup=2, target_s=100.0, min_trials=min_trials,
                               on_audit=lambda seed, inputs: audited.append(seed),
                               audit_positions=list(audits), precision=precision,
                               outside_ms=band, outside_min_trials=outside_min_trials,
                               far_ms=far_ms, far_min_trials=far_min_trials)
  return result, audited


def test_a_timing_known_outside_its_band_stops_at_the_least_trials_after_the_last_audit():
  slow = [20.0 + 0.5 * (i % 3) for i in range(30)]  # too noisy for 1%, far over 10 ms
  result, _ = _banded(slow, (5.0, 10.0))
  assert result["stopped"] == "outside" and result["trials"] == 5
  result, _ = _banded(slow, (5.0, 10.0), outside_min_trials=7)
  assert result["trials"] == 7
  result, audited = _banded(slow, (5.0, 10.0), audits=(2, 8))
  assert len(audited) == 2 and result["stopped"] == "outside" and result["trials"] == 8
  fast = [2.0 + 0.1 * (i % 3) for i in range(30)]
  assert _banded(fast, (5.0, 10.0))[0]["stopped"] == "outside"
  assert _banded(fast, (5.0, 10.0))[0]["trials"] == 5


def test_a_timing_inside_its_band_or_without_one_is_stopped_by_precision_alone():
  noisy = [7.0 + 0.5 * (i % 3) for i in range(30)]
  for band in ((5.0, 10.0), None):
    result, _ = _banded(noisy, band)
    assert result["stopped"] == "planned" and result["trials"] == 30
  # Across an edge (the interval holds it): not known outside.
  across = [9.0, 11.0] * 15
  assert _banded(across, (5.0, 10.0))[0]["trials"] == 30
  # Slower than the band but steady: precision stops it at min_trials, if the band does not
  # first.
  assert _banded([20.0] * 30, (5.0, 10.0), outside_min_trials=12)[0]["stopped"] == "precision"


def test_the_stopping_rules_benchmark_replays_a_band_through_the_timing_itself():
  from benchmarks import stopping_rules  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.config import SandboxConfig  # pylint: disable=import-outside-toplevel
  cfg = SandboxConfig()
  slow = [22.0, 21.0] + [20.0 + 0.5 * (i % 3) for i in range(28)]  # 4 ms reference: 0.2x
  assert stopping_rules.replay(slow, [0, 1], cfg, None) == slow  # too noisy for 1%
  kept = stopping_rules.replay(slow, [0, 1], cfg, timing.band_ms(4.0, (1.0, 3.0), 0.2))
  assert kept == slow[:5]
  # audited at positions 3 and 9: the first timed trial after the last is the 9th
  assert stopping_rules.replay(slow, [3, 9], cfg, (1.0, 4.8)) == slow[:9]
  rows = [{"status": "correct", "reference_ms": 4.0,
           "evidence": {"timing_times_ms": {"candidate": slow}}},
          {"status": "correct", "reference_ms": 4.0,  # 1.05x: inside, near the low end
           "evidence": {"timing_times_ms": {"candidate": [3.8] * 12 + [3.9] * 12 + [3.7]}}},
          {"status": "incorrect", "reference_ms": 4.0,
           "evidence": {"timing_times_ms": {"candidate": slow}}}]
  alone = stopping_rules.weigh_band(rows, None, 0.0, draws=5)
  banded = stopping_rules.weigh_band(rows, (1.0, 3.0), 0.2, draws=5)
  assert alone["timings"] == banded["timings"] == 2 and alone["crossed_an_end"] == 0
  assert banded["trials_share"] < alone["trials_share"] and banded["ms_share"] < alone["ms_share"]
  assert banded["crossed_an_end"] == 0 and banded["max_off_pct"] == pytest.approx(
      100 * (21.0 / statistics.median(slow) - 1), abs=0.2)


def test_the_worker_hands_the_judges_band_to_the_timing():
  import types  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import worker, worker_run  # pylint: disable=import-outside-toplevel
  got = []
  w = types.SimpleNamespace(time=lambda *a: got.append(a) or {"ok": True}, guard=None)
  msg = {"cmd": "time", "seeds": [1, 2], "audit_positions": [0], "warmup": 1, "target_s": 1.0,
         "min_trials": 3, "precision": 0.01, "outside_ms": [0.5, 2.5], "outside_min_trials": 6,
         "far_ms": 7.5, "far_min_trials": 4}
  assert worker._Worker._answer(w, msg) == {"ok": True}  # pylint: disable=protected-access
  assert got == [([1, 2], [0], 1, 1.0, 3, 0.01, [0.5, 2.5], 6, 7.5, 4)]
  # a judge that sends no far rule (as before it) gets none
  del msg["far_ms"], msg["far_min_trials"]
  worker._Worker._answer(w, msg)  # pylint: disable=protected-access
  assert got[-1][-2:] == (None, 3)
  # and on to timing.time_forward
  kwargs = []
  w = types.SimpleNamespace(
      timing=types.SimpleNamespace(time_forward=lambda *a, **k: kwargs.append(k) or {}),
      timer=None, model=None, _inputs=None, device=torch.device("cpu"),
      _tamper_violations=lambda: [])
  reply = worker_run.RunSteps.time(w, [1, 2], [0], 1, 1.0, 3, 0.01, [0.5, 2.5], 6, 7.5, 4)
  assert reply["ok"] and kwargs[0]["outside_ms"] == [0.5, 2.5]
  assert kwargs[0]["outside_min_trials"] == 6 and kwargs[0]["precision"] == 0.01
  assert kwargs[0]["far_ms"] == 7.5 and kwargs[0]["far_min_trials"] == 4


def test_the_stopping_rules_benchmark_bounds_the_slow_starts_a_band_must_allow_for():
  from benchmarks import stopping_rules  # pylint: disable=import-outside-toplevel
  steady = [10.0] * 20
  slow_six = [13.0] * 6 + [10.0] * 20  # the first 5 and 6 trials all slow: low end 1.3x
  slow_two = [13.0] * 2 + [10.0] * 20  # 3 steady of 5: low end at the median
  got = stopping_rules.early_low_ends([steady, slow_six, slow_two, [10.0] * 4])  # (4: none)
  assert got == {"timings": 3, "median": 1.0, "p90": 1.0, "max": 1.3, "over_1.1": 1,
                 "over_1.2": 1}


SLOW = [40.0 + 0.5 * (i % 3) for i in range(30)]  # far over a 10 ms slow end, too noisy for 1%


def test_a_timing_far_over_its_band_stops_at_its_first_trials_and_makes_its_audits_at_once():
  result, audited = _banded(SLOW, (5.0, 10.0), audits=(4, 8), far_ms=30.0)
  assert result["stopped"] == "far" and result["times_ms"] == SLOW[:3]
  # the audits at positions 4 and 8 come right after the third trial, on their own input sets
  # (seed = 2 warm-ups + position), and no trial is timed between them
  assert audited == [6, 10] and result["input_sets"] == 2 + 3 + 2
  result, audited = _banded(SLOW, (5.0, 10.0), audits=(0, 2), far_ms=30.0, far_min_trials=2)
  assert audited == [2, 4] and result["times_ms"] == SLOW[:2]  # audits at 0 and 2 as drawn
  assert result["stopped"] == "far"


def test_one_trial_under_the_far_time_leaves_the_band_s_own_stop():
  dip = SLOW[:1] + [25.0] + SLOW[2:]  # the second trial under 30 ms
  result, audited = _banded(dip, (5.0, 10.0), audits=(4, 8), far_ms=30.0)
  assert result["stopped"] == "outside" and result["trials"] == 8 and audited == [6, 10]
  # later trials over it do not make up for the first ones: only the first far_min_trials count
  later = [25.0] + SLOW
  assert _banded(later, (5.0, 10.0), far_ms=30.0)[0]["stopped"] == "outside"
  # without far_ms, or with a slow end over the trials, as before
  assert _banded(SLOW, (5.0, 10.0))[0]["trials"] == 5
  assert _banded(SLOW, (5.0, 10.0), far_ms=50.0)[0]["stopped"] == "outside"


def test_a_far_timing_planned_no_further_stops_as_planned():
  result, _ = _banded(SLOW[:3], (5.0, 10.0), min_trials=3, far_ms=30.0)
  assert result["stopped"] == "planned" and result["trials"] == 3


def test_the_stopping_rules_benchmark_weighs_the_far_rule():
  from benchmarks import stopping_rules  # pylint: disable=import-outside-toplevel
  # a 4 ms reference and the band (1, 3) with a 0.25 slow start: its slow end is 5 ms, and 3x
  # that 15 ms
  far = [16.0, 17.0, 16.0] + [16.5] * 9  # stopped; whole median 16.5: 3.3x the slow end
  dip = [16.0, 14.0, 16.0] + [16.5] * 9  # the second under 15 ms: not stopped
  late = [16.0, 16.0, 16.0, 4.0, 4.0, 4.0, 4.0]  # stopped; whole median 4: under the slow end
  rows = [{"status": "correct", "reference_ms": 4.0, "problem": "level1/p", "name": name,
           "evidence": {"timing_times_ms": {"candidate": times}}}
          for name, times in (("far", far), ("dip", dip), ("late", late))]
  rows.append({"status": "correct", "reference_ms": 4.0,  # 3 trials: not weighed at 3
               "evidence": {"timing_times_ms": {"candidate": far[:3]}}})
  rows.append({"status": "incorrect", "reference_ms": 4.0,
               "evidence": {"timing_times_ms": {"candidate": far}}})
  got = stopping_rules.far_starts(rows, (1.0, 3.0), 0.25, 3.0, 3)
  assert got == {"band": [1.0, 3.0], "factor": 3.0, "trials": 3, "timings": 3, "stopped": 2,
                 "their_trials": 19, "their_s": 0.3, "kept_s": 0.1,
                 "least_whole_over_slow_end": 0.8,
                 "under_factor_by_1.5": 1, "under_slow_end": 1,
                 "closest": {"name": "level1/p late", "first_over_reference": [4.0] * 3 + [1.0] * 2},
                 "slowest_start": {"name": "level1/p late", "over_whole": 4.0}}
  # through timing.time_forward: the far rule keeps 3 of the 12 trials where the band kept 5
  banded = stopping_rules.weigh_band(rows[:1], (1.0, 3.0), 0.25, draws=4)
  farther = stopping_rules.weigh_band(rows[:1], (1.0, 3.0), 0.25, draws=4, far_factor=3.0)
  assert farther["far_factor"] == 3.0 and farther["trials_share"] == pytest.approx(3 / 12)
  assert banded["trials_share"] > farther["trials_share"]


def test_the_stopping_rules_script_prints_the_far_rule_and_refuses_it_without_a_band(tmp_path):
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  log = tmp_path / "v.verdicts.jsonl"
  log.write_text(json.dumps({"status": "correct", "reference_ms": 4.0, "problem": "level1/p",
                             "name": "c", "evidence": {"timing_times_ms": {
                                 "candidate": [21.0, 22.0, 21.0] + [21.5] * 9}}}) + "\n")
  run = lambda *extra: subprocess.run(
      [sys.executable, "-m", "benchmarks.stopping_rules", f"--verdicts={log}", *extra],
      cwd=repo, capture_output=True, text=True, timeout=120)
  got = run("--bands=1:3", "--far_factors=4")
  assert got.returncode == 0, got.stderr
  far = [line for line in got.stdout.splitlines() if "the far rule alone" in line]
  assert len(far) == 1 and "'stopped': 1" in far[0]  # 21 ms > 4 x 5 ms
  refused = run("--far_factors=4")
  assert refused.returncode != 0 and "give --bands too" in refused.stderr
