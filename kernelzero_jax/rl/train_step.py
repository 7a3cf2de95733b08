"""The policy-gradient train step: one pure function, jitted once, with donated state.

  graphdef, state = init_train_state(model, optimizer, seed=0)
  step_fn = jax.jit(make_train_step(graphdef, optimizer, LossConfig(), num_micro_batches=4,
                                    schedule=make_schedule(opt_cfg)), donate_argnums=0)
  state, metrics = step_fn(state, batch)

Master weights and optimizer state are float32; the loss casts the params to `compute_dtype`
(bfloat16 by default) before the forward pass, so gradients come back in float32.

A batch is a dict of arrays over B sequences of T tokens (prompt + completion, left- or right-
padded):
  tokens_BxT          int32  token ids
  valid_BxT           bool   real (non-pad) tokens of prompt and completion
  completion_mask_BxT float  1 on completion tokens only (the tokens the loss trains)
  old_logp_BxT        float  logprobs of the tokens under the sampling policy (aligned like
                             `sequence_logprobs`)
  adv_B               float  one advantage per sequence
  ref_logp_BxT        float  optional, logprobs under the reference policy (needs beta_kl > 0)
  truncated_B         bool   optional, completions that hit the length cap (excluded)

Gradient accumulation splits B into `num_micro_batches` equal slices scanned in order; each
slice's loss uses the FULL batch's normaliser, so the summed gradients equal the unsplit ones.

`forward_options` (the model's `ForwardOptions`) pick a fused attention and per-layer remat for
the forward and backward passes; the default is the model's plain path.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import flax.struct
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from kernelzero_jax.model.qwen2 import (ForwardOptions, causal_padding_mask,
                                        positions_from_segments, positions_from_valid,
                                        segment_causal_mask)
from kernelzero_jax.rl import losses


# Config strings of the dtypes a step computes (or a sampler runs) in.
DTYPES = {"bfloat16": jnp.bfloat16, "float32": jnp.float32}


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  learning_rate: float = 1e-6
  warmup_steps: int = 0
  total_steps: int = 1000
  schedule: str = "cosine"  # "cosine" | "constant" (both after a linear warmup from 0)
  weight_decay: float = 0.0
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  max_grad_norm: float = 1.0  # global-norm clipping; <= 0 disables it


def make_schedule(cfg: OptimizerConfig) -> optax.Schedule:
  if cfg.schedule == "cosine":
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0 if cfg.warmup_steps else cfg.learning_rate, peak_value=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps, decay_steps=max(cfg.total_steps, cfg.warmup_steps + 1),
        end_value=0.0)
  if cfg.schedule == "constant":
    if not cfg.warmup_steps:
      return optax.constant_schedule(cfg.learning_rate)
    return optax.join_schedules(
        [optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_steps),
         optax.constant_schedule(cfg.learning_rate)], [cfg.warmup_steps])
  raise ValueError(f"unknown schedule {cfg.schedule!r}; known: cosine, constant")


def _path_names(path) -> list[str]:
  return [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]


def weight_decay_mask(params: Any) -> Any:
  """True for the parameters that weight decay applies to: the weight matrices and the
  embedding. Biases (`bq_NxH`, ...) and norm scales are not decayed: shrinking them toward 0
  only changes the function, it does not regularise it. Shape alone cannot tell (a bias here is
  2-D, heads x head_dim), so the model's parameter names decide."""
  def decays(path, _):
    names = _path_names(path)
    leaf = next((n for n in reversed(names) if n != "value"), "")
    is_bias = leaf.startswith("b") and "_" in leaf
    return not is_bias and not any(n.endswith("norm") for n in names)
  return jax.tree_util.tree_map_with_path(decays, params)


def make_optimizer(cfg: OptimizerConfig) -> optax.GradientTransformation:
  adamw = optax.adamw(make_schedule(cfg), b1=cfg.b1, b2=cfg.b2, eps=cfg.eps,
                      weight_decay=cfg.weight_decay, mask=weight_decay_mask)
  if cfg.max_grad_norm > 0:
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), adamw)
  return adamw


@dataclasses.dataclass(frozen=True)
class LossConfig:
  aggregation: str = "token_mean"
  eps_low: float = 0.2
  eps_high: float = 0.28
  beta_kl: float = 0.0
  max_completion_len: Optional[int] = None  # the constant of "drgrpo_constant" (default T)


@flax.struct.dataclass
class TrainState:
  """Everything a step changes; the model's graphdef stays static (outside, in the closure)."""
  params: Any     # nnx.State of nnx.Param, float32 master weights
  opt_state: Any  # optax state over `params`, float32
  step: jax.Array  # int32, number of optimizer steps taken
  rng: jax.Array   # uint32[2] PRNG key, split once per step


def init_train_state(model: nnx.Module, optimizer: optax.GradientTransformation,
                     seed: int = 0) -> tuple[nnx.GraphDef, TrainState]:
  """Splits `model` into (graphdef, float32 params). Non-Param state is not supported: the
  train step merges the graphdef with the params alone."""
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  if jax.tree.leaves(rest):
    raise ValueError("the train step expects a model whose state is all nnx.Param")
  params = jax.tree.map(lambda p: p.astype(jnp.float32), params)
  state = TrainState(params=params, opt_state=optimizer.init(params),
                     step=jnp.zeros((), jnp.int32), rng=jax.random.PRNGKey(seed))
  return graphdef, state


def sequence_logprobs(model, tokens_BxT: jax.Array, valid_BxT: jax.Array,
                      options: ForwardOptions | None = None,
                      segment_ids_BxT: jax.Array | None = None,
                      temperature: float = 1.0) -> tuple[jax.Array, jax.Array]:
  """(logp_BxT, entropy_BxT) in float32, aligned with the tokens: logp_BxT[:, t] is
  log p(tokens[:, t] | tokens[:, <t]) and entropy_BxT[:, t] the entropy of that distribution.
  Column 0 (no context) is 0. With `segment_ids_BxT` (packing; 0 marks padding) each row holds
  several sequences that do not see each other. `temperature` scores the distribution
  softmax(logits / temperature): the one a sampler at that temperature draws from.

  With a fused attention (`options.attention` "xla" / "cudnn", causal over right-padded rows)
  each row's real tokens are first moved to its front, in order (a stable per-row permutation,
  so any padding works: left, right or both), and the results are moved back. At every real
  token but a row's first the values equal the default path's; a row's first real token has no
  context and gets 0 here, where the default path conditions it on the padding before it.
  Padding positions hold meaningless, finite values on both paths (the loss masks them out).
  """
  if segment_ids_BxT is not None:
    # Packed rows (several sequences per row): block-diagonal causal attention, positions
    # restarting per sequence. Only the einsum attention takes an arbitrary mask.
    if options is not None and options.fused_attention:
      raise ValueError("packed rows (segment ids) need ForwardOptions(attention='einsum')")
    kwargs = {} if options is None else {"options": options}
    logits_BxTxV, _ = model(tokens_BxT, positions_from_segments(segment_ids_BxT),
                            segment_causal_mask(segment_ids_BxT), **kwargs)
    return _logprobs_and_entropy(logits_BxTxV, tokens_BxT, temperature)
  if options is None or not options.fused_attention:
    positions_BxT = positions_from_valid(valid_BxT)
    kwargs = {} if options is None else {"options": options}  # any model, by default
    logits_BxTxV, _ = model(tokens_BxT, positions_BxT, causal_padding_mask(valid_BxT), **kwargs)
    return _logprobs_and_entropy(logits_BxTxV, tokens_BxT, temperature)
  b, t = tokens_BxT.shape
  valid_BxT = valid_BxT.astype(bool)
  order_BxT = jnp.argsort(~valid_BxT, axis=1, stable=True)  # real tokens first, in order
  packed_BxT = jnp.take_along_axis(tokens_BxT, order_BxT, axis=1)
  positions_BxT = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
  logits_BxTxV, _ = model(packed_BxT, positions_BxT, options=options)
  logp_BxT, entropy_BxT = _logprobs_and_entropy(logits_BxTxV, packed_BxT, temperature)
  inverse_BxT = jnp.argsort(order_BxT, axis=1)
  return (jnp.take_along_axis(logp_BxT, inverse_BxT, axis=1),
          jnp.take_along_axis(entropy_BxT, inverse_BxT, axis=1))


def _logprobs_and_entropy(logits_BxTxV: jax.Array, tokens_BxT: jax.Array,
                          temperature: float = 1.0) -> tuple[jax.Array, jax.Array]:
  if not temperature > 0:
    raise ValueError(f"temperature must be > 0, got {temperature}")
  logits_BxTxV = logits_BxTxV[:, :-1].astype(jnp.float32)
  if temperature != 1.0:
    logits_BxTxV = logits_BxTxV / temperature
  logprobs_BxTxV = jax.nn.log_softmax(logits_BxTxV, axis=-1)
  logp_BxT = jnp.take_along_axis(logprobs_BxTxV, tokens_BxT[:, 1:, None], axis=-1)[..., 0]
  entropy_BxT = -(jnp.exp(logprobs_BxTxV) * logprobs_BxTxV).sum(axis=-1)
  pad_Bx1 = jnp.zeros((tokens_BxT.shape[0], 1), jnp.float32)
  return (jnp.concatenate([pad_Bx1, logp_BxT], axis=1),
          jnp.concatenate([pad_Bx1, entropy_BxT], axis=1))


def tokens_per_second(num_tokens, wall_seconds: float) -> float:
  """Throughput for logging; `num_tokens` is the step's `metrics["num_tokens"]`."""
  return float(num_tokens) / max(wall_seconds, 1e-9)


class Objective(NamedTuple):
  """What a train step minimises, given the policy's logprobs of the batch's tokens.

  normalizer(batch) -> scalar: the FULL batch's denominator, shared by every micro-batch so
    that the micro-batch losses (sums over their rows / normalizer) add up to the batch loss.
  loss(logp_BxT, entropy_BxT, micro_batch, normalizer) -> (loss, metric_sums): the metric
    sums add up over micro-batches; the step divides them by the number of loss tokens.
  loss_mask(batch) -> [B, T]: the tokens the loss trains (for token counts and means).
  """
  normalizer: Callable[[dict], jax.Array]
  loss: Callable[[jax.Array, jax.Array, dict, jax.Array], tuple[jax.Array, dict]]
  loss_mask: Callable[[dict], jax.Array]


def policy_objective(cfg: LossConfig) -> Objective:
  """The clipped-surrogate policy loss of `losses.policy_loss` (batch keys in the module doc)."""

  def loss_mask(batch):
    return losses.apply_truncation(batch["completion_mask_BxT"], batch.get("truncated_B"))

  def normalizer(batch):
    return losses.loss_normalizer(cfg.aggregation, batch["completion_mask_BxT"],
                                  batch.get("truncated_B"), cfg.max_completion_len)

  def loss(logp_BxT, entropy_BxT, mb, norm):
    value, m = losses.policy_loss(
        logp_BxT, mb["old_logp_BxT"], mb["adv_B"], mb["completion_mask_BxT"],
        ref_logp_BxT=mb.get("ref_logp_BxT"), eps_low=cfg.eps_low, eps_high=cfg.eps_high,
        beta_kl=cfg.beta_kl, aggregation=cfg.aggregation, normalizer=norm,
        truncated_B=mb.get("truncated_B"), max_completion_len=cfg.max_completion_len)
    # policy_loss's metrics are means over this slice's loss tokens: turn them into sums so
    # slices add up; entropy is summed over all completion tokens.
    n_loss = loss_mask(mb).sum().astype(jnp.float32)
    sums = {k: v * n_loss for k, v in m.items()}
    sums["entropy"] = jax.lax.stop_gradient(
        entropy_BxT * mb["completion_mask_BxT"].astype(jnp.float32)).sum()
    return value, sums

  return Objective(normalizer=normalizer, loss=loss, loss_mask=loss_mask)


def make_train_step(graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
                    loss_config: LossConfig = LossConfig(), num_micro_batches: int = 1,
                    compute_dtype=jnp.bfloat16, schedule: Optional[optax.Schedule] = None,
                    forward_options: Optional[ForwardOptions] = None,
                    objective: Optional[Objective] = None, temperature: float = 1.0
                    ) -> Callable[[TrainState, dict], tuple[TrainState, dict]]:
  """A pure `train_step(state, batch) -> (state, metrics)`; jit it once with donate_argnums=0.

  `objective` is what it minimises: by default the policy loss configured by `loss_config`;
  the SFT trainer passes its cross-entropy (same step, checkpoints and metrics). A batch may
  carry `segment_ids_BxT` for packed rows (see `sequence_logprobs`).
  `schedule` (the optimizer's, see `make_schedule`) only feeds the learning_rate metric.
  `forward_options` (fused attention, remat; see `ForwardOptions`) change how the policy's
  forward and backward passes compute, not the step's result (up to rounding).
  `temperature` is the distribution the step trains (see `sequence_logprobs`): RL rollouts drawn
  at temperature T are scored, and their logprobs raised or lowered, at T.
  """
  objective = objective or policy_objective(loss_config)
  n_micro = num_micro_batches

  def loss_fn(params, mb, normalizer):
    params_c = jax.tree.map(lambda p: p.astype(compute_dtype), params)
    logp_BxT, entropy_BxT = sequence_logprobs(nnx.merge(graphdef, params_c), mb["tokens_BxT"],
                                              mb["valid_BxT"], forward_options,
                                              mb.get("segment_ids_BxT"), temperature)
    return objective.loss(logp_BxT, entropy_BxT, mb, normalizer)

  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

  def train_step(state: TrainState, batch: dict) -> tuple[TrainState, dict]:
    batch = {k: v for k, v in batch.items() if v is not None}
    normalizer = objective.normalizer(batch)
    b = batch["tokens_BxT"].shape[0]
    if b % n_micro:
      raise ValueError(f"batch size {b} is not a multiple of num_micro_batches {n_micro}")
    micro_batches = jax.tree.map(lambda x: x.reshape(n_micro, b // n_micro, *x.shape[1:]), batch)

    def accumulate(carry, mb):
      grads_acc, loss_acc, sums_acc = carry
      (loss, sums), grads = grad_fn(state.params, mb, normalizer)
      return (jax.tree.map(jnp.add, grads_acc, grads), loss_acc + loss,
              jax.tree.map(jnp.add, sums_acc, sums)), None

    zero_sums = jax.eval_shape(lambda: loss_fn(state.params, jax.tree.map(lambda x: x[0],
                                                                          micro_batches),
                                               normalizer)[1])
    carry0 = (jax.tree.map(jnp.zeros_like, state.params), jnp.zeros((), jnp.float32),
              jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zero_sums))
    if n_micro == 1:  # no scan: identical to the plain step
      grads, loss, sums = accumulate(carry0, jax.tree.map(lambda x: x[0], micro_batches))[0]
    else:
      grads, loss, sums = jax.lax.scan(accumulate, carry0, micro_batches)[0]

    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    rng, _ = jax.random.split(state.rng)

    loss_mask_BxT = objective.loss_mask(batch)
    n_loss = jnp.maximum(loss_mask_BxT.sum(), 1.0)
    metrics = {k: v / n_loss for k, v in sums.items() if k != "entropy"}
    if "entropy" in sums:
      n_completion = jnp.maximum(batch["completion_mask_BxT"].astype(jnp.float32).sum(), 1.0)
      metrics["entropy"] = sums["entropy"] / n_completion
    metrics.update(
        loss=loss,
        grad_norm=optax.tree.norm(grads),
        param_norm=optax.tree.norm(params),
        update_norm=optax.tree.norm(updates),
        num_tokens=batch["valid_BxT"].astype(jnp.int32).sum(),
        num_loss_tokens=loss_mask_BxT.sum(),
    )
    if schedule is not None:
      metrics["learning_rate"] = jnp.asarray(schedule(state.step), jnp.float32)
    new_state = state.replace(params=params, opt_state=opt_state, step=state.step + 1, rng=rng)
    return new_state, metrics

  return train_step
