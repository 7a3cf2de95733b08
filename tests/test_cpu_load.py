"""benchmarks/cpu_load.py: the CPU shares between two readings, exact, and a real sampled span."""

import collections
import time

import pytest

from benchmarks.cpu_load import CpuLoad, cpu_busy

Times = collections.namedtuple("Times", "user nice system idle iowait irq")


def test_shares_between_two_readings_are_exact():
  before = Times(10.0, 5.0, 2.0, 100.0, 1.0, 0.0)
  after = Times(40.0, 15.0, 12.0, 130.0, 3.0, 2.0)  # 30 + 10 + 10 + 30 + 2 + 2 = 84 s
  shares = cpu_busy(before, after)
  assert shares["busy"] == pytest.approx(52 / 84)
  assert shares["nice"] == pytest.approx(10 / 84)
  assert shares["iowait"] == pytest.approx(2 / 84)


def test_no_time_between_the_readings_is_no_load():
  t = Times(1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
  assert cpu_busy(t, t) == {"busy": 0.0, "nice": 0.0, "iowait": 0.0}


def test_a_platform_without_iowait_counts_only_idle_as_idle():
  Bare = collections.namedtuple("Bare", "user system idle")
  assert cpu_busy(Bare(0.0, 0.0, 0.0), Bare(3.0, 1.0, 4.0))["busy"] == pytest.approx(0.5)


def test_a_sampled_span_sees_a_spinning_core():
  with CpuLoad(interval_s=0.05) as load:
    end = time.monotonic() + 0.4
    while time.monotonic() < end:  # one core busy for the whole span
      pass
  summary = load.summary(items=4)
  assert summary["seconds"] >= 0.4 and len(load.samples) >= 4
  # at least the spinning core's share of the machine (less a little for the sampling's edges)
  assert summary["busy_pct"] >= 100 / summary["cores"] * 0.8
  assert summary["busy_core_s_per_item"] == pytest.approx(
      summary["busy_pct"] / 100 * load.seconds * summary["cores"] / 4, abs=0.01)
  assert 0 <= summary["saturated_pct"] <= 100
