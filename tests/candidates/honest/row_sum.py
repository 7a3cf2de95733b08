# Honest: row-sum reduction with tl.sum, output allocated with torch.empty.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
  tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty(rows, device=x.device, dtype=x.dtype)
    row_sum_kernel[(rows,)](x, out, cols, BLOCK=triton.next_power_of_2(cols))
    return out
