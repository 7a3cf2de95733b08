# Cheat: the @triton.jit body computes with torch on module-level state; under the CPU interpreter it would run as plain Python.
import torch
import torch.nn as nn
import triton
import triton.language as tl

STATE = {}


@triton.jit
def fake_kernel(n):
  STATE["out"].copy_(torch.relu(STATE["x"]) * STATE["scale"] + STATE["bias"])


class ModelNew(nn.Module):
  def __init__(self, features, scale):
    super().__init__()
    self.scale = scale
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x):
    out = torch.empty_like(x)
    STATE.update(x=x, out=out, scale=self.scale, bias=self.bias)
    fake_kernel[(1,)](x.numel())
    return out
