# Honest: two kernels launched in sequence (row means into a temporary, then subtract).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, mean_ptr, n_cols, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
  tl.store(mean_ptr + row, tl.sum(x, axis=0) / n_cols)


@triton.jit
def subtract_kernel(x_ptr, mean_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  mask = cols < n_cols
  x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
  m = tl.load(mean_ptr + row)
  tl.store(out_ptr + row * n_cols + cols, x - m, mask=mask)


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    x = x.contiguous()
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    means = torch.empty(rows, device=x.device, dtype=x.dtype)
    out = torch.empty_like(x)
    row_mean_kernel[(rows,)](x, means, cols, BLOCK=block)
    subtract_kernel[(rows,)](x, means, out, cols, BLOCK=block)
    return out
