"""Clipped-surrogate loss vs an independent torch re-derivation (loss and d loss / d logp)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from kernelzero_jax.rl import losses

AGGS = ["token_mean", "seq_mean_token_mean", "drgrpo_constant"]


@pytest.fixture(autouse=True)
def x64():
  prev = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", True)
  yield
  jax.config.update("jax_enable_x64", prev)


def _batch(b=6, t=7, seed=0):
  rng = np.random.default_rng(seed)
  logp = -rng.uniform(0.1, 3.0, size=(b, t))
  old = logp + rng.normal(scale=0.3, size=(b, t))  # ratios well outside [0.8, 1.28] too
  ref = logp + rng.normal(scale=0.3, size=(b, t))
  adv = rng.normal(size=b)
  lengths = rng.integers(1, t + 1, size=b)
  lengths[1] = 0                                      # an empty completion
  mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)
  return logp, old, ref, adv, mask


def _torch_loss(logp, old, ref, adv, mask, agg, eps_low, eps_high, beta_kl, max_len=None):
  """Straight from the formulas, with no shared code."""
  logp = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
  old, ref, adv, mask = (torch.tensor(x, dtype=torch.float64) for x in (old, ref, adv, mask))
  ratio = torch.exp(logp - old)
  a = adv[:, None]
  tok = -torch.min(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)
  if beta_kl > 0:
    tok = tok + beta_kl * (torch.exp(ref - logp) - (ref - logp) - 1)
  if agg == "token_mean":
    loss = (tok * mask).sum() / mask.sum()
  elif agg == "seq_mean_token_mean":
    n = mask.sum(1)
    keep = n > 0
    loss = ((tok * mask).sum(1)[keep] / n[keep]).mean()
  else:
    loss = (tok * mask).sum() / (mask.shape[0] * (max_len or mask.shape[1]))
  loss.backward()
  return loss.item(), logp.grad.numpy()


def _jax_loss_and_grad(logp, old, ref, adv, mask, **kw):
  fn = lambda lp: losses.policy_loss(lp, jnp.asarray(old), jnp.asarray(adv), jnp.asarray(mask),
                                     ref_logp_BxT=jnp.asarray(ref), **kw)[0]
  loss, grad = jax.value_and_grad(fn)(jnp.asarray(logp))
  return float(loss), np.asarray(grad)


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("beta_kl", [0.0, 0.05])
def test_matches_torch(agg, beta_kl):
  logp, old, ref, adv, mask = _batch()
  want, want_g = _torch_loss(logp, old, ref, adv, mask, agg, 0.2, 0.28, beta_kl)
  got, got_g = _jax_loss_and_grad(logp, old, ref, adv, mask, aggregation=agg, beta_kl=beta_kl)
  assert got == pytest.approx(want, abs=1e-6, rel=1e-6)
  np.testing.assert_allclose(got_g, want_g, atol=1e-6, rtol=1e-6)
  assert np.all(got_g[mask == 0] == 0)  # padding gets no gradient


def test_drgrpo_constant_uses_max_completion_len():
  logp, old, ref, adv, mask = _batch()
  want, want_g = _torch_loss(logp, old, ref, adv, mask, "drgrpo_constant", 0.2, 0.28, 0.0, 32)
  got, got_g = _jax_loss_and_grad(logp, old, ref, adv, mask, aggregation="drgrpo_constant",
                                  max_completion_len=32)
  assert got == pytest.approx(want, abs=1e-6)
  np.testing.assert_allclose(got_g, want_g, atol=1e-6)


def test_asymmetric_clip():
  eps_low, eps_high = 0.2, 0.28
  ratios = np.array([0.79, 0.81, 1.27, 1.29])
  for a in (1.0, -1.0):
    logp = np.log(ratios)[None, :]
    old = np.zeros_like(logp)
    mask = np.ones_like(logp)
    loss_T, aux = losses.per_token_loss(jnp.asarray(logp), jnp.asarray(old), jnp.array([a]),
                                        eps_low, eps_high)
    grad = np.asarray(jax.grad(lambda lp: losses.per_token_loss(
        lp, jnp.asarray(old), jnp.array([a]), eps_low, eps_high)[0].sum())(jnp.asarray(logp)))[0]
    if a > 0:  # only the upper bound bites: 1.29 -> clipped to 1.28, zero gradient
      np.testing.assert_allclose(loss_T[0], [-0.79, -0.81, -1.27, -1.28])
      np.testing.assert_array_equal(aux["is_clipped"][0], [False, False, False, True])
      assert grad[3] == 0 and np.all(grad[:3] != 0)
    else:      # only the lower bound bites: 0.79 -> clipped to 0.8, zero gradient
      np.testing.assert_allclose(loss_T[0], [0.8, 0.81, 1.27, 1.29])
      np.testing.assert_array_equal(aux["is_clipped"][0], [True, False, False, False])
      assert grad[0] == 0 and np.all(grad[1:] != 0)
    _, m = losses.policy_loss(jnp.asarray(logp), jnp.asarray(old), jnp.array([a]),
                              jnp.asarray(mask), eps_low=eps_low, eps_high=eps_high)
    assert float(m["clip_fraction"]) == pytest.approx(0.25)


def test_clip_fraction_hand_case_ignores_padding():
  # Row 0 (A>0): ratios 1.5 (clipped), 1.0, [2.0 padding]; row 1 (A<0): 0.5 (clipped), 1.5 (not).
  logp = np.log(np.array([[1.5, 1.0, 2.0], [0.5, 1.5, 1.0]]))
  mask = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
  _, m = losses.policy_loss(jnp.asarray(logp), jnp.zeros_like(logp), jnp.array([2.0, -1.0]),
                            jnp.asarray(mask))
  assert float(m["clip_fraction"]) == pytest.approx(2 / 4)
  assert float(m["ratio_mean"]) == pytest.approx((1.5 + 1.0 + 0.5 + 1.5) / 4)
  k3 = lambda r: r - 1 - np.log(r)
  assert float(m["approx_kl"]) == pytest.approx((k3(1.5) + k3(1.0) + k3(0.5) + k3(1.5)) / 4)
  assert "kl_to_ref" not in m


def test_kl_term_only_when_beta_positive():
  logp, old, ref, adv, mask = _batch(seed=3)
  args = (jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv), jnp.asarray(mask))
  base, m0 = losses.policy_loss(*args)                           # ref may be None at beta 0
  same, _ = losses.policy_loss(*args, ref_logp_BxT=jnp.asarray(ref), beta_kl=0.0)
  assert float(same) == float(base) and "kl_to_ref" not in m0
  with_kl, m = losses.policy_loss(*args, ref_logp_BxT=jnp.asarray(ref), beta_kl=0.1)
  kl = np.exp(ref - logp) - (ref - logp) - 1
  assert float(m["kl_to_ref"]) == pytest.approx((kl * mask).sum() / mask.sum(), rel=1e-12)
  assert float(with_kl) - float(base) == pytest.approx(0.1 * (kl * mask).sum() / mask.sum(),
                                                       rel=1e-9)
  with pytest.raises(ValueError, match="ref_logp"):
    losses.policy_loss(*args, beta_kl=0.1)


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("n_micro", [2, 4])
def test_micro_batches_with_full_normalizer_sum_to_full_batch(agg, n_micro):
  logp, old, ref, adv, mask = _batch(b=8, t=5, seed=7)
  truncated = np.array([0, 0, 1, 0, 0, 0, 0, 1], bool)
  kw = dict(aggregation=agg, beta_kl=0.05, truncated_B=None)

  def loss_fn(lp, sl, normalizer=None, trunc=None):
    return losses.policy_loss(lp, jnp.asarray(old[sl]), jnp.asarray(adv[sl]),
                              jnp.asarray(mask[sl]), ref_logp_BxT=jnp.asarray(ref[sl]),
                              normalizer=normalizer, **{**kw, "truncated_B": trunc})[0]

  for trunc in (None, truncated):
    full, full_g = jax.value_and_grad(loss_fn)(jnp.asarray(logp), slice(None), None, trunc)
    norm = losses.loss_normalizer(agg, jnp.asarray(mask), trunc)
    total, grads, step = 0.0, [], 8 // n_micro
    for i in range(0, 8, step):
      sl = slice(i, i + step)
      t = None if trunc is None else trunc[sl]
      l, g = jax.value_and_grad(loss_fn)(jnp.asarray(logp[sl]), sl, norm, t)
      total += float(l)
      grads.append(np.asarray(g))
    assert total == pytest.approx(float(full), abs=1e-12)
    np.testing.assert_allclose(np.concatenate(grads), full_g, atol=1e-12)
    # Without the full-batch normalizer the micro-batch mean is generally different.
    if agg == "token_mean":
      own = np.mean([float(loss_fn(jnp.asarray(logp[i:i + step]), slice(i, i + step), None,
                                   None if trunc is None else trunc[i:i + step]))
                     for i in range(0, 8, step)])
      assert own != pytest.approx(float(full), abs=1e-9)


@pytest.mark.parametrize("agg", AGGS)
def test_truncated_completions_are_masked(agg):
  logp, old, ref, adv, mask = _batch(seed=5)
  truncated = np.array([1, 0, 0, 1, 0, 0], bool)
  got, got_g = _jax_loss_and_grad(logp, old, ref, adv, mask, aggregation=agg,
                                  truncated_B=jnp.asarray(truncated))
  masked = mask * (~truncated)[:, None]
  want, want_g = _torch_loss(logp, old, ref, adv, masked, agg, 0.2, 0.28, 0.0)
  assert got == pytest.approx(want, abs=1e-9)
  np.testing.assert_allclose(got_g, want_g, atol=1e-9)
  assert np.all(got_g[truncated] == 0)


def test_jit_and_unknown_aggregation():
  logp, old, ref, adv, mask = _batch()
  f = jax.jit(losses.policy_loss, static_argnames=("aggregation", "eps_low", "eps_high",
                                                   "beta_kl", "max_completion_len"))
  loss, _ = f(logp, old, adv, mask, aggregation="seq_mean_token_mean")
  eager, _ = losses.policy_loss(jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv),
                                jnp.asarray(mask), aggregation="seq_mean_token_mean")
  assert float(loss) == pytest.approx(float(eager), abs=1e-12)
  with pytest.raises(ValueError, match="drgrpo_constant.*token_mean"):
    losses.policy_loss(logp, old, adv, mask, aggregation="nope")
