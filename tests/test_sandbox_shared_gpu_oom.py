"""A candidate that runs out of GPU memory while judges share the GPU is judged again alone.

With gpu_concurrency > 1, the correctness checks of several judges share a GPU; on full-size
problems their tensors together can fill it (measured on an H200: honest Triton matmuls failed
with "CUDA out of memory" at gpu_concurrency=4). Such a failure says nothing about the candidate,
so evaluate_candidate judges it again with the GPU to itself and keeps that verdict. The judge
process is replaced by a recorder here (no GPU on this machine); the real judges' use of
"exclusive_gpu" runs in the GPU benchmark (benchmarks/sandbox_throughput.py).
"""

from __future__ import annotations

import pytest

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import evaluate as evaluate_lib
from kernelzero_jax.sandbox import verdict as V

SHARED = SandboxConfig(device="cuda", gpu_concurrency=4)
OOM_REASONS = {
    "torch": "judge failed: OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.",
    "driver": "judge failed: AcceleratorError: CUDA error: out of memory",
    "worker": "correctness: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
    "cublas": "correctness: RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED",
}


def _verdict(status: str, reason: str = "") -> V.Verdict:
  return V.Verdict(status=status, backend="triton", device="cuda",
                   reasons=[reason] if reason else [])


@pytest.mark.parametrize("kind", sorted(OOM_REASONS))
def test_an_oom_on_a_shared_gpu_is_not_final(kind):
  assert evaluate_lib.shared_gpu_oom(_verdict(V.RUNTIME_ERROR, OOM_REASONS[kind]), SHARED)


@pytest.mark.parametrize("config, verdict", [
    # one slot: the judge already had the GPU to itself, so the failure is the candidate's
    (SandboxConfig(device="cuda", gpu_concurrency=1),
     _verdict(V.RUNTIME_ERROR, OOM_REASONS["torch"])),
    (SandboxConfig(device="cpu", gpu_concurrency=4), _verdict(V.RUNTIME_ERROR, "out of memory")),
    (SHARED, _verdict(V.RUNTIME_ERROR, "correctness: IndexError: index 9 is out of bounds")),
    (SHARED, _verdict(V.INCORRECT, "max abs error 3.1 at [0, 2]")),
    (SHARED, _verdict(V.TIMEOUT, "the evaluation exceeded 600 s; out of memory")),
    (SHARED, _verdict(V.CORRECT)),
], ids=["one_slot", "cpu", "other_error", "incorrect", "timeout", "correct"])
def test_other_verdicts_are_final(config, verdict):
  assert not evaluate_lib.shared_gpu_oom(verdict, config)


class _Recorder:
  """Stands in for the judge process: returns the given verdicts in turn, records the jobs."""

  def __init__(self, *verdicts: V.Verdict):
    self.verdicts = list(verdicts)
    self.jobs: list[dict] = []

  def __call__(self, job, config, launcher):
    del config, launcher
    self.jobs.append(job)
    return self.verdicts.pop(0).to_dict(), "", False


def test_the_candidate_is_judged_again_alone_and_that_verdict_counts(monkeypatch):
  judge = _Recorder(_verdict(V.RUNTIME_ERROR, OOM_REASONS["torch"]), _verdict(V.CORRECT))
  monkeypatch.setattr(evaluate_lib, "_run_judge", judge)
  verdict = evaluate_lib.evaluate_candidate("ref", "cand", "triton", SHARED, facts_path="f.json")
  assert verdict.status == V.CORRECT
  assert verdict.evidence["shared_gpu_oom"] == [OOM_REASONS["torch"]]
  assert [job.get("exclusive_gpu") for job in judge.jobs] == [None, True]
  # The second judgement is the same job otherwise (same GPU, facts file, sources).
  assert {**judge.jobs[0], "exclusive_gpu": True} == judge.jobs[1]


def test_an_oom_with_the_gpu_alone_is_the_candidates_failure(monkeypatch):
  judge = _Recorder(_verdict(V.RUNTIME_ERROR, OOM_REASONS["worker"]),
                    _verdict(V.RUNTIME_ERROR, OOM_REASONS["driver"]))
  monkeypatch.setattr(evaluate_lib, "_run_judge", judge)
  verdict = evaluate_lib.evaluate_candidate("ref", "cand", "triton", SHARED)
  assert verdict.status == V.RUNTIME_ERROR and verdict.reasons == [OOM_REASONS["driver"]]
  assert len(judge.jobs) == 2  # judged again once, not until it passes


@pytest.mark.parametrize("first", [_verdict(V.INCORRECT, "max abs error 3.1"),
                                   _verdict(V.CORRECT)])
def test_other_verdicts_are_judged_once(monkeypatch, first):
  judge = _Recorder(first)
  monkeypatch.setattr(evaluate_lib, "_run_judge", judge)
  assert evaluate_lib.evaluate_candidate("ref", "cand", "triton", SHARED).status == first.status
  assert len(judge.jobs) == 1
