"""The GRPO learner: batch layout, a learning test on a verifiable toy task, exact resume."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from flax import nnx

from kernelzero_jax.metrics import read_metrics
from kernelzero_jax.model.config import PRESETS
from kernelzero_jax.model.qwen2 import ForwardOptions, Qwen2
from kernelzero_jax.rl import learner as L
from kernelzero_jax.rl import train_step as ts
from kernelzero_jax.rl.rewards import RewardConfig

VOCAB = PRESETS["tiny"].vocab_size
TARGET = VOCAB // 8  # a completion is correct iff its first token is < TARGET: chance 1/8


class FirstTokenEnv:
  """A verifiable task scored with the same result dicts as the sandbox's: the first generated
  token must fall in [0, TARGET). Speedups are None, so every reward schedule sees correctness
  only."""

  def make_prompts(self, step, num_prompts, rng):
    del step
    return [L.Prompt(task_id=f"p{i}", token_ids=tuple(int(t) for t in rng.integers(1, VOCAB, 4)))
            for i in range(num_prompts)]

  def score(self, step, prompts, completions):
    del step, prompts
    return [{"correct": bool(c.token_ids) and c.token_ids[0] < TARGET,
             "status": "correct" if c.token_ids and c.token_ids[0] < TARGET else "incorrect",
             "speedup": None} for c in completions]

  def decode(self, token_ids):
    return " ".join(map(str, token_ids))


def toy_config(learning_rate: float, num_steps: int, **kw) -> L.LearnerConfig:
  return L.LearnerConfig(
      seed=0, num_steps=num_steps,
      rollout=L.RolloutConfig(prompts_per_step=4, group_size=8, max_new_tokens=2),
      optimizer=ts.OptimizerConfig(learning_rate=learning_rate, schedule="constant",
                                   total_steps=num_steps),
      reward=RewardConfig(), reward_schedule="ca_grpo", compute_dtype="float32",
      sample_dtype="float32", min_sequence_bucket=8, save_samples=False, **kw)


def make_learner(config: L.LearnerConfig) -> L.Learner:
  model = Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0))
  return L.Learner(config, model, FirstTokenEnv(), eos_ids=[], pad_id=0, progress=False)


def test_build_train_batch_layout():
  prompts = [L.Prompt("a", (5, 6)), L.Prompt("b", (7,))]
  completions = [L.Completion(0, "", (8, 9, 10), "stop"), L.Completion(1, "", (11,), "length")]
  batch = L.build_train_batch(prompts, completions, [[-1.0, -2.0, -3.0], [-4.0]],
                              np.array([0.5, -0.5]), np.array([True, False]), pad_id=0,
                              min_bucket=4)
  np.testing.assert_array_equal(batch["tokens_BxT"], [[5, 6, 8, 9, 10, 0, 0, 0],
                                                      [7, 11, 0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(batch["valid_BxT"].sum(1), [5, 2])
  # Row 1 is not kept: no loss tokens.
  np.testing.assert_array_equal(batch["completion_mask_BxT"], [[0, 0, 1, 1, 1, 0, 0, 0],
                                                               [0] * 8])
  np.testing.assert_array_equal(batch["old_logp_BxT"][0, 2:5], [-1.0, -2.0, -3.0])
  assert batch["old_logp_BxT"][1, 1] == -4.0
  np.testing.assert_array_equal(batch["truncated_B"], [False, True])
  np.testing.assert_array_equal(batch["adv_B"], [0.5, -0.5])


def test_config_errors_name_the_problem():
  with pytest.raises(ValueError, match="multiple of"):
    L.LearnerConfig(rollout=L.RolloutConfig(prompts_per_step=3, group_size=3),
                    num_micro_batches=2)
  with pytest.raises(ValueError, match="unknown reward schedule 'ca-grpo'"):
    L.LearnerConfig(reward_schedule="ca-grpo")
  with pytest.raises(ValueError, match="old_logprobs"):
    L.LearnerConfig(old_logprobs="fresh")


def _accuracies(learner: L.Learner, steps: int) -> list[float]:
  return [learner.step(s)["accuracy"] for s in range(1, steps + 1)]


def test_learning_beats_chance_and_zero_lr_does_not():
  """Fails if learning breaks: the toy task goes from chance (1/8) to well above it."""
  steps = 12
  learned = _accuracies(make_learner(toy_config(3e-2, steps)), steps)
  frozen_learner = make_learner(toy_config(0.0, steps))
  params0 = jax.tree.map(np.asarray, frozen_learner.state.params)
  frozen = _accuracies(frozen_learner, steps)
  assert np.mean(learned[:2]) < 0.35, learned  # starts near chance
  assert np.mean(learned[-3:]) > 0.6, learned
  assert np.mean(frozen) < 0.3, frozen
  assert np.mean(frozen[-3:]) < 0.35, frozen
  jax.tree.map(np.testing.assert_array_equal, params0,
               jax.tree.map(np.asarray, frozen_learner.state.params))


def test_resumed_run_matches_uninterrupted(tmp_path):
  """A run stopped after 2 steps and resumed to 4 logs what an uninterrupted 4-step run logs:
  the prompts and sampling seeds derive from (seed, step), the rest is in the checkpoint. (With
  mini-batches, two passes over each batch, accumulation, sampler logprobs and dynamic
  filtering, so all of them resume.)"""
  kw = dict(updates_per_batch=2, epochs_per_batch=2, num_micro_batches=2,
            old_logprobs="sampler", dynamic_filtering=True)
  whole = make_learner(toy_config(3e-3, 4, **kw))
  whole.run(str(tmp_path / "whole"))
  first = make_learner(toy_config(3e-3, 2, **kw))
  first.run(str(tmp_path / "split"))
  second = make_learner(toy_config(3e-3, 4, **kw))
  second.run(str(tmp_path / "split"))
  a = read_metrics(str(tmp_path / "whole" / "metrics.jsonl"))
  b = read_metrics(str(tmp_path / "split" / "metrics.jsonl"))
  assert [r["step"] for r in b] == [1, 2, 3, 4]
  skip = {"time_sample_s", "time_score_s", "time_train_s", "tokens_per_s",
          "sample_tokens_per_s"}
  for ra, rb in zip(a, b):
    for k in ra:
      if k not in skip:
        assert ra[k] == pytest.approx(rb[k], rel=1e-6, abs=1e-7), (ra["step"], k)


@pytest.mark.parametrize("attention", ["einsum", "xla"])
def test_first_update_is_on_policy_with_recomputed_logprobs(attention):
  learner = make_learner(toy_config(1e-3, 1, forward=ForwardOptions(attention=attention)))
  metrics = learner.step(1)
  assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
  assert metrics["clip_fraction"] == 0.0


def test_kl_term_holds_a_reference_only_when_used():
  assert make_learner(toy_config(1e-3, 1))._ref_params is None
  learner = make_learner(dataclasses.replace(
      toy_config(1e-3, 2), loss=ts.LossConfig(beta_kl=0.1)))
  assert learner._ref_params is not None
  learner.step(1)
  metrics = learner.step(2)  # the policy has moved away from the reference: KL > 0
  assert metrics["kl_to_ref"] > 0


@pytest.mark.parametrize("temperature", [0.7, 1.3])
def test_the_update_trains_the_distribution_the_rollouts_were_sampled_from(temperature):
  """Rollouts drawn at temperature T are scored at T: the sampler's logprobs (of
  softmax(logits / T)) then equal the train step's, so their ratio is 1 on the first update.
  Scoring at temperature 1 instead would put it far from 1."""
  config = toy_config(1e-3, 1, old_logprobs="sampler")
  config = dataclasses.replace(config, rollout=dataclasses.replace(config.rollout,
                                                                   temperature=temperature))
  metrics = make_learner(config).step(1)
  assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
  assert metrics["approx_kl"] == pytest.approx(0.0, abs=1e-6)


def test_greedy_rollouts_are_refused():
  with pytest.raises(ValueError, match="temperature must be > 0"):
    L.LearnerConfig(rollout=L.RolloutConfig(temperature=0.0))


class ScriptedSpreadEnv(FirstTokenEnv):
  """Prompts are numbered across calls; a prompt's group has a reward spread (its first sample
  correct, the rest not) iff its number is in `untied`, else every sample is wrong (a tie)."""

  def __init__(self, untied):
    self.untied, self.made, self.score_calls = set(untied), 0, 0

  def make_prompts(self, step, num_prompts, rng):
    prompts = super().make_prompts(step, num_prompts, rng)
    out = [dataclasses.replace(p, task_id=f"q{self.made + i}") for i, p in enumerate(prompts)]
    self.made += num_prompts
    return out

  def score(self, step, prompts, completions):
    self.score_calls += 1
    first = {}
    results = []
    for c in completions:
      n = int(prompts[c.prompt_index].task_id[1:])
      correct = n in self.untied and c.prompt_index not in first
      first.setdefault(c.prompt_index, True)
      results.append({"correct": correct, "status": "correct" if correct else "incorrect",
                      "speedup": None})
    return results


def _one_sampled_step(env, max_rounds: int, rounds: int, tmp_path) -> dict:
  """One learner step on `env` with up to `max_rounds` sampling rounds (its samples saved under
  tmp_path), checked to have taken `rounds`; its metrics."""
  config = dataclasses.replace(toy_config(1e-3, 1, dynamic_sampling_max_rounds=max_rounds),
                               save_samples=True)
  learner = L.Learner(config, Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0)), env, eos_ids=[],
                      pad_id=0, progress=False)
  metrics = learner.step(1, str(tmp_path))
  assert env.score_calls == rounds and metrics["sampling_rounds"] == rounds
  return metrics


@pytest.mark.parametrize("max_rounds,rounds,batch,untied_in_batch", [
    (1, 1, ["q0", "q1", "q2", "q3"], 1),          # off: the step's groups, as sampled
    (2, 2, ["q0", "q1", "q4", "q6"], 3),          # capped: 3 untied groups, topped up with q0
    (5, 3, ["q1", "q4", "q6", "q9"], 4),          # stops once 4 untied groups are in hand
])
def test_dynamic_sampling_fills_the_batch_with_untied_groups(tmp_path, max_rounds, rounds,
                                                             batch, untied_in_batch):
  env = ScriptedSpreadEnv(untied={1, 4, 6, 9, 10, 11})
  metrics = _one_sampled_step(env, max_rounds, rounds, tmp_path)
  assert metrics["untied_groups_in_batch"] == untied_in_batch
  sampled = 4 * rounds
  assert metrics["tie_fraction"] == pytest.approx(
      1 - sum(n in env.untied for n in range(sampled)) / sampled)
  assert metrics["accuracy"] == pytest.approx(
      sum(n in env.untied for n in range(sampled)) / (8 * sampled))
  rows = [json.loads(line) for line in open(tmp_path / "samples" / "step_000001.jsonl")]
  assert len(rows) == 8 * sampled  # every sample is kept, trained on or not
  assert sorted({r["task_id"] for r in rows if r["in_batch"]}) == batch
  assert sum(r["in_batch"] for r in rows) == 8 * 4
  # The batch's untied groups carry their own group advantages.
  for r in rows:
    n = int(r["task_id"][1:])
    assert (r["advantage"] != 0) == (n in env.untied)
  assert metrics["skipped_update"] == 0.0 and metrics["update_norm"] > 0


def test_dynamic_sampling_rounds_must_be_positive():
  with pytest.raises(ValueError, match="dynamic_sampling_max_rounds"):
    toy_config(1e-3, 1, dynamic_sampling_max_rounds=0)


def test_epochs_per_batch_pass_over_the_same_minibatches_against_the_sampling_policy():
  """epochs_per_batch=2 with 2 mini-batches: 4 optimizer steps over [m0, m1, m0, m1], the
  second pass with the same old logprobs (the sampling policy's), not recomputed ones."""
  learner = make_learner(toy_config(1e-2, 1, epochs_per_batch=2, updates_per_batch=2))
  calls, step_fn = [], learner._train_step
  def recording(state, mini):
    calls.append(jax.tree.map(np.asarray, mini))
    return step_fn(state, mini)
  learner._train_step = recording
  metrics = learner.step(1)
  assert len(calls) == 4
  for first, again in ((calls[0], calls[2]), (calls[1], calls[3])):
    assert first.keys() == again.keys()
    for k in first:
      np.testing.assert_array_equal(first[k], again[k])
  assert not np.array_equal(calls[0]["tokens_BxT"], calls[1]["tokens_BxT"])
  # The first update is on-policy (ratio exactly 1); the later ones are not, so the mean moves.
  assert metrics["ratio_mean"] != pytest.approx(1.0, abs=1e-6)
  with pytest.raises(ValueError, match="epochs_per_batch"):
    toy_config(1e-2, 1, epochs_per_batch=0)


def test_more_epochs_per_batch_learn_more_from_the_same_verdicts():
  """The same 8 steps of 32 scored samples: four passes over each batch lift the toy task's
  accuracy well above what one pass reaches at the same learning rate."""
  steps = 8
  once = _accuracies(make_learner(toy_config(1e-2, steps)), steps)
  four = _accuracies(make_learner(toy_config(1e-2, steps, epochs_per_batch=4)), steps)
  assert np.mean(four[-3:]) > np.mean(once[-3:]) + 0.1, (once, four)


class ReferenceFailsEnv(ScriptedSpreadEnv):
  """ScriptedSpreadEnv whose prompts numbered in `failed` get one judging with a reference that
  failed (its candidate wrong, as the sandbox scores it)."""

  def __init__(self, untied, failed):
    super().__init__(untied)
    self.failed = set(failed)

  def score(self, step, prompts, completions):
    results = super().score(step, prompts, completions)
    marked = set()
    for c, r in zip(completions, results):
      n = int(prompts[c.prompt_index].task_id[1:])
      if n in self.failed and n not in marked and not r["correct"]:
        r.update(correct=False, status="runtime_error", reference_error=True)
        marked.add(n)
    return results


@pytest.mark.parametrize("untied,max_rounds,rounds,batch,kept", [
    ({1, 4, 6}, 1, 1, ["q0", "q1", "q2", "q3"], {"q0", "q2", "q3"}),  # q1 out of the loss
    # q1 has no signal: the batch has q4 and q6, topped up in sampling order, q1 left out again
    ({1, 4, 6}, 2, 2, ["q0", "q1", "q4", "q6"], {"q0", "q4", "q6"}),
    # 4 untied groups in the first round, but q1's does not count: sampling goes on
    ({0, 1, 2, 3}, 3, 3, ["q0", "q1", "q2", "q3"], {"q0", "q2", "q3"}),
])
def test_a_group_whose_reference_failed_is_left_out_of_the_loss(tmp_path, untied, max_rounds,
                                                               rounds, batch, kept):
  env = ReferenceFailsEnv(untied=untied, failed={1})
  metrics = _one_sampled_step(env, max_rounds, rounds, tmp_path)
  assert metrics["reference_failed_groups_in_batch"] == ("q1" in batch)
  assert metrics["kept_group_fraction"] == len(kept) / 4  # without dynamic_filtering
  rows = [json.loads(line) for line in open(tmp_path / "samples" / "step_000001.jsonl")]
  assert sorted({r["task_id"] for r in rows if r["in_batch"]}) == batch
  # q1 has a reward spread (its first sample correct) but no advantage: nothing to learn from
  for r in rows:
    n = int(r["task_id"][1:])
    assert (r["advantage"] != 0) == (n in env.untied and n not in env.failed), r["task_id"]
