"""The Proposer's API catalog, usage detection in code, co-occurrence mining and the sampler."""

from __future__ import annotations

import ast
import json
import os

import numpy as np
import pytest

from kernelzero_jax.proposer import api_sets
from kernelzero_jax.proposer import catalog

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _module(init: str, forward: str) -> str:
  return (HEADER + "class Model(nn.Module):\n  def __init__(self):\n    super().__init__()\n"
          + "".join(f"    {line}\n" for line in init.splitlines()) + "    pass\n"
          "  def forward(self, x, y):\n"
          + "".join(f"    {line}\n" for line in forward.splitlines()))


# ---- the catalog -------------------------------------------------------------------------------

def test_catalog_names_are_unique_and_every_category_is_covered():
  assert len(catalog.BY_NAME) == len(catalog.CATALOG)
  assert {a.category for a in catalog.CATALOG} == set(catalog.CATEGORIES)
  for api in catalog.CATALOG:
    assert api.call and api.name, api


def _spellings():
  for api in catalog.CATALOG:
    for f in api.functions:
      yield api.name, "function", f
    for m in api.modules:
      yield api.name, "module", m
    for m in api.methods:
      yield api.name, "method", m
    for o in api.operators:
      yield api.name, "operator", o


@pytest.mark.parametrize("name,kind,spelling", list(_spellings()))
def test_every_spelling_is_found_in_a_forward(name, kind, spelling):
  if kind == "function":
    src = _module("", f"return {spelling}(x)")
  elif kind == "module":
    src = _module(f"self.op = {spelling}(4)", "return self.op(x)")
  elif kind == "method":
    src = _module("", f"return x.{spelling}()")
  else:
    src = _module("", f"return x {spelling} y")
  found = catalog.forward_apis(src)
  assert name in found, (spelling, found)


@pytest.mark.parametrize("imports,call", [
    ("from torch.nn import functional as F", "F.gelu(x)"),
    ("import torch.nn.functional as Fn", "Fn.gelu(x)"),
    ("from torch.nn.functional import gelu", "gelu(x)"),
    ("import torch", "torch.nn.functional.gelu(x)"),
])
def test_import_aliases_are_followed(imports, call):
  src = (f"import torch\nimport torch.nn as nn\n{imports}\nclass Model(nn.Module):\n"
         f"  def forward(self, x):\n    return {call}\n")
  assert catalog.forward_apis(src) == {"gelu"}


def test_forward_counts_modules_it_calls_not_modules_it_only_builds():
  src = _module("self.conv = nn.Conv2d(3, 8, 3)\nself.norm = nn.GroupNorm(2, 8)\n"
                "self.unused = nn.Linear(3, 3)",
                "x = self.norm(self.conv(x))\nreturn torch.sum(F.gelu(x), dim=1)")
  assert catalog.forward_apis(src) == {"conv2d", "group_norm", "gelu", "sum"}
  assert "linear" in catalog.apis_used(src)  # built somewhere in the code


def test_a_submodule_named_like_a_tensor_method_is_not_that_method():
  # self.norm is a LayerNorm here, not Tensor.norm; self.max an unknown module.
  src = _module("self.norm = nn.LayerNorm(8)\nself.max = Something()", "return self.max(self.norm(x))")
  assert catalog.forward_apis(src) == {"layer_norm"}


def test_names_in_strings_and_comments_do_not_count():
  src = _module("", "# torch.relu(x)\nname = 'F.gelu'\nreturn x")
  assert catalog.forward_apis(src) == set()


def test_forward_apis_needs_the_class_and_its_forward():
  with pytest.raises(ValueError, match="no class"):
    catalog.forward_apis(HEADER + "class Other(nn.Module):\n  def forward(self, x):\n    return x\n")
  with pytest.raises(ValueError, match="no forward"):
    catalog.forward_apis(HEADER + "class Model(nn.Module):\n  pass\n")


# ---- co-occurrence -----------------------------------------------------------------------------

_FILE_A = HEADER + """
class Block(nn.Module):
  def __init__(self):
    super().__init__()
    self.fc = nn.Linear(4, 4)
    self.act = nn.GELU()
  def forward(self, x):
    return self.act(self.fc(x)) + x

class Head(nn.Module):
  def forward(self, x):
    return torch.softmax(x @ x.transpose(0, 1), dim=-1)

class NoForward(nn.Module):
  def helper(self, x):
    return torch.relu(x)
"""
_FILE_B = HEADER + """
class Conv(nn.Module):
  def __init__(self):
    super().__init__()
    self.conv = nn.Conv2d(3, 3, 3)
  def forward(self, x):
    return F.relu(self.conv(x)) + 1
"""


def test_mine_cooccurrence_counts_exactly(tmp_path):
  (tmp_path / "a.py").write_text(_FILE_A)
  (tmp_path / "b.py").write_text(_FILE_B)
  (tmp_path / "broken.py").write_text("def (:\n")
  mined = api_sets.mine_cooccurrence(sorted(str(p) for p in tmp_path.glob("*.py")))
  assert mined.num_classes == 3  # NoForward has no forward
  assert mined.api_counts == {"add": 2, "conv2d": 1, "gelu": 1, "linear": 1, "matmul": 1,
                              "relu": 1, "softmax": 1, "transpose": 1}
  assert mined.pair("add", "linear") == 1 and mined.pair("linear", "add") == 1
  assert mined.pair("add", "relu") == 1 and mined.pair("matmul", "softmax") == 1
  assert mined.pair("conv2d", "gelu") == 0
  assert len(mined.pair_counts) == 3 + 3 + 3  # 3 pairs per class of 3 APIs
  assert [os.path.basename(s) for s in mined.sources] == ["a.py", "b.py"]  # broken skipped
  assert api_sets.Cooccurrence.from_dict(json.loads(json.dumps(mined.to_dict()))) == mined


def test_real_transformers_code_reads_as_expected():
  # Llama's modeling file: its MLP multiplies an activation by a projection; its attention
  # computes with matmul and softmax, and the file builds linear layers.
  files = [f for f in api_sets.transformers_model_files()
           if f.endswith(os.path.join("llama", "modeling_llama.py"))]
  assert files
  with open(files[0]) as f:
    classes = dict(catalog.class_apis(ast.parse(f.read())))
  assert {"linear", "mul"} <= classes["LlamaMLP"]
  assert "rms_norm" not in classes["LlamaMLP"]
  mined = api_sets.mine_cooccurrence(files)
  assert mined.api_counts["linear"] >= 2 and mined.pair("linear", "mul") >= 1


def test_transformers_cooccurrence_is_cached(tmp_path, monkeypatch):
  files = api_sets.transformers_model_files()[:3]
  monkeypatch.setattr(api_sets, "transformers_model_files", lambda: files)
  first = api_sets.transformers_cooccurrence(str(tmp_path))
  assert first.num_classes > 0 and len(first.sources) == 3
  assert len(list(tmp_path.glob("cooccurrence_*.json"))) == 1

  def fail(_):
    raise AssertionError("mined again despite the cache")

  monkeypatch.setattr(api_sets, "mine_cooccurrence", fail)
  assert api_sets.transformers_cooccurrence(str(tmp_path)) == first


# ---- the sampler -------------------------------------------------------------------------------

def _cooc() -> api_sets.Cooccurrence:
  return api_sets.Cooccurrence(
      num_classes=10, api_counts={"conv2d": 6, "relu": 3, "sum": 1},
      pair_counts={"conv2d+relu": 3, "relu+sum": 1}, sources=[])


def test_sampler_is_deterministic_distinct_and_sized():
  s = api_sets.ApiSetSampler(_cooc(), apis=["conv2d", "relu", "sum", "gelu"])
  a = [s.sample(np.random.default_rng(7), 3) for _ in range(3)]
  assert a[0] == a[1] == a[2]
  for k in (1, 2, 3, 4):
    drawn = s.sample(np.random.default_rng(k), k)
    assert len(drawn) == k == len(set(drawn))
  with pytest.raises(ValueError):
    s.sample(np.random.default_rng(0), 5)


def test_sampler_first_draw_follows_frequency_plus_smoothing():
  s = api_sets.ApiSetSampler(_cooc(), apis=["conv2d", "relu", "sum", "gelu"], smoothing=1.0)
  rng = np.random.default_rng(0)
  n = 20000
  firsts = [s.sample(rng, 1)[0] for _ in range(n)]
  expected = {"conv2d": 7 / 14, "relu": 4 / 14, "sum": 2 / 14, "gelu": 1 / 14}
  for api, p in expected.items():
    assert abs(firsts.count(api) / n - p) < 0.015, (api, firsts.count(api) / n, p)


def test_sampler_second_draw_follows_cooccurrence_exactly_without_smoothing():
  s = api_sets.ApiSetSampler(_cooc(), apis=["conv2d", "relu", "sum", "gelu"], smoothing=0.0)
  rng = np.random.default_rng(1)
  pairs = {tuple(sorted(s.sample(rng, 2))) for _ in range(300)}
  assert pairs == {("conv2d", "relu"), ("relu", "sum")}  # only pairs seen together
  with pytest.raises(ValueError, match="no API left"):  # gelu has no partner at all
    api_sets.ApiSetSampler(_cooc(), apis=["gelu", "conv2d"], smoothing=0.0,
                           weights={"conv2d": 0.0}).sample(rng, 1)


def test_sampler_weights_steer_and_zero_removes():
  s = api_sets.ApiSetSampler(_cooc(), apis=["conv2d", "relu", "sum"],
                             weights={"conv2d": 0.0})
  rng = np.random.default_rng(2)
  assert all("conv2d" not in s.sample(rng, 2) for _ in range(200))
  s.set_weights({"sum": 100.0})
  assert sum(s.sample(rng, 1)[0] == "sum" for _ in range(200)) > 180
  with pytest.raises(ValueError, match="outside"):
    s.set_weights({"softmax": 1.0})
  with pytest.raises(ValueError, match=">= 0"):
    s.set_weights({"sum": -1.0})
  with pytest.raises(ValueError, match="not in the API catalog"):
    api_sets.ApiSetSampler(_cooc(), apis=["conv2d", "frobnicate"])
