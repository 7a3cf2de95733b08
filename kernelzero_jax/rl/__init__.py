"""RL pieces: group advantages, the clipped-surrogate policy loss and reward schedules."""

from kernelzero_jax.rl.advantages import (ADVANTAGE_ESTIMATORS, compute_advantages,
                                          dynamic_filter_mask, register_advantage_estimator,
                                          tie_fraction)
from kernelzero_jax.rl.losses import (AGGREGATIONS, loss_normalizer, per_token_loss, policy_loss,
                                      register_aggregation)
from kernelzero_jax.rl.rewards import (REWARD_SCHEDULES, RewardConfig, compute_group_rewards,
                                       register_reward_schedule, summarize)

__all__ = ["ADVANTAGE_ESTIMATORS", "AGGREGATIONS", "REWARD_SCHEDULES", "RewardConfig",
           "compute_advantages", "compute_group_rewards", "dynamic_filter_mask", "loss_normalizer",
           "per_token_loss", "policy_loss", "register_advantage_estimator", "register_aggregation",
           "register_reward_schedule", "summarize", "tie_fraction"]
