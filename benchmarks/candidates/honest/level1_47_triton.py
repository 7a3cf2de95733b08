# Honest Triton candidate for KernelBench level1/47_Sum_reduction_over_a_dimension
# (torch.sum(x, dim, keepdim=True)). x is viewed as (outer, R, inner); program (i-block, o) sums
# [BLOCK_R, BLOCK_I] tiles over R in fp32 and reduces the tile rows at the end. Offsets are int64.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_dim_kernel(x_ptr, y_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # flat 1-D grid (no 65535 limit on any axis): program -> (outer index o, column block)
    pid = tl.program_id(0).to(tl.int64)
    n_blk = tl.cdiv(inner, BLOCK_I)
    o = pid // n_blk
    pid_i = pid - o * n_blk
    offs_i = (pid_i * BLOCK_I + tl.arange(0, BLOCK_I)).to(tl.int64)
    mask_i = offs_i < inner
    base = o * R * inner
    acc = tl.zeros((BLOCK_R, BLOCK_I), tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rr = (r0 + tl.arange(0, BLOCK_R)).to(tl.int64)
        mask = (rr[:, None] < R) & mask_i[None, :]
        v = tl.load(x_ptr + base + rr[:, None] * inner + offs_i[None, :], mask=mask, other=0.0)
        acc += v.to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(y_ptr + o * inner + offs_i, total.to(y_ptr.dtype.element_ty), mask=mask_i)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim if self.dim >= 0 else self.dim + x.dim()
        shape = list(x.shape)
        R = shape[dim]
        outer = 1
        for s in shape[:dim]:
            outer *= s
        inner = 1
        for s in shape[dim + 1:]:
            inner *= s
        out_shape = shape[:dim] + [1] + shape[dim + 1:]
        y = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        if outer * inner == 0:
            return y
        if R == 0:
            return torch.zeros(out_shape, dtype=x.dtype, device=x.device)
        BLOCK_I = min(128, triton.next_power_of_2(inner))
        BLOCK_R = max(1, min(triton.next_power_of_2(R), 4096 // BLOCK_I))
        grid = (triton.cdiv(inner, BLOCK_I) * outer,)
        _sum_dim_kernel[grid](x, y, R, inner, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I, num_warps=4)
        return y
