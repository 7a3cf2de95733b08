"""API sets for the Proposer: co-occurrence mined from real Torch code, and a weighted sampler.

Which torch APIs appear together in real modules decides which 2- and 3-API sets the Proposer is
asked to combine (conv2d + batch_norm + relu is a module people write; conv_transpose3d +
cross_entropy + cumprod rarely is). The counts come from Torch code that is available offline:
by default the `forward` methods of the model files shipped inside the installed transformers
package (`models/*/modeling_*.py`), one count per nn.Module class (catalog.class_apis). Never
from KernelBench, which is the test set.

`ApiSetSampler` draws the first API by its frequency and each next one by its co-occurrence
with those already drawn, both smoothed (so rare pairs stay possible) and multiplied by per-API
weights that the frontier can set to lean toward the Coder's weak spots.
"""

from __future__ import annotations

import ast
import dataclasses
import glob
import hashlib
import itertools
import json
import logging
import os
from typing import Iterable, Mapping, Sequence

import numpy as np

from kernelzero_jax import atomic_file
from kernelzero_jax.proposer import catalog


@dataclasses.dataclass
class Cooccurrence:
  """How many classes use each API, and each unordered pair of APIs (keys "a+b", a < b)."""
  num_classes: int
  api_counts: dict[str, int]
  pair_counts: dict[str, int]
  sources: list[str]  # what was read (for the record)

  def pair(self, a: str, b: str) -> int:
    return self.pair_counts.get(pair_key(a, b), 0)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: Mapping) -> "Cooccurrence":
    return cls(int(d["num_classes"]), dict(d["api_counts"]), dict(d["pair_counts"]),
               list(d.get("sources", [])))


def pair_key(a: str, b: str) -> str:
  return "+".join(sorted((a, b)))


def mine_cooccurrence(paths: Iterable[str]) -> Cooccurrence:
  """Counts catalog APIs per nn.Module class (its forward, with the modules it calls) over the
  Python files at `paths`. Files that do not parse are skipped (and logged)."""
  api_counts: dict[str, int] = {}
  pair_counts: dict[str, int] = {}
  num_classes = 0
  sources = []
  for path in paths:
    try:
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as e:
      logging.warning("co-occurrence: skipping %s (%s)", path, e)
      continue
    sources.append(path)
    for _, apis in catalog.class_apis(tree):
      if not apis:
        continue
      num_classes += 1
      for a in apis:
        api_counts[a] = api_counts.get(a, 0) + 1
      for a, b in itertools.combinations(sorted(apis), 2):
        key = pair_key(a, b)
        pair_counts[key] = pair_counts.get(key, 0) + 1
  return Cooccurrence(num_classes, dict(sorted(api_counts.items())),
                      dict(sorted(pair_counts.items())), sources)


def transformers_model_files() -> list[str]:
  """The modeling files of the installed transformers package, sorted."""
  import transformers  # pylint: disable=import-outside-toplevel
  root = os.path.dirname(transformers.__file__)
  files = sorted(glob.glob(os.path.join(root, "models", "*", "modeling_*.py")))
  if not files:
    raise FileNotFoundError(f"no models/*/modeling_*.py under {root}")
  return files


def _catalog_digest() -> str:
  text = json.dumps([dataclasses.asdict(a) for a in catalog.CATALOG], sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:12]


def transformers_cooccurrence(cache_dir: str | None = None) -> Cooccurrence:
  """Co-occurrence over the installed transformers' model files (about 10 s to read), cached in
  `cache_dir` per transformers version and catalog."""
  import transformers  # pylint: disable=import-outside-toplevel
  path = None
  if cache_dir:
    path = os.path.join(cache_dir, f"cooccurrence_transformers-{transformers.__version__}_"
                                   f"catalog-{_catalog_digest()}.json")
    if os.path.exists(path):
      try:
        with open(path, encoding="utf-8") as f:
          return Cooccurrence.from_dict(json.load(f))
      except (OSError, ValueError, KeyError) as e:
        logging.warning("co-occurrence cache %s unreadable (%s); mining again", path, e)
  files = transformers_model_files()
  mined = mine_cooccurrence(files)
  root = os.path.dirname(os.path.dirname(os.path.dirname(files[0])))
  mined.sources = [os.path.relpath(p, root) for p in mined.sources]
  if path:
    os.makedirs(cache_dir, exist_ok=True)
    atomic_file.write_json(path, mined.to_dict())
  return mined


class ApiSetSampler:
  """Draws sets of distinct catalog APIs, weighted by co-occurrence.

  P(first = a)            ~ (count(a) + smoothing) * weight(a)
  P(next = a | chosen S)  ~ (sum over s in S of pair(s, a) + smoothing) * weight(a)
  `apis` restricts the vocabulary (default: the whole catalog); a weight of 0 removes an API.
  """

  def __init__(self, cooccurrence: Cooccurrence, apis: Sequence[str] | None = None,
               smoothing: float = 1.0, weights: Mapping[str, float] | None = None):
    self.cooc = cooccurrence
    self.apis = list(apis) if apis is not None else [a.name for a in catalog.CATALOG]
    unknown = sorted(set(self.apis) - set(catalog.BY_NAME))
    if unknown:
      raise ValueError(f"not in the API catalog: {unknown}")
    if smoothing < 0:
      raise ValueError("smoothing must be >= 0")
    self.smoothing = float(smoothing)
    self.weights = {a: 1.0 for a in self.apis}
    self.set_weights(weights or {})

  def set_weights(self, weights: Mapping[str, float]) -> None:
    """Per-API multipliers (e.g. from the Coder's per-API pass rates); unnamed APIs keep theirs."""
    for a, w in weights.items():
      if a not in self.weights:
        raise ValueError(f"weight for an API outside the sampler's vocabulary: {a!r}")
      if not w >= 0:
        raise ValueError(f"weight for {a!r} must be >= 0, got {w}")
      self.weights[a] = float(w)

  def _draw(self, rng: np.random.Generator, scores: np.ndarray) -> int:
    total = scores.sum()
    if not total > 0:
      raise ValueError("no API left to draw: every candidate has weight or score 0")
    return int(rng.choice(len(scores), p=scores / total))

  def sample(self, rng: np.random.Generator, size: int) -> tuple[str, ...]:
    if not 1 <= size <= len(self.apis):
      raise ValueError(f"size must be in [1, {len(self.apis)}], got {size}")
    weight = np.array([self.weights[a] for a in self.apis])
    counts = np.array([self.cooc.api_counts.get(a, 0) for a in self.apis], dtype=np.float64)
    chosen = [self._draw(rng, (counts + self.smoothing) * weight)]
    while len(chosen) < size:
      score = np.array([sum(self.cooc.pair(self.apis[c], a) for c in chosen)
                        for a in self.apis], dtype=np.float64)
      score = (score + self.smoothing) * weight
      score[chosen] = 0.0
      chosen.append(self._draw(rng, score))
    return tuple(self.apis[i] for i in chosen)
