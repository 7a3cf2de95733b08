"""The Coder's frontier: the Proposer's reward, and the pool of accepted modules.

A valid proposed module is attempted by the Coder k times; its pass rate p decides the
Proposer's reward through a registered schedule (PROPOSER_REWARDS, chosen by a config string):
  frontier  1 - 2|p - 0.5|   (the paper's: 1 at p = 0.5, 0 when always or never solved)
  hardness  1 - p            (harder is better, even unsolvable)
  band      1 if 0 < p < 1   (some but not all samples pass)
An invalid module gets `invalid_reward` (rho < 0) instead.

`ModulePool` keeps the accepted modules (deduplicated by their normalised source), their attempt
counts, and per-API pass-rate statistics. It hands the Coder modules near the frontier first and
gives the API-set sampler weights that lean toward the APIs the Coder fails on. It serialises to
plain JSON, so it is part of the checkpoint.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from kernelzero_jax.registry import Registry

ProposerReward = Callable[[float], float]
PROPOSER_REWARDS: Registry[ProposerReward] = Registry("proposer reward")


@PROPOSER_REWARDS.register("frontier")
def frontier_reward(p: float) -> float:
  return 1.0 - 2.0 * abs(p - 0.5)


@PROPOSER_REWARDS.register("hardness")
def hardness_reward(p: float) -> float:
  return 1.0 - p


@PROPOSER_REWARDS.register("band")
def band_reward(p: float) -> float:
  return 1.0 if 0.0 < p < 1.0 else 0.0


@dataclasses.dataclass(frozen=True)
class FrontierConfig:
  reward: str = "frontier"          # PROPOSER_REWARDS
  invalid_reward: float = -0.5      # rho, for modules that fail validation
  samples_per_module: int = 8       # k: Coder samples that estimate a module's pass rate
  pool_size: int = 512              # accepted modules kept (the farthest from the frontier go)
  api_weight_strength: float = 1.0  # how much API-set sampling leans toward weak APIs

  def __post_init__(self):
    PROPOSER_REWARDS.lookup(self.reward)
    if self.invalid_reward >= 0:
      raise ValueError("invalid_reward (rho) must be negative")
    if self.samples_per_module < 8:
      raise ValueError("samples_per_module (k) must be >= 8 to estimate a pass rate")
    if self.pool_size < 1 or self.api_weight_strength < 0:
      raise ValueError("pool_size must be >= 1 and api_weight_strength >= 0")


def proposer_reward(config: FrontierConfig, valid: bool, num_correct: int = 0,
                    num_samples: int = 0) -> float:
  """The Proposer's reward for one module: rho when invalid, else the schedule at p."""
  if not valid:
    return float(config.invalid_reward)
  if num_samples < 1 or not 0 <= num_correct <= num_samples:
    raise ValueError(f"need 0 <= num_correct <= num_samples, num_samples >= 1; got "
                     f"{num_correct}/{num_samples}")
  return float(PROPOSER_REWARDS.lookup(config.reward)(num_correct / num_samples))


class _StripDocstrings(ast.NodeTransformer):
  def _strip(self, node):
    self.generic_visit(node)
    body = node.body
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)):
      node.body = body[1:] or [ast.Pass()]
    return node

  visit_Module = visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _strip


def normalized_source_hash(source: str) -> str:
  """A hash that ignores comments, docstrings, blank lines and formatting (the syntax tree's
  dump): two proposals that differ only in those are the same module. Raises SyntaxError."""
  tree = _StripDocstrings().visit(ast.parse(source))
  return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()


@dataclasses.dataclass
class PoolEntry:
  key: str                  # normalized_source_hash
  source: str
  apis: tuple[str, ...]     # the API set it was proposed for
  attempts: int = 0         # Coder samples judged on it, over all rounds
  correct: int = 0
  added_step: int = 0

  @property
  def pass_rate(self) -> float:
    """Laplace-smoothed, so a module seen little sits near 0.5 rather than at an extreme."""
    return (self.correct + 1) / (self.attempts + 2)


class ModulePool:
  """Accepted modules, their pass-rate statistics, and frontier-first selection."""

  def __init__(self, config: FrontierConfig):
    self.config = config
    self.entries: dict[str, PoolEntry] = {}

  def __len__(self) -> int:
    return len(self.entries)

  def __contains__(self, source: str) -> bool:
    return normalized_source_hash(source) in self.entries

  def add(self, source: str, apis: Sequence[str], step: int = 0) -> PoolEntry | None:
    """Adds a validated module; returns its entry, or None when the same module is already in
    the pool (or the pool is full of modules nearer the frontier than a new one can be)."""
    key = normalized_source_hash(source)
    if key in self.entries:
      return None
    entry = PoolEntry(key, source, tuple(apis), added_step=step)
    self.entries[key] = entry
    self._evict()
    return self.entries.get(key)

  def record(self, key: str, num_correct: int, num_samples: int) -> PoolEntry:
    """Adds judged Coder samples of one module to its statistics."""
    if not 0 <= num_correct <= num_samples:
      raise ValueError(f"need 0 <= num_correct <= num_samples, got {num_correct}/{num_samples}")
    entry = self.entries[key]
    entry.attempts += num_samples
    entry.correct += num_correct
    return entry

  def remove(self, key: str) -> PoolEntry:
    """Takes a module out of the pool (one that no judge can grade: its reference fails)."""
    return self.entries.pop(key)

  def _frontier_score(self, entry: PoolEntry) -> float:
    return frontier_reward(entry.pass_rate)

  def _evict(self) -> None:
    while len(self.entries) > self.config.pool_size:
      # The farthest from the frontier goes; among equals, the oldest.
      worst = min(self.entries.values(), key=lambda e: (self._frontier_score(e), e.added_step))
      del self.entries[worst.key]

  def select(self, rng: np.random.Generator, n: int, floor: float = 0.05) -> list[PoolEntry]:
    """`n` distinct modules (fewer if the pool is smaller), drawn with probability proportional
    to their frontier score plus `floor` (so modules at p = 0 or 1 still come up sometimes)."""
    entries = sorted(self.entries.values(), key=lambda e: e.key)
    if not entries or n <= 0:
      return []
    scores = np.array([self._frontier_score(e) + floor for e in entries])
    picks = rng.choice(len(entries), size=min(n, len(entries)), replace=False,
                       p=scores / scores.sum())
    return [entries[i] for i in picks]

  def frontier_size(self) -> int:
    """Modules the Coder has solved sometimes but not always (0 < observed pass rate < 1)."""
    return sum(1 for e in self.entries.values() if 0 < e.correct < e.attempts)

  def api_stats(self) -> dict[str, dict[str, float]]:
    """Per API: attempts, correct samples and pass rate over the modules proposed for it."""
    stats: dict[str, dict[str, float]] = {}
    for e in self.entries.values():
      for a in e.apis:
        s = stats.setdefault(a, {"attempts": 0, "correct": 0})
        s["attempts"] += e.attempts
        s["correct"] += e.correct
    for s in stats.values():
      s["pass_rate"] = s["correct"] / s["attempts"] if s["attempts"] else float("nan")
    return dict(sorted(stats.items()))

  def api_weights(self, apis: Iterable[str]) -> dict[str, float]:
    """Sampler weights: 1 + strength * (1 - pass rate) for APIs with attempts, 1 otherwise, so
    the APIs the Coder fails on are proposed more."""
    stats = self.api_stats()
    out = {}
    for a in apis:
      s = stats.get(a)
      fail = 1.0 - s["pass_rate"] if s and s["attempts"] else 0.0
      out[a] = 1.0 + self.config.api_weight_strength * fail
    return out

  def to_dict(self) -> dict:
    return {"entries": [dataclasses.asdict(e) for e in self.entries.values()]}

  @classmethod
  def from_dict(cls, config: FrontierConfig, d: Mapping) -> "ModulePool":
    pool = cls(config)
    for raw in d.get("entries", []):
      entry = PoolEntry(**{**raw, "apis": tuple(raw["apis"])})
      if entry.key != normalized_source_hash(entry.source):
        raise ValueError(f"pool entry {entry.key[:12]} does not match its source")
      pool.entries[entry.key] = entry
    return pool
