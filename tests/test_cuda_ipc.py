"""benchmarks/cuda_ipc.py's summaries (the rounds themselves need a GPU)."""

from __future__ import annotations

import pytest

from benchmarks import cuda_ipc


def test_each_step_is_the_median_of_the_rounds_after_the_warm_ups():
  rounds = [{"open_ms": 90.0, "round_ms": 100.0}, {"open_ms": 50.0, "round_ms": 60.0},
            {"open_ms": 3.0, "round_ms": 9.0}, {"open_ms": 1.0, "round_ms": 5.0},
            {"open_ms": 2.0, "round_ms": 7.0004}]
  assert cuda_ipc.summarize(rounds) == {"open_ms": 2.0, "round_ms": 7.0}
  assert cuda_ipc.summarize(rounds, warmup=0) == {"open_ms": 3.0, "round_ms": 9.0}
  with pytest.raises(ValueError, match="no rounds after the first 2"):
    cuda_ipc.summarize(rounds[:2])


def test_the_ratio_is_ipc_over_buffer_for_each_size_measured_both_ways():
  rows = [{"mib": 32, "way": "ipc", "round_ms": 3.0}, {"mib": 32, "way": "buffer", "round_ms": 2.0},
          {"mib": 6144, "way": "buffer", "round_ms": 8.0},
          {"mib": 6144, "way": "ipc", "round_ms": 20.0}, {"mib": 64, "way": "ipc", "round_ms": 1.0}]
  assert cuda_ipc.ratios(rows) == {32: 1.5, 6144: 2.5}
