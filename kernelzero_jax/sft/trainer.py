"""Supervised fine-tuning: next-token cross-entropy on completion tokens, prompts masked.

It is the RL learner's train step with another `Objective` (same jit, donation, micro-batching,
optimizer, metrics and Orbax checkpoints), over packed rows of (prompt, completion) pairs:

  trainer = SFTTrainer(SFTConfig(...), model, train_rows, heldout_rows)
  trainer.run(workdir)   # resumes from workdir's latest checkpoint

The rows of step s are a function of (seed, s): each epoch visits every row once in an order
drawn from (seed, epoch), so a resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from kernelzero_jax.model.qwen2 import ForwardOptions
from kernelzero_jax.rl import train_step as ts
from kernelzero_jax.rl.loop import run_resumable
from kernelzero_jax.sft.data import PackedRows


def cross_entropy_objective() -> ts.Objective:
  """Token-mean negative log-likelihood over `completion_mask_BxT` (the completion tokens).

  The denominator is the full batch's number of completion tokens, so micro-batches add up to
  the batch loss exactly (as for the policy loss)."""

  def loss_mask(batch):
    return batch["completion_mask_BxT"].astype(jnp.float32)

  def normalizer(batch):
    return jnp.maximum(loss_mask(batch).sum(), 1.0)

  def loss(logp_BxT, entropy_BxT, mb, norm):
    del entropy_BxT
    nll_sum = -(logp_BxT * loss_mask(mb)).sum()
    return nll_sum / norm, {"nll": jax.lax.stop_gradient(nll_sum)}

  return ts.Objective(normalizer=normalizer, loss=loss, loss_mask=loss_mask)


@dataclasses.dataclass(frozen=True)
class SFTConfig:
  seed: int = 0
  num_steps: int = 100
  batch_size: int = 8          # packed rows per optimizer step
  seq_len: int = 2048          # tokens per packed row
  optimizer: ts.OptimizerConfig = ts.OptimizerConfig(learning_rate=1e-5, warmup_steps=10,
                                                     total_steps=100)
  num_micro_batches: int = 1
  compute_dtype: str = "bfloat16"
  forward: ForwardOptions = ForwardOptions()  # packing needs the default (einsum) attention
  eval_every: int = 25         # held-out loss every this many steps (and at the end)
  checkpoint_every: int = 25
  max_checkpoints: int = 3

  def __post_init__(self):
    if self.batch_size % self.num_micro_batches:
      raise ValueError(f"batch_size {self.batch_size} is not a multiple of num_micro_batches "
                       f"{self.num_micro_batches}")
    if self.compute_dtype not in ts.DTYPES:
      raise ValueError(f"compute_dtype must be one of {sorted(ts.DTYPES)}")
    if self.forward.fused_attention:
      raise ValueError("SFT packs several examples per row, which needs the einsum attention")


def epoch_rows(num_rows: int, batch_size: int, seed: int, step: int) -> np.ndarray:
  """The row indices of optimizer step `step` (1-based): epochs of shuffled rows, in order."""
  positions = (step - 1) * batch_size + np.arange(batch_size)
  epochs, offsets = np.divmod(positions, num_rows)
  perms = {e: np.random.default_rng([seed, int(e)]).permutation(num_rows) for e in set(epochs)}
  return np.array([perms[e][o] for e, o in zip(epochs, offsets)])


class SFTTrainer:

  def __init__(self, config: SFTConfig, model: nnx.Module, train_rows: PackedRows,
               heldout_rows: Optional[PackedRows] = None, progress: bool = True):
    if len(train_rows) == 0:
      raise ValueError("no training rows (every example longer than seq_len?)")
    self.config = config
    self.train_rows = train_rows
    self.heldout_rows = heldout_rows if heldout_rows is not None and len(heldout_rows) else None
    self.progress = progress
    self.optimizer = ts.make_optimizer(config.optimizer)
    self.graphdef, self.state = ts.init_train_state(model, self.optimizer, seed=config.seed)
    compute_dtype = ts.DTYPES[config.compute_dtype]
    objective = cross_entropy_objective()
    self._train_step = jax.jit(
        ts.make_train_step(self.graphdef, self.optimizer, num_micro_batches=config.num_micro_batches,
                           compute_dtype=compute_dtype,
                           schedule=ts.make_schedule(config.optimizer),
                           forward_options=config.forward, objective=objective),
        donate_argnums=0)
    graphdef = self.graphdef

    def nll_and_count(params, batch):
      params_c = jax.tree.map(lambda p: p.astype(compute_dtype), params)
      logp_BxT, _ = ts.sequence_logprobs(nnx.merge(graphdef, params_c), batch["tokens_BxT"],
                                         batch["valid_BxT"], config.forward,
                                         batch["segment_ids_BxT"])
      mask_BxT = batch["completion_mask_BxT"]
      return -(logp_BxT * mask_BxT).sum(), mask_BxT.sum()

    self._nll_and_count = jax.jit(nll_and_count)

  def heldout_loss(self) -> Optional[float]:
    """Token-mean NLL of the held-out completions under the current parameters."""
    rows = self.heldout_rows
    if rows is None:
      return None
    b = self.config.batch_size // self.config.num_micro_batches  # bounded memory, one shape
    total, count = 0.0, 0.0
    for start in range(0, len(rows), b):
      idx = np.arange(start, start + b) % len(rows)
      batch = rows.batch(idx)
      # Rows past the end (wrapped around to fill the shape) must not count twice.
      batch["completion_mask_BxT"] = batch["completion_mask_BxT"] * (
          np.arange(start, start + b) < len(rows))[:, None]
      nll, n = jax.device_get(self._nll_and_count(self.state.params, batch))
      total, count = total + float(nll), count + float(n)
    return total / max(count, 1.0)

  def step(self, step: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = epoch_rows(len(self.train_rows), self.config.batch_size, self.config.seed, step)
    self.state, metrics = self._train_step(self.state, self.train_rows.batch(rows))
    metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
    metrics["tokens_per_s"] = ts.tokens_per_second(metrics["num_tokens"],
                                                   time.perf_counter() - t0)
    metrics["epoch"] = (step * self.config.batch_size) / len(self.train_rows)
    return metrics

  def _step_and_eval(self, step: int) -> dict[str, Any]:
    metrics = self.step(step)
    if step % self.config.eval_every == 0 or step == self.config.num_steps:
      metrics["heldout_loss"] = self.heldout_loss()
    return metrics

  def run(self, workdir: str) -> dict[str, Any]:
    cfg = self.config
    return run_resumable(
        self, workdir, self._step_and_eval, num_steps=cfg.num_steps,
        checkpoint_every=cfg.checkpoint_every, max_checkpoints=cfg.max_checkpoints,
        progress=self.progress, desc="sft", postfix=lambda m: dict(loss=f"{m['loss']:.3f}"),
        initial_metrics=lambda: (None if self.heldout_rows is None
                                 else {"heldout_loss": self.heldout_loss()}))
