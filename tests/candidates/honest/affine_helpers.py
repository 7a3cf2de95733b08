# Honest: module-level constants, a Python helper computing the grid, triton.cdiv and math.prod.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 128
SCALE = 3.0
SHIFT = -1.0


def grid_for(n, block):
  return (triton.cdiv(n, block),)


@triton.jit
def affine_kernel(x_ptr, out_ptr, n, scale, shift, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  mask = offs < n
  tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + shift, mask=mask)


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    x = x.contiguous()
    n = math.prod(x.shape)
    out = torch.empty_like(x)
    affine_kernel[grid_for(n, BLOCK_SIZE)](x, out, n, SCALE, SHIFT, BLOCK=BLOCK_SIZE)
    return out
