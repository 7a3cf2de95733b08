"""The GRPO-family learner: sample G completions per prompt, score them, reward, update.

One learner serves every policy; what it learns comes from an `Environment`:

  env.make_prompts(step, num_prompts, rng) -> [Prompt]         # what to ask this step
  env.score(step, prompts, completions)    -> [result dict]    # one per completion, in order
  env.decode(token_ids)                    -> str              # a completion's text
  env.step_metrics(step)                   -> dict             # optional: the environment's own
                                                               # metrics of the step just scored

A result is what reward schedules read ({"correct", "status", "speedup", ...}; see
`kernelzero_jax.rl.rewards`), so the Coder's environment (the sandbox) and a toy environment in
the tests share the reward, advantage, loss and checkpoint machinery exactly.

One step:
  1. prompts from the environment (their choice and the sampling seed derive from (seed, step),
     so a resumed run asks and samples exactly what an uninterrupted one would);
  2. G samples per prompt from the JAX sampler, with the current parameters cast to the
     sampling dtype;
  3. results from the environment, rewards from the schedule named in the config, per group;
  4. group advantages; with `dynamic_sampling_max_rounds` > 1, more prompts are drawn, sampled
     and scored (up to that many rounds) until the batch can be filled with groups whose
     rewards do not all tie (DAPO's dynamic sampling); optional dynamic filtering of the tied
     groups left in the batch;
  5. `updates_per_batch` optimizer steps of the jitted, donated train step over the rollout,
     `epochs_per_batch` times;
  6. metrics (JSONL + TensorBoard), the step's samples (workdir/samples/), an Orbax checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Optional, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from kernelzero_jax import atomic_file
from kernelzero_jax.model.qwen2 import ForwardOptions
from kernelzero_jax.model.sharding import ShardingConfig, shard_model
from kernelzero_jax.rl import advantages as adv_lib
from kernelzero_jax.rl import rewards as rewards_lib
from kernelzero_jax.rl import train_step as ts
from kernelzero_jax.rl.loop import run_resumable
from kernelzero_jax.sampling.sampler import FINISH_LENGTH, Sampler, next_power_of_two


@dataclasses.dataclass(frozen=True)
class Prompt:
  task_id: str            # names the task in logs and samples (e.g. a module's name)
  token_ids: tuple[int, ...]
  payload: Any = None     # whatever the environment needs to score (e.g. the reference source)


@dataclasses.dataclass(frozen=True)
class Completion:
  prompt_index: int       # index into this step's prompts
  text: str
  token_ids: tuple[int, ...]
  finish_reason: str      # "stop" or "length"


class Environment(Protocol):

  def make_prompts(self, step: int, num_prompts: int, rng: np.random.Generator
                   ) -> list[Prompt]: ...

  def score(self, step: int, prompts: Sequence[Prompt], completions: Sequence[Completion]
            ) -> list[dict]: ...

  def decode(self, token_ids: Sequence[int]) -> str: ...


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
  prompts_per_step: int = 8
  group_size: int = 16
  max_new_tokens: int = 1024
  temperature: float = 1.0
  top_p: float = 1.0
  top_k: int = 0


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
  seed: int = 0
  num_steps: int = 20
  rollout: RolloutConfig = RolloutConfig()
  optimizer: ts.OptimizerConfig = ts.OptimizerConfig()
  loss: ts.LossConfig = ts.LossConfig()
  reward: rewards_lib.RewardConfig = rewards_lib.RewardConfig()
  reward_schedule: str = "ca_grpo"
  advantage_estimator: str = "grpo"
  advantage_eps: float = 1e-6
  tie_atol: float = 1e-6            # groups whose rewards spread <= this carry no signal
  dynamic_filtering: bool = False   # drop tied groups from the loss (and skip an all-tied step)
  # Rollout rounds per step: after each, if fewer than prompts_per_step groups have a reward
  # spread, another prompts_per_step prompts are sampled and scored. The batch takes the first
  # prompts_per_step untied groups (topped up with tied ones). 1: one round, as sampled. (A group
  # with a judging whose reference failed, result["reference_error"], has no signal either: it is
  # always left out of the loss, and counts as tied here.) The
  # environment scores each round as it comes (score() is called once per round with the same
  # step), so its own `env/` metrics should add its rounds up, as the Proposer's do.
  dynamic_sampling_max_rounds: int = 1
  mask_truncated: bool = False      # exclude completions that hit max_new_tokens from the loss
  updates_per_batch: int = 1        # optimizer steps per rollout batch (mini-batches, in order)
  # Passes over each rollout batch (GRPO's mu): every judged sample trains the policy this many
  # times, each pass's ratio taken against the logprobs of the policy that sampled it, so the
  # clip bounds how far the passes move it. More learning per sandbox verdict, which is what an
  # RL step of the Coder waits for. The optimizer takes num_steps * updates_per_batch *
  # epochs_per_batch steps in all (what optimizer.total_steps counts).
  epochs_per_batch: int = 1
  num_micro_batches: int = 1        # gradient accumulation inside each optimizer step
  # Logprobs that the ratio divides by: "recompute" runs the current (pre-update) parameters
  # over the rollout in the train step's own numerics, so the first update is exactly on-policy;
  # "sampler" takes the sampler's, which equal the policy's without top-k or top-p, up to the
  # sampler's rounding (bf16). Either way the policy is scored at the rollout's temperature: the
  # samples come from softmax(logits / T), so that is the distribution the update trains.
  old_logprobs: str = "recompute"
  compute_dtype: str = "bfloat16"
  sample_dtype: str = "bfloat16"
  # How the train step's forward and backward compute (fused cuDNN attention, remat); the
  # rollout's sampler always uses the model's default path with its KV cache.
  forward: ForwardOptions = ForwardOptions()
  min_sequence_bucket: int = 64     # train sequence length is bucketed to powers of two
  checkpoint_every: int = 1
  max_checkpoints: int = 3
  save_samples: bool = True

  def __post_init__(self):
    r = self.rollout
    rows = r.prompts_per_step * r.group_size
    if r.prompts_per_step < 1 or r.group_size < 1:
      raise ValueError("prompts_per_step and group_size must be >= 1")
    if not r.temperature > 0:
      raise ValueError(f"rollout.temperature must be > 0 (greedy rollouts make every sample of "
                       f"a group the same), got {r.temperature}")
    if rows % (self.updates_per_batch * self.num_micro_batches):
      raise ValueError(f"prompts_per_step * group_size = {rows} must be a multiple of "
                       f"updates_per_batch * num_micro_batches = "
                       f"{self.updates_per_batch * self.num_micro_batches}")
    if self.epochs_per_batch < 1:
      raise ValueError(f"epochs_per_batch must be >= 1, got {self.epochs_per_batch}")
    if self.dynamic_sampling_max_rounds < 1:
      raise ValueError(f"dynamic_sampling_max_rounds must be >= 1, got "
                       f"{self.dynamic_sampling_max_rounds}")
    if self.old_logprobs not in ("recompute", "sampler"):
      raise ValueError(f"old_logprobs must be 'recompute' or 'sampler', got {self.old_logprobs!r}")
    for name in ("compute_dtype", "sample_dtype"):
      if getattr(self, name) not in ts.DTYPES:
        raise ValueError(f"{name} must be one of {sorted(ts.DTYPES)}")
    # Fail at construction, not at step 1, on a misspelt registry key.
    rewards_lib.get_reward_schedule(self.reward_schedule)
    adv_lib.get_advantage_estimator(self.advantage_estimator)


def build_train_batch(prompts: Sequence[Prompt], completions: Sequence[Completion],
                      sampler_logprobs: Sequence[Sequence[float]], adv_B: np.ndarray,
                      keep_B: np.ndarray, pad_id: int, min_bucket: int) -> dict[str, np.ndarray]:
  """Rows of prompt + completion, right-padded to a power-of-two length (bounded compiles).

  completion_mask_BxT is 1 on each kept row's completion tokens; old_logp_BxT holds the sampler's
  logprobs at those positions (aligned like `train_step.sequence_logprobs`: index t scores
  token t).
  """
  lengths = [len(prompts[c.prompt_index].token_ids) + len(c.token_ids) for c in completions]
  t = next_power_of_two(max(lengths), min_bucket)
  b = len(completions)
  tokens_BxT = np.full((b, t), pad_id, np.int32)
  valid_BxT = np.zeros((b, t), bool)
  completion_BxT = np.zeros((b, t), np.float32)
  old_logp_BxT = np.zeros((b, t), np.float32)
  truncated_B = np.zeros((b,), bool)
  for i, c in enumerate(completions):
    p = len(prompts[c.prompt_index].token_ids)
    n = len(c.token_ids)
    tokens_BxT[i, :p] = prompts[c.prompt_index].token_ids
    tokens_BxT[i, p:p + n] = c.token_ids
    valid_BxT[i, :p + n] = True
    completion_BxT[i, p:p + n] = float(keep_B[i])
    old_logp_BxT[i, p:p + n] = sampler_logprobs[i]
    truncated_B[i] = c.finish_reason == FINISH_LENGTH
  return dict(tokens_BxT=tokens_BxT, valid_BxT=valid_BxT, completion_mask_BxT=completion_BxT,
              old_logp_BxT=old_logp_BxT, adv_B=np.asarray(adv_B, np.float32),
              truncated_B=truncated_B)


def _flatten(prefix: str, d: dict) -> dict[str, Any]:
  return {f"{prefix}/{k}": v for k, v in d.items()}


class Learner:
  """Trains `model` on `env` with the GRPO-family objective chosen by `config`.

  `run(workdir)` resumes from the latest checkpoint in `workdir` and returns the last step's
  metrics. The model's parameters become float32 master weights inside the learner.
  """

  def __init__(self, config: LearnerConfig, model: nnx.Module, env: Environment, *,
               eos_ids: Sequence[int], pad_id: int, progress: bool = True,
               mesh: Optional[Mesh] = None, sharding: Optional[ShardingConfig] = None):
    """With a `mesh`, the model's parameters (and so the optimizer state) are laid out on it by
    the `sharding` rules (FSDP x TP); rollouts and updates then run as sharded programs."""
    self.config = config
    self.env = env
    self.pad_id = int(pad_id)
    self.progress = progress
    if mesh is not None:
      shard_model(model, mesh, sharding)
    opt_cfg = config.optimizer
    self.optimizer = ts.make_optimizer(opt_cfg)
    self._sample_dtype = ts.DTYPES[config.sample_dtype]
    self.sampler = Sampler(model, eos_ids=eos_ids, pad_id=pad_id, cache_dtype=self._sample_dtype)
    self.graphdef, self.state = ts.init_train_state(model, self.optimizer, seed=config.seed)
    self.sampler.state = None  # the learner's params are the truth; no stale second copy
    compute_dtype = ts.DTYPES[config.compute_dtype]
    micro = config.num_micro_batches
    self._train_step = jax.jit(
        ts.make_train_step(self.graphdef, self.optimizer, config.loss, num_micro_batches=micro,
                           compute_dtype=compute_dtype, schedule=ts.make_schedule(opt_cfg),
                           forward_options=config.forward,
                           temperature=config.rollout.temperature),
        donate_argnums=0)
    graphdef = self.graphdef

    def logprobs(params, tokens_BxT, valid_BxT):
      params_c = jax.tree.map(lambda p: p.astype(compute_dtype), params)
      return ts.sequence_logprobs(nnx.merge(graphdef, params_c), tokens_BxT, valid_BxT,
                                  config.forward, temperature=config.rollout.temperature)[0]

    self._logprobs = jax.jit(logprobs)
    # The frozen reference policy of the KL term exists only when the term does.
    # A copy (not a view): the train step donates the params' buffers.
    self._ref_params = (jax.tree.map(lambda p: jnp.array(p, dtype=compute_dtype, copy=True),
                                     self.state.params)
                        if config.loss.beta_kl > 0 else None)

  # --- one step ----------------------------------------------------------------------------

  def sampling_state(self):
    return jax.tree.map(lambda p: p.astype(self._sample_dtype), self.state.params)

  def _batched_logprobs(self, params, batch: dict) -> jax.Array:
    """Logprobs over the rollout in slices of the train step's micro-batch size (bounded
    memory, one compiled shape)."""
    b = batch["tokens_BxT"].shape[0]
    size = b // (self.config.updates_per_batch * self.config.num_micro_batches)
    parts = [self._logprobs(params, batch["tokens_BxT"][i:i + size],
                            batch["valid_BxT"][i:i + size]) for i in range(0, b, size)]
    return jnp.concatenate(parts, axis=0)

  def sample(self, prompts: Sequence[Prompt], num_samples: int, seed: int,
             decode: Callable[[Sequence[int]], str], rollout: Optional[RolloutConfig] = None
             ) -> tuple[list[Completion], list[list[float]]]:
    """`num_samples` completions of each prompt from the current policy (grouped by prompt),
    with the rollout's length and temperature settings, and their sampler logprobs. Also what
    another policy's environment uses to ask this one (e.g. the Proposer's, for the Coder's pass
    rate on a proposed module)."""
    r = rollout or self.config.rollout
    out = self.sampler.sample([list(p.token_ids) for p in prompts], r.max_new_tokens, seed=seed,
                              temperature=r.temperature, top_p=r.top_p, top_k=r.top_k,
                              num_samples=num_samples, state=self.sampling_state())
    completions = [Completion(prompt_index=i, text=decode(toks), token_ids=tuple(toks),
                              finish_reason=reason)
                   for i, toks, reason in zip(out.prompt_index, out.tokens, out.finish_reasons)]
    return completions, out.logprobs

  def rollout(self, step: int, rng: Optional[np.random.Generator] = None
              ) -> tuple[list[Prompt], list[Completion], list[list[float]]]:
    """One round of prompts and their groups. The prompts and the sampling seed come from `rng`,
    by default the step's own (seed, step) generator, so a resumed run redraws them exactly."""
    cfg = self.config
    r = cfg.rollout
    rng = rng if rng is not None else np.random.default_rng([cfg.seed, step])
    prompts = self.env.make_prompts(step, r.prompts_per_step, rng)
    if len(prompts) != r.prompts_per_step:
      raise RuntimeError(f"the environment made {len(prompts)} prompts, expected "
                         f"{r.prompts_per_step}")
    completions, logprobs = self.sample(prompts, r.group_size, int(rng.integers(2**31)),
                                        self.env.decode)
    return prompts, completions, logprobs

  def step(self, step: int, workdir: Optional[str] = None) -> dict[str, Any]:
    cfg = self.config
    g = cfg.rollout.group_size
    num_groups = cfg.rollout.prompts_per_step
    rng = np.random.default_rng([cfg.seed, step])
    prompts: list[Prompt] = []
    completions: list[Completion] = []
    sampler_logprobs: list[list[float]] = []
    results: list[dict] = []
    group_rewards, infos, reference_failed = [], [], []
    time_sample = time_score = 0.0
    rounds = 0
    while rounds < cfg.dynamic_sampling_max_rounds:
      rounds += 1
      t0 = time.perf_counter()
      round_prompts, round_completions, round_logprobs = self.rollout(step, rng)
      t1 = time.perf_counter()
      round_results = self.env.score(step, round_prompts, round_completions)
      if len(round_results) != len(round_completions):
        raise RuntimeError(f"the environment scored {len(round_results)} of "
                           f"{len(round_completions)} completions")
      time_sample += t1 - t0
      time_score += time.perf_counter() - t1
      offset = len(prompts)
      prompts += round_prompts
      completions += [dataclasses.replace(c, prompt_index=c.prompt_index + offset)
                      for c in round_completions]
      sampler_logprobs += list(round_logprobs)
      results += round_results
      for i in range(len(round_prompts)):
        rewards_G, info = rewards_lib.compute_group_rewards(
            cfg.reward_schedule, round_results[i * g:(i + 1) * g], cfg.reward)
        group_rewards.append(rewards_G)
        infos.append(info)
        # A judging whose reference failed (a reference that raised, or ran out of GPU memory
        # beside other judges) says nothing about the candidate, and its 0 would count as wrong:
        # the whole group is left out of the loss.
        reference_failed.append(any(r.get("reference_error")
                                    for r in round_results[i * g:(i + 1) * g]))
      rewards_PxG = np.asarray(group_rewards, np.float32)  # every group sampled so far
      tied_P = np.asarray(adv_lib.tied_groups(rewards_PxG, cfg.tie_atol))
      reference_failed_P = np.asarray(reference_failed, bool)
      signal_P = ~tied_P & ~reference_failed_P
      if signal_P.sum() >= num_groups:
        break
    t2 = time.perf_counter()

    adv_PxG = np.asarray(adv_lib.compute_advantages(rewards_PxG, cfg.advantage_estimator,
                                                    cfg.advantage_eps))
    adv_PxG = np.where(reference_failed_P[:, None], 0.0, adv_PxG).astype(adv_PxG.dtype)
    # The batch: the first num_groups groups with a signal (untied, reference judged), topped
    # up with the first others, in sampling order (one round: every group, as sampled).
    order = [i for i in range(len(prompts)) if signal_P[i]] + \
        [i for i in range(len(prompts)) if not signal_P[i]]
    batch_P = np.asarray(sorted(order[:num_groups]))
    batch_tied_P = tied_P[batch_P]
    batch_failed_P = reference_failed_P[batch_P]
    keep_P = ~batch_tied_P if cfg.dynamic_filtering else np.ones_like(batch_tied_P)
    keep_P = keep_P & ~batch_failed_P
    keep_B = np.repeat(keep_P, g)
    rows_B = (batch_P[:, None] * g + np.arange(g)[None, :]).reshape(-1)
    batch = build_train_batch(prompts, [completions[i] for i in rows_B],
                              [sampler_logprobs[i] for i in rows_B],
                              adv_PxG.reshape(-1)[rows_B], keep_B, self.pad_id,
                              cfg.min_sequence_bucket)
    if not cfg.mask_truncated:
      batch.pop("truncated_B")
    if cfg.old_logprobs == "recompute":
      batch["old_logp_BxT"] = self._batched_logprobs(self.state.params, batch)
    if self._ref_params is not None:
      batch["ref_logp_BxT"] = self._batched_logprobs(self._ref_params, batch)

    train_metrics: list[dict] = []
    if keep_P.any():
      n = len(rows_B) // cfg.updates_per_batch
      for _ in range(cfg.epochs_per_batch):
        for u in range(cfg.updates_per_batch):
          mini = {k: v[u * n:(u + 1) * n] for k, v in batch.items()}
          self.state, m = self._train_step(self.state, mini)
          train_metrics.append(m)
      train_metrics = jax.device_get(train_metrics)
    t3 = time.perf_counter()

    metrics: dict[str, Any] = {}
    if train_metrics:  # means over this step's optimizer updates; token counts are sums
      for k in train_metrics[0]:
        values = [float(m[k]) for m in train_metrics]
        metrics[k] = sum(values) if k.startswith("num_") else sum(values) / len(values)
      metrics["tokens_per_s"] = ts.tokens_per_second(metrics["num_tokens"], t3 - t2)
    summary = rewards_lib.summarize(infos)
    lengths = [len(c.token_ids) for c in completions]
    metrics.update(
        accuracy=summary["accuracy"], gate_open_rate=summary["gate_open_rate"],
        mean_speed_term=summary["mean_speed_term"], reward_mean=float(rewards_PxG.mean()),
        reward_std=float(rewards_PxG.std()), tie_fraction=float(tied_P.mean()),
        kept_group_fraction=float(keep_P.mean()), skipped_update=float(not keep_P.any()),
        reference_failed_groups_in_batch=int(batch_failed_P.sum()),
        sampling_rounds=rounds, untied_groups_in_batch=int((~batch_tied_P).sum()),
        completion_length_mean=float(np.mean(lengths)),
        truncated_fraction=float(np.mean([c.finish_reason == FINISH_LENGTH
                                          for c in completions])),
        time_sample_s=time_sample, time_score_s=time_score, time_train_s=t3 - t2,
        sample_tokens_per_s=float(sum(lengths)) / max(time_sample, 1e-9))
    metrics.update(_flatten("count_by_status", summary["count_by_status"]))
    metrics.update(_flatten("reward_mean_by_status", summary["reward_mean_by_status"]))
    env_metrics = getattr(self.env, "step_metrics", None)
    if env_metrics is not None:
      metrics.update(_flatten("env", env_metrics(step)))
    if workdir is not None and cfg.save_samples:
      in_batch_B = np.zeros(len(completions), bool)
      in_batch_B[rows_B] = True
      self._save_samples(workdir, step, prompts, completions, results, rewards_PxG.reshape(-1),
                         adv_PxG.reshape(-1), in_batch_B)
    return metrics

  def _save_samples(self, workdir, step, prompts, completions, results, rewards_B, adv_B,
                    in_batch_B):
    """workdir/samples/step_NNNNNN.jsonl, every sample of the step (`in_batch`: whether the
    update trained on it), written atomically (a rerun of the step replaces it)."""
    directory = os.path.join(workdir, "samples")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"step_{step:06d}.jsonl")
    atomic_file.write_jsonl(
        path, ({"step": step, "task_id": prompts[c.prompt_index].task_id, "completion": c.text,
                "finish_reason": c.finish_reason, "reward": float(rew), "advantage": float(a),
                "in_batch": bool(in_batch), "result": res}
               for c, res, rew, a, in_batch in zip(completions, results, rewards_B, adv_B,
                                                   in_batch_B)), default=str)

  # --- the loop ----------------------------------------------------------------------------

  def run(self, workdir: str) -> dict[str, Any]:
    cfg = self.config
    return run_resumable(
        self, workdir, lambda step: self.step(step, workdir), num_steps=cfg.num_steps,
        checkpoint_every=cfg.checkpoint_every, max_checkpoints=cfg.max_checkpoints,
        progress=self.progress, desc="learner",
        postfix=lambda m: dict(acc=f"{m['accuracy']:.2f}", reward=f"{m['reward_mean']:.3f}"))
