"""Which candidates a kept worker serves (pass_rates.py): the estimate, and the pool's choice."""

from __future__ import annotations

import threading
from fractions import Fraction

import pytest

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import evaluate as evaluate_lib
from kernelzero_jax.sandbox import pass_rates
from kernelzero_jax.sandbox import verdict as V


def test_estimates_draw_each_reference_towards_the_pools_rate():
  assert pass_rates.PRIOR_WEIGHT == 2.0  # (the values below are for it)
  rates = pass_rates.PassRates()
  assert rates.estimate("a") == 0.5  # Laplace's over nothing
  for _ in range(3):
    rates.record("a", False)
  # pool (0 + 1) / (3 + 2) = 1/5; "a" (0 + 2/5) / (3 + 2); "b", unseen, the pool's
  assert rates.estimate("a") == pytest.approx(0.08)
  assert rates.estimate("b") == pytest.approx(0.2)
  rates.record("b", True)
  # pool 2/6; "b" (1 + 2/3) / 3; "a" (2/3) / 5
  assert rates.estimate("b") == pytest.approx(5 / 9)
  assert rates.estimate("a") == pytest.approx(2 / 15)
  assert rates.counts("a") == (0, 3) and rates.counts("b") == (1, 1)
  assert rates.counts("c") == (0, 0)


def test_records_from_many_threads_all_count():
  rates = pass_rates.PassRates()

  def record(i: int) -> None:
    for _ in range(3):
      rates.record(("ref", i % 2), i % 2 == 0)

  threads = [threading.Thread(target=record, args=(i,)) for i in range(8)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert rates.counts(("ref", 0)) == (12, 12) and rates.counts(("ref", 1)) == (0, 12)
  assert rates.estimate(("ref", 0)) == pytest.approx((12 + 2 * 13 / 26) / 14)


def test_estimates_read_recent_verdicts_only():
  assert (pass_rates.WINDOW, pass_rates.POOL_WINDOW) == (32, 256)  # (the values below are for it)
  rates = pass_rates.PassRates()
  for correct in [False] * 40 + [True] * 32:  # a problem the policy learned to solve
    rates.record("a", correct)
  assert rates.counts("a") == (32, 32)
  assert rates.estimate("a") == pytest.approx((32 + 2 * Fraction(33, 74)) / 34)
  for _ in range(300):
    rates.record("b", False)
  # the pool's last 256 verdicts are all b's failures
  assert rates.estimate("a") == pytest.approx((32 + 2 * Fraction(1, 258)) / 34)
  assert rates.counts("b") == (0, 32)


class _Judge:
  """run_judge's stand-in: the jobs it got, a verdict by the candidate's name."""

  def __init__(self):
    self.jobs: list[dict] = []

  def __call__(self, job, config, launcher):
    del config, launcher
    self.jobs.append(job)
    status = V.CORRECT if job["candidate_source"].startswith("good") else V.RUNTIME_ERROR
    return V.Verdict(status=status, backend="cuda", device="cuda").to_dict(), "", False


# Candidates of a reference that always fails and of one that always passes, in turn.
ORDER = ["bad0", "good0", "bad1", "good1", "bad2", "bad3", "good2"]


def _judge_in_order(monkeypatch, config: SandboxConfig) -> tuple[_Judge, list[V.Verdict]]:
  judge = _Judge()
  monkeypatch.setattr(evaluate_lib, "run_judge", judge)
  pool = evaluate_lib.SandboxPool(config, max_parallel=1, launcher="subprocess")
  jobs = [evaluate_lib.Job(f"ref_{name[:-1]}", name, "cuda") for name in ORDER]
  return judge, pool.evaluate(jobs)  # one at a time, in order: each sees the verdicts before


def test_the_pool_sends_candidates_of_a_failing_reference_to_new_workers(monkeypatch):
  judge, verdicts = _judge_in_order(monkeypatch, SandboxConfig(device="cuda"))
  # By hand, each job's estimate from the verdicts before it (pool rate; the reference's own):
  # bad0 1/2 (nothing yet); good0 pool 1/3; bad1 (0 + 2/2) / 3; good1 (1 + 2 * 2/5) / 3;
  # bad2 (0 + 2 * 3/6) / 4; bad3 (0 + 2 * 3/7) / 5; good2 (2 + 2 * 3/8) / 4
  expected = [1 / 2, 1 / 3, 1 / 3, 3 / 5, 1 / 4, 6 / 35, 11 / 16]
  assert [v.evidence["worker_choice"]["pass_rate"] for v in verdicts] == [
      round(x, 4) for x in expected]
  fresh = [x < 0.5 for x in expected]
  assert fresh == [False, True, True, False, True, True, False]
  assert [v.evidence["worker_choice"]["fresh_worker"] for v in verdicts] == fresh
  assert [bool(j.get("fresh_worker")) for j in judge.jobs] == fresh
  assert all(j.get("fresh_worker") in (None, True) for j in judge.jobs)  # absent, not False
  assert [v.correct for v in verdicts] == [n.startswith("good") for n in ORDER]


@pytest.mark.parametrize("config", [SandboxConfig(device="cuda", keep_worker_min_pass_rate=0),
                                    SandboxConfig(device="cuda", candidates_per_worker=1),
                                    SandboxConfig(device="cpu")])
def test_no_candidate_is_sent_away_where_the_choice_is_off_or_moot(monkeypatch, config):
  judge, verdicts = _judge_in_order(monkeypatch, config)
  assert not any(j.get("fresh_worker") for j in judge.jobs)
  moot = config.worker_candidates() == 1  # no worker is kept: nothing to choose
  assert all(("worker_choice" in v.evidence) != moot for v in verdicts)


def test_the_threshold_is_checked():
  for bad in (-0.1, 1.5):
    with pytest.raises(ValueError, match="keep_worker_min_pass_rate"):
      SandboxConfig(keep_worker_min_pass_rate=bad)
  assert SandboxConfig(keep_worker_min_pass_rate=1.0).keep_worker_min_pass_rate == 1.0
