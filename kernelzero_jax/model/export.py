"""Saving the NNX Qwen2 as a Hugging Face checkpoint directory (config.json + model.safetensors).

The inverse of `checkpoint.load_hf_checkpoint`: each parameter is moved back from the model's
einsum layout to Hugging Face's ([out, in] weights, flat biases), so transformers'
`Qwen2ForCausalLM.from_pretrained` and our loader both read the result. A trained policy (e.g.
the Coder's warm start) can then be shipped, shared, or started from with `policy.model_dir`.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from flax import nnx

from kernelzero_jax.model.config import ModelConfig


def hf_config_dict(cfg: ModelConfig, dtype: str) -> dict[str, Any]:
  """The config.json of a Qwen2ForCausalLM with `cfg`'s architecture."""
  d: dict[str, Any] = {
      "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
      "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size,
      "intermediate_size": cfg.intermediate_size, "num_hidden_layers": cfg.num_hidden_layers,
      "num_attention_heads": cfg.num_attention_heads,
      "num_key_value_heads": cfg.num_key_value_heads, "head_dim": cfg.head_dim,
      "rope_theta": cfg.rope_theta, "rms_norm_eps": cfg.rms_norm_eps,
      "tie_word_embeddings": cfg.tie_word_embeddings,
      "max_position_embeddings": cfg.max_position_embeddings, "use_sliding_window": False,
      "attention_dropout": 0.0, "torch_dtype": dtype}
  if cfg.rope_scaling:
    d["rope_scaling"] = dict(cfg.rope_scaling)
  if cfg.bos_token_id is not None:
    d["bos_token_id"] = cfg.bos_token_id
  if cfg.eos_token_id:
    d["eos_token_id"] = (list(cfg.eos_token_id) if len(cfg.eos_token_id) > 1
                         else cfg.eos_token_id[0])
  return d


def hf_tensors(model, dtype=np.float32) -> dict[str, np.ndarray]:
  """The model's parameters under their Hugging Face names and layouts."""
  cfg: ModelConfig = model.config
  params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  d, n, k, h = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim

  def a(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).astype(dtype))

  out = {"model.embed_tokens.weight": a(params["embed_VxD"]),
         "model.norm.weight": a(params["final_norm"]["weight"])}
  if not cfg.tie_word_embeddings:
    out["lm_head.weight"] = a(np.asarray(params["lm_head_DxV"]).T)
  for i in range(cfg.num_hidden_layers):
    layer = params["layers"][i]
    attn, mlp = layer["attn"], layer["mlp"]
    p = f"model.layers.{i}."
    out.update({
        p + "self_attn.q_proj.weight": a(np.asarray(attn["wq_DxNxH"]).reshape(d, n * h).T),
        p + "self_attn.q_proj.bias": a(np.asarray(attn["bq_NxH"]).reshape(n * h)),
        p + "self_attn.k_proj.weight": a(np.asarray(attn["wk_DxKxH"]).reshape(d, k * h).T),
        p + "self_attn.k_proj.bias": a(np.asarray(attn["bk_KxH"]).reshape(k * h)),
        p + "self_attn.v_proj.weight": a(np.asarray(attn["wv_DxKxH"]).reshape(d, k * h).T),
        p + "self_attn.v_proj.bias": a(np.asarray(attn["bv_KxH"]).reshape(k * h)),
        p + "self_attn.o_proj.weight": a(np.asarray(attn["wo_NxHxD"]).reshape(n * h, d).T),
        p + "mlp.gate_proj.weight": a(np.asarray(mlp["gate_DxF"]).T),
        p + "mlp.up_proj.weight": a(np.asarray(mlp["up_DxF"]).T),
        p + "mlp.down_proj.weight": a(np.asarray(mlp["down_FxD"]).T),
        p + "input_layernorm.weight": a(layer["input_norm"]["weight"]),
        p + "post_attention_layernorm.weight": a(layer["post_attn_norm"]["weight"]),
    })
  return out


def save_hf_checkpoint(model, path: str, dtype: str = "float32", tokenizer=None) -> str:
  """Writes `model` (and `tokenizer`, if given) to the directory `path`; returns it."""
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  if dtype not in ("float32", "bfloat16"):
    raise ValueError(f"dtype must be float32 or bfloat16, got {dtype!r}")
  np_dtype = np.float32
  if dtype == "bfloat16":
    import ml_dtypes  # pylint: disable=import-outside-toplevel
    np_dtype = ml_dtypes.bfloat16
  os.makedirs(path, exist_ok=True)
  save_file(hf_tensors(model, np_dtype), os.path.join(path, "model.safetensors"),
            metadata={"format": "pt"})
  with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
    json.dump(hf_config_dict(model.config, dtype), f, indent=2)
  if tokenizer is not None:
    tokenizer.save_pretrained(path)
  return path
