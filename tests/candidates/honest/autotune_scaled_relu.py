# Honest: @triton.autotune over two configs with a meta-parameter grid lambda (scaled_relu reference).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4),
                          triton.Config({"BLOCK": 256}, num_warps=4)],
                 key=["n"])
@triton.jit
def scaled_relu_kernel(x_ptr, bias_ptr, out_ptr, n, features, scale, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  mask = offs < n
  x = tl.load(x_ptr + offs, mask=mask, other=0.0)
  b = tl.load(bias_ptr + offs % features, mask=mask, other=0.0)
  tl.store(out_ptr + offs, tl.maximum(x, 0.0) * scale + b, mask=mask)


class ModelNew(nn.Module):
  def __init__(self, features, scale):
    super().__init__()
    self.scale = scale
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    scaled_relu_kernel[grid](x, self.bias, out, n, self.bias.numel(), self.scale)
    return out
