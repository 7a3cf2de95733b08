"""The RL train step: micro-batching, jit, norms and a small learning check (tiny preset, fp32).

CPU compiles dominate the run time, so the variants of (a) and the reference of (c) are traced
into ONE jitted program (module fixture) rather than compiled one by one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from kernelzero_jax.model.config import PRESETS
from kernelzero_jax.model.qwen2 import Qwen2
from kernelzero_jax.rl import losses
from kernelzero_jax.rl import train_step as ts

MICRO = (1, 2, 4)
LR = 0.5
# Plain SGD (after clipping) for the equality tests: Adam's first step is ~lr * sign(grad), which
# turns rounding noise on near-zero gradients into lr-sized differences.
OPTIMIZER = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(LR))


def _batch(B=8, T=10, seed=0):
  k_tok, k_adv, k_old, k_len = jax.random.split(jax.random.PRNGKey(seed), 4)
  tokens_BxT = jax.random.randint(k_tok, (B, T), 1, PRESETS["tiny"].vocab_size)
  # Left padding of 0..2 tokens, a 3-token prompt, completions of different lengths.
  pad_B = jnp.arange(B) % 3
  end_B = T - jax.random.randint(k_len, (B,), 0, 4)
  t_T = jnp.arange(T)
  valid_BxT = (t_T >= pad_B[:, None]) & (t_T < end_B[:, None])
  completion_BxT = (valid_BxT & (t_T >= pad_B[:, None] + 3)).astype(jnp.float32)
  return dict(
      tokens_BxT=jnp.where(valid_BxT, tokens_BxT, 0), valid_BxT=valid_BxT,
      completion_mask_BxT=completion_BxT,
      old_logp_BxT=-7.0 + 0.3 * jax.random.normal(k_old, (B, T)),
      adv_B=jax.random.normal(k_adv, (B,)),
      truncated_B=jnp.arange(B) == 5)


@pytest.fixture(scope="module")
def setup():
  model = Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0))
  optimizer = OPTIMIZER
  graphdef, state = ts.init_train_state(model, optimizer)
  return graphdef, optimizer, state, _batch()


def _reference(graphdef, optimizer, state, batch, aggregation):
  """The step written out directly: jax.grad on the whole batch, then the optimizer."""
  def loss_fn(params):
    logp_BxT, _ = ts.sequence_logprobs(nnx.merge(graphdef, params), batch["tokens_BxT"],
                                       batch["valid_BxT"])
    return losses.policy_loss(logp_BxT, batch["old_logp_BxT"], batch["adv_B"],
                              batch["completion_mask_BxT"], aggregation=aggregation,
                              truncated_B=batch["truncated_B"])[0]
  loss, grads = jax.value_and_grad(loss_fn)(state.params)
  updates, _ = optimizer.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  return dict(loss=loss, params=params, grad_norm=optax.tree.norm(grads),
              update_norm=optax.tree.norm(updates), param_norm=optax.tree.norm(params))


@pytest.fixture(scope="module")
def results(setup):
  graphdef, optimizer, state, batch = setup
  aggs = sorted(losses.AGGREGATIONS)

  def run_all(state, batch):
    steps = {(a, n): ts.make_train_step(graphdef, optimizer, ts.LossConfig(aggregation=a),
                                        num_micro_batches=n, compute_dtype=jnp.float32)(
                                            state, batch)
             for a in aggs for n in MICRO}
    refs = {a: _reference(graphdef, optimizer, state, batch, a) for a in aggs}
    return steps, refs

  return jax.jit(run_all)(state, batch)


def _max_abs_diff(a, b):
  return max([0.0] + jax.tree.leaves(jax.tree.map(lambda x, y: float(jnp.abs(x - y).max()), a, b)))


@pytest.mark.parametrize("aggregation", sorted(losses.AGGREGATIONS))
@pytest.mark.parametrize("n", MICRO[1:])
def test_micro_batches_equal_full_batch(results, aggregation, n):
  steps, _ = results
  (s1, m1), (sn, mn) = steps[(aggregation, 1)], steps[(aggregation, n)]
  assert _max_abs_diff(s1.params, sn.params) < 1e-6
  assert _max_abs_diff(s1.opt_state, sn.opt_state) < 1e-6
  for k in ("loss", "grad_norm", "clip_fraction", "approx_kl", "entropy"):
    np.testing.assert_allclose(mn[k], m1[k], rtol=1e-5, atol=1e-6, err_msg=k)
  assert int(sn.step) == 1


@pytest.mark.parametrize("aggregation", sorted(losses.AGGREGATIONS))
def test_step_matches_reference_and_norms(results, aggregation):
  steps, refs = results
  state, metrics = steps[(aggregation, 1)]
  ref = refs[aggregation]
  assert _max_abs_diff(state.params, ref["params"]) < 1e-6
  for k in ("loss", "grad_norm", "update_norm", "param_norm"):
    np.testing.assert_allclose(metrics[k], ref[k], rtol=1e-5, err_msg=k)
  assert float(metrics["grad_norm"]) > 0


def test_jitted_donated_step_equals_traced_step(setup, results):
  """The standalone jit(donate_argnums=0) step equals the same step traced inside another
  program (an eager run costs ~40 s of per-op compiles on a small CPU, hence no disable_jit)."""
  graphdef, optimizer, state, batch = setup
  schedule = optax.constant_schedule(LR)
  step_fn = jax.jit(ts.make_train_step(graphdef, optimizer, ts.LossConfig("token_mean"),
                                       num_micro_batches=2, compute_dtype=jnp.float32,
                                       schedule=schedule), donate_argnums=0)
  donated = jax.tree.map(jnp.copy, state)  # the fixture's state must survive the donation
  new_state, metrics = step_fn(donated, batch)
  ref_state, ref_metrics = results[0][("token_mean", 2)]
  assert _max_abs_diff(new_state.params, ref_state.params) < 1e-6
  np.testing.assert_allclose(metrics["loss"], ref_metrics["loss"], rtol=1e-6)
  np.testing.assert_allclose(metrics["learning_rate"], LR, rtol=1e-6)
  assert int(metrics["num_tokens"]) == int(batch["valid_BxT"].sum())
  assert 0.0 <= float(metrics["clip_fraction"]) <= 1.0


def test_learns_target_token():
  """All length-1 completions of one prompt; only the target token has a positive advantage."""
  cfg = PRESETS["tiny"]
  V, target = cfg.vocab_size, 123
  prompt = jnp.array([5, 17, 42], jnp.int32)
  tokens_BxT = jnp.concatenate([jnp.tile(prompt, (V, 1)), jnp.arange(V)[:, None]], axis=1)
  valid_BxT = jnp.ones(tokens_BxT.shape, bool)
  completion_BxT = jnp.zeros(tokens_BxT.shape, jnp.float32).at[:, -1].set(1.0)
  adv_B = jnp.where(jnp.arange(V) == target, 1.0, -1.0 / V)

  graphdef = None

  @jax.jit
  def logp_fn(params):
    return ts.sequence_logprobs(nnx.merge(graphdef, params), tokens_BxT, valid_BxT)[0]

  def train(lr, steps):
    nonlocal graphdef
    optimizer = ts.make_optimizer(ts.OptimizerConfig(learning_rate=lr, schedule="constant"))
    graphdef, state = ts.init_train_state(Qwen2(cfg, rngs=nnx.Rngs(0)), optimizer)
    params0 = jax.tree.map(jnp.copy, state.params)
    step_fn = jax.jit(ts.make_train_step(graphdef, optimizer, compute_dtype=jnp.float32),
                      donate_argnums=0)
    p0 = float(jnp.exp(logp_fn(state.params)[target, -1]))
    for _ in range(steps):
      batch = dict(tokens_BxT=tokens_BxT, valid_BxT=valid_BxT, completion_mask_BxT=completion_BxT,
                   old_logp_BxT=logp_fn(state.params), adv_B=adv_B)
      state, _ = step_fn(state, batch)
    return p0, float(jnp.exp(logp_fn(state.params)[target, -1])), params0, state.params

  p0, p1, _, _ = train(1e-2, 20)
  assert p0 < 0.01 and p1 > 0.5, (p0, p1)
  q0, q1, params0, params1 = train(0.0, 3)
  assert q1 == pytest.approx(q0, rel=1e-6)
  assert _max_abs_diff(params0, params1) == 0.0


def test_weight_decay_spares_biases_and_norms():
  """With zero advantages the gradient is 0, so AdamW's step is the decay alone: matrices and
  the embedding shrink by lr * wd, biases and norm scales do not move."""
  lr, wd = 0.1, 0.5
  optimizer = ts.make_optimizer(ts.OptimizerConfig(learning_rate=lr, schedule="constant",
                                                   weight_decay=wd))
  graphdef, state = ts.init_train_state(Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0)), optimizer)
  before = jax.tree.map(np.asarray, state.params)
  batch = dict(_batch(), adv_B=jnp.zeros((8,)))
  state, _ = jax.jit(ts.make_train_step(graphdef, optimizer, compute_dtype=jnp.float32))(
      state, batch)
  after = jax.tree.map(np.asarray, state.params)
  flat = jax.tree_util.tree_flatten_with_path(before)[0]
  decayed, kept = [], []
  for (path, b), a in zip(flat, jax.tree.leaves(after)):
    name = jax.tree_util.keystr(path)
    if "norm" in name or "'b" in name:
      np.testing.assert_array_equal(a, b, err_msg=name)
      kept.append(name)
    else:
      np.testing.assert_allclose(a, b * (1 - lr * wd), rtol=1e-6, err_msg=name)
      decayed.append(name)
  assert any("bq_NxH" in n for n in kept) and any("final_norm" in n for n in kept)
  assert any("wq_DxNxH" in n for n in decayed) and any("embed_VxD" in n for n in decayed)


def test_bf16_compute_keeps_fp32_master_weights_and_close_gradients():
  optimizer = OPTIMIZER
  graphdef, state = ts.init_train_state(Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0)), optimizer)
  batch = _batch()
  out = {}
  for dtype in (jnp.float32, jnp.bfloat16):
    new_state, metrics = jax.jit(ts.make_train_step(graphdef, optimizer, compute_dtype=dtype))(
        state, batch)
    out[dtype] = (new_state, metrics)
  params_bf16 = out[jnp.bfloat16][0].params
  assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(params_bf16))
  g32, g16 = (float(out[d][1]["grad_norm"]) for d in (jnp.float32, jnp.bfloat16))
  assert g16 == pytest.approx(g32, rel=5e-2)
  assert float(out[jnp.bfloat16][1]["loss"]) == pytest.approx(float(out[jnp.float32][1]["loss"]),
                                                               abs=5e-2)


def test_sequence_logprobs_at_a_temperature_score_the_tempered_softmax(setup):
  graphdef, _, state, batch = setup
  model = nnx.merge(graphdef, state.params)
  positions_BxT = ts.positions_from_valid(batch["valid_BxT"])
  logits_BxTxV = np.asarray(model(batch["tokens_BxT"], positions_BxT,
                                  ts.causal_padding_mask(batch["valid_BxT"]))[0], np.float64)
  tokens_BxT = np.asarray(batch["tokens_BxT"])
  for temperature in (0.5, 1.0, 2.0):
    logp_BxT, entropy_BxT = ts.sequence_logprobs(model, batch["tokens_BxT"], batch["valid_BxT"],
                                                 temperature=temperature)
    z = logits_BxTxV[:, :-1] / temperature
    logq = z - z.max(-1, keepdims=True)
    logq -= np.log(np.exp(logq).sum(-1, keepdims=True))
    want = np.take_along_axis(logq, tokens_BxT[:, 1:, None], -1)[..., 0]
    valid = np.asarray(batch["valid_BxT"])[:, 1:] & np.asarray(batch["valid_BxT"])[:, :-1]
    np.testing.assert_allclose(np.asarray(logp_BxT)[:, 1:][valid], want[valid], atol=1e-4)
    np.testing.assert_allclose(np.asarray(entropy_BxT)[:, 1:][valid],
                               -(np.exp(logq) * logq).sum(-1)[valid], atol=1e-4)
  with pytest.raises(ValueError, match="temperature must be > 0"):
    ts.sequence_logprobs(model, batch["tokens_BxT"], batch["valid_BxT"], temperature=0.0)
