"""Runtime validation of proposed modules (sandbox/module_check.py), with real worker processes
on the CPU: one module per rejection reason, and modules that make good problems."""

from __future__ import annotations

import pytest

from kernelzero_jax.sandbox import ModuleLimits
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import validate_module
from kernelzero_jax.sandbox.launchers import ZygoteLauncher
from kernelzero_jax.sandbox.module_check import REJECTIONS

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
CONFIG = SandboxConfig(device="cpu", build_timeout_s=30.0, correctness_timeout_s=10.0,
                       memory_limit_gb=4.0)


def module(forward: str, init: str = "", inputs: str = "torch.randn(4, 16)",
           init_inputs: str = "") -> str:
  return (HEADER + "class Model(nn.Module):\n  def __init__(self):\n    super().__init__()\n"
          + (f"    {init}\n" if init else "")
          + f"  def forward(self, x):\n    return {forward}\n"
          + f"def get_inputs():\n  return [{inputs}]\n"
          + f"def get_init_inputs():\n  {init_inputs}\n  return []\n")


GOOD = module("torch.sum(F.gelu(self.fc(x)), dim=1)", "self.fc = nn.Linear(16, 8)")

# name -> (source, limits or None, expected rejection, reason fragment)
CASES = {
    "not_finite": (module("torch.log(x - 100)"), None, "not_finite", "NaN"),
    "dropout_in_training": (module("F.dropout(x, p=0.5, training=True)"), None,
                            "nondeterministic", "same inputs"),
    "randn_in_forward": (module("x + torch.randn_like(x)"), None, "nondeterministic",
                         "same inputs"),
    "zero_output": (module("x * 0"), None, "constant_output", "zeros"),
    "tiny_output": (module("x * 1e-6"), None, "constant_output", "zeros"),
    "constant_output": (module("torch.ones_like(x) * 3 + 0 * x"), None, "constant_output",
                        "mean"),
    "input_independent": (module("torch.ones(4) + self.w",
                                 "self.w = nn.Parameter(torch.randn(4))"), None,
                          "input_independent", "same outputs"),
    "integer_output": (module("x.argmax(dim=1)"), None, "no_tensor_output", "floating"),
    "forward_raises": (module("x.view(3, 7)"), None, "does_not_run", "view"),
    "import_raises": (HEADER + "raise RuntimeError('broken module')\n", None, "does_not_run",
                      "broken module"),
    "no_get_inputs": (GOOD.replace("def get_inputs", "def get_xs"), None, "does_not_run",
                      "get_inputs"),
    "huge_allocation": (module("x + torch.empty(2 ** 40, device=x.device).sum()"), None,
                        "too_much_memory", "memory"),
    "hang_in_get_init_inputs": (module("x", init_inputs="while True: pass"), None, "timeout",
                                "no answer within 3 s"),
    "too_large": (GOOD, ModuleLimits(max_elements=32), "too_large", "64 elements"),
    "too_slow": (GOOD, ModuleLimits(max_forward_ms=1e-6), "too_slow", "ms"),
}


@pytest.fixture(scope="module")
def launcher():
  warm = ZygoteLauncher("cpu")
  yield warm
  warm.close()


def test_a_good_module_is_valid_and_described(launcher):
  v = validate_module(GOOD, CONFIG, launcher=launcher)
  assert v.valid and v.rejection is None, v
  assert v.output_shapes == [[4]] and v.forward_ms is not None and v.forward_ms > 0


# Its first forward pays a one-time set-up (as a first cuBLAS call or thread-pool start does).
FIRST_FORWARD_SLOW = (HEADER + "import time\nCALLS = []\n" + module(
    "self.fc(x) if CALLS else (CALLS.append(time.sleep(0.6)) or self.fc(x))",
    "self.fc = nn.Linear(16, 8)").replace(HEADER, ""))
EVERY_FORWARD_SLOW = FIRST_FORWARD_SLOW.replace("if CALLS else", "if time.sleep(0.6) else")


def test_only_the_fastest_forward_counts_against_the_time_limit(launcher):
  limits = ModuleLimits(max_forward_ms=400.0)
  v = validate_module(FIRST_FORWARD_SLOW, CONFIG, limits, launcher=launcher)
  assert v.valid, v
  assert v.forward_ms < 400.0
  v = validate_module(EVERY_FORWARD_SLOW, CONFIG, limits, launcher=launcher)
  assert v.rejection == "too_slow" and v.forward_ms >= 600.0, v


def test_rejection_reasons_are_the_documented_ones():
  assert {c[2] for c in CASES.values()} == set(REJECTIONS)


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_rejects_the_module_that_breaks_it(launcher, name):
  source, limits, rejection, fragment = CASES[name]
  config = (SandboxConfig(device="cpu", build_timeout_s=3.0, correctness_timeout_s=3.0,
                          memory_limit_gb=4.0)
            if rejection == "timeout" else CONFIG)
  v = validate_module(source, config, limits, launcher=launcher)
  assert not v.valid and v.rejection == rejection, v
  assert fragment in " ".join(v.reasons), v.reasons


def test_the_plain_launcher_agrees():
  v = validate_module(GOOD, CONFIG)
  assert v.valid
  v = validate_module(CASES["dropout_in_training"][0], CONFIG)
  assert v.rejection == "nondeterministic"
