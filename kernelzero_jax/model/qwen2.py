"""The Qwen2 / Qwen2.5 decoder in Flax NNX.

Parameters are stored in the shapes the einsums use (suffixes name the axes: B batch, T query
positions, S key positions, D model width, N query heads, K key/value heads, G query heads per
key/value head, H head width, F MLP width, V vocabulary), so the loader transposes Hugging Face's
`[out, in]` matrices once and every einsum string documents its shapes.

Attention takes an explicit mask and explicit positions, which is what batches of prompts of
different lengths need: the sampler left-pads prompts, so every row writes the KV cache at the
same index while its positions start at 0 at its first real token.

`ForwardOptions` choose how an uncached (training) forward pass computes, not what: a fused
attention (`jax.nn.dot_product_attention`, cuDNN's flash attention on a GPU) and per-layer
rematerialisation. The defaults are the plain path above.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from kernelzero_jax.model.config import ModelConfig

_NEG_INF = -1e30  # finite, so fully-masked (padding) rows give uniform weights instead of NaN

ATTENTION_IMPLEMENTATIONS = ("einsum", "xla", "cudnn")
# What the backward pass keeps of each decoder layer's forward (None: everything).
REMAT_POLICIES = {
    "none": None,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "full": jax.checkpoint_policies.nothing_saveable,
}


@dataclasses.dataclass(frozen=True)
class ForwardOptions:
  """How an uncached forward pass computes. Runtime choices, kept out of ModelConfig (the
  architecture) like ShardingConfig; every choice gives the same logits up to rounding.

  attention:
    "einsum": the default; explicit [B, K, G, T, S] logits under `mask_BTS` (any mask, KV cache).
    "xla" | "cudnn": `jax.nn.dot_product_attention` with that implementation, plain causal (no
      mask, no cache), so rows must be RIGHT-padded: a real token then sees only the real tokens
      before it. Padding positions attend to everything before them, real or not: their values
      are meaningless but finite, and cuDNN's handling of padded rows is never relied upon.
      "cudnn" is cuDNN's flash attention (GPU; bf16/fp16 only): no [T, S] logits in memory, and
      the masked triangle is skipped. "xla" is its reference (any device).
  remat: what the backward pass keeps of each decoder layer (`nnx.remat` per layer):
    "none": everything (the default);
    "dots": the outputs of the weight matmuls; norms, RoPE, SwiGLU and attention are recomputed;
    "full": the layer's input only; the layer's forward runs again in the backward pass.
  """
  attention: str = "einsum"
  remat: str = "none"

  def __post_init__(self):
    if self.attention not in ATTENTION_IMPLEMENTATIONS:
      raise ValueError(f"attention {self.attention!r}; known: "
                       f"{', '.join(ATTENTION_IMPLEMENTATIONS)}")
    if self.remat not in REMAT_POLICIES:
      raise ValueError(f"remat {self.remat!r}; known: {', '.join(REMAT_POLICIES)}")

  @property
  def fused_attention(self) -> bool:
    return self.attention != "einsum"


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
  """Per-layer keys and values for S positions: k[l], v[l] are [B, K, S, H].

  Heads before positions, so that the attention einsums have their batch axes (B, K) leading:
  XLA then reads the cache in place instead of transposing all of it in every decode step."""
  k: tuple
  v: tuple

  @classmethod
  def init(cls, config: ModelConfig, batch: int, length: int, dtype) -> "KVCache":
    shape = (batch, config.num_key_value_heads, length, config.head_dim)
    zeros = tuple(jnp.zeros(shape, dtype) for _ in range(config.num_hidden_layers))
    return cls(k=zeros, v=tuple(jnp.zeros(shape, dtype) for _ in range(config.num_hidden_layers)))

  @property
  def length(self) -> int:
    return self.k[0].shape[2]


def rope_inv_freq(config: ModelConfig) -> tuple[jax.Array, float]:
  """Inverse frequencies [H/2] and the attention scale factor, as transformers computes them."""
  dim = config.head_dim
  base = config.rope_theta
  exponents = jnp.arange(0, dim, 2, dtype=jnp.float32) / dim
  inv_freq = 1.0 / (base ** exponents)
  scaling = config.rope_scaling_dict
  if not scaling:
    return inv_freq, 1.0
  kind = scaling.get("rope_type", scaling.get("type"))
  if kind == "dynamic":
    # transformers' dynamic NTK raises the base only once a sequence is longer than
    # max_position_embeddings; up to there it is the default RoPE.
    return inv_freq, 1.0
  original = scaling.get("original_max_position_embeddings") or config.max_position_embeddings
  factor = float(scaling.get("factor") or config.max_position_embeddings / original)
  if kind == "linear":
    return inv_freq / factor, 1.0
  if kind == "yarn":
    beta_fast = scaling.get("beta_fast") or 32.0
    beta_slow = scaling.get("beta_slow") or 1.0

    def mscale(scale, m=1.0):
      return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
      if scaling.get("mscale") and scaling.get("mscale_all_dim"):
        attention_factor = mscale(factor, scaling["mscale"]) / mscale(factor,
                                                                      scaling["mscale_all_dim"])
      else:
        attention_factor = mscale(factor)

    def correction_dim(num_rotations):
      return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):  # transformers 5 option; False keeps the exact bounds
      low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
      high += 0.001
    ramp = jnp.clip((jnp.arange(dim // 2, dtype=jnp.float32) - low) / (high - low), 0, 1)
    extrapolation_weight = 1.0 - ramp
    inv_freq = (inv_freq / factor) * (1 - extrapolation_weight) + inv_freq * extrapolation_weight
    return inv_freq, float(attention_factor)
  raise ValueError(f"unsupported rope scaling {kind!r}")


def apply_rope(x_BTNH: jax.Array, positions_BT: jax.Array, inv_freq_h: jax.Array,
               scale: float) -> jax.Array:
  """Rotates query/key halves (transformers' rotate_half layout, not interleaved)."""
  angles_BTh = positions_BT[..., None].astype(jnp.float32) * inv_freq_h
  angles_BTH = jnp.concatenate([angles_BTh, angles_BTh], axis=-1)
  cos = (jnp.cos(angles_BTH) * scale)[:, :, None, :]
  sin = (jnp.sin(angles_BTH) * scale)[:, :, None, :]
  xf = x_BTNH.astype(jnp.float32)
  half = xf.shape[-1] // 2
  rotated = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
  return (xf * cos + rotated * sin).astype(x_BTNH.dtype)


class RMSNorm(nnx.Module):

  def __init__(self, dim: int, eps: float, dtype):
    self.weight = nnx.Param(jnp.ones((dim,), dtype))
    self.eps = eps

  def __call__(self, x_BTD: jax.Array) -> jax.Array:
    xf = x_BTD.astype(jnp.float32)
    xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
    return self.weight[...] * xf.astype(x_BTD.dtype)


def _normal(rngs: nnx.Rngs, shape, dtype, std=0.02):
  return (jax.random.normal(rngs.params(), shape, jnp.float32) * std).astype(dtype)


class Attention(nnx.Module):

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, dtype):
    d, n, k, h = (config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
                  config.head_dim)
    self.config = config
    self.wq_DxNxH = nnx.Param(_normal(rngs, (d, n, h), dtype))
    self.bq_NxH = nnx.Param(jnp.zeros((n, h), dtype))
    self.wk_DxKxH = nnx.Param(_normal(rngs, (d, k, h), dtype))
    self.bk_KxH = nnx.Param(jnp.zeros((k, h), dtype))
    self.wv_DxKxH = nnx.Param(_normal(rngs, (d, k, h), dtype))
    self.bv_KxH = nnx.Param(jnp.zeros((k, h), dtype))
    self.wo_NxHxD = nnx.Param(_normal(rngs, (n, h, d), dtype))

  def __call__(self, x_BTD, positions_BT, mask_BTS, inv_freq, rope_scale, cache_k=None,
               cache_v=None, cache_index=None, *, attention="einsum"):
    cfg = self.config
    q_BTNH = jnp.einsum("BTD,DNH->BTNH", x_BTD, self.wq_DxNxH[...]) + self.bq_NxH[...]
    k_BTKH = jnp.einsum("BTD,DKH->BTKH", x_BTD, self.wk_DxKxH[...]) + self.bk_KxH[...]
    v_BTKH = jnp.einsum("BTD,DKH->BTKH", x_BTD, self.wv_DxKxH[...]) + self.bv_KxH[...]
    q_BTNH = apply_rope(q_BTNH, positions_BT, inv_freq, rope_scale)
    k_BTKH = apply_rope(k_BTKH, positions_BT, inv_freq, rope_scale)
    if attention != "einsum":  # causal, right-padded rows, no cache (see ForwardOptions)
      out_BTNH = jax.nn.dot_product_attention(
          q_BTNH, k_BTKH.astype(q_BTNH.dtype), v_BTKH.astype(q_BTNH.dtype), is_causal=True,
          implementation=attention)
      out_BTD = jnp.einsum("BTNH,NHD->BTD", out_BTNH.astype(x_BTD.dtype), self.wo_NxHxD[...])
      return out_BTD, None, None
    k_BKTH = k_BTKH.transpose(0, 2, 1, 3)  # only the T new tokens move
    v_BKTH = v_BTKH.transpose(0, 2, 1, 3)
    if cache_k is not None:
      # Every row writes at the same index (prompts are left-padded by the sampler).
      k_BKSH = jax.lax.dynamic_update_slice_in_dim(cache_k, k_BKTH.astype(cache_k.dtype),
                                                   cache_index, axis=2)
      v_BKSH = jax.lax.dynamic_update_slice_in_dim(cache_v, v_BKTH.astype(cache_v.dtype),
                                                   cache_index, axis=2)
    else:
      k_BKSH, v_BKSH = k_BKTH, v_BKTH
    b, t = x_BTD.shape[:2]
    groups = cfg.num_attention_heads // cfg.num_key_value_heads
    q_BTKGH = q_BTNH.reshape(b, t, cfg.num_key_value_heads, groups, cfg.head_dim)
    logits_BKGTS = jnp.einsum("BTKGH,BKSH->BKGTS", q_BTKGH, k_BKSH.astype(q_BTKGH.dtype),
                              preferred_element_type=jnp.float32)
    logits_BKGTS = logits_BKGTS / math.sqrt(cfg.head_dim)
    logits_BKGTS = jnp.where(mask_BTS[:, None, None, :, :], logits_BKGTS, _NEG_INF)
    probs_BKGTS = jax.nn.softmax(logits_BKGTS, axis=-1).astype(v_BKSH.dtype)
    out_BTKGH = jnp.einsum("BKGTS,BKSH->BTKGH", probs_BKGTS, v_BKSH)
    out_BTNH = out_BTKGH.reshape(b, t, cfg.num_attention_heads, cfg.head_dim).astype(x_BTD.dtype)
    out_BTD = jnp.einsum("BTNH,NHD->BTD", out_BTNH, self.wo_NxHxD[...])
    return out_BTD, k_BKSH, v_BKSH


class MLP(nnx.Module):
  """SwiGLU: down(silu(gate(x)) * up(x))."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, dtype):
    d, f = config.hidden_size, config.intermediate_size
    self.gate_DxF = nnx.Param(_normal(rngs, (d, f), dtype))
    self.up_DxF = nnx.Param(_normal(rngs, (d, f), dtype))
    self.down_FxD = nnx.Param(_normal(rngs, (f, d), dtype))

  def __call__(self, x_BTD):
    gate_BTF = jnp.einsum("BTD,DF->BTF", x_BTD, self.gate_DxF[...])
    up_BTF = jnp.einsum("BTD,DF->BTF", x_BTD, self.up_DxF[...])
    return jnp.einsum("BTF,FD->BTD", jax.nn.silu(gate_BTF) * up_BTF, self.down_FxD[...])


class DecoderLayer(nnx.Module):

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, dtype):
    self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
    self.attn = Attention(config, rngs=rngs, dtype=dtype)
    self.post_attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
    self.mlp = MLP(config, rngs=rngs, dtype=dtype)

  def __call__(self, x_BTD, positions_BT, mask_BTS, inv_freq, rope_scale, cache_k=None,
               cache_v=None, cache_index=None, *, attention="einsum"):
    attn_BTD, k, v = self.attn(self.input_norm(x_BTD), positions_BT, mask_BTS, inv_freq,
                               rope_scale, cache_k, cache_v, cache_index, attention=attention)
    x_BTD = x_BTD + attn_BTD
    x_BTD = x_BTD + self.mlp(self.post_attn_norm(x_BTD))
    return x_BTD, k, v


class Qwen2(nnx.Module):
  """Qwen2ForCausalLM. `dtype` is the parameter and compute dtype; logits are float32."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, dtype=jnp.float32):
    self.config = config
    self.embed_VxD = nnx.Param(_normal(rngs, (config.vocab_size, config.hidden_size), dtype))
    self.layers = nnx.List([DecoderLayer(config, rngs=rngs, dtype=dtype)
                            for _ in range(config.num_hidden_layers)]) if hasattr(nnx, "List") \
        else [DecoderLayer(config, rngs=rngs, dtype=dtype) for _ in range(config.num_hidden_layers)]
    self.final_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, dtype)
    if not config.tie_word_embeddings:
      self.lm_head_DxV = nnx.Param(_normal(rngs, (config.hidden_size, config.vocab_size), dtype))

  def __call__(self, tokens_BT: jax.Array, positions_BT: jax.Array,
               mask_BTS: jax.Array | None = None, cache: KVCache | None = None,
               cache_index: jax.Array | int | None = None, *,
               options: ForwardOptions | None = None) -> tuple[jax.Array, KVCache | None]:
    """Logits [B, T, V] for `tokens_BT` at `positions_BT`.

    Without a cache, `mask_BTS` is [B, T, T] over these tokens. With one, the new keys and values
    are written at `cache_index` and `mask_BTS` is [B, T, cache.length] over the whole cache.
    With a fused attention (`options.attention` "xla" or "cudnn") there is neither mask nor
    cache: attention is causal, so each row's real tokens must come first (right padding).
    Logits at padding positions are then meaningless (but finite).
    """
    options = options or ForwardOptions()
    if options.fused_attention and (mask_BTS is not None or cache is not None):
      raise ValueError(f"attention={options.attention!r} is causal over right-padded rows: "
                       "pass no mask_BTS and no cache")
    if not options.fused_attention and mask_BTS is None:
      raise ValueError("the einsum attention needs mask_BTS")
    if options.remat != "none" and cache is not None:
      raise ValueError("remat is for training passes, not with a KV cache")
    inv_freq, rope_scale = rope_inv_freq(self.config)
    x_BTD = jnp.take(self.embed_VxD[...], tokens_BT, axis=0)
    new_k, new_v = [], []
    if options.remat != "none":

      def run_layer(layer, x_BTD, positions_BT, mask_BTS):
        return layer(x_BTD, positions_BT, mask_BTS, inv_freq, rope_scale,
                     attention=options.attention)[0]

      run_layer = nnx.remat(run_layer, policy=REMAT_POLICIES[options.remat])
      for layer in self.layers:
        x_BTD = run_layer(layer, x_BTD, positions_BT, mask_BTS)
    else:
      for i, layer in enumerate(self.layers):
        ck = cache.k[i] if cache is not None else None
        cv = cache.v[i] if cache is not None else None
        x_BTD, k, v = layer(x_BTD, positions_BT, mask_BTS, inv_freq, rope_scale, ck, cv,
                            cache_index, attention=options.attention)
        new_k.append(k)
        new_v.append(v)
    x_BTD = self.final_norm(x_BTD)
    if self.config.tie_word_embeddings:
      logits_BTV = jnp.einsum("BTD,VD->BTV", x_BTD, self.embed_VxD[...],
                              preferred_element_type=jnp.float32)
    else:
      logits_BTV = jnp.einsum("BTD,DV->BTV", x_BTD, self.lm_head_DxV[...],
                              preferred_element_type=jnp.float32)
    new_cache = KVCache(k=tuple(new_k), v=tuple(new_v)) if cache is not None else None
    return logits_BTV.astype(jnp.float32), new_cache


def causal_padding_mask(valid_BT: jax.Array) -> jax.Array:
  """[B, T, T] mask: key s is visible to query t if s <= t and s is a real (non-pad) token."""
  t = valid_BT.shape[1]
  causal_TT = jnp.tril(jnp.ones((t, t), dtype=bool))
  return causal_TT[None] & valid_BT[:, None, :].astype(bool)


def segment_causal_mask(segment_ids_BT: jax.Array) -> jax.Array:
  """[B, T, T] mask for packed rows: key s is visible to query t if s <= t and both belong to
  the same sequence (segment id; 0 is padding and sees, and is seen by, no real token)."""
  same_BTT = segment_ids_BT[:, :, None] == segment_ids_BT[:, None, :]
  real_BT = segment_ids_BT > 0
  return causal_padding_mask(real_BT) & same_BTT


def positions_from_segments(segment_ids_BT: jax.Array) -> jax.Array:
  """Position ids that restart at 0 at the first token of every packed sequence."""
  t_T = jnp.arange(segment_ids_BT.shape[1], dtype=jnp.int32)
  starts_BT = jnp.concatenate([jnp.ones_like(segment_ids_BT[:, :1], bool),
                               segment_ids_BT[:, 1:] != segment_ids_BT[:, :-1]], axis=1)
  start_index_BT = jax.lax.cummax(jnp.where(starts_BT, t_T[None, :], 0), axis=1)
  return t_T[None, :] - start_index_BT


def positions_from_valid(valid_BT: jax.Array) -> jax.Array:
  """Position ids that start at 0 at each row's first real token (left padding gets 0)."""
  return jnp.maximum(jnp.cumsum(valid_BT.astype(jnp.int32), axis=1) - 1, 0)
