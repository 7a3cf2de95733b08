"""Token-level clipped-surrogate policy loss (PPO/GRPO/DAPO family) with pluggable aggregation.

Shapes: B sequences (completions) x T completion tokens. mask_BxT is 1 on completion tokens and 0
on padding. adv_B is one advantage per sequence, broadcast over its tokens.

Gradient accumulation. The aggregation's denominator must be the FULL batch's, otherwise the mean
of micro-batch means is not the batch mean (e.g. token_mean with micro-batches holding different
numbers of tokens). So the API splits an aggregation into
  normalizer(mask_BxT, num_seqs, max_len) -> scalar   # computed once on the full batch
  reduce(loss_BxT, mask_BxT, normalizer)  -> scalar   # a SUM over the rows, / normalizer
and because every `reduce` is a sum over rows divided by a shared constant, the losses (and the
gradients) of micro-batches computed with the full-batch normalizer add up to the full-batch ones:

  norm = loss_normalizer("token_mean", mask_BxT, truncated_B)      # full batch
  total = sum(policy_loss(..., micro-batch slices ..., normalizer=norm)[0] for each micro-batch)
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from kernelzero_jax.registry import Registry


class Aggregation(NamedTuple):
  normalizer: Callable[..., jnp.ndarray]  # (mask_BxT, num_seqs, max_len) -> scalar denominator
  reduce: Callable[..., jnp.ndarray]      # (loss_BxT, mask_BxT, normalizer) -> scalar loss


AGGREGATIONS: Registry[Aggregation] = Registry("loss aggregation")


def register_aggregation(name: str, normalizer: Callable[..., jnp.ndarray]):
  """Decorator on a `reduce` fn; registers Aggregation(normalizer, reduce) under `name`."""
  def wrap(reduce_fn):
    AGGREGATIONS.add(name, Aggregation(normalizer, reduce_fn))
    return reduce_fn
  return wrap


def get_aggregation(name: str) -> Aggregation:
  return AGGREGATIONS.lookup(name)


def _masked_sum(loss_BxT, mask_BxT):
  return (loss_BxT * mask_BxT).sum()


# token_mean: every completion token of the batch weighs the same (DAPO).
def _token_count(mask_BxT, num_seqs=None, max_len=None):
  del num_seqs, max_len
  # max(., 1): a batch without tokens gives loss 0 rather than 0/0.
  return jnp.maximum(mask_BxT.sum(), 1.0)


@register_aggregation("token_mean", _token_count)
def token_mean(loss_BxT, mask_BxT, normalizer):
  return _masked_sum(loss_BxT, mask_BxT) / normalizer


# seq_mean_token_mean: every sequence weighs the same (original GRPO). A sequence lies entirely
# in one micro-batch, so its token mean is exact locally; only the count of sequences is global.
def _nonempty_seq_count(mask_BxT, num_seqs=None, max_len=None):
  del num_seqs, max_len
  return jnp.maximum((mask_BxT.sum(axis=1) > 0).sum(), 1).astype(mask_BxT.dtype)


@register_aggregation("seq_mean_token_mean", _nonempty_seq_count)
def seq_mean_token_mean(loss_BxT, mask_BxT, normalizer):
  tokens_B = mask_BxT.sum(axis=1)
  # Empty sequences have a zero numerator; dividing by max(n, 1) keeps them at 0 (excluded).
  seq_mean_B = (loss_BxT * mask_BxT).sum(axis=1) / jnp.maximum(tokens_B, 1.0)
  return seq_mean_B.sum() / normalizer


# drgrpo_constant: a constant denominator (Dr. GRPO) removes the length bias of per-sequence means.
def _constant_count(mask_BxT, num_seqs=None, max_len=None):
  num_seqs = mask_BxT.shape[0] if num_seqs is None else num_seqs
  max_len = mask_BxT.shape[1] if max_len is None else max_len
  return jnp.asarray(num_seqs * max_len, dtype=mask_BxT.dtype)


@register_aggregation("drgrpo_constant", _constant_count)
def drgrpo_constant(loss_BxT, mask_BxT, normalizer):
  return _masked_sum(loss_BxT, mask_BxT) / normalizer


def apply_truncation(mask_BxT: jnp.ndarray, truncated_B: Optional[jnp.ndarray]) -> jnp.ndarray:
  """Zero the mask of truncated completions (they hit the length cap; their reward is unreliable)."""
  mask_BxT = jnp.asarray(mask_BxT, dtype=float)  # bool/int masks -> default float dtype
  if truncated_B is None:
    return mask_BxT
  keep_B = 1.0 - jnp.asarray(truncated_B, dtype=mask_BxT.dtype)
  return mask_BxT * keep_B[:, None]


def loss_normalizer(aggregation: str, mask_BxT: jnp.ndarray,
                    truncated_B: Optional[jnp.ndarray] = None,
                    max_completion_len: Optional[int] = None) -> jnp.ndarray:
  """The full-batch denominator, to pass as `normalizer=` to each micro-batch's policy_loss."""
  mask_BxT = apply_truncation(mask_BxT, truncated_B)
  return get_aggregation(aggregation).normalizer(mask_BxT, mask_BxT.shape[0], max_completion_len)


def k3(log_p_BxT: jnp.ndarray, log_q_BxT: jnp.ndarray) -> jnp.ndarray:
  """k3 estimator of KL(q || p) on samples from q: exp(log_p - log_q) - (log_p - log_q) - 1 >= 0."""
  d_BxT = log_p_BxT - log_q_BxT
  return jnp.exp(d_BxT) - d_BxT - 1.0


def per_token_loss(logp_BxT, old_logp_BxT, adv_B, eps_low=0.2, eps_high=0.28,
                   ref_logp_BxT=None, beta_kl=0.0):
  """Per-token -min(r*A, clip(r, 1-eps_low, 1+eps_high)*A) [+ beta_kl * k3(ref, logp)].

  Returns (loss_BxT, aux) where aux holds per-token ratio, clipped indicator and kl (or None).
  """
  adv_Bx1 = jnp.asarray(adv_B, logp_BxT.dtype)[:, None]
  ratio_BxT = jnp.exp(logp_BxT - old_logp_BxT)
  unclipped_BxT = ratio_BxT * adv_Bx1
  clipped_BxT = jnp.clip(ratio_BxT, 1.0 - eps_low, 1.0 + eps_high) * adv_Bx1
  loss_BxT = -jnp.minimum(unclipped_BxT, clipped_BxT)
  # The clipped branch wins (and the gradient vanishes) only on the side the advantage pushes
  # towards: r > 1+eps_high with A > 0, r < 1-eps_low with A < 0.
  is_clipped_BxT = (((ratio_BxT > 1.0 + eps_high) & (adv_Bx1 > 0))
                    | ((ratio_BxT < 1.0 - eps_low) & (adv_Bx1 < 0)))
  kl_BxT = None
  if beta_kl > 0:
    if ref_logp_BxT is None:
      raise ValueError("beta_kl > 0 needs ref_logp_BxT")
    kl_BxT = k3(ref_logp_BxT, logp_BxT)  # KL(pi || ref), samples from pi
    loss_BxT = loss_BxT + beta_kl * kl_BxT
  return loss_BxT, {"ratio": ratio_BxT, "is_clipped": is_clipped_BxT, "kl": kl_BxT}


def policy_loss(logp_BxT, old_logp_BxT, adv_B, mask_BxT, *, ref_logp_BxT=None,
                eps_low: float = 0.2, eps_high: float = 0.28, beta_kl: float = 0.0,
                aggregation: str = "token_mean", normalizer=None, truncated_B=None,
                max_completion_len: Optional[int] = None):
  """Aggregated clipped-surrogate loss and metrics.

  normalizer: the full-batch denominator (see `loss_normalizer`) when this call sees one
    micro-batch; None computes it from this call's own batch.
  truncated_B: optional bool per sequence; truncated completions get mask 0.
  max_completion_len: the constant of "drgrpo_constant" (defaults to T).

  Metrics are means over this call's masked tokens (not accumulation-aware): clip_fraction,
  approx_kl (k3 of the new policy against the sampling one), ratio_mean and, when beta_kl > 0,
  kl_to_ref.
  """
  agg = get_aggregation(aggregation)
  mask_BxT = apply_truncation(mask_BxT, truncated_B).astype(logp_BxT.dtype)
  if normalizer is None:
    normalizer = agg.normalizer(mask_BxT, mask_BxT.shape[0], max_completion_len)
  loss_BxT, aux = per_token_loss(logp_BxT, old_logp_BxT, adv_B, eps_low, eps_high,
                                 ref_logp_BxT, beta_kl)
  loss = agg.reduce(loss_BxT, mask_BxT, normalizer)

  sg = jax.lax.stop_gradient
  n_tokens = jnp.maximum(mask_BxT.sum(), 1.0)
  masked_mean = lambda x_BxT: (sg(x_BxT) * mask_BxT).sum() / n_tokens
  metrics = {
      "clip_fraction": masked_mean(aux["is_clipped"].astype(mask_BxT.dtype)),
      "approx_kl": masked_mean(k3(logp_BxT, old_logp_BxT)),  # KL(old || new), samples from old
      "ratio_mean": masked_mean(aux["ratio"]),
  }
  if aux["kl"] is not None:
    metrics["kl_to_ref"] = masked_mean(aux["kl"])
  return loss, metrics
