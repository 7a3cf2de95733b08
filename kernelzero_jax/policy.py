"""Which policy a training stage starts from: a Hugging Face checkpoint, a preset at random
weights, and optionally the parameters of an earlier stage (e.g. SFT before RL)."""

from __future__ import annotations

import dataclasses
from typing import Optional

_DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
  # A Hugging Face checkpoint directory (Qwen2 family), or None for `preset` at random weights
  # from `init_seed` with the bundled tiny tokenizer: the embedded default, which runs on a CPU.
  model_dir: Optional[str] = None
  preset: str = "tiny"                 # kernelzero_jax.model.config.PRESETS key (no model_dir)
  init_seed: int = 0
  tokenizer_dir: Optional[str] = None  # defaults to model_dir, else the bundled tokenizer
  # The workdir of an earlier stage (train_sft or train_coder): its latest checkpoint's
  # parameters replace the initial ones (the architecture must match).
  init_from: Optional[str] = None


def load_policy(config: PolicyConfig, dtype: str = "float32"):
  """(model, tokenizer) for `config`; parameters in `dtype` (the trainers keep fp32 masters)."""
  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp
  from flax import nnx
  from kernelzero_jax.model.checkpoint import load_hf_checkpoint
  from kernelzero_jax.model.config import PRESETS
  from kernelzero_jax.model.qwen2 import Qwen2
  from kernelzero_jax.rl.checkpointing import load_policy_params
  from kernelzero_jax.tokenizer import load_tokenizer
  if dtype not in _DTYPES:
    raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
  jdtype = getattr(jnp, dtype)
  if config.model_dir is not None:
    model = load_hf_checkpoint(config.model_dir, dtype=jdtype)
  else:
    if config.preset not in PRESETS:
      raise ValueError(f"unknown preset {config.preset!r}; known: {sorted(PRESETS)}")
    model = Qwen2(PRESETS[config.preset], rngs=nnx.Rngs(config.init_seed), dtype=jdtype)
  tokenizer = load_tokenizer(config.tokenizer_dir or config.model_dir)
  if len(tokenizer) > model.config.vocab_size:
    raise ValueError(f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary is "
                     f"{model.config.vocab_size}")
  if config.init_from is not None:
    load_policy_params(config.init_from, model)
  return model, tokenizer
