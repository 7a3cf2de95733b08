"""The order a pool starts its jobs in (job_order.py, SandboxConfig.job_order).

The orders against hand-worked examples and a brute-force re-derivation of `spread`; the pool
with real judges on the CPU (Triton interpreter), its launcher wrapped only to see the order.
"""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from test_sandbox_faults import CONFIG, _read
from kernelzero_jax.sandbox import Job, SandboxConfig, SandboxPool
from kernelzero_jax.sandbox import job_order


def test_spread_places_each_keys_items_evenly():
  # A at 1/6, 1/2, 5/6; B at 1/4, 3/4; C at 1/2 (after A's, which came first)
  assert job_order.spread(list("AAABBC")) == [0, 3, 1, 5, 4, 2]
  # a batch grouped by problem: 3 problems of 3 copies come round-robin
  assert job_order.spread(list("AAABBBCCC")) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
  assert job_order.spread([]) == [] and job_order.spread(["x"]) == [0]
  assert job_order.given(list("BAB")) == [0, 1, 2]


def _spread_by_hand(keys):
  """Each item's place as a float, sorted with Python's stable sort: an independent derivation
  (exact where no two places are within float rounding of each other, as in these keys)."""
  firsts = list(dict.fromkeys(keys))
  places = []
  for i, key in enumerate(keys):
    mine = [j for j, k in enumerate(keys) if k == key]
    places.append(((mine.index(i) + 0.5) / len(mine), firsts.index(key), i))
  return [i for *_, i in sorted(places)]


def test_spread_matches_a_re_derivation_and_keeps_each_keys_order():
  rng = random.Random(0)
  for _ in range(200):
    keys = [rng.choice("ABCDEFG") for _ in range(rng.randint(1, 40))]
    got = job_order.order("spread", keys)
    assert sorted(got) == list(range(len(keys)))
    assert got == _spread_by_hand(keys)
    for key in set(keys):
      mine = [i for i in got if keys[i] == key]
      assert mine == sorted(mine)


def test_unknown_orders_are_refused():
  with pytest.raises(ValueError, match="unknown job order 'random'"):
    job_order.order("random", ["a"])
  with pytest.raises(ValueError, match="job_order must be one of"):
    SandboxConfig(job_order="shuffled")
  assert SandboxConfig().job_order == "given"


def _jobs() -> list[Job]:
  honest = Job(_read("references/scaled_relu"), _read("honest/scaled_relu"), "triton", "a0")
  constant = Job(_read("references/near_zero"), _read("faults/constant_kernel"), "triton", "b0")
  other = Job(_read("references/near_zero"), honest.candidate_source, "triton", "b1")
  # (names tell the jobs apart; the candidate's source is the same for a0 and a1)
  return [honest, Job(honest.reference_source, honest.candidate_source, "triton", "a1"),
          constant, other]


@pytest.mark.parametrize("order", ["given", "spread"])
def test_the_pool_starts_jobs_in_the_configs_order_and_answers_in_the_callers(order):
  jobs = _jobs()
  started = []
  with SandboxPool(dataclasses.replace(CONFIG, job_order=order), max_parallel=1,
                   launcher="subprocess") as pool:
    run = pool.launcher.run

    def seen(job_path, *args, **kwargs):
      with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
      started.append((job["reference_source"], job["candidate_source"]))
      return run(job_path, *args, **kwargs)

    pool.launcher.run = seen
    verdicts = pool.evaluate(jobs, once_per_candidate=False)
  # references: a, a, b, b -> spread: a0, b0, a1, b1
  expected = [0, 2, 1, 3] if order == "spread" else [0, 1, 2, 3]
  assert started == [(jobs[i].reference_source, jobs[i].candidate_source) for i in expected]
  assert [v.correct for v in verdicts] == [True, True, True, False]
