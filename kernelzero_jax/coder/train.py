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
import json
import logging
import os
from typing import Any, Optional

from kernelzero_jax import configs
from kernelzero_jax.coder.environment import DEFAULT_MODULES, CoderEnvironment, load_modules
from kernelzero_jax.model.sharding import ShardingConfig
from kernelzero_jax.rl.learner import Learner, LearnerConfig
from kernelzero_jax.sandbox.config import SandboxConfig


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
  # A Hugging Face checkpoint directory (Qwen2 family), or None for the tiny preset at random
  # weights with the bundled tokenizer: the embedded default, which runs on a CPU.
  model_dir: Optional[str] = None
  tokenizer_dir: Optional[str] = None  # defaults to model_dir
  init_seed: int = 0                   # random init of the tiny preset


@dataclasses.dataclass(frozen=True)
class CoderRunConfig:
  policy: PolicyConfig = PolicyConfig()
  learner: LearnerConfig = LearnerConfig()
  backend: str = "triton"
  # Reference modules to train on: files and directories of KernelBench-format modules. Empty:
  # the small references that ship with the package. (KernelBench itself is the test set.)
  modules: tuple[str, ...] = ()
  one_shot: bool = True
  sandbox: SandboxConfig = dataclasses.field(default_factory=SandboxConfig)
  max_parallel: int = 0  # concurrent sandbox judges; 0: one per CPU core
  # Lay the policy out on a mesh of all visible devices (FSDP x TP, by `sharding`'s rules);
  # needed when fp32 master weights and Adam state do not fit one device (a 7B policy).
  use_mesh: bool = False
  sharding: ShardingConfig = ShardingConfig()


# Fields that may change when a run resumes: more steps trains longer, nothing else changes.
_RESUMABLE_CHANGES = ("learner.num_steps",)


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
  """Dotted paths where two JSON trees differ."""
  if isinstance(a, dict) and isinstance(b, dict):
    return [d for k in sorted(set(a) | set(b))
            for d in _differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)]
  return [] if a == b else [path]


def _check_workdir_config(workdir: str, config: CoderRunConfig) -> None:
  """Writes config.json in a fresh workdir; refuses to resume one made with another config."""
  path = os.path.join(workdir, "config.json")
  record = json.loads(json.dumps(configs.to_dict(config)))  # tuples -> lists, as on disk
  if os.path.exists(path):
    with open(path) as f:
      saved = json.load(f)
    changed = [d for d in _differences(saved, record) if d not in _RESUMABLE_CHANGES]
    if changed:
      raise configs.ConfigError(
          f"{workdir} holds a run with a different config ({', '.join(changed)} differ); use a "
          "new workdir, or the same config to resume")
  os.makedirs(workdir, exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(record, f, indent=2, sort_keys=True)
  os.replace(path + ".tmp", path)


def build_learner(config: CoderRunConfig, progress: bool = True) -> Learner:
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sampling.cli import load_policy
  from kernelzero_jax.tokenizer import eos_token_ids
  tasks, problems = load_modules(config.modules or DEFAULT_MODULES)
  for p in problems:
    logging.warning("skipping a training module: %s", p)
  if not tasks:
    raise configs.ConfigError(f"no usable training module in {config.modules or DEFAULT_MODULES}"
                              + (f": {problems}" if problems else ""))
  model, tokenizer = load_policy(config.policy.model_dir, "float32",
                                 config.policy.tokenizer_dir, seed=config.policy.init_seed)
  env = CoderEnvironment(tasks, tokenizer, config.backend, config.sandbox,
                         max_parallel=config.max_parallel or None, one_shot=config.one_shot)
  eos = eos_token_ids(tokenizer, model.config)
  pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos or [0])[0]
  mesh = config.sharding.make_mesh() if config.use_mesh else None
  return Learner(config.learner, model, env, eos_ids=eos, pad_id=pad_id, progress=progress,
                 mesh=mesh, sharding=config.sharding)


def train(config: CoderRunConfig, workdir: str, progress: bool = True) -> dict[str, Any]:
  """Runs (or resumes) the Coder's RL stage in `workdir`; returns the last step's metrics."""
  _check_workdir_config(workdir, config)
  return build_learner(config, progress).run(workdir)
