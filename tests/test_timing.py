"""sandbox/timing.time_forward's bookkeeping, with a scripted timer in place of CUDA events."""

from __future__ import annotations

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
  """A 3 ms input set, a timer that says 1 ms at once: each fresh trial's 3 ms are reported in
  inputs_ms and beyond_ms (less the 1 ms it says it measured); reused, the set is made once,
  before the timed trials."""
  def slow(seed):
    time.sleep(0.003)
    return [torch.full((2,), float(seed))]
  timer = _ScriptedTimer([(1.0, 1.0)] * 7)
  result = timing.time_forward(timer, lambda x: x, slow, list(range(100, 120)), warmup=2,
                               target_s=0.005, min_trials=5, reuse_inputs=reuse)
  assert result["trials"] == 5
  if reuse:
    assert result["input_sets"] == 1 and result["inputs_ms"] < 1.0 and result["beyond_ms"] < 1.0
  else:
    assert result["input_sets"] == 7
    assert result["inputs_ms"] >= 3.0 and result["beyond_ms"] >= result["inputs_ms"] - 1.0
