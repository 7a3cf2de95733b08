"""A tiny resumable training run for the kill-and-resume test.

  python tests/resume_run.py WORKDIR --steps K [--seed S]

Trains the tiny model for K steps on data derived from (seed, step), checkpointing every step
and logging metrics.jsonl; started again on the same workdir it resumes from the latest
checkpoint.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
from flax import nnx

from kernelzero_jax.metrics import MetricsWriter
from kernelzero_jax.model.config import PRESETS
from kernelzero_jax.model.qwen2 import Qwen2
from kernelzero_jax.rl import train_step as ts
from kernelzero_jax.rl.checkpointing import Checkpointer

B, T, PROMPT = 4, 8, 3


def make_batch(seed: int, step: int) -> dict:
  k_tok, k_adv, k_old = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), step), 3)
  completion_BxT = jnp.broadcast_to(jnp.arange(T) >= PROMPT, (B, T)).astype(jnp.float32)
  return dict(tokens_BxT=jax.random.randint(k_tok, (B, T), 1, PRESETS["tiny"].vocab_size),
              valid_BxT=jnp.ones((B, T), bool), completion_mask_BxT=completion_BxT,
              old_logp_BxT=-7.0 + 0.1 * jax.random.normal(k_old, (B, T)),
              adv_B=jax.random.normal(k_adv, (B,)))


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("workdir")
  parser.add_argument("--steps", type=int, default=6)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  opt_cfg = ts.OptimizerConfig(learning_rate=1e-3, warmup_steps=2, total_steps=args.steps)
  optimizer = ts.make_optimizer(opt_cfg)
  graphdef, state = ts.init_train_state(Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(args.seed)),
                                        optimizer, seed=args.seed)
  step_fn = jax.jit(ts.make_train_step(graphdef, optimizer, num_micro_batches=2,
                                       compute_dtype=jnp.float32,
                                       schedule=ts.make_schedule(opt_cfg)), donate_argnums=0)
  with Checkpointer(args.workdir, max_to_keep=2) as ckpt:
    restored = ckpt.restore_latest(state)
    learner = {"seed": args.seed, "step": 0}
    if restored is not None:
      state, learner = restored
    with MetricsWriter(args.workdir, resume_step=learner["step"]) as writer:
      for step in range(int(state.step) + 1, args.steps + 1):
        state, metrics = step_fn(state, make_batch(args.seed, step))
        writer.write(step, jax.device_get(metrics))
        ckpt.save(step, state, {"seed": args.seed, "step": step})
        ckpt.wait()  # the next step donates `state`; never let it race the write


if __name__ == "__main__":
  main()
