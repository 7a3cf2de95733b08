# Honest Triton candidate for KernelBench level1/19_ReLU (y = relu(x), any shape, fp32).
# Flat elementwise kernel; the program offset is computed in int64 because the full-size input has
# 1.6e9 elements (> 2^31 bytes / offsets near the int32 limit).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where(x < 0.0, 0.0, x)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return y
        BLOCK = 4096
        grid = (triton.cdiv(n, BLOCK),)
        _relu_kernel[grid](x, y, n, BLOCK=BLOCK, num_warps=8)
        return y
