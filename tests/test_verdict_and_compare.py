"""Verdict schema, tolerance presets and the output comparison, in-process (no sandbox)."""

import json
import math

import numpy as np
import pytest
import torch

from kernelzero_jax.sandbox import SandboxConfig, Verdict
from kernelzero_jax.sandbox import problem


def test_verdict_json_round_trip_and_status_validation():
  v = Verdict(status="correct", speedup=1.5, reasons=["ok"])
  d = json.loads(v.to_json())
  assert d["correct"] is True and d["speedup"] == 1.5
  assert Verdict.from_dict(d).to_dict() == v.to_dict()
  assert Verdict(status="incorrect").correct is False
  with pytest.raises(ValueError, match="unknown verdict status"):
    Verdict(status="passed")


def test_tolerance_presets():
  kz = SandboxConfig(device="cpu")
  assert kz.tolerance_for("float32") == (1e-2, 1e-2) and kz.tolerance_name() == "kernelzero"
  kb = SandboxConfig(device="cpu", tolerance="kernelbench")
  assert kb.tolerance_for("float32") == (1e-4, 1e-4)
  assert kb.tolerance_for("bfloat16") == (1e-2, 1e-2)
  custom = SandboxConfig(device="cpu", atol=1e-3, rtol=1e-5)
  assert custom.tolerance_for("float16") == (1e-3, 1e-5) and custom.tolerance_name() == "custom"
  with pytest.raises(ValueError, match="unknown tolerance preset"):
    SandboxConfig(device="cpu", tolerance="nope")
  with pytest.raises(ValueError, match="unknown sandbox config fields"):
    SandboxConfig.from_dict({"devcie": "cpu"})
  for nice in (-1, 20):  # an increment os.nice can apply; lowering it would need privileges
    with pytest.raises(ValueError, match="build_nice must be in"):
      SandboxConfig(device="cpu", build_nice=nice)


def _tol(_):
  return (1e-2, 1e-2)


def test_compare_outputs_exact_errors_and_failures():
  r = torch.tensor([1.0, 2.0, -4.0])
  ok, reasons, max_abs, max_rel = problem.compare_outputs([r + torch.tensor([0.0, 0.02, 0.0])],
                                                          [r], _tol)
  assert ok and not reasons  # 0.02 <= 0.01 + 0.01 * 2
  assert max_abs == pytest.approx(0.02, abs=1e-6) and max_rel == pytest.approx(0.01, abs=1e-6)
  ok, reasons, _, _ = problem.compare_outputs([r + torch.tensor([0.03, 0.0, 0.0])], [r], _tol)
  assert not ok and "1/3 values outside" in reasons[0]
  nan = r.clone()
  nan[1] = float("nan")
  ok, reasons, max_abs, _ = problem.compare_outputs([nan], [r], _tol)
  assert not ok and "1 non-finite" in reasons[0] and math.isinf(max_abs)
  ok, reasons, _, _ = problem.compare_outputs([r.double()], [r], _tol)
  assert not ok and "dtype" in reasons[0]
  ok, reasons, _, _ = problem.compare_outputs([r[:2]], [r], _tol)
  assert not ok and "shape" in reasons[0]
  ok, reasons, _, _ = problem.compare_outputs([r, r], [r], _tol)
  assert not ok and "returned 2 outputs" in reasons[0]
  ok, reasons, _, _ = problem.compare_outputs([torch.tensor([1, 2])], [torch.tensor([1, 3])], _tol)
  assert not ok and "int64 values differ" in reasons[0]


def test_inputs_unchanged_detects_in_place_writes():
  x = torch.randn(4)
  pristine = [x.clone()]
  assert problem.inputs_unchanged([x], pristine) == []
  x[0] += 1
  assert problem.inputs_unchanged([x], pristine) == ["argument 0"]


def test_make_inputs_and_model_are_seeded():
  a = problem.make_inputs(lambda: [torch.rand(3), 5], 11, torch.device("cpu"))
  b = problem.make_inputs(lambda: [torch.rand(3), 5], 11, torch.device("cpu"))
  assert torch.equal(a[0], b[0]) and a[1] == 5
  m1 = problem.make_model(torch.nn.Linear, lambda: [4, 2], 3, torch.device("cpu"))
  m2 = problem.make_model(torch.nn.Linear, lambda: [4, 2], 3, torch.device("cpu"))
  assert torch.equal(m1.weight, m2.weight)


@pytest.mark.parametrize("chunk", [4, 1 << 25])
def test_the_float64_mean_is_the_whole_tensors_a_chunk_at_a_time(monkeypatch, chunk):
  """The reference checks' constant fill: r.double().mean() without a float64 copy of r."""
  monkeypatch.setattr(problem, "_CHUNK", chunk)
  r = torch.linspace(-3.0, 5.0, 1001, dtype=torch.float32).reshape(7, 11, 13)
  assert problem.mean_float64(r) == pytest.approx(r.double().mean().item(), rel=1e-15)
  assert problem.mean_float64(torch.full((3, 5), 2.5, dtype=torch.float16)) == 2.5
  assert problem.mean_float64(torch.zeros(0, 4)) == 0.0


def _numpy_close_stats(c: np.ndarray, r: np.ndarray, atol: float, rtol: float) -> dict:
  """numpy.isclose counted (its rule is torch.isclose's), and the errors' maxima over all values:
  infinite if any error is not finite."""
  with np.errstate(all="ignore"):
    diff = np.abs(c - r)
    rel = diff / np.maximum(np.abs(r), np.float32(1e-12))
  finite = np.isfinite(diff).all()
  return {"bad": int((~np.isclose(c, r, rtol=rtol, atol=atol, equal_nan=False)).sum()),
          "nonfinite": int((~np.isfinite(c)).sum()),
          "max_abs": float(diff.max()) if finite else math.inf,
          "max_rel": float(rel.max()) if finite else math.inf}


@pytest.mark.parametrize("chunk", [7, 64, 1 << 25])
@pytest.mark.parametrize("case", ["close", "noisy", "nan", "inf_in_reference", "inf_both"])
def test_close_stats_match_numpys_isclose_for_every_chunking(monkeypatch, chunk, case):
  monkeypatch.setattr(problem, "_CHUNK", chunk)
  gen = torch.Generator().manual_seed(3)
  r = torch.randn(5, 61, generator=gen)
  c = r + 0.004 * torch.randn(5, 61, generator=gen)
  if case == "noisy":
    c = r + 0.05 * torch.randn(5, 61, generator=gen)
  elif case == "nan":
    c[1, 7] = float("nan")
    c[4, 60] = float("-inf")
  elif case == "inf_in_reference":  # a finite value where the reference is infinite: not close
    r[2, 3] = float("inf")
    c[2, 3] = 1e30
  elif case == "inf_both":  # the same infinity on both sides: close, but the error is not finite
    r[0, 0] = c[0, 0] = float("-inf")
  got = problem._close_stats(c, r, 1e-2, 1e-2)  # pylint: disable=protected-access
  want = _numpy_close_stats(c.numpy(), r.numpy(), 1e-2, 1e-2)
  assert got["bad"] == want["bad"] and got["nonfinite"] == want["nonfinite"]
  assert got["max_abs"] == want["max_abs"] and got["max_rel"] == want["max_rel"]
  assert {"close": 0, "nan": 2, "inf_in_reference": 1, "inf_both": 0}.get(case, got["bad"]) \
      == got["bad"]
  assert case != "noisy" or got["bad"] > 0
