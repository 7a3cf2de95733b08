"""Loading Hugging Face Qwen2 checkpoints (safetensors, single or sharded) into the NNX model.

Tensors are read one at a time from the memory-mapped files, transposed to the model's einsum
layout, cast, and placed (on a mesh if one is given), so the host never holds a second full copy
of the weights and no torch model is built.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from kernelzero_jax.model.config import ModelConfig
from kernelzero_jax.model.qwen2 import Qwen2
from kernelzero_jax.model.sharding import ShardingConfig


class CheckpointError(ValueError):
  """A checkpoint directory that does not match the model: names the file and the key."""


def _layer_rules(cfg: ModelConfig) -> list[tuple[re.Pattern, tuple, Callable]]:
  d, n, k, h = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
  p = r"model\.layers\.(\d+)\."
  return [
      (re.compile(p + r"self_attn\.q_proj\.weight$"), ("attn", "wq_DxNxH"),
       lambda w: w.T.reshape(d, n, h)),
      (re.compile(p + r"self_attn\.q_proj\.bias$"), ("attn", "bq_NxH"), lambda b: b.reshape(n, h)),
      (re.compile(p + r"self_attn\.k_proj\.weight$"), ("attn", "wk_DxKxH"),
       lambda w: w.T.reshape(d, k, h)),
      (re.compile(p + r"self_attn\.k_proj\.bias$"), ("attn", "bk_KxH"), lambda b: b.reshape(k, h)),
      (re.compile(p + r"self_attn\.v_proj\.weight$"), ("attn", "wv_DxKxH"),
       lambda w: w.T.reshape(d, k, h)),
      (re.compile(p + r"self_attn\.v_proj\.bias$"), ("attn", "bv_KxH"), lambda b: b.reshape(k, h)),
      (re.compile(p + r"self_attn\.o_proj\.weight$"), ("attn", "wo_NxHxD"),
       lambda w: w.T.reshape(n, h, d)),
      (re.compile(p + r"mlp\.gate_proj\.weight$"), ("mlp", "gate_DxF"), lambda w: w.T),
      (re.compile(p + r"mlp\.up_proj\.weight$"), ("mlp", "up_DxF"), lambda w: w.T),
      (re.compile(p + r"mlp\.down_proj\.weight$"), ("mlp", "down_FxD"), lambda w: w.T),
      (re.compile(p + r"input_layernorm\.weight$"), ("input_norm", "weight"), lambda w: w),
      (re.compile(p + r"post_attention_layernorm\.weight$"), ("post_attn_norm", "weight"),
       lambda w: w),
  ]


def _target(key: str, cfg: ModelConfig, rules) -> tuple[tuple, Callable] | None:
  """Our parameter path and the transform for one Hugging Face tensor name."""
  if key == "model.embed_tokens.weight":
    return ("embed_VxD",), lambda w: w
  if key == "model.norm.weight":
    return ("final_norm", "weight"), lambda w: w
  if key == "lm_head.weight":
    return (None,) if cfg.tie_word_embeddings else (("lm_head_DxV",), lambda w: w.T)
  for pattern, path, fn in rules:
    m = pattern.match(key)
    if m:
      layer = int(m.group(1))
      if layer >= cfg.num_hidden_layers:
        return None
      return ("layers", layer) + path, fn
  return None


def _hf_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
  """The Hugging Face ([out, in]) shape of the tensor that fills our parameter `name` of `shape`."""
  if name in ("wq_DxNxH", "wk_DxKxH", "wv_DxKxH"):
    d, heads, h = shape
    return (heads * h, d)
  if name == "wo_NxHxD":
    n, h, d = shape
    return (d, n * h)
  if name in ("bq_NxH", "bk_KxH", "bv_KxH"):
    return (shape[0] * shape[1],)
  if name in ("gate_DxF", "up_DxF", "down_FxD", "lm_head_DxV"):
    return (shape[1], shape[0])
  return shape  # embeddings and norm scales keep their layout


def checkpoint_files(path: str) -> list[str]:
  """The safetensors files of a checkpoint directory (single file or sharded with an index)."""
  index = os.path.join(path, "model.safetensors.index.json")
  single = os.path.join(path, "model.safetensors")
  if os.path.exists(index):
    try:
      with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError) as e:
      raise CheckpointError(f"unreadable index {index}: {e}") from e
    files = sorted(set(weight_map.values()))
    missing = [f for f in files if not os.path.exists(os.path.join(path, f))]
    if missing:
      raise CheckpointError(f"{index} names files that are missing: {', '.join(missing)}")
    return [os.path.join(path, f) for f in files]
  if os.path.exists(single):
    return [single]
  raise CheckpointError(f"no model.safetensors or model.safetensors.index.json in {path}")


def load_hf_checkpoint(path: str, dtype=jnp.bfloat16, mesh: Mesh | None = None,
                       sharding: ShardingConfig | None = None) -> Qwen2:
  """Builds a Qwen2 from a Hugging Face checkpoint directory, in `dtype`, optionally sharded."""
  from safetensors import safe_open  # pylint: disable=import-outside-toplevel
  cfg = ModelConfig.from_pretrained_dir(path)
  sharding = sharding or ShardingConfig()
  abstract = nnx.eval_shape(lambda: Qwen2(cfg, rngs=nnx.Rngs(0), dtype=dtype))
  graphdef, state = nnx.split(abstract)
  pure: dict[str, Any] = nnx.to_pure_dict(state)
  filled: set[tuple] = set()
  unknown: list[str] = []
  rules = _layer_rules(cfg)
  for file in checkpoint_files(path):
    with safe_open(file, framework="flax") as f:
      for key in f.keys():
        target = _target(key, cfg, rules)
        if target is None:
          unknown.append(f"{os.path.basename(file)}:{key}")
          continue
        if target == (None,):
          continue  # lm_head stored next to tied embeddings
        tpath, transform = target
        slot = pure
        for part in tpath[:-1]:
          slot = slot[part]
        expected = slot[tpath[-1]]
        raw = f.get_tensor(key)
        # Checked before the layout change: a reshape would raise a bare TypeError on a wrong
        # size, and would silently accept a wrong shape of the right size (a transposed k_proj).
        hf_shape = _hf_shape(tpath[-1], tuple(expected.shape))
        if tuple(raw.shape) != hf_shape:
          raise CheckpointError(f"{os.path.basename(file)}:{key} has shape {tuple(raw.shape)}; "
                                f"the config expects {hf_shape}")
        value = transform(raw)
        value = jnp.asarray(value, dtype=dtype)
        if mesh is not None:
          value = jax.device_put(value, sharding.param_sharding(tpath[-1], value.shape, mesh))
        slot[tpath[-1]] = value
        filled.add(tpath)
  if unknown:
    raise CheckpointError(f"unknown tensors in {path}: {', '.join(unknown[:10])}"
                          + (f" (and {len(unknown) - 10} more)" if len(unknown) > 10 else ""))
  missing = []

  def check(p, leaf):
    keypath = tuple(k.key if hasattr(k, "key") else k.idx for k in p)
    if keypath not in filled:
      missing.append("/".join(map(str, keypath)))
    return leaf

  jax.tree_util.tree_map_with_path(check, pure)
  if missing:
    raise CheckpointError(f"checkpoint {path} lacks tensors for: {', '.join(missing[:10])}")
  nnx.replace_by_pure_dict(state, pure)
  return nnx.merge(graphdef, state)
