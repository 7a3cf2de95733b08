"""Sharded forward passes and train steps on 8 simulated CPU devices give the unsharded results.

jax fixes its device count when it is first imported, and the rest of the test session has
already imported it with one CPU device, so the sharded part runs in a subprocess that sets
XLA_FLAGS first and prints its findings as one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCRIPT = textwrap.dedent('''
    import json, os, sys
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx
    from jax.sharding import PartitionSpec as P

    from kernelzero_jax.model.checkpoint import load_hf_checkpoint
    from kernelzero_jax.model.config import PRESETS
    from kernelzero_jax.model.qwen2 import (KVCache, Qwen2, causal_padding_mask,
                                            positions_from_valid)
    from kernelzero_jax.model.sharding import ShardingConfig, shard_model

    ckpt_dir = sys.argv[1]
    result = {"num_devices": jax.device_count()}
    sharding = ShardingConfig(mesh_shape=(4, 2))
    mesh = sharding.make_mesh()
    result["mesh"] = dict(mesh.shape)

    # A left-padded batch of 8 rows: 2 per fsdp shard.
    b, t = 8, 12
    rng = np.random.default_rng(0)
    lengths = np.array([12, 9, 5, 1, 12, 7, 3, 10])
    valid_np = np.arange(t)[None, :] >= (t - lengths)[:, None]
    valid = jnp.asarray(valid_np)

    def inputs(vocab):
      tokens = jnp.asarray(rng.integers(0, vocab, size=(b, t)), jnp.int32)
      return tokens, positions_from_valid(valid), causal_padding_mask(valid)

    @nnx.jit
    def forward(model, tokens, positions, mask):
      return model(tokens, positions, mask)[0]

    def put_batch(*arrays):
      return [jax.device_put(a, sharding.batch_sharding(a.ndim, a.shape[0], mesh)) for a in arrays]

    def max_err(a, b_):
      return float(np.abs(np.asarray(a)[valid_np] - np.asarray(b_)[valid_np]).max())

    def spec_list(array):
      # Padded to the rank: jax may drop trailing Nones from a spec.
      spec = list(array.sharding.spec) + [None] * (array.ndim - len(array.sharding.spec))
      return [list(x) if isinstance(x, tuple) else x for x in spec]

    def spec_of(param):
      return spec_list(param[...])

    # 1. shard_model on a random-init model.
    model = Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0), dtype=jnp.float32)
    args = inputs(PRESETS["tiny"].vocab_size)
    ref = forward(model, *args)
    shard_model(model, mesh, sharding)
    sharded_args = put_batch(*args)
    out = forward(model, *sharded_args)
    result["shard_model_max_err"] = max_err(out, ref)
    result["out_batch_spec"] = spec_list(out)
    wq = model.layers[0].attn.wq_DxNxH
    result["wq_spec"] = spec_of(wq)
    result["wq_shard_shape"] = list(wq[...].addressable_shards[0].data.shape)
    result["wq_num_devices"] = len(wq[...].sharding.device_set)
    result["embed_spec"] = spec_of(model.embed_VxD)
    result["norm_spec"] = spec_of(model.final_norm.weight)

    # 2. load_hf_checkpoint straight onto the mesh vs. loaded unsharded.
    plain = load_hf_checkpoint(ckpt_dir, dtype=jnp.float32)
    placed = load_hf_checkpoint(ckpt_dir, dtype=jnp.float32, mesh=mesh, sharding=sharding)
    args = inputs(plain.config.vocab_size)
    ref = forward(plain, *args)
    out = forward(placed, *put_batch(*args))
    result["loaded_max_err"] = max_err(out, ref)
    result["loaded_out_spec"] = spec_list(out)
    result["loaded_wk_spec"] = spec_of(placed.layers[1].attn.wk_DxKxH)
    result["loaded_lm_head_spec"] = spec_of(placed.lm_head_DxV)
    result["loaded_down_spec"] = spec_of(placed.layers[0].mlp.down_FxD)

    # 3. Prefill + one decode step with a batch-sharded KV cache.
    @nnx.jit
    def step(model, tokens, positions, mask, cache, index):
      return model(tokens, positions, mask, cache=cache, cache_index=index)

    cache = KVCache.init(plain.config, b, t, jnp.float32)
    cache = jax.tree.map(lambda a: jax.device_put(a, sharding.batch_sharding(a.ndim, b, mesh)),
                         cache)
    tokens, positions, mask = args
    prefill_mask = mask[:, : t - 1, :]  # [B, T-1, S=T]: the last slot is not written yet
    logits1, cache = step(placed, *put_batch(tokens[:, : t - 1], positions[:, : t - 1],
                                             prefill_mask), cache, 0)
    logits2, cache = step(placed, *put_batch(tokens[:, t - 1 :], positions[:, t - 1 :],
                                             mask[:, t - 1 :, :]), cache, jnp.int32(t - 1))
    stepped = jnp.concatenate([logits1, logits2], axis=1)
    result["cache_max_err"] = max_err(stepped, ref)
    result["cache_k_spec"] = spec_list(cache.k[0])

    # 4. A mesh axis that does not divide a dimension leaves it replicated (2 kv heads, tp=4).
    wide = ShardingConfig(mesh_shape=(2, 4))
    wide_mesh = wide.make_mesh()
    wide_model = load_hf_checkpoint(ckpt_dir, dtype=jnp.float32, mesh=wide_mesh, sharding=wide)
    result["wide_wk_spec"] = spec_of(wide_model.layers[0].attn.wk_DxKxH)
    result["wide_wq_spec"] = spec_of(wide_model.layers[0].attn.wq_DxNxH)
    out = forward(wide_model, *[jax.device_put(a, wide.batch_sharding(a.ndim, b, wide_mesh))
                                for a in args])
    result["wide_max_err"] = max_err(out, ref)

    # 5. The train step on the mesh (FSDP x TP params, batch on fsdp) equals the unsharded one,
    # and the updated params keep their shardings.
    from kernelzero_jax.rl import train_step as ts
    optimizer = ts.make_optimizer(ts.OptimizerConfig(learning_rate=1e-2))
    step_fn = ts.make_train_step  # jitted per graphdef below
    batch = dict(tokens_BxT=tokens, valid_BxT=valid,
                 completion_mask_BxT=(valid & (jnp.arange(t)[None, :] >= t - 4)).astype(jnp.float32),
                 old_logp_BxT=jnp.full((b, t), -5.0), adv_B=jnp.linspace(-1.0, 1.0, b))
    updated = []
    for on_mesh in (False, True):
      m = Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(3), dtype=jnp.float32)
      if on_mesh:
        shard_model(m, mesh, sharding)
      graphdef, state = ts.init_train_state(m, optimizer)
      fn = jax.jit(ts.make_train_step(graphdef, optimizer, num_micro_batches=2,
                                      compute_dtype=jnp.float32), donate_argnums=0)
      data = dict(zip(batch, put_batch(*batch.values()))) if on_mesh else batch
      state, metrics = fn(state, data)
      updated.append(state)
      result.setdefault("train_step_grad_norms", []).append(float(metrics["grad_norm"]))
    flat_plain = jax.tree.leaves(updated[0].params)
    flat_mesh = jax.tree.leaves(updated[1].params)
    result["train_step_max_err"] = max(float(jnp.abs(x - y).max())
                                       for x, y in zip(flat_plain, flat_mesh))
    result["train_step_changed"] = max(float(jnp.abs(x).max()) for x in flat_plain) > 0
    result["train_step_wq_spec"] = spec_list(
        updated[1].params["layers"][0]["attn"]["wq_DxNxH"][...])

    # 6. The learner on the mesh: its rollouts and updates run on sharded params.
    from tests.test_rl_learner import FirstTokenEnv, toy_config
    from kernelzero_jax.rl.learner import Learner
    m = Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0), dtype=jnp.float32)
    learner = Learner(toy_config(1e-2, 2), m, FirstTokenEnv(), eos_ids=[], pad_id=0,
                      progress=False, mesh=mesh, sharding=sharding)
    lm = [learner.step(s) for s in (1, 2)]
    result["learner_loss_finite"] = all(np.isfinite(x["loss"]) for x in lm)
    result["learner_wq_spec"] = spec_list(
        learner.state.params["layers"][0]["attn"]["wq_DxNxH"][...])
    print("RESULT " + json.dumps(result))
''')


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> str:
  """A random-weight tiny untied Qwen2 saved by transformers; every dimension divides 4 and 2."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  config = transformers.Qwen2Config(
      vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
      rope_theta=10000.0, tie_word_embeddings=False)
  torch.manual_seed(0)
  model = transformers.Qwen2ForCausalLM(config).to(torch.float32)
  with torch.no_grad():  # non-trivial biases and norm scales, so every layout is exercised
    for name, p in model.named_parameters():
      if name.endswith("bias") or name.endswith("norm.weight"):
        p.add_(0.2 * torch.randn_like(p))
  path = str(tmp_path_factory.mktemp("sharding_ckpt"))
  model.save_pretrained(path)
  return path


@pytest.fixture(scope="module")
def result(tiny_checkpoint) -> dict:
  env = dict(os.environ)
  flags = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
  env["XLA_FLAGS"] = flags.strip()
  env["JAX_PLATFORMS"] = "cpu"
  env["PYTHONPATH"] = _REPO + os.pathsep + env.get("PYTHONPATH", "")
  proc = subprocess.run([sys.executable, "-W", "ignore", "-c", _SCRIPT, tiny_checkpoint],
                        cwd=_REPO, env=env, capture_output=True, text=True, timeout=300)
  lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
  assert proc.returncode == 0 and lines, (
      f"subprocess failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
  return json.loads(lines[-1][len("RESULT "):])


def test_mesh(result):
  assert result["num_devices"] == 8
  assert result["mesh"] == {"fsdp": 4, "tp": 2}


def test_shard_model_forward_matches_unsharded(result):
  assert result["shard_model_max_err"] < 1e-5
  # Where the logits end up is XLA's choice (today [None, None, "tp"]: the head's contraction over
  # the fsdp-sharded width gathers the batch), so only their values are checked.
  assert len(result["out_batch_spec"]) == 3


def test_parameters_are_really_sharded(result):
  # wq [D=64, N=4, H=16]: embed on fsdp (4), heads on tp (2).
  assert result["wq_spec"] == ["fsdp", "tp", None]
  assert result["wq_shard_shape"] == [16, 2, 16]
  assert result["wq_num_devices"] == 8
  assert result["embed_spec"] == ["tp", "fsdp"]
  assert result["norm_spec"] == [None]  # replicated


def test_loaded_on_mesh_matches_unsharded(result):
  assert result["loaded_max_err"] < 1e-5
  assert result["loaded_wk_spec"] == ["fsdp", "tp", None]
  assert result["loaded_lm_head_spec"] == ["fsdp", "tp"]
  assert result["loaded_down_spec"] == ["tp", "fsdp"]


def test_sharded_kv_cache_matches_full_forward(result):
  assert result["cache_max_err"] < 1e-5
  assert result["cache_k_spec"][0] == "fsdp"


def test_train_step_on_the_mesh_matches_unsharded(result):
  assert result["train_step_changed"]
  plain, sharded = result["train_step_grad_norms"]
  assert abs(plain - sharded) <= 1e-5 * plain
  # Adam moves every parameter by about lr = 1e-2 whatever its gradient's size, so a gradient
  # that is ~0 up to rounding may move either way: allow 1% of one step.
  assert result["train_step_max_err"] < 1e-4
  assert result["train_step_wq_spec"] == ["fsdp", "tp", None]


def test_learner_trains_sharded_params(result):
  assert result["learner_loss_finite"]
  assert result["learner_wq_spec"] == ["fsdp", "tp", None]


def test_indivisible_dimension_is_replicated(result):
  # 2 kv heads on a tp axis of 4: replicated; 4 query heads still split 4 ways.
  assert result["wide_wk_spec"] == ["fsdp", None, None]
  assert result["wide_wq_spec"] == ["fsdp", "tp", None]
  assert result["wide_max_err"] < 1e-5
