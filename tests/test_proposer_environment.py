"""The Proposer's environment: API-set prompts, and completions scored into frontier rewards.

Validation runs in real sandbox workers (CPU); the Coder is a scripted probe whose pass counts
the test chooses, so each reward is an exact value of the frontier schedule.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelzero_jax.proposer import catalog
from kernelzero_jax.proposer.api_sets import ApiSetSampler, Cooccurrence
from kernelzero_jax import coevolve
from kernelzero_jax.coder.environment import CoderEnvironment
from kernelzero_jax.proposer.environment import (DUPLICATE, REFERENCE_FAILED, VALID,
                                                 ProposalSettings, ProposerEnvironment)
from kernelzero_jax.proposer.frontier import FrontierConfig, ModulePool, normalized_source_hash
from kernelzero_jax.rl import rewards
from kernelzero_jax.rl.learner import Completion, Prompt
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.evaluate import SandboxPool
from kernelzero_jax.tokenizer import load_tokenizer

TEMPLATE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''
RELU_SUM = TEMPLATE.format(body="torch.sum(torch.relu(x), dim=1)")
RELU_SUM_SCALED = TEMPLATE.format(body="torch.sum(torch.relu(x) * 2.0, dim=1)")
RELU_SUM_COMMENTED = "# the same module as RELU_SUM, with a comment\n" + RELU_SUM
# relu of a non-positive tensor is all zeros: a constant output that any kernel would match.
RELU_SUM_CONSTANT = TEMPLATE.format(body="torch.sum(torch.relu(-torch.abs(x)), dim=1)")
SUM_ONLY = TEMPLATE.format(body="torch.sum(x, dim=1)")
RELU_SUM_LAST_DIM = TEMPLATE.format(body="torch.sum(torch.relu(x), dim=-1)")
SEED = TEMPLATE.format(body="torch.sum(torch.relu(x + 1.0), dim=1)")

APIS = ("relu", "sum")
FRONTIER = FrontierConfig(invalid_reward=-0.5, samples_per_module=8)


class ScriptedProbe:
  """The Coder's k attempts at a module: `correct[source]` of them pass; the last
  `reference_failed[source]` were judgings whose reference failed (never correct)."""

  def __init__(self, correct: dict[str, int], reference_failed: dict[str, int] | None = None):
    self.correct = correct
    self.reference_failed = reference_failed or {}
    self.calls: list[list[str]] = []

  def attempt(self, step, sources, k):
    del step
    self.calls.append(list(sources))
    return [[_try(i < self.correct[s], i >= k - self.reference_failed.get(s, 0))
             for i in range(k)] for s in sources]


def _try(correct: bool, reference_failed: bool = False) -> dict:
  if reference_failed:
    return {"correct": False, "reference_error": True,
            "reasons": ["reference forward failed: OutOfMemoryError: CUDA out of memory"]}
  return {"correct": correct, "reference_error": False, "reasons": []}


def _fenced(source: str) -> str:
  return f"Here is the module.\n```python\n{source}```\n<|im_end|>"


@pytest.fixture(scope="module")
def sandbox():
  with SandboxPool(SandboxConfig(device="cpu", timing=False), max_parallel=2) as pool:
    yield pool


def _env(sandbox, probe, pool=None, cooc=None, apis=None, sizes=(2,)):
  cooc = cooc or Cooccurrence(1, {"relu": 1, "sum": 1}, {"relu+sum": 1}, [])
  return ProposerEnvironment(load_tokenizer(None), ApiSetSampler(cooc, apis=apis or list(APIS)),
                             pool if pool is not None else ModulePool(FRONTIER), sandbox, probe,
                             ProposalSettings(api_set_sizes=sizes))


def test_each_completion_gets_its_rejection_or_its_frontier_reward(sandbox):
  pool = ModulePool(FRONTIER)
  pool.add(SEED, APIS)
  probe = ScriptedProbe({RELU_SUM: 4, RELU_SUM_SCALED: 8})
  env = _env(sandbox, probe, pool)
  prompt = Prompt(task_id="relu+sum", token_ids=(1, 2), payload=APIS)
  texts = [
      _fenced(RELU_SUM),            # valid, p = 4/8: reward 1
      _fenced(RELU_SUM_COMMENTED),  # the same module: validated and probed once, same reward
      _fenced(RELU_SUM_SCALED),     # valid, p = 8/8: reward 0
      "I would rather not.",        # no module
      _fenced(SUM_ONLY),            # relu requested but not used
      _fenced(SEED),                # already in the pool
      _fenced(RELU_SUM_CONSTANT),   # runs, but its output is constant
  ]
  completions = [Completion(0, t, (), "stop") for t in texts]
  results = env.score(1, [prompt], completions)

  assert [r["status"] for r in results] == [VALID, VALID, VALID, "no_module", "missing_apis",
                                            DUPLICATE, "constant_output"]
  assert [r["reward"] for r in results] == [1.0, 1.0, 0.0, -0.5, -0.5, -0.5, -0.5]
  assert [r["correct"] for r in results] == [True] * 3 + [False] * 4
  assert results[0]["pass_rate"] == 0.5 and results[2]["pass_rate"] == 1.0
  assert "relu" in results[4]["reasons"][0]
  # Only valid, distinct modules reach the Coder, once each.
  assert probe.calls == [[RELU_SUM, RELU_SUM_SCALED]]

  # Both valid modules joined the pool with the Coder's attempts recorded.
  assert len(pool) == 3
  entry = pool.entries[normalized_source_hash(RELU_SUM)]
  assert (entry.attempts, entry.correct, entry.apis, entry.added_step) == (8, 4, APIS, 1)
  assert pool.frontier_size() == 1  # RELU_SUM: solved sometimes; RELU_SUM_SCALED: always

  metrics = env.step_metrics(1)
  assert metrics["proposals_statically_ok"] == 5  # all but no_module and missing_apis
  assert metrics["unique_modules_validated"] == 3  # RELU_SUM (twice), SCALED, CONSTANT
  assert (metrics["valid_modules"], metrics["accepted_into_pool"]) == (2, 2)
  assert metrics["pool_size"] == 3
  assert metrics["valid_pass_rate_mean"] == 0.75

  # The learner's "environment" schedule takes these rewards as they are, and counts validity
  # as accuracy and the rejections by status.
  group_rewards, info = rewards.compute_group_rewards("environment", results)
  assert group_rewards == [r["reward"] for r in results]
  assert info["accuracy"] == 3 / 7
  assert info["count_by_status"] == {VALID: 3, "no_module": 1, "missing_apis": 1, DUPLICATE: 1,
                                     "constant_output": 1}

  # Proposing an accepted module again is a duplicate now.
  again = env.score(2, [prompt], [Completion(0, _fenced(RELU_SUM_SCALED), (), "stop")])
  assert again[0]["status"] == DUPLICATE and again[0]["reward"] == -0.5
  assert len(probe.calls) == 1
  # A new step's metrics start afresh; a second round of the same step (dynamic sampling) adds
  # to them.
  metrics = env.step_metrics(2)
  assert (metrics["proposals_statically_ok"], metrics["unique_modules_validated"]) == (1, 0)
  assert metrics["valid_pass_rate_mean"] is None
  env.score(2, [prompt], [Completion(0, "I would rather not.", (), "stop"),
                          Completion(0, _fenced(SEED), (), "stop")])
  metrics = env.step_metrics(2)
  assert (metrics["proposals_statically_ok"], metrics["unique_modules_validated"]) == (2, 0)
  assert (metrics["valid_modules"], metrics["pool_size"]) == (0, 3)


def test_judgings_whose_reference_failed_leave_the_pass_rate_or_invalidate_the_module(sandbox):
  # RELU_SUM: 3 of 8 pass and 2 judgings failed on the reference's side: p = 3/6.
  # RELU_SUM_SCALED: every judging's reference failed: no judge can grade it.
  probe = ScriptedProbe({RELU_SUM: 3, RELU_SUM_SCALED: 0}, {RELU_SUM: 2, RELU_SUM_SCALED: 8})
  pool = ModulePool(FRONTIER)
  env = _env(sandbox, probe, pool)
  prompt = Prompt(task_id="relu+sum", token_ids=(1, 2), payload=APIS)
  results = env.score(1, [prompt], [Completion(0, _fenced(source), (), "stop")
                                    for source in (RELU_SUM, RELU_SUM_SCALED)])
  assert [r["status"] for r in results] == [VALID, REFERENCE_FAILED]
  assert [r["reward"] for r in results] == [1.0, -0.5]
  assert results[0]["pass_rate"] == 0.5 and results[1]["pass_rate"] is None
  assert results[1]["reasons"] == [
      "its reference failed in every judging of the Coder's 8 samples: reference forward "
      "failed: OutOfMemoryError: CUDA out of memory"]
  # (RELU_SUM's references worked: the module, not the sandbox, failed; the learner keeps it.)
  assert [r["reference_error"] for r in results] == [False, False]
  assert list(pool.entries) == [normalized_source_hash(RELU_SUM)]
  entry = pool.entries[normalized_source_hash(RELU_SUM)]
  assert (entry.attempts, entry.correct) == (6, 3)
  metrics = env.step_metrics(1)
  assert (metrics["valid_modules"], metrics["reference_failed_modules"],
          metrics["accepted_into_pool"]) == (1, 1, 1)
  assert metrics["valid_pass_rate_mean"] == 0.5

  # No reference worked in the whole probe: the sandbox failed; both are reference_failed and
  # carry reference_error, so the learner leaves their groups out of the loss.
  probe.reference_failed = {RELU_SUM_SCALED: 8, RELU_SUM_LAST_DIM: 8}
  probe.correct[RELU_SUM_LAST_DIM] = 0
  results = env.score(2, [prompt], [Completion(0, _fenced(source), (), "stop")
                                    for source in (RELU_SUM_SCALED, RELU_SUM_LAST_DIM)])
  assert [(r["status"], r["reference_error"], r["reward"]) for r in results] == [
      (REFERENCE_FAILED, True, -0.5)] * 2
  assert len(pool) == 1
  _, info = rewards.compute_group_rewards("environment", results)
  assert info["count_by_status"] == {REFERENCE_FAILED: 2}


def test_the_pool_coder_records_graded_judgings_and_drops_modules_no_judge_can_grade(
    monkeypatch):
  pool = ModulePool(FRONTIER)
  for source in (RELU_SUM, RELU_SUM_SCALED, SEED):
    pool.add(source, APIS)
  # Per module, its group of 4 judgings: SEED's 4 all failed on the reference's side.
  scripted = {RELU_SUM: [_try(True), _try(False), _try(False, True), _try(True)],
              RELU_SUM_SCALED: [_try(True)] * 4, SEED: [_try(False, True)] * 4}
  env = coevolve.PoolCoderEnvironment(pool, load_tokenizer(None), "triton",
                                      SandboxConfig(device="cpu", timing=False), max_parallel=1)
  try:
    prompts = [Prompt(task_id=f"pool/{i}", token_ids=(1,), payload=source)
               for i, source in enumerate(scripted)]
    completions = [Completion(i, "", (), "stop") for i in range(3) for _ in range(4)]
    monkeypatch.setattr(CoderEnvironment, "score", lambda self, step, prompts, completions: [
        dict(r, speedup=2.0 if r["correct"] else None) for p in prompts
        for r in scripted[p.payload]])
    env.score(3, prompts, completions)
    env.score(3, prompts[:2], completions[:8])  # a second round of the same step
    assert SEED not in pool
    for source, (attempts, correct) in ((RELU_SUM, (6, 4)), (RELU_SUM_SCALED, (8, 8))):
      entry = pool.entries[normalized_source_hash(source)]
      assert (entry.attempts, entry.correct) == (attempts, correct)
    metrics = env.step_metrics(3)
    assert (metrics["reference_failed_modules_removed"], metrics["pool_size"]) == (1, 2)
    # The speedups of both rounds: 2 + 4 correct in each.
    assert metrics["num_speedups"] == 12
    assert metrics["log_speedup_sum"] == pytest.approx(12 * np.log(2.0))
    # A batch in which no reference worked: the sandbox failed, and no module leaves the pool.
    with monkeypatch.context() as m:
      m.setattr(CoderEnvironment, "score", lambda self, step, prompts, completions: [
          dict(_try(False, True), speedup=None) for _ in completions])
      env.score(4, prompts[:2], completions[:8])
    assert len(pool) == 2 and env.step_metrics(4)["reference_failed_modules_removed"] == 0
    # The pool emptied by such removals says so when it is asked for prompts.
    scripted[RELU_SUM] = scripted[RELU_SUM_SCALED] = scripted[SEED]
    scripted[SUM_ONLY] = [_try(True)] * 4  # not in the pool: its reference worked
    last = [prompts[0], prompts[1], Prompt("other", (1,), SUM_ONLY)]
    env.score(5, last, completions)
    assert len(pool) == 0 and env.step_metrics(5)["reference_failed_modules_removed"] == 2
    with pytest.raises(RuntimeError, match=r"empty.*3 module\(s\) left it because their "
                                           "reference failed"):
      env.make_prompts(6, 2, np.random.default_rng(0))
  finally:
    env.sandbox.close()


def test_the_environment_schedule_needs_the_reward():
  with pytest.raises(ValueError, match="result\\['reward'\\]"):
    rewards.compute_group_rewards("environment", [{"correct": True, "status": VALID}])


def test_prompts_name_their_api_set_and_lean_toward_apis_the_coder_fails():
  apis = ["relu", "gelu", "sum", "mean"]
  cooc = Cooccurrence(4, {a: 1 for a in apis}, {}, [])
  pool = ModulePool(FrontierConfig(api_weight_strength=3.0))
  failing = TEMPLATE.format(body="torch.mean(torch.relu(x), dim=1)")
  pool.add(failing, ("relu", "mean"))
  pool.record(normalized_source_hash(failing), 0, 8)  # the Coder never solves relu + mean
  passing = TEMPLATE.format(body="torch.sum(torch.nn.functional.gelu(x), dim=1)")
  pool.add(passing, ("gelu", "sum"))
  pool.record(normalized_source_hash(passing), 8, 8)
  env = _env(None, ScriptedProbe({}), pool, cooc, apis=apis, sizes=(1, 2))

  prompts = env.make_prompts(1, 400, np.random.default_rng(0))
  assert {len(p.payload) for p in prompts} == {1, 2}
  for p in prompts[:5]:
    assert p.task_id == "+".join(p.payload)
    assert all(f"- {a} (" in env.decode(p.token_ids) for a in p.payload)
  firsts = [p.payload[0] for p in prompts]
  # weights 1 + 3 * (1 - pass rate): relu and mean 4, gelu and sum 1.
  assert firsts.count("relu") + firsts.count("mean") > 3 * (firsts.count("gelu")
                                                            + firsts.count("sum"))
  assert all(a in catalog.BY_NAME for p in prompts for a in p.payload)


def test_api_set_sizes_must_fit_the_vocabulary():
  with pytest.raises(ValueError, match="exceed"):
    _env(None, ScriptedProbe({}), sizes=(3,))
  with pytest.raises(ValueError, match="positive"):
    ProposalSettings(api_set_sizes=(0, 2))
