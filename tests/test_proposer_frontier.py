"""The Proposer's reward schedules and the pool of accepted modules (kernelzero_jax/proposer)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernelzero_jax.proposer import frontier
from kernelzero_jax.proposer.frontier import FrontierConfig, ModulePool

SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Doubles."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2  # scale


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


# ---- rewards -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,formula", [
    ("frontier", lambda p: 1 - 2 * abs(p - 0.5)),
    ("hardness", lambda p: 1 - p),
    ("band", lambda p: float(0 < p < 1)),
])
def test_reward_schedules_match_their_formulas_exactly(name, formula):
  config = FrontierConfig(reward=name, samples_per_module=8)
  for correct in range(9):
    got = frontier.proposer_reward(config, True, correct, 8)
    assert got == pytest.approx(formula(correct / 8), abs=0.0), (name, correct)


def test_frontier_reward_values():
  config = FrontierConfig()
  rewards = [frontier.proposer_reward(config, True, c, 8) for c in range(9)]
  assert rewards == [0.0, 0.25, 0.5, 0.75, 1.0, 0.75, 0.5, 0.25, 0.0]


def test_invalid_modules_get_rho_whatever_the_schedule():
  for name in frontier.PROPOSER_REWARDS:
    config = FrontierConfig(reward=name, invalid_reward=-0.3)
    assert frontier.proposer_reward(config, False) == -0.3


def test_reward_config_errors():
  with pytest.raises(ValueError, match="unknown proposer reward"):
    FrontierConfig(reward="nope")
  with pytest.raises(ValueError, match="negative"):
    FrontierConfig(invalid_reward=0.0)
  with pytest.raises(ValueError, match="k"):
    FrontierConfig(samples_per_module=4)
  with pytest.raises(ValueError, match="num_correct"):
    frontier.proposer_reward(FrontierConfig(), True, 9, 8)


def test_a_registered_schedule_is_usable_by_name():
  frontier.PROPOSER_REWARDS.add("test_squared_frontier", lambda p: (1 - 2 * abs(p - 0.5)) ** 2)
  try:
    config = FrontierConfig(reward="test_squared_frontier")
    assert frontier.proposer_reward(config, True, 2, 8) == 0.25
  finally:
    del frontier.PROPOSER_REWARDS["test_squared_frontier"]


# ---- deduplication -----------------------------------------------------------------------------

def test_normalized_hash_ignores_comments_docstrings_and_layout():
  variant = (SOURCE.replace('    """Doubles."""\n', "")
             .replace("  # scale", "")
             .replace("return torch.relu(x) * 2", "return torch.relu( x )*2")
             + "\n\n# trailing comment\n")
  assert frontier.normalized_source_hash(variant) == frontier.normalized_source_hash(SOURCE)
  different = SOURCE.replace("* 2", "* 3")
  assert frontier.normalized_source_hash(different) != frontier.normalized_source_hash(SOURCE)
  with pytest.raises(SyntaxError):
    frontier.normalized_source_hash("def (:")


# ---- the pool ----------------------------------------------------------------------------------

def _variant(i: int) -> str:
  return SOURCE.replace("* 2", f"* {i + 2}")


def test_pool_deduplicates_and_records_attempts():
  pool = ModulePool(FrontierConfig())
  entry = pool.add(SOURCE, ("relu", "mul"), step=1)
  assert entry is not None and len(pool) == 1
  assert pool.add(SOURCE.replace("  # scale", ""), ("relu", "mul")) is None
  assert SOURCE in pool
  pool.record(entry.key, 3, 8)
  pool.record(entry.key, 5, 8)
  assert (entry.attempts, entry.correct) == (16, 8)
  assert entry.pass_rate == pytest.approx(9 / 18)
  with pytest.raises(ValueError):
    pool.record(entry.key, 9, 8)


def test_api_stats_and_weights_exact():
  config = FrontierConfig(api_weight_strength=2.0)
  pool = ModulePool(config)
  a = pool.add(_variant(0), ("relu", "mul"))
  b = pool.add(_variant(1), ("relu", "conv2d"))
  pool.add(_variant(2), ("softmax",))  # never attempted
  pool.record(a.key, 6, 8)
  pool.record(b.key, 2, 8)
  stats = pool.api_stats()
  assert stats["relu"] == {"attempts": 16, "correct": 8, "pass_rate": 0.5}
  assert stats["mul"]["pass_rate"] == 0.75 and stats["conv2d"]["pass_rate"] == 0.25
  assert np.isnan(stats["softmax"]["pass_rate"])
  weights = pool.api_weights(["relu", "mul", "conv2d", "softmax", "gelu"])
  assert weights == {"relu": 2.0, "mul": 1.5, "conv2d": 2.5, "softmax": 1.0, "gelu": 1.0}


def test_selection_prefers_the_frontier():
  pool = ModulePool(FrontierConfig())
  solved = pool.add(_variant(0), ("relu",))
  middle = pool.add(_variant(1), ("mul",))
  unsolved = pool.add(_variant(2), ("sum",))
  pool.record(solved.key, 64, 64)
  pool.record(middle.key, 32, 64)
  pool.record(unsolved.key, 0, 64)
  rng = np.random.default_rng(0)
  firsts = [pool.select(rng, 1)[0].key for _ in range(2000)]
  share = firsts.count(middle.key) / len(firsts)
  # Scores + floor 0.05: middle 1.05, the extremes 0.05 + 1 - 2 * |1/66 - 0.5| = 0.0803 each.
  expected = 1.05 / (1.05 + 2 * (0.05 + 1 - 2 * abs(1 / 66 - 0.5)))
  assert abs(share - expected) < 0.03, (share, expected)
  both = pool.select(np.random.default_rng(1), 5)
  assert len(both) == 3 and len({e.key for e in both}) == 3


def test_eviction_drops_the_farthest_from_the_frontier():
  pool = ModulePool(FrontierConfig(pool_size=2))
  solved = pool.add(_variant(0), ("relu",), step=0)
  pool.record(solved.key, 32, 32)
  middle = pool.add(_variant(1), ("mul",), step=1)
  pool.record(middle.key, 4, 8)
  newcomer = pool.add(_variant(2), ("sum",), step=2)  # p ~ 0.5 by smoothing
  assert newcomer is not None
  assert set(pool.entries) == {middle.key, newcomer.key}


def test_pool_round_trips_through_json_and_refuses_a_tampered_entry():
  config = FrontierConfig()
  pool = ModulePool(config)
  e = pool.add(SOURCE, ("relu", "mul"), step=3)
  pool.record(e.key, 2, 8)
  restored = ModulePool.from_dict(config, json.loads(json.dumps(pool.to_dict())))
  assert restored.entries == pool.entries
  bad = pool.to_dict()
  bad["entries"][0]["source"] = _variant(5)
  with pytest.raises(ValueError, match="does not match"):
    ModulePool.from_dict(config, bad)
