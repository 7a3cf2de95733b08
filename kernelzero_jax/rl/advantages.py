"""Group-relative advantage estimators for GRPO-style RL.

Every estimator maps rewards_BxG (B prompts x G samples per prompt) to adv_BxG. They are pure
jnp functions (jit-able); the group size G is static, so the G == 1 branches are plain Python.

`std` below is always the POPULATION standard deviation over the group (ddof=0, numpy's default
and what `jnp.std` computes), not the sample std (ddof=1).
"""

from __future__ import annotations

from typing import Callable

import jax.numpy as jnp

from kernelzero_jax.registry import Registry

AdvantageFn = Callable[..., jnp.ndarray]
ADVANTAGE_ESTIMATORS: Registry[AdvantageFn] = Registry("advantage estimator")


def register_advantage_estimator(name: str) -> Callable[[AdvantageFn], AdvantageFn]:
  """Decorator: `@register_advantage_estimator("mine")` makes `fn(rewards_BxG, eps)` selectable."""
  return ADVANTAGE_ESTIMATORS.register(name)


def get_advantage_estimator(name: str) -> AdvantageFn:
  return ADVANTAGE_ESTIMATORS.lookup(name)


@register_advantage_estimator("grpo")
def grpo_advantages(rewards_BxG: jnp.ndarray, eps: float = 1e-6) -> jnp.ndarray:
  """(r - mean_g) / (std_g + eps), std with ddof=0. A tied group (incl. G == 1) gives 0."""
  mean_Bx1 = rewards_BxG.mean(axis=1, keepdims=True)
  std_Bx1 = rewards_BxG.std(axis=1, keepdims=True)  # ddof=0
  return (rewards_BxG - mean_Bx1) / (std_Bx1 + eps)


@register_advantage_estimator("drgrpo")
def drgrpo_advantages(rewards_BxG: jnp.ndarray, eps: float = 1e-6) -> jnp.ndarray:
  """r - mean_g. Dr. GRPO drops the std division, which up-weights low-variance groups."""
  del eps  # No division, nothing to protect.
  return rewards_BxG - rewards_BxG.mean(axis=1, keepdims=True)


@register_advantage_estimator("rloo")
def rloo_advantages(rewards_BxG: jnp.ndarray, eps: float = 1e-6) -> jnp.ndarray:
  """r_i - mean of the other G-1 samples (leave-one-out baseline, unbiased).

  With G == 1 there is no other sample to form a baseline; we define the advantage as 0 so a
  singleton group contributes no gradient (same as grpo/drgrpo on a singleton).
  """
  del eps
  g = rewards_BxG.shape[1]
  if g == 1:
    return jnp.zeros_like(rewards_BxG)
  others_mean_BxG = (rewards_BxG.sum(axis=1, keepdims=True) - rewards_BxG) / (g - 1)
  return rewards_BxG - others_mean_BxG


def compute_advantages(rewards_BxG: jnp.ndarray, estimator: str = "grpo",
                       eps: float = 1e-6) -> jnp.ndarray:
  """Advantages adv_BxG from the estimator named by a config string."""
  rewards_BxG = jnp.asarray(rewards_BxG)
  if rewards_BxG.ndim != 2:
    raise ValueError(f"rewards must be B x G, got shape {rewards_BxG.shape}")
  return get_advantage_estimator(estimator)(rewards_BxG, eps)


def tied_groups(rewards_BxG: jnp.ndarray, atol: float = 1e-6) -> jnp.ndarray:
  """tied_B: groups whose rewards all agree within atol (max - min <= atol).

  A tolerance, not `== 0`, because rewards such as 1 + beta*S are floats whose tiny differences
  (e.g. timing noise in S) carry no real learning signal.
  """
  rewards_BxG = jnp.asarray(rewards_BxG)
  spread_B = rewards_BxG.max(axis=1) - rewards_BxG.min(axis=1)
  return spread_B <= atol


def tie_fraction(rewards_BxG: jnp.ndarray, atol: float = 1e-6) -> jnp.ndarray:
  """Fraction of groups whose rewards all tie within atol (a zero-signal diagnostic)."""
  return tied_groups(rewards_BxG, atol).mean()


def dynamic_filter_mask(rewards_BxG: jnp.ndarray, atol: float = 1e-6) -> jnp.ndarray:
  """keep_B: True for groups with signal (not all tied), DAPO-style dynamic sampling."""
  return ~tied_groups(rewards_BxG, atol)
