"""benchmarks/gpu_clocks.py: nvidia-smi lines parsed, and each timed copy's clocks, exact."""

import os
import time

from benchmarks import gpu_clocks
from benchmarks.gpu_clocks import Sample, during, parse_line, timing_clocks


def test_a_query_line_is_parsed_and_a_broken_one_is_not():
  assert parse_line(5.0, "1980, 0x0000000000000000, 312.45") == Sample(5.0, 1980, 0, 312.45)
  assert parse_line(5.0, "1200, 0x0000000000000004, [N/A]") == Sample(5.0, 1200, 4, None)
  for bad in ("", "1980, 0x0", "fast, 0x0, 1.0", "1980, zero, 1.0"):
    assert parse_line(5.0, bad) is None


def _row(name, ms, hold):
  return {"name": name, "status": "correct", "candidate_ms": ms,
          "evidence": {"gpu_holds": [[hold[0] - 1, hold[0] - 0.5, "shared"], [*hold, "alone"]]}}


def test_a_slow_copy_is_told_with_the_clocks_of_its_timing_and_its_twins():
  samples = [Sample(10.1, 1980, 0, 300.0), Sample(10.3, 1980, 0, 300.0),
             Sample(20.1, 990, 0x4, 700.0), Sample(20.3, 1500, 0x20, 700.0),
             Sample(30.2, 1980, 0, 300.0)]
  rows = [_row("teacher/a/0", 10.0, (10.0, 10.5)), _row("teacher/a/1", 23.0, (20.0, 20.5)),
          _row("teacher/a/2", 10.2, (30.0, 30.5)),
          _row("teacher/b/0", 5.0, (40.0, 40.5)), _row("teacher/b/1", 5.1, (41.0, 41.5)),
          dict(_row("teacher/c/0", 9.0, (10.0, 10.5)), status="incorrect")]
  out = timing_clocks(rows, samples)
  assert out["samples"] == 5
  assert out["run"] == {"samples": 5, "min_sm_mhz": 990, "median_sm_mhz": 1980, "reasons": "0x24"}
  assert out["outliers"] == [{
      "candidate": "teacher/a",
      "slow": [{"name": "teacher/a/1", "candidate_ms": 23.0,
                "clocks": {"samples": 2, "min_sm_mhz": 990, "median_sm_mhz": 1245.0,
                           "reasons": "0x24"}}],
      "others": [{"name": "teacher/a/0", "candidate_ms": 10.0,
                  "clocks": {"samples": 2, "min_sm_mhz": 1980, "median_sm_mhz": 1980,
                             "reasons": "0x0"}},
                 {"name": "teacher/a/2", "candidate_ms": 10.2,
                  "clocks": {"samples": 1, "min_sm_mhz": 1980, "median_sm_mhz": 1980,
                             "reasons": "0x0"}}]}]


def test_no_samples_in_a_hold_is_none():
  assert during([Sample(1.0, 1980, 0, None)], 2.0, 3.0) is None


def test_without_nvidia_smi_nothing_is_sampled(monkeypatch):
  monkeypatch.setattr(gpu_clocks.shutil, "which", lambda name: None)
  with gpu_clocks.GpuClocks() as clocks:
    pass
  assert clocks.samples == [] and "nvidia-smi" in clocks.error


def test_a_sampler_stamps_each_query(monkeypatch, tmp_path):
  # a stand-in nvidia-smi on the PATH that prints one sample per call
  fake = tmp_path / "nvidia-smi"
  fake.write_text("#!/bin/sh\necho '1755, 0x0000000000000001, 250.00'\n")
  fake.chmod(0o755)
  monkeypatch.setenv("PATH", f"{tmp_path}:" + os.environ["PATH"])
  before = time.time()
  with gpu_clocks.GpuClocks(interval_s=0.01) as clocks:
    deadline = time.time() + 10
    while len(clocks.samples) < 3 and time.time() < deadline:
      time.sleep(0.01)
  assert clocks.error is None and len(clocks.samples) >= 3
  assert all(s[1:] == (1755, 1, 250.0) and s.at >= before for s in clocks.samples)
  assert [s.at for s in clocks.samples] == sorted(s.at for s in clocks.samples)
