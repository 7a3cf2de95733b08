"""sandbox/timing.time_forward's bookkeeping, with a scripted timer in place of CUDA events."""

from __future__ import annotations

import pytest

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
  assert result == {"median_ms": 11.0, "times_ms": [10.0, 12.0, 11.0, 30.0, 10.0], "trials": 5,
                    "after_forward_ms": 2.0 if stream else None}


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
