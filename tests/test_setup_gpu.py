"""A candidate's import and constructor run outside its judge's GPU holds, beside other judges'
timings; on a GPU their kernels are profiled and limited (SandboxConfig.setup_kernel_ms_limit,
worker._Worker._outside_the_hold, evidence.gpu_work_summary and setup_gpu_violation).

The profiler needs a GPU (benchmarks/sandbox_gpu.py judges the cheats busy_at_import and
busy_in_constructor there); here the trace is hand-made, and the worker's decision is checked on
it with exact values.
"""

from __future__ import annotations


import pytest
import torch

from kernelzero_jax.sandbox import evidence
from kernelzero_jax.sandbox import worker as worker_lib
from kernelzero_jax.sandbox.config import SandboxConfig

# What evidence.trace_gpu returns: the GPU's work in order of start, durations in µs.
TRACE = [
    {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "stream": 7, "ts": 0.0,
     "dur": 1500.0},
    {"cat": "kernel", "name": "occupy_kernel(float*, long long)", "stream": 7, "ts": 10.0,
     "dur": 60000.0},
    {"cat": "gpu_memset", "name": "Memset (Device)", "stream": 7, "ts": 70010.0, "dur": 3.0},
    {"cat": "kernel", "name": "relu_kernel", "stream": 7, "ts": 70020.0, "dur": 250.0},
]


def test_the_summary_counts_kernels_and_copies_apart_with_their_summed_times():
  assert evidence.gpu_work_summary(TRACE) == {
      "kernels": 2, "kernel_ms": 60.25, "copies": 2, "copy_ms": 1.503,
      "longest_kernel": "occupy_kernel(float*, long long)"}
  assert evidence.gpu_work_summary([]) == {"kernels": 0, "kernel_ms": 0.0, "copies": 0,
                                           "copy_ms": 0.0, "longest_kernel": None}


def test_only_kernel_time_over_the_limit_is_a_violation():
  summary = evidence.gpu_work_summary(TRACE)
  assert evidence.setup_gpu_violation(summary, "at import", 60.25) is None  # at the limit
  message = evidence.setup_gpu_violation(summary, "at import", 50.0)
  assert message.startswith("the candidate ran 60.2 ms of GPU kernels at import (2 kernel(s), "
                            "the longest occupy_kernel(float*, long long))")
  assert "at most 50 ms" in message
  # A second of copies and no kernel: copy engines run beside other contexts' kernels.
  copies = evidence.gpu_work_summary([dict(TRACE[0], dur=1e6)])
  assert evidence.setup_gpu_violation(copies, "in its constructor", 0.0) is None


def _worker(monkeypatch, device: str, limit, profiler_works: bool = True, trace=TRACE):
  """A worker's state as far as _outside_the_hold reads it, with the profiler's trace given."""
  traced = []

  def trace_gpu(run):
    traced.append(1)
    return run(), list(trace)
  monkeypatch.setattr(evidence, "trace_gpu", trace_gpu)
  w = object.__new__(worker_lib._Worker)  # pylint: disable=protected-access
  w.spec = {"setup_kernel_ms_limit": limit}
  w.device = torch.device(device)
  w.evidence = evidence
  w.profiler_works = profiler_works
  return w, traced


@pytest.mark.parametrize("limit, violations", [(100.0, []), (60.0, 1), (0.0, 1)])
def test_the_worker_profiles_setup_on_a_gpu_and_flags_kernels_past_the_limit(
    monkeypatch, limit, violations):
  w, traced = _worker(monkeypatch, "cuda", limit)
  result, setup = w._outside_the_hold("at import", lambda: "module")  # pylint: disable=protected-access
  assert result == "module" and traced == [1]
  assert {k: setup[k] for k in ("kernels", "kernel_ms", "copies", "copy_ms")} == {
      "kernels": 2, "kernel_ms": 60.25, "copies": 2, "copy_ms": 1.503}
  assert 0.0 <= setup["profiler_s"] < 1.0
  if violations:
    assert len(setup["violations"]) == 1 and "60.2 ms of GPU kernels at import" in (
        setup["violations"][0])
  else:
    assert setup["violations"] == []


@pytest.mark.parametrize("device, limit, profiler_works",
                         [("cpu", 50.0, True), ("cuda", None, True), ("cuda", 50.0, False)])
def test_setup_runs_unprofiled_off_a_gpu_when_unlimited_or_without_a_profiler(
    monkeypatch, device, limit, profiler_works):
  w, traced = _worker(monkeypatch, device, limit, profiler_works)
  calls = []
  result, setup = w._outside_the_hold(  # pylint: disable=protected-access
      "in its constructor", lambda: calls.append(1) or "model")
  assert (result, setup, calls, traced) == ("model", {}, [1], [])


def test_an_error_in_the_candidates_setup_reaches_the_caller(monkeypatch):
  w, _ = _worker(monkeypatch, "cuda", 50.0)

  def broken():
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
  with pytest.raises(RuntimeError, match="illegal memory access"):
    w._outside_the_hold("at import", broken)  # pylint: disable=protected-access


def test_the_limit_is_checked_and_travels_with_the_config():
  with pytest.raises(ValueError, match="setup_kernel_ms_limit"):
    SandboxConfig(setup_kernel_ms_limit=-1.0)
  assert SandboxConfig().setup_kernel_ms_limit == 50.0
  cfg = SandboxConfig(setup_kernel_ms_limit=None)
  assert SandboxConfig.from_dict(cfg.to_dict()).setup_kernel_ms_limit is None
