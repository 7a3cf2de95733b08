"""The Proposer's prompt and the static reading of its proposals."""

from __future__ import annotations

import pytest

from kernelzero_jax.coder.prompts import render_prompt
from kernelzero_jax.proposer import prompts

MODULE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)

    def forward(self, x):
        return torch.sum(F.gelu(self.conv(x)), dim=1)


def get_inputs():
    return [torch.randn(8, 3, 32, 32)]


def get_init_inputs():
    return [3, 16]
'''


GELU_ONLY_IN_A_COMMENT = MODULE.replace("F.gelu(self.conv(x)), dim=1)",
                                        "self.conv(x), dim=1)  # F.gelu")


def test_messages_name_every_api_with_its_call_and_constraints():
  messages = prompts.proposer_messages(["conv2d", "gelu", "sum"])
  assert [m["role"] for m in messages] == ["system", "user"]
  user = messages[1]["content"]
  for line in ("- conv2d (conv): e.g. `nn.Conv2d(", "- gelu (activation): e.g. `F.gelu(x)`",
               "- sum (reduction): e.g. `torch.sum(x, dim=1)`; dim within the input's rank"):
    assert line in user, line
  assert "class Model(nn.Module):" in user  # the format example
  assert "16,777,216 elements" in user
  assert render_prompt(messages).endswith("Assistant:\n")


@pytest.mark.parametrize("apis", [[], ["conv2d", "frobnicate"], ["gelu", "gelu"]])
def test_messages_refuse_bad_api_sets(apis):
  with pytest.raises(ValueError):
    prompts.proposer_messages(apis)


def test_a_good_proposal_is_read_with_the_apis_it_uses():
  completion = f"Here it is.\n```python\n{MODULE}```\n<|im_end|>"
  p = prompts.read_proposal(completion, ["conv2d", "gelu", "sum"])
  assert p.ok and p.source == MODULE
  assert p.apis_used == {"conv2d", "gelu", "sum"}


@pytest.mark.parametrize("completion,apis,rejection,fragment", [
    ("no code at all", ["gelu"], prompts.NO_MODULE, "class Model"),
    (f"```python\n{MODULE}", ["gelu"], prompts.NO_MODULE, "never closed"),
    (f"```python\n{MODULE.replace('def get_inputs', 'def get_xs')}```", ["gelu"],
     prompts.BAD_FORMAT, "get_inputs"),
    (f"```python\n{MODULE.replace('def forward', 'def backward')}```", ["gelu"],
     prompts.BAD_FORMAT, "forward"),
    (f"```python\n{MODULE.replace('import torch.nn as nn', 'import torch.nn as nn; import os')}```",
     ["gelu"], prompts.FORBIDDEN, "imports `os`"),
    (f"```python\n{MODULE.replace('super().__init__()', 'super().__init__(); torch.manual_seed(0)')}```",
     ["gelu"], prompts.FORBIDDEN, "manual_seed"),
    (f"```python\n{MODULE}```", ["conv2d", "softmax"], prompts.MISSING_APIS,
     "does not use softmax"),
    # gelu named only in a comment and a string is not a use
    (f"```python\n{GELU_ONLY_IN_A_COMMENT}```",
     ["gelu"], prompts.MISSING_APIS, "does not use gelu"),
])
def test_bad_proposals_are_rejected_with_a_reason(completion, apis, rejection, fragment):
  p = prompts.read_proposal(completion, apis)
  assert not p.ok and p.rejection == rejection, p
  assert fragment in p.reason, p.reason


def test_honest_reference_modules_pass_the_capability_checks():
  # Modules that compute with torch, as references do, are not rejected by check_module.
  from kernelzero_jax.coder.prompts import example_sources
  from kernelzero_jax.sandbox import static_checks
  from kernelzero_jax.teacher import generator
  sources = [MODULE, example_sources("triton")[0]]
  sources += [src for _, src, _ in generator.generate_modules(8, seed=0)]
  for src in sources:
    assert static_checks.check_module(src) == [], src
