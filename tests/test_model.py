"""The Flax Qwen2 against transformers' Qwen2ForCausalLM, the config reader and the loader."""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from kernelzero_jax.model import checkpoint as ckpt
from kernelzero_jax.model.config import PRESETS, ConfigError, ModelConfig
from kernelzero_jax.model.qwen2 import KVCache, Qwen2, causal_padding_mask, positions_from_valid

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

_TINY_HF: dict[str, Any] = dict(
    vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False)


def _randomize(model) -> None:
  """HF initializes biases to 0 and norm scales to 1; random ones make the parity test see
  every tensor's layout (a transposed bias or a swapped norm would pass with the defaults)."""
  gen = torch.Generator().manual_seed(1)
  with torch.no_grad():
    for name, p in model.named_parameters():
      noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
      if name.endswith("norm.weight"):
        p.copy_(1.0 + 0.2 * noise)
      elif name.endswith("bias"):
        p.copy_(0.2 * noise)
      else:
        p.copy_(0.08 * noise)


def make_hf_model(**overrides):
  """A random-weight tiny Qwen2ForCausalLM (fp32, eager attention) from _TINY_HF + overrides."""
  kw = dict(_TINY_HF, **overrides)
  rope_parameters = kw.pop("rope_parameters", None)
  if rope_parameters is not None:
    kw.pop("rope_theta")
    kw["rope_parameters"] = rope_parameters
  config = transformers.Qwen2Config(**kw)
  torch.manual_seed(0)
  model = transformers.Qwen2ForCausalLM(config).to(torch.float32)
  model.config._attn_implementation = "eager"  # pylint: disable=protected-access
  _randomize(model)
  model.eval()
  return model


@pytest.fixture
def hf_checkpoint(tmp_path):
  """Factory: (hf_model, checkpoint_dir) for a tiny model saved with save_pretrained."""

  def make(max_shard_size: str | None = None, **overrides):
    model = make_hf_model(**overrides)
    out = tmp_path / f"ckpt{len(os.listdir(tmp_path))}"
    kw = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(str(out), safe_serialization=True, **kw)
    return model, str(out)

  return make


def _left_padded_batch(vocab: int, lengths=(11, 7, 3), total: int = 11, seed: int = 0):
  rng = np.random.default_rng(seed)
  tokens_BT = rng.integers(0, vocab, size=(len(lengths), total)).astype(np.int32)
  valid_BT = np.zeros((len(lengths), total), dtype=bool)
  for row, n in enumerate(lengths):
    valid_BT[row, total - n:] = True
    tokens_BT[row, :total - n] = 0  # pad id: whatever it is, it must not leak into real rows
  return tokens_BT, valid_BT


def _hf_logits(model, tokens_BT: np.ndarray, valid_BT: np.ndarray) -> np.ndarray:
  positions_BT = np.asarray(positions_from_valid(jnp.asarray(valid_BT)))
  with torch.no_grad():
    out = model(input_ids=torch.from_numpy(tokens_BT.astype(np.int64)),
                attention_mask=torch.from_numpy(valid_BT.astype(np.int64)),
                position_ids=torch.from_numpy(positions_BT.astype(np.int64)))
  return out.logits.float().numpy()


@nnx.jit
def _forward(model: Qwen2, tokens_BT, positions_BT, mask_BTS):
  return model(tokens_BT, positions_BT, mask_BTS)[0]


def _ours_logits(model: Qwen2, tokens_BT: np.ndarray, valid_BT: np.ndarray) -> np.ndarray:
  # Jitted: one compile per model is much faster on CPU than eager op-by-op dispatch (eager and
  # jit are compared in test_jit_matches_eager).
  valid = jnp.asarray(valid_BT)
  logits_BTV = _forward(model, jnp.asarray(tokens_BT), positions_from_valid(valid),
                        causal_padding_mask(valid))
  assert logits_BTV.dtype == jnp.float32
  return np.asarray(logits_BTV)


def _rel_err(ours_BTV: np.ndarray, ref_BTV: np.ndarray, valid_BT: np.ndarray) -> float:
  """max |ours - ref| over real (non-pad) positions / max |ref| there."""
  diff = np.abs(ours_BTV.astype(np.float64) - ref_BTV)[valid_BT]
  return float(diff.max() / np.abs(ref_BTV[valid_BT]).max())


# ---------------------------------------------------------------------------------------------
# Logits parity with transformers.

_PARITY_CASES = {
    "untied": dict(tie_word_embeddings=False),
    "tied": dict(tie_word_embeddings=True),
    "sharded": dict(tie_word_embeddings=False, max_shard_size="40KB"),
    "rope_linear": dict(rope_parameters={"rope_type": "linear", "factor": 2.0,
                                         "rope_theta": 10000.0}),
    "rope_yarn": dict(rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 64,
                                       "rope_theta": 10000.0}),
    "gqa_4x1": dict(num_key_value_heads=1, rope_theta=1_000_000.0),
}


# Settings transformers 5 accepts beyond the plain rope types: dynamic NTK (the default RoPE up to
# max_position_embeddings) and yarn with truncate=False (fractional ramp bounds).
_ROPE_EXTRA_CASES = {
    "rope_dynamic": dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0,
                                          "rope_theta": 10000.0}),
    "rope_yarn_no_truncate": dict(rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
        "rope_theta": 10000.0, "truncate": False}),
}
_PARITY_CASES.update({
    "rope_yarn_attention_factor": dict(rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
        "rope_theta": 10000.0, "attention_factor": 0.8, "beta_fast": 16, "beta_slow": 2}),
    "rope_yarn_mscale": dict(rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
        "rope_theta": 10000.0, "mscale": 0.707, "mscale_all_dim": 1.0}),
    **_ROPE_EXTRA_CASES,
})


@pytest.mark.parametrize("case", sorted(_PARITY_CASES))
def test_logits_parity_fp32(hf_checkpoint, case):
  hf_model, path = hf_checkpoint(**_PARITY_CASES[case])
  if case == "sharded":
    assert os.path.exists(os.path.join(path, "model.safetensors.index.json"))
    assert len(ckpt.checkpoint_files(path)) > 1
  model = ckpt.load_hf_checkpoint(path, dtype=jnp.float32)
  assert model.config.tie_word_embeddings == hf_model.config.tie_word_embeddings
  # Long enough rows that yarn's and linear's changed frequencies move the logits.
  tokens_BT, valid_BT = _left_padded_batch(256, lengths=(40, 25, 9, 1), total=40)
  ref = _hf_logits(hf_model, tokens_BT, valid_BT)
  ours = _ours_logits(model, tokens_BT, valid_BT)
  assert _rel_err(ours, ref, valid_BT) < 1e-4


def test_rope_scaling_is_read(hf_checkpoint):
  _, path = hf_checkpoint(**_PARITY_CASES["rope_yarn"])
  with open(os.path.join(path, "config.json")) as f:
    written = json.load(f)
  cfg = ModelConfig.from_pretrained_dir(path)
  assert cfg.rope_theta == 10000.0
  scaling = cfg.rope_scaling_dict
  assert scaling is not None and scaling["rope_type"] == "yarn" and scaling["factor"] == 4.0
  assert scaling["original_max_position_embeddings"] == 64
  assert "rope_theta" not in scaling
  # The layout transformers 5 writes: everything under rope_parameters.
  assert written["rope_parameters"]["rope_type"] == "yarn"


def test_parity_with_transformers4_config_layout(hf_checkpoint):
  """A Qwen2.5 config.json in the transformers 4 layout (rope_theta at the top, yarn in
  rope_scaling under the old "type" key) means the same model to transformers 5 and to us."""
  _, path = hf_checkpoint(**_PARITY_CASES["rope_yarn"])
  config_path = os.path.join(path, "config.json")
  with open(config_path) as f:
    d = json.load(f)
  rope = d.pop("rope_parameters")
  d["rope_theta"] = rope.pop("rope_theta")
  d["rope_scaling"] = {"type": rope.pop("rope_type"), **rope}
  d["eos_token_id"] = 3
  with open(config_path, "w") as f:
    json.dump(d, f)
  cfg = ModelConfig.from_pretrained_dir(path)
  assert cfg.rope_scaling_dict["type"] == "yarn" and cfg.eos_token_id == (3,)
  hf_model = transformers.Qwen2ForCausalLM.from_pretrained(path, attn_implementation="eager",
                                                           dtype=torch.float32).eval()
  assert hf_model.config.rope_parameters["rope_type"] == "yarn"
  model = ckpt.load_hf_checkpoint(path, dtype=jnp.float32)
  tokens_BT, valid_BT = _left_padded_batch(256, lengths=(40, 13), total=40)
  ref = _hf_logits(hf_model, tokens_BT, valid_BT)
  assert _rel_err(_ours_logits(model, tokens_BT, valid_BT), ref, valid_BT) < 1e-4


def test_unpadded_rows_match_unbatched(hf_checkpoint):
  """A left-padded row gives the same logits as the same tokens alone (positions restart)."""
  _, path = hf_checkpoint()
  model = ckpt.load_hf_checkpoint(path, dtype=jnp.float32)
  tokens_BT, valid_BT = _left_padded_batch(256, lengths=(9, 5), total=9)
  batched = _ours_logits(model, tokens_BT, valid_BT)
  alone = _ours_logits(model, tokens_BT[1:, 4:], valid_BT[1:, 4:])
  np.testing.assert_allclose(batched[1, 4:], alone[0], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Config reading and presets.

# Qwen2.5-Coder-7B's config.json as transformers 4 wrote it.
_QWEN25_CODER_7B_V4 = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584,
    "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 32768,
    "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 131072,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.44.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 152064}


def test_from_hf_dict_transformers4_layout():
  cfg = ModelConfig.from_hf_dict(_QWEN25_CODER_7B_V4)
  assert cfg.rope_theta == 1_000_000.0
  assert cfg.rope_scaling is None
  assert cfg.eos_token_id == (151643,)
  assert cfg.bos_token_id == 151643
  assert cfg.head_dim == 128
  assert not cfg.tie_word_embeddings
  preset = PRESETS["qwen2.5-coder-7b"]
  for field in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta",
                "rms_norm_eps", "tie_word_embeddings", "max_position_embeddings",
                "eos_token_id"):
    assert getattr(cfg, field) == getattr(preset, field), field


def test_from_hf_dict_transformers4_yarn_and_eos_list():
  d = dict(_QWEN25_CODER_7B_V4, eos_token_id=[151645, 151643],
           rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
  cfg = ModelConfig.from_hf_dict(d)
  assert cfg.eos_token_id == (151645, 151643)
  assert cfg.rope_scaling_dict == {"type": "yarn", "factor": 4.0,
                                   "original_max_position_embeddings": 32768}
  assert cfg.rope_theta == 1_000_000.0
  hash(cfg)  # stays hashable (nnx modules keep it as static metadata)
  # A "default" rope type is no scaling at all.
  d = dict(_QWEN25_CODER_7B_V4, rope_scaling=None,
           rope_parameters={"rope_type": "default", "rope_theta": 5e5})
  cfg = ModelConfig.from_hf_dict(d)
  assert cfg.rope_scaling is None and cfg.rope_theta == 5e5


def test_presets_sanity():
  p7 = PRESETS["qwen2.5-coder-7b"]
  assert (p7.hidden_size, p7.num_hidden_layers, p7.num_attention_heads, p7.num_key_value_heads,
          p7.head_dim, p7.vocab_size, p7.tie_word_embeddings) == (3584, 28, 28, 4, 128, 152064,
                                                                  False)
  for name, p in PRESETS.items():
    assert p.num_attention_heads % p.num_key_value_heads == 0, name
    assert p.head_dim % 2 == 0, name  # RoPE rotates halves
  tiny = PRESETS["tiny"]
  assert tiny.vocab_size == 1024
  # Instantiates and runs.
  model = Qwen2(tiny, rngs=nnx.Rngs(0), dtype=jnp.float32)
  logits = _ours_logits(model, np.arange(4)[None], np.ones((1, 4), bool))
  assert logits.shape == (1, 4, 1024) and np.isfinite(logits).all()


@pytest.mark.parametrize("bad, message", [
    (dict(model_type="llama"), "is not a Qwen2 model"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(use_sliding_window=True), "sliding-window"),
    (dict(num_key_value_heads=3), "must be a multiple of"),
    (dict(rope_scaling={"type": "longrope", "factor": 2.0}), "is not supported"),
])
def test_from_hf_dict_rejects(bad, message):
  with pytest.raises(ConfigError, match=message):
    ModelConfig.from_hf_dict(dict(_QWEN25_CODER_7B_V4, **bad))


def test_from_hf_dict_missing_field():
  d = dict(_QWEN25_CODER_7B_V4)
  del d["hidden_size"]
  with pytest.raises(ConfigError, match="lacks hidden_size"):
    ModelConfig.from_hf_dict(d)


# ---------------------------------------------------------------------------------------------
# Loader errors.


def _state_dict(hf_model) -> dict[str, Any]:
  # Clones: save_file refuses tensors that share storage.
  return {k: v.detach().clone().contiguous() for k, v in hf_model.state_dict().items()}


def _write_checkpoint(path: str, hf_model, tensors: dict[str, Any], config: dict | None = None):
  from safetensors.torch import save_file  # pylint: disable=import-outside-toplevel
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(config if config is not None else hf_model.config.to_dict(), f)
  save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


def test_error_missing_config(hf_checkpoint):
  _, path = hf_checkpoint()
  os.remove(os.path.join(path, "config.json"))
  with pytest.raises(ConfigError, match="no config.json in"):
    ckpt.load_hf_checkpoint(path, dtype=jnp.float32)


def test_error_invalid_config_json(hf_checkpoint):
  _, path = hf_checkpoint()
  with open(os.path.join(path, "config.json"), "w") as f:
    f.write("{not json")
  with pytest.raises(ConfigError, match="is not valid JSON"):
    ckpt.load_hf_checkpoint(path, dtype=jnp.float32)


def test_error_no_safetensors(hf_checkpoint):
  _, path = hf_checkpoint()
  os.remove(os.path.join(path, "model.safetensors"))
  with pytest.raises(ckpt.CheckpointError,
                     match="no model.safetensors or model.safetensors.index.json in"):
    ckpt.load_hf_checkpoint(path, dtype=jnp.float32)


def test_error_index_names_missing_shard(hf_checkpoint):
  _, path = hf_checkpoint(max_shard_size="40KB")
  with open(os.path.join(path, "model.safetensors.index.json")) as f:
    shards = sorted(set(json.load(f)["weight_map"].values()))
  os.remove(os.path.join(path, shards[-1]))
  with pytest.raises(ckpt.CheckpointError, match="names files that are missing: " + shards[-1]):
    ckpt.load_hf_checkpoint(path, dtype=jnp.float32)


def test_error_unreadable_index(hf_checkpoint):
  _, path = hf_checkpoint(max_shard_size="40KB")
  with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}}, f)
  with pytest.raises(ckpt.CheckpointError, match="unreadable index"):
    ckpt.load_hf_checkpoint(path, dtype=jnp.float32)


# Shapes are checked against the Hugging Face layout before any reshape, so a wrong size gives
# a CheckpointError and a wrong shape of the right size (a transposed k_proj) is not accepted.
@pytest.mark.parametrize("key, corrupt", [
    ("model.layers.1.mlp.up_proj.weight", lambda w: w[:-1]),
    ("model.layers.0.input_layernorm.weight", lambda w: w[:-2]),
    ("model.embed_tokens.weight", lambda w: w[:, :-1]),
    pytest.param("model.layers.1.self_attn.k_proj.weight", lambda w: w[:, :-1],
                 id="k_proj_wrong_size"),
    pytest.param("model.layers.1.self_attn.k_proj.weight", lambda w: w.T, id="k_proj_transposed"),
    pytest.param("model.layers.0.self_attn.q_proj.bias", lambda b: b[:-1], id="q_bias_wrong_size"),
])
def test_error_shape_mismatch(tmp_path, key, corrupt):
  hf_model = make_hf_model()
  tensors = _state_dict(hf_model)
  tensors[key] = corrupt(tensors[key]).contiguous()
  _write_checkpoint(str(tmp_path), hf_model, tensors)
  with pytest.raises(ckpt.CheckpointError,
                     match=f"model.safetensors:{key} has shape .*the config expects"):
    ckpt.load_hf_checkpoint(str(tmp_path), dtype=jnp.float32)


def test_error_unknown_key(tmp_path):
  hf_model = make_hf_model()
  tensors = _state_dict(hf_model)
  tensors["model.layers.0.self_attn.rotary_emb.extra"] = torch.zeros(3)
  _write_checkpoint(str(tmp_path), hf_model, tensors)
  with pytest.raises(ckpt.CheckpointError,
                     match="unknown tensors in .*model.safetensors:model.layers.0.self_attn."
                     "rotary_emb.extra"):
    ckpt.load_hf_checkpoint(str(tmp_path), dtype=jnp.float32)


def test_error_layer_beyond_config(tmp_path):
  hf_model = make_hf_model()
  tensors = _state_dict(hf_model)
  extra = tensors["model.layers.1.mlp.up_proj.weight"].clone()
  tensors["model.layers.2.mlp.up_proj.weight"] = extra
  _write_checkpoint(str(tmp_path), hf_model, tensors)
  with pytest.raises(ckpt.CheckpointError, match="unknown tensors in .*model.layers.2.mlp"):
    ckpt.load_hf_checkpoint(str(tmp_path), dtype=jnp.float32)


@pytest.mark.parametrize("key, ours", [
    ("model.layers.0.mlp.down_proj.weight", "layers/0/mlp/down_FxD"),
    ("model.layers.1.self_attn.q_proj.bias", "layers/1/attn/bq_NxH"),
    ("lm_head.weight", "lm_head_DxV"),
    ("model.norm.weight", "final_norm/weight"),
])
def test_error_missing_key(tmp_path, key, ours):
  hf_model = make_hf_model()
  tensors = _state_dict(hf_model)
  del tensors[key]
  _write_checkpoint(str(tmp_path), hf_model, tensors)
  with pytest.raises(ckpt.CheckpointError, match=f"lacks tensors for: {ours}"):
    ckpt.load_hf_checkpoint(str(tmp_path), dtype=jnp.float32)


def test_error_not_qwen2(tmp_path):
  hf_model = make_hf_model()
  config = hf_model.config.to_dict()
  config["model_type"] = "llama"
  _write_checkpoint(str(tmp_path), hf_model, _state_dict(hf_model), config)
  with pytest.raises(ConfigError, match="model_type 'llama' is not a Qwen2 model"):
    ckpt.load_hf_checkpoint(str(tmp_path), dtype=jnp.float32)


def test_tied_checkpoint_may_store_lm_head(tmp_path):
  """Some tied checkpoints still store lm_head.weight (a copy of the embeddings): ignored."""
  hf_model = make_hf_model(tie_word_embeddings=True)
  tensors = _state_dict(hf_model)
  tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
  _write_checkpoint(str(tmp_path), hf_model, tensors)
  model = ckpt.load_hf_checkpoint(str(tmp_path), dtype=jnp.float32)
  assert not hasattr(model, "lm_head_DxV")


# ---------------------------------------------------------------------------------------------
# dtypes, jit, KV cache.


def test_bf16_load(hf_checkpoint):
  hf_model, path = hf_checkpoint()
  model = ckpt.load_hf_checkpoint(path, dtype=jnp.bfloat16)
  dtypes = {leaf.dtype for leaf in jax.tree.leaves(nnx.state(model, nnx.Param))}
  assert dtypes == {jnp.dtype(jnp.bfloat16)}
  tokens_BT, valid_BT = _left_padded_batch(256)
  ours = _ours_logits(model, tokens_BT, valid_BT)
  assert np.isfinite(ours).all()
  assert _rel_err(ours, _hf_logits(hf_model, tokens_BT, valid_BT), valid_BT) < 5e-2


def test_jit_matches_eager(hf_checkpoint):
  _, path = hf_checkpoint()
  model = ckpt.load_hf_checkpoint(path, dtype=jnp.float32)
  tokens_BT, valid_BT = _left_padded_batch(256)
  valid = jnp.asarray(valid_BT)
  args = (jnp.asarray(tokens_BT), positions_from_valid(valid), causal_padding_mask(valid))
  eager_logits, no_cache = model(*args)
  assert no_cache is None
  eager = np.asarray(eager_logits)

  @nnx.jit
  def forward_nnx(m, tokens, positions, mask):
    return m(tokens, positions, mask)[0]

  graphdef, state = nnx.split(model)

  @jax.jit
  def forward_pure(state, tokens, positions, mask):
    return nnx.merge(graphdef, state)(tokens, positions, mask)[0]

  np.testing.assert_allclose(np.asarray(forward_nnx(model, *args)), eager, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(forward_pure(state, *args)), eager, atol=1e-5, rtol=1e-5)


def test_kv_cache_prefill_then_decode_matches_full(hf_checkpoint):
  _, path = hf_checkpoint()
  model = ckpt.load_hf_checkpoint(path, dtype=jnp.float32)
  cfg = model.config
  total, prefill, cache_len = 12, 7, 16  # cache longer than the sequence: unused slots masked
  tokens_BT, valid_BT = _left_padded_batch(256, lengths=(12, 9, 6), total=total)
  tokens = jnp.asarray(tokens_BT)
  valid = jnp.asarray(valid_BT)
  positions_BT = positions_from_valid(valid)
  full = _ours_logits(model, tokens_BT, valid_BT)

  @nnx.jit
  def step_fn(m, tokens_bt, positions_bt, mask_bts, cache, index):
    return m(tokens_bt, positions_bt, mask_bts, cache=cache, cache_index=index)

  b = tokens.shape[0]
  cache = KVCache.init(cfg, b, cache_len, jnp.float32)
  assert cache.length == cache_len
  # Prefill: the first `prefill` tokens, causal over the cache, real keys only.
  valid_BS = jnp.zeros((b, cache_len), bool).at[:, :total].set(valid)
  slot_S = jnp.arange(cache_len)
  mask_BTS = ((slot_S[None, :] <= jnp.arange(prefill)[:, None])[None]
              & valid_BS[:, None, :])
  logits, cache = step_fn(model, tokens[:, :prefill], positions_BT[:, :prefill], mask_BTS,
                          cache, 0)
  got = [np.asarray(logits)]
  for t in range(prefill, total):
    mask_B1S = ((slot_S <= t)[None] & valid_BS)[:, None, :]
    logits, cache = step_fn(model, tokens[:, t:t + 1], positions_BT[:, t:t + 1], mask_B1S,
                            cache, jnp.int32(t))
    got.append(np.asarray(logits))
  got_BTV = np.concatenate(got, axis=1)
  np.testing.assert_allclose(got_BTV[valid_BT], full[valid_BT], atol=1e-5, rtol=1e-5)
  assert cache.k[0].shape == (b, cfg.num_key_value_heads, cache_len, cfg.head_dim)


@pytest.mark.parametrize("tie", [False, True])
def test_an_exported_checkpoint_is_the_model_for_transformers_and_for_our_loader(
    hf_checkpoint, tmp_path, tie):
  """save_hf_checkpoint inverts load_hf_checkpoint: transformers reads the export back into the
  same tensors (so the same logits), and so does our loader."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.model.export import save_hf_checkpoint
  hf_model, path = hf_checkpoint(tie_word_embeddings=tie)
  ours = ckpt.load_hf_checkpoint(path, dtype=jnp.float32)
  out = save_hf_checkpoint(ours, str(tmp_path / "export"))
  again = transformers.Qwen2ForCausalLM.from_pretrained(out, attn_implementation="eager")
  want = hf_model.state_dict()
  got = again.state_dict()
  assert set(got) == set(want)
  for name, tensor in want.items():
    torch.testing.assert_close(got[name], tensor, rtol=0, atol=0, msg=name)
  tokens_BT, valid_BT = _left_padded_batch(_TINY_HF["vocab_size"])
  np.testing.assert_allclose(_hf_logits(again.eval(), tokens_BT, valid_BT),
                             _hf_logits(hf_model, tokens_BT, valid_BT), rtol=0, atol=0)
  reloaded = ckpt.load_hf_checkpoint(out, dtype=jnp.float32)
  jax.tree.map(np.testing.assert_array_equal, nnx.to_pure_dict(nnx.state(reloaded, nnx.Param)),
               nnx.to_pure_dict(nnx.state(ours, nnx.Param)))
