# Candidate for the degenerate near_zero reference: a kernel that writes x * 0 + 1e-6.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def near_zero_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  mask = offs < n
  tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 0.0 + 1e-6, mask=mask)


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    out = torch.empty_like(x)
    near_zero_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out
