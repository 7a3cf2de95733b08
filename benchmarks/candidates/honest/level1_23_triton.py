# Honest Triton candidate for KernelBench level1/23_Softmax (softmax over dim=1 of a 2-D tensor).
# One program per row (rows are 393216 long at full size, far more than one block): pass 1 keeps
# a per-lane online (max, sum of exp) over BLOCK-wide chunks, then merges the lanes; pass 2 writes
# exp(x - max) / sum. The row offset is int64.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        idx = start + offs
        v = tl.load(x_row + idx, mask=idx < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        empty = m_new == float("-inf")
        alpha = tl.where(empty, 0.0, tl.exp(m - m_new))
        p = tl.where(empty, 0.0, tl.exp(v - m_new))
        s = s * alpha + p
        m = m_new
    row_max = tl.max(m, axis=0)
    lane_scale = tl.where(m == float("-inf"), 0.0, tl.exp(m - row_max))
    inv = 1.0 / tl.sum(s * lane_scale, axis=0)
    for start in range(0, n_cols, BLOCK):
        idx = start + offs
        mask = idx < n_cols
        v = tl.load(x_row + idx, mask=mask, other=0.0).to(tl.float32)
        out = tl.exp(v - row_max) * inv
        tl.store(y_row + idx, out.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        if rows == 0 or cols == 0:
            return y
        BLOCK = min(4096, triton.next_power_of_2(cols))
        _softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=8)
        return y
