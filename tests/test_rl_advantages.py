"""Advantage estimators vs plain numpy re-derivations, plus tie / dynamic-filter helpers."""

import numpy as np
import pytest

from kernelzero_jax.rl import advantages


def _np_reference(name, r, eps):
  b, g = r.shape
  out = np.zeros_like(r)
  for i in range(b):
    mean = sum(r[i]) / g
    if name == "grpo":
      std = np.sqrt(sum((x - mean) ** 2 for x in r[i]) / g)  # population std
      out[i] = (r[i] - mean) / (std + eps)
    elif name == "drgrpo":
      out[i] = r[i] - mean
    elif name == "rloo":
      for j in range(g):
        others = [r[i][k] for k in range(g) if k != j]
        out[i, j] = r[i][j] - (sum(others) / len(others) if others else r[i][j])
  return out


@pytest.mark.parametrize("name", ["grpo", "drgrpo", "rloo"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 2), (4, 5), (2, 16)])
def test_estimators_match_numpy(name, shape):
  rng = np.random.default_rng([len(name), *shape])
  r = rng.normal(size=shape).astype(np.float32)
  got = np.asarray(advantages.compute_advantages(r, name, eps=1e-6))
  np.testing.assert_allclose(got, _np_reference(name, r.astype(np.float64), 1e-6),
                             rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["grpo", "drgrpo", "rloo"])
def test_singleton_and_tied_groups_give_zero(name):
  np.testing.assert_array_equal(advantages.compute_advantages(np.array([[3.0], [-1.0]]), name), 0)
  np.testing.assert_array_equal(advantages.compute_advantages(np.full((2, 4), 1.5), name), 0)


def test_grpo_uses_population_std():
  adv = np.asarray(advantages.compute_advantages(np.array([[0.0, 1.0]]), "grpo", eps=0.0))
  np.testing.assert_allclose(adv, [[-1.0, 1.0]])  # ddof=0: std 0.5; ddof=1 would give +-0.707


def test_rloo_hand_values():
  adv = np.asarray(advantages.compute_advantages(np.array([[1.0, 0.0, 0.0, 0.0]]), "rloo"))
  np.testing.assert_allclose(adv, [[1.0, -1 / 3, -1 / 3, -1 / 3]], rtol=1e-6)


def test_unknown_estimator_lists_known():
  with pytest.raises(ValueError, match="grpo.*rloo"):
    advantages.compute_advantages(np.zeros((1, 2)), "nope")


def test_tie_fraction_and_dynamic_filter_use_tolerance():
  r = np.array([[1.0, 1.0 + 5e-7, 1.0],     # within atol=1e-6: tie
                [0.0, 2e-6, 0.0],           # outside atol: signal
                [1.0, 0.0, 1.0],            # signal
                [0.3, 0.3, 0.3]])           # exact tie
  assert float(advantages.tie_fraction(r, atol=1e-6)) == pytest.approx(0.5)
  np.testing.assert_array_equal(advantages.dynamic_filter_mask(r, atol=1e-6),
                                [False, True, True, False])
  assert float(advantages.tie_fraction(r, atol=1e-5)) == pytest.approx(0.75)
  np.testing.assert_array_equal(advantages.dynamic_filter_mask(np.array([[2.0]]), 1e-6), [False])
