# Fault: a Triton kernel stores far out of bounds; under the CPU interpreter this segfaults the worker.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def oob_kernel(out_ptr, BLOCK: tl.constexpr):
  offs = tl.arange(0, BLOCK).to(tl.int64) * 100_000_000 + 1_000_000_000
  tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32))


class ModelNew(nn.Module):
  def __init__(self, features, scale):
    super().__init__()
    self.scale = scale
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x):
    out = torch.empty_like(x)
    oob_kernel[(1,)](out, BLOCK=16)
    return out
