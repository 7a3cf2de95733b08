# Honest: .contiguous() of a transposed view, .view, torch.empty/torch.zeros, zero-init output then accumulate one slice per launch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def accumulate_kernel(src_ptr, acc_ptr, n, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  mask = offs < n
  a = tl.load(acc_ptr + offs, mask=mask, other=0.0)
  s = tl.load(src_ptr + offs, mask=mask, other=0.0)
  tl.store(acc_ptr + offs, a + s, mask=mask)


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    b, r, c = x.shape
    xt = x.transpose(1, 2).contiguous()        # (b, c, r), a real copy
    flat = xt.view(b, c * r)
    scratch = torch.empty(c * r, device=x.device, dtype=x.dtype)  # unused scratch allocation
    acc = torch.zeros(c * r, device=x.device, dtype=x.dtype)
    n = c * r
    for i in range(b):
      accumulate_kernel[(triton.cdiv(n, 512),)](flat[i], acc, n, BLOCK=512)
    del scratch
    return acc.view(c, r)
