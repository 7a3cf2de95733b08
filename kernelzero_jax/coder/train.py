"""The Coder's RL stage alone: what `python -m experiments.train_coder` runs.

  config = configs.from_mapping(CoderRunConfig, experiment_config)
  train(config, workdir)

The workdir holds config.json (the resolved config of the first run; a resumed run with a
different config is refused, so one workdir is one experiment; only learner.num_steps may grow,
to train longer), metrics.jsonl and tb/, the
samples of every step under samples/, and Orbax checkpoints under checkpoints/.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from kernelzero_jax import configs
from kernelzero_jax.coder.environment import (DEFAULT_MODULES, CoderEnvironment, load_modules,
                                              sandbox_for_reward)
from kernelzero_jax.model.sharding import ShardingConfig
from kernelzero_jax.policy import PolicyConfig, load_policy
from kernelzero_jax.rl.learner import Learner, LearnerConfig
from kernelzero_jax.sandbox.config import SandboxConfig


@dataclasses.dataclass(frozen=True)
class CoderRunConfig:
  policy: PolicyConfig = PolicyConfig()
  learner: LearnerConfig = LearnerConfig()
  backend: str = "triton"
  # Reference modules to train on: files and directories of KernelBench-format modules. Empty:
  # the small references that ship with the package. (KernelBench itself is the test set.)
  modules: tuple[str, ...] = ()
  prompt_style: str = "one_shot"  # coder.prompts.PROMPT_STYLES
  sandbox: SandboxConfig = dataclasses.field(default_factory=SandboxConfig)
  # Candidates' timings precise only between the speedups the reward tells apart
  # (environment.sandbox_for_reward): the same rewards, fewer timing trials on the GPU.
  time_rewarded_speedups: bool = True
  max_parallel: int = 0  # concurrent sandbox judges; 0: one per CPU core
  # Lay the policy out on a mesh of all visible devices (FSDP x TP, by `sharding`'s rules);
  # needed when fp32 master weights and Adam state do not fit one device (a 7B policy).
  use_mesh: bool = False
  sharding: ShardingConfig = ShardingConfig()

  @property
  def coder_sandbox(self) -> SandboxConfig:
    """The sandbox config the Coder's RL judges with (time_rewarded_speedups)."""
    return (sandbox_for_reward(self.sandbox, self.learner) if self.time_rewarded_speedups
            else self.sandbox)


def build_learner(config: CoderRunConfig, progress: bool = True) -> Learner:
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.tokenizer import eos_token_ids, pad_token_id
  tasks, problems = load_modules(config.modules or DEFAULT_MODULES)
  for p in problems:
    logging.warning("skipping a training module: %s", p)
  if not tasks:
    raise configs.ConfigError(f"no usable training module in {config.modules or DEFAULT_MODULES}"
                              + (f": {problems}" if problems else ""))
  model, tokenizer = load_policy(config.policy, "float32")
  env = CoderEnvironment(tasks, tokenizer, config.backend, config.coder_sandbox,
                         max_parallel=config.max_parallel or None, prompt_style=config.prompt_style)
  eos = eos_token_ids(tokenizer, model.config)
  pad_id = pad_token_id(tokenizer, eos)
  mesh = config.sharding.make_mesh() if config.use_mesh else None
  return Learner(config.learner, model, env, eos_ids=eos, pad_id=pad_id, progress=progress,
                 mesh=mesh, sharding=config.sharding)


def train(config: CoderRunConfig, workdir: str, progress: bool = True) -> dict[str, Any]:
  """Runs (or resumes) the Coder's RL stage in `workdir`; returns the last step's metrics."""
  # Micro-batching changes memory, not the update (gradients are accumulated exactly), so a run
  # that ran out of memory may resume with more micro-batches.
  configs.check_workdir_config(workdir, config,
                               resumable=("learner.num_steps", "learner.num_micro_batches"))
  return build_learner(config, progress).run(workdir)
