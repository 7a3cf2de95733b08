# Honest: returns a tuple of two outputs (2 * x and row sums), both from one Triton kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def double_and_sum_kernel(x_ptr, dbl_ptr, sum_ptr, n_cols, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  mask = cols < n_cols
  x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
  tl.store(dbl_ptr + row * n_cols + cols, x * 2.0, mask=mask)
  tl.store(sum_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    x = x.contiguous()
    rows, cols = x.shape
    dbl = torch.empty_like(x)
    sums = x.new_empty(rows)
    double_and_sum_kernel[(rows,)](x, dbl, sums, cols, BLOCK=triton.next_power_of_2(cols))
    return dbl, sums
