# Honest Triton candidate for KernelBench level1/36_RMSNorm_ (x / sqrt(mean(x^2, dim=1) + eps)).
# x is viewed as (outer, C, inner). Program (s-block, o) owns BLOCK_S columns of one outer index:
# pass 1 accumulates sum of squares over C in [BLOCK_C, BLOCK_S] tiles, pass 2 re-reads the same
# (L2-resident) tiles and writes x * rsqrt(mean + eps). Offsets are int64.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, y_ptr, C, inner, eps, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    # flat 1-D grid (no 65535 limit on any axis): program -> (outer index o, column block)
    pid = tl.program_id(0).to(tl.int64)
    n_blk = tl.cdiv(inner, BLOCK_S)
    o = pid // n_blk
    pid_s = pid - o * n_blk
    offs_s = (pid_s * BLOCK_S + tl.arange(0, BLOCK_S)).to(tl.int64)
    mask_s = offs_s < inner
    base = o * C * inner
    acc = tl.zeros((BLOCK_C, BLOCK_S), tl.float32)
    for c0 in range(0, C, BLOCK_C):
        cc = (c0 + tl.arange(0, BLOCK_C)).to(tl.int64)
        ptrs = base + cc[:, None] * inner + offs_s[None, :]
        mask = (cc[:, None] < C) & mask_s[None, :]
        v = tl.load(x_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
        acc += v * v
    ss = tl.sum(acc, axis=0)
    inv = 1.0 / tl.sqrt(ss / C + eps)
    for c0 in range(0, C, BLOCK_C):
        cc = (c0 + tl.arange(0, BLOCK_C)).to(tl.int64)
        ptrs = base + cc[:, None] * inner + offs_s[None, :]
        mask = (cc[:, None] < C) & mask_s[None, :]
        v = tl.load(x_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + ptrs, (v * inv[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        outer, C = x.shape[0], x.shape[1]
        inner = x.numel() // max(1, outer * C)
        if x.numel() == 0:
            return y
        BLOCK_S = min(256, triton.next_power_of_2(inner))
        BLOCK_C = min(16, triton.next_power_of_2(C))
        grid = (triton.cdiv(inner, BLOCK_S) * outer,)
        _rmsnorm_kernel[grid](x, y, C, inner, float(self.eps), BLOCK_C=BLOCK_C, BLOCK_S=BLOCK_S,
                              num_warps=4)
        return y
