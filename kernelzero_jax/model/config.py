"""Model configuration, read from a Hugging Face `config.json` or taken from a named preset."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any


class ConfigError(ValueError):
  """A config.json that this model cannot represent."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """A Qwen2 / Qwen2.5 decoder. Field names follow Hugging Face where they exist."""

  vocab_size: int
  hidden_size: int
  intermediate_size: int
  num_hidden_layers: int
  num_attention_heads: int
  num_key_value_heads: int
  head_dim: int
  rope_theta: float = 1_000_000.0
  rope_scaling: tuple[tuple[str, Any], ...] | None = None  # hashable form of the HF dict
  rms_norm_eps: float = 1e-6
  tie_word_embeddings: bool = False
  max_position_embeddings: int = 32768
  bos_token_id: int | None = None
  eos_token_id: tuple[int, ...] = ()

  def __post_init__(self):
    if self.num_attention_heads % self.num_key_value_heads:
      raise ConfigError(f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                        f"num_key_value_heads ({self.num_key_value_heads})")
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "head_dim"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")

  @property
  def rope_scaling_dict(self) -> dict[str, Any] | None:
    return dict(self.rope_scaling) if self.rope_scaling else None

  @classmethod
  def from_hf_dict(cls, d: dict[str, Any]) -> "ModelConfig":
    """From the contents of a Hugging Face config.json (transformers 4 or 5 layout)."""
    model_type = d.get("model_type", "qwen2")
    if model_type not in ("qwen2",):
      raise ConfigError(f"model_type {model_type!r} is not a Qwen2 model")
    missing = [k for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                           "num_attention_heads") if k not in d]
    if missing:
      raise ConfigError(f"config.json lacks {', '.join(missing)}")
    if d.get("hidden_act", "silu") != "silu":
      raise ConfigError(f"hidden_act {d['hidden_act']!r} is not supported (Qwen2 uses silu)")
    if d.get("use_sliding_window"):
      raise ConfigError("sliding-window attention is not supported")
    # transformers 5 nests RoPE settings in rope_parameters; 4 has rope_theta + rope_scaling.
    rope = dict(d.get("rope_parameters") or {})
    theta = float(rope.get("rope_theta", d.get("rope_theta", 10000.0)))
    scaling = d.get("rope_scaling") or {k: v for k, v in rope.items() if k != "rope_theta"}
    if scaling and scaling.get("rope_type", scaling.get("type", "default")) == "default":
      scaling = None
    if scaling:
      kind = scaling.get("rope_type", scaling.get("type"))
      if kind not in ("linear", "dynamic", "yarn"):
        raise ConfigError(f"rope scaling {kind!r} is not supported (default, linear, yarn)")
    heads = int(d["num_attention_heads"])
    eos = d.get("eos_token_id")
    eos = tuple(eos) if isinstance(eos, (list, tuple)) else (() if eos is None else (int(eos),))
    return cls(
        vocab_size=int(d["vocab_size"]), hidden_size=int(d["hidden_size"]),
        intermediate_size=int(d["intermediate_size"]),
        num_hidden_layers=int(d["num_hidden_layers"]), num_attention_heads=heads,
        num_key_value_heads=int(d.get("num_key_value_heads") or heads),
        head_dim=int(d.get("head_dim") or int(d["hidden_size"]) // heads),
        rope_theta=theta,
        rope_scaling=tuple(sorted(scaling.items())) if scaling else None,
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
        max_position_embeddings=int(d.get("max_position_embeddings", 32768)),
        bos_token_id=d.get("bos_token_id"), eos_token_id=eos)

  @classmethod
  def from_pretrained_dir(cls, path: str) -> "ModelConfig":
    config_path = os.path.join(path, "config.json")
    try:
      with open(config_path) as f:
        d = json.load(f)
    except FileNotFoundError as e:
      raise ConfigError(f"no config.json in {path}") from e
    except json.JSONDecodeError as e:
      raise ConfigError(f"{config_path} is not valid JSON: {e}") from e
    return cls.from_hf_dict(d)


def _preset(**kw) -> ModelConfig:
  return ModelConfig(**kw)


# Sizes from the released Qwen2.5-Coder config.json files.
PRESETS: dict[str, ModelConfig] = {
    "tiny": _preset(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    rope_theta=10000.0, tie_word_embeddings=True, max_position_embeddings=4096),
    # The Coder's tiny warm start (kernelzero_jax/warm_start.py): wide enough to copy a kernel
    # template and translate a module's ops, small enough to SFT on two CPU cores in minutes.
    # Its tokenizer is trained on the teacher's pairs (at most 2048 tokens).
    "coder-tiny": _preset(vocab_size=2048, hidden_size=128, intermediate_size=384,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=32, rope_theta=10000.0, tie_word_embeddings=True,
                          max_position_embeddings=4096),
    # The warm start's larger recipe for one GPU (experiments/configs/warm_start_gpu.py).
    "coder-small": _preset(vocab_size=2048, hidden_size=512, intermediate_size=1536,
                           num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
                           head_dim=64, rope_theta=10000.0, tie_word_embeddings=True,
                           max_position_embeddings=4096),
    "qwen2.5-coder-0.5b": _preset(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                                  num_hidden_layers=24, num_attention_heads=14,
                                  num_key_value_heads=2, head_dim=64, tie_word_embeddings=True,
                                  eos_token_id=(151643,)),
    "qwen2.5-coder-1.5b": _preset(vocab_size=151936, hidden_size=1536, intermediate_size=8960,
                                  num_hidden_layers=28, num_attention_heads=12,
                                  num_key_value_heads=2, head_dim=128, tie_word_embeddings=True,
                                  eos_token_id=(151643,)),
    "qwen2.5-coder-7b": _preset(vocab_size=152064, hidden_size=3584, intermediate_size=18944,
                                num_hidden_layers=28, num_attention_heads=28,
                                num_key_value_heads=4, head_dim=128, tie_word_embeddings=False,
                                eos_token_id=(151643,)),
}
