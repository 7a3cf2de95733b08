"""Reward schedules: a group's sandbox results -> one scalar reward per sample, by config string.

A result is a dict {"correct": bool, "speedup": float | None, "status": str}; speedup is None
when it could not be measured (e.g. CPU runs), and then the speed term is 0.

Registering your own schedule takes a few lines:

    from kernelzero_jax.rl import rewards

    @rewards.register_reward_schedule("speed_only", speed_through_term=True)
    def speed_only(results, config):
      s = [rewards.speed_term(r, config) if r["correct"] else 0.0 for r in results]
      return s, rewards.group_info(results, s, config, gate_open=None)

    rewards.compute_group_rewards("speed_only", results, rewards.RewardConfig())

`speed_through_term=True` says that it reads speed through speed_term alone: the Coder's sandbox
then times candidates precisely only where the term moves (rewarded_speedups).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import Any, Callable, Optional, Sequence

from kernelzero_jax.registry import Registry

Result = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class RewardConfig:
  alpha: float = 0.5          # ca_grpo gate: speed counts only if group accuracy >= alpha
  beta: float = 0.1           # weight of the speed term
  speed_term: str = "clipped_linear"  # key of SPEED_TERMS
  speed_clip: float = 2.0     # speed term cap: S saturates at speedup 1 + speed_clip (3x)


# ---- speed terms: speedup (> 0) -> S >= 0. Both give 0 for speedup <= 1 (no reward for being
# slower than the reference) and saturate at speedup 1 + speed_clip, so reward hacking on timing
# outliers is bounded and the two forms are comparable ablations.
SPEED_TERMS: Registry[Callable[[float, RewardConfig], float]] = Registry("speed term")
# The speedups between which each speed term changes (flat outside them), where known: what a
# timing needs to measure precisely for it (rewarded_speedups).
SPEED_TERM_BANDS: dict[str, Callable[[RewardConfig], tuple[float, float]]] = {}


def register_speed_term(name: str,
                        band: Callable[[RewardConfig], tuple[float, float]] | None = None):
  """Decorator registering `fn(speedup, config) -> S` under `name`; `band(config)`, where
  given, the speedups (low, high) outside which S does not change."""
  if band is not None:
    SPEED_TERM_BANDS[name] = band
  return SPEED_TERMS.register(name)


def _one_to_the_clip(config: RewardConfig) -> tuple[float, float]:
  return 1.0, 1.0 + config.speed_clip


@register_speed_term("clipped_linear", band=_one_to_the_clip)
def clipped_linear(speedup: float, config: RewardConfig) -> float:
  """S = clip(speedup - 1, 0, speed_clip)."""
  return min(max(speedup - 1.0, 0.0), config.speed_clip)


@register_speed_term("log", band=_one_to_the_clip)
def log_speed(speedup: float, config: RewardConfig) -> float:
  """S = clip(log(speedup), 0, log(1 + speed_clip)): same saturation point as clipped_linear."""
  return min(max(math.log(speedup), 0.0), math.log1p(config.speed_clip))


def speed_term(result: Result, config: RewardConfig) -> float:
  """S for one result; 0 when speedup is missing (None) or not a positive finite number."""
  speedup = result.get("speedup")
  if speedup is None or not math.isfinite(speedup) or speedup <= 0:
    return 0.0
  return float(SPEED_TERMS.lookup(config.speed_term)(speedup, config))


def group_info(results: Sequence[Result], rewards: Sequence[float], config: RewardConfig,
               gate_open: Optional[bool]) -> dict[str, Any]:
  """Per-group diagnostics; gate_open is None for schedules without a gate."""
  correct = [bool(r["correct"]) for r in results]
  s_correct = [speed_term(r, config) for r, c in zip(results, correct) if c]
  count_by_status: dict[str, int] = defaultdict(int)
  reward_sum_by_status: dict[str, float] = defaultdict(float)
  for r, rew in zip(results, rewards):
    status = r.get("status", "unknown")
    count_by_status[status] += 1
    reward_sum_by_status[status] += float(rew)
  return {
      "accuracy": sum(correct) / len(results),
      "gate_open": gate_open,
      "mean_speed_term": sum(s_correct) / len(s_correct) if s_correct else 0.0,
      "num_samples": len(results),
      "num_correct": sum(correct),
      "speed_term_sum": sum(s_correct),  # over correct samples; lets summarize() re-weight
      "count_by_status": dict(count_by_status),
      "reward_sum_by_status": dict(reward_sum_by_status),
  }


# ---- schedules: (results of ONE group, config) -> (rewards, info).
RewardSchedule = Callable[[Sequence[Result], RewardConfig], tuple[list[float], dict[str, Any]]]
REWARD_SCHEDULES: Registry[RewardSchedule] = Registry("reward schedule")
# Schedules that read a result's speed through speed_term only (rewarded_speedups).
SPEED_THROUGH_TERM: set[str] = set()


def register_reward_schedule(name: str, speed_through_term: bool = False
                             ) -> Callable[[RewardSchedule], RewardSchedule]:
  """Decorator registering `fn(results, config) -> (rewards, info)` under `name` (see module
  doc); `speed_through_term`: it reads a result's speedup through speed_term alone."""
  if speed_through_term:
    SPEED_THROUGH_TERM.add(name)
  return REWARD_SCHEDULES.register(name)


def rewarded_speedups(schedule: str, config: RewardConfig) -> tuple[float, float] | None:
  """The speedups between which `schedule`'s reward changes with a result's speedup, where that
  is known: the schedule reads speed through speed_term alone and the term has a band. None
  otherwise (kevin's raw speedup; a term or schedule registered without saying). The Coder's
  sandbox times candidates outside them less precisely (SandboxConfig.speedup_band)."""
  get_reward_schedule(schedule)  # an unknown name is an error here too
  band = SPEED_TERM_BANDS.get(config.speed_term)
  if schedule not in SPEED_THROUGH_TERM or band is None:
    return None
  return band(config)


def get_reward_schedule(name: str) -> RewardSchedule:
  return REWARD_SCHEDULES.lookup(name)


def compute_group_rewards(name: str, results: Sequence[Result],
                          config: RewardConfig = RewardConfig()):
  if not results:
    raise ValueError("a group needs at least one result")
  return get_reward_schedule(name)(results, config)


def _accuracy(results: Sequence[Result]) -> float:
  return sum(bool(r["correct"]) for r in results) / len(results)


@register_reward_schedule("ca_grpo", speed_through_term=True)
def ca_grpo(results, config):
  """Correctness-aware: wrong 0; correct 1 + T(G)*beta*S, T(G) = 1 iff accuracy >= alpha.

  The gate keeps speed from dominating while the group is still mostly wrong: speed only
  differentiates once correctness is reliable.
  """
  gate_open = _accuracy(results) >= config.alpha
  gate = 1.0 if gate_open else 0.0
  rewards = [1.0 + gate * config.beta * speed_term(r, config) if r["correct"] else 0.0
             for r in results]
  return rewards, group_info(results, rewards, config, gate_open)


@register_reward_schedule("correctness_only")
def correctness_only(results, config):
  rewards = [1.0 if r["correct"] else 0.0 for r in results]
  return rewards, group_info(results, rewards, config, gate_open=None)


@register_reward_schedule("additive", speed_through_term=True)
def additive(results, config):
  """ca_grpo without the gate: correct 1 + beta*S."""
  rewards = [1.0 + config.beta * speed_term(r, config) if r["correct"] else 0.0 for r in results]
  return rewards, group_info(results, rewards, config, gate_open=None)


@register_reward_schedule("kevin")
def kevin(results, config):
  """Kevin-32B: 0.3*correct + speedup*correct, with the RAW (unclipped) speedup as in that paper;
  a missing speedup (None) contributes 0, so a correct unmeasured kernel gets 0.3."""
  rewards = []
  for r in results:
    speedup = r.get("speedup")
    speed = speedup if speedup is not None and math.isfinite(speedup) else 0.0
    rewards.append(0.3 + speed if r["correct"] else 0.0)
  return rewards, group_info(results, rewards, config, gate_open=None)


@register_reward_schedule("environment")
def environment(results, config):
  """The reward the environment computed itself (result["reward"]), for environments whose
  reward is not a function of their own group (the Proposer's: the Coder's pass rate on the
  proposed module, through frontier.PROPOSER_REWARDS). "correct" counts as accuracy."""
  missing = [i for i, r in enumerate(results) if "reward" not in r]
  if missing:
    raise ValueError(f"the 'environment' schedule needs result['reward']; results {missing} "
                     "have none")
  rewards = [float(r["reward"]) for r in results]
  return rewards, group_info(results, rewards, config, gate_open=None)


def summarize(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """Aggregate per-group infos into per-step metrics.

  accuracy and mean_speed_term are sample-weighted (over all samples / all correct samples);
  gate_open_rate is over gated groups only (None when no group had a gate);
  reward_mean_by_status / count_by_status break rewards down by sandbox status.
  """
  num_samples = sum(i["num_samples"] for i in infos)
  num_correct = sum(i["num_correct"] for i in infos)
  gates = [i["gate_open"] for i in infos if i["gate_open"] is not None]
  counts: dict[str, int] = defaultdict(int)
  sums: dict[str, float] = defaultdict(float)
  for i in infos:
    for status, n in i["count_by_status"].items():
      counts[status] += n
      sums[status] += i["reward_sum_by_status"][status]
  return {
      "accuracy": num_correct / num_samples if num_samples else 0.0,
      "gate_open_rate": sum(gates) / len(gates) if gates else None,
      "mean_speed_term": (sum(i["speed_term_sum"] for i in infos) / num_correct
                          if num_correct else 0.0),
      "num_groups": len(infos),
      "count_by_status": dict(counts),
      "reward_mean_by_status": {s: sums[s] / counts[s] for s in counts},
  }
