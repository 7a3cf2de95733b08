"""The Qwen2-family policy model in Flax NNX, its config, checkpoint loading and sharding."""

from kernelzero_jax.model.config import PRESETS, ModelConfig
from kernelzero_jax.model.qwen2 import ForwardOptions, KVCache, Qwen2

__all__ = ["PRESETS", "ModelConfig", "ForwardOptions", "KVCache", "Qwen2"]
