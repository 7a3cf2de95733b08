# Fault: raises an exception while ModelNew is built.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_bias_kernel(x_ptr, bias_ptr, out_ptr, n_elements, features, scale,
                            BLOCK: tl.constexpr):
  offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
  mask = offsets < n_elements
  x = tl.load(x_ptr + offsets, mask=mask)
  b = tl.load(bias_ptr + offsets % features, mask=mask)
  tl.store(out_ptr + offsets, tl.maximum(x, 0.0) * scale + b, mask=mask)


class ModelNew(nn.Module):
  def __init__(self, features: int, scale: float):
    super().__init__()
    self.scale = scale
    raise RuntimeError("boom in init")
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    block = 1024
    scaled_relu_bias_kernel[(triton.cdiv(n, block),)](x, self.bias, out, n, self.bias.numel(),
                                                      self.scale, BLOCK=block)
    return out
