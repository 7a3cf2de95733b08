"""Reward schedules on hand-made groups."""

import dataclasses
import math

import pytest

from kernelzero_jax.rl import rewards
from kernelzero_jax.rl.rewards import RewardConfig


def res(correct, speedup=None, status=None):
  return {"correct": correct, "speedup": speedup,
          "status": status or ("ok" if correct else "wrong_output")}


CFG = RewardConfig()  # alpha 0.5, beta 0.1, clipped_linear, speed_clip 2.0


def test_speed_terms():
  lin, log = CFG, RewardConfig(speed_term="log")
  for speedup, want_lin, want_log in [(None, 0.0, 0.0), (0.5, 0.0, 0.0), (1.0, 0.0, 0.0),
                                      (1.5, 0.5, math.log(1.5)), (3.0, 2.0, math.log(3.0)),
                                      (10.0, 2.0, math.log(3.0))]:
    assert rewards.speed_term(res(True, speedup), lin) == pytest.approx(want_lin)
    assert rewards.speed_term(res(True, speedup), log) == pytest.approx(want_log)
  with pytest.raises(ValueError, match="clipped_linear.*log"):
    rewards.speed_term(res(True, 2.0), RewardConfig(speed_term="cubic"))


def test_ca_grpo_gate_just_below_and_at_alpha():
  # 1/4 correct < alpha: gate closed, correct sample gets exactly 1.
  below = [res(True, 2.0), res(False), res(False), res(False)]
  r, info = rewards.compute_group_rewards("ca_grpo", below, CFG)
  assert r == [1.0, 0.0, 0.0, 0.0]
  assert info["gate_open"] is False and info["accuracy"] == 0.25
  assert info["mean_speed_term"] == pytest.approx(1.0)
  # 2/4 correct == alpha: gate open (>=), speed counts.
  at = [res(True, 2.0), res(True, None), res(False), res(False, status="compile_error")]
  r, info = rewards.compute_group_rewards("ca_grpo", at, CFG)
  assert r == pytest.approx([1.1, 1.0, 0.0, 0.0])
  assert info["gate_open"] is True and info["accuracy"] == 0.5
  assert info["mean_speed_term"] == pytest.approx(0.5)  # (1.0 + 0) / 2 correct samples
  assert info["count_by_status"] == {"ok": 2, "wrong_output": 1, "compile_error": 1}
  # 3/4 with the log speed term, and a speedup beyond the clip.
  above = [res(True, 1.5), res(True, 10.0), res(True, 0.7), res(False)]
  r, info = rewards.compute_group_rewards("ca_grpo", above, RewardConfig(speed_term="log"))
  assert r == pytest.approx([1 + 0.1 * math.log(1.5), 1 + 0.1 * math.log(3.0), 1.0, 0.0])


def test_correctness_only_additive_kevin():
  g = [res(True, 3.0), res(False, 2.0), res(False), res(False)]  # 1/4: gate would be closed
  assert rewards.compute_group_rewards("correctness_only", g, CFG)[0] == [1.0, 0.0, 0.0, 0.0]
  r, info = rewards.compute_group_rewards("additive", g, CFG)
  assert r == pytest.approx([1.2, 0.0, 0.0, 0.0]) and info["gate_open"] is None
  r, _ = rewards.compute_group_rewards("kevin", g + [res(True, None)], CFG)
  assert r == pytest.approx([3.3, 0.0, 0.0, 0.0, 0.3])  # raw speedup; None -> 0.3 only


def test_user_registered_schedule():
  @rewards.register_reward_schedule("test_speed_only")
  def speed_only(results, config):
    s = [rewards.speed_term(r, config) if r["correct"] else 0.0 for r in results]
    return s, rewards.group_info(results, s, config, gate_open=None)

  try:
    r, info = rewards.compute_group_rewards("test_speed_only", [res(True, 2.5), res(False)])
    assert r == pytest.approx([1.5, 0.0]) and info["accuracy"] == 0.5
    with pytest.raises(ValueError, match="already registered"):
      rewards.register_reward_schedule("test_speed_only")(speed_only)
  finally:
    del rewards.REWARD_SCHEDULES["test_speed_only"]


def test_unknown_schedule_lists_known_names():
  with pytest.raises(ValueError, match=r"unknown reward schedule 'nope'.*additive.*ca_grpo"):
    rewards.compute_group_rewards("nope", [res(True)], CFG)


def test_summarize():
  g1 = [res(True, 2.0), res(True, None), res(False), res(False, status="compile_error")]
  g2 = [res(True, 3.0), res(False), res(False), res(False, status="timeout")]
  infos = [rewards.compute_group_rewards("ca_grpo", g, CFG)[1] for g in (g1, g2)]
  s = rewards.summarize(infos)
  assert s["accuracy"] == pytest.approx(3 / 8)
  assert s["gate_open_rate"] == pytest.approx(0.5)
  assert s["mean_speed_term"] == pytest.approx((1.0 + 0.0 + 2.0) / 3)
  assert s["num_groups"] == 2
  assert s["count_by_status"] == {"ok": 3, "wrong_output": 3, "compile_error": 1, "timeout": 1}
  # ok rewards: 1.1, 1.0 (gate open) and 1.0 (gate closed, 1/4 correct).
  assert s["reward_mean_by_status"]["ok"] == pytest.approx((1.1 + 1.0 + 1.0) / 3)
  assert s["reward_mean_by_status"]["timeout"] == 0.0
  ungated = [rewards.compute_group_rewards("additive", g1, CFG)[1]]
  assert rewards.summarize(ungated)["gate_open_rate"] is None


def test_the_rewarded_speedups_are_those_where_the_speed_term_moves():
  cfg = rewards.RewardConfig(speed_clip=2.0)
  for schedule in ("ca_grpo", "additive"):
    for term in ("clipped_linear", "log"):
      c = dataclasses.replace(cfg, speed_term=term)
      low, high = rewards.rewarded_speedups(schedule, c)
      assert (low, high) == (1.0, 3.0)
      # S is flat outside (low, high) and moves inside it
      s = lambda x, c=c: rewards.speed_term({"speedup": x}, c)  # pylint: disable=unnecessary-lambda-assignment
      assert s(0.2) == s(low) == 0.0 and s(high) == s(50.0) > s(2.0) > 0.0
  # kevin reads the raw speedup; correctness_only and the environment's read none
  for schedule in ("kevin", "correctness_only", "environment"):
    assert rewards.rewarded_speedups(schedule, cfg) is None
  with pytest.raises(ValueError, match="unknown reward schedule"):
    rewards.rewarded_speedups("nope", cfg)


@pytest.fixture
def registered():
  """Registers test entries for the test, and takes them out after it."""
  names = []
  yield names.append
  for name in names:
    for table in (rewards.SPEED_TERMS, rewards.SPEED_TERM_BANDS, rewards.REWARD_SCHEDULES):
      table.pop(name, None)
    rewards.SPEED_THROUGH_TERM.discard(name)


def test_a_term_or_schedule_registered_without_a_band_leaves_timings_as_they_are(registered):
  for name in ("test_sqrt", "test_step", "test_squared"):
    registered(name)
  rewards.register_speed_term("test_sqrt")(lambda speedup, config: speedup ** 0.5)
  assert rewards.rewarded_speedups("ca_grpo", RewardConfig(speed_term="test_sqrt")) is None
  rewards.register_speed_term("test_step", band=lambda c: (2.0, 2.5))(
      lambda speedup, config: float(speedup >= 2.0))
  cfg = RewardConfig(speed_term="test_step")
  assert rewards.rewarded_speedups("ca_grpo", cfg) == (2.0, 2.5)
  rewards.register_reward_schedule("test_squared")(
      lambda results, config: ([r["speedup"] ** 2 for r in results], {}))
  assert rewards.rewarded_speedups("test_squared", cfg) is None
  rewards.REWARD_SCHEDULES.pop("test_squared")
  rewards.register_reward_schedule("test_squared", speed_through_term=True)(
      lambda results, config: ([rewards.speed_term(r, config) for r in results], {}))
  assert rewards.rewarded_speedups("test_squared", cfg) == (2.0, 2.5)


def test_the_coders_sandbox_takes_its_rewards_band_unless_it_has_one():
  from kernelzero_jax.coder.environment import sandbox_for_reward  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.rl.learner import LearnerConfig  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.config import SandboxConfig  # pylint: disable=import-outside-toplevel
  sandbox = SandboxConfig(device="cpu")
  learner = LearnerConfig(reward=rewards.RewardConfig(speed_clip=1.0))
  assert sandbox_for_reward(sandbox, learner).speedup_band == (1.0, 2.0)
  own = dataclasses.replace(sandbox, speedup_band=(0.5, 4.0))
  assert sandbox_for_reward(own, learner) is own
  kevin = dataclasses.replace(learner, reward_schedule="kevin")
  assert sandbox_for_reward(sandbox, kevin) is sandbox


def test_coevolution_and_the_coders_rl_judge_with_the_rewards_band_unless_told_not_to():
  from kernelzero_jax.coder.train import CoderRunConfig  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.coevolve import CoevolveConfig  # pylint: disable=import-outside-toplevel
  for config in (CoevolveConfig(), CoderRunConfig()):
    assert config.sandbox.speedup_band is None  # evaluations: every timing to its precision
    assert config.coder_sandbox.speedup_band == (1.0, 3.0)
    assert dataclasses.replace(config, time_rewarded_speedups=False).coder_sandbox is (
        config.sandbox)
