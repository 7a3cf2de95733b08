# Honest: one Triton kernel fusing several elementwise ops: (x * y + 2) * sigmoid(x) - 0.5 * y.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fused_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  mask = offs < n
  x = tl.load(x_ptr + offs, mask=mask, other=0.0)
  y = tl.load(y_ptr + offs, mask=mask, other=0.0)
  sig = 1.0 / (1.0 + tl.exp(-x))
  tl.store(out_ptr + offs, (x * y + 2.0) * sig - 0.5 * y, mask=mask)


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x, y):
    out = torch.empty_like(x)
    n = x.numel()
    fused_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    return out
