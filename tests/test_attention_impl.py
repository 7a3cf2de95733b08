"""ForwardOptions: the fused attention (jax.nn.dot_product_attention, "xla" on the CPU) and the
per-layer remat give the default path's logits, gradients and train steps (tiny preset, fp32).

CPU compiles dominate, so the variants are traced into one jitted program per test; one variant
also runs eagerly (no jit).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from kernelzero_jax.model.config import PRESETS
from kernelzero_jax.model.qwen2 import (ForwardOptions, Qwen2, causal_padding_mask,
                                        positions_from_valid)
from kernelzero_jax.rl import train_step as ts

VARIANTS = {
    "xla": ForwardOptions(attention="xla"),
    "xla_dots": ForwardOptions(attention="xla", remat="dots"),
    "xla_full": ForwardOptions(attention="xla", remat="full"),
    "einsum_full": ForwardOptions(remat="full"),
}


@pytest.fixture(scope="module")
def model() -> Qwen2:
  """Tiny random model; biases and norm scales randomised too (init makes them 0 and 1)."""
  model = Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  leaves, treedef = jax.tree.flatten(state)

  @jax.jit  # one compile instead of one per op and shape
  def perturb(leaves):
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    return [x + 0.1 * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys)]

  return nnx.merge(graphdef, jax.tree.unflatten(treedef, perturb(leaves)))


def _right_padded(lengths=(12, 7, 3, 1), total=12, seed=0):
  rng = np.random.default_rng(seed)
  valid_BT = np.arange(total)[None, :] < np.asarray(lengths)[:, None]
  random_BT = rng.integers(1, PRESETS["tiny"].vocab_size, (len(lengths), total))
  tokens_BT = np.where(valid_BT, random_BT, 0).astype(np.int32)
  return jnp.asarray(tokens_BT), jnp.asarray(valid_BT)


def _logits(model, tokens_BT, valid_BT, options):
  positions_BT = positions_from_valid(valid_BT)
  if options is None or not options.fused_attention:
    return model(tokens_BT, positions_BT, causal_padding_mask(valid_BT), options=options)[0]
  return model(tokens_BT, positions_BT, options=options)[0]  # causal: right padding only


def _loss(params, graphdef, weights_BTV, tokens_BT, valid_BT, options):
  """A loss that sees every logit at every real position."""
  logits_BTV = _logits(nnx.merge(graphdef, params), tokens_BT, valid_BT, options)
  return (logits_BTV * weights_BTV * valid_BT[..., None]).sum()


def _max_abs_diff(a, b):
  return max(jax.tree.leaves(jax.tree.map(lambda x, y: float(jnp.abs(x - y).max()), a, b)))


def _max_rel_diff(a, b):
  """Largest over the leaves of max |a - b| / max |b|."""
  return max(jax.tree.leaves(jax.tree.map(
      lambda x, y: float(jnp.abs(x - y).max() / jnp.maximum(jnp.abs(y).max(), 1e-30)), a, b)))


def test_options_are_checked(model):
  with pytest.raises(ValueError, match="attention"):
    ForwardOptions(attention="flash")
  with pytest.raises(ValueError, match="remat"):
    ForwardOptions(remat="some")
  tokens_BT, valid_BT = _right_padded()
  with pytest.raises(ValueError, match="no mask_BTS"):
    model(tokens_BT, positions_from_valid(valid_BT), causal_padding_mask(valid_BT),
          options=ForwardOptions(attention="xla"))
  with pytest.raises(ValueError, match="mask_BTS"):
    model(tokens_BT, positions_from_valid(valid_BT))


def test_logits_and_gradients_match_default(model):
  graphdef, params = nnx.split(model)
  tokens_BT, valid_BT = _right_padded()
  weights_BTV = jax.random.normal(jax.random.PRNGKey(2),
                                  tokens_BT.shape + (PRESETS["tiny"].vocab_size,))
  args = (weights_BTV, tokens_BT, valid_BT)
  grad_fn = jax.value_and_grad(_loss)

  @jax.jit
  def all_variants(params):
    out = {"default": grad_fn(params, graphdef, *args, None)}
    out.update({k: grad_fn(params, graphdef, *args, o) for k, o in VARIANTS.items()})
    logits = {k: _logits(nnx.merge(graphdef, params), tokens_BT, valid_BT, o)
              for k, o in [("default", None), *VARIANTS.items()]}
    return out, logits

  grads, logits = all_variants(params)
  valid = np.asarray(valid_BT)
  ref_logits = np.asarray(logits["default"])[valid]
  ref_loss, ref_grads = grads["default"]
  assert _max_abs_diff(ref_grads, jax.tree.map(jnp.zeros_like, ref_grads)) > 0
  for name in VARIANTS:
    assert np.isfinite(np.asarray(logits[name])).all(), name  # padding positions included
    np.testing.assert_allclose(np.asarray(logits[name])[valid], ref_logits, atol=1e-5, rtol=1e-5,
                               err_msg=name)
    np.testing.assert_allclose(grads[name][0], ref_loss, rtol=1e-5, err_msg=name)
    assert _max_rel_diff(grads[name][1], ref_grads) < 1e-5, name

  # No jit: the fused attention under full remat, run op by op.
  eager_logits = _logits(model, tokens_BT, valid_BT, VARIANTS["xla_full"])
  np.testing.assert_allclose(np.asarray(eager_logits)[valid], ref_logits, atol=1e-5, rtol=1e-5)
  eager_loss, eager_grads = grad_fn(params, graphdef, *args, VARIANTS["xla_full"])
  np.testing.assert_allclose(eager_loss, ref_loss, rtol=1e-5)
  assert _max_rel_diff(eager_grads, ref_grads) < 1e-5


def _mixed_padding_batch(B=8, T=12, seed=0):
  """Left padding of 0..2 tokens, a 3-token prompt, completions ending early (right padding)."""
  k_tok, k_adv, k_old, k_len = jax.random.split(jax.random.PRNGKey(seed), 4)
  pad_B = jnp.arange(B) % 3
  end_B = T - jax.random.randint(k_len, (B,), 0, 4)
  t_T = jnp.arange(T)
  valid_BxT = (t_T >= pad_B[:, None]) & (t_T < end_B[:, None])
  tokens_BxT = jax.random.randint(k_tok, (B, T), 1, PRESETS["tiny"].vocab_size)
  return dict(
      tokens_BxT=jnp.where(valid_BxT, tokens_BxT, 0), valid_BxT=valid_BxT,
      completion_mask_BxT=(valid_BxT & (t_T >= pad_B[:, None] + 3)).astype(jnp.float32),
      old_logp_BxT=-7.0 + 0.3 * jax.random.normal(k_old, (B, T)),
      adv_B=jax.random.normal(k_adv, (B,)), truncated_B=jnp.arange(B) == 5)


def test_train_step_matches_default_on_mixed_padding(model):
  optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.5))
  graphdef, state = ts.init_train_state(model, optimizer)
  batch = _mixed_padding_batch()
  variants = {"default": None, **VARIANTS}

  def step(options):
    return ts.make_train_step(graphdef, optimizer, num_micro_batches=2,
                              compute_dtype=jnp.float32, forward_options=options)

  @jax.jit
  def run_all(state, batch):
    model = nnx.merge(graphdef, state.params)
    logps = {k: ts.sequence_logprobs(model, batch["tokens_BxT"], batch["valid_BxT"], o)
             for k, o in variants.items()}
    return {k: step(o)(state, batch) for k, o in variants.items()}, logps

  steps, logps = run_all(state, batch)
  # Real tokens other than each row's first (which has no context) agree.
  valid = np.asarray(batch["valid_BxT"])
  first = np.zeros_like(valid)
  first[np.arange(valid.shape[0]), valid.argmax(axis=1)] = True
  keep = valid & ~first
  ref_state, ref_metrics = steps["default"]
  for name in VARIANTS:
    for i in range(2):  # logp, entropy
      np.testing.assert_allclose(np.asarray(logps[name][i])[keep],
                                 np.asarray(logps["default"][i])[keep], atol=1e-5, rtol=1e-5,
                                 err_msg=name)
    new_state, metrics = steps[name]
    assert _max_abs_diff(new_state.params, ref_state.params) < 1e-6, name
    for k in ("loss", "grad_norm", "entropy", "clip_fraction"):
      np.testing.assert_allclose(metrics[k], ref_metrics[k], rtol=1e-5, atol=1e-7,
                                 err_msg=f"{name} {k}")
  assert float(ref_metrics["grad_norm"]) > 0

  # The standalone jitted, donated step of a fused variant equals the default one.
  step_fn = jax.jit(step(VARIANTS["xla_full"]), donate_argnums=0)
  new_state, metrics = step_fn(jax.tree.map(jnp.copy, state), batch)
  assert _max_abs_diff(new_state.params, ref_state.params) < 1e-6
  np.testing.assert_allclose(metrics["loss"], ref_metrics["loss"], rtol=1e-5)
